//! One shard's groups: the state machines of the groups whose `__consumer_offsets` partition
//! this shard is home to, their committed offsets, loading them from the log and writing
//! changes back to it.
//!
//! `load` replays a partition of the log into the groups; `membership` is the group requests
//! (JoinGroup to LeaveGroup, ConsumerGroupHeartbeat, DeleteGroups); `offsets` the committed
//! offsets (OffsetCommit and TxnOffsetCommit, OffsetFetch, OffsetDelete, retention);
//! `share` the share groups' records; `timers` the per-shard tick that drives every group's
//! timers.

mod load;
mod membership;
mod offsets;
mod share;
mod streams;
mod timers;

pub use streams::StreamsFailure;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::{Rc, Weak};
use std::sync::Arc;

use super::classic::{CommittedOffset, Group, GroupConfig};
use super::consumer::ConsumerConfig;
use super::records::{GroupMetadata, GroupRecord, MemberMetadata};
use super::{offsets_partition, GroupError, OFFSETS_TOPIC};
use crate::coordinator::log::{self, TxnProducer};
use crate::metadata::catalog::Catalog;
use crate::shard::ShardState;

pub struct GroupShard {
    shard: Weak<ShardState>,
    pub groups: RefCell<HashMap<String, Group>>,
    /// Loaded partitions, with the leader epoch they were loaded at (`None`: single node).
    loaded: crate::coordinator::log::LoadedPartitions,
    pub cfg: GroupConfig,
    pub consumer_cfg: ConsumerConfig,
    /// TxnOffsetCommit offsets by producer id, written to the log inside the producer's
    /// transaction and applied only when its commit marker is (Kafka's pending offsets).
    pending_txn: RefCell<HashMap<i64, Vec<PendingTxnOffset>>>,
    /// The catalog last looked at for regex resolutions and how many times topics appeared in
    /// it since this shard started (`topics_version`).
    topics_seen: RefCell<(Option<Arc<Catalog>>, i64)>,
}

/// An offset committed in a transaction that has not ended yet.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingTxnOffset {
    pub partition_of_group: i32,
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub value: CommittedOffset,
}

thread_local! {
    static GROUPS: RefCell<Option<(Weak<ShardState>, Rc<GroupShard>)>> = const { RefCell::new(None) };
}

/// Committed offsets by topic, then partition (`None`: nothing committed).
pub type FetchedOffsets = Vec<(String, Vec<(i32, Option<CommittedOffset>)>)>;

/// One partition of an OffsetCommit.
pub struct CommitItem {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

impl GroupShard {
    /// This shard's groups (created with its timer task on first use). Kept per thread: a
    /// shard is a thread, and a restarted broker in the same process gets new threads.
    pub fn of(state: &Rc<ShardState>) -> Rc<GroupShard> {
        GROUPS.with(|g| {
            let mut g = g.borrow_mut();
            if let Some((owner, groups)) = g.as_ref() {
                if owner.upgrade().is_some_and(|o| Rc::ptr_eq(&o, state)) {
                    return groups.clone();
                }
            }
            let groups = Rc::new(GroupShard {
                shard: Rc::downgrade(state),
                groups: RefCell::new(HashMap::new()),
                loaded: Default::default(),
                pending_txn: RefCell::new(HashMap::new()),
                topics_seen: RefCell::new((None, 0)),
                cfg: GroupConfig::from_broker(&state.ctx.config),
                consumer_cfg: ConsumerConfig {
                    session_timeout_ms: state.ctx.config.group_consumer_session_timeout_ms,
                    heartbeat_interval_ms: state.ctx.config.group_consumer_heartbeat_interval_ms,
                    max_size: state.ctx.config.group_max_size.max(1) as usize,
                    regex_refresh_interval_ms: state
                        .ctx
                        .config
                        .group_consumer_regex_refresh_interval_ms
                        .into(),
                },
            });
            tokio::task::spawn_local(GroupShard::tick_loop(Rc::downgrade(&groups)));
            *g = Some((Rc::downgrade(state), groups.clone()));
            groups
        })
    }

    /// The consumer group settings of `group_id`: the broker's, with the group's overrides
    /// (GROUP config resource) of the session timeout and heartbeat interval.
    fn consumer_cfg_for(&self, group_id: &str) -> ConsumerConfig {
        let Some(state) = self.shard.upgrade() else {
            return self.consumer_cfg.clone();
        };
        let overrides = state.ctx.group_configs.get(group_id);
        let (session_timeout_ms, heartbeat_interval_ms) =
            crate::config::group::consumer_timeouts(overrides.as_deref(), &state.ctx.config);
        ConsumerConfig {
            session_timeout_ms,
            heartbeat_interval_ms,
            ..self.consumer_cfg.clone()
        }
    }

    /// The streams group settings of `group_id`: Kafka's defaults with the group's
    /// overrides (`streams.*` GROUP configs).
    fn streams_cfg_for(&self, group_id: &str) -> crate::coordinator::group::streams::StreamsConfig {
        let overrides = self
            .shard
            .upgrade()
            .and_then(|s| s.ctx.group_configs.get(group_id));
        crate::config::group::streams_settings(overrides.as_deref())
    }

