//! Share partitions on the data partition's home shard: one table per shard, each entry the
//! `inflight` state of (group, topic id, partition) next to the log it acquires from. Every
//! operation runs here whole: acknowledgements, expired locks, acquisition and the read, with
//! no await in between; then, when the state changed, a `ShareSnapshot` is appended to
//! `__share_group_state` (on that partition's home shard) and awaited before the caller
//! answers. The first touch after a start replays the key's newest snapshot.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use bytes::Bytes;
use tokio::sync::watch;

use super::dlq;
use super::inflight::{AckError, SharePartitionState};
use super::records::{self, Snapshot, StateKey};
use super::{OffsetReset, ShareConfig, ShareError, SHARE_STATE_SEGMENT_BYTES, SHARE_STATE_TOPIC};
use crate::coordinator::log;
use crate::partition::read_committed::AbortedFilter;
use crate::shard::{frontend, home_shard, BrokerContext, ShardState};

struct Entry {
    state: SharePartitionState,
    snapshot_epoch: i32,
    create_ms: i64,
}

#[derive(Default)]
pub struct ShareStore {
    parts: RefCell<HashMap<StateKey, Entry>>,
}

thread_local! {
    static STORE: RefCell<Option<(Weak<ShardState>, Rc<ShareStore>)>> = const { RefCell::new(None) };
}

impl ShareStore {
    /// This shard's table (a restarted broker in the same process gets a new one).
    pub fn of(state: &Rc<ShardState>) -> Rc<ShareStore> {
        STORE.with(|s| {
            let mut s = s.borrow_mut();
            if let Some((owner, store)) = s.as_ref() {
                if owner.upgrade().is_some_and(|o| Rc::ptr_eq(&o, state)) {
                    return store.clone();
                }
            }
            let store = Rc::new(ShareStore::default());
            *s = Some((Rc::downgrade(state), store.clone()));
            store
        })
    }
}

/// One partition's part of a ShareFetch or ShareAcknowledge.
#[derive(Debug, Clone)]
pub struct PartitionWork {
    pub key: StateKey,
    pub topic: String,
    pub member: String,
    /// (first, last, types) batches to acknowledge first.
    pub acks: Vec<(i64, i64, Vec<i8>)>,
    /// Records to acquire (0: acknowledge only).
    pub max_records: usize,
    /// Kafka's batch-optimized mode (KIP-1206, the default): a batch once started is
    /// acquired whole, past `max_records`; the record-limit mode stops at it exactly.
    pub whole_batches: bool,
    pub max_bytes: usize,
    /// Release everything the member holds here (its session closed).
    pub release: bool,
    pub config: ShareConfig,
}

#[derive(Debug, Default)]
pub struct PartitionDone {
    pub error: Option<ShareError>,
    pub ack_error: Option<ShareError>,
    pub acquired: Vec<(i64, i64, i16)>,
    pub records: Vec<Bytes>,
    /// When the next lock runs out (the long poll wakes then).
    pub next_deadline: Option<i64>,
    pub high_watermark: Option<watch::Receiver<i64>>,
}

/// Runs `work` on the partition's home shard.
pub async fn on_partition(ctx: &BrokerContext, work: PartitionWork) -> PartitionDone {
    let shard = home_shard(&work.topic, work.key.partition, ctx.shard_count());
    frontend::invoke_on(ctx, shard, move |state| run(state, work))
        .await
        .unwrap_or_else(|e| PartitionDone {
            error: Some(ShareError::CoordinatorNotAvailable(e.to_string())),
            ..Default::default()
        })
}

/// `share.auto.offset.reset=by_duration:`: the first record at or after `since` below the
/// high watermark (ListOffsets' timestamp lookup). Where every record is older, Kafka's
/// `offsetForTimestamp` throws OFFSET_NOT_AVAILABLE and the share fetch fails until a newer
/// record arrives; Strom starts at the high watermark instead, which is where that newer
/// record lands, without the failed fetches (FINDINGS #21). A read error fails this fetch
/// (retriable) rather than guess a start that could skip records.
fn by_duration_start(part: &crate::partition::Partition, since: i64) -> Result<i64, ShareError> {
    let hw = part.high_watermark();
    match part.log.offset_for_timestamp(since) {
        Ok(Some((offset, _))) if offset < hw => Ok(offset),
        Ok(_) => Ok(hw),
        Err(e) => Err(ShareError::CoordinatorNotAvailable(format!(
            "share.auto.offset.reset by_duration: the timestamp lookup failed: {e}"
        ))),
    }
}

