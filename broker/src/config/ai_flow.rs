//! Strom's AI-native flow configs on a topic (issue 20, `docs/ai-features.md`): dedup by
//! message id, per-record expiry, embedding validation and priority lanes. Each is a topic config plus a
//! record header, so any Kafka client can use them unchanged. This module is their
//! validation (INVALID_CONFIG naming the key) and the typed view the partition reads; the
//! embedding rules themselves live in `strom_connectors::embedding`, shared with the sinks.

use std::collections::BTreeMap;

use strom_connectors::embedding::{self, EmbeddingSpec};

use super::topic_def::{ConfigType, TopicConfigDef, TopicConfigError};

pub const DEDUP_HEADER: &str = "strom.dedup.header";
pub const DEDUP_WINDOW_MS: &str = "strom.dedup.window.ms";
pub const DEDUP_MAX_IDS: &str = "strom.dedup.max.ids";
pub const TTL_HEADER: &str = "strom.ttl.header";
pub const RECORD_TTL_MS: &str = "strom.record.ttl.ms";
pub const PRIORITY: &str = "strom.priority";

/// JetStream's default duplicate window (2 minutes).
pub const DEFAULT_WINDOW_MS: i64 = 120_000;
/// Ids remembered per partition before the oldest are evicted.
pub const DEFAULT_MAX_IDS: usize = 100_000;
/// Longest header name accepted (Kafka sets no limit; a name is matched per record).
const MAX_HEADER_NAME: usize = 255;

const fn def(
    name: &'static str,
    kind: ConfigType,
    default: &'static str,
    doc: &'static str,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        kind,
        broker_synonym: None,
        default,
        doc,
    }
}

/// Listed by DescribeConfigs where a topic sets them (`topic::EXTENSION_CONFIGS`).
pub static FLOW_CONFIGS: &[TopicConfigDef] = &[
    def(
        DEDUP_HEADER,
        ConfigType::String,
        "",
        "record header holding the message id records are deduplicated by (empty: off)",
    ),
    def(
        DEDUP_WINDOW_MS,
        ConfigType::Long,
        "120000",
        "how long a message id is remembered, in ms",
    ),
    def(
        DEDUP_MAX_IDS,
        ConfigType::Int,
        "100000",
        "message ids remembered per partition; the oldest are evicted beyond it",
    ),
    def(
        TTL_HEADER,
        ConfigType::String,
        "",
        "record header holding the record's time to live in ms (empty: off)",
    ),
    def(
        RECORD_TTL_MS,
        ConfigType::Long,
        "-1",
        "time to live of records without a TTL header, in ms (-1: none)",
    ),
    def(
        PRIORITY,
        ConfigType::String,
        "normal",
        "lane of the topic's produce and fetch work when a shard is saturated: critical, high, normal or low",
    ),
    def(
        embedding::FORMAT,
        ConfigType::String,
        "",
        "vector format of record values: f32le or json (empty: no check)",
    ),
    def(
        embedding::FIELD,
        ConfigType::String,
        "",
        "JSON pointer to the vector in a json value (empty: the whole value)",
    ),
    def(
        embedding::DIMENSION,
        ConfigType::Int,
        "0",
        "required vector dimension (0: any)",
    ),
    def(
        embedding::NORMALIZED,
        ConfigType::Boolean,
        "false",
        "vectors must have unit L2 norm",
    ),
    def(
        embedding::EPSILON,
        ConfigType::Double,
        "0.001",
        "allowed |norm - 1| when strom.embedding.normalized",
    ),
];

fn invalid(name: &str, value: &str, reason: &str) -> TopicConfigError {
    TopicConfigError::Invalid {
        name: name.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

/// The range checks of the `strom.*` flow keys (types are checked by `topic::validate`).
pub fn validate(name: &str, value: &str) -> Result<(), TopicConfigError> {
    let v = value.trim();
    let long = || v.parse::<i64>().unwrap_or(i64::MIN);
    match name {
        DEDUP_HEADER | TTL_HEADER if v.len() > MAX_HEADER_NAME => Err(invalid(
            name,
            value,
            &format!("Header name must be at most {MAX_HEADER_NAME} bytes"),
        )),
        DEDUP_WINDOW_MS if long() < 1 => Err(invalid(name, value, "Value must be at least 1")),
        DEDUP_MAX_IDS if !(1..=10_000_000).contains(&long()) => {
            Err(invalid(name, value, "Value must be between 1 and 10000000"))
        }
        RECORD_TTL_MS if long() < 1 && long() != -1 => Err(invalid(
            name,
            value,
            "Value must be at least 1, or -1 for no expiry",
        )),
        PRIORITY if Lane::parse(v).is_none() => Err(invalid(
            name,
            value,
            "Value must be one of critical, high, normal, low",
        )),
        _ => embedding::validate_config(name, value).map_err(|e| invalid(name, value, &e.reason)),
    }
}

/// Dedup by message id on a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupSettings {
    pub header: String,
    pub window_ms: i64,
    pub max_ids: usize,
}

/// Per-record expiry on a topic: a record's TTL is its header's value when the header is
/// configured and present, else the topic default. The rule lives in storage, which the
/// cleaner applies too (compaction removes expired records).
pub use storage::expiry::RecordExpiry as ExpirySettings;

/// A topic's priority lane (`strom.priority`): which work a saturated shard slows first
/// (`shard::priority`). Ordered from the lowest lane up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lane {
    Low,
    #[default]
    Normal,
    High,
    Critical,
}

