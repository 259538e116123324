//! A shard's whole life on its thread: start (its io_uring, recovery of the partitions it
//! homes), the inbox loop that runs other shards' messages, its timers and background jobs
//! (flush.ms, the log cleaner, housekeeping, the checkpoint writer on shard 0, transaction
//! timeouts), the accept loop of its listener, and stop (in-flight requests finish, logs
//! close, the report for the checkpoint files).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{mpsc, watch};

use super::checkpoint::{PartitionCheckpoint, StartCheckpoints};
use super::{BrokerContext, ShardMessage, ShardState};

/// What a shard hands back when it stops: per partition (topic, partition, recovery point,
/// log start offset).
pub type ShardReport = Vec<PartitionCheckpoint>;

/// Runs shard `id` on the calling thread until `shutdown`. `serve` is the server's side of
/// the shard (its listener's accept loop and the connections): called once the partitions
/// are open, it returns after shutdown when its connections have finished (bounded), and
/// then the logs close. Passing it in keeps the shard layer below the server layer.
pub fn run_shard<S, Fut>(
    id: usize,
    ctx: Arc<BrokerContext>,
    mut inbox: mpsc::Receiver<ShardMessage>,
    shutdown: watch::Receiver<bool>,
    ready: std::sync::mpsc::Sender<Result<usize, String>>,
    checkpoints: Arc<StartCheckpoints>,
    serve: S,
) -> anyhow::Result<ShardReport>
where
    S: FnOnce(Rc<ShardState>, watch::Receiver<bool>) -> anyhow::Result<Fut>,
    Fut: std::future::Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let start = (|| -> anyhow::Result<Rc<ShardState>> {
            let io = storage::IoBackend::new(io_kind(&ctx.config.io_backend))?;
            io.on_failure(super::log_dir_failure::listener(super::log_dir_failure::Policy::of(&ctx.config)));
            let state = Rc::new(ShardState::new(id, ctx.clone(), io));
            super::set_current(Some(state.clone()));
            let catalog = ctx.catalog.snapshot();
            let shards = ctx.shard_count();
            let clustered = !ctx.config.controller_quorum_voters.trim().is_empty();
            for topic in catalog.topics.values() {
                for p in 0..topic.partitions {
                    if super::home_shard(&topic.name, p, shards) != id {
                        continue;
                    }
                    // On a cluster a node holds only the replicas the image places on it, and
                    // a missing directory is one it does not hold (moved away by a
                    // reassignment, or never placed here): the replica manager opens the ones
                    // the image gives it once the quorum runs.
                    if clustered && !ctx.config.data_dir.join(format!("{}-{p}", topic.name)).exists() {
                        continue;
                    }
                    let key = (topic.name.to_string(), p);
                    let point = checkpoints.recovery_points.get(&key).copied().unwrap_or(0);
                    let part = match super::open_partition(&state, topic, p, Some(point)) {
                        Ok(part) => part,
                        Err(e) => {
                            // One bad log must not take the other partitions down with it.
                            tracing::error!(topic = %topic.name, partition = p, error = %e,
                                "cannot open partition; serving it as offline (KAFKA_STORAGE_ERROR)");
                            state.offline.borrow_mut().insert((topic.name.clone(), p), e.to_string());
                            continue;
                        }
                    };
                    // Storage does not persist the log start offset (DeleteRecords may have
                    // moved it inside a segment): Kafka's checkpoint file does.
                    if let Some(&start) = checkpoints.log_starts.get(&key) {
                        if start > part.log.log_start_offset() && start <= part.log.log_end_offset() {
                            part.log.advance_log_start(start)?;
                        }
                    }
                    if let Some(&hw) = checkpoints.high_watermarks.get(&key) {
                        part.restore_high_watermark(hw);
                    }
                }
            }
            Ok(state)
        })();
        let state = match start {
            Ok(s) => {
                let _ = ready.send(Ok(id));
                s
            }
            Err(e) => {
                let _ = ready.send(Err(format!("{e:#}")));
                return Err(e);
            }
        };
        tracing::debug!(shard = id, partitions = state.partitions.borrow().len(), io = ?state.io.kind(), "shard ready");

        let inbox_state = state.clone();
        tokio::task::spawn_local(async move {
            while let Some(msg) = inbox.recv().await {
                msg(inbox_state.clone());
            }
        });
        if id == 0 {
            tokio::task::spawn_local(super::checkpoint::checkpoint_loop(ctx.clone(), shutdown.clone()));
        }
        tokio::task::spawn_local(flush_timer(state.clone(), shutdown.clone()));
        tokio::task::spawn_local(super::cleaner::run(state.clone(), shutdown.clone()));
        tokio::task::spawn_local(super::housekeeping::run(state.clone(), shutdown.clone()));
        // Transactions left prepared by the last run complete now, open ones time out, without
        // waiting for a client to touch their coordinator.
        crate::coordinator::txn::TxnShard::of(&state).load_all();
        match serve(state.clone(), shutdown.clone()) {
            Ok(connections) => connections.await,
            Err(e) => tracing::error!(shard = id, error = %e, "shard cannot serve its listener"),
        }
        let partitions: Vec<_> = state.partitions.borrow_mut().drain().collect();
        let mut report = Vec::new();
        for ((topic, p), part) in partitions {
            let start = part.log.log_start_offset();
            let hw = part.checkpointed_high_watermark();
            let entry = |recovery_point| PartitionCheckpoint {
                topic: topic.to_string(),
                partition: p,
                recovery_point,
                log_start: start,
                high_watermark: hw,
            };
            match Rc::try_unwrap(part) {
                Ok(part) => {
                    if let Err(e) = part.write_producer_snapshot() {
                        tracing::warn!(topic = %topic, partition = p, error = %e,
                            "producer snapshot not written; the next start rebuilds it from the log");
                    }
                    let end = part.log.log_end_offset();
                    part.log.close().await.with_context(|| format!("closing {topic}-{p}"))?;
                    report.push(entry(end));
                }
                Err(part) => {
                    // Still referenced by a task that outlived the grace period: flush what we
                    // can and report only what is durable.
                    part.log.flush().await?;
                    report.push(entry(part.log.durable_end_offset()));
                }
            }
        }
        super::set_current(None);
        Ok(report)
    })
}

fn io_kind(name: &str) -> storage::IoBackendKind {
    match name {
        "uring" => storage::IoBackendKind::Uring,
        "sync" => storage::IoBackendKind::Sync,
        _ => storage::IoBackendKind::Auto,
    }
}

/// Kafka's `flush.ms` per topic: every 100 ms, partitions whose unflushed data is older than
/// their `flush.ms` are fdatasync'd. (Appends also honour `flush.messages` and `flush.ms` as
/// they complete; this timer covers a partition that goes quiet.)
async fn flush_timer(state: Rc<ShardState>, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        let partitions: Vec<_> = state.partitions.borrow().values().cloned().collect();
        let now = std::time::Instant::now();
        for p in partitions {
            if let Err(e) = p.flush_if_due(now).await {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "flush.ms flush failed");
            }
        }
    }
}
