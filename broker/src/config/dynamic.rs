//! Dynamic broker configs (Kafka's KIP-226): values set at runtime with AlterConfigs or
//! IncrementalAlterConfigs on the BROKER resource, either for this broker (`"<node id>"`) or as
//! the cluster-wide default (`""`). They sit above the static config (file, env, flags) and
//! below a topic's own overrides: Kafka's order is topic override, per-broker dynamic,
//! cluster-default dynamic, static, default.
//!
//! Strom accepts dynamically the broker configs Kafka accepts dynamically *that Strom applies
//! live*: the broker defaults of topic configs (Kafka's `DynamicLogConfig`, e.g.
//! `message.max.bytes`, `log.retention.ms`, `log.cleanup.policy`). Every topic resolves its
//! settings through them, so a changed default reaches every partition without a restart.
//! Kafka's other dynamic configs (SSL, listeners, thread pools, quotas, cleaner I/O) are
//! refused with Kafka's message for a non-dynamic config; see compat-tests/FINDINGS.md.
//!
//! They are stored in `<data-dir>/strom-broker-configs.json`, written atomically.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::topic::{self, ConfigSource, ConfigType, TopicConfigDef};
use super::{BrokerConfig, Origin};

pub const FILE_NAME: &str = "strom-broker-configs.json";

/// What is stored: the cluster-wide defaults and the per-broker values by node id (a data dir
/// moved to another node id must not apply the old node's values).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StoredDynamic {
    pub version: u32,
    #[serde(default)]
    pub cluster: BTreeMap<String, String>,
    #[serde(default)]
    pub brokers: BTreeMap<String, BTreeMap<String, String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum DynamicFileError {
    #[error("cannot read or write dynamic broker configs {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot persist dynamic broker configs: {0}")]
    Persist(#[source] storage::StorageError),
    #[error("dynamic broker configs {path} are corrupt: {message}")]
    Corrupt { path: PathBuf, message: String },
}

pub fn load(data_dir: &Path) -> Result<StoredDynamic, DynamicFileError> {
    let path = data_dir.join(FILE_NAME);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| DynamicFileError::Corrupt {
            path,
            message: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StoredDynamic::default()),
        Err(source) => Err(DynamicFileError::Io { path, source }),
    }
}

pub fn save(data_dir: &Path, stored: &StoredDynamic) -> Result<(), DynamicFileError> {
    let path = data_dir.join(FILE_NAME);
    let bytes = serde_json::to_vec_pretty(stored).expect("dynamic configs serialise");
    storage::logdir::write_atomic(&path, &bytes).map_err(DynamicFileError::Persist)
}

/// Kafka's broker configs that may change at runtime but that Strom does not apply live
/// (Kafka's `DynamicBrokerConfig.AllDynamicConfigs` minus the topic-default ones). Kafka
/// accepts these; Strom refuses them as non-dynamic rather than store a value it ignores.
pub const KAFKA_DYNAMIC_NOT_APPLIED: &[&str] = &[
    "advertised.listeners",
    "background.threads",
    "listeners",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.threads",
    "max.connection.creation.rate",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "num.io.threads",
    "num.network.threads",
    "num.recovery.threads.per.data.dir",
    "num.replica.fetchers",
    "transaction.partition.verification.enable",
];

/// The topic config whose broker default `name` is, when `name` is one Strom applies live.
pub fn dynamic_topic_default(name: &str) -> Option<&'static TopicConfigDef> {
    topic::TOPIC_CONFIGS
        .iter()
        .find(|d| topic::broker_synonym(d.name).is_some_and(|s| s.name == name))
}

