//! Fetch (key 1): reads each partition on its home shard, honours KIP-74 size limits, and long
//! polls (`max_wait_ms` / `min_bytes`) by waiting on the partitions' high-watermark watches —
//! no timer polling — from whatever shard the connection lives on.
//!
//! `isolation_level = 1` (read_committed) reads only up to the last stable offset, lists the
//! aborted transactions overlapping the data returned (from `.txnindex`), and long polls on
//! the LSO, which a transaction marker moves without new data arriving.
//!
//! Fetch sessions (KIP-227, v7+) are kept per shard in `fetch_session`; an incremental
//! response carries only the partitions with news.
//!
//! With tiered storage, a partition read below its local log start is routed by its home
//! shard to the object store and read here on the remote runtime (`read_remote`,
//! `tiered::fetch`); the other partitions of the fetch are answered from their own source.

mod encode;

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId};
use kafka_protocol::protocol::StrBytes;

use super::{Answer, RequestContext, Responding};
use crate::cluster::read_replica;
use crate::fetch_session::{FetchPlan, FetchSessionCache, SessionPartition, FINAL_EPOCH};
use crate::metadata::catalog::TopicMeta;
use crate::quota::QuotaKind;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::frontend::{self, FetchRead, FrontendError, ReadSpec};
use crate::shard::home_shard;
use encode::RecordChunks;
use storage::StorageError;

pub const MIN_VERSION: i16 = 4;
pub const MAX_VERSION: i16 = 18;

/// One partition the fetch asks for, and what was last read of it.
struct Wanted {
    session: SessionPartition,
    meta: Option<Arc<TopicMeta>>,
    /// Not authorized (READ on the topic; CLUSTER_ACTION for a follower's fetch).
    denied: bool,
    /// A follower without CLUSTER_ACTION: TOPIC_AUTHORIZATION_FAILED even for an unknown
    /// topic id (Kafka answers a consumer's unknown id first).
    follower_denied: bool,
    /// Clustered, and another node leads the partition: NOT_LEADER_OR_FOLLOWER, no read
    /// (unless a consumer's Fetch v11+ reads this node as a follower, KIP-392).
    not_leader: bool,
    /// The client's `current_leader_epoch` is older (FENCED_LEADER_EPOCH) or newer
    /// (UNKNOWN_LEADER_EPOCH) than the partition's here: checked before leadership, as
    /// Kafka's `getLocalLog`, so a consumer that knows of a newer leader never reads a
    /// deposed one's log, and a zombie follower's fetch is refused.
    fenced: Option<ResponseError>,
    /// KIP-392 on the leader: the replicas in the consumer's rack it may be sent to.
    prefer: Vec<i32>,
    read: Option<FetchRead>,
}

