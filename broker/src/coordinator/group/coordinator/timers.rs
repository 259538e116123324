//! The shard's group timers: one task per shard ticks every group (sessions, rebalances,
//! the initial delay, KIP-848 revocations), writes what the tick changed, and now and then
//! expires committed offsets.

use std::rc::Weak;
use std::time::Duration;

use super::GroupShard;
use crate::coordinator::group::records::GroupRecord;

/// How often session, rebalance and initial-delay timers are checked.
const TICK: Duration = Duration::from_millis(50);
/// How often committed offsets are checked against `offsets.retention.minutes` (Kafka's
/// `offsets.retention.check.interval.ms` default).
const RETENTION_CHECK_MS: i64 = 600_000;

impl GroupShard {
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
            if let Some(s) = g.streams.as_mut() {
                s.tick(now, &self.streams_cfg_for(&g.id));
                let recs: Vec<GroupRecord> = s
                    .take_records(&g.id)
                    .into_iter()
                    .map(GroupRecord::Streams)
                    .collect();
                if !recs.is_empty() {
                    records.push((self.partition_of(&g.id), recs));
                }
            }
            g.tick(now, &self.cfg);
            if g.is_dirty() {
                dirty.push(g.id.clone());
            }
        }
        records.extend(self.share_tick(now));
        (dirty, records)
    }

    /// The timer task of the shard's groups (spawned with them, ends when they are dropped).
    pub(super) async fn tick_loop(groups: Weak<GroupShard>) {
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
                        tracing::warn!(partition = p, error = %e, "persisting a consumer, streams or share group failed");
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
}
