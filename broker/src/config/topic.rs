//! Kafka's topic-level configs: names, types, defaults (some taken from a broker config, as
//! Kafka does), validation with Kafka's messages, and the typed view the broker uses.

pub use super::topic_def::{ConfigSource, ConfigType, TopicConfigDef, TopicConfigError};

const fn def(
    name: &'static str,
    kind: ConfigType,
    broker_synonym: Option<&'static str>,
    default: &'static str,
    doc: &'static str,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        kind,
        broker_synonym,
        default,
        doc,
    }
}

use ConfigType::{Boolean, Double, Int, List, Long};

/// Every topic config Apache Kafka 4.x describes, so DescribeConfigs looks like Kafka's.
pub static TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def(
        "cleanup.policy",
        List,
        Some("log_cleanup_policy"),
        "delete",
        "delete and/or compact",
    ),
    def(
        "compression.type",
        ConfigType::String,
        None,
        "producer",
        "final compression type for the topic",
    ),
    def(
        "compression.gzip.level",
        Int,
        None,
        "-1",
        "gzip level when compression.type=gzip",
    ),
    def(
        "compression.lz4.level",
        Int,
        None,
        "9",
        "lz4 level when compression.type=lz4",
    ),
    def(
        "compression.zstd.level",
        Int,
        None,
        "3",
        "zstd level when compression.type=zstd",
    ),
    def(
        "errors.deadletterqueue.group.enable",
        Boolean,
        None,
        "false",
        "let share groups write the records they fail to process here (KIP-1191)",
    ),
    def(
        "delete.retention.ms",
        Long,
        None,
        "86400000",
        "how long tombstones are kept",
    ),
    def(
        "file.delete.delay.ms",
        Long,
        Some("file_delete_delay_ms"),
        "60000",
        "delay before deleting a file",
    ),
    def(
        "flush.messages",
        Long,
        Some("log_flush_interval_messages"),
        "9223372036854775807",
        "fsync every N messages",
    ),
    def(
        "flush.ms",
        Long,
        Some("log_flush_interval_ms"),
        "9223372036854775807",
        "fsync every N ms",
    ),
    def(
        "follower.replication.throttled.replicas",
        List,
        None,
        "",
        "throttled follower replicas",
    ),
    def(
        "index.interval.bytes",
        Int,
        Some("log_index_interval_bytes"),
        "4096",
        "offset index entry interval",
    ),
    def(
        "leader.replication.throttled.replicas",
        List,
        None,
        "",
        "throttled leader replicas",
    ),
    def(
        "local.retention.bytes",
        Long,
        None,
        "-2",
        "tiered storage local retention bytes",
    ),
    def(
        "local.retention.ms",
        Long,
        None,
        "-2",
        "tiered storage local retention ms",
    ),
    def(
        "max.compaction.lag.ms",
        Long,
        None,
        "9223372036854775807",
        "max time a message stays uncompacted",
    ),
    def(
        "max.decompressed.message.bytes",
        Int,
        None,
        "2147483639",
        "largest decompressed record batch accepted",
    ),
    def(
        "max.message.bytes",
        Int,
        Some("message_max_bytes"),
        "1048588",
        "largest record batch size allowed",
    ),
    def(
        "message.timestamp.after.max.ms",
        Long,
        None,
        "3600000",
        "max timestamp ahead of broker time",
    ),
    def(
        "message.timestamp.before.max.ms",
        Long,
        None,
        "9223372036854775807",
        "max timestamp behind broker time",
    ),
    def(
        "message.timestamp.type",
        ConfigType::String,
        Some("log_message_timestamp_type"),
        "CreateTime",
        "CreateTime or LogAppendTime",
    ),
    def(
        "min.cleanable.dirty.ratio",
        Double,
        None,
        "0.5",
        "dirty ratio before compaction",
    ),
    def(
        "min.compaction.lag.ms",
        Long,
        None,
        "0",
        "min time a message stays uncompacted",
    ),
    def(
        "min.insync.replicas",
        Int,
        None,
        "1",
        "replicas that must ack acks=all",
    ),
    def(
        "preallocate",
        Boolean,
        None,
        "false",
        "preallocate segment files",
    ),
    def(
        "remote.copy.lag.bytes",
        Long,
        None,
        "-1",
        "tiered storage: bytes allowed to lag before copying",
    ),
    def(
        "remote.copy.lag.ms",
        Long,
        None,
        "0",
        "tiered storage: time allowed to lag before copying",
    ),
    def(
        "remote.log.copy.disable",
        Boolean,
        None,
        "false",
        "tiered storage copy disabled",
    ),
    def(
        "remote.log.delete.on.disable",
        Boolean,
        None,
        "false",
        "tiered storage delete on disable",
    ),
    def(
        "remote.storage.enable",
        Boolean,
        None,
        "false",
        "tiered storage",
    ),
    def(
        "retention.bytes",
        Long,
        Some("log_retention_bytes"),
        "-1",
        "max partition size before deleting old segments",
    ),
    def(
        "retention.ms",
        Long,
        Some("log_retention_ms"),
        "604800000",
        "max age before deleting old segments",
    ),
    def(
        "segment.bytes",
        Int,
        Some("log_segment_bytes"),
        "1073741824",
        "segment file size",
    ),
    def(
        "segment.index.bytes",
        Int,
        Some("log_index_size_max_bytes"),
        "10485760",
        "offset index size",
    ),
    def(
        "segment.jitter.ms",
        Long,
        None,
        "0",
        "random jitter subtracted from segment.ms",
    ),
    def(
        "segment.ms",
        Long,
        Some("log_roll_ms"),
        "604800000",
        "time before a segment is rolled",
    ),
    def(
        "unclean.leader.election.enable",
        Boolean,
        None,
        "false",
        "allow unclean leader election",
    ),
];

