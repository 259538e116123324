//! Committed offsets on the coordinator shard: OffsetCommit (and TxnOffsetCommit, pending until
//! the transaction's marker), OffsetFetch, OffsetDelete, and expiry past
//! `offsets.retention.minutes`.

use std::collections::BTreeMap;

use super::{CommitItem, FetchedOffsets, GroupShard, PendingTxnOffset};
use crate::coordinator::group::classic::{CommittedOffset, Group, GroupState};
use crate::coordinator::group::records::GroupRecord;
use crate::coordinator::group::GroupError;
use crate::coordinator::log::TxnProducer;

impl GroupShard {
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
                Some(g) if g.has_streams_members() => {
                    let s = g.streams.as_ref().expect("streams group");
                    let parts: Vec<(String, i32)> = items
                        .iter()
                        .map(|i| (i.topic.clone(), i.partition))
                        .collect();
                    s.validate_offset_commit(member_id, generation, txn.is_some(), version, &parts)?
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
        if let (Some((member_id, epoch)), Some(g)) = (member, g) {
            if let Some(c) = g.consumer.as_ref().filter(|c| !c.members.is_empty()) {
                c.validate_member_epoch(&member_id, epoch)?;
            }
            if let Some(s) = g.streams.as_ref().filter(|s| !s.members.is_empty()) {
                s.validate_offset_fetch(&member_id, epoch)?;
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
        self.write_tombstones(by_partition, &emptied, "expiring offsets")
            .await;
    }

    /// Kafka's `onPartitionsDeleted`: the committed offsets of deleted topics go from every
    /// group this shard coordinates, so a topic created again under the same name does not
    /// start from them.
    pub async fn delete_topic_offsets(&self, topics: &[String]) {
        let mut by_partition: BTreeMap<i32, Vec<GroupRecord>> = BTreeMap::new();
        for g in self.groups.borrow().values() {
            for (topic, partition) in g.offsets.keys().filter(|(t, _)| topics.contains(t)) {
                by_partition
                    .entry(self.partition_of(&g.id))
                    .or_default()
                    .push(GroupRecord::Offset {
                        group: g.id.clone(),
                        topic: topic.clone(),
                        partition: *partition,
                        value: None,
                    });
            }
        }
        self.write_tombstones(by_partition, &[], "deleting a deleted topic's offsets")
            .await;
    }

    /// Appends offset tombstones (and the metadata tombstones of `emptied` groups) partition
    /// by partition, then forgets what each durable append removed.
    async fn write_tombstones(
        &self,
        by_partition: BTreeMap<i32, Vec<GroupRecord>>,
        emptied: &[String],
        what: &str,
    ) {
        for (p, recs) in by_partition {
            if let Err(e) = self.append(p, &recs).await {
                tracing::warn!(partition = p, error = %e, "{what} failed");
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
}
