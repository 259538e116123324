//! Kafka's checkpoint files for the whole broker: `recovery-point-offset-checkpoint` (where
//! recovery after a crash starts per partition) and `log-start-offset-checkpoint` (what
//! DeleteRecords moved), written periodically, before DeleteRecords answers, and at
//! shutdown. The aborted-transaction index files written since the last checkpoint are
//! fsynced before a recovery point passes them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::BrokerContext;

pub const RECOVERY_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_CHECKPOINT: &str = "log-start-offset-checkpoint";

/// Offsets by partition, as Kafka's checkpoint files hold them.
pub type Checkpoint = HashMap<(String, i32), i64>;

pub fn write_checkpoints(
    dir: &std::path::Path,
    entries: &[(String, i32, i64, i64)],
) -> anyhow::Result<()> {
    let recovery: Vec<(String, i32, i64)> = entries
        .iter()
        .map(|(t, p, r, _)| (t.clone(), *p, *r))
        .collect();
    let starts: Vec<(String, i32, i64)> = entries
        .iter()
        .map(|(t, p, _, s)| (t.clone(), *p, *s))
        .collect();
    storage::logdir::write_checkpoint(&dir.join(RECOVERY_CHECKPOINT), &recovery)?;
    storage::logdir::write_checkpoint(&dir.join(LOG_START_CHECKPOINT), &starts)?;
    Ok(())
}

/// Writes the recovery-point checkpoint periodically so a crash recovers only the tail.
pub async fn checkpoint_loop(ctx: Arc<BrokerContext>, mut shutdown: watch::Receiver<bool>) {
    let every = Duration::from_millis(
        ctx.config
            .log_flush_offset_checkpoint_interval_ms
            .clamp(100, i64::MAX) as u64,
    );
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Err(e) = checkpoint_now(&ctx).await {
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
                .map(|((t, p), part)| {
                    (
                        t.to_string(),
                        *p,
                        part.log.durable_end_offset(),
                        part.log.log_start_offset(),
                    )
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