/// First phase: the fetch session (KIP-227) is advanced here, in request order; everything
/// else — the reads, the long poll, the answer — is the second phase, so a request pipelined
/// behind a long poll does not wait for it.
pub async fn dispatch(ctx: Rc<RequestContext>, req: FetchRequest) -> Responding {
    let version = ctx.version();
    let plan = if version >= 7 {
        ctx.shard.fetch_sessions.borrow_mut().plan(&req)
    } else {
        // Before v7 there are no sessions: every fetch is a full, sessionless one.
        FetchSessionCache::new(0, 0).plan(&req.clone().with_session_epoch(FINAL_EPOCH))
    };
    // The request quota meters this thread's work, not the long-poll wait: recorded now.
    let request_throttle = ctx.record_request_time();
    Box::pin(async move {
        let mut resp = match plan {
            Ok(plan) => respond(&ctx, &req, plan).await,
            Err(e) => Fetched::error(super::errors::session_code(&e)),
        };
        let served = resp.record_bytes();
        // The consumer byte-rate quota meters what is sent (a follower's fetch is not a
        // client's); Kafka answers the larger of the two throttles.
        let bandwidth = if is_follower(&req) {
            0
        } else {
            ctx.record_quota(QuotaKind::Fetch, served as f64)
        };
        if bandwidth > 0 {
            // Kafka's throttled fetch (`getThrottledResponse`): answered without records, its
            // bytes taken back from the rate since they were never sent, and the session's
            // memo left as it was, so the next incremental fetch still carries what this
            // one would have.
            ctx.unrecord_quota(QuotaKind::Fetch, served as f64);
            resp = Fetched {
                resp: FetchResponse::default().with_session_id(resp.resp.session_id),
                records: Vec::new(),
                answered: Vec::new(),
                lane: resp.lane,
            };
        }
        let session_id = resp.resp.session_id;
        if session_id != 0 && !resp.answered.is_empty() {
            ctx.shard
                .fetch_sessions
                .borrow_mut()
                .record(session_id, &resp.answered);
        }
        let served = resp.record_bytes();
        let lane_throttle = resp
            .lane
            .map_or(0, |l| ctx.shard.priority_admit(l).throttle_ms);
        let ms = bandwidth.max(request_throttle).max(lane_throttle);
        resp.resp.throttle_time_ms = if version >= 8 {
            ctx.throttle(ms) // KIP-219: the consumer holds back, the connection is muted
        } else {
            // Older consumers do not throttle themselves: Kafka delays the response.
            if ms > 0 {
                tokio::time::sleep(Duration::from_millis(ms as u64)).await;
            }
            ms.clamp(0, i32::MAX as i64) as i32
        };
        let answer = resp.encode(version, ctx.header.correlation_id);
        // The encoder puts the read's slices into the frame as they are: nothing copied.
        ctx.shard.metrics.fetch_record_bytes.inc_by(served as u64);
        answer
    })
}

/// The answer before encoding: the response without its records, the records beside it,
/// and what the session should remember once the answer goes out as it is.
struct Fetched {
    resp: FetchResponse,
    records: Vec<Vec<RecordChunks>>,
    answered: Vec<SessionPartition>,
    /// The priority lane of a consumer's fetch: its highest topic's (`shard::priority`).
    lane: Option<crate::shard::priority::Lane>,
}

impl Fetched {
    fn error(code: i16) -> Fetched {
        Fetched {
            resp: FetchResponse::default().with_error_code(code),
            records: Vec::new(),
            answered: Vec::new(),
            lane: None,
        }
    }

    fn record_bytes(&self) -> usize {
        self.records
            .iter()
            .flatten()
            .flatten()
            .flatten()
            .map(Bytes::len)
            .sum()
    }

    fn encode(self, version: i16, correlation_id: i32) -> Answer {
        encode::encode(&self.resp, &self.records, version, correlation_id).map(Some)
    }
}

/// A follower's fetch (replica id >= 0), not a consumer's.
fn is_follower(req: &FetchRequest) -> bool {
    req.replica_id.0 >= 0 || req.replica_state.replica_id.0 >= 0
}

