//! DescribeConfigs (key 32): every topic config with its effective value and source, and the
//! broker's configs under Kafka's names, as Kafka's broker reports them.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::config_changes::{RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC};
use super::RequestContext;
use crate::config::dynamic::{self, BrokerView};
use crate::config::topic::{self as topic_config, ConfigSource, ConfigType};
use crate::config::{kafka_name, BrokerConfig};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = 4;

/// Broker configs Kafka types INT (the rest of our integers are LONG there too).
const KAFKA_INT_BROKER_CONFIGS: &[&str] = &[
    "default.replication.factor",
    "node.id",
    "num.partitions",
    "message.max.bytes",
    "socket.request.max.bytes",
    "connection.failed.authentication.delay.ms",
    "sasl.server.max.receive.size",
    "log.segment.bytes",
    "log.index.interval.bytes",
    "log.index.size.max.bytes",
    "log.flush.offset.checkpoint.interval.ms",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.regex.refresh.interval.ms",
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
    "transaction.state.log.min.isr",
    "transaction.max.timeout.ms",
    "producer.id.expiration.ms",
    "transactional.id.expiration.ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
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
    let view = ctx.ctx().catalog.broker();
    let version = ctx.version();
    let configs = topic_config::TOPIC_CONFIGS
        .iter()
        .chain(topic_config::extension_configs().filter(|d| meta.configs.contains_key(d.name)))
        .filter(|d| wanted(keys, d.name))
        .map(|d| {
            let e = crate::config::effective::effective(d, &meta.configs, &view);
            let mut syn = Vec::new();
            if synonyms {
                if e.source == ConfigSource::DynamicTopic {
                    syn.push(synonym(d.name, &e.value, ConfigSource::DynamicTopic));
                }
                // Kafka lists every broker level that sets the default, highest first.
                if let Some(b) = topic_config::broker_synonym(d.name) {
                    for (value, source) in view.levels(b.name) {
                        syn.push(synonym(b.name, &value, source));
                    }
                    if b.listed_by_default {
                        syn.push(synonym(b.name, d.default, ConfigSource::Default));
                    }
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

/// Broker configs Kafka types PASSWORD: DescribeConfigs answers them with a null value.
const SENSITIVE_BROKER_CONFIGS: &[&str] = &["ssl.keystore.key"];

/// One broker config as DescribeConfigs shows it.
struct BrokerEntry {
    name: String,
    value: String,
    kind: ConfigType,
    default: String,
    dynamic: bool,
    doc: Option<&'static str>,
}

/// Every broker config Strom reports: its own fields under Kafka's names, then the broker
/// defaults of topic configs that Strom has no field for but honours through the topic
/// config (Kafka's default unless set dynamically).
fn broker_entries(view: &BrokerView) -> Vec<BrokerEntry> {
    let table = toml::Table::try_from(&view.config).unwrap_or_default();
    let defaults = toml::Table::try_from(BrokerConfig::default()).unwrap_or_default();
    // `listeners` and `advertised.listeners` as resolved (the `listen` shorthand included).
    let resolved = |c: &BrokerConfig| c.listener_configs().unwrap_or_default();
    let (now, default) = (resolved(&view.config), resolved(&BrokerConfig::default()));
    let text = |key: &str, v: &toml::Value, l: &[crate::config::listeners::ListenerConfig]| match v
    {
        _ if key == "listeners" => crate::config::listeners::render(l),
        _ if key == "advertised_listeners" => crate::config::listeners::render_advertised(l),
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out = Vec::new();
    for (key, value) in &table {
        let name = kafka_name(key);
        let topic_default = dynamic::dynamic_topic_default(&name);
        let kind = match value {
            toml::Value::String(_)
                if matches!(
                    key.as_str(),
                    "listeners"
                        | "advertised_listeners"
                        | "listener_security_protocol_map"
                        | "ssl_enabled_protocols"
                        | "ssl_principal_mapping_rules"
                        | "sasl_enabled_mechanisms"
                        | "log_cleanup_policy"
                        | "data_dir"
                ) =>
            {
                ConfigType::List
            }
            toml::Value::String(_) => ConfigType::String,
            toml::Value::Integer(_) if KAFKA_INT_BROKER_CONFIGS.contains(&name.as_str()) => {
                ConfigType::Int
            }
            toml::Value::Integer(_) => ConfigType::Long,
            toml::Value::Boolean(_) => ConfigType::Boolean,
            toml::Value::Float(_) => ConfigType::Double,
            _ => ConfigType::String,
        };
        out.push(BrokerEntry {
            value: text(key, value, &now),
            default: defaults
                .get(key)
                .map(|v| text(key, v, &default))
                .unwrap_or_default(),
            kind,
            // Kafka's read-only flag: whether an alter takes effect.
            dynamic: topic_default.is_some()
                || dynamic::APPLIED_BROKER_DYNAMIC.contains(&name.as_str()),
            doc: topic_default.map(|d| d.doc),
            name,
        });
    }
    for d in topic_config::TOPIC_CONFIGS {
        let Some(b) = topic_config::broker_synonym(d.name) else {
            continue;
        };
        if crate::config::field_for_kafka_name(b.name).is_some()
            || (!b.listed_by_default && view.dynamic(b.name).is_none())
        {
            continue;
        }
        out.push(BrokerEntry {
            name: b.name.into(),
            value: view
                .dynamic(b.name)
                .map(|(v, _)| v.to_string())
                .unwrap_or_else(|| d.default.to_string()),
            kind: d.kind,
            default: d.default.into(),
            dynamic: true,
            doc: Some(d.doc),
        });
    }
    out
}

fn broker_result(
    ctx: &RequestContext,
    name: &str,
    keys: &Option<Vec<StrBytes>>,
    synonyms: bool,
    docs: bool,
) -> DescribeConfigsResult {
    let base = DescribeConfigsResult::default()
        .with_resource_type(RESOURCE_BROKER)
        .with_resource_name(StrBytes::from_string(name.into()));
    let view = ctx.ctx().catalog.broker();
    let node_id = view.static_config.node_id;
    if !name.is_empty() && name != node_id.to_string() {
        return base
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(StrBytes::from_string(format!(
                "Unexpected broker id, expected {node_id}, but received {name}"
            ))));
    }
    // The cluster-default resource ("") shows only the dynamic defaults, as Kafka's does.
    let per_broker = !name.is_empty();
    let version = ctx.version();
    let entries = broker_entries(&view);
    let kafka_only = if per_broker {
        kafka_only_entries(&entries, keys, synonyms, version)
    } else {
        Vec::new()
    };
    let configs = entries
        .into_iter()
        .filter(|e| wanted(keys, &e.name))
        .filter(|e| per_broker || view.cluster.contains_key(&e.name))
        .map(|e| {
            let mut levels = view.levels(&e.name);
            if !per_broker {
                levels.retain(|(_, s)| *s != ConfigSource::DynamicBroker);
            }
            let source = levels.first().map_or(ConfigSource::Default, |l| l.1);
            let value = levels
                .first()
                .map_or_else(|| e.value.clone(), |l| l.0.clone());
            // Kafka's PASSWORD configs: never shown, flagged sensitive.
            let sensitive = SENSITIVE_BROKER_CONFIGS.contains(&e.name.as_str());
            let hide = |mut s: DescribeConfigsSynonym| {
                if sensitive {
                    s.value = None;
                }
                s
            };
            let syn = if synonyms {
                levels
                    .iter()
                    .map(|(v, s)| hide(synonym(&e.name, v, *s)))
                    .chain(std::iter::once(hide(synonym(
                        &e.name,
                        &e.default,
                        ConfigSource::Default,
                    ))))
                    .collect()
            } else {
                Vec::new()
            };
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_string(e.name))
                .with_value((!sensitive).then(|| StrBytes::from_string(value)))
                .with_is_sensitive(sensitive)
                .with_read_only(!e.dynamic)
                .with_config_source(source as i8)
                .with_config_type(if version >= 3 { e.kind as i8 } else { 0 })
                .with_synonyms(syn)
                .with_documentation(
                    e.doc
                        .filter(|_| docs && version >= 3)
                        .map(StrBytes::from_static_str),
                )
        })
        .chain(kafka_only)
        .collect();
    base.with_configs(configs)
}

/// The configs Kafka's broker lists that Strom has no setting for (its features are absent
/// or fixed here: SSL, SASL, quotas, KRaft, replication, remote storage, …): Kafka's default,
/// type and sensitivity, read-only, so that no alter can store a value that does nothing.
fn kafka_only_entries(
    listed: &[BrokerEntry],
    keys: &Option<Vec<StrBytes>>,
    synonyms: bool,
    version: i16,
) -> Vec<DescribeConfigsResourceResult> {
    let have: std::collections::HashSet<&str> = listed.iter().map(|e| e.name.as_str()).collect();
    crate::config::kafka_broker_configs::KAFKA_BROKER_CONFIGS
        .iter()
        .filter(|(name, ..)| !have.contains(name) && wanted(keys, name))
        .map(|&(name, default, kind, sensitive)| {
            let syn = match default {
                Some(v) if synonyms => vec![synonym(name, v, ConfigSource::Default)],
                _ => Vec::new(),
            };
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_static_str(name))
                .with_value(default.map(StrBytes::from_static_str))
                .with_read_only(true)
                .with_is_sensitive(sensitive)
                .with_config_source(ConfigSource::Default as i8)
                .with_config_type(if version >= 3 { kind } else { 0 })
                .with_synonyms(syn)
                .with_documentation(None)
        })
        .collect()
}

/// Authorization (Kafka's `handleDescribeConfigsRequest`): DESCRIBE_CONFIGS on the topic
/// (TOPIC_AUTHORIZATION_FAILED), the group (GROUP_AUTHORIZATION_FAILED) or, for a broker and
/// its loggers, the cluster (CLUSTER_AUTHORIZATION_FAILED).
pub async fn handle(ctx: &RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let access = ctx.access();
    let results = req
        .resources
        .iter()
        .map(|r| match r.resource_type {
            t if super::config_changes::config_refusal(
                &access,
                crate::security::acl::Operation::DescribeConfigs,
                t,
                r.resource_name.as_str(),
            )
            .is_some() =>
            {
                let (code, msg) = match t {
                    RESOURCE_TOPIC => (
                        ResponseError::TopicAuthorizationFailed,
                        super::errors::TOPIC_AUTHORIZATION_FAILED,
                    ),
                    super::group_configs::RESOURCE_GROUP => (
                        ResponseError::GroupAuthorizationFailed,
                        super::errors::GROUP_AUTHORIZATION_FAILED,
                    ),
                    _ => (
                        ResponseError::ClusterAuthorizationFailed,
                        super::errors::CLUSTER_AUTHORIZATION_FAILED,
                    ),
                };
                DescribeConfigsResult::default()
                    .with_resource_type(t)
                    .with_resource_name(r.resource_name.clone())
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_static_str(msg)))
            }
            RESOURCE_TOPIC => topic_result(
                ctx,
                r.resource_name.as_str(),
                &r.configuration_keys,
                req.include_synonyms,
                req.include_documentation,
            ),
            RESOURCE_BROKER => broker_result(
                ctx,
                r.resource_name.as_str(),
                &r.configuration_keys,
                req.include_synonyms,
                req.include_documentation,
            ),
            super::group_configs::RESOURCE_GROUP => super::group_configs::describe(
                ctx,
                r.resource_name.as_str(),
                &r.configuration_keys,
                req.include_synonyms,
            ),
            RESOURCE_BROKER_LOGGER => {
                super::broker_logger::describe(ctx, r.resource_name.as_str(), &r.configuration_keys)
            }
            super::config_changes::RESOURCE_CLIENT_METRICS => {
                super::client_metrics_configs::describe(
                    ctx,
                    r.resource_name.as_str(),
                    &r.configuration_keys,
                    req.include_synonyms,
                )
            }
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
    use super::super::testing::*;
    use super::*;
    use crate::handlers::testing::create;
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

    #[test]
    fn given_dynamic_broker_values_when_describing_then_levels_as_synonyms_and_read_only_flags() {
        let h = Harness::new();
        create(&h, "t", 1);
        let cat = &h.state.ctx.catalog;
        cat.set_broker_dynamic(false, [("log.retention.ms".into(), "1000".into())].into())
            .unwrap();
        cat.set_broker_dynamic(true, [("log.retention.ms".into(), "2000".into())].into())
            .unwrap();
        let req = DescribeConfigsRequest::default()
            .with_resources(vec![resource(2, "t"), resource(4, "0"), resource(4, "")])
            .with_include_synonyms(true)
            .with_include_documentation(true);
        let resp: DescribeConfigsResponse = h.call(ApiKey::DescribeConfigs, 4, req);
        let find = |i: usize, name: &str| {
            resp.results[i]
                .configs
                .iter()
                .find(|c| c.name.as_str() == name)
                .unwrap_or_else(|| panic!("{name} in result {i}"))
                .clone()
        };
        let syns = |c: &DescribeConfigsResourceResult| -> Vec<(String, String, i8)> {
            c.synonyms
                .iter()
                .map(|s| {
                    (
                        s.name.to_string(),
                        s.value.as_deref().unwrap_or("").to_string(),
                        s.source,
                    )
                })
                .collect()
        };
        let r = find(0, "retention.ms");
        assert_eq!((r.value.as_deref(), r.config_source), (Some("2000"), 2));
        assert_eq!(
            syns(&r),
            vec![
                ("log.retention.ms".into(), "2000".into(), 2),
                ("log.retention.ms".into(), "1000".into(), 3)
            ]
        );
        let b = find(1, "log.retention.ms");
        assert_eq!(
            (b.value.as_deref(), b.config_source, b.read_only),
            (Some("2000"), 2, false)
        );
        assert_eq!(syns(&b).len(), 3, "per-broker, cluster default, default");
        assert!(b.documentation.is_some());
        assert!(find(1, "log.dirs").read_only);
        // Broker-only configs Strom applies at runtime are not read-only.
        assert!(!find(1, "log.cleaner.backoff.ms").read_only);
        // Broker defaults of topic configs Strom has no field for are listed with Kafka's
        // default and are dynamic.
        let d = find(1, "log.cleaner.delete.retention.ms");
        assert_eq!(
            (d.value.as_deref(), d.config_source, d.read_only),
            (Some("86400000"), 5, false)
        );
        // The cluster-default resource lists only the cluster-wide dynamic values.
        let names: Vec<&str> = resp.results[2]
            .configs
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["log.retention.ms"]);
        assert_eq!(resp.results[2].configs[0].config_source, 3);
        assert_eq!(
            syns(&resp.results[2].configs[0]).len(),
            2,
            "cluster default, default"
        );
    }

    #[test]
    fn given_kafka_configs_strom_lacks_when_describing_broker_then_kafka_defaults_read_only() {
        let h = Harness::new();
        let req = DescribeConfigsRequest::default()
            .with_resources(vec![resource(4, "0")])
            .with_include_synonyms(true);
        let resp: DescribeConfigsResponse = h.call(ApiKey::DescribeConfigs, 4, req);
        let configs = &resp.results[0].configs;
        let find = |name: &str| {
            configs
                .iter()
                .find(|c| c.name.as_str() == name)
                .unwrap_or_else(|| panic!("{name} listed"))
        };
        // Every name Kafka lists, once.
        for (name, ..) in crate::config::kafka_broker_configs::KAFKA_BROKER_CONFIGS {
            find(name);
        }
        let mut names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "no name twice");
        let io = find("num.io.threads");
        assert_eq!(
            (
                io.value.as_deref(),
                io.read_only,
                io.config_source,
                io.config_type
            ),
            (
                Some("8"),
                true,
                ConfigSource::Default as i8,
                ConfigType::Int as i8
            )
        );
        assert_eq!(io.synonyms.len(), 1);
        let pw = find("ssl.key.password");
        assert_eq!(
            (pw.value.as_deref(), pw.is_sensitive, pw.config_type),
            (None, true, 9)
        );
        // Strom's own settings keep their values.
        assert_eq!(find("message.max.bytes").value.as_deref(), Some("1048588"));
        // Read-only means an alter is refused, not stored.
        assert!(crate::config::dynamic::validate_all(
            &[("ssl.cipher.suites".to_string(), "x".to_string())].into()
        )
        .is_err());
    }
}
