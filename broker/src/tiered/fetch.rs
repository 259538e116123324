//! Fetches below the local log start (Kafka's `RemoteLogManager.read` through
//! `DelayedRemoteFetch`): the home shard only routes — it finds the served remote segment
//! holding the offset, from the durable manifest in memory — and the connection's task
//! awaits the read, which runs on the remote runtime (`strom-remote` threads), never on a
//! shard's loop. The shard's own partitions keep being served meanwhile.

use std::sync::Arc;

use storage::remote::manifest::RemoteSegment;
use storage::remote::read::{RemoteData, RemoteReadError};
use storage::remote::transfer::TransferError;

use super::partition::RemotePartitionError;
use super::{RemoteLogManager, RemotePartition};
use crate::partition::Partition;
use crate::shard::ShardState;

/// One partition of a fetch to serve from the object store.
pub struct RemoteFetch {
    pub partition: Arc<RemotePartition>,
    pub segment: RemoteSegment,
    pub offset: i64,
    pub max_bytes: usize,
    pub read_committed: bool,
}

/// The remote side of a tiered partition, opened on first use; `None` (one branch) when
/// tiered storage is off or the topic is not tiered.
pub fn remote_of(state: &ShardState, p: &Partition) -> Option<Arc<RemotePartition>> {
    let manager = state.ctx.remote.as_ref()?;
    if let Some(rp) = manager.partition(&p.topic, p.index) {
        return Some(rp);
    }
    let settings = p.settings();
    if !settings.tiered.enabled || settings.compact {
        return None;
    }
    // After a restart the first fetch may come before the first housekeeping pass: the
    // manifest is loaded here then, so remote data is never answered OFFSET_OUT_OF_RANGE.
    super::job::remote_partition(state, manager, p)
}

/// The partition's log start offset: the remote log start when remote segments are served
/// below the local log start (Kafka's `logStartOffset` with tiered storage).
pub fn log_start(rp: Option<&RemotePartition>, local_start: i64) -> i64 {
    rp.and_then(RemotePartition::remote_log_start)
        .map_or(local_start, |r| r.min(local_start))
}

/// A fetch at `offset` below the local log start that the object store serves.
pub fn route(
    rp: &Arc<RemotePartition>,
    local_start: i64,
    offset: i64,
    max_bytes: usize,
    read_committed: bool,
) -> Option<RemoteFetch> {
    if offset >= local_start {
        return None;
    }
    let segment = rp.serving(offset)?;
    Some(RemoteFetch {
        partition: rp.clone(),
        segment,
        offset,
        max_bytes,
        read_committed,
    })
}

impl RemoteLogManager {
    /// Moves `rp`'s log start (DeleteRecords) on the remote runtime; awaitable from a shard.
    pub async fn advance_log_start(
        &self,
        rp: Arc<RemotePartition>,
        offset: i64,
    ) -> Result<(), RemotePartitionError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.handle.spawn(async move {
            let _ = tx.send(rp.advance_log_start(offset).await);
        });
        rx.await
            .unwrap_or_else(|_| Err(TransferError::Task("remote runtime stopped".into()).into()))
    }

    /// Serves `f` on the remote runtime; awaitable from any shard.
    pub async fn read(&self, f: RemoteFetch) -> Result<RemoteData, RemoteReadError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let reader = self.reader.clone();
        let metrics = self.metrics.clone();
        self.handle.spawn(async move {
            let started = std::time::Instant::now();
            let prefix = &f.partition.prefix;
            let r = reader
                .read(prefix, &f.segment, f.offset, f.max_bytes, f.read_committed)
                .await;
            metrics
                .fetch_seconds
                .observe(started.elapsed().as_secs_f64());
            match &r {
                Ok(d) => {
                    metrics.fetch_cache_hits.inc_by(d.cache_hits);
                    metrics.fetch_cache_misses.inc_by(d.cache_misses);
                }
                Err(e) => {
                    metrics.fetch_errors.inc();
                    let (topic, partition) = &f.partition.key;
                    tracing::warn!(topic = %topic, partition, offset = f.offset, segment = %f.segment.id,
                        error = %e, "remote fetch failed");
                }
            }
            let _ = tx.send(r);
        });
        rx.await.unwrap_or_else(|_| {
            Err(RemoteReadError::Transfer(TransferError::Task(
                "remote runtime stopped".into(),
            )))
        })
    }
}
