//! Kafka's checkpoint files for the whole broker: `recovery-point-offset-checkpoint` (where
//! recovery after a crash starts per partition), `log-start-offset-checkpoint` (what
//! DeleteRecords moved) and `replication-offset-checkpoint` (the high watermark of each
//! replicated partition), written periodically, before DeleteRecords answers, and at
//! shutdown. The aborted-transaction index files written since the last checkpoint are
//! fsynced before a recovery point passes them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::BrokerContext;

pub const RECOVERY_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const HIGH_WATERMARK_CHECKPOINT: &str = "replication-offset-checkpoint";

/// Kafka's `replica.high.watermark.checkpoint.interval.ms` default: how often a clustered
/// node writes its high watermarks (and the other two files with them).
const HIGH_WATERMARK_INTERVAL: Duration = Duration::from_secs(5);

/// Offsets by partition, as Kafka's checkpoint files hold them.
pub type Checkpoint = HashMap<(String, i32), i64>;

/// The checkpoint files as read at start.
#[derive(Default)]
pub struct StartCheckpoints {
    pub recovery_points: Checkpoint,
    pub log_starts: Checkpoint,
    /// Replicated partitions only. A restarted replica does not know which of its records
    /// the ISR had: it starts from this (lower, safe) high watermark rather than its log
    /// end, so a consumer never reads a record a new leader may not have (Kafka reads the
    /// same file at start).
    pub high_watermarks: Checkpoint,
}

impl StartCheckpoints {
    /// Reads the three files of `dir`; an unreadable one is logged and taken as empty.
    pub fn read(dir: &std::path::Path) -> StartCheckpoints {
        let read = |name: &str, what: &str| {
            storage::logdir::read_checkpoint(&dir.join(name)).unwrap_or_else(|e| {
                tracing::warn!(error = %e, file = name, "unreadable checkpoint; {what}");
                HashMap::new()
            })
        };
        StartCheckpoints {
            recovery_points: read(RECOVERY_CHECKPOINT, "recovering every log fully"),
            log_starts: read(
                LOG_START_CHECKPOINT,
                "log start offsets come from the segments",
            ),
            high_watermarks: read(
                HIGH_WATERMARK_CHECKPOINT,
                "replicated partitions start from their log start until their ISR catches up",
            ),
        }
    }
}

/// One partition's line in each checkpoint file.
#[derive(Debug, Clone)]
pub struct PartitionCheckpoint {
    pub topic: String,
    pub partition: i32,
    pub recovery_point: i64,
    pub log_start: i64,
    /// Set for replicated partitions (leader or follower) only.
    pub high_watermark: Option<i64>,
}

pub fn write_checkpoints(
    dir: &std::path::Path,
    entries: &[PartitionCheckpoint],
) -> anyhow::Result<()> {
    let column = |f: fn(&PartitionCheckpoint) -> Option<i64>| -> Vec<(String, i32, i64)> {
        entries
            .iter()
            .filter_map(|e| Some((e.topic.clone(), e.partition, f(e)?)))
            .collect()
    };
    storage::logdir::write_checkpoint(
        &dir.join(RECOVERY_CHECKPOINT),
        &column(|e| Some(e.recovery_point)),
    )?;
    storage::logdir::write_checkpoint(
        &dir.join(LOG_START_CHECKPOINT),
        &column(|e| Some(e.log_start)),
    )?;
    let hws = column(|e| e.high_watermark);
    let hw_path = dir.join(HIGH_WATERMARK_CHECKPOINT);
    // A single node never writes the file (nothing of it is replicated).
    if !hws.is_empty() || hw_path.exists() {
        storage::logdir::write_checkpoint(&hw_path, &hws)?;
    }
    Ok(())
}

/// Writes the recovery-point checkpoint periodically so a crash recovers only the tail.
pub async fn checkpoint_loop(ctx: Arc<BrokerContext>, mut shutdown: watch::Receiver<bool>) {
    let mut every = Duration::from_millis(
        ctx.config
            .log_flush_offset_checkpoint_interval_ms
            .clamp(100, i64::MAX) as u64,
    );
    if !ctx.config.controller_quorum_voters.trim().is_empty() {
        every = every.min(HIGH_WATERMARK_INTERVAL);
    }
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Err(e) = checkpoint_now(&ctx).await {
            let policy = super::log_dir_failure::Policy::of(&ctx.config);
            let cause: &(dyn std::error::Error + 'static) = e.as_ref();
            // On a cluster a data dir that cannot take a checkpoint stops the node, as any
            // other failed write does (log_dir_failure); a single node goes on with the old
            // checkpoint, which only makes the next recovery validate more.
            if policy == super::log_dir_failure::Policy::Stop
                && super::log_dir_failure::is_io_error(cause)
            {
                super::log_dir_failure::failed_with(policy, &ctx.config.data_dir, cause);
            }
            tracing::warn!(error = %e, "writing checkpoints failed");
        }
    }
}

/// Gathers every shard's recovery points and log start offsets and writes Kafka's two
/// checkpoint files. Besides the periodic loop, DeleteRecords calls it before answering, so
/// a log start offset it reported survives a crash. One writer at a time: a writer that
/// gathered earlier must not overwrite a newer file.
pub async fn checkpoint_now(ctx: &BrokerContext) -> anyhow::Result<()> {
    static WRITER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one = WRITER.lock().await;
    let mut entries = Vec::new();
    let mut txn_indexes = Vec::new();
    for s in 0..ctx.shard_count() {
        let (e, dirty) = super::frontend::invoke_on(ctx, s, |state| async move {
            let parts = state.partitions.borrow();
            // Aborted-transaction index entries written so far lie below the log end; the
            // ones below the recovery point gathered here must be synced before it is
            // checkpointed (storage's txn_index: above it, reopening rebuilds them).
            let dirty: Vec<_> = parts
                .values()
                .flat_map(|part| part.log.take_dirty_txn_indexes())
                .collect();
            let e: Vec<_> = parts
                .iter()
                .map(|((t, p), part)| PartitionCheckpoint {
                    topic: t.to_string(),
                    partition: *p,
                    recovery_point: part.log.durable_end_offset(),
                    log_start: part.log.log_start_offset(),
                    high_watermark: part.checkpointed_high_watermark(),
                })
                .collect();
            (e, dirty)
        })
        .await?;
        entries.extend(e);
        txn_indexes.extend(dirty);
    }
    let dir = ctx.config.data_dir.clone();
    // fsyncs: off the shard thread.
    tokio::task::spawn_blocking(move || {
        for path in &txn_indexes {
            match std::fs::File::open(path).and_then(|f| f.sync_data()) {
                Ok(()) => {}
                // Deleted by retention or replaced by the cleaner (which syncs its output).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(anyhow::anyhow!("syncing {}: {e}", path.display()));
                }
            }
        }
        write_checkpoints(&dir, &entries)
    })
    .await?
}
