//! The log cleaner: one task per shard compacts the shard's partitions of topics with
//! `cleanup.policy` containing `compact` (Kafka's `LogCleaner`, one cleaner thread per
//! shard). The delete half of `compact,delete` is retention's.
//!
//! Each round picks the partition with the highest dirty ratio at or above its
//! `min.cleanable.dirty.ratio` (or whose dirty data is older than `max.compaction.lag.ms`,
//! or whose kept tombstones passed their delete horizon) and cleans it; with nothing to
//! clean it sleeps `log.cleaner.backoff.ms`. Planning and the swap run on the shard (the
//! log's segment list is shard-local); reading, mapping and rewriting run on tokio's
//! blocking pool, throttled to `log.cleaner.io.max.bytes.per.second`, so the shard keeps
//! serving produce and fetch meanwhile. The dirty section of each partition starts at
//! its entry in `cleaner-offset-checkpoint` (Kafka's file, in the data dir).

use std::collections::{HashMap, HashSet};
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use storage::cleaner::{CleanTask, Codec, Throttle};
use tokio::sync::watch;

use crate::partition::{records, Partition};
use crate::shard::{PartitionKey, ShardState};

/// The broker's codecs, lent to the storage cleaner (storage has none).
struct BrokerCodec;

impl Codec for BrokerCodec {
    fn decompress(&self, codec: u8, data: &[u8]) -> Option<Vec<u8>> {
        // Bounded like a produce: Kafka's largest batch inflated.
        records::decompress(codec, data, i32::MAX as usize).ok()
    }
    fn compress(&self, codec: u8, data: &[u8]) -> Option<Vec<u8>> {
        records::compress(codec, data)
    }
}

/// Sets the stop flag when the pass is abandoned (its future dropped at shutdown), so
/// the blocking half stops at its next chunk.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[derive(Default)]
struct CleanerState {
    /// Earliest delete horizon of a tombstone kept by the last pass, per partition.
    horizons: HashMap<PartitionKey, i64>,
    /// Partitions whose last pass failed, with when to try again.
    failed: HashMap<PartitionKey, Instant>,
}