/// Kafka's dynamic broker configs that are not topic defaults and that Strom applies live:
/// each shard's cleaner and producer-expiration pass read them from the current broker view
/// at every pass, a share group's dead-letter write at every write, the replication
/// throttles (`quota::replication`) at every replica fetch. Each checked as Kafka's
/// `ConfigDef` does.
pub const APPLIED_BROKER_DYNAMIC: &[&str] = &[
    "errors.deadletterqueue.auto.create.topics.enable",
    "errors.deadletterqueue.topic.name.prefix",
    "log.cleaner.backoff.ms",
    "follower.replication.throttled.rate",
    "leader.replication.throttled.rate",
    "log.cleaner.io.max.bytes.per.second",
    "producer.id.expiration.ms",
];

/// Kafka's type and range check of an applied broker-only dynamic config; `None` for
/// another name.
fn validate_applied(name: &str, value: &str) -> Option<Result<(), BrokerConfigError>> {
    let invalid = |reason: &str| BrokerConfigError::Invalid {
        name: name.into(),
        value: value.into(),
        reason: reason.into(),
    };
    let v = value.trim();
    Some(match name {
        "errors.deadletterqueue.auto.create.topics.enable" => {
            match v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") {
                true => Ok(()),
                false => Err(invalid("Expected value to be either true or false")),
            }
        }
        // Any string, "" included (no prefix required).
        "errors.deadletterqueue.topic.name.prefix" => Ok(()),
        // Bytes per second of a move's replication (`quota::replication`); Kafka's
        // `QuotaConfig`: a long, at least 0.
        "leader.replication.throttled.rate"
        | "follower.replication.throttled.rate"
        | "log.cleaner.backoff.ms" => match v.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(()),
            Ok(_) => Err(invalid("Value must be at least 0")),
            Err(_) => Err(invalid("Expected value to be a 64-bit integer (long)")),
        },
        // Kafka's ConfigDef has no range here; a rate must still be a positive number.
        "log.cleaner.io.max.bytes.per.second" => match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => Ok(()),
            _ => Err(invalid("Expected value to be a positive number (double)")),
        },
        "producer.id.expiration.ms" => match v.parse::<i32>() {
            Ok(n) if n >= 1 => Ok(()),
            Ok(_) => Err(invalid("Value must be at least 1")),
            Err(_) => Err(invalid("Expected value to be a 32-bit integer")),
        },
        _ => return None,
    })
}

/// Whether Kafka knows `name` as a broker config that cannot change at runtime. A name Kafka
/// does not know at all is a custom config, which Kafka accepts (`customPropsAllowed`).
pub fn is_kafka_static(name: &str) -> bool {
    KAFKA_DYNAMIC_NOT_APPLIED.contains(&name)
        || super::known_kafka_broker_name(name)
        || KAFKA_STATIC_NAMES.contains(&name)
        // Every other config Kafka's broker lists: DescribeConfigs shows them read-only.
        || super::kafka_broker_configs::KAFKA_BROKER_CONFIGS
            .iter()
            .any(|c| c.0 == name)
}

/// Kafka broker configs Strom has no field for, yet which clients commonly try to alter:
/// Kafka refuses them as read-only, and so does Strom.
const KAFKA_STATIC_NAMES: &[&str] = &[
    "broker.id",
    "log.dir",
    "log.retention.hours",
    "log.retention.minutes",
    "log.roll.hours",
    "log.roll.jitter.hours",
    "process.roles",
    "controller.quorum.voters",
    "auto.leader.rebalance.enable",
    "delete.topic.enable",
    "zookeeper.connect",
];

/// The effective broker configuration: static config with the dynamic layers on top.
#[derive(Debug, Clone)]
pub struct BrokerView {
    /// Static config with the dynamic values written into the fields they override.
    pub config: BrokerConfig,
    /// What the file, environment and flags set.
    pub static_config: BrokerConfig,
    pub origins: BTreeMap<String, Origin>,
    /// Cluster-wide dynamic defaults (resource `""`), Kafka names.
    pub cluster: BTreeMap<String, String>,
    /// This broker's dynamic values (resource `"<node id>"`), Kafka names.
    pub node: BTreeMap<String, String>,
}