/// Topic configs beyond Apache Kafka's: Confluent Server's and Redpanda's names for what
/// Strom also does (schema id validation), and Strom's own (`strom.*`). DescribeConfigs lists
/// them only where a topic sets them, so a topic looks like Kafka's unless it uses them.
pub static EXTENSION_CONFIGS: &[TopicConfigDef] = &[
    def(
        "strom.tenant",
        ConfigType::String,
        None,
        "default",
        "the tenant owning the topic: its remote objects live under tenant-{tenant}/ (docs/tiered-storage.md)",
    ),
    def(
        "strom.remote.prefix",
        ConfigType::String,
        None,
        storage::remote::keys::DEFAULT_TEMPLATE,
        "object key prefix template of the topic's remote segments: tenant-{tenant}/ then {topic}, {topic_id}, {partition}",
    ),
    def(
        "confluent.key.schema.validation",
        Boolean,
        None,
        "false",
        "reject records whose key does not carry a schema id registered for the subject",
    ),
    def(
        "confluent.value.schema.validation",
        Boolean,
        None,
        "false",
        "reject records whose value does not carry a schema id registered for the subject",
    ),
    def(
        "confluent.key.subject.name.strategy",
        ConfigType::String,
        None,
        "io.confluent.kafka.serializers.subject.TopicNameStrategy",
        "subject of a record key's schema",
    ),
    def(
        "confluent.value.subject.name.strategy",
        ConfigType::String,
        None,
        "io.confluent.kafka.serializers.subject.TopicNameStrategy",
        "subject of a record value's schema",
    ),
    def(
        "redpanda.key.schema.id.validation",
        Boolean,
        None,
        "false",
        "Redpanda's name for confluent.key.schema.validation",
    ),
    def(
        "redpanda.value.schema.id.validation",
        Boolean,
        None,
        "false",
        "Redpanda's name for confluent.value.schema.validation",
    ),
    def(
        "redpanda.key.subject.name.strategy",
        ConfigType::String,
        None,
        "TopicNameStrategy",
        "Redpanda's name for confluent.key.subject.name.strategy",
    ),
    def(
        "redpanda.value.subject.name.strategy",
        ConfigType::String,
        None,
        "TopicNameStrategy",
        "Redpanda's name for confluent.value.subject.name.strategy",
    ),
    def(
        "strom.schema.validation.deep",
        Boolean,
        None,
        "false",
        "with key or value schema validation on, also decode the payload with its schema: records that do not decode, or JSON that breaks its JSON Schema, are rejected",
    ),
    def(
        "strom.redact.rules",
        List,
        None,
        "",
        "PII rule sets applied on produce: built-in cn_id, phone, email, card, ip, or the broker config's [redact.rule_sets]",
    ),
    def(
        "strom.redact.scope",
        List,
        None,
        "value",
        "where strom.redact.rules apply: value, header:NAME, json:/pointer",
    ),
    def(
        "strom.key.index",
        Boolean,
        None,
        "false",
        "keep a per-partition index of each key's recent offsets (GET /v1/topics/{t}/keys/{k}/records)",
    ),
];

pub fn find(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS
        .iter()
        .chain(extension_configs())
        .find(|d| d.name == name)
}

