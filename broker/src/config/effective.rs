//! The effective topic configuration: a topic's overrides over the broker's dynamic and
//! static values over Kafka's defaults (what DescribeConfigs shows), and the typed
//! `TopicSettings` the produce, fetch and housekeeping paths read.

use std::collections::BTreeMap;

use super::dynamic::{field_value, BrokerView};
use super::topic::{broker_synonym, find, ConfigSource, ConfigType, TopicConfigDef};

/// One described config entry.
#[derive(Debug, Clone, PartialEq)]
pub struct DescribedConfig {
    pub name: &'static str,
    pub value: String,
    pub source: ConfigSource,
    pub kind: ConfigType,
    pub doc: &'static str,
    pub is_default: bool,
}

/// The effective value of `d` for a topic with `overrides`, and where it came from: the
/// override, else the dynamic broker default (per-broker, then cluster-wide), else the static
/// broker config, else Kafka's default.
pub fn effective(
    d: &TopicConfigDef,
    overrides: &BTreeMap<String, String>,
    broker: &BrokerView,
) -> DescribedConfig {
    let described = |value: String, source: ConfigSource| DescribedConfig {
        name: d.name,
        value,
        source,
        kind: d.kind,
        doc: d.doc,
        is_default: source == ConfigSource::Default,
    };
    if let Some(v) = overrides.get(d.name) {
        return described(v.clone(), ConfigSource::DynamicTopic);
    }
    broker_default(d, broker)
}

/// What a topic without an override of `d` gets: the broker-level value and its source.
pub fn broker_default(d: &TopicConfigDef, broker: &BrokerView) -> DescribedConfig {
    let described = |value: String, source: ConfigSource| DescribedConfig {
        name: d.name,
        value,
        source,
        kind: d.kind,
        doc: d.doc,
        is_default: source == ConfigSource::Default,
    };
    if let Some(syn) = broker_synonym(d.name) {
        if let Some((v, source)) = broker.dynamic(syn.name) {
            return described(v.to_string(), source);
        }
    }
    match d.broker_synonym {
        Some(key) => {
            let value =
                field_value(&broker.static_config, key).unwrap_or_else(|| d.default.to_string());
            let source = if broker.origins.contains_key(key) {
                ConfigSource::StaticBroker
            } else {
                ConfigSource::Default
            };
            described(value, source)
        }
        None => described(d.default.to_string(), ConfigSource::Default),
    }
}

/// A topic's final compression (`compression.type` and its `compression.<codec>.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compression {
    pub codec: u8,
    pub level: Option<i32>,
}

impl Compression {
    /// `None` for `producer` (batches stay as the producer compressed them).
    fn resolve(kind: &str, level: impl Fn(&str) -> i64) -> Option<Compression> {
        let (codec, level) = match kind.trim() {
            "uncompressed" => (0, None),
            "gzip" => (1, Some(level("compression.gzip.level"))),
            "snappy" => (2, None),
            "lz4" => (3, Some(level("compression.lz4.level"))),
            "zstd" => (4, Some(level("compression.zstd.level"))),
            _ => return None,
        };
        Some(Compression {
            codec,
            // gzip's -1 is the codec's own default.
            level: level.filter(|l| *l != -1).map(|l| l as i32),
        })
    }
}

/// The typed settings the produce and fetch paths consult, resolved once per topic change.
#[derive(Debug, Clone)]
pub struct TopicSettings {
    pub compact: bool,
    pub max_message_bytes: i32,
    pub log_append_time: bool,
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    /// Kafka 4.4's `max.decompressed.message.bytes`: the most a produced batch may inflate
    /// to when the broker reads its records.
    pub max_decompressed_bytes: usize,
    pub log: storage::LogConfig,
    /// delete.retention.ms, min/max.compaction.lag.ms, min.cleanable.dirty.ratio, and the
    /// flow's record expiry (compaction removes expired records).
    pub cleaner: storage::cleaner::CleanerConfig,
    /// `compression.type` other than `producer`: the codec (Kafka's id: 0 none, 1 gzip, 2
    /// snappy, 3 lz4, 4 zstd) and level batches are re-encoded with when theirs differs.
    pub compression: Option<Compression>,
    /// Records whose key/value must carry a schema id registered for their subject.
    pub schema_validation: super::schema_validation::TopicValidation,
    /// Dedup by message id, per-record expiry, embedding validation (`strom.*`, issue 20).
    pub flow: super::ai_flow::FlowSettings,
    /// `min.insync.replicas`: acks=all needs this many in-sync replicas (one node has one).
    pub min_insync_replicas: i32,
    /// `retention.ms`, `retention.bytes` and whether `cleanup.policy` has `delete`: read by
    /// the shard's housekeeping at every check, so a changed topic config applies at once.
    pub retention: storage::RetentionPolicy,
    /// `strom.redact.rules` / `strom.redact.scope` compiled (`crate::redact`); `Some(Err)`
    /// when they no longer compile (a named set gone from the broker config): produce is
    /// then refused rather than data stored unredacted.
    /// `strom.key.index`: keep key → recent offsets per partition (`partition::key_index`).
    pub key_index: bool,
    /// `remote.storage.enable`, local retention, tenant and key template (`config::tiered`).
    pub tiered: super::tiered::TieredSettings,
    pub redact: Option<Result<std::sync::Arc<crate::redact::Plan>, crate::redact::RedactError>>,
}