async fn run(state: Rc<ShardState>, w: PartitionWork) -> PartitionDone {
    let Some(part) = state.partition(&w.topic, w.key.partition) else {
        return PartitionDone {
            error: Some(ShareError::UnknownTopicOrPartition),
            ..Default::default()
        };
    };
    let store = ShareStore::of(&state);
    if !store.parts.borrow().contains_key(&w.key) {
        let loaded = match load(&state.ctx, &w.key).await {
            Ok(s) => s,
            Err(e) => {
                return PartitionDone {
                    error: Some(e),
                    ..Default::default()
                }
            }
        };
        let now = crate::now_ms();
        let entry = match loaded {
            Some(s) => Entry {
                state: SharePartitionState::restore(s.start_offset, &s.batches),
                snapshot_epoch: s.snapshot_epoch,
                create_ms: s.create_ms,
            },
            None => Entry {
                state: SharePartitionState::new(match w.config.reset {
                    OffsetReset::Earliest => part.log.log_start_offset(),
                    OffsetReset::Latest => part.high_watermark(),
                    OffsetReset::ByDuration(ms) => match by_duration_start(&part, now - ms) {
                        Ok(start) => start,
                        Err(e) => {
                            return PartitionDone {
                                error: Some(e),
                                ..Default::default()
                            }
                        }
                    },
                }),
                snapshot_epoch: -1,
                create_ms: now,
            },
        };
        store
            .parts
            .borrow_mut()
            .entry(w.key.clone())
            .or_insert(entry);
    }
    let now = crate::now_ms();
    let limits = w.config.limits;
    let mut done = PartitionDone::default();
    let dead;
    let snapshot = {
        let mut parts = store.parts.borrow_mut();
        let entry = parts.get_mut(&w.key).expect("loaded above");
        let s = &mut entry.state;
        let start_before = s.start;
        let mut changed = s.expire(now, &limits);
        s.skip_below(part.log.log_start_offset());
        changed |= s.start != start_before;
        for (first, last, types) in &w.acks {
            match s.acknowledge(&w.member, *first, *last, types, &limits, now) {
                Ok(()) => changed = true,
                Err(e) => {
                    done.ack_error.get_or_insert(match e {
                        AckError::InvalidRecordState(..) | AckError::RenewDisabled => {
                            ShareError::InvalidRecordState(e.to_string())
                        }
                        AckError::InvalidRequest(m) => ShareError::InvalidRequest(m),
                    });
                }
            }
        }
        if w.release {
            changed |= s.release_member(&w.member, &limits);
        }
        if w.max_records > 0 {
            if let Some(from) = s.fetch_offset(&limits) {
                let committed = w.config.read_committed;
                match part.read(from, w.max_bytes.max(1), committed) {
                    Ok(read) => {
                        let aborted = read.aborted.iter().flatten();
                        let filter = committed.then(|| {
                            AbortedFilter::new(aborted.map(|t| (t.producer_id, t.first_offset)))
                        });
                        changed |= acquire(s, &w, now, read.data.chunks, filter, &mut done);
                    }
                    Err(e) => done.error = Some(ShareError::CoordinatorNotAvailable(e.to_string())),
                }
            }
            done.high_watermark = Some(part.watch_high_watermark());
        }
        done.next_deadline = s.next_deadline();
        dead = s.take_dead();
        changed.then(|| {
            entry.snapshot_epoch += 1;
            Snapshot {
                snapshot_epoch: entry.snapshot_epoch,
                state_epoch: 0,
                leader_epoch: 0,
                start_offset: entry.state.start,
                create_ms: entry.create_ms,
                write_ms: now,
                batches: entry.state.snapshot(),
            }
        })
    };
    // Dead letters first: the archived state below must not be durable before them.
    dlq::write(
        &state,
        &w.key.group_id,
        &w.topic,
        w.key.partition,
        &part,
        &dead,
    )
    .await;
    if let Some(snap) = snapshot {
        if let Err(e) = persist(&state.ctx, &w.key, &snap).await {
            tracing::warn!(group = %w.key.group_id, topic = %w.topic, partition = w.key.partition, error = %e, "writing share state failed");
            done.ack_error = Some(e);
        }
    }
    done
}

