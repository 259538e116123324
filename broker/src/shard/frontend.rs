//! Cross-shard calls. A handler running on any shard reaches a partition through these
//! functions; they run the work on the partition's home shard and bring the result back.
//! When the home is the calling shard, the work runs inline with no message at all.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::LocalBoxFuture;
use storage::batch::BatchHeader;
use storage::StorageError;
use tokio::sync::{oneshot, watch};

use super::{current, home_shard, BrokerContext, ShardState};
use crate::metadata::catalog::TopicMeta;
use crate::partition::replica::Role;
use crate::partition::txn::{ControlType, ProducerInfo, TxnDataError};
use crate::partition::{
    DeleteRecordsError, FetchOutcome, Partition, PartitionError, ProduceOutcome,
};
use crate::quota::replication::Side;

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
    /// A step through the partition's leader on another node failed (retriable).
    #[error("partition {0}-{1} through its leader: {2}")]
    Remote(String, i32, String),
    /// Reading tiered data from the object store failed (Kafka's RemoteStorageException).
    #[error("remote storage: {0}")]
    RemoteStorage(String),
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

/// The answer of work handed to a shard: ready at once when it ran inline (the same shard),
/// else the target shard's answer by message.
pub enum Pending<R> {
    Local(LocalBoxFuture<'static, R>),
    Remote(oneshot::Receiver<R>, usize),
    Gone(usize),
}

impl<R> Future for Pending<R> {
    type Output = Result<R, FrontendError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Pending::Local(f) => f.as_mut().poll(cx).map(Ok),
            Pending::Remote(rx, shard) => {
                let shard = *shard;
                Pin::new(rx)
                    .poll(cx)
                    .map(|r| r.map_err(|_| FrontendError::ShardGone(shard)))
            }
            Pending::Gone(shard) => Poll::Ready(Err(FrontendError::ShardGone(*shard))),
        }
    }
}

