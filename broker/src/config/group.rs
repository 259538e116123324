//! Group configs (the GROUP config resource, KIP-848): the names, types and defaults Kafka
//! 4.4's `GroupConfig` defines, and its validation. Strom applies the two that its consumer
//! group coordinator has (`consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`)
//! the share group ones `coordinator::share::ShareConfig` reads and the streams group ones
//! (`streams_settings`); the others belong to features Strom does not have (rack-aware
//! standby placement, the assignment interval of an asynchronous consumer assignor) and are
//! listed with Kafka's defaults as read-only, so an alter cannot store a value that does
//! nothing.

use std::collections::BTreeMap;

use super::share_reset::OffsetReset;
use super::topic::ConfigType;
use super::BrokerConfig;

pub const SESSION_TIMEOUT: &str = "consumer.session.timeout.ms";
pub const HEARTBEAT_INTERVAL: &str = "consumer.heartbeat.interval.ms";

/// Kafka's broker bounds of the two (`group.consumer.{min,max}.*`; Strom has no settings for
/// them, so their defaults apply, widened to take in this broker's own defaults).
const MIN_SESSION: i32 = 45_000;
const MAX_SESSION: i32 = 60_000;
const MIN_HEARTBEAT: i32 = 5_000;
const MAX_HEARTBEAT: i32 = 15_000;

pub struct GroupConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    /// Kafka's default (for the two Strom applies, the broker's config supplies it).
    pub default: &'static str,
    /// The broker config Kafka names as its synonym.
    pub synonym: &'static str,
    pub applied: bool,
}

const fn def(
    name: &'static str,
    kind: ConfigType,
    default: &'static str,
    synonym: &'static str,
    applied: bool,
) -> GroupConfigDef {
    GroupConfigDef {
        name,
        kind,
        default,
        synonym,
        applied,
    }
}

use ConfigType::{Boolean, Int, List, String as Str};

/// Kafka 4.4's group configs, by name.
pub static GROUP_CONFIGS: &[GroupConfigDef] = &[
    def(
        "consumer.assignment.interval.ms",
        Int,
        "1000",
        "group.consumer.assignment.interval.ms",
        false,
    ),
    def(
        HEARTBEAT_INTERVAL,
        Int,
        "5000",
        "group.consumer.heartbeat.interval.ms",
        true,
    ),
    def(
        SESSION_TIMEOUT,
        Int,
        "45000",
        "group.consumer.session.timeout.ms",
        true,
    ),
    def(
        "errors.deadletterqueue.copy.record.enable",
        Boolean,
        "false",
        "errors.deadletterqueue.copy.record.enable",
        true,
    ),
    def(
        "errors.deadletterqueue.topic.name",
        Str,
        "",
        "errors.deadletterqueue.topic.name",
        true,
    ),
    def(
        "share.assignment.interval.ms",
        Int,
        "1000",
        "group.share.assignment.interval.ms",
        false,
    ),
    def(
        "share.auto.offset.reset",
        Str,
        "latest",
        "share.auto.offset.reset",
        true,
    ),
    def(
        "share.delivery.count.limit",
        Int,
        "5",
        "group.share.delivery.count.limit",
        true,
    ),
    def(
        "share.heartbeat.interval.ms",
        Int,
        "5000",
        "group.share.heartbeat.interval.ms",
        true,
    ),
    def(
        "share.isolation.level",
        Str,
        "read_uncommitted",
        "share.isolation.level",
        true,
    ),
    def(
        "share.partition.max.record.locks",
        Int,
        "2000",
        "group.share.partition.max.record.locks",
        true,
    ),
    def(
        "share.record.lock.duration.ms",
        Int,
        "30000",
        "group.share.record.lock.duration.ms",
        true,
    ),
    def(
        "share.renew.acknowledge.enable",
        Boolean,
        "true",
        "share.renew.acknowledge.enable",
        true,
    ),
    def(
        "share.session.timeout.ms",
        Int,
        "45000",
        "group.share.session.timeout.ms",
        true,
    ),
    def(
        "streams.assignment.interval.ms",
        Int,
        "1000",
        "group.streams.assignment.interval.ms",
        true,
    ),
    def(
        "streams.assignor.name",
        Str,
        "sticky",
        "group.streams.assignors",
        true,
    ),
    def(
        "streams.heartbeat.interval.ms",
        Int,
        "5000",
        "group.streams.heartbeat.interval.ms",
        true,
    ),
    def(
        "streams.initial.rebalance.delay.ms",
        Int,
        "3000",
        "group.streams.initial.rebalance.delay.ms",
        true,
    ),
    def(
        "streams.num.standby.replicas",
        Int,
        "0",
        "group.streams.num.standby.replicas",
        true,
    ),
    def(
        "streams.rack.aware.assignment.tags",
        List,
        "",
        "group.streams.rack.aware.assignment.tags",
        false,
    ),
    def(
        "streams.session.timeout.ms",
        Int,
        "45000",
        "group.streams.session.timeout.ms",
        true,
    ),
];