/// Acquires from the batches read, keeping the batches that gave something. Under
/// read_committed (`filter`), an aborted transaction's batches are archived instead, never
/// delivered; returns whether that changed the state (it must be persisted).
fn acquire(
    s: &mut SharePartitionState,
    w: &PartitionWork,
    now: i64,
    chunks: Vec<Bytes>,
    mut filter: Option<AbortedFilter>,
    done: &mut PartitionDone,
) -> bool {
    let mut left = w.max_records;
    let mut skipped = false;
    for chunk in chunks {
        for item in storage::batch::BatchIter::new(&chunk) {
            let Ok((h, raw)) = item else { break };
            if left == 0 {
                return skipped;
            }
            // Control batches stay acquirable as under read_uncommitted: the client
            // acknowledges their offsets as gaps.
            if let Some(f) = filter.as_mut() {
                if !f.delivers(&h, raw) && !h.is_control() {
                    s.skip(h.base_offset, h.last_offset(), &w.config.limits);
                    skipped = true;
                    continue;
                }
            }
            let (base, last, limits) = (h.base_offset, h.last_offset(), &w.config.limits);
            let got = if w.whole_batches {
                s.acquire_batch(base, last, &w.member, now, limits)
            } else {
                s.acquire(base, last, &w.member, now, left, limits)
            };
            if got.is_empty() {
                continue;
            }
            let n = got
                .iter()
                .map(|(f, l, _)| (l - f + 1) as usize)
                .sum::<usize>();
            left = left.saturating_sub(n);
            done.acquired.extend(got);
            done.records.push(chunk.slice_ref(raw));
        }
    }
    skipped
}

/// The share partition's start offset and lag (DescribeShareGroupOffsets; lag is v1's,
/// KIP-1226): (-1, -1) when it has no state. The lag is what is left to deliver: the data
/// partition's high watermark, less the start offset, less the records in flight already done
/// (acknowledged or archived, Kafka's `deliveryCompleteCount`). The state lives on the data
/// partition's shard, so both are read there.
pub async fn start_and_lag(
    ctx: &BrokerContext,
    key: StateKey,
    topic: String,
) -> Result<(i64, i64), ShareError> {
    let shard = home_shard(&topic, key.partition, ctx.shard_count());
    frontend::invoke_on(ctx, shard, move |state| async move {
        let held = ShareStore::of(&state)
            .parts
            .borrow()
            .get(&key)
            .map(|e| (e.state.start, e.state.delivery_complete()));
        let (start, done) = match held {
            Some(held) => held,
            None => match load(&state.ctx, &key).await? {
                None => return Ok((-1, -1)),
                Some(s) => {
                    let restored = SharePartitionState::restore(s.start_offset, &s.batches);
                    (restored.start, restored.delivery_complete())
                }
            },
        };
        let lag = log::partition_on_shard(&state, &topic, key.partition)
            .map_or(-1, |p| p.high_watermark() - start - done);
        Ok((start, lag))
    })
    .await
    .map_err(|e| ShareError::CoordinatorNotAvailable(e.to_string()))?
}

