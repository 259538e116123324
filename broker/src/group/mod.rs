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
pub mod topic_regex;

#[cfg(test)]
mod classic_tests;

use std::future::Future;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;

use crate::handlers::RequestContext;
use crate::shard::{frontend, home_shard};
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
    #[error("writing to __consumer_offsets failed: {0}")]
    Storage(String),
}

/// The one place group failures become Kafka error codes (shared by every group handler: they
/// all fail in the same vocabulary).
pub fn error_code(e: &GroupError) -> i16 {
    use GroupError as G;
    let r = match e {
        G::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        G::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        G::InvalidGroupId => ResponseError::InvalidGroupId,
        G::UnknownMemberId => ResponseError::UnknownMemberId,
        G::MemberIdRequired(_) => ResponseError::MemberIdRequired,
        G::IllegalGeneration => ResponseError::IllegalGeneration,
        G::RebalanceInProgress => ResponseError::RebalanceInProgress,
        G::FencedInstanceId => ResponseError::FencedInstanceId,
        G::UnreleasedInstanceId => ResponseError::UnreleasedInstanceId,
        G::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        G::InvalidSessionTimeout(_) => ResponseError::InvalidSessionTimeout,
        G::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        G::GroupIdNotFound => ResponseError::GroupIdNotFound,
        G::NonEmptyGroup => ResponseError::NonEmptyGroup,
        G::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        G::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        G::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        G::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        G::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
        G::UnsupportedAssignor => ResponseError::UnsupportedAssignor,
        G::InvalidRegularExpression(_) => ResponseError::InvalidRegularExpression,
        G::InvalidRequest(_) => ResponseError::InvalidRequest,
        // A failed append to __consumer_offsets: Kafka answers NOT_COORDINATOR so the client
        // looks the coordinator up again and retries.
        G::Storage(_) => ResponseError::NotCoordinator,
    };
    r.code()
}

/// Java's `String.hashCode` (over UTF-16 code units), which Kafka uses to place groups.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// Kafka's `partitionFor(groupId)`: `Utils.abs(hashCode) % partitions` (abs maps MIN to 0).
pub fn offsets_partition(group_id: &str, partitions: i32) -> i32 {
    let h = java_string_hash(group_id);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

/// Creates `__consumer_offsets` on first use (compacted, as Kafka's) and returns its
/// partition count (the existing topic's, when it exists already).
pub async fn ensure_offsets_topic(ctx: &RequestContext) -> Result<i32, GroupError> {
    let n = ctx.ctx().config.offsets_topic_num_partitions;
    crate::coordinator_log::ensure_topic(ctx, OFFSETS_TOPIC, n, OFFSETS_SEGMENT_BYTES)
        .await
        .map_err(|e| match e {
            crate::coordinator_log::CoordinatorLogError::Unavailable(_) => {
                GroupError::CoordinatorNotAvailable
            }
            other => GroupError::Storage(other.to_string()),
        })
}

/// Runs `f` on the shard that coordinates `group_id`, with that shard's groups loaded.
pub async fn on_coordinator<R, F, Fut>(
    ctx: &RequestContext,
    group_id: &str,
    f: F,
) -> Result<R, GroupError>
where
    F: FnOnce(Rc<GroupShard>, i32) -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, GroupError>> + 'static,
    R: Send + 'static,
{
    let partitions = ensure_offsets_topic(ctx).await?;
    let p = offsets_partition(group_id, partitions);
    on_partition(ctx, p, f).await
}

/// Runs `f` on the home shard of `__consumer_offsets` partition `p`.
pub async fn on_partition<R, F, Fut>(ctx: &RequestContext, p: i32, f: F) -> Result<R, GroupError>
where
    F: FnOnce(Rc<GroupShard>, i32) -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, GroupError>> + 'static,
    R: Send + 'static,
{
    let broker = ctx.ctx();
    let shard = home_shard(OFFSETS_TOPIC, p, broker.shard_count());
    frontend::invoke_on(broker, shard, move |state| async move {
        let groups = GroupShard::of(&state);
        groups.ensure_loaded(p)?;
        f(groups, p).await
    })
    .await
    .map_err(|_| GroupError::CoordinatorNotAvailable)?
}

/// Runs `f` on every coordinator partition's shard (ListGroups), once per shard.
pub async fn on_every_shard<R, F, Fut>(ctx: &RequestContext, f: F) -> Result<Vec<R>, GroupError>
where
    F: Fn(Rc<GroupShard>) -> Fut + Send + Clone + 'static,
    Fut: Future<Output = R> + 'static,
    R: Send + 'static,
{
    let partitions = ensure_offsets_topic(ctx).await?;
    let broker = ctx.ctx();
    let mut out = Vec::new();
    for shard in 0..broker.shard_count() {
        let owned: Vec<i32> = (0..partitions)
            .filter(|p| home_shard(OFFSETS_TOPIC, *p, broker.shard_count()) == shard)
            .collect();
        if owned.is_empty() {
            continue;
        }
        let f = f.clone();
        let r = frontend::invoke_on(broker, shard, move |state| async move {
            let groups = GroupShard::of(&state);
            for p in owned {
                groups.ensure_loaded(p)?;
            }
            Ok::<R, GroupError>(f(groups).await)
        })
        .await
        .map_err(|_| GroupError::CoordinatorNotAvailable)??;
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_group_ids_when_hashing_then_matches_java_string_hash_code() {
        // Java's values: "".hashCode() = 0, "a" = 97, "hello" = 99162322, and
        // "polygenelubricants" is the well-known string hashing to Integer.MIN_VALUE.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99162322);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(offsets_partition("polygenelubricants", 50), 0);
        assert_eq!(offsets_partition("hello", 50), 99162322 % 50);
        // A negative hash is made positive before the modulo.
        let h = java_string_hash("console-consumer-12345");
        assert_eq!(
            offsets_partition("console-consumer-12345", 50),
            h.abs() % 50
        );
    }

    #[test]
    fn given_each_group_error_when_mapping_then_kafka_code() {
        use GroupError as G;
        let table: &[(G, i16)] = &[
            (G::CoordinatorNotAvailable, 15),
            (G::CoordinatorLoadInProgress, 14),
            (G::InvalidGroupId, 24),
            (G::UnknownMemberId, 25),
            (G::MemberIdRequired("m".into()), 79),
            (G::IllegalGeneration, 22),
            (G::RebalanceInProgress, 27),
            (G::FencedInstanceId, 82),
            (G::UnreleasedInstanceId, 111),
            (G::InconsistentGroupProtocol, 23),
            (G::InvalidSessionTimeout(1), 26),
            (G::GroupMaxSizeReached, 81),
            (G::GroupIdNotFound, 69),
            (G::NonEmptyGroup, 68),
            (G::GroupSubscribedToTopic, 86),
            (G::UnknownTopicOrPartition, 3),
            (G::OffsetMetadataTooLarge, 12),
            (G::FencedMemberEpoch, 110),
            (G::StaleMemberEpoch, 113),
            (G::UnsupportedAssignor, 112),
            (G::InvalidRegularExpression("x".into()), 128),
            (G::InvalidRequest("x".into()), 42),
            (G::Storage("x".into()), 16),
        ];
        for (e, code) in table {
            assert_eq!(error_code(e), *code, "{e:?}");
        }
    }
}
