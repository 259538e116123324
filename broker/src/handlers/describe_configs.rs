//! DescribeConfigs (key 32): every topic config with its effective value and source, and the
//! broker's configs under Kafka's names, as Kafka's broker reports them.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::config::topic::{self as topic_config, ConfigSource, ConfigType};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = 4;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

/// Kafka's name for a broker config key; Strom-only settings live under `strom.`.
pub fn broker_config_name(key: &str) -> String {
    match key {
        "listen" => "listeners".into(),
        "advertised_listener" => "advertised.listeners".into(),
        "data_dir" => "log.dirs".into(),
        "file_delete_delay_ms" => "log.segment.delete.delay.ms".into(),
        "shards"
        | "metrics_listen"
        | "io_backend"
        | "max_in_flight_per_connection"
        | "cluster_id" => {
            format!("strom.{}", key.replace('_', "."))
        }
        other => other.replace('_', "."),
    }
}

/// The synonym Kafka 4.4 lists after a topic config's own override: the broker config its
/// default comes from (read off a real broker by compat-tests/probe-diff.py).
enum KafkaSynonym {
    Broker(&'static str),
    /// The broker config has the topic config's own name.
    Itself,
    /// Kafka's broker synonym exists but is unset by default (e.g. `log.retention.ms`, derived
    /// from `log.retention.hours`), so Kafka lists none.
    Unset,
}

fn kafka_synonym(topic_config: &str) -> KafkaSynonym {
    use KafkaSynonym::*;
    match topic_config {
        "cleanup.policy" => Broker("log.cleanup.policy"),
        "max.message.bytes" => Broker("message.max.bytes"),
        "segment.bytes" => Broker("log.segment.bytes"),
        "segment.index.bytes" => Broker("log.index.size.max.bytes"),
        "index.interval.bytes" => Broker("log.index.interval.bytes"),
        "delete.retention.ms" => Broker("log.cleaner.delete.retention.ms"),
        "file.delete.delay.ms" => Broker("log.segment.delete.delay.ms"),
        "flush.messages" => Broker("log.flush.interval.messages"),
        "min.cleanable.dirty.ratio" => Broker("log.cleaner.min.cleanable.ratio"),
        "min.compaction.lag.ms" => Broker("log.cleaner.min.compaction.lag.ms"),
        "max.compaction.lag.ms" => Broker("log.cleaner.max.compaction.lag.ms"),
        "message.timestamp.type" => Broker("log.message.timestamp.type"),
        "message.timestamp.after.max.ms" => Broker("log.message.timestamp.after.max.ms"),
        "message.timestamp.before.max.ms" => Broker("log.message.timestamp.before.max.ms"),
        "preallocate" => Broker("log.preallocate"),
        "retention.bytes" => Broker("log.retention.bytes"),
        "local.retention.bytes" => Broker("log.local.retention.bytes"),
        "local.retention.ms" => Broker("log.local.retention.ms"),
        "remote.copy.lag.bytes" => Broker("log.remote.copy.lag.bytes"),
        "remote.copy.lag.ms" => Broker("log.remote.copy.lag.ms"),
        "retention.ms"
        | "segment.ms"
        | "segment.jitter.ms"
        | "flush.ms"
        | "errors.deadletterqueue.group.enable"
        | "follower.replication.throttled.replicas"
        | "leader.replication.throttled.replicas"
        | "remote.storage.enable"
        | "remote.log.copy.disable"
        | "remote.log.delete.on.disable" => Unset,
        _ => Itself,
    }
}

/// Broker configs Kafka types INT (the rest of our integers are LONG there too).
const KAFKA_INT_BROKER_CONFIGS: &[&str] = &[
    "default.replication.factor",
    "node.id",
    "num.partitions",
    "message.max.bytes",
    "socket.request.max.bytes",
    "log.segment.bytes",
    "log.index.interval.bytes",
    "log.index.size.max.bytes",
    "log.flush.offset.checkpoint.interval.ms",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.session.timeout.ms",
    "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "group.max.size",
    "max.incremental.fetch.session.cache.slots",
    "offset.metadata.max.bytes",
    "offsets.retention.minutes",
    "offsets.topic.num.partitions",
    "transaction.state.log.num.partitions",
    "producer.id.expiration.ms",
];

fn wanted(keys: &Option<Vec<StrBytes>>, name: &str) -> bool {
    keys.as_ref()
        .is_none_or(|k| k.is_empty() || k.iter().any(|k| k.as_str() == name))
}

fn topic_result(
    ctx: &RequestContext,
    name: &str,
    keys: &Option<Vec<StrBytes>>,
    synonyms: bool,
    docs: bool,
) -> DescribeConfigsResult {
    let base = DescribeConfigsResult::default()
        .with_resource_type(RESOURCE_TOPIC)
        .with_resource_name(StrBytes::from_string(name.into()));
    let catalog = ctx.ctx().catalog.snapshot();
    let Some(meta) = catalog.get(name) else {
        return base
            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
            .with_error_message(Some(StrBytes::from_string(format!(
                "Topic {name} does not exist"
            ))));
    };
    let cat = &ctx.ctx().catalog;
    let version = ctx.version();
    let configs = topic_config::TOPIC_CONFIGS
        .iter()
        .filter(|d| wanted(keys, d.name))
        .map(|d| {
            let e = topic_config::effective(
                d,
                &meta.configs,
                cat.broker_config(),
                cat.broker_origins(),
            );
            let mut syn = Vec::new();
            if synonyms {
                if e.source == ConfigSource::DynamicTopic {
                    syn.push(synonym(d.name, &e.value, ConfigSource::DynamicTopic));
                }
                let b = topic_config::effective(
                    d,
                    &Default::default(),
                    cat.broker_config(),
                    cat.broker_origins(),
                );
                match kafka_synonym(d.name) {
                    KafkaSynonym::Broker(name) => {
                        syn.push(synonym(name, &b.value, b.source));
                    }
                    KafkaSynonym::Itself => syn.push(synonym(d.name, &b.value, b.source)),
                    KafkaSynonym::Unset => {}
                }
            }
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_static_str(e.name))
                .with_value(Some(StrBytes::from_string(e.value)))
                .with_read_only(false)
                .with_config_source(e.source as i8)
                .with_config_type(if version >= 3 { e.kind as i8 } else { 0 })
                .with_synonyms(syn)
                .with_documentation(
                    (docs && version >= 3).then(|| StrBytes::from_static_str(e.doc)),
                )
        })
        .collect();
    base.with_configs(configs)
}

