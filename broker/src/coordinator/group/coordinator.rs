//! One shard's groups: the state machines of the groups whose `__consumer_offsets` partition
//! this shard is home to, their committed offsets, loading them from the log and writing
//! changes back to it.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::{Rc, Weak};
use std::time::Duration;

use bytes::Bytes;

use super::classic::{
    CommittedOffset, Group, GroupConfig, GroupState, JoinParams, JoinReply, Member, Reply,
    SyncReply,
};
use super::consumer::{ConsumerConfig, HeartbeatParams, HeartbeatResult};
use super::records::{GroupMetadata, GroupRecord, MemberMetadata};
use super::{offsets_partition, GroupError, OFFSETS_TOPIC};
use crate::coordinator::log::{self, TxnProducer};
use crate::shard::ShardState;

/// How often session, rebalance and initial-delay timers are checked.
const TICK: Duration = Duration::from_millis(50);
/// How often committed offsets are checked against `offsets.retention.minutes` (Kafka's
/// `offsets.retention.check.interval.ms` default).
const RETENTION_CHECK_MS: i64 = 600_000;

pub struct GroupShard {
    shard: Weak<ShardState>,
    pub groups: RefCell<HashMap<String, Group>>,
    loaded: RefCell<HashSet<i32>>,
    pub cfg: GroupConfig,
    pub consumer_cfg: ConsumerConfig,
    /// TxnOffsetCommit offsets by producer id, written to the log inside the producer's
    /// transaction and applied only when its commit marker is (Kafka's pending offsets).
    pending_txn: RefCell<HashMap<i64, Vec<PendingTxnOffset>>>,
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
                loaded: RefCell::new(HashSet::new()),
                pending_txn: RefCell::new(HashMap::new()),
                cfg: GroupConfig::from_broker(&state.ctx.config),
                consumer_cfg: ConsumerConfig {
                    session_timeout_ms: state.ctx.config.group_consumer_session_timeout_ms,
                    heartbeat_interval_ms: state.ctx.config.group_consumer_heartbeat_interval_ms,
                    max_size: state.ctx.config.group_max_size.max(1) as usize,
                },
            });
            tokio::task::spawn_local(tick_loop(Rc::downgrade(&groups)));
            *g = Some((Rc::downgrade(state), groups.clone()));
            groups
        })
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
        self.loaded.borrow_mut().clear();
        self.pending_txn.borrow_mut().clear();
    }

    /// Replays `__consumer_offsets` partition `p` into memory, once per shard life.
    pub fn ensure_loaded(&self, p: i32) -> Result<(), GroupError> {
        if self.loaded.borrow().contains(&p) {
            return Ok(());
        }
        let shard = self.shard()?;
        let part = log::partition_on_shard(&shard, OFFSETS_TOPIC, p)
            .ok_or(GroupError::CoordinatorNotAvailable)?;
        let now = crate::now_ms();
        let catalog = shard.ctx.catalog.snapshot();
        let name_of = |id: &uuid::Uuid| catalog.by_id(id).map(|t| t.name.to_string());
        let mut applied = 0usize;
        log::replay(&part, |r| {
            if let Some(commit) = log::control_commit(r) {
                self.complete_txn(p, r.producer_id, commit);
                return;
            }
            let Some(key) = r.key.as_deref().filter(|_| !r.control) else {
                return;
            };
            match GroupRecord::decode(key, r.value.as_deref()) {
                // An offset written inside a transaction waits for its marker.
                Ok(Some(GroupRecord::Offset {
                    group,
                    topic,
                    partition,
                    value: Some(value),
                })) if r.transactional => {
                    self.pending_txn
                        .borrow_mut()
                        .entry(r.producer_id)
                        .or_default()
                        .push(PendingTxnOffset {
                            partition_of_group: p,
                            group,
                            topic,
                            partition,
                            value,
                        });
                }
                Ok(Some(rec)) => {
                    self.apply(rec, now, &name_of);
                    applied += 1;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(partition = p, error = %e, "skipping record"),
            }
        })
        .map_err(|e| GroupError::Storage(e.to_string()))?;
        for g in self.groups.borrow_mut().values_mut() {
            if self.partition_of(&g.id) == p && g.state != GroupState::Dead {
                g.restore_state(now);
                if let Some(c) = g.consumer.as_mut() {
                    c.finish_restore(now, &self.consumer_cfg);
                }
            }
        }
        tracing::debug!(
            partition = p,
            records = applied,
            "loaded group coordinator partition"
        );
        self.loaded.borrow_mut().insert(p);
        Ok(())
    }

    fn apply(&self, rec: GroupRecord, now: i64, name_of: &dyn Fn(&uuid::Uuid) -> Option<String>) {
        let mut groups = self.groups.borrow_mut();
        match rec {
            GroupRecord::ConsumerEpoch { ref group, .. }
            | GroupRecord::ConsumerMember { ref group, .. }
            | GroupRecord::TargetEpoch { ref group, .. }
            | GroupRecord::TargetMember { ref group, .. }
            | GroupRecord::CurrentAssignment { ref group, .. } => {
                let g = groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(group, now));
                g.consumer
                    .get_or_insert_with(Default::default)
                    .restore(rec, name_of);
            }
            GroupRecord::Offset {
                group,
                topic,
                partition,
                value,
            } => {
                let g = groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(&group, now));
                match value {
                    Some(v) => {
                        g.offsets.insert((topic, partition), v);
                    }
                    None => {
                        g.offsets.remove(&(topic, partition));
                    }
                }
            }
            GroupRecord::Metadata { group, value: None } => {
                groups.remove(&group);
            }
            GroupRecord::Metadata {
                group,
                value: Some(md),
            } => {
                let offsets = groups.remove(&group).map(|g| g.offsets).unwrap_or_default();
                let mut g = Group::new(&group, now);
                g.offsets = offsets;
                g.generation = md.generation;
                g.protocol_type = Some(md.protocol_type).filter(|t| !t.is_empty());
                g.protocol = md.protocol.clone();
                g.leader = md.leader;
                for m in md.members {
                    let protocols = md
                        .protocol
                        .clone()
                        .map(|p| vec![(p, m.subscription.clone())])
                        .unwrap_or_default();
                    g.restore_member(Member::restored(
                        m.member_id,
                        m.instance_id,
                        m.client_id,
                        m.client_host,
                        m.session_timeout_ms,
                        m.rebalance_timeout_ms,
                        g.protocol_type.clone().unwrap_or_default(),
                        protocols,
                        m.assignment,
                        now,
                    ));
                }
                groups.insert(group, g);
            }
        }
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

    /// The transaction of `producer_id` ended with its marker durable on coordinator partition
    /// `p`: its pending offsets there become committed, or are dropped on abort.
    pub fn complete_txn(&self, p: i32, producer_id: i64, commit: bool) {
        let done: Vec<PendingTxnOffset> = {
            let mut pending = self.pending_txn.borrow_mut();
            let Some(all) = pending.get_mut(&producer_id) else {
                return;
            };
            let (done, rest): (Vec<_>, Vec<_>) =
                all.drain(..).partition(|o| o.partition_of_group == p);
            *all = rest;
            if all.is_empty() {
                pending.remove(&producer_id);
            }
            done
        };
        if !commit {
            return;
        }
        let now = crate::now_ms();
        let mut groups = self.groups.borrow_mut();
        for o in done {
            groups
                .entry(o.group.clone())
                .or_insert_with(|| Group::new(&o.group, now))
                .offsets
                .insert((o.topic, o.partition), o.value);
        }
    }

    /// Whether an open transaction holds an offset of this group's partition (OffsetFetch
    /// with require_stable answers UNSTABLE_OFFSET_COMMIT for it).
    pub fn has_pending_txn_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.pending_txn
            .borrow()
            .values()
            .flatten()
            .any(|o| o.group == group && o.topic == topic && o.partition == partition)
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

    pub async fn join(&self, group_id: &str, p: JoinParams) -> JoinReply {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let now = crate::now_ms();
        let reply = {
            let mut groups = self.groups.borrow_mut();
            let created = !groups.contains_key(group_id);
            if created {
                if !p.member_id.is_empty() {
                    return Err(GroupError::UnknownMemberId);
                }
                groups.insert(group_id.to_string(), Group::new(group_id, now));
            }
            let g = groups.get_mut(group_id).expect("present");
            if g.has_consumer_members() {
                return Err(GroupError::InconsistentGroupProtocol);
            }
            let reply = g.join(p, now, &self.cfg);
            // A rejected first join leaves no group behind (MEMBER_ID_REQUIRED is not a
            // rejection: the group keeps the pending member).
            if created
                && matches!(&reply, Reply::Now(Err(e)) if !matches!(e, GroupError::MemberIdRequired(_)))
            {
                groups.remove(group_id);
            }
            reply
        };
        let _ = self.persist_if_dirty(group_id).await;
        let r = reply.wait().await;
        let _ = self.persist_if_dirty(group_id).await;
        r
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn sync(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        assignments: Vec<(String, Bytes)>,
    ) -> SyncReply {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let now = crate::now_ms();
        let reply = {
            let mut groups = self.groups.borrow_mut();
            let Some(g) = groups.get_mut(group_id) else {
                return Err(GroupError::UnknownMemberId);
            };
            g.sync(
                member_id,
                instance_id,
                generation,
                protocol_type,
                protocol_name,
                assignments,
                now,
            )
        };
        // The leader's assignment is durable before the leader hears back (as Kafka does).
        self.persist_if_dirty(group_id).await?;
        reply.wait().await
    }

    pub async fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let mut groups = self.groups.borrow_mut();
        let g = groups
            .get_mut(group_id)
            .ok_or(GroupError::UnknownMemberId)?;
        g.heartbeat(member_id, instance_id, generation, crate::now_ms())
    }

    /// LeaveGroup: per member results.
    pub async fn leave(
        &self,
        group_id: &str,
        members: Vec<(String, Option<String>)>,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let now = crate::now_ms();
        let results = {
            let mut groups = self.groups.borrow_mut();
            let g = groups
                .get_mut(group_id)
                .ok_or(GroupError::UnknownMemberId)?;
            if g.state == GroupState::Dead {
                return Err(GroupError::CoordinatorNotAvailable);
            }
            members
                .iter()
                .map(|(m, i)| g.leave(m, i.as_deref(), now, &self.cfg))
                .collect()
        };
        let _ = self.persist_if_dirty(group_id).await;
        Ok(results)
    }

    /// OffsetCommit: validates the member, writes every offset with acks=all, then makes them
    /// visible. Per-partition errors (metadata too large) do not fail the others. With `txn`
    /// (TxnOffsetCommit) they stay pending until the transaction's marker.
    #[allow(clippy::too_many_arguments)]
    pub async fn commit(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        version: i16,
        items: Vec<CommitItem>,
        txn: Option<TxnProducer>,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let now = crate::now_ms();
        {
            let mut groups = self.groups.borrow_mut();
            match groups.get(group_id) {
                Some(g) if g.has_consumer_members() => {
                    let c = g.consumer.as_ref().expect("consumer group");
                    c.validate_member_epoch(member_id, generation)?
                }
                Some(g) => g.validate_commit(member_id, instance_id, generation)?,
                None if generation < 0 => {
                    groups.insert(group_id.to_string(), Group::new(group_id, now));
                }
                // v9+ says GROUP_ID_NOT_FOUND; older versions (and TxnOffsetCommit)
                // ILLEGAL_GENERATION (Kafka).
                None if version >= 9 && txn.is_none() => return Err(GroupError::GroupIdNotFound),
                None => return Err(GroupError::IllegalGeneration),
            }
        }
        let max = self.cfg_metadata_max();
        let mut results = Vec::with_capacity(items.len());
        let mut recs = Vec::new();
        let mut accepted = Vec::new();
        for it in items {
            let metadata = it.metadata.unwrap_or_default();
            if metadata.len() > max {
                results.push(Err(GroupError::OffsetMetadataTooLarge));
                continue;
            }
            let value = CommittedOffset {
                offset: it.offset,
                leader_epoch: it.leader_epoch,
                metadata,
                commit_timestamp: now,
            };
            recs.push(GroupRecord::Offset {
                group: group_id.to_string(),
                topic: it.topic.clone(),
                partition: it.partition,
                value: Some(value.clone()),
            });
            accepted.push(((it.topic, it.partition), value, results.len()));
            results.push(Ok(()));
        }
        let p = self.partition_of(group_id);
        if let Some(txn) = txn {
            // Pending before the append starts: a marker of this transaction that is written
            // while the append is in flight lands after it in the log, and must find it.
            let mut pending = self.pending_txn.borrow_mut();
            let list = pending.entry(txn.producer_id).or_default();
            for ((topic, partition), value, _) in &accepted {
                // A later commit of the same partition in this transaction replaces it.
                list.retain(|o| {
                    !(o.group == group_id && &o.topic == topic && o.partition == *partition)
                });
                list.push(PendingTxnOffset {
                    partition_of_group: p,
                    group: group_id.to_string(),
                    topic: topic.clone(),
                    partition: *partition,
                    value: value.clone(),
                });
            }
        }
        if let Err(e) = self.append_in(p, &recs, txn).await {
            if let Some(txn) = txn {
                if let Some(list) = self.pending_txn.borrow_mut().get_mut(&txn.producer_id) {
                    list.retain(|o| {
                        !accepted.iter().any(|(k, v, _)| {
                            o.group == group_id
                                && (&o.topic, o.partition) == (&k.0, k.1)
                                && &o.value == v
                        })
                    });
                }
            }
            for (_, _, i) in &accepted {
                results[*i] = Err(e.clone());
            }
            return Ok(results);
        }
        if txn.is_some() {
            return Ok(results);
        }
        let mut groups = self.groups.borrow_mut();
        let g = groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id, now));
        for (key, value, _) in accepted {
            g.offsets.insert(key, value);
        }
        Ok(results)
    }

    fn cfg_metadata_max(&self) -> usize {
        self.shard
            .upgrade()
            .map(|s| s.ctx.config.offset_metadata_max_bytes.max(0) as usize)
            .unwrap_or(4096)
    }

    /// Committed offsets of a group; `None` topics means all of them.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        member: Option<(String, i32)>,
        topics: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<FetchedOffsets, GroupError> {
        let groups = self.groups.borrow();
        let g = groups.get(group_id);
        // OffsetFetch v9 from a KIP-848 member carries its epoch: a stale one is refused.
        if let (Some((member_id, epoch)), Some(c)) = (member, g.and_then(|g| g.consumer.as_ref())) {
            if !c.members.is_empty() {
                c.validate_member_epoch(&member_id, epoch)?;
            }
        }
        Ok(match topics {
            Some(topics) => topics
                .into_iter()
                .map(|(t, parts)| {
                    let ps = parts
                        .into_iter()
                        .map(|p| (p, g.and_then(|g| g.offsets.get(&(t.clone(), p)).cloned())))
                        .collect();
                    (t, ps)
                })
                .collect(),
            None => {
                let mut by_topic: FetchedOffsets = Vec::new();
                if let Some(g) = g {
                    for ((t, p), o) in &g.offsets {
                        match by_topic.last_mut() {
                            Some((last, ps)) if last == t => ps.push((*p, Some(o.clone()))),
                            _ => by_topic.push((t.clone(), vec![(*p, Some(o.clone()))])),
                        }
                    }
                }
                by_topic
            }
        })
    }

    /// Topics clients may subscribe to, with their partition counts.
    pub fn topic_partitions(&self) -> BTreeMap<String, i32> {
        self.shard
            .upgrade()
            .map(|s| {
                s.ctx
                    .catalog
                    .snapshot()
                    .topics
                    .values()
                    .filter(|t| !t.internal)
                    .map(|t| (t.name.to_string(), t.partitions))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// ConsumerGroupHeartbeat (KIP-848). The changes are durable in `__consumer_offsets`
    /// before the member hears back.
    pub async fn consumer_heartbeat(
        &self,
        group_id: &str,
        p: HeartbeatParams,
    ) -> Result<HeartbeatResult, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidRequest("GroupId can't be empty.".into()));
        }
        let topics = self.topic_partitions();
        let now = crate::now_ms();
        let id_of = self.topic_ids();
        let (result, recs) = {
            let mut groups = self.groups.borrow_mut();
            if !groups.contains_key(group_id) {
                if p.member_epoch != 0 {
                    return Err(GroupError::UnknownMemberId);
                }
                groups.insert(group_id.to_string(), Group::new(group_id, now));
            }
            let g = groups.get_mut(group_id).expect("present");
            if !g.members.is_empty() {
                // A classic group with members: not a consumer group.
                return Err(GroupError::GroupIdNotFound);
            }
            let c = g.consumer.get_or_insert_with(Default::default);
            let result = c.heartbeat(p, &topics, now, &self.consumer_cfg);
            (result, c.take_records(group_id, &id_of))
        };
        self.append(self.partition_of(group_id), &recs).await?;
        result
    }

    /// Topic name → id, for KIP-848 records.
    fn topic_ids(&self) -> impl Fn(&str) -> Option<uuid::Uuid> {
        let catalog = self.shard.upgrade().map(|s| s.ctx.catalog.snapshot());
        move |t: &str| catalog.as_ref()?.get(t).map(|m| m.id)
    }

    /// DeleteGroups for one group: tombstones for its metadata and offsets.
    pub async fn delete_group(&self, group_id: &str) -> Result<(), GroupError> {
        let recs = {
            let groups = self.groups.borrow();
            let g = groups.get(group_id).ok_or(GroupError::GroupIdNotFound)?;
            g.can_delete()?;
            let mut recs: Vec<GroupRecord> = g
                .offsets
                .keys()
                .map(|(t, p)| GroupRecord::Offset {
                    group: group_id.to_string(),
                    topic: t.clone(),
                    partition: *p,
                    value: None,
                })
                .collect();
            if g.consumer.is_some() {
                recs.push(GroupRecord::ConsumerEpoch {
                    group: group_id.to_string(),
                    value: None,
                });
                recs.push(GroupRecord::TargetEpoch {
                    group: group_id.to_string(),
                    value: None,
                });
            }
            recs.push(GroupRecord::Metadata {
                group: group_id.to_string(),
                value: None,
            });
            recs
        };
        self.append(self.partition_of(group_id), &recs).await?;
        if let Some(mut g) = self.groups.borrow_mut().remove(group_id) {
            g.mark_dead(crate::now_ms());
        }
        Ok(())
    }

    /// OffsetDelete: per-partition results; the group must exist and not be subscribed.
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let (recs, results) = {
            let groups = self.groups.borrow();
            let g = groups.get(group_id).ok_or(GroupError::GroupIdNotFound)?;
            if g.state == GroupState::Dead {
                return Err(GroupError::GroupIdNotFound);
            }
            let subscribed = g.subscribed_topics();
            if subscribed.is_none()
                && g.state != GroupState::Empty
                && g.protocol_type.as_deref() != Some("consumer")
            {
                return Err(GroupError::NonEmptyGroup);
            }
            let mut recs = Vec::new();
            let mut results = Vec::new();
            for (t, p) in &partitions {
                if subscribed.as_ref().is_some_and(|s| s.contains(t)) {
                    results.push(Err(GroupError::GroupSubscribedToTopic));
                    continue;
                }
                if g.offsets.contains_key(&(t.clone(), *p)) {
                    recs.push(GroupRecord::Offset {
                        group: group_id.to_string(),
                        topic: t.clone(),
                        partition: *p,
                        value: None,
                    });
                }
                results.push(Ok(()));
            }
            (recs, results)
        };
        self.append(self.partition_of(group_id), &recs).await?;
        if let Some(g) = self.groups.borrow_mut().get_mut(group_id) {
            for r in &recs {
                if let GroupRecord::Offset {
                    topic, partition, ..
                } = r
                {
                    g.offsets.remove(&(topic.clone(), *partition));
                }
            }
        }
        Ok(results)
    }

    /// Tombstones expired offsets, and empty groups left with none (Kafka's cleanup).
    pub async fn expire_offsets(&self, now: i64) {
        let retention_ms = self
            .shard
            .upgrade()
            .map(|s| {
                s.ctx
                    .config
                    .offsets_retention_minutes
                    .saturating_mul(60_000)
            })
            .unwrap_or(i64::MAX);
        let mut by_partition: BTreeMap<i32, Vec<GroupRecord>> = BTreeMap::new();
        let mut emptied = Vec::new();
        for g in self.groups.borrow().values() {
            let expired = g.expired_offsets(now, retention_ms);
            if expired.is_empty() {
                continue;
            }
            let recs = by_partition.entry(self.partition_of(&g.id)).or_default();
            for (topic, partition) in &expired {
                recs.push(GroupRecord::Offset {
                    group: g.id.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                    value: None,
                });
            }
            if expired.len() == g.offsets.len() && g.members.is_empty() {
                recs.push(GroupRecord::Metadata {
                    group: g.id.clone(),
                    value: None,
                });
                emptied.push(g.id.clone());
            }
        }
        for (p, recs) in by_partition {
            if let Err(e) = self.append(p, &recs).await {
                tracing::warn!(partition = p, error = %e, "expiring offsets failed");
                continue;
            }
            let mut groups = self.groups.borrow_mut();
            for r in recs {
                match r {
                    GroupRecord::Offset {
                        group,
                        topic,
                        partition,
                        ..
                    } => {
                        if let Some(g) = groups.get_mut(&group) {
                            g.offsets.remove(&(topic, partition));
                        }
                    }
                    GroupRecord::Metadata { group, .. }
                        if emptied.contains(&group)
                            && groups.get(&group).is_some_and(|g| {
                                g.offsets.is_empty() && g.state == GroupState::Empty
                            }) =>
                    {
                        groups.remove(&group);
                    }
                    _ => {}
                }
            }
        }
    }

    /// Timers of every group: classic groups to persist, and KIP-848 records to write.
    fn tick(&self, now: i64) -> (Vec<String>, Vec<(i32, Vec<GroupRecord>)>) {
        let mut dirty = Vec::new();
        let mut records = Vec::new();
        let mut topics = None;
        let id_of = self.topic_ids();
        for g in self.groups.borrow_mut().values_mut() {
            if let Some(c) = g.consumer.as_mut() {
                let topics = topics.get_or_insert_with(|| self.topic_partitions());
                c.tick(now, topics);
                let recs = c.take_records(&g.id, &id_of);
                if !recs.is_empty() {
                    records.push((self.partition_of(&g.id), recs));
                }
            }
            g.tick(now, &self.cfg);
            if g.is_dirty() {
                dirty.push(g.id.clone());
            }
        }
        (dirty, records)
    }
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

async fn tick_loop(groups: Weak<GroupShard>) {
    let mut next_expiry = crate::now_ms() + RETENTION_CHECK_MS;
    loop {
        tokio::time::sleep(TICK).await;
        let Some(gs) = groups.upgrade() else { return };
        let now = crate::now_ms();
        if now >= next_expiry {
            next_expiry = now + RETENTION_CHECK_MS;
            let gs = gs.clone();
            tokio::task::spawn_local(async move { gs.expire_offsets(now).await });
        }
        let (dirty, records) = gs.tick(now);
        for (p, recs) in records {
            let gs = gs.clone();
            tokio::task::spawn_local(async move {
                if let Err(e) = gs.append(p, &recs).await {
                    tracing::warn!(partition = p, error = %e, "persisting consumer group failed");
                }
            });
        }
        for id in dirty {
            let gs = gs.clone();
            tokio::task::spawn_local(async move {
                let _ = gs.persist_if_dirty(&id).await;
            });
        }
    }
}