impl TopicSettings {
    pub fn resolve(overrides: &BTreeMap<String, String>, broker: &BrokerView) -> TopicSettings {
        let get =
            |name: &str| effective(find(name).expect("known config"), overrides, broker).value;
        let long = |name: &str| get(name).trim().parse::<i64>().unwrap_or(i64::MAX);
        let nonneg = |name: &str| long(name).max(0) as u64;
        let log = storage::LogConfig {
            segment_bytes: nonneg("segment.bytes"),
            segment_ms: nonneg("segment.ms"),
            segment_index_bytes: nonneg("segment.index.bytes"),
            index_interval_bytes: nonneg("index.interval.bytes"),
            flush_messages: nonneg("flush.messages"),
            flush_ms: nonneg("flush.ms"),
            file_delete_delay_ms: nonneg("file.delete.delay.ms"),
        };
        let flow = super::ai_flow::FlowSettings::from_configs(overrides);
        TopicSettings {
            compact: get("cleanup.policy").contains("compact"),
            max_message_bytes: long("max.message.bytes").clamp(0, i32::MAX as i64) as i32,
            log_append_time: get("message.timestamp.type") == "LogAppendTime",
            timestamp_before_max_ms: long("message.timestamp.before.max.ms"),
            timestamp_after_max_ms: long("message.timestamp.after.max.ms"),
            max_decompressed_bytes: long("max.decompressed.message.bytes").max(0) as usize,
            log,
            cleaner: storage::cleaner::CleanerConfig {
                delete_retention_ms: long("delete.retention.ms").max(0),
                min_compaction_lag_ms: long("min.compaction.lag.ms").max(0),
                max_compaction_lag_ms: long("max.compaction.lag.ms").max(1),
                min_cleanable_dirty_ratio: get("min.cleanable.dirty.ratio")
                    .trim()
                    .parse::<f64>()
                    .unwrap_or(0.5),
                dedupe_buffer_bytes: broker.config.log_cleaner_dedupe_buffer_size.max(0) as usize,
                expiry: flow.expiry.clone(),
            },
            compression: Compression::resolve(&get("compression.type"), long),
            schema_validation: super::schema_validation::TopicValidation::from_configs(overrides),
            flow,
            min_insync_replicas: long("min.insync.replicas").clamp(1, i32::MAX as i64) as i32,
            retention: storage::RetentionPolicy {
                retention_ms: long("retention.ms"),
                retention_bytes: long("retention.bytes"),
                delete: get("cleanup.policy").contains("delete"),
            },
            key_index: get("strom.key.index").eq_ignore_ascii_case("true"),
            tiered: super::tiered::TieredSettings::resolve(
                get,
                long("retention.ms"),
                long("retention.bytes"),
            ),
            redact: crate::redact::Plan::compile(
                overrides
                    .get(crate::redact::RULES_CONFIG)
                    .map(String::as_str),
                overrides
                    .get(crate::redact::SCOPE_CONFIG)
                    .map(String::as_str),
            )
            .map(|p| p.map(std::sync::Arc::new))
            .transpose(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_broker_override_when_describing_then_static_broker_source() {
        use crate::config::{BrokerConfig, Origin};
        let broker = BrokerConfig {
            message_max_bytes: 2000,
            ..Default::default()
        };
        let mut origins = BTreeMap::new();
        origins.insert("message_max_bytes".to_string(), Origin::File);
        let broker = BrokerView::from_static(broker, origins);
        let d = effective(
            find("max.message.bytes").unwrap(),
            &BTreeMap::new(),
            &broker,
        );
        assert_eq!(d.value, "2000");
        assert_eq!(d.source, ConfigSource::StaticBroker);
        let d = effective(find("segment.bytes").unwrap(), &BTreeMap::new(), &broker);
        assert_eq!(
            (d.value.as_str(), d.source),
            ("1073741824", ConfigSource::Default)
        );
        let mut o = BTreeMap::new();
        o.insert("segment.bytes".to_string(), "1000".to_string());
        let d = effective(find("segment.bytes").unwrap(), &o, &broker);
        assert_eq!(
            (d.value.as_str(), d.source),
            ("1000", ConfigSource::DynamicTopic)
        );
    }

    #[test]
    fn given_overrides_when_resolving_then_typed_settings() {
        let mut o = BTreeMap::new();
        o.insert("cleanup.policy".to_string(), "compact".to_string());
        o.insert("segment.bytes".to_string(), "4096".to_string());
        let s = TopicSettings::resolve(
            &o,
            &BrokerView::from_static(Default::default(), BTreeMap::new()),
        );
        assert!(s.compact);
        assert_eq!(s.log.segment_bytes, 4096);
        assert_eq!(s.max_message_bytes, 1_048_588);
    }
}