async fn respond(ctx: &RequestContext, req: &FetchRequest, plan: FetchPlan) -> Fetched {
    let broker = ctx.ctx();
    let version = ctx.version();
    let catalog = broker.catalog.snapshot();
    let by_id = version >= 13;
    // Authorization (Kafka's `handleFetchRequest`): a follower's fetch (replica id >= 0)
    // needs CLUSTER_ACTION, a consumer's READ on each topic; what is not allowed is
    // TOPIC_AUTHORIZATION_FAILED, after an unknown topic id and before an unknown topic.
    let access = ctx.access();
    let follower = is_follower(req);
    let follower_denied = follower && !access.allows_cluster(Operation::ClusterAction);
    // KIP-392: a consumer's Fetch v11+ may read from a follower replica, and names the
    // client's rack for the leader to send it to one.
    let reads_followers = !follower && version >= 11;
    let client_rack = Some(req.rack_id.as_str()).filter(|r| reads_followers && !r.is_empty());
    let listener = ctx.session.listener.name.as_str();
    let mut wanted: Vec<Wanted> = plan
        .partitions
        .iter()
        .map(|p| {
            let meta = if by_id {
                catalog.by_id(&p.topic_id).cloned()
            } else {
                catalog.get(p.topic.as_str()).cloned()
            };
            let name = meta.as_ref().map_or(p.topic.as_str(), |m| &m.name);
            let denied = follower_denied
                || (!follower && !access.allows(Operation::Read, ResourceType::Topic, name));
            let not_leader = meta.as_ref().is_some_and(|m| {
                crate::cluster::led_elsewhere(broker, &m.name, p.partition)
                    && !(reads_followers
                        && read_replica::serves_as_follower(broker, &m.name, p.partition))
            });
            let fenced = meta.as_ref().and_then(|m| {
                let epoch =
                    super::offset_for_leader_epoch::partition_epoch(broker, &m.name, p.partition);
                super::offset_for_leader_epoch::check_current_epoch(p.current_leader_epoch, epoch)
                    .err()
            });
            let prefer = match (&meta, client_rack) {
                (Some(m), Some(rack)) if !not_leader => {
                    read_replica::rack_candidates(broker, &m.name, p.partition, rack, listener)
                }
                _ => Vec::new(),
            };
            Wanted {
                meta,
                denied,
                follower_denied,
                not_leader,
                fenced,
                prefer,
                session: p.clone(),
                read: None,
            }
        })
        .collect();
    let read_committed = req.isolation_level == 1;
    let replica = follower.then(|| req.replica_id.0.max(req.replica_state.replica_id.0));
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let mut response_max = if req.max_bytes <= 0 {
        i32::MAX
    } else {
        req.max_bytes
    } as usize;
    if !follower && broker.quotas.enabled() {
        // Kafka's `getMaxValueInQuotaWindow`: a consumer under a byte-rate quota gets no more
        // than the quota allows over the windows in one response.
        let user = ctx.session.principal().name;
        if let Some(cap) =
            broker
                .quotas
                .max_value_in_window(QuotaKind::Fetch, &user, ctx.client_id())
        {
            response_max = response_max.min(cap.max(1.0) as usize);
        }
    }
    let min_bytes = (req.min_bytes.max(0) as usize).min(response_max);

    // Every readable partition at first; after a wake, only those whose watermark moved.
    let mut stale: Vec<usize> = (0..wanted.len()).collect();
    let partitions = loop {
        read_concurrently(ctx, &mut wanted, &stale, read_committed, replica).await;
        let (partitions, total) = assemble(&wanted, response_max, version, by_id);
        // A partition sent to another replica answers at once, as Kafka's
        // `hasPreferredReadReplica`.
        let answer_now = partitions
            .iter()
            .any(|(p, _)| p.error_code != 0 || p.preferred_read_replica.0 >= 0);
        let waitable: Vec<usize> = (0..wanted.len())
            .filter(|&i| wanted[i].read.as_ref().is_some_and(|r| r.watch.is_some()))
            .collect();
        if total >= min_bytes
            || answer_now
            || waitable.is_empty()
            || tokio::time::Instant::now() >= deadline
        {
            break partitions;
        }
        stale = wait_for_change(&mut wanted, &waitable, deadline).await;
        if stale.is_empty() {
            break partitions; // the deadline passed
        }
    };

    // Counted here, on what is sent: reads the long-poll loop discarded are not fetched.
    for (w, (p, chunks)) in wanted.iter().zip(&partitions) {
        if let (Some(meta), Some(chunks)) = (&w.meta, chunks) {
            let bytes: usize = chunks.iter().map(Bytes::len).sum();
            let records: u64 = chunks
                .iter()
                .map(|c| crate::metrics::records_in_batches(c))
                .sum();
            ctx.shard
                .metrics
                .count_fetched(&meta.name, p.partition_index, bytes as u64, records);
            // Traced records delivered to a consumer (replication is not a delivery).
            if let Some(otel) = broker.otel.as_ref().filter(|_| !follower) {
                let at = crate::otel::Place {
                    topic: &meta.name,
                    partition: p.partition_index,
                    client_id: ctx.client_id(),
                };
                let started = crate::otel::started_at(ctx.started.elapsed());
                // A read_committed client drops what the aborted list names: not delivered.
                let aborted: Option<Vec<(i64, i64)>> = read_committed.then(|| {
                    p.aborted_transactions
                        .iter()
                        .flatten()
                        .map(|t| (t.producer_id.0, t.first_offset))
                        .collect()
                });
                let max = meta.settings.max_decompressed_bytes;
                otel.delivered(&at, chunks, aborted.as_deref(), max, started);
            }
        }
    }

    // An incremental response carries only partitions with news; the session remembers what
    // it told the client.
    let mut answered = Vec::new();
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    let mut records: Vec<Vec<RecordChunks>> = Vec::new();
    let mut endpoints = std::collections::BTreeMap::new();
    // Replication is not a client's lane: a follower is never slowed by priority.
    let lane = if follower {
        None
    } else {
        wanted
            .iter()
            .filter_map(|w| w.meta.as_ref().map(|m| m.settings.flow.priority))
            .max()
    };
    for (w, (mut p, chunks)) in wanted.into_iter().zip(partitions) {
        let s = w.session;
        // KIP-951 (v12+; the endpoints v16+): where the partition's leader is now.
        let moved = [
            ResponseError::NotLeaderOrFollower.code(),
            ResponseError::FencedLeaderEpoch.code(),
        ];
        if moved.contains(&p.error_code) && version >= 12 {
            let placed = w.meta.as_ref().and_then(|m| {
                crate::cluster::current_leader(broker, &m.name, s.partition, listener)
            });
            if let Some((leader, epoch, node)) = placed {
                p.current_leader = LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(epoch);
                if let Some(b) = node {
                    endpoints.insert(b.id, b);
                }
            }
        }
        let has_records = chunks.as_ref().is_some_and(|c| !c.is_empty());
        let news = !plan.incremental
            || p.error_code != 0
            || has_records
            || p.preferred_read_replica.0 >= 0
            || p.high_watermark != s.last_high_watermark
            || p.last_stable_offset != s.last_stable_offset
            || p.log_start_offset != s.last_log_start;
        if !news {
            continue;
        }
        let same_topic = topics
            .last()
            .is_some_and(|t| t.topic.as_str() == s.topic.as_str() && t.topic_id == s.topic_id);
        if !same_topic {
            topics.push(
                FetchableTopicResponse::default()
                    .with_topic(s.topic.clone())
                    .with_topic_id(s.topic_id),
            );
            records.push(Vec::new());
        }
        answered.push(SessionPartition {
            last_high_watermark: p.high_watermark,
            last_stable_offset: p.last_stable_offset,
            last_log_start: p.log_start_offset,
            ..s
        });
        topics.last_mut().expect("pushed above").partitions.push(p);
        records.last_mut().expect("pushed above").push(chunks);
    }
    let node_endpoints = endpoints
        .into_values()
        .map(|b| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(b.host))
                .with_port(b.port)
                .with_rack(b.rack.map(StrBytes::from_string))
        })
        .collect();
    Fetched {
        resp: FetchResponse::default()
            .with_session_id(plan.session_id)
            .with_responses(topics)
            .with_node_endpoints(node_endpoints),
        records,
        answered,
        // Replication is not a client's lane: a follower is never slowed by priority.
        lane,
    }
}