/// `EXTENSION_CONFIGS` and Strom's flow configs (`ai_flow::FLOW_CONFIGS`): listed only where
/// a topic sets them.
pub fn extension_configs() -> impl Iterator<Item = &'static TopicConfigDef> {
    EXTENSION_CONFIGS.iter().chain(super::ai_flow::FLOW_CONFIGS)
}

/// Whether `name` is one of `extension_configs` (listed only where set).
pub fn is_extension(name: &str) -> bool {
    extension_configs().any(|d| d.name == name)
}

/// The broker config a topic config takes its default from, under Kafka's name (Kafka's
/// `ServerTopicConfigSynonyms`, first synonym).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerSynonym {
    pub name: &'static str,
    /// Kafka gives the broker config a default of its own, so DescribeConfigs lists it even
    /// when nothing sets it. `log.retention.ms` and friends have none (they derive from
    /// `log.retention.hours`), so Kafka lists them only once set.
    pub listed_by_default: bool,
}

pub fn broker_synonym(topic_config: &str) -> Option<BrokerSynonym> {
    let listed = |name| {
        Some(BrokerSynonym {
            name,
            listed_by_default: true,
        })
    };
    let unlisted = |name| {
        Some(BrokerSynonym {
            name,
            listed_by_default: false,
        })
    };
    match topic_config {
        "cleanup.policy" => listed("log.cleanup.policy"),
        "max.message.bytes" => listed("message.max.bytes"),
        "segment.bytes" => listed("log.segment.bytes"),
        "segment.index.bytes" => listed("log.index.size.max.bytes"),
        "index.interval.bytes" => listed("log.index.interval.bytes"),
        "delete.retention.ms" => listed("log.cleaner.delete.retention.ms"),
        "file.delete.delay.ms" => listed("log.segment.delete.delay.ms"),
        "flush.messages" => listed("log.flush.interval.messages"),
        "min.cleanable.dirty.ratio" => listed("log.cleaner.min.cleanable.ratio"),
        "min.compaction.lag.ms" => listed("log.cleaner.min.compaction.lag.ms"),
        "max.compaction.lag.ms" => listed("log.cleaner.max.compaction.lag.ms"),
        "message.timestamp.type" => listed("log.message.timestamp.type"),
        "message.timestamp.after.max.ms" => listed("log.message.timestamp.after.max.ms"),
        "message.timestamp.before.max.ms" => listed("log.message.timestamp.before.max.ms"),
        "preallocate" => listed("log.preallocate"),
        "retention.bytes" => listed("log.retention.bytes"),
        "local.retention.bytes" => listed("log.local.retention.bytes"),
        "local.retention.ms" => listed("log.local.retention.ms"),
        "remote.copy.lag.bytes" => listed("log.remote.copy.lag.bytes"),
        "remote.copy.lag.ms" => listed("log.remote.copy.lag.ms"),
        "compression.type"
        | "compression.gzip.level"
        | "compression.lz4.level"
        | "compression.zstd.level"
        | "max.decompressed.message.bytes"
        | "min.insync.replicas"
        | "unclean.leader.election.enable" => {
            let d = find(topic_config)?;
            listed(d.name)
        }
        "retention.ms" => unlisted("log.retention.ms"),
        "segment.ms" => unlisted("log.roll.ms"),
        "segment.jitter.ms" => unlisted("log.roll.jitter.ms"),
        "flush.ms" => unlisted("log.flush.interval.ms"),
        // No server default in Kafka (`LogConfig.CONFIGS_WITH_NO_SERVER_DEFAULTS`).
        _ => None,
    }
}

/// `*`, empty, or `partition:broker` pairs of non-negative integers.
fn throttled_replicas_valid(v: &str) -> bool {
    let pair = |s: &str| {
        let mut it = s.trim().split(':');
        let int = |p: Option<&str>| p.is_some_and(|n| n.trim().parse::<u32>().is_ok());
        int(it.next()) && int(it.next()) && it.next().is_none()
    };
    v.is_empty() || v == "*" || v.split(',').all(pair)
}