fn synonym(name: &str, value: &str, source: ConfigSource) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(StrBytes::from_string(name.into()))
        .with_value(Some(StrBytes::from_string(value.into())))
        .with_source(source as i8)
}

fn broker_result(
    ctx: &RequestContext,
    name: &str,
    keys: &Option<Vec<StrBytes>>,
) -> DescribeConfigsResult {
    let base = DescribeConfigsResult::default()
        .with_resource_type(RESOURCE_BROKER)
        .with_resource_name(StrBytes::from_string(name.into()));
    let cat = &ctx.ctx().catalog;
    let config = cat.broker_config();
    if !name.is_empty() && name != config.node_id.to_string() {
        return base
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(StrBytes::from_string(format!(
                "Unexpected broker id, expected {}, but received {name}",
                config.node_id
            ))));
    }
    let table = toml::Table::try_from(config).unwrap_or_default();
    let defaults =
        toml::Table::try_from(crate::config::BrokerConfig::default()).unwrap_or_default();
    let mut configs = Vec::new();
    for (key, value) in &table {
        let kafka_name = broker_config_name(key);
        if !wanted(keys, &kafka_name) {
            continue;
        }
        let (text, kind) = match value {
            toml::Value::String(s) if key == "listen" => {
                (format!("PLAINTEXT://{s}"), ConfigType::List)
            }
            toml::Value::String(s) if key == "advertised_listener" => {
                (format!("PLAINTEXT://{s}"), ConfigType::List)
            }
            toml::Value::String(s) if key == "log_cleanup_policy" || key == "data_dir" => {
                (s.clone(), ConfigType::List)
            }
            toml::Value::String(s) => (s.clone(), ConfigType::String),
            toml::Value::Integer(i) if KAFKA_INT_BROKER_CONFIGS.contains(&kafka_name.as_str()) => {
                (i.to_string(), ConfigType::Int)
            }
            toml::Value::Integer(i) => (i.to_string(), ConfigType::Long),
            toml::Value::Boolean(b) => (b.to_string(), ConfigType::Boolean),
            other => (other.to_string(), ConfigType::String),
        };
        let source = if cat.broker_origins().contains_key(key) || defaults.get(key) != Some(value) {
            ConfigSource::StaticBroker
        } else {
            ConfigSource::Default
        };
        configs.push(
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_string(kafka_name))
                .with_value(Some(StrBytes::from_string(text)))
                .with_read_only(true)
                .with_config_source(source as i8)
                .with_config_type(if ctx.version() >= 3 { kind as i8 } else { 0 }),
        );
    }
    base.with_configs(configs)
}