/// Reads the partitions `which` of `wanted`, one message per home shard, all shards at once.
async fn read_concurrently(
    ctx: &RequestContext,
    wanted: &mut [Wanted],
    which: &[usize],
    read_committed: bool,
    replica: Option<i32>,
) {
    let broker = ctx.ctx();
    let shards = broker.shard_count();
    // Clustered: a follower's fetch reads to the log end and moves the high watermark.
    let replica = replica.filter(|_| broker.cluster.get().is_some());
    let mut by_shard: Vec<(Vec<usize>, Vec<ReadSpec>)> = vec![Default::default(); shards];
    for &i in which {
        let w = &mut wanted[i];
        let Some(meta) = w
            .meta
            .as_ref()
            .filter(|_| !w.denied && !w.not_leader && w.fenced.is_none())
        else {
            continue;
        };
        let p = w.session.partition;
        if p < 0 || p >= meta.partitions {
            continue;
        }
        if let Some(rx) = w.read.as_mut().and_then(|r| r.watch.as_mut()) {
            // Seen from here on: a change while this read is under way wakes the next wait.
            rx.mark_unchanged();
        }
        // Each partition up to its own limit: the response limit is applied in request order
        // once every read is back (`assemble`); a read is only slices of mapped segments.
        let spec = ReadSpec {
            topic: meta.name.clone(),
            partition: p,
            offset: w.session.fetch_offset,
            max_bytes: w.session.max_bytes.max(0) as usize,
            replica: replica.map(|id| (id, w.session.replica_log_start)),
            prefer: w.prefer.clone(),
        };
        let s = home_shard(&meta.name, p, shards);
        by_shard[s].0.push(i);
        by_shard[s].1.push(spec);
    }
    let reads = by_shard
        .into_iter()
        .enumerate()
        .filter(|(_, (idx, _))| !idx.is_empty())
        .map(|(shard, (idx, specs))| async move {
            (
                idx,
                frontend::fetch_many(broker, shard, specs, read_committed).await,
            )
        });
    for (idx, reads) in futures::future::join_all(reads).await {
        for (i, mut read) in idx.into_iter().zip(reads) {
            // Keep the receiver the first read got: its "seen" mark is what the wait uses.
            if let Some(old) = wanted[i].read.take().and_then(|r| r.watch) {
                if read.watch.is_some() {
                    read.watch = Some(old);
                }
            }
            wanted[i].read = Some(read);
        }
    }
    if replica.is_none() {
        refuse_unconfirmed_ends(broker, wanted, which);
    }
    read_remote(broker, wanted, which).await;
}

