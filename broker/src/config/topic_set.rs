//! The rules Kafka checks over a topic's whole config set once each value is valid on its
//! own (`LogConfig.validate` with the broker's log configs: `validateValues` and
//! `validateTopicLogConfigValues`). Each rule reads the topic's effective values — its
//! overrides over the broker's dynamic and static defaults, as Kafka's
//! `extractLogConfigMap` supplies them — so a topic override that conflicts with a broker
//! default is refused too. Kafka answers INVALID_CONFIG with these messages, worded as
//! Kafka words them so tools show the same text.

use std::collections::BTreeMap;

use super::dynamic::BrokerView;
use super::effective::effective;
use super::topic::find;
use super::topic_def::TopicConfigError;

/// Kafka's `validateTurningOffRemoteStorageWithDelete` text.
pub const REMOTE_OFF_WITHOUT_DELETE: &str = "It is invalid to disable remote storage without deleting remote data. If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.";

/// Checks the topic config set `configs` (the topic's overrides after the change), the
/// topic's overrides before it being `existing` (empty for a new topic).
pub fn validate_set(
    configs: &BTreeMap<String, String>,
    existing: &BTreeMap<String, String>,
    broker: &BrokerView,
) -> Result<(), TopicConfigError> {
    let get = |name: &str| match find(name) {
        Some(d) => effective(d, configs, broker).value,
        None => configs.get(name).cloned().unwrap_or_default(),
    };
    // Kafka's `validateValues`: the only rule it checks whatever else is set.
    let long = |name: &str| get(name).trim().parse::<i64>().unwrap_or_default();
    let (min_lag, max_lag) = (long("min.compaction.lag.ms"), long("max.compaction.lag.ms"));
    if min_lag > max_lag {
        return Err(TopicConfigError::Rule(format!(
            "conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})"
        )));
    }
    let enabled = |v: String| v.trim().eq_ignore_ascii_case("true");
    if enabled(get("remote.storage.enable")) {
        return super::tiered::validate_remote(
            &get,
            broker.config.remote_log_storage_system_enable,
        );
    }
    // Turning remote storage off must say what becomes of the remote data (Kafka reads the
    // topic's own previous override, not a default).
    let was_remote = existing
        .get("remote.storage.enable")
        .is_some_and(|v| enabled(v.clone()));
    if was_remote && !enabled(get("remote.log.delete.on.disable")) {
        return Err(TopicConfigError::Rule(REMOTE_OFF_WITHOUT_DELETE.into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;

    fn set(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn view(config: BrokerConfig) -> BrokerView {
        BrokerView::from_static(config, BTreeMap::new())
    }

    #[test]
    fn given_min_compaction_lag_above_max_when_validating_then_kafkas_conflict_message() {
        let broker = view(BrokerConfig::default());
        let none = BTreeMap::new();
        let conflict = set(&[
            ("min.compaction.lag.ms", "5000"),
            ("max.compaction.lag.ms", "1000"),
        ]);
        assert_eq!(
            validate_set(&conflict, &none, &broker).unwrap_err().to_string(),
            "conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms (1000)"
        );
        // Equal is allowed, and each alone against Kafka's defaults (0 and Long.MAX_VALUE).
        let equal = set(&[
            ("min.compaction.lag.ms", "1000"),
            ("max.compaction.lag.ms", "1000"),
        ]);
        validate_set(&equal, &none, &broker).unwrap();
        validate_set(
            &set(&[("min.compaction.lag.ms", "9999999")]),
            &none,
            &broker,
        )
        .unwrap();
        validate_set(&set(&[("max.compaction.lag.ms", "1")]), &none, &broker).unwrap();
    }

    #[test]
    fn given_override_conflicting_with_a_broker_default_when_validating_then_refused() {
        let mut broker = view(BrokerConfig::default());
        broker
            .cluster
            .insert("log.cleaner.max.compaction.lag.ms".into(), "60000".into());
        let none = BTreeMap::new();
        let e = validate_set(&set(&[("min.compaction.lag.ms", "70000")]), &none, &broker)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "conflict topic config setting min.compaction.lag.ms (70000) > max.compaction.lag.ms (60000)"
        );
        validate_set(&set(&[("min.compaction.lag.ms", "60000")]), &none, &broker).unwrap();
    }

    #[test]
    fn given_remote_storage_turned_off_when_validating_then_refused_without_delete_on_disable() {
        let broker = view(BrokerConfig {
            remote_log_storage_system_enable: true,
            remote_storage_local_path: "x".into(),
            ..BrokerConfig::default()
        });
        let was = set(&[("remote.storage.enable", "true")]);
        for off in [set(&[("remote.storage.enable", "false")]), BTreeMap::new()] {
            assert_eq!(
                validate_set(&off, &was, &broker).unwrap_err().to_string(),
                REMOTE_OFF_WITHOUT_DELETE
            );
        }
        let with_delete = set(&[
            ("remote.storage.enable", "false"),
            ("remote.log.delete.on.disable", "true"),
        ]);
        validate_set(&with_delete, &was, &broker).unwrap();
        // Never on, or staying on: nothing to say.
        validate_set(&BTreeMap::new(), &BTreeMap::new(), &broker).unwrap();
        validate_set(&was, &was, &broker).unwrap();
    }
}