pub async fn handle(ctx: &RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let results = req
        .resources
        .iter()
        .map(|r| match r.resource_type {
            RESOURCE_TOPIC => topic_result(
                ctx,
                r.resource_name.as_str(),
                &r.configuration_keys,
                req.include_synonyms,
                req.include_documentation,
            ),
            RESOURCE_BROKER => broker_result(ctx, r.resource_name.as_str(), &r.configuration_keys),
            other => DescribeConfigsResult::default()
                .with_resource_type(other)
                .with_resource_name(r.resource_name.clone())
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(StrBytes::from_string(format!(
                    "Unsupported resource type {other}"
                )))),
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use super::super::produce::tests::create;
    use super::super::testing::*;
    use super::*;
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::ApiKey;

    fn resource(kind: i8, name: &str) -> DescribeConfigsResource {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.into()))
    }

    #[test]
    fn given_topic_and_broker_when_describing_then_full_lists_with_sources() {
        let h = Harness::new();
        create(&h, "t", 1);
        let req = DescribeConfigsRequest::default()
            .with_resources(vec![
                resource(2, "t"),
                resource(4, "0"),
                resource(2, "nope"),
            ])
            .with_include_synonyms(true);
        let resp: DescribeConfigsResponse = h.call(ApiKey::DescribeConfigs, 4, req);
        let t = &resp.results[0];
        assert_eq!(t.error_code, 0);
        assert_eq!(t.configs.len(), topic_config::TOPIC_CONFIGS.len());
        let seg = t
            .configs
            .iter()
            .find(|c| c.name.as_str() == "segment.bytes")
            .unwrap();
        assert_eq!(seg.value.as_deref(), Some("1073741824"));
        assert_eq!(seg.config_source, ConfigSource::Default as i8);
        assert_eq!(seg.config_type, ConfigType::Int as i8);
        let b = &resp.results[1];
        assert_eq!(b.error_code, 0);
        let mmb = b
            .configs
            .iter()
            .find(|c| c.name.as_str() == "message.max.bytes")
            .unwrap();
        assert_eq!(mmb.value.as_deref(), Some("1048588"));
        assert!(b
            .configs
            .iter()
            .any(|c| c.name.as_str() == "log.retention.check.interval.ms"));
        assert_eq!(resp.results[2].error_code, 3);
        let syn = |name: &str| -> Vec<(String, i8)> {
            t.configs
                .iter()
                .find(|c| c.name.as_str() == name)
                .unwrap()
                .synonyms
                .iter()
                .map(|s| (s.name.to_string(), s.source))
                .collect()
        };
        assert_eq!(
            syn("cleanup.policy"),
            vec![("log.cleanup.policy".to_string(), 5)]
        );
        assert_eq!(syn("retention.ms"), vec![]);
        assert_eq!(
            syn("compression.type"),
            vec![("compression.type".to_string(), 5)]
        );
    }

    #[test]
    fn given_keys_filter_when_describing_then_only_those() {
        let h = Harness::new();
        create(&h, "t", 1);
        let req = DescribeConfigsRequest::default().with_resources(vec![resource(2, "t")
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("retention.ms")]))]);
        let resp: DescribeConfigsResponse = h.call(ApiKey::DescribeConfigs, 4, req);
        assert_eq!(resp.results[0].configs.len(), 1);
        assert_eq!(
            resp.results[0].configs[0].value.as_deref(),
            Some("604800000")
        );
    }
}