/// A consumer fetching past the log end of a leader that has lost the metadata quorum gets
/// NOT_LEADER_OR_FOLLOWER (retriable: it looks for the leader again), not
/// OFFSET_OUT_OF_RANGE: the offset may be a new leader's, committed on the other side of a
/// split, and a consumer told it is out of range resets (to the earliest offset, reading
/// everything again) instead of finding the new leader. Found by test_faults.py's split and
/// leader cut-off schedules (`lost_commit`). Below the log start it is out of range anywhere.
fn refuse_unconfirmed_ends(
    broker: &crate::shard::BrokerContext,
    wanted: &mut [Wanted],
    which: &[usize],
) {
    for &i in which {
        let w = &mut wanted[i];
        let past_end = matches!(
            w.read.as_ref().map(|r| &r.outcome),
            Some(Err(FrontendError::Storage(StorageError::OffsetOutOfRange { offset, log_end, .. })))
                if offset > log_end
        );
        let unconfirmed = || {
            w.meta.as_ref().is_some_and(|m| {
                crate::cluster::leads_unconfirmed(broker, &m.name, w.session.partition)
            })
        };
        if past_end && unconfirmed() {
            w.not_leader = true;
        }
    }
}

/// The partitions the home shards routed to the object store, read at once on the remote
/// runtime (`tiered::fetch`); each answers its own error, the others are not held back.
async fn read_remote(broker: &crate::shard::BrokerContext, wanted: &mut [Wanted], which: &[usize]) {
    let Some(manager) = broker.remote.as_ref() else {
        return;
    };
    let mut idx = Vec::new();
    let mut reads = Vec::new();
    for &i in which {
        if let Some(f) = wanted[i].read.as_mut().and_then(|r| r.remote.take()) {
            idx.push(i);
            reads.push(manager.read(f));
        }
    }
    if reads.is_empty() {
        return;
    }
    for (i, r) in idx.into_iter().zip(futures::future::join_all(reads).await) {
        let Some(read) = wanted[i].read.as_mut() else {
            continue;
        };
        read.outcome = match (
            std::mem::replace(&mut read.outcome, Err(FrontendError::ShardGone(0))),
            r,
        ) {
            (Ok(mut o), Ok(data)) => {
                o.data.total_bytes = data.batches.len();
                o.data.chunks = vec![data.batches];
                o.aborted = data.aborted;
                Ok(o)
            }
            (Ok(_), Err(e)) => Err(FrontendError::RemoteStorage(e.to_string())),
            (Err(e), _) => Err(e),
        };
    }
}

