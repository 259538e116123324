//! Share groups (KIP-932, Kafka's queues): members that read the same partitions
//! cooperatively, each record locked to one member at a time and acknowledged on its own.
//! Design: `docs/queues.md`.
//!
//! Data flow: ShareGroupHeartbeat → `group` on the group's coordinator shard (members,
//! epochs, the simple assignor). ShareFetch / ShareAcknowledge → `session` (Kafka's
//! `ShareSessionCache`, on the connection's shard) → `store` on each data partition's home
//! shard, where the partition's `inflight` state acquires records from the log next to it
//! and applies acknowledgements, then writes a `ShareSnapshot` (`records`) to
//! `__share_group_state` and waits for its fsync before the answer leaves. The first touch
//! of a share partition after a start replays its newest snapshot.

pub mod admin;
pub mod dlq;
pub mod group;
pub mod inflight;
pub mod persist;
pub mod records;
pub mod session;
pub mod store;

use std::collections::BTreeMap;

pub use crate::config::share_reset::OffsetReset;
use crate::config::BrokerConfig;
use crate::coordinator::log::CoordinatorLogError;
use inflight::Limits;

/// Kafka's share coordinator topic.
pub const SHARE_STATE_TOPIC: &str = "__share_group_state";
/// Kafka's `share.coordinator.state.topic.segment.bytes` default.
pub const SHARE_STATE_SEGMENT_BYTES: &str = "104857600";

/// Everything a share operation can fail with; handlers map it to Kafka's codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    #[error("the share state is not available: {0}")]
    CoordinatorNotAvailable(String),
    // Kafka's message for UNKNOWN_TOPIC_OR_PARTITION, which its tools print.
    #[error("This server does not host this topic-partition.")]
    UnknownTopicOrPartition,
    #[error("the member id is not known to the share group")]
    UnknownMemberId,
    #[error("the member epoch is not the member's current one")]
    FencedMemberEpoch,
    #[error("the group id is not a share group's")]
    InconsistentGroupProtocol,
    #[error("the group does not exist")]
    GroupIdNotFound,
    #[error("the group is not empty")]
    NonEmptyGroup,
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("the share session is not known")]
    ShareSessionNotFound,
    #[error("the share session epoch is not the expected one")]
    InvalidShareSessionEpoch,
    #[error("{0}")]
    InvalidRecordState(String),
    /// The group's coordinator shard could not run the operation (not here, loading, ...).
    #[error(transparent)]
    Coordinator(#[from] crate::coordinator::group::GroupError),
}

impl From<CoordinatorLogError> for ShareError {
    fn from(e: CoordinatorLogError) -> Self {
        ShareError::CoordinatorNotAvailable(e.to_string())
    }
}

/// A share group's settings: Kafka's group configs (`share.*`) over Kafka's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareConfig {
    pub limits: Limits,
    pub reset: OffsetReset,
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: i32,
    /// `share.isolation.level=read_committed`: acquire up to the last stable offset and
    /// archive aborted transactions' records undelivered.
    pub read_committed: bool,
}

impl ShareConfig {
    pub fn from_overrides(o: Option<&BTreeMap<String, String>>) -> ShareConfig {
        let get = |name: &str, default: i64| {
            o.and_then(|o| o.get(name))
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(default)
        };
        // Values were checked when set (`config::group`); Kafka's default is latest.
        let reset = o
            .and_then(|o| o.get("share.auto.offset.reset"))
            .and_then(|v| OffsetReset::parse(v).ok())
            .unwrap_or(OffsetReset::Latest);
        ShareConfig {
            limits: Limits {
                lock_ms: get("share.record.lock.duration.ms", 30_000).max(1),
                delivery_limit: get("share.delivery.count.limit", 5).clamp(1, i16::MAX as i64)
                    as i16,
                max_locks: get("share.partition.max.record.locks", 2_000).max(1),
                renew: !o
                    .and_then(|o| o.get("share.renew.acknowledge.enable"))
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("false")),
                dlq: dlq::topic_of(o).is_some(),
            },
            reset,
            read_committed: o
                .and_then(|o| o.get("share.isolation.level"))
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("read_committed")),
            session_timeout_ms: get("share.session.timeout.ms", 45_000),
            heartbeat_interval_ms: get("share.heartbeat.interval.ms", 5_000) as i32,
        }
    }

    pub fn of(ctx: &crate::shard::BrokerContext, group_id: &str) -> ShareConfig {
        let o = ctx.group_configs.get(group_id);
        let mut c = ShareConfig::from_overrides(o.as_deref());
        // Kafka's `isDLQEnabledForGroup`: the topic name and `share.version` >= 2, read
        // afresh at every operation so a feature change applies at once.
        c.limits.dlq &= dlq::enabled(ctx);
        c
    }
}

/// The `__share_group_state` partition count: Strom sizes it as `__consumer_offsets`
/// (Kafka's `share.coordinator.state.topic.num.partitions` defaults to 50, as the offsets
/// topic does).
pub fn state_partitions(config: &BrokerConfig) -> i32 {
    config.offsets_topic_num_partitions
}
