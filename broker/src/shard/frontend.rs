//! Cross-shard calls. A handler running on any shard reaches a partition through these
//! functions; they run the work on the partition's home shard and bring the result back.
//! When the home is the calling shard, the work runs inline with no message at all.

use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use storage::batch::BatchHeader;
use storage::StorageError;
use tokio::sync::{oneshot, watch};

use super::{current, home_shard, BrokerContext, ShardState};
use crate::metadata::catalog::TopicMeta;
use crate::partition::txn::{ControlType, ProducerInfo};
use crate::partition::{
    DeleteRecordsError, FetchOutcome, Partition, PartitionError, ProduceOutcome,
};

#[derive(Debug, thiserror::Error)]
pub enum FrontendError {
    #[error("partition {0}-{1} is not hosted here")]
    UnknownPartition(String, i32),
    #[error("partition {0}-{1} is offline: {2}")]
    Offline(String, i32, String),
    #[error("shard {0} is gone (shutting down)")]
    ShardGone(usize),
    #[error(transparent)]
    Partition(#[from] PartitionError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Runs `f` on shard `shard` and returns its result. `f` is `Send` (it crosses threads); the
/// future it makes is not (it runs on the target shard's local executor).
pub async fn invoke_on<R, F, Fut>(
    ctx: &BrokerContext,
    shard: usize,
    f: F,
) -> Result<R, FrontendError>
where
    F: FnOnce(Rc<ShardState>) -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
    R: Send + 'static,
{
    if let Some(here) = current() {
        if here.id == shard {
            return Ok(f(here).await);
        }
    }
    if let Some(here) = current() {
        here.metrics.cross_shard_sent.inc();
    }
    let (tx, rx) = oneshot::channel();
    let msg: super::ShardMessage = Box::new(move |state| {
        state.metrics.cross_shard_received.inc();
        tokio::task::spawn_local(async move {
            let _ = tx.send(f(state).await);
        });
    });
    ctx.shard_senders[shard]
        .send(msg)
        .await
        .map_err(|_| FrontendError::ShardGone(shard))?;
    rx.await.map_err(|_| FrontendError::ShardGone(shard))
}

/// Runs `f` on shard `shard` from outside the shards (an HTTP service's thread, a tokio
/// multi-thread runtime): always by message, so the returned future is `Send` and holds no
/// shard state. `f` runs on the shard and may use every (non-`Send`) helper of this module,
/// e.g. `produce` or `fetch`, which then reach the partition's home shard from there.
pub fn call_from_outside<R, F, Fut>(
    ctx: &BrokerContext,
    shard: usize,
    f: F,
) -> impl Future<Output = Result<R, FrontendError>> + Send + 'static
where
    F: FnOnce(Rc<ShardState>) -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
    R: Send + 'static,
{
    let sender = ctx.shard_senders.get(shard).cloned();
    async move {
        let sender = sender.ok_or(FrontendError::ShardGone(shard))?;
        let (tx, rx) = oneshot::channel();
        let msg: super::ShardMessage = Box::new(move |state| {
            tokio::task::spawn_local(async move {
                let _ = tx.send(f(state).await);
            });
        });
        sender
            .send(msg)
            .await
            .map_err(|_| FrontendError::ShardGone(shard))?;
        rx.await.map_err(|_| FrontendError::ShardGone(shard))
    }
}

fn home(ctx: &BrokerContext, topic: &str, partition: i32) -> usize {
    home_shard(topic, partition, ctx.shard_count())
}

fn find(state: &ShardState, topic: &str, partition: i32) -> Result<Rc<Partition>, FrontendError> {
    if let Some(reason) = state.offline.borrow().get(&(Arc::from(topic), partition)) {
        return Err(FrontendError::Offline(
            topic.to_string(),
            partition,
            reason.clone(),
        ));
    }
    state
        .partition(topic, partition)
        .ok_or_else(|| FrontendError::UnknownPartition(topic.to_string(), partition))
}

pub async fn produce(
    ctx: &BrokerContext,
    topic: Arc<str>,
    partition: i32,
    header: BatchHeader,
    records: Bytes,
    acks: i16,
    now_ms: i64,
) -> Result<ProduceOutcome, FrontendError> {
    let shard = home(ctx, &topic, partition);
    invoke_on(ctx, shard, move |state| async move {
        let p = find(&state, &topic, partition)?;
        let (bytes, count) = (header.batch_length as u64 + 12, header.records_count as u64);
        let outcome = p.append(header, records, acks, now_ms).await?;
        state
            .metrics
            .count_produced(&topic, partition, bytes, count);
        Ok(outcome)
    })
    .await?
}

/// A fetch read plus a receiver for long polls: of the partition's high watermark, or of its
/// last stable offset for read_committed (a marker moves the LSO without new data).
pub struct FetchRead {
    pub outcome: Result<FetchOutcome, FrontendError>,
    pub watch: Option<watch::Receiver<i64>>,
}

pub async fn fetch(
    ctx: &BrokerContext,
    topic: Arc<str>,
    partition: i32,
    offset: i64,
    max_bytes: usize,
    read_committed: bool,
) -> FetchRead {
    let shard = home(ctx, &topic, partition);
    let r = invoke_on(ctx, shard, move |state| async move {
        match find(&state, &topic, partition) {
            Ok(p) => FetchRead {
                watch: Some(if read_committed {
                    p.watch_last_stable_offset()
                } else {
                    p.watch_high_watermark()
                }),
                outcome: p
                    .read(offset, max_bytes, read_committed)
                    .map_err(FrontendError::from),
            },
            Err(e) => FetchRead {
                outcome: Err(e),
                watch: None,
            },
        }
    })
    .await;
    r.unwrap_or_else(|e| FetchRead {
        outcome: Err(e),
        watch: None,
    })
}

/// Offsets of one partition for ListOffsets and Metadata-like answers.
#[derive(Debug, Clone, Copy)]
pub struct PartitionOffsets {
    pub log_start: i64,
    pub high_watermark: i64,
    pub last_stable: i64,
    pub size_bytes: u64,
}

pub async fn offsets(
    ctx: &BrokerContext,
    topic: Arc<str>,
    partition: i32,
) -> Result<PartitionOffsets, FrontendError> {
    let shard = home(ctx, &topic, partition);
    invoke_on(ctx, shard, move |state| async move {
        let p = find(&state, &topic, partition)?;
        Ok(PartitionOffsets {
            log_start: p.log.log_start_offset(),
            high_watermark: p.high_watermark(),
            last_stable: p.last_stable_offset(),
            size_bytes: p.log.size_bytes(),
        })
    })
    .await?
}

/// ListOffsets by timestamp (`ts >= 0`) or max timestamp (`-3`): (offset, timestamp).
pub async fn offset_for_timestamp(
    ctx: &BrokerContext,
    topic: Arc<str>,
    partition: i32,
    ts: i64,
) -> Result<Option<(i64, i64)>, FrontendError> {
    let shard = home(ctx, &topic, partition);
    invoke_on(ctx, shard, move |state| async move {
        let p = find(&state, &topic, partition)?;
        if ts == -3 {
            return Ok(p.log.max_timestamp());
        }
        let hw = p.high_watermark();
        Ok(p.log
            .offset_for_timestamp(ts)?
            .filter(|(offset, _)| *offset < hw))
    })
    .await?
}

/// DeleteRecords on one partition: the low watermark after it, or why not.
pub async fn delete_records(
    ctx: &BrokerContext,
    topic: Arc<str>,
    partition: i32,
    offset: i64,
) -> Result<Result<i64, DeleteRecordsError>, FrontendError> {
    let shard = home(ctx, &topic, partition);
    invoke_on(ctx, shard, move |state| async move {
        Ok(find(&state, &topic, partition)?.delete_records(offset))
    })
    .await?
}

/// OffsetForLeaderEpoch on one partition: (epoch, end offset), Kafka's answer.
pub async fn end_offset_for_epoch(
    ctx: &BrokerContext,
    topic: Arc<str>,
    partition: i32,
    epoch: i32,
) -> Result<(i32, i64), FrontendError> {
    let shard = home(ctx, &topic, partition);
    invoke_on(ctx, shard, move |state| async move {
        Ok(find(&state, &topic, partition)?.end_offset_for_epoch(epoch))
    })
    .await?
}

/// Opens (creating) the logs of `partitions` of `topic` on their home shards.
pub async fn open_partitions(
    ctx: &BrokerContext,
    topic: &Arc<TopicMeta>,
    partitions: std::ops::Range<i32>,
) -> Result<(), FrontendError> {
    for p in partitions {
        let shard = home(ctx, &topic.name, p);
        let t = topic.clone();
        invoke_on(ctx, shard, move |state| async move {
            super::open_partition(&state, &t, p, None).map(|_| ())
        })
        .await??;
    }
    Ok(())
}

/// Removes the partitions of a deleted topic from their home shards and deletes their files.
pub async fn delete_partitions(ctx: &BrokerContext, topic: &Arc<TopicMeta>) {
    for p in 0..topic.partitions {
        let shard = home(ctx, &topic.name, p);
        let name = topic.name.clone();
        let r = invoke_on(ctx, shard, move |state| async move {
            let removed = state.partitions.borrow_mut().remove(&(name.clone(), p));
            if let Some(part) = removed {
                match Rc::try_unwrap(part) {
                    Ok(part) => {
                        if let Err(e) = part.log.delete() {
                            tracing::warn!(topic = %name, partition = p, error = %e, "deleting partition files failed");
                        }
                    }
                    // An append or read still holds it: delete once they are done.
                    Err(part) => {
                        tokio::task::spawn_local(async move {
                            let mut part = part;
                            loop {
                                match Rc::try_unwrap(part) {
                                    Ok(p) => {
                                        if let Err(e) = p.log.delete() {
                                            tracing::warn!(error = %e, "deleting partition files failed");
                                        }
                                        return;
                                    }
                                    Err(still) => part = still,
                                }
                                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                            }
                        });
                    }
                }
            }
        })
        .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "delete partition");
        }
    }
    // Produced counters live on the home shards, fetched ones on whichever shard served the
    // fetch: every shard drops the topic's series.
    for shard in 0..ctx.shard_count() {
        let name = topic.name.clone();
        let r = invoke_on(ctx, shard, move |state| async move {
            state.metrics.forget_topic(&name);
        })
        .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "dropping a deleted topic's metrics");
        }
    }
}