impl Lane {
    pub const ALL: [Lane; 4] = [Lane::Low, Lane::Normal, Lane::High, Lane::Critical];

    pub fn parse(v: &str) -> Option<Lane> {
        Some(match v.trim().to_ascii_lowercase().as_str() {
            "low" => Lane::Low,
            "normal" => Lane::Normal,
            "high" => Lane::High,
            "critical" => Lane::Critical,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Lane::Low => "low",
            Lane::Normal => "normal",
            Lane::High => "high",
            Lane::Critical => "critical",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// The typed flow settings of one topic (`TopicSettings::flow`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowSettings {
    pub dedup: Option<DedupSettings>,
    pub expiry: Option<ExpirySettings>,
    pub embedding: Option<EmbeddingSpec>,
    pub priority: Lane,
}

impl FlowSettings {
    /// From a topic's config overrides (the flow keys have no broker-level defaults).
    pub fn from_configs(configs: &BTreeMap<String, String>) -> FlowSettings {
        let get = |k: &str| configs.get(k).map(|v| v.trim());
        let header = |k: &str| get(k).filter(|h| !h.is_empty()).map(str::to_string);
        let dedup = header(DEDUP_HEADER).map(|header| DedupSettings {
            header,
            window_ms: get(DEDUP_WINDOW_MS)
                .and_then(|v| v.parse().ok())
                .filter(|w| *w > 0)
                .unwrap_or(DEFAULT_WINDOW_MS),
            max_ids: get(DEDUP_MAX_IDS)
                .and_then(|v| v.parse().ok())
                .filter(|m| *m > 0)
                .unwrap_or(DEFAULT_MAX_IDS),
        });
        let ttl_header = header(TTL_HEADER);
        let default_ttl_ms = get(RECORD_TTL_MS)
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|t| *t > 0);
        let expiry = (ttl_header.is_some() || default_ttl_ms.is_some()).then_some(ExpirySettings {
            header: ttl_header,
            default_ttl_ms,
        });
        FlowSettings {
            dedup,
            expiry,
            embedding: EmbeddingSpec::from_configs(|k| configs.get(k).map(String::as_str)),
            priority: get(PRIORITY).and_then(Lane::parse).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_each_bad_flow_value_when_validating_then_invalid_naming_the_key() {
        let cases = [
            (DEDUP_WINDOW_MS, "0", false),
            (DEDUP_WINDOW_MS, "abc", false),
            (DEDUP_WINDOW_MS, "1000", true),
            (DEDUP_MAX_IDS, "0", false),
            (DEDUP_MAX_IDS, "20000000", false),
            (DEDUP_MAX_IDS, "5", true),
            (RECORD_TTL_MS, "0", false),
            (RECORD_TTL_MS, "-2", false),
            (RECORD_TTL_MS, "-1", true),
            (RECORD_TTL_MS, "60000", true),
            (DEDUP_HEADER, "msg-id", true),
            (embedding::FORMAT, "bf16", false),
            (embedding::DIMENSION, "x", false),
            (embedding::EPSILON, "-0.1", false),
            (PRIORITY, "critical", true),
            (PRIORITY, "LOW", true),
            (PRIORITY, "urgent", false),
        ];
        for (name, value, ok) in cases {
            // Through the topic-config entry point, as CreateTopics and AlterConfigs call it.
            let r = super::super::topic::validate(name, value);
            assert_eq!(r.is_ok(), ok, "{name}={value}: {r:?}");
            if let Err(e) = r {
                assert!(e.to_string().contains(name), "{e}");
            }
        }
        let long = "h".repeat(300);
        assert!(validate(TTL_HEADER, &long).is_err());
    }

    #[test]
    fn given_flow_configs_when_resolved_then_typed_with_defaults() {
        let mut c = BTreeMap::new();
        assert_eq!(FlowSettings::from_configs(&c), FlowSettings::default());
        c.insert(DEDUP_HEADER.to_string(), "msg-id".to_string());
        c.insert(RECORD_TTL_MS.to_string(), "5000".to_string());
        c.insert(embedding::FORMAT.to_string(), "f32le".to_string());
        let f = FlowSettings::from_configs(&c);
        assert_eq!(
            f.dedup,
            Some(DedupSettings {
                header: "msg-id".into(),
                window_ms: DEFAULT_WINDOW_MS,
                max_ids: DEFAULT_MAX_IDS
            })
        );
        assert_eq!(
            f.expiry,
            Some(ExpirySettings {
                header: None,
                default_ttl_ms: Some(5000)
            })
        );
        assert!(f.embedding.is_some());
        assert_eq!(f.priority, Lane::Normal);
        c.insert(PRIORITY.to_string(), "critical".to_string());
        assert_eq!(FlowSettings::from_configs(&c).priority, Lane::Critical);
        // An empty header turns dedup off again (AlterConfigs to "").
        c.insert(DEDUP_HEADER.to_string(), String::new());
        assert_eq!(FlowSettings::from_configs(&c).dedup, None);
    }
}