/// The shard's cleaner task; returns at shutdown.
pub async fn run(state: Rc<ShardState>, mut shutdown: watch::Receiver<bool>) {
    if !state.ctx.config.log_cleaner_enable {
        return;
    }
    let mut cs = CleanerState::default();
    loop {
        // Dynamic (AlterConfigs on the broker, as in Kafka): read at every round.
        let backoff_ms = state.ctx.catalog.broker().config.log_cleaner_backoff_ms;
        let backoff = Duration::from_millis(backoff_ms.max(1) as u64);
        let cleaned = match pick(&state, &mut cs) {
            Some((key, part)) => {
                let r = tokio::select! {
                    _ = shutdown.changed() => return,
                    r = clean_partition(&state, &key, part, &mut cs) => r,
                };
                if let Err(e) = r {
                    tracing::warn!(topic = %key.0, partition = key.1, error = %e,
                        "log cleaning failed; retrying later");
                    cs.failed.insert(key, Instant::now() + backoff * 10);
                }
                true
            }
            None => false,
        };
        // After a pass, look again at once (another log may be dirty); else back off.
        // Either way yield, so a shard with many dirty logs still serves requests.
        let pause = if cleaned { Duration::ZERO } else { backoff };
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// The filthiest partition that needs cleaning (Kafka's `grabFilthiestCompactedLog`).
fn pick(state: &ShardState, cs: &mut CleanerState) -> Option<(PartitionKey, Rc<Partition>)> {
    let now = crate::now_ms();
    let ckpt = &state.ctx.cleaner_checkpoints;
    let nowi = Instant::now();
    cs.failed.retain(|_, until| *until > nowi);
    let parts: Vec<_> = state
        .partitions
        .borrow()
        .iter()
        .map(|(k, p)| (k.clone(), p.clone()))
        .collect();
    let mut best: Option<(f64, PartitionKey, Rc<Partition>)> = None;
    for (key, part) in parts {
        let settings = part.settings();
        if !settings.compact || cs.failed.contains_key(&key) {
            continue;
        }
        let info = part.log.cleanable(
            ckpt.get(&key.0, key.1),
            &settings.cleaner,
            now,
            part.last_stable_offset(),
        );
        let ratio = info.dirty_ratio();
        let dirty = info.dirty_bytes > 0
            && (ratio >= settings.cleaner.min_cleanable_dirty_ratio || info.overdue);
        let horizon_due = cs.horizons.get(&key).is_some_and(|&t| t <= now);
        if !(dirty || horizon_due) {
            continue;
        }
        // Overdue and horizon-due logs rank first, as if fully dirty.
        let rank = if info.overdue || horizon_due {
            ratio + 1.0
        } else {
            ratio
        };
        if best.as_ref().is_none_or(|b| rank > b.0) {
            best = Some((rank, key, part));
        }
    }
    best.map(|(_, k, p)| (k, p))
}

async fn clean_partition(
    state: &Rc<ShardState>,
    key: &PartitionKey,
    part: Rc<Partition>,
    cs: &mut CleanerState,
) -> anyhow::Result<()> {
    let ctx = state.ctx.clone();
    let now = crate::now_ms();
    let mut cfg = part.settings().cleaner.clone();
    cfg.dedupe_buffer_bytes /= ctx.shard_count().max(1);
    let checkpoint = ctx.cleaner_checkpoints.get(&key.0, key.1);
    let Some(task) = part
        .log
        .clean_task(checkpoint, &cfg, now, part.cleaner_producer_state())?
    else {
        cs.horizons.remove(key);
        return Ok(());
    };
    // Only a weak reference while the rewrite runs: a topic deletion must not wait for it.
    let weak: Weak<Partition> = Rc::downgrade(&part);
    drop(part);
    let stop = Arc::new(AtomicBool::new(false));
    let _guard = StopOnDrop(stop.clone());
    let rate = ctx
        .catalog
        .broker()
        .config
        .log_cleaner_io_max_bytes_per_second;
    let started = Instant::now();
    let outcome = tokio::task::spawn_blocking(move || run_task(task, rate, &stop)).await??;
    let Some(part) = weak.upgrade() else {
        outcome.discard();
        return Ok(());
    };
    let clean_end = outcome.clean_end;
    let horizon = outcome.next_delete_horizon;
    let stats = outcome.stats.clone();
    part.log.install_cleaned(outcome).await?;
    match horizon {
        Some(t) => cs.horizons.insert(key.clone(), t),
        None => cs.horizons.remove(key),
    };
    ctx.cleaner_checkpoints.set(&key.0, key.1, clean_end);
    let live: HashSet<String> = ctx
        .catalog
        .snapshot()
        .topics
        .keys()
        .map(|t| t.to_string())
        .collect();
    let c = ctx.clone();
    tokio::task::spawn_blocking(move || c.cleaner_checkpoints.persist(&live)).await??;
    state.metrics.log_cleaner_passes.inc();
    state
        .metrics
        .log_cleaner_bytes_written
        .inc_by(stats.bytes_written);
    tracing::info!(topic = %key.0, partition = key.1, clean_end,
        segments = stats.segments_cleaned, read = stats.bytes_read, written = stats.bytes_written,
        records_kept = stats.records_kept, records_read = stats.records_read,
        tombstones_removed = stats.tombstones_removed, records_expired = stats.records_expired,
        ms = started.elapsed().as_millis() as u64,
        "log cleaned");
    Ok(())
}

fn run_task(
    task: CleanTask,
    rate: f64,
    stop: &AtomicBool,
) -> Result<storage::cleaner::CleanOutcome, storage::StorageError> {
    task.run(Some(&BrokerCodec), &mut Throttle::new(rate, stop))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_each_kafka_codec_when_compressing_then_decompress_gives_the_records_back() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        for codec in 1..=4u8 {
            let z = BrokerCodec.compress(codec, &data).expect("compresses");
            assert!(z.len() < data.len(), "codec {codec} did not compress");
            assert_eq!(
                BrokerCodec.decompress(codec, &z).as_deref(),
                Some(&data[..]),
                "codec {codec}"
            );
        }
        assert!(BrokerCodec.compress(9, &data).is_none());
    }
}