impl BrokerView {
    /// A view with no dynamic values (tests, and the start of `with_dynamic`).
    pub fn from_static(static_config: BrokerConfig, origins: BTreeMap<String, Origin>) -> Self {
        BrokerView {
            config: static_config.clone(),
            static_config,
            origins,
            cluster: BTreeMap::new(),
            node: BTreeMap::new(),
        }
    }

    /// Layers the stored dynamic values. A stored value that no longer validates (a newer
    /// rule, a hand edit) is dropped with a log line, as Kafka's `removeInvalidConfigs` does:
    /// the broker must still start.
    pub fn with_dynamic(
        static_config: BrokerConfig,
        origins: BTreeMap<String, Origin>,
        stored: &StoredDynamic,
    ) -> Self {
        let node_id = static_config.node_id.to_string();
        let mut view = BrokerView::from_static(static_config, origins);
        let keep = |scope: &str, m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
            m.iter()
                .filter(|(k, v)| match validate_value(k, v) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::error!(scope, key = %k, error = %e, "ignoring invalid stored dynamic broker config");
                        false
                    }
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        view.cluster = keep("cluster default", &stored.cluster);
        view.node = stored
            .brokers
            .get(&node_id)
            .map(|m| keep("broker", m))
            .unwrap_or_default();
        view.config = view.layered();
        view
    }

    /// The same view with new dynamic values for `scope` (`None` = cluster default).
    pub fn replaced(&self, node_scope: bool, values: BTreeMap<String, String>) -> Self {
        let mut v = self.clone();
        if node_scope {
            v.node = values;
        } else {
            v.cluster = values;
        }
        v.config = v.layered();
        v
    }

    /// The dynamic value of the broker config `name` (Kafka name) and its source.
    pub fn dynamic(&self, name: &str) -> Option<(&str, ConfigSource)> {
        self.node
            .get(name)
            .map(|v| (v.as_str(), ConfigSource::DynamicBroker))
            .or_else(|| {
                self.cluster
                    .get(name)
                    .map(|v| (v.as_str(), ConfigSource::DynamicDefaultBroker))
            })
    }

    /// Every level that sets the broker config `name`, highest first (DescribeConfigs'
    /// synonyms): per-broker, cluster default, static. The default level is the caller's.
    pub fn levels(&self, name: &str) -> Vec<(String, ConfigSource)> {
        let mut out = Vec::new();
        if let Some(v) = self.node.get(name) {
            out.push((v.clone(), ConfigSource::DynamicBroker));
        }
        if let Some(v) = self.cluster.get(name) {
            out.push((v.clone(), ConfigSource::DynamicDefaultBroker));
        }
        if let Some(key) = super::field_for_kafka_name(name) {
            if self.origins.contains_key(&key) {
                if let Some(v) = field_value(&self.static_config, &key) {
                    out.push((v, ConfigSource::StaticBroker));
                }
            }
        }
        out
    }

    /// Static config with cluster defaults, then per-broker values, written into the fields.
    fn layered(&self) -> BrokerConfig {
        let mut table = toml::Table::try_from(&self.static_config).unwrap_or_default();
        for (name, value) in self.cluster.iter().chain(self.node.iter()) {
            let Some(key) = super::field_for_kafka_name(name) else {
                continue;
            };
            table.insert(key.clone(), super::typed_value(&key, value));
        }
        match table.try_into::<BrokerConfig>() {
            Ok(c) => c,
            Err(e) => {
                // Values were validated with Kafka's rules before being accepted; a field type
                // that still refuses one keeps the static config rather than stop the broker.
                tracing::error!(error = %e, "dynamic broker configs do not fit the broker config; using static values");
                self.static_config.clone()
            }
        }
    }
}