/// A two-phase call on shard `shard`. `start` runs there as soon as the message arrives — in
/// the order this shard sent its messages, which is what keeps a connection's requests in
/// arrival order per partition — and returns its first-phase outcome (answered at once) and
/// the second phase, which then runs there as a task. Awaiting `dispatch_on` returns once the
/// message is queued (on the same shard, once `start` ran inline), so a caller can hand work
/// to several shards in order and await the answers after.
pub async fn dispatch_on<T, R, S>(
    ctx: &BrokerContext,
    shard: usize,
    start: S,
) -> (Pending<T>, Pending<R>)
where
    S: FnOnce(&Rc<ShardState>) -> (T, LocalBoxFuture<'static, R>) + Send + 'static,
    T: Send + 'static,
    R: Send + 'static,
{
    if let Some(here) = current().filter(|h| h.id == shard) {
        let (first, rest) = start(&here);
        return (
            Pending::Local(Box::pin(std::future::ready(first))),
            Pending::Local(rest),
        );
    }
    if let Some(here) = current() {
        here.metrics.cross_shard_sent.inc();
    }
    let (first_tx, first_rx) = oneshot::channel();
    let (rest_tx, rest_rx) = oneshot::channel();
    let msg: super::ShardMessage = Box::new(move |state| {
        state.metrics.cross_shard_received.inc();
        // Inline in the shard's inbox loop: messages start in the order they were sent.
        let (first, rest) = start(&state);
        let _ = first_tx.send(first);
        tokio::task::spawn_local(async move {
            let _ = rest_tx.send(rest.await);
        });
    });
    match ctx.shard_senders[shard].send(msg).await {
        Ok(()) => (
            Pending::Remote(first_rx, shard),
            Pending::Remote(rest_rx, shard),
        ),
        Err(_) => (Pending::Gone(shard), Pending::Gone(shard)),
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

/// Whether a produce's first phase took the batch: `Err(NotAdded)` is the one refusal the
/// caller may cure (KIP-890 verification with the coordinator) before it dispatches anything
/// else of the connection; every other outcome arrives with the second phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProduceStart {
    Taken,
    Refused,
    /// A transactional batch of (producer id, epoch) for a partition not (yet) in its
    /// transaction here.
    NotAdded(i64, i16),
}

/// How long acks=all waits for the in-sync replicas (Kafka bounds it by the request's
/// timeout; 10 s is below every client's default request timeout).
const REPLICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Hands one validated batch to its partition's home shard (two-phase, `dispatch_on`): the
/// batch is sequenced there in the order of the calls; the second `Pending` is the append's
/// outcome.
pub async fn produce(
    ctx: &BrokerContext,
    topic: Arc<str>,
    partition: i32,
    header: BatchHeader,
    records: Bytes,
    acks: i16,
    now_ms: i64,
) -> (
    Pending<ProduceStart>,
    Pending<Result<ProduceOutcome, FrontendError>>,
) {
    let shard = home(ctx, &topic, partition);
    dispatch_on(ctx, shard, move |state| {
        let p = match find(state, &topic, partition) {
            Ok(p) => p,
            Err(e) => return (ProduceStart::Refused, ready(Err(e))),
        };
        // PII redaction (partition::redact) rewrites the batch here, before it is sequenced.
        let (header, records) =
            match crate::partition::redact::on_home_shard(&p, &state.metrics, header, records) {
                Ok(v) => v,
                Err(e) => return (ProduceStart::Refused, ready(Err(e.into()))),
            };
        let (bytes, count) = (header.batch_length as u64 + 12, header.records_count as u64);
        let last_delta = header.last_offset_delta as i64;
        match p.append(header, records, acks, now_ms) {
            Ok(append) => {
                let state = state.clone();
                let rest = Box::pin(async move {
                    let outcome = append.await?;
                    if acks == -1 && !matches!(p.role(), Role::Single) {
                        // The ISR model: answered once every in-sync replica has it.
                        let end = outcome.base_offset + last_delta + 1;
                        let min_isr = p.settings().min_insync_replicas;
                        p.wait_replicated(end, min_isr, REPLICATION_TIMEOUT).await?;
                    }
                    let count = count.saturating_sub(outcome.dedup_duplicates);
                    state
                        .metrics
                        .count_produced(&topic, partition, bytes, count);
                    state.metrics.flow.count_dedup(
                        &topic,
                        outcome.dedup_duplicates,
                        outcome.dedup_evicted,
                    );
                    Ok(outcome)
                });
                (ProduceStart::Taken, rest as LocalBoxFuture<'static, _>)
            }
            Err(PartitionError::Txn(TxnDataError::NotAddedToTxn { producer_id, epoch })) => (
                ProduceStart::NotAdded(producer_id, epoch),
                ready(Err(FrontendError::Partition(PartitionError::Txn(
                    TxnDataError::NotAddedToTxn { producer_id, epoch },
                )))),
            ),
            Err(e) => (ProduceStart::Refused, ready(Err(e.into()))),
        }
    })
    .await
}

fn ready<R: 'static>(r: R) -> LocalBoxFuture<'static, R> {
    Box::pin(std::future::ready(r))
}

/// One partition a fetch reads.
#[derive(Debug, Clone)]
pub struct ReadSpec {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    pub max_bytes: usize,
    /// A follower's fetch (its node id and log start): read to the log end, and record its
    /// progress.
    pub replica: Option<(i32, i64)>,
    /// KIP-392: the replicas in the consuming client's rack, when this node leads the
    /// partition and a rack-aware selector is configured; empty = read here.
    pub prefer: Vec<i32>,
}

/// A fetch read, the partition's offsets (also when the read failed: Kafka answers them with
/// the error), and a receiver for long polls: of the high watermark, or of the last stable
/// offset for read_committed (a marker moves the LSO without new data).
pub struct FetchRead {
    pub outcome: Result<FetchOutcome, FrontendError>,
    pub offsets: Option<PartitionOffsets>,
    pub watch: Option<watch::Receiver<i64>>,
    /// Below the local log start, in the object store: the outcome's data is empty and the
    /// fetch handler reads this off the shard (`tiered::fetch`).
    pub remote: Option<crate::tiered::RemoteFetch>,
    /// KIP-392: the replica the consumer should read from instead (nothing was read).
    pub preferred: Option<i32>,
}

/// The leader rate a follower's fetch of `p` is throttled to (`quota::replication`): a
/// follower out of the ISR, of a partition its topic lists with this broker in
/// `leader.replication.throttled.replicas`, while this broker has a
/// `leader.replication.throttled.rate`.
fn leader_throttle(state: &ShardState, p: &Partition, follower: i32) -> Option<u64> {
    let Role::Leader { me, isr, .. } = p.role() else {
        return None;
    };
    if isr.contains(&follower) {
        return None;
    }
    let meta = state.ctx.catalog.snapshot().get(&p.topic).cloned()?;
    Side::Leader.limit(&state.ctx.catalog.broker(), &meta.configs, p.index, me)
}

/// Reads several partitions homed on shard `shard` with one message (a fetch sends one per
/// shard it touches, all at once, instead of one round trip per partition).
pub async fn fetch_many(
    ctx: &BrokerContext,
    shard: usize,
    reads: Vec<ReadSpec>,
    read_committed: bool,
) -> Vec<FetchRead> {
    let n = reads.len();
    let r = invoke_on(ctx, shard, move |state| async move {
        reads
            .into_iter()
            .map(|r| match find(&state, &r.topic, r.partition) {
                Ok(p) if r.replica.is_some() => {
                    let (follower, log_start) = r.replica.expect("guarded");
                    let watch = Some(p.watch_log_end());
                    let limit = leader_throttle(&state, &p, follower);
                    let spent = limit.is_some_and(|l| Side::Leader.exceeded(l));
                    let outcome = match p.replica_read(follower, r.offset, log_start, r.max_bytes) {
                        Ok((mut o, expand)) => {
                            // A throttled replica gets no records while the leader quota is
                            // spent (its progress still counts: Kafka's `shouldLeaderThrottle`).
                            if spent {
                                o.data = Default::default();
                            } else if limit.is_some() {
                                Side::Leader.record(o.data.total_bytes as u64);
                            }
                            if let Some(change) = expand {
                                if let Some(c) = state.ctx.cluster.get() {
                                    crate::cluster::handle::propose_isr(c, &p, change);
                                }
                            }
                            Ok(o)
                        }
                        Err(e) => Err(FrontendError::from(e)),
                    };
                    FetchRead {
                        offsets: Some(offsets_of(&state, &p)),
                        outcome,
                        watch,
                        remote: None,
                        preferred: None,
                    }
                }
                Ok(p) => {
                    let preferred = (!r.prefer.is_empty())
                        .then(|| p.preferred_read_replica(r.offset, &r.prefer))
                        .flatten();
                    if let Some(id) = preferred {
                        // Kafka skips the read and answers at once with the offsets.
                        let offsets = offsets_of(&state, &p);
                        return FetchRead {
                            outcome: Ok(FetchOutcome {
                                data: Default::default(),
                                high_watermark: offsets.high_watermark,
                                last_stable_offset: offsets.last_stable,
                                log_start_offset: offsets.log_start,
                                aborted: None,
                                expired: 0,
                            }),
                            offsets: Some(offsets),
                            watch: None,
                            remote: None,
                            preferred: Some(id),
                        };
                    }
                    // Subscribed before the read: a change after it wakes the long poll.
                    let watch = Some(if read_committed {
                        p.watch_last_stable_offset()
                    } else {
                        p.watch_high_watermark()
                    });
                    let offsets = offsets_of(&state, &p);
                    let remote = crate::tiered::remote_of(&state, &p).and_then(|rp| {
                        let local = offsets.local_log_start;
                        crate::tiered::fetch::route(
                            &rp,
                            local,
                            r.offset,
                            r.max_bytes,
                            read_committed,
                        )
                    });
                    let outcome = if remote.is_some() {
                        Ok(FetchOutcome {
                            data: Default::default(),
                            high_watermark: offsets.high_watermark,
                            last_stable_offset: offsets.last_stable,
                            log_start_offset: offsets.log_start,
                            aborted: None,
                            expired: 0,
                        })
                    } else {
                        p.read(r.offset, r.max_bytes, read_committed)
                            .map(|mut o| {
                                o.log_start_offset = offsets.log_start;
                                o
                            })
                            .map_err(FrontendError::from)
                    };
                    if let Ok(o) = &outcome {
                        state.metrics.flow.count_expired(&r.topic, o.expired);
                    }
                    FetchRead {
                        offsets: Some(offsets),
                        outcome,
                        watch,
                        remote,
                        preferred: None,
                    }
                }
                Err(e) => FetchRead {
                    outcome: Err(e),
                    offsets: None,
                    watch: None,
                    remote: None,
                    preferred: None,
                },
            })
            .collect::<Vec<_>>()
    })
    .await;
    match r {
        Ok(reads) => reads,
        Err(_) => (0..n)
            .map(|_| FetchRead {
                outcome: Err(FrontendError::ShardGone(shard)),
                offsets: None,
                watch: None,
                remote: None,
                preferred: None,
            })
            .collect(),
    }
}

fn offsets_of(state: &ShardState, p: &Partition) -> PartitionOffsets {
    let local = p.log.log_start_offset();
    let remote = crate::tiered::remote_of(state, p);
    PartitionOffsets {
        log_start: crate::tiered::fetch::log_start(remote.as_deref(), local),
        local_log_start: local,
        high_watermark: p.high_watermark(),
        last_stable: p.last_stable_offset(),
        size_bytes: p.log.size_bytes(),
    }
}

/// Offsets of one partition for ListOffsets and Metadata-like answers.
#[derive(Debug, Clone, Copy)]
pub struct PartitionOffsets {
    /// With tiered storage, the remote log start when remote segments are older.
    pub log_start: i64,
    /// The first offset on local disk (ListOffsets EARLIEST_LOCAL, KIP-1005).
    pub local_log_start: i64,
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
        Ok(offsets_of(
            &state,
            find(&state, &topic, partition)?.as_ref(),
        ))
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
    timeout: std::time::Duration,
) -> Result<Result<i64, DeleteRecordsError>, FrontendError> {
    let shard = home(ctx, &topic, partition);
    invoke_on(ctx, shard, move |state| async move {
        let p = find(&state, &topic, partition)?;
        let (Some(manager), Some(rp)) = (
            state.ctx.remote.clone(),
            crate::tiered::remote_of(&state, &p),
        ) else {
            return Ok(match p.delete_records(offset) {
                Ok(start) => p.wait_low_watermark(start, timeout).await,
                Err(e) => Err(e),
            });
        };
        // Tiered: the log start bounds both tiers (Kafka's `logStartOffset`), so an offset
        // below the local log start moves the remote log's start, durably, before the answer.
        let target = match p.delete_records_target(offset) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        if let Err(e) = p.log.advance_log_start(target) {
            return Ok(Err(e.into()));
        }
        if let Err(e) = manager.advance_log_start(rp.clone(), target).await {
            tracing::warn!(topic = %topic, partition, offset = target, error = %e, "remote log start not moved");
            return Err(FrontendError::RemoteStorage(e.to_string()));
        }
        Ok(Ok(crate::tiered::fetch::log_start(
            Some(&rp),
            p.log.log_start_offset(),
        )))
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
        let topic_id = *topic.id.as_bytes();
        let r = invoke_on(ctx, shard, move |state| async move {
            let removed = state.partitions.borrow_mut().remove(&(name.clone(), p));
            if let Some(part) = removed {
                // Its remote objects are written down for deletion before its dir goes.
                if let Some(manager) = &state.ctx.remote {
                    let prefix = part
                        .settings()
                        .tiered
                        .enabled
                        .then(|| crate::tiered::prefix_of(&part, topic_id))
                        .flatten();
                    manager.partition_deleted(&state.ctx.config.data_dir, &part, prefix);
                }
                delete_files(part);
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

/// Deletes a partition's files once nothing holds it any more: an append or a read that
/// still does finishes first (on this shard's thread; the partition is out of the shard's
/// map already, so nothing new reaches it).
pub fn delete_files(part: Rc<Partition>) {
    let delete = |p: Partition| {
        if let Err(e) = p.log.delete() {
            tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "deleting partition files failed");
        }
    };
    match Rc::try_unwrap(part) {
        Ok(p) => delete(p),
        Err(part) => {
            tokio::task::spawn_local(async move {
                let mut part = part;
                loop {
                    match Rc::try_unwrap(part) {
                        Ok(p) => return delete(p),
                        Err(still) => part = still,
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            });
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
    if ctx
        .cluster
        .get()
        .is_some_and(|c| !c.leads(topic, partition))
    {
        // Only the leader writes a replicated log; the coordinator sends it there.
        return Err(PartitionError::NotLeader.into());
    }
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
        if matches!(p.role(), Role::Leader { .. }) {
            // Kafka writes markers with acks=all: a transaction is complete on a partition
            // only once every in-sync replica has its marker.
            let min_isr = p.settings().min_insync_replicas;
            p.wait_replicated(offset + 1, min_isr, REPLICATION_TIMEOUT)
                .await?;
        }
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
    if ctx
        .cluster
        .get()
        .is_some_and(|c| !c.leads(topic, partition))
    {
        // Its leader verifies the producer's first batch with the coordinator instead
        // (`coordinator::txn::remote::verify`).
        return Ok(());
    }
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
