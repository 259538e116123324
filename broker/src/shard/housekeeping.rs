//! Per-shard background log maintenance, one task per shard over the partitions it homes:
//! - **retention** every `log.retention.check.interval.ms` (Kafka's `kafka-log-retention`
//!   scheduler task): `Partition::delete_old_segments` with each topic's current settings;
//! - **producer expiration** every `producer.id.expiration.check.interval.ms`: producer
//!   state idle for `producer.id.expiration.ms` is dropped (`Partition::expire_producers`);
//! - **file deletion**: files of deleted segments (renamed `.deleted`) are unlinked once their
//!   `file.delete.delay.ms` has passed. Unlinking a large file can take milliseconds of
//!   filesystem work, so it runs on tokio's blocking pool, never on the shard thread.
//!
//! Deciding what to delete and renaming is cheap metadata work done inline between requests;
//! nothing here sits on a produce or fetch path.
//!
//! Hooking in more periodic work (e.g. the log cleaner, `log.cleaner.backoff.ms`): add a
//! `Job` with its own interval to `jobs()` below; each job gets the shard state and runs when
//! due. A job must not hold a `RefCell` borrow across an await.

use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::ShardState;

/// How often the loop wakes to see which jobs are due (and to unlink files whose delay has
/// passed). Bounds how late a `.deleted` file goes; the jobs keep their own intervals.
const TICK: Duration = Duration::from_millis(250);

/// One periodic maintenance job of a shard.
struct Job {
    name: &'static str,
    every: Duration,
    run: fn(&Rc<ShardState>, i64),
}

fn jobs(state: &ShardState) -> Vec<Job> {
    let retention_ms = state.ctx.config.log_retention_check_interval_ms.max(1) as u64;
    let expiration_ms = state
        .ctx
        .config
        .producer_id_expiration_check_interval_ms
        .max(1) as u64;
    let mut jobs = vec![
        Job {
            name: "retention",
            every: Duration::from_millis(retention_ms),
            run: retention_pass,
        },
        Job {
            name: "producer-expiration",
            every: Duration::from_millis(expiration_ms),
            run: producer_expiration_pass,
        },
    ];
    // Tiered storage's copy and expiration (`tiered::job`); only with the broker switch on.
    if state.ctx.remote.is_some() {
        jobs.push(Job {
            name: "remote-log",
            every: Duration::from_millis(
                state.ctx.config.remote_log_manager_task_interval_ms.max(1) as u64,
            ),
            run: crate::tiered::remote_log_pass,
        });
    }
    jobs
}

/// Kafka's `removeExpiredProducers` over every partition of the shard: without it the
/// producer state of every short-lived producer would stay in memory for good.
fn producer_expiration_pass(state: &Rc<ShardState>, now_ms: i64) {
    // Dynamic (AlterConfigs on the broker), so read at each pass.
    let expiration_ms = state.ctx.catalog.broker().config.producer_id_expiration_ms;
    let partitions: Vec<_> = state.partitions.borrow().values().cloned().collect();
    for p in partitions {
        let removed = p.expire_producers(now_ms, expiration_ms);
        if removed > 0 {
            tracing::debug!(topic = %p.topic, partition = p.index, removed, "expired producer state");
        }
    }
}

/// Runs until shutdown.
pub async fn run(state: Rc<ShardState>, mut shutdown: watch::Receiver<bool>) {
    let jobs = jobs(&state);
    let started = Instant::now();
    let mut last_run: Vec<Instant> = jobs.iter().map(|_| started).collect();
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(TICK) => {}
        }
        let now = Instant::now();
        for (job, last) in jobs.iter().zip(last_run.iter_mut()) {
            if now.duration_since(*last) >= job.every {
                *last = now;
                tracing::trace!(shard = state.id, job = job.name, "housekeeping");
                (job.run)(&state, crate::now_ms());
            }
        }
        unlink_due_files(&state, crate::now_ms()).await;
    }
}

/// Kafka's `deleteOldSegments` over every partition of the shard.
fn retention_pass(state: &Rc<ShardState>, now_ms: i64) {
    let partitions: Vec<_> = state.partitions.borrow().values().cloned().collect();
    for p in partitions {
        // A tiered partition's local segments go by local retention once copied, in the
        // remote-log job; total retention applies to its remote segments there too.
        if state.ctx.remote.is_some() && p.settings().tiered.enabled {
            continue;
        }
        match p.delete_old_segments(now_ms) {
            Ok(out) if !out.deleted.is_empty() => {
                tracing::info!(topic = %p.topic, partition = p.index, segments = ?out.deleted,
                    bytes = out.bytes, reasons = ?out.reasons, log_start_offset = out.log_start_offset,
                    "deleted log segments");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "retention check failed");
            }
        }
    }
}

/// Unlinks the `.deleted` files whose `file.delete.delay.ms` passed, on the blocking pool.
async fn unlink_due_files(state: &Rc<ShardState>, now_ms: i64) {
    let mut due = Vec::new();
    for p in state.partitions.borrow().values() {
        due.extend(p.log.take_due_deletions(now_ms));
    }
    if due.is_empty() {
        return;
    }
    let r = tokio::task::spawn_blocking(move || {
        for f in due {
            match std::fs::remove_file(&f) {
                Ok(()) => {}
                // Gone with its partition (DeleteTopics removes the whole dir).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!(file = %f.display(), error = %e, "cannot delete file"),
            }
        }
    })
    .await;
    if let Err(e) = r {
        tracing::warn!(error = %e, "file deletion task failed");
    }
}