/// Pushes new settings (after a config change) to the partitions' home shards.
pub async fn apply_settings(ctx: &BrokerContext, topic: &Arc<TopicMeta>) {
    for p in 0..topic.partitions {
        let shard = home(ctx, &topic.name, p);
        let t = topic.clone();
        let _ = invoke_on(ctx, shard, move |state| async move {
            if let Some(part) = state.partition(&t.name, p) {
                part.set_settings(t.settings.clone());
            }
        })
        .await;
    }
}

/// A transaction marker as the transaction coordinator sends it to a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub commit: bool,
}

/// Writes a COMMIT/ABORT control batch (Kafka's format: attributes control+transactional bits,
/// one control record with key version 0 + type, value version 0 + coordinator epoch) to the
/// partition on its home shard, durably (fdatasync) before returning; completes the
/// producer's open transaction on that partition (LSO moves), records an aborted txn in
/// .txnindex on ABORT. A producer without an open transaction here still gets its marker
/// (Kafka does the same). Errors: `PartitionError::Txn(TxnError::CoordinatorFenced)` for a
/// stale coordinator epoch (TRANSACTION_COORDINATOR_FENCED), `InvalidProducerEpoch` for an
/// older producer epoch (INVALID_PRODUCER_EPOCH); `write_txn_markers::error_code` maps them.
pub async fn write_txn_marker(
    ctx: &BrokerContext,
    topic: &str,
    partition: i32,
    marker: TxnMarker,
) -> Result<i64 /* marker offset */, FrontendError> {
    let shard = home(ctx, topic, partition);
    let topic: Arc<str> = Arc::from(topic);
    invoke_on(ctx, shard, move |state| async move {
        let p = find(&state, &topic, partition)?;
        let kind = if marker.commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        };
        let offset = p
            .write_txn_marker(
                marker.producer_id,
                marker.producer_epoch,
                marker.coordinator_epoch,
                kind,
                crate::now_ms(),
            )
            .await?;
        Ok(offset)
    })
    .await?
}

/// KIP-890 server-side verification: the coordinator calls this when AddPartitionsToTxn adds
/// the partition; until then a transactional produce from (pid, epoch) that would open a
/// transaction here gets INVALID_TXN_STATE ("Partition was not added to the transaction"),
/// and one of an older epoch than the one added gets INVALID_PRODUCER_EPOCH.
pub async fn begin_txn_on_partition(
    ctx: &BrokerContext,
    topic: &str,
    partition: i32,
    producer_id: i64,
    producer_epoch: i16,
) -> Result<(), FrontendError> {
    let shard = home(ctx, topic, partition);
    let topic: Arc<str> = Arc::from(topic);
    invoke_on(ctx, shard, move |state| async move {
        find(&state, &topic, partition)?.begin_txn(producer_id, producer_epoch);
        Ok(())
    })
    .await?
}

/// Producers with state on a partition (DescribeProducers).
pub async fn describe_producers(
    ctx: &BrokerContext,
    topic: Arc<str>,
    partition: i32,
) -> Result<Vec<ProducerInfo>, FrontendError> {
    let shard = home(ctx, &topic, partition);
    invoke_on(ctx, shard, move |state| async move {
        Ok(find(&state, &topic, partition)?.producers_info())
    })
    .await?
}