pub fn find(name: &str) -> Option<&'static GroupConfigDef> {
    GROUP_CONFIGS.iter().find(|d| d.name == name)
}

/// The value a group without an override has.
pub fn default_value(d: &GroupConfigDef, broker: &BrokerConfig) -> String {
    match d.name {
        SESSION_TIMEOUT => broker.group_consumer_session_timeout_ms.to_string(),
        HEARTBEAT_INTERVAL => broker.group_consumer_heartbeat_interval_ms.to_string(),
        _ => d.default.to_string(),
    }
}

/// The session timeout and heartbeat interval in force for a group with `overrides`.
pub fn consumer_timeouts(
    overrides: Option<&BTreeMap<String, String>>,
    broker: &BrokerConfig,
) -> (i32, i32) {
    let get = |name: &str, default: i32| {
        overrides
            .and_then(|o| o.get(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    (
        get(SESSION_TIMEOUT, broker.group_consumer_session_timeout_ms),
        get(
            HEARTBEAT_INTERVAL,
            broker.group_consumer_heartbeat_interval_ms,
        ),
    )
}

/// Kafka's `GroupConfig.validate` of a group's full override set (names, types, `atLeast(1)`,
/// the broker bounds, session above heartbeat), plus Strom's refusal of the configs it does
/// not apply. The message is Kafka's; the error is INVALID_CONFIG.
pub fn validate(overrides: &BTreeMap<String, String>, broker: &BrokerConfig) -> Result<(), String> {
    for (name, value) in overrides {
        let Some(d) = find(name) else {
            return Err(format!("Unknown group config name: {name}"));
        };
        if !d.applied {
            return Err(format!(
                "Group config {name} is read-only on Strom: it has no {} here",
                feature_of(name)
            ));
        }
        if let Some(msg) = share_invalid(name, value).or_else(|| streams_invalid(name, value)) {
            return Err(msg);
        }
        if d.kind == Boolean
            && !["true", "false"]
                .iter()
                .any(|b| value.trim().eq_ignore_ascii_case(b))
        {
            return Err(format!(
                "Invalid value {value} for configuration {name}: Expected value to be either true or false"
            ));
        }
        if d.kind != Int {
            continue;
        }
        let n: i32 = value.trim().parse().map_err(|_| {
            format!("Invalid value {value} for configuration {name}: Not a number of type INT")
        })?;
        // Kafka's `atLeast(0)` for these: no standby, no delay, no interval.
        let zero_ok = matches!(
            name.as_str(),
            "streams.num.standby.replicas"
                | "streams.initial.rebalance.delay.ms"
                | "streams.assignment.interval.ms"
        );
        if n < i32::from(!zero_ok) {
            return Err(format!(
                "Invalid value {value} for configuration {name}: Value must be at least 1"
            ));
        }
    }
    let (session, heartbeat) = consumer_timeouts(Some(overrides), broker);
    let bound = |min: i32, max: i32, own: i32| (min.min(own), max.max(own));
    let (min_hb, max_hb) = bound(
        MIN_HEARTBEAT,
        MAX_HEARTBEAT,
        broker.group_consumer_heartbeat_interval_ms,
    );
    let (min_s, max_s) = bound(
        MIN_SESSION,
        MAX_SESSION,
        broker.group_consumer_session_timeout_ms,
    );
    if heartbeat < min_hb {
        return Err(format!("{HEARTBEAT_INTERVAL} must be greater than or equal to group.consumer.min.heartbeat.interval.ms"));
    }
    if heartbeat > max_hb {
        return Err(format!("{HEARTBEAT_INTERVAL} must be less than or equal to group.consumer.max.heartbeat.interval.ms"));
    }
    if session < min_s {
        return Err(format!("{SESSION_TIMEOUT} must be greater than or equal to group.consumer.min.session.timeout.ms"));
    }
    if session > max_s {
        return Err(format!(
            "{SESSION_TIMEOUT} must be less than or equal to group.consumer.max.session.timeout.ms"
        ));
    }
    if session <= heartbeat {
        return Err(format!(
            "{SESSION_TIMEOUT} must be greater than {HEARTBEAT_INTERVAL}"
        ));
    }
    Ok(())
}

/// Kafka's bounds of the share group configs Strom applies (`GroupConfig`): the delivery
/// count limit 2..=10, the lock duration 1 s ..= 1 h (Kafka's broker bounds
/// `group.share.{min,max}.record.lock.duration.ms` can be set that wide), and
/// `share.auto.offset.reset` earliest, latest or `by_duration:<duration>`.
fn share_invalid(name: &str, value: &str) -> Option<String> {
    let int = || value.trim().parse::<i64>().ok();
    let out_of = |lo: i64, hi: i64| {
        (!int().is_some_and(|v| (lo..=hi).contains(&v))).then(|| {
            format!("Invalid value {value} for configuration {name}: Value must be in [{lo}, {hi}]")
        })
    };
    match name {
        // Kafka's `ShareGroupAutoOffsetResetStrategy.Validator` and its message.
        "share.auto.offset.reset" => OffsetReset::parse(value).err().map(|_| {
            let v = value.trim();
            format!("Invalid value {v} for configuration {name}: Invalid value `{v}` for configuration {name}. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
        }),
        "share.isolation.level" => (!["read_committed", "read_uncommitted"]
            .iter()
            .any(|v| value.trim().eq_ignore_ascii_case(v)))
        .then(|| {
            format!("Invalid value {value} for configuration {name}: String must be one of: read_committed, read_uncommitted")
        }),
        "share.delivery.count.limit" => out_of(2, 10),
        "share.record.lock.duration.ms" => out_of(1_000, 3_600_000),
        // Kafka checks only this at config time (KIP-1191); the prefix, the topic's existence
        // and its `errors.deadletterqueue.group.enable` are checked at each write.
        "errors.deadletterqueue.topic.name" if value.starts_with("__") => {
            Some(format!("{name}: DLQ topic name must not start with '__'"))
        }
        _ => None,
    }
}

/// Kafka's bounds of the streams group configs (the broker's `group.streams.min/max.*`
/// defaults): session 45..=60 s, heartbeat 5..=15 s, at most 2 standbys, an assignment
/// interval of at most 15 s, and the heartbeat below the session timeout.
fn streams_invalid(name: &str, value: &str) -> Option<String> {
    let v = value.trim().parse::<i64>().ok()?;
    let (lo, hi, what) = match name {
        "streams.session.timeout.ms" => {
            (45_000, 60_000, "group.streams.{min,max}.session.timeout.ms")
        }
        "streams.heartbeat.interval.ms" => (
            5_000,
            15_000,
            "group.streams.{min,max}.heartbeat.interval.ms",
        ),
        "streams.num.standby.replicas" => (0, 2, "[0, group.streams.max.standby.replicas]"),
        "streams.assignment.interval.ms" => (0, 15_000, "[0, 15000]"),
        _ => return None,
    };
    (!(lo..=hi).contains(&v))
        .then(|| format!("Invalid value {value} for configuration {name}: must be within {what}"))
}

/// The streams group settings in force for a group with `overrides` (the broker's defaults
/// are Kafka's: `group.streams.*`).
pub fn streams_settings(
    overrides: Option<&BTreeMap<String, String>>,
) -> crate::coordinator::group::streams::StreamsConfig {
    let get = |name: &str| -> i64 {
        overrides
            .and_then(|o| o.get(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| find(name).expect("streams config").default.parse().unwrap())
    };
    crate::coordinator::group::streams::StreamsConfig {
        session_timeout_ms: get("streams.session.timeout.ms") as i32,
        heartbeat_interval_ms: get("streams.heartbeat.interval.ms") as i32,
        max_size: i32::MAX as usize,
        num_standby_replicas: get("streams.num.standby.replicas") as i32,
        initial_rebalance_delay_ms: get("streams.initial.rebalance.delay.ms"),
        assignment_interval_ms: get("streams.assignment.interval.ms"),
        task_offset_interval_ms: 60_000,
        acceptable_recovery_lag: 10_000,
    }
}

fn feature_of(name: &str) -> &'static str {
    if name.starts_with("share.") {
        "share groups"
    } else if name.starts_with("streams.") {
        "rack-aware assignment of streams groups"
    } else if name.starts_with("errors.deadletterqueue.") {
        "dead-letter queues"
    } else {
        "asynchronous assignor (assignments are computed at each heartbeat)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str, value: &str) -> BTreeMap<String, String> {
        [(name.to_string(), value.to_string())].into()
    }

    #[test]
    fn given_group_overrides_when_validated_then_kafka_rules_and_messages() {
        let b = BrokerConfig::default();
        assert_eq!(validate(&one(SESSION_TIMEOUT, "50000"), &b), Ok(()));
        assert_eq!(
            validate(&one("nope", "1"), &b).unwrap_err(),
            "Unknown group config name: nope"
        );
        assert_eq!(
            validate(&one(SESSION_TIMEOUT, "x"), &b).unwrap_err(),
            "Invalid value x for configuration consumer.session.timeout.ms: Not a number of type INT"
        );
        assert!(validate(&one(SESSION_TIMEOUT, "0"), &b)
            .unwrap_err()
            .ends_with("Value must be at least 1"));
        assert_eq!(
            validate(&one(SESSION_TIMEOUT, "70000"), &b).unwrap_err(),
            "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"
        );
        assert_eq!(
            validate(&one(HEARTBEAT_INTERVAL, "4000"), &b).unwrap_err(),
            "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"
        );
        let both: BTreeMap<_, _> = [
            (SESSION_TIMEOUT.to_string(), "45000".to_string()),
            (HEARTBEAT_INTERVAL.to_string(), "15000".to_string()),
        ]
        .into();
        assert_eq!(validate(&both, &b), Ok(()));
        assert!(
            validate(&one("streams.rack.aware.assignment.tags", "zone"), &b)
                .unwrap_err()
                .contains("streams groups")
        );
        assert_eq!(
            validate(&one("streams.num.standby.replicas", "0"), &b),
            Ok(())
        );
        assert!(validate(&one("streams.session.timeout.ms", "30000"), &b).is_err());
        // The share group configs Strom applies, with Kafka's bounds.
        assert_eq!(
            validate(&one("share.session.timeout.ms", "45000"), &b),
            Ok(())
        );
        assert_eq!(
            validate(&one("share.auto.offset.reset", "earliest"), &b),
            Ok(())
        );
        assert!(validate(&one("share.auto.offset.reset", "by_duration:PT1H"), &b).is_ok());
        assert_eq!(
            validate(&one("share.auto.offset.reset", "by_duration:-PT1H"), &b),
            Err("Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: Invalid value `by_duration:-PT1H` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.".into())
        );
        assert!(validate(&one("share.auto.offset.reset", "Earliest"), &b).is_err());
        assert!(validate(&one("share.delivery.count.limit", "1"), &b).is_err());
        assert!(validate(&one("share.record.lock.duration.ms", "999"), &b).is_err());
        assert!(validate(&one("share.isolation.level", "read_committed"), &b).is_ok());
        assert!(validate(&one("share.isolation.level", "serializable"), &b).is_err());
        // KIP-1191: the dead-letter topic's name may not be internal; booleans are booleans.
        assert_eq!(
            validate(&one("errors.deadletterqueue.topic.name", "__dlq"), &b),
            Err(
                "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'".into()
            )
        );
        assert_eq!(
            validate(&one("errors.deadletterqueue.topic.name", "dlq.x"), &b),
            Ok(())
        );
        assert!(validate(&one("errors.deadletterqueue.copy.record.enable", "yes"), &b).is_err());
        assert!(validate(&one("share.renew.acknowledge.enable", "false"), &b).is_ok());
        assert_eq!(consumer_timeouts(Some(&both), &b), (45000, 15000));
        assert_eq!(consumer_timeouts(None, &b), (45000, 5000));
    }
}
