//! Tiered storage's configs (docs/tiered-storage.md): the rules Kafka checks over a topic's
//! whole config set (`LogConfig.validateRemoteStorage*`), the broker's object store choice,
//! and a topic's resolved tiered settings.

use std::collections::BTreeMap;

use super::topic_def::TopicConfigError;
use super::BrokerConfig;
use storage::remote::store::StoreConfig;

/// Kafka's `ConfigException` texts (LogConfig), so tools see the same words.
pub const DISABLED_IN_BROKER: &str = "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.";
pub const COMPACTED: &str = "Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list.";

fn value<'a>(configs: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    configs.get(name).map(|v| v.trim())
}

fn long_or(configs: &BTreeMap<String, String>, name: &str, default: i64) -> i64 {
    value(configs, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The cross-config rules over a topic's overrides, each value already valid on its own:
/// remote storage needs the broker switch and `cleanup.policy` without `compact`, and the
/// local retention must not exceed the total (Kafka's `validateRemoteStorageRetention*`).
pub fn validate_set(
    configs: &BTreeMap<String, String>,
    broker: &BrokerConfig,
) -> Result<(), TopicConfigError> {
    let remote =
        value(configs, "remote.storage.enable").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !remote {
        return Ok(());
    }
    if !broker.remote_log_storage_system_enable {
        return Err(TopicConfigError::Rule(DISABLED_IN_BROKER.into()));
    }
    let policy = value(configs, "cleanup.policy").unwrap_or(&broker.log_cleanup_policy);
    if policy.split(',').any(|p| p.trim() == "compact") {
        return Err(TopicConfigError::Rule(COMPACTED.into()));
    }
    for (local, total, broker_total) in [
        (
            "local.retention.ms",
            "retention.ms",
            broker.log_retention_ms,
        ),
        (
            "local.retention.bytes",
            "retention.bytes",
            broker.log_retention_bytes,
        ),
    ] {
        let l = long_or(configs, local, -2);
        let t = long_or(configs, total, broker_total);
        // -2: as the total; -1: forever, which only an unbounded total allows.
        if l != -2 && t != -1 && (l == -1 || l > t) {
            return Err(TopicConfigError::Invalid {
                name: local.into(),
                value: l.to_string(),
                reason: format!("Value must not be more than {total} property value: {t}"),
            });
        }
    }
    Ok(())
}

/// The broker's object store, `None` when tiered storage is off.
pub fn store_config(broker: &BrokerConfig) -> Option<StoreConfig> {
    if !broker.remote_log_storage_system_enable {
        return None;
    }
    Some(if !broker.remote_storage_local_path.trim().is_empty() {
        StoreConfig::Local {
            path: broker.remote_storage_local_path.trim().into(),
        }
    } else {
        StoreConfig::S3 {
            endpoint: broker.remote_storage_s3_endpoint.trim().into(),
            bucket: broker.remote_storage_s3_bucket.trim().into(),
            region: broker.remote_storage_s3_region.trim().into(),
        }
    })
}

/// A topic's tiered settings, resolved from its effective configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TieredSettings {
    pub enabled: bool,
    /// `local.retention.ms` / `.bytes` with -2 replaced by the total.
    pub local_retention_ms: i64,
    pub local_retention_bytes: i64,
    pub tenant: String,
    pub prefix_template: String,
}

impl TieredSettings {
    pub fn resolve(get: impl Fn(&str) -> String, total_ms: i64, total_bytes: i64) -> Self {
        let long = |n: &str| get(n).trim().parse::<i64>().unwrap_or(-2);
        let or_total = |v: i64, total: i64| if v == -2 { total } else { v };
        TieredSettings {
            enabled: get("remote.storage.enable")
                .trim()
                .eq_ignore_ascii_case("true"),
            local_retention_ms: or_total(long("local.retention.ms"), total_ms),
            local_retention_bytes: or_total(long("local.retention.bytes"), total_bytes),
            tenant: get("strom.tenant").trim().to_string(),
            prefix_template: get("strom.remote.prefix").trim().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn given_remote_topic_configs_when_validating_then_kafkas_rules_and_messages() {
        let off = BrokerConfig::default();
        let on = BrokerConfig {
            remote_log_storage_system_enable: true,
            remote_storage_local_path: "x".into(),
            ..BrokerConfig::default()
        };
        let remote = [("remote.storage.enable", "true")];
        assert_eq!(
            validate_set(&set(&remote), &off).unwrap_err().to_string(),
            DISABLED_IN_BROKER
        );
        validate_set(&set(&remote), &on).unwrap();
        let compact = set(&[
            ("remote.storage.enable", "true"),
            ("cleanup.policy", "delete,compact"),
        ]);
        assert_eq!(
            validate_set(&compact, &on).unwrap_err().to_string(),
            COMPACTED
        );
        let compact_broker = BrokerConfig {
            log_cleanup_policy: "compact".into(),
            ..on.clone()
        };
        assert!(validate_set(&set(&remote), &compact_broker).is_err());
        let too_long = set(&[
            ("remote.storage.enable", "true"),
            ("retention.ms", "1000"),
            ("local.retention.ms", "2000"),
        ]);
        let e = validate_set(&too_long, &on).unwrap_err().to_string();
        assert!(
            e.contains("local.retention.ms") && e.contains("retention.ms property value: 1000"),
            "{e}"
        );
        validate_set(
            &set(&[
                ("remote.storage.enable", "true"),
                ("retention.bytes", "-1"),
                ("local.retention.bytes", "-1"),
            ]),
            &on,
        )
        .unwrap();
        // Without remote storage the rules do not apply (Kafka checks them only then).
        validate_set(
            &set(&[("cleanup.policy", "compact"), ("local.retention.ms", "5")]),
            &off,
        )
        .unwrap();
    }

    #[test]
    fn given_local_retention_minus_two_when_resolving_then_total() {
        let get = |n: &str| match n {
            "remote.storage.enable" => "true".to_string(),
            "local.retention.ms" => "-2".to_string(),
            "local.retention.bytes" => "100".to_string(),
            "strom.tenant" => "acme".to_string(),
            _ => String::new(),
        };
        let t = TieredSettings::resolve(get, 5000, -1);
        assert!(t.enabled);
        assert_eq!((t.local_retention_ms, t.local_retention_bytes), (5000, 100));
        assert_eq!(t.tenant, "acme");
    }
}
