//! Loading a coordinator partition: `__consumer_offsets` replayed into the groups the first
//! time the shard touches the partition (offsets inside a transaction wait for its marker).

use super::{GroupShard, PendingTxnOffset};
use crate::coordinator::group::classic::{Group, GroupState, Member};
use crate::coordinator::group::records::GroupRecord;
use crate::coordinator::group::{GroupError, OFFSETS_TOPIC};
use crate::coordinator::log;

impl GroupShard {
    /// Replays `__consumer_offsets` partition `p` into memory, once per shard life.
    pub fn ensure_loaded(&self, p: i32) -> Result<(), GroupError> {
        self.ensure_loaded_at(p, None)
    }

    /// The partitions loaded here, with their epochs.
    pub fn loaded_partitions(&self) -> Vec<(i32, Option<i32>)> {
        self.loaded.list()
    }

    /// Forgets the groups of partition `p` (this node stopped leading it): their members'
    /// next requests get NOT_COORDINATOR and go to the new coordinator, which has them from
    /// the replicated log.
    pub fn unload(&self, p: i32) {
        if !self.loaded.remove(p) {
            return;
        }
        let n = self.partition_count();
        self.groups
            .borrow_mut()
            .retain(|id, _| super::offsets_partition(id, n) != p);
        self.unload_share(p);
        for pending in self.pending_txn.borrow_mut().values_mut() {
            pending.retain(|o| o.partition_of_group != p);
        }
    }

    /// `ensure_loaded` at leader epoch `epoch`: loaded at another epoch, it is loaded again
    /// (it may have been led elsewhere meanwhile).
    pub fn ensure_loaded_at(&self, p: i32, epoch: Option<i32>) -> Result<(), GroupError> {
        if self.loaded.is_loaded_at(p, epoch) {
            return Ok(());
        }
        self.unload(p);
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
                    c.finish_restore(now, &self.consumer_cfg_for(&g.id));
                }
                if let Some(s) = g.streams.as_mut() {
                    s.finish_restore(now, self.streams_cfg_for(&g.id).session_timeout_ms);
                }
            }
        }
        self.finish_share_restore(p, now);
        tracing::debug!(
            partition = p,
            records = applied,
            "loaded group coordinator partition"
        );
        self.loaded.insert(p, epoch);
        Ok(())
    }

    fn apply(&self, rec: GroupRecord, now: i64, name_of: &dyn Fn(&uuid::Uuid) -> Option<String>) {
        let mut groups = self.groups.borrow_mut();
        match rec {
            GroupRecord::ConsumerEpoch { ref group, .. }
            | GroupRecord::ConsumerMember { ref group, .. }
            | GroupRecord::TargetEpoch { ref group, .. }
            | GroupRecord::TargetMember { ref group, .. }
            | GroupRecord::CurrentAssignment { ref group, .. }
            | GroupRecord::ConsumerRegex { ref group, .. } => {
                let g = groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(group, now));
                g.consumer
                    .get_or_insert_with(Default::default)
                    .restore(rec, name_of);
            }
            GroupRecord::Streams(rec) => {
                let group = rec.group().to_string();
                let tombstone = matches!(
                    rec,
                    crate::coordinator::group::streams::records::StreamsRecord::Metadata(_, None)
                );
                let g = groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(&group, now));
                if tombstone {
                    // The group was deleted: what follows (its topology tombstone) is its end.
                    g.streams = None;
                } else if let Some(s) = g.streams.as_mut() {
                    s.restore(rec);
                } else if !matches!(
                    rec,
                    crate::coordinator::group::streams::records::StreamsRecord::Topology(_, None)
                ) {
                    g.streams.get_or_insert_with(Default::default).restore(rec);
                }
            }
            GroupRecord::Share(rec) => {
                let groups = crate::coordinator::share::group::ShareGroups::here();
                crate::coordinator::share::persist::restore(
                    &mut groups.groups.borrow_mut(),
                    rec,
                    name_of,
                );
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
}