/// Waits until a watermark of `waitable` moves or the deadline passes; returns the partitions
/// to read again (none: the deadline passed).
async fn wait_for_change(
    wanted: &mut [Wanted],
    waitable: &[usize],
    deadline: tokio::time::Instant,
) -> Vec<usize> {
    let changed = {
        let waits = wanted
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| waitable.contains(i))
            .filter_map(|(i, w)| {
                let rx = w.read.as_mut()?.watch.as_mut()?;
                Some(Box::pin(async move { (i, rx.changed().await.is_ok()) }))
            });
        match tokio::time::timeout_at(deadline, futures::future::select_all(waits)).await {
            Ok(((i, alive), _, _)) => Some((i, alive)),
            Err(_) => None,
        }
    };
    let Some((first, alive)) = changed else {
        return Vec::new();
    };
    if !alive {
        // The partition went away (deleted): read it again to answer its error, and stop
        // waiting on it.
        if let Some(r) = wanted[first].read.as_mut() {
            r.watch = None;
        }
    }
    let mut stale = vec![first];
    for &i in waitable {
        if i == first {
            continue;
        }
        let moved = wanted[i]
            .read
            .as_ref()
            .and_then(|r| r.watch.as_ref())
            .is_some_and(|rx| rx.has_changed().unwrap_or(true));
        if moved {
            stale.push(i);
        }
    }
    stale
}

/// The partitions' answers in request order with KIP-74's limits: each partition's records
/// stop at its own `max_bytes` (applied by the read) and at what is left of the response's
/// `max_bytes`, batch aligned; only the first partition with data may exceed them, by its
/// first batch. Returns the answers and the record bytes they carry.
fn assemble(
    wanted: &[Wanted],
    response_max: usize,
    version: i16,
    by_id: bool,
) -> (Vec<(PartitionData, RecordChunks)>, usize) {
    let unknown_topic = if by_id {
        ResponseError::UnknownTopicId.code()
    } else {
        ResponseError::UnknownTopicOrPartition.code()
    };
    let mut total = 0usize;
    let mut out = Vec::with_capacity(wanted.len());
    for w in wanted {
        let base = PartitionData::default()
            .with_partition_index(w.session.partition)
            .with_high_watermark(-1)
            .with_last_stable_offset(-1)
            .with_log_start_offset(-1)
            .with_preferred_read_replica(BrokerId(-1));
        if by_id && w.meta.is_none() && !w.follower_denied {
            out.push((base.with_error_code(unknown_topic), None));
            continue;
        }
        if w.denied {
            let code = ResponseError::TopicAuthorizationFailed.code();
            out.push((base.with_error_code(code), None));
            continue;
        }
        let Some(meta) = &w.meta else {
            out.push((base.with_error_code(unknown_topic), None));
            continue;
        };
        if let Some(e) = w.fenced {
            out.push((base.with_error_code(e.code()), None));
            continue;
        }
        if w.not_leader {
            let code = ResponseError::NotLeaderOrFollower.code();
            out.push((base.with_error_code(code), None));
            continue;
        }
        let Some(read) = &w.read else {
            out.push((
                base.with_error_code(ResponseError::UnknownTopicOrPartition.code()),
                None,
            ));
            continue;
        };
        let with_offsets = |p: PartitionData| match &read.offsets {
            Some(o) => p
                .with_high_watermark(o.high_watermark)
                .with_last_stable_offset(o.last_stable)
                .with_log_start_offset(if version >= 5 { o.log_start } else { -1 }),
            None => p,
        };
        match &read.outcome {
            Ok(o) => {
                let mut chunks = cut(&o.data.chunks, response_max.saturating_sub(total));
                if total == 0 && chunks.is_empty() {
                    // KIP-74: the first batch of the first partition with data goes whole,
                    // so a batch larger than the limits still makes progress.
                    chunks = cut(&o.data.chunks, first_batch_size(&o.data.chunks));
                }
                total += chunks.iter().map(Bytes::len).sum::<usize>();
                let aborted = o.aborted.as_ref().map(|list| {
                    list.iter()
                        .map(|t| {
                            AbortedTransaction::default()
                                .with_producer_id(ProducerId(t.producer_id))
                                .with_first_offset(t.first_offset)
                        })
                        .collect()
                });
                let p = base
                    .with_preferred_read_replica(BrokerId(read.preferred.unwrap_or(-1)))
                    .with_high_watermark(o.high_watermark)
                    .with_last_stable_offset(o.last_stable_offset)
                    .with_log_start_offset(if version >= 5 { o.log_start_offset } else { -1 })
                    .with_aborted_transactions(aborted);
                out.push((p, Some(chunks)));
            }
            Err(e) => {
                let code = super::errors::frontend_code(e);
                if code != ResponseError::OffsetOutOfRange.code() {
                    tracing::warn!(topic = %meta.name, partition = w.session.partition, error = %e, "fetch failed");
                }
                // Empty records, not null, as Kafka (`MemoryRecords.EMPTY`): librdkafka
                // refuses a null record set ("invalid MessageSetSize -1") and then never
                // sees the error, e.g. the OFFSET_OUT_OF_RANGE it would reset on.
                // A failed remote read is Kafka's `createLogReadResult(e)`: the error with
                // unknown (-1) offsets.
                let p = base.with_error_code(code);
                let p = if matches!(e, FrontendError::RemoteStorage(_)) {
                    p
                } else {
                    with_offsets(p)
                };
                out.push((p, Some(Vec::new())));
            }
        }
    }
    (out, total)
}

