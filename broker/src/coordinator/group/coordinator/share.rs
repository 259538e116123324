//! The share groups of this shard's coordinator partitions (`coordinator::share::group`,
//! kept in the shard's `ShareGroups` table) in `__consumer_offsets`: their records written
//! with every change (`coordinator::share::persist`), replayed at a load, dropped at an
//! unload, and their members' sessions expired by the shard's timer as Kafka's are.

use super::GroupShard;
use crate::coordinator::group::records::GroupRecord;
use crate::coordinator::share::group::ShareGroups;
use crate::coordinator::share::persist::ShareRecord;
use crate::coordinator::share::ShareConfig;

fn wrap(recs: Vec<ShareRecord>) -> Vec<GroupRecord> {
    recs.into_iter().map(GroupRecord::Share).collect()
}

impl GroupShard {
    /// What changed in share group `group_id` since it was last written, as records.
    pub fn share_records(&self, group_id: &str) -> Vec<GroupRecord> {
        let id_of = self.topic_ids();
        let groups = ShareGroups::here();
        let mut all = groups.groups.borrow_mut();
        all.get_mut(group_id)
            .map(|g| wrap(g.take_records(group_id, &id_of)))
            .unwrap_or_default()
    }

    /// `share_records` written to the group's partition, before the caller answers.
    pub async fn persist_share(&self, group_id: &str) -> Result<(), super::GroupError> {
        let recs = self.share_records(group_id);
        if recs.is_empty() {
            return Ok(());
        }
        self.append(self.partition_of(group_id), &recs).await
    }

    /// The tombstones that delete share group `group_id` (it is dropped from the table).
    pub fn remove_share_group(&self, group_id: &str) -> Vec<GroupRecord> {
        ShareGroups::here()
            .groups
            .borrow_mut()
            .remove(group_id)
            .map(|g| wrap(g.tombstones(group_id)))
            .unwrap_or_default()
    }

    /// After a load of partition `p`: the replayed share groups' members get a session from
    /// `now`, and their partition counts are checked against the catalog.
    pub(super) fn finish_share_restore(&self, p: i32, now: i64) {
        let counts = self.topic_partitions();
        for (id, g) in ShareGroups::here().groups.borrow_mut().iter_mut() {
            if self.partition_of(id) == p {
                g.finish_restore(now, &counts);
            }
        }
    }

    /// An unload of partition `p` forgets its share groups, as it does the others.
    pub(super) fn unload_share(&self, p: i32) {
        ShareGroups::here()
            .groups
            .borrow_mut()
            .retain(|id, _| self.partition_of(id) != p);
    }

    /// The timer: members whose session ran out leave (a new group epoch and assignment),
    /// as Kafka's session timers remove them; the records to write, by partition.
    pub(super) fn share_tick(&self, now: i64) -> Vec<(i32, Vec<GroupRecord>)> {
        let Ok(shard) = self.shard() else {
            return Vec::new();
        };
        let groups = ShareGroups::here();
        let mut all = groups.groups.borrow_mut();
        if all.is_empty() {
            return Vec::new();
        }
        // The catalog's counts and ids are read only once some member has expired: most
        // ticks expire nobody, and this runs every 50 ms.
        let mut counts = None;
        let mut out = Vec::new();
        for (id, g) in all.iter_mut() {
            if g.members.is_empty() {
                continue;
            }
            let timeout = ShareConfig::of(&shard.ctx, id).session_timeout_ms;
            if g.members
                .values()
                .all(|m| now - m.last_heartbeat_ms < timeout)
            {
                continue;
            }
            let counts = counts.get_or_insert_with(|| self.topic_partitions());
            if g.expire_members(now, timeout, |t| counts.get(t).copied()) {
                out.push((
                    self.partition_of(id),
                    wrap(g.take_records(id, &self.topic_ids())),
                ));
            }
        }
        out
    }
}