/// The string form of one field of `config`, as DescribeConfigs shows it.
pub fn field_value(config: &BrokerConfig, key: &str) -> Option<String> {
    let table = toml::Table::try_from(config).ok()?;
    match table.get(key)? {
        toml::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Why a dynamic broker config change is refused. Kafka wraps every broker-side validation
/// failure in InvalidRequestException (KAFKA-13609), so these all answer INVALID_REQUEST.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BrokerConfigError {
    #[error("Cannot update these configs dynamically: Set({})", .0.join(", "))]
    NotDynamic(Vec<String>),
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    Invalid {
        name: String,
        value: String,
        reason: String,
    },
}

/// Checks one dynamic broker value with the rules of the topic config it is the default of.
/// Names Kafka does not know are custom configs, which Kafka accepts as given.
pub fn validate_value(name: &str, value: &str) -> Result<(), BrokerConfigError> {
    if let Some(d) = dynamic_topic_default(name) {
        return topic::validate(d.name, value).map_err(|e| match e {
            topic::TopicConfigError::Invalid { value, reason, .. } => BrokerConfigError::Invalid {
                name: name.into(),
                value,
                reason,
            },
            topic::TopicConfigError::Unknown(n) => BrokerConfigError::NotDynamic(vec![n]),
            topic::TopicConfigError::Rule(reason) => BrokerConfigError::Invalid {
                name: name.into(),
                value: value.into(),
                reason,
            },
        });
    }
    if let Some(r) = validate_applied(name, value) {
        return r;
    }
    if is_kafka_static(name) {
        return Err(BrokerConfigError::NotDynamic(vec![name.into()]));
    }
    Ok(())
}

/// Checks a whole new set of dynamic values for one scope, naming every non-dynamic key at
/// once as Kafka does.
pub fn validate_all(values: &BTreeMap<String, String>) -> Result<(), BrokerConfigError> {
    let not_dynamic: Vec<String> = values
        .keys()
        .filter(|k| {
            dynamic_topic_default(k).is_none()
                && !APPLIED_BROKER_DYNAMIC.contains(&k.as_str())
                && is_kafka_static(k)
        })
        .cloned()
        .collect();
    if !not_dynamic.is_empty() {
        return Err(BrokerConfigError::NotDynamic(not_dynamic));
    }
    for (k, v) in values {
        validate_value(k, v)?;
    }
    Ok(())
}

/// Kafka's type of the broker config `name`, for APPEND/SUBTRACT (list configs only) and
/// DescribeConfigs.
pub fn kind(name: &str) -> Option<ConfigType> {
    dynamic_topic_default(name).map(|d| d.kind)
}

/// Kafka's default of a broker config Strom only knows as a topic default.
pub fn kafka_default(name: &str) -> Option<&'static str> {
    dynamic_topic_default(name).map(|d| d.default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_stored_values_when_layered_then_node_over_cluster_over_static() {
        let mut stored = StoredDynamic::default();
        stored
            .cluster
            .insert("message.max.bytes".into(), "2000".into());
        stored
            .cluster
            .insert("log.segment.bytes".into(), "4096".into());
        stored.brokers.insert(
            "0".into(),
            [("message.max.bytes".to_string(), "3000".to_string())].into(),
        );
        // Another node's values and an invalid stored value are ignored.
        stored.brokers.insert(
            "7".into(),
            [("log.retention.ms".to_string(), "5".to_string())].into(),
        );
        stored.cluster.insert("log.roll.ms".into(), "zero".into());
        let v = BrokerView::with_dynamic(BrokerConfig::default(), BTreeMap::new(), &stored);
        assert_eq!(v.config.message_max_bytes, 3000);
        assert_eq!(v.config.log_segment_bytes, 4096);
        assert_eq!(
            v.config.log_retention_ms,
            BrokerConfig::default().log_retention_ms
        );
        assert_eq!(v.config.log_roll_ms, BrokerConfig::default().log_roll_ms);
        assert_eq!(
            v.dynamic("message.max.bytes"),
            Some(("3000", ConfigSource::DynamicBroker))
        );
        assert_eq!(
            v.dynamic("log.segment.bytes"),
            Some(("4096", ConfigSource::DynamicDefaultBroker))
        );
        let levels: Vec<ConfigSource> = v
            .levels("message.max.bytes")
            .into_iter()
            .map(|l| l.1)
            .collect();
        assert_eq!(
            levels,
            [
                ConfigSource::DynamicBroker,
                ConfigSource::DynamicDefaultBroker
            ]
        );
    }

    #[test]
    fn given_values_when_validating_then_kafka_rules_and_messages() {
        assert!(validate_value("log.retention.ms", "1000").is_ok());
        assert!(validate_value("log.cleaner.delete.retention.ms", "5").is_ok());
        assert!(validate_value("some.custom.plugin.config", "x").is_ok());
        assert_eq!(
            validate_value("log.segment.bytes", "13")
                .unwrap_err()
                .to_string(),
            "Invalid value 13 for configuration log.segment.bytes: Value must be at least 14"
        );
        let mut m = BTreeMap::new();
        m.insert("log.dirs".to_string(), "/x".to_string());
        m.insert("node.id".to_string(), "3".to_string());
        m.insert("message.max.bytes".to_string(), "10".to_string());
        assert_eq!(
            validate_all(&m).unwrap_err().to_string(),
            "Cannot update these configs dynamically: Set(log.dirs, node.id)"
        );
        assert!(matches!(
            validate_value("num.io.threads", "8"),
            Err(BrokerConfigError::NotDynamic(_))
        ));
    }

    #[test]
    fn given_applied_broker_only_configs_when_altered_then_validated_and_layered() {
        assert!(validate_value("log.cleaner.backoff.ms", "250").is_ok());
        assert!(validate_value("log.cleaner.io.max.bytes.per.second", "4.0E7").is_ok());
        assert!(validate_value("producer.id.expiration.ms", "60000").is_ok());
        assert!(validate_value("errors.deadletterqueue.topic.name.prefix", "").is_ok());
        for (name, bad) in [
            ("log.cleaner.backoff.ms", "-1"),
            ("log.cleaner.backoff.ms", "soon"),
            ("log.cleaner.io.max.bytes.per.second", "0"),
            ("log.cleaner.io.max.bytes.per.second", "NaN"),
            ("producer.id.expiration.ms", "0"),
            ("producer.id.expiration.ms", "3000000000"),
            ("errors.deadletterqueue.auto.create.topics.enable", "yes"),
        ] {
            assert!(
                matches!(
                    validate_value(name, bad),
                    Err(BrokerConfigError::Invalid { .. })
                ),
                "{name}={bad}"
            );
        }
        let m: BTreeMap<String, String> = APPLIED_BROKER_DYNAMIC
            .iter()
            .map(|n| {
                let v = if n.ends_with(".enable") {
                    "true"
                } else {
                    "1000"
                };
                (n.to_string(), v.to_string())
            })
            .collect();
        assert!(validate_all(&m).is_ok());
        // Kafka's other cleaner settings are dynamic there but not applied here: refused.
        assert!(matches!(
            validate_value("log.cleaner.threads", "2"),
            Err(BrokerConfigError::NotDynamic(_))
        ));
        let mut stored = StoredDynamic::default();
        stored.cluster.extend(m);
        let v = BrokerView::with_dynamic(BrokerConfig::default(), BTreeMap::new(), &stored);
        assert_eq!(v.config.log_cleaner_backoff_ms, 1000);
        assert_eq!(v.config.log_cleaner_io_max_bytes_per_second, 1000.0);
        assert_eq!(v.config.producer_id_expiration_ms, 1000);
    }

    #[test]
    fn given_saved_file_when_loading_then_same_values() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), StoredDynamic::default());
        let mut s = StoredDynamic {
            version: 1,
            ..Default::default()
        };
        s.cluster.insert("log.retention.ms".into(), "1".into());
        save(dir.path(), &s).unwrap();
        assert_eq!(load(dir.path()).unwrap(), s);
        std::fs::write(dir.path().join(FILE_NAME), b"{").unwrap();
        assert!(matches!(
            load(dir.path()),
            Err(DynamicFileError::Corrupt { .. })
        ));
    }
}