fn first_batch_size(chunks: &[Bytes]) -> usize {
    chunks
        .iter()
        .find(|c| !c.is_empty())
        .and_then(|c| storage::batch::frame(c).ok())
        .map_or(0, |h| h.total_size())
}

/// The longest batch-aligned prefix of `chunks` of at most `limit` bytes (slices, no copy).
fn cut(chunks: &[Bytes], limit: usize) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut left = limit;
    for c in chunks {
        if c.len() <= left {
            left -= c.len();
            out.push(c.clone());
            continue;
        }
        let mut end = 0usize;
        while end < c.len() {
            let Ok(h) = storage::batch::frame(&c[end..]) else {
                break;
            };
            if end + h.total_size() > left {
                break;
            }
            end += h.total_size();
        }
        if end > 0 {
            out.push(c.slice(..end));
        }
        break;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::handlers::testing::{batch, create, produce_req};
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{ApiKey, ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn fetch_req(
        topic: &str,
        partition: i32,
        offset: i64,
        max_wait: i32,
        min_bytes: i32,
    ) -> FetchRequest {
        FetchRequest::default()
            .with_max_wait_ms(max_wait)
            .with_min_bytes(min_bytes)
            .with_max_bytes(50 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])])
    }

    #[test]
    fn given_produced_batches_when_fetching_then_same_bytes_back_from_offset() {
        let h = Harness::new();
        create(&h, "t", 1);
        for _ in 0..3 {
            let r: ProduceResponse = h.call(
                ApiKey::Produce,
                11,
                produce_req("t", 0, -1, batch(4, -1, -1, -1)),
            );
            assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        }
        let resp: FetchResponse = h.call(ApiKey::Fetch, 12, fetch_req("t", 0, 5, 0, 1));
        let p = &resp.responses[0].partitions[0];
        assert_eq!(
            (p.error_code, p.high_watermark, p.log_start_offset),
            (0, 12, 0)
        );
        let mut records = p.records.clone().unwrap();
        let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut records).unwrap();
        // The batch containing offset 5 starts at 4.
        let offsets: Vec<i64> = sets
            .iter()
            .flat_map(|s| s.records.iter().map(|r| r.offset))
            .collect();
        assert_eq!(offsets, (4..12).collect::<Vec<_>>());
        assert_eq!(sets[0].records[1].value.as_deref(), Some(&b"v1"[..]));
    }

    #[test]
    fn given_current_leader_epoch_when_fetching_then_fenced_as_kafka_before_any_read() {
        let h = Harness::new();
        create(&h, "t", 1);
        let _: ProduceResponse = h.call(
            ApiKey::Produce,
            11,
            produce_req("t", 0, 1, batch(2, -1, -1, -1)),
        );
        let with_epoch = |epoch: i32| {
            let mut req = fetch_req("t", 0, 0, 0, 1);
            req.topics[0].partitions[0].current_leader_epoch = epoch;
            let resp: FetchResponse = h.call(ApiKey::Fetch, 12, req);
            let p = resp.responses[0].partitions[0].clone();
            (p.error_code, p.records.map_or(0, |r| r.len()))
        };
        // A single node's partitions are at epoch 0 (`shard::LEADER_EPOCH`).
        let (code, bytes) = with_epoch(-1);
        assert_eq!(code, 0, "-1: no check");
        assert!(bytes > 0);
        assert_eq!(with_epoch(0).0, 0);
        assert_eq!(
            with_epoch(1),
            (ResponseError::UnknownLeaderEpoch.code(), 0),
            "the client knows a newer leader: nothing is read here"
        );
        assert_eq!(with_epoch(-2), (ResponseError::FencedLeaderEpoch.code(), 0));
    }

    #[test]
    fn given_offset_past_end_when_fetching_then_offset_out_of_range_with_watermarks() {
        let h = Harness::new();
        create(&h, "t", 1);
        let _: ProduceResponse = h.call(
            ApiKey::Produce,
            11,
            produce_req("t", 0, 1, batch(2, -1, -1, -1)),
        );
        let resp: FetchResponse = h.call(ApiKey::Fetch, 12, fetch_req("t", 0, 99, 0, 1));
        let p = &resp.responses[0].partitions[0];
        assert_eq!((p.error_code, p.high_watermark), (1, 2));
        let resp: FetchResponse = h.call(ApiKey::Fetch, 12, fetch_req("nope", 0, 0, 0, 1));
        assert_eq!(resp.responses[0].partitions[0].error_code, 3);
    }

    #[test]
    fn given_no_data_when_long_polling_then_waits_until_produce_arrives() {
        let h = Harness::new();
        create(&h, "t", 1);
        let state = h.state.clone();
        let got = h.block_on(async move {
            let fetch = {
                let state = state.clone();
                tokio::task::spawn_local(async move {
                    let started = tokio::time::Instant::now();
                    let r: FetchResponse =
                        roundtrip(state, ApiKey::Fetch, 12, fetch_req("t", 0, 0, 5000, 1)).await;
                    (r, started.elapsed())
                })
            };
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _: ProduceResponse = roundtrip(
                state,
                ApiKey::Produce,
                9,
                produce_req("t", 0, 1, batch(1, -1, -1, -1)),
            )
            .await;
            fetch.await.unwrap()
        });
        let (resp, waited) = got;
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.high_watermark, 1);
        assert!(!p.records.as_ref().unwrap().is_empty());
        assert!(
            waited >= Duration::from_millis(40) && waited < Duration::from_millis(4000),
            "{waited:?}"
        );
    }

    #[test]
    fn given_fetch_session_when_fetching_incrementally_then_only_partitions_with_news() {
        let h = Harness::new();
        create(&h, "t", 1);
        let full: FetchResponse = h.call(
            ApiKey::Fetch,
            12,
            fetch_req("t", 0, 0, 0, 0).with_session_epoch(0),
        );
        assert_ne!(full.session_id, 0);
        assert_eq!(full.responses[0].partitions.len(), 1);
        let quiet = FetchRequest::default()
            .with_session_id(full.session_id)
            .with_session_epoch(1)
            .with_max_bytes(1 << 20);
        let r: FetchResponse = h.call(ApiKey::Fetch, 12, quiet.clone());
        assert_eq!((r.error_code, r.session_id), (0, full.session_id));
        assert!(r.responses.is_empty(), "nothing changed: {r:?}");
        let _: ProduceResponse = h.call(
            ApiKey::Produce,
            11,
            produce_req("t", 0, 1, batch(2, -1, -1, -1)),
        );
        let r: FetchResponse = h.call(ApiKey::Fetch, 12, quiet.clone().with_session_epoch(2));
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.high_watermark, 2);
        assert!(!p.records.as_ref().unwrap().is_empty());
        // A replayed epoch is refused.
        let r: FetchResponse = h.call(ApiKey::Fetch, 12, quiet.with_session_epoch(2));
        assert_eq!(r.error_code, 71);
    }

    #[test]
    fn given_unknown_session_when_fetching_then_session_not_found() {
        let h = Harness::new();
        let resp: FetchResponse = h.call(
            ApiKey::Fetch,
            12,
            fetch_req("t", 0, 0, 0, 1)
                .with_session_id(77)
                .with_session_epoch(3),
        );
        assert_eq!(resp.error_code, 70);
    }
}
