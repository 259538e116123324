//! Tiered storage's configs (docs/tiered-storage.md): the rules Kafka checks over the config
//! set of a topic with remote storage (`LogConfig.validateRemoteStorage*`, called from
//! `topic_set`), the broker's object store choice, and a topic's resolved tiered settings.

use super::topic_def::TopicConfigError;
use super::BrokerConfig;
use storage::remote::store::StoreConfig;

/// Kafka's `ConfigException` texts (LogConfig), so tools see the same words.
pub const DISABLED_IN_BROKER: &str = "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.";
pub const COMPACTED: &str = "Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list.";

/// The rules over a topic with `remote.storage.enable=true`, in Kafka's order, `get` giving
/// each config's effective value: the broker switch, `cleanup.policy` exactly `delete` (or
/// empty), and the local retention within the total, bytes then time
/// (`validateRemoteStorageRetentionSize` / `Time`).
pub fn validate_remote(
    get: &dyn Fn(&str) -> String,
    system_enabled: bool,
) -> Result<(), TopicConfigError> {
    if !system_enabled {
        return Err(TopicConfigError::Rule(DISABLED_IN_BROKER.into()));
    }
    // Kafka's LIST parse: empty is no element, else comma-separated and trimmed.
    let policy = get("cleanup.policy");
    let policies: Vec<&str> = if policy.trim().is_empty() {
        Vec::new()
    } else {
        policy.split(',').map(str::trim).collect()
    };
    if !policies.is_empty() && policies != ["delete"] {
        return Err(TopicConfigError::Rule(COMPACTED.into()));
    }
    let long = |name: &str| get(name).trim().parse::<i64>().unwrap_or(-2);
    for (local, total) in [
        ("local.retention.bytes", "retention.bytes"),
        ("local.retention.ms", "retention.ms"),
    ] {
        let (l, t) = (long(local), long(total));
        // -2: as the total; -1: forever, which only an unbounded total allows.
        if t == -1 || l == -2 {
            continue;
        }
        let reason = if l == -1 {
            format!("Value must not be -1 as {total} value is set as {t}.")
        } else if l > t {
            format!("Value must not be more than {total} property value: {t}")
        } else {
            continue;
        };
        return Err(TopicConfigError::Invalid {
            name: local.into(),
            value: l.to_string(),
            reason,
        });
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

    #[test]
    fn given_remote_topic_configs_when_validating_then_kafkas_rules_and_messages() {
        let check = |kv: &[(&str, &str)], on: bool| {
            let get = |n: &str| {
                kv.iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
                    .unwrap_or_else(|| match n {
                        "cleanup.policy" => "delete".into(),
                        "retention.ms" => "604800000".into(),
                        "retention.bytes" => "-1".into(),
                        _ => "-2".into(),
                    })
            };
            validate_remote(&get, on).map_err(|e| e.to_string())
        };
        assert_eq!(check(&[], false).unwrap_err(), DISABLED_IN_BROKER);
        check(&[], true).unwrap();
        for policy in ["delete,compact", "compact", "delete,delete"] {
            assert_eq!(
                check(&[("cleanup.policy", policy)], true).unwrap_err(),
                COMPACTED,
                "{policy}"
            );
        }
        check(&[("cleanup.policy", "")], true).unwrap();
        assert_eq!(
            check(&[("retention.ms", "1000"), ("local.retention.ms", "2000")], true).unwrap_err(),
            "Invalid value 2000 for configuration local.retention.ms: Value must not be more than retention.ms property value: 1000"
        );
        assert_eq!(
            check(&[("retention.ms", "1000"), ("local.retention.ms", "-1")], true).unwrap_err(),
            "Invalid value -1 for configuration local.retention.ms: Value must not be -1 as retention.ms value is set as 1000."
        );
        // Bytes are checked before time, as in Kafka.
        let both = [
            ("retention.ms", "1000"),
            ("local.retention.ms", "2000"),
            ("retention.bytes", "10"),
            ("local.retention.bytes", "20"),
        ];
        assert!(check(&both, true)
            .unwrap_err()
            .contains("local.retention.bytes"));
        // An unbounded total allows any local retention.
        check(
            &[("retention.bytes", "-1"), ("local.retention.bytes", "-1")],
            true,
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
