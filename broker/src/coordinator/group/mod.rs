//! Group coordinator: consumer groups (classic protocol) and their committed offsets.
//!
//! Data flow: a group request arrives on any shard → `on_coordinator` hashes the group id to a
//! `__consumer_offsets` partition exactly as Kafka does (`abs(groupId.hashCode()) % partitions`)
//! and runs the work on that partition's home shard, where the group lives in a `GroupShard`
//! (one per shard, thread-local, so no locks). The state machine (`classic::Group`) is pure:
//! time comes in as an argument and long polls (JoinGroup, SyncGroup) are oneshot channels, so
//! every transition is unit tested without a runtime. Timers (session, rebalance and the initial
//! rebalance delay) are driven by a per-shard tick.
//!
//! Durability: offsets and group metadata are records in `__consumer_offsets` in Kafka's own
//! key/value schemas (`records`), appended with acks=all before a commit is answered, and
//! replayed from the log the first time a shard touches a coordinator partition after start.

pub mod assignor;
pub mod classic;
pub mod consumer;
pub mod coordinator;
pub mod records;
pub mod streams;
pub mod topic_regex;

use std::future::Future;
use std::rc::Rc;

use crate::config::BrokerConfig;
use crate::coordinator::log::CoordinatorLogError;
use crate::coordinator::Coordinator;
use crate::shard::{BrokerContext, ShardState};
pub use coordinator::GroupShard;

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Kafka's `offsets.topic.segment.bytes` default: the compacted topic rolls small.
pub const OFFSETS_SEGMENT_BYTES: &str = "104857600";

/// Everything a group operation can fail with; `error_code` turns it into Kafka's code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("the coordinator is not available")]
    CoordinatorNotAvailable,
    #[error("the coordinator is loading the group")]
    CoordinatorLoadInProgress,
    #[error("this broker is not the group's coordinator")]
    NotCoordinator,
    #[error("the group id is empty")]
    InvalidGroupId,
    #[error("the member id is not known to the group")]
    UnknownMemberId,
    #[error("a member id is required: rejoin with {0}")]
    MemberIdRequired(String),
    #[error("the generation is not the group's current one")]
    IllegalGeneration,
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    #[error("the static member was replaced by a newer instance with the same group.instance.id")]
    FencedInstanceId,
    #[error("the static member's instance id belongs to another member id")]
    UnreleasedInstanceId,
    #[error("the protocol type or protocols do not match the group's")]
    InconsistentGroupProtocol,
    #[error("session timeout {0} ms is outside the broker's group.min/max.session.timeout.ms")]
    InvalidSessionTimeout(i32),
    #[error("the group has reached group.max.size")]
    GroupMaxSizeReached,
    #[error("the group does not exist")]
    GroupIdNotFound,
    #[error("the group is not empty")]
    NonEmptyGroup,
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("the offset metadata is larger than offset.metadata.max.bytes")]
    OffsetMetadataTooLarge,
    #[error("the member epoch is not the member's current one (fenced)")]
    FencedMemberEpoch,
    #[error("the member epoch is older than the member's current one")]
    StaleMemberEpoch,
    #[error("the server assignor is not supported (uniform, range)")]
    UnsupportedAssignor,
    #[error("{0}")]
    InvalidRegularExpression(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("{0}")]
    StreamsInvalidTopology(String),
    #[error("{0}")]
    UnsupportedVersion(String),
    #[error("writing to __consumer_offsets failed: {0}")]
    Storage(String),
}

/// The group coordinator's place in the coordinator pattern (`crate::coordinator`).
pub struct Groups;

impl Coordinator for Groups {
    const TOPIC: &'static str = OFFSETS_TOPIC;
    const SEGMENT_BYTES: &'static str = OFFSETS_SEGMENT_BYTES;
    type Shard = GroupShard;
    type Error = GroupError;

    fn partitions(config: &BrokerConfig) -> i32 {
        config.offsets_topic_num_partitions
    }
    fn replication(config: &BrokerConfig) -> (i16, Option<i32>) {
        // Kafka creates it with the broker's min.insync.replicas.
        (config.offsets_topic_replication_factor, None)
    }
    fn loaded(
        state: &Rc<ShardState>,
        p: i32,
        epoch: Option<i32>,
    ) -> Result<Rc<GroupShard>, GroupError> {
        let groups = GroupShard::of(state);
        groups.ensure_loaded_at(p, epoch)?;
        Ok(groups)
    }
    fn unload(state: &Rc<ShardState>, p: i32) {
        GroupShard::of(state).unload(p);
    }
    fn loaded_partitions(state: &Rc<ShardState>) -> Vec<(i32, Option<i32>)> {
        GroupShard::of(state).loaded_partitions()
    }
    fn loaded_shard(state: &Rc<ShardState>) -> Rc<GroupShard> {
        GroupShard::of(state)
    }
    fn unavailable() -> GroupError {
        GroupError::CoordinatorNotAvailable
    }
    fn not_coordinator() -> GroupError {
        GroupError::NotCoordinator
    }
    fn load_in_progress() -> GroupError {
        GroupError::CoordinatorLoadInProgress
    }
}

impl From<CoordinatorLogError> for GroupError {
    fn from(e: CoordinatorLogError) -> Self {
        match e {
            CoordinatorLogError::Unavailable(_) => GroupError::CoordinatorNotAvailable,
            CoordinatorLogError::NotLeader => GroupError::NotCoordinator,
            other => GroupError::Storage(other.to_string()),
        }
    }
}

/// The `__consumer_offsets` partition of a group (Kafka's `partitionFor(groupId)`).
pub fn offsets_partition(group_id: &str, partitions: i32) -> i32 {
    crate::coordinator::partition_for(group_id, partitions)
}

/// Creates `__consumer_offsets` on first use and returns its partition count.
pub async fn ensure_offsets_topic(broker: &BrokerContext) -> Result<i32, GroupError> {
    crate::coordinator::ensure_topic::<Groups>(broker).await
}

/// Runs `f` on the shard that coordinates `group_id`, with that shard's groups loaded.
pub async fn on_coordinator<R, F, Fut>(
    broker: &BrokerContext,
    group_id: &str,
    f: F,
) -> Result<R, GroupError>
where
    F: FnOnce(Rc<GroupShard>, i32) -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, GroupError>> + 'static,
    R: Send + 'static,
{
    crate::coordinator::on_coordinator::<Groups, R, F, Fut>(broker, group_id, f).await
}

/// Runs `f` on the home shard of `__consumer_offsets` partition `p`.
pub async fn on_partition<R, F, Fut>(broker: &BrokerContext, p: i32, f: F) -> Result<R, GroupError>
where
    F: FnOnce(Rc<GroupShard>, i32) -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, GroupError>> + 'static,
    R: Send + 'static,
{
    crate::coordinator::on_partition::<Groups, R, F, Fut>(broker, p, f).await
}

/// Runs `f` on every coordinator partition's shard (ListGroups), once per shard.
pub async fn on_every_shard<R, F, Fut>(broker: &BrokerContext, f: F) -> Result<Vec<R>, GroupError>
where
    F: Fn(Rc<GroupShard>) -> Fut + Send + Clone + 'static,
    Fut: Future<Output = R> + 'static,
    R: Send + 'static,
{
    crate::coordinator::on_every_shard::<Groups, R, F, Fut>(broker, f).await
}