fn invalid(name: &str, value: &str, reason: &str) -> TopicConfigError {
    TopicConfigError::Invalid {
        name: name.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

/// Checks one override the way Kafka's `LogConfig.validate` does for its type and range.
/// Kafka topic configs Strom does not implement yet. Their default value is accepted (tools
/// and `strom migrate` pass topics' configs along, and the default is what Strom does); any
/// other value is refused with the reason, never accepted to do nothing.
pub const NOT_IMPLEMENTED: &[(&str, &str)] = &[
    (
        "remote.copy.lag.bytes",
        "tiered storage copies each segment once it is closed; a copy lag is not built (docs/tiered-storage.md)",
    ),
    (
        "remote.copy.lag.ms",
        "tiered storage copies each segment once it is closed; a copy lag is not built (docs/tiered-storage.md)",
    ),
    (
        "remote.log.copy.disable",
        "copies to remote storage cannot be paused per topic yet (docs/tiered-storage.md)",
    ),
    (
        "remote.log.delete.on.disable",
        "turning tiered storage off for a topic is not built yet (docs/tiered-storage.md)",
    ),
    ("preallocate", "segment files are not preallocated"),
    (
        "segment.jitter.ms",
        "segments roll at segment.ms without jitter",
    ),
];

pub fn validate(name: &str, value: &str) -> Result<(), TopicConfigError> {
    let d = find(name).ok_or_else(|| TopicConfigError::Unknown(name.into()))?;
    let v = value.trim();
    if let Some((_, why)) = NOT_IMPLEMENTED.iter().find(|(n, _)| *n == name) {
        if !v.eq_ignore_ascii_case(d.default) {
            return Err(invalid(
                name,
                value,
                &format!(
                    "Strom accepts only the default ({:?}) here: {why}",
                    d.default
                ),
            ));
        }
    }
    match d.kind {
        Boolean => {
            if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                return Err(invalid(
                    name,
                    value,
                    "Expected value to be either true or false",
                ));
            }
        }
        Int => {
            v.parse::<i32>()
                .map_err(|_| invalid(name, value, "Not a number of type INT"))?;
        }
        Long => {
            v.parse::<i64>()
                .map_err(|_| invalid(name, value, "Not a number of type LONG"))?;
        }
        Double => {
            v.parse::<f64>()
                .map_err(|_| invalid(name, value, "Not a number of type DOUBLE"))?;
        }
        ConfigType::String | List => {}
    }
    let int = || v.parse::<i64>().unwrap_or(0);
    // Only the flow family: other `strom.*` keys (redaction, key index) are checked below.
    if super::ai_flow::FLOW_CONFIGS.iter().any(|d| d.name == name) {
        return super::ai_flow::validate(name, value);
    }
    match name {
        // Kafka's `ThrottledReplicaListValidator` (`quota::replication` applies them).
        "leader.replication.throttled.replicas" | "follower.replication.throttled.replicas"
            if !throttled_replicas_valid(v) =>
        {
            return Err(invalid(
                name,
                value,
                "must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
            ));
        }
        "cleanup.policy" => {
            for p in v.split(',').map(str::trim) {
                if p != "delete" && p != "compact" {
                    return Err(invalid(
                        name,
                        value,
                        "String must be one of: compact, delete",
                    ));
                }
            }
        }
        "compression.type"
            if !["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"].contains(&v) =>
        {
            return Err(invalid(
                name,
                value,
                "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
            ));
        }
        "compression.gzip.level" if !(int() == -1 || (1..=9).contains(&int())) => {
            return Err(invalid(name, value, "Value must be between 1 and 9, or -1"));
        }
        "compression.lz4.level" if !(1..=17).contains(&int()) => {
            return Err(invalid(name, value, "Value must be between 1 and 17"));
        }
        "compression.zstd.level" if !(-131072..=22).contains(&int()) => {
            return Err(invalid(name, value, "Value must be between -131072 and 22"));
        }
        "confluent.key.subject.name.strategy"
        | "confluent.value.subject.name.strategy"
        | "redpanda.key.subject.name.strategy"
        | "redpanda.value.subject.name.strategy"
            if super::schema_validation::Strategy::parse(v).is_none() =>
        {
            return Err(invalid(
                name,
                value,
                "Expected TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy",
            ));
        }
        "strom.redact.rules" => {
            crate::redact::Plan::compile(Some(v), None)
                .map_err(|e| invalid(name, value, &e.to_string()))?;
        }
        "strom.tenant" => storage::remote::keys::validate_tenant(v)
            .map_err(|e| invalid(name, value, &e.to_string()))?,
        "strom.remote.prefix" => storage::remote::keys::validate_template(v)
            .map_err(|e| invalid(name, value, &e.to_string()))?,
        "local.retention.ms" | "local.retention.bytes" if int() < -2 => {
            return Err(invalid(name, value, "Value must be at least -2"))
        }
        "strom.redact.scope" => {
            crate::redact::Scope::parse(v).map_err(|e| invalid(name, value, &e.to_string()))?;
        }
        "message.timestamp.type" if v != "CreateTime" && v != "LogAppendTime" => {
            return Err(invalid(
                name,
                value,
                "String must be one of: CreateTime, LogAppendTime",
            ));
        }
        "segment.bytes" if int() < 14 => {
            return Err(invalid(name, value, "Value must be at least 14"))
        }
        "segment.index.bytes" if int() < 8 => {
            return Err(invalid(name, value, "Value must be at least 8"))
        }
        "max.message.bytes"
        | "index.interval.bytes"
        | "segment.jitter.ms"
        | "min.compaction.lag.ms"
        | "delete.retention.ms"
        | "file.delete.delay.ms"
        | "message.timestamp.after.max.ms"
        | "message.timestamp.before.max.ms"
            if int() < 0 =>
        {
            return Err(invalid(name, value, "Value must be at least 0"))
        }
        "segment.ms" | "flush.messages" | "max.compaction.lag.ms" | "min.insync.replicas"
            if int() < 1 =>
        {
            return Err(invalid(name, value, "Value must be at least 1"))
        }
        "flush.ms" if int() < 0 => return Err(invalid(name, value, "Value must be at least 0")),
        "retention.ms" | "retention.bytes" if int() < -1 => {
            return Err(invalid(name, value, "Value must be at least -1"))
        }
        "min.cleanable.dirty.ratio" => {
            let f: f64 = v.parse().unwrap_or(-1.0);
            if !(0.0..=1.0).contains(&f) {
                return Err(invalid(name, value, "Value must be between 0 and 1"));
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_bad_redaction_configs_when_validating_then_invalid_beside_the_flow_family() {
        // The flow family's validator must not swallow the other strom.* keys (a merge once
        // routed every strom.* name to it, and bad redaction rules were accepted).
        assert!(validate("strom.redact.rules", "cn_id,nope").is_err());
        assert!(validate("strom.redact.scope", "body").is_err());
        assert!(validate("strom.redact.rules", "cn_id,email").is_ok());
        assert!(validate("strom.dedup.window.ms", "0").is_err());
        assert!(validate("strom.dedup.window.ms", "1000").is_ok());
    }

    #[test]
    fn given_each_bad_value_when_validating_then_kafka_message() {
        let cases = [
            ("cleanup.policy", "nope", false),
            ("cleanup.policy", "compact,delete", true),
            ("segment.bytes", "13", false),
            ("segment.bytes", "14", true),
            ("retention.ms", "-1", true),
            ("retention.ms", "-2", false),
            ("max.message.bytes", "abc", false),
            ("min.cleanable.dirty.ratio", "1.5", false),
            ("preallocate", "yes", false),
            ("message.timestamp.type", "LogAppendTime", true),
            ("compression.type", "brotli", false),
        ];
        for (name, value, ok) in cases {
            assert_eq!(validate(name, value).is_ok(), ok, "{name}={value}");
        }
        assert_eq!(
            validate("no.such", "1"),
            Err(TopicConfigError::Unknown("no.such".into()))
        );
    }

    #[test]
    fn given_config_table_when_listed_then_same_names_as_kafka_4_4() {
        // Read off Apache Kafka 4.4.0's DescribeConfigs for a topic without overrides.
        let kafka = [
            "cleanup.policy",
            "compression.gzip.level",
            "compression.lz4.level",
            "compression.type",
            "compression.zstd.level",
            "delete.retention.ms",
            "errors.deadletterqueue.group.enable",
            "file.delete.delay.ms",
            "flush.messages",
            "flush.ms",
            "follower.replication.throttled.replicas",
            "index.interval.bytes",
            "leader.replication.throttled.replicas",
            "local.retention.bytes",
            "local.retention.ms",
            "max.compaction.lag.ms",
            "max.decompressed.message.bytes",
            "max.message.bytes",
            "message.timestamp.after.max.ms",
            "message.timestamp.before.max.ms",
            "message.timestamp.type",
            "min.cleanable.dirty.ratio",
            "min.compaction.lag.ms",
            "min.insync.replicas",
            "preallocate",
            "remote.copy.lag.bytes",
            "remote.copy.lag.ms",
            "remote.log.copy.disable",
            "remote.log.delete.on.disable",
            "remote.storage.enable",
            "retention.bytes",
            "retention.ms",
            "segment.bytes",
            "segment.index.bytes",
            "segment.jitter.ms",
            "segment.ms",
            "unclean.leader.election.enable",
        ];
        let mut ours: Vec<&str> = TOPIC_CONFIGS.iter().map(|d| d.name).collect();
        ours.sort_unstable();
        assert_eq!(ours, kafka);
    }
}