/// Sets (`Some(start)`) or deletes (`None`) the state of a share partition:
/// AlterShareGroupOffsets writes a snapshot with the new start offset and nothing in flight,
/// DeleteShareGroupOffsets and DeleteGroups a tombstone, so the next touch starts from
/// `share.auto.offset.reset` again. The caller has checked that the group is empty: with
/// no member there is no ShareFetch that could race the write.
pub async fn reset(
    ctx: &BrokerContext,
    key: StateKey,
    topic: String,
    start: Option<i64>,
) -> Result<(), ShareError> {
    let shard = home_shard(&topic, key.partition, ctx.shard_count());
    frontend::invoke_on(ctx, shard, move |state| async move {
        let store = ShareStore::of(&state);
        let held = store
            .parts
            .borrow()
            .get(&key)
            .map(|e| (e.snapshot_epoch, e.create_ms));
        let known = match held {
            Some(h) => Some(h),
            None => load(&state.ctx, &key)
                .await?
                .map(|s| (s.snapshot_epoch, s.create_ms)),
        };
        let now = crate::now_ms();
        let value = match start {
            // A newer snapshot epoch than any before it: `load` keeps the newest.
            Some(start_offset) => Some(records::encode_snapshot(&Snapshot {
                snapshot_epoch: known.map_or(0, |(e, _)| e + 1),
                state_epoch: 0,
                leader_epoch: 0,
                start_offset,
                create_ms: known.map_or(now, |(_, c)| c),
                write_ms: now,
                batches: Vec::new(),
            })),
            None if known.is_none() => return Ok(()),
            None => None,
        };
        persist_record(&state.ctx, &key, value).await?;
        store.parts.borrow_mut().remove(&key);
        Ok(())
    })
    .await
    .map_err(|e| ShareError::CoordinatorNotAvailable(e.to_string()))?
}

async fn state_partition(ctx: &BrokerContext, key: &StateKey) -> Result<i32, ShareError> {
    // One replica: share state does not follow partition leadership across a cluster yet
    // (docs/queues.md, "What is not there yet"); Kafka's
    // `share.coordinator.state.topic.replication.factor` is 3.
    let n = log::ensure_topic(
        ctx,
        SHARE_STATE_TOPIC,
        super::state_partitions(&ctx.config),
        SHARE_STATE_SEGMENT_BYTES,
        1,
        None,
    )
    .await?;
    Ok(crate::coordinator::partition_for(&key.coordinator_key(), n))
}

async fn persist(ctx: &BrokerContext, key: &StateKey, snap: &Snapshot) -> Result<(), ShareError> {
    persist_record(ctx, key, Some(records::encode_snapshot(snap))).await
}

/// Appends one `__share_group_state` record for `key` (a tombstone when `value` is None).
async fn persist_record(
    ctx: &BrokerContext,
    key: &StateKey,
    value: Option<Bytes>,
) -> Result<(), ShareError> {
    let p = state_partition(ctx, key).await?;
    let record = (records::encode_key(key), value);
    let shard = home_shard(SHARE_STATE_TOPIC, p, ctx.shard_count());
    frontend::invoke_on(ctx, shard, move |state| async move {
        let part = log::partition_on_shard(&state, SHARE_STATE_TOPIC, p).ok_or_else(|| {
            ShareError::CoordinatorNotAvailable(format!("{SHARE_STATE_TOPIC}-{p} is not open"))
        })?;
        log::append(&part, &[record], None).await?;
        Ok(())
    })
    .await
    .map_err(|e| ShareError::CoordinatorNotAvailable(e.to_string()))?
}

/// The newest snapshot of `key` in its `__share_group_state` partition.
async fn load(ctx: &BrokerContext, key: &StateKey) -> Result<Option<Snapshot>, ShareError> {
    let p = state_partition(ctx, key).await?;
    let shard = home_shard(SHARE_STATE_TOPIC, p, ctx.shard_count());
    let key = key.clone();
    frontend::invoke_on(ctx, shard, move |state| async move {
        let part = log::partition_on_shard(&state, SHARE_STATE_TOPIC, p).ok_or_else(|| {
            ShareError::CoordinatorNotAvailable(format!("{SHARE_STATE_TOPIC}-{p} is not open"))
        })?;
        let mut newest: Option<Snapshot> = None;
        log::replay(&part, |r| {
            let Some(k) = r.key.as_deref() else { return };
            // Strom writes snapshots only; a Kafka ShareUpdate is a delta on one.
            if records::is_update(k) {
                return;
            }
            if !matches!(records::decode_key(k), Ok(Some(ref rk)) if *rk == key) {
                return;
            }
            match r.value.as_deref() {
                None => newest = None, // tombstone: the state was deleted
                Some(v) => match records::decode_value(false, v) {
                    Ok(s)
                        if newest
                            .as_ref()
                            .is_none_or(|n| s.snapshot_epoch >= n.snapshot_epoch) =>
                    {
                        newest = Some(s)
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "skipping a share state record"),
                },
            }
        })?;
        Ok(newest)
    })
    .await
    .map_err(|e| ShareError::CoordinatorNotAvailable(e.to_string()))?
}