    fn shard(&self) -> Result<Rc<ShardState>, GroupError> {
        self.shard
            .upgrade()
            .ok_or(GroupError::CoordinatorNotAvailable)
    }

    fn partition_count(&self) -> i32 {
        self.shard
            .upgrade()
            .and_then(|s| {
                s.ctx
                    .catalog
                    .snapshot()
                    .get(OFFSETS_TOPIC)
                    .map(|t| t.partitions)
            })
            .unwrap_or(1)
    }

    pub fn partition_of(&self, group: &str) -> i32 {
        offsets_partition(group, self.partition_count())
    }

    /// Tests: drop what was loaded, as a restarted shard starts.
    #[cfg(test)]
    pub fn forget_loaded(&self) {
        self.loaded.clear();
        self.pending_txn.borrow_mut().clear();
    }

    /// Appends records to coordinator partition `p` and waits until they are fsync'd.
    pub async fn append(&self, p: i32, recs: &[GroupRecord]) -> Result<(), GroupError> {
        self.append_in(p, recs, None).await
    }

    /// `append`, inside a producer's transaction when `txn` is set (TxnOffsetCommit).
    async fn append_in(
        &self,
        p: i32,
        recs: &[GroupRecord],
        txn: Option<TxnProducer>,
    ) -> Result<(), GroupError> {
        if recs.is_empty() {
            return Ok(());
        }
        let shard = self.shard()?;
        let part = log::partition_on_shard(&shard, OFFSETS_TOPIC, p)
            .ok_or(GroupError::CoordinatorNotAvailable)?;
        let kvs: Vec<_> = recs.iter().map(|r| r.encode()).collect();
        log::append(&part, &kvs, txn)
            .await
            .map_err(|e| GroupError::Storage(e.to_string()))
    }

    /// Writes the group's metadata if its state machine says it changed.
    pub async fn persist_if_dirty(&self, group_id: &str) -> Result<(), GroupError> {
        let rec = {
            let mut groups = self.groups.borrow_mut();
            match groups.get_mut(group_id) {
                Some(g) if g.is_dirty() => {
                    g.take_dirty();
                    metadata_record(g)
                }
                _ => return Ok(()),
            }
        };
        let r = self.append(self.partition_of(group_id), &[rec]).await;
        if let Err(e) = &r {
            tracing::warn!(group = group_id, error = %e, "persisting group metadata failed");
        }
        r
    }

    /// Topics clients may subscribe to, with their partition counts: every topic, internal
    /// ones too, as Kafka's coordinator resolves subscriptions and regexes against its whole
    /// metadata image (hiding internal topics is the client's `exclude.internal.topics`).
    pub fn topic_partitions(&self) -> BTreeMap<String, i32> {
        self.shard
            .upgrade()
            .map(|s| partition_counts(&s.ctx.catalog.snapshot()))
            .unwrap_or_default()
    }

    /// Kafka's `lastMetadataImageWithNewTopics` for regex resolutions: moves each time
    /// `catalog` holds a topic (by id: a topic deleted and created again counts) that the
    /// catalog looked at before did not. Only compared within this shard's life, so the
    /// resolutions a load replays count as older (`consumer::regex`).
    pub(crate) fn topics_version(&self, catalog: &Arc<Catalog>) -> i64 {
        let mut seen = self.topics_seen.borrow_mut();
        let (before, version) = &mut *seen;
        match before {
            Some(b) if Arc::ptr_eq(b, catalog) => {}
            Some(b) => {
                if catalog.topics.values().any(|t| b.by_id(&t.id).is_none()) {
                    *version += 1;
                }
                *before = Some(catalog.clone());
            }
            None => *before = Some(catalog.clone()),
        }
        *version
    }

    /// Topic name → id, for KIP-848 records.
    pub(crate) fn topic_ids(&self) -> impl Fn(&str) -> Option<uuid::Uuid> {
        let catalog = self.shard.upgrade().map(|s| s.ctx.catalog.snapshot());
        move |t: &str| catalog.as_ref()?.get(t).map(|m| m.id)
    }
}

/// Every topic of `catalog` with its partition count.
pub(crate) fn partition_counts(catalog: &Catalog) -> BTreeMap<String, i32> {
    catalog
        .topics
        .values()
        .map(|t| (t.name.to_string(), t.partitions))
        .collect()
}

/// The group's current membership as a `GroupMetadataValue` record.
pub fn metadata_record(g: &Group) -> GroupRecord {
    let protocol = g.protocol.clone().unwrap_or_default();
    GroupRecord::Metadata {
        group: g.id.clone(),
        value: Some(GroupMetadata {
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            generation: g.generation,
            protocol: g.protocol.clone(),
            leader: g.leader.clone(),
            state_timestamp: g.state_timestamp,
            members: g
                .members_in_order()
                .map(|m| MemberMetadata {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }),
    }
}
