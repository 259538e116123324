//! The replica manager (docs/design.md "Partition replication"), one per shard: it follows
//! the metadata image, gives each replicated partition homed on its shard its role (leader
//! with epoch and ISR, or follower of a leader at an epoch), and runs one fetcher per
//! leader node on the shard, which fetches all of the shard's partitions that node leads
//! with Kafka's Fetch (`replica_id` = this node) and appends them at the leader's offsets.
//! Everything here runs on the shard's own thread: no lock on the produce path.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::handle::ClusterHandle;
use super::image::MetadataImage;
use crate::kafka_conn::KafkaConn;
use crate::partition::replica::Role;
use crate::partition::Partition;
use crate::quota::replication::Side;
use crate::shard::{frontend, home_shard, BrokerContext, ShardState};

/// A follower refuses a larger answer (bounds what one fetch makes it allocate).
const MAX_RESPONSE: usize = 64 << 20;
const FETCH_V: i16 = 12;
const OFFSET_FOR_EPOCH_V: i16 = 4;
/// A follower's long poll on the leader, and how long a fetch may take altogether.
const FETCH_WAIT_MS: i32 = 500;
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// After an error (leader unreachable, not leader yet), before the next try.
const BACKOFF: Duration = Duration::from_millis(100);
const PARTITION_MAX_BYTES: i32 = 1 << 20;
const FETCH_MAX_BYTES: i32 = 16 << 20;

/// Starts a replica manager on every shard (from any thread).
pub async fn start_on_shards(ctx: Arc<BrokerContext>) {
    for shard in 0..ctx.shard_count() {
        let started = frontend::invoke_on(&ctx, shard, |state| async move {
            tokio::task::spawn_local(manage(state));
        })
        .await;
        if let Err(e) = started {
            tracing::warn!(shard, error = %e, "replica manager not started");
        }
    }
}

async fn manage(state: Rc<ShardState>) {
    let cluster = loop {
        if let Some(c) = state.ctx.cluster.get() {
            break c.clone();
        }
        tokio::time::sleep(BACKOFF).await;
    };
    let mut applied = cluster.watch_materialized();
    let fetchers: Rc<RefCell<HashSet<i32>>> = Rc::default();
    loop {
        let image = cluster.image();
        for leader in assign_roles(&state, &cluster, &image) {
            if fetchers.borrow_mut().insert(leader) {
                let task = fetch_from(state.clone(), cluster.clone(), leader, fetchers.clone());
                tokio::task::spawn_local(task);
            }
        }
        // Also now and then: partitions opened after the entry that placed them, and the
        // quorum flag, change without a new entry.
        tokio::select! {
            r = applied.changed() => if r.is_err() { return },
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Kafka's `replica.lag.time.max.ms` is 30 s; a follower that has not caught up for this
/// long leaves the ISR, so acks=all does not wait for it.
const REPLICA_LAG_MAX: Duration = Duration::from_secs(10);

/// Sets the role of every partition of this shard that the image places a replica of here
/// (and shrinks the ISR of those it leads by lagging followers); returns the leaders its
/// followers fetch from. A replica the image places here but this shard has not opened
/// (gained by a reassignment, or missing after a restart) is opened; an open partition the
/// image places no replica of here (removed by a reassignment, or a stray from before a
/// restart) is deleted (`drop_replica`) once this node's image is current.
fn assign_roles(
    state: &Rc<ShardState>,
    cluster: &ClusterHandle,
    image: &MetadataImage,
) -> Vec<i32> {
    let me = cluster.node_id;
    let shards = state.ctx.shard_count();
    let mut leaders = Vec::new();
    let mut missing = Vec::new();
    let mut strays = Vec::new();
    let partitions = state.partitions.borrow();
    for (name, topic) in &image.topics {
        for (i, record) in topic.partitions.iter().enumerate() {
            let i = i as i32;
            if home_shard(name, i, shards) != state.id {
                continue;
            }
            let mine = record.replicas.contains(&me);
            let Some(p) = partitions.get(&(Arc::from(name.as_str()), i)) else {
                if mine {
                    missing.push((name.clone(), i));
                }
                continue;
            };
            if !mine {
                strays.push((p.clone(), record.leader, record.leader_epoch));
                continue;
            }
            let role = if !record.replicated() {
                // The only replica (a move may have just made it so): it leads alone.
                Role::Single
            } else if record.leader == me {
                Role::Leader {
                    me,
                    epoch: record.leader_epoch,
                    isr: record.in_sync(),
                    replicas: record.replicas.clone(),
                    quorum: cluster.quorum.clone(),
                }
            } else {
                if record.leader >= 0 && !leaders.contains(&record.leader) {
                    leaders.push(record.leader);
                }
                Role::Follower {
                    leader: record.leader,
                    epoch: record.leader_epoch,
                }
            };
            match p.set_role(role) {
                Ok(moves) => state.metrics.count_isr_moves(moves),
                Err(e) => {
                    tracing::error!(topic = name, partition = i, error = %e, "cannot take the partition's role");
                }
            }
            if let Some(change) = p.isr_to_shrink(REPLICA_LAG_MAX) {
                tracing::info!(
                    topic = name,
                    partition = i,
                    isr = ?change.isr,
                    "shrinking the ISR: a follower lags"
                );
                if let Some(c) = state.ctx.cluster.get() {
                    super::handle::propose_isr(c, p, change);
                }
            }
        }
    }
    drop(partitions);
    open_missing(state, missing);
    // A node just restarted may still apply entries that place a replica here again: its
    // data goes only once its image has caught up with the quorum's.
    if cluster.in_quorum() {
        for (p, leader, epoch) in strays {
            drop_replica(state, p, leader, epoch);
        }
    }
    leaders
}

/// Opens the replicas the image places on this shard that are not open yet (their logs
/// start empty; the fetcher fills them from the leader). A topic the catalog does not have
/// yet is opened by the materializer, which adds it.
fn open_missing(state: &ShardState, missing: Vec<(String, i32)>) {
    if missing.is_empty() {
        return;
    }
    let catalog = state.ctx.catalog.snapshot();
    for (name, i) in missing {
        let Some(meta) = catalog.get(name.as_str()) else {
            continue;
        };
        if state.offline.borrow().contains_key(&(meta.name.clone(), i)) {
            continue; // a log that failed to open stays offline (KAFKA_STORAGE_ERROR)
        }
        match crate::shard::open_partition(state, meta, i, None) {
            Ok(_) => tracing::info!(topic = name, partition = i, "replica opened here"),
            Err(e) => {
                tracing::error!(topic = name, partition = i, error = %e, "cannot open a replica placed here");
                // Not a bad log but a data dir that cannot be written: the node stops, as
                // on any failed write (shard::log_dir_failure), rather than hold a replica
                // the controller may make leader.
                if matches!(e, storage::StorageError::Io { .. }) {
                    let policy = crate::shard::log_dir_failure::Policy::of(&state.ctx.config);
                    crate::shard::log_dir_failure::failed_with(
                        policy,
                        &state.ctx.config.data_dir,
                        &e,
                    );
                }
            }
        }
    }
}

/// This node holds no replica of the partition any more (a reassignment moved it away):
/// requests still waiting on it as leader (acks=all) answer NOT_LEADER_OR_FOLLOWER and go to
/// the new leader, then the partition leaves the shard and its files are deleted, as Kafka's
/// `ReplicaManager` stops and deletes a replica that is no longer assigned to the broker.
fn drop_replica(state: &ShardState, p: Rc<Partition>, leader: i32, epoch: i32) {
    if let Err(e) = p.set_role(Role::Follower { leader, epoch }) {
        tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "cannot step down before removal");
    }
    state
        .partitions
        .borrow_mut()
        .remove(&(p.topic.clone(), p.index));
    tracing::info!(topic = %p.topic, partition = p.index, "no replica here any more: deleting the local log");
    crate::shard::frontend::delete_files(p);
}

/// A partition this shard follows, with the leader epoch it follows at.
type Followed = (Rc<Partition>, i32);

/// The partitions of this shard that follow `leader`, with the epoch they follow at.
fn following(state: &ShardState, leader: i32) -> Vec<(Rc<Partition>, i32)> {
    state
        .partitions
        .borrow()
        .values()
        .filter_map(|p| match p.role() {
            Role::Follower { leader: l, epoch } if l == leader => Some((p.clone(), epoch)),
            _ => None,
        })
        .collect()
}

/// One fetcher: this shard's partitions led by `leader`, until none is left.
async fn fetch_from(
    state: Rc<ShardState>,
    cluster: Arc<ClusterHandle>,
    leader: i32,
    running: Rc<RefCell<HashSet<i32>>>,
) {
    let me = cluster.node_id;
    let mut conn: Option<KafkaConn> = None;
    loop {
        let parts = following(&state, leader);
        if parts.is_empty() {
            running.borrow_mut().remove(&leader);
            return;
        }
        if conn.is_none() {
            // The leader's inter-broker listener, authenticated as this broker.
            let ib = &cluster.inter_broker;
            let connected = match ib.address(&cluster.image(), leader) {
                Ok(addr) => ib
                    .connect(&addr, "strom-replica-fetcher", CALL_TIMEOUT, MAX_RESPONSE)
                    .await
                    .map_err(|e| (e.is_refusal(), e.to_string())),
                Err(e) => Err((true, e)),
            };
            match connected {
                Ok(c) => conn = Some(c),
                Err((refused, e)) => {
                    unreachable_leader(leader, refused, &e);
                    tokio::time::sleep(BACKOFF).await;
                    continue;
                }
            }
        }
        let c = conn.as_mut().expect("connected above");
        let limits = follower_limits(&state, &cluster, &parts);
        let result = match truncate_pending(c, me, &parts).await {
            Ok(()) => fetch_once(c, me, leader, &parts, &limits).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            tracing::debug!(leader, error = %e, "replica fetch failed; reconnecting");
            conn = None;
            tokio::time::sleep(BACKOFF).await;
        }
    }
}

/// Per partition of `parts`, the follower rate it is throttled to (`quota::replication`): set
/// for a replica out of the ISR whose topic lists it in `follower.replication.throttled.replicas`
/// while this broker has a `follower.replication.throttled.rate`.
fn follower_limits(
    state: &ShardState,
    cluster: &ClusterHandle,
    parts: &[(Rc<Partition>, i32)],
) -> Vec<Option<u64>> {
    let me = cluster.node_id;
    let view = state.ctx.catalog.broker();
    let catalog = state.ctx.catalog.snapshot();
    let image = cluster.image();
    parts
        .iter()
        .map(|(p, _)| {
            let meta = catalog.get(&p.topic)?;
            let limit = Side::Follower.limit(&view, &meta.configs, p.index, me)?;
            let in_sync = image
                .partition(&p.topic, p.index)
                .is_some_and(|r| r.in_sync().contains(&me));
            (!in_sync).then_some(limit)
        })
        .collect()
}

/// A fetcher that cannot reach its leader says so at debug level (a leader restarting is
/// common), but a refusal — TLS or SASL failing, no endpoint on the inter-broker listener,
/// which no retry mends — at warn, at most once a minute per leader and shard.
fn unreachable_leader(leader: i32, refused: bool, error: &str) {
    thread_local! {
        static LAST: RefCell<BTreeMap<i32, std::time::Instant>> = RefCell::default();
    }
    let due = refused
        && LAST.with(|l| {
            let mut l = l.borrow_mut();
            let now = std::time::Instant::now();
            let due = l
                .get(&leader)
                .is_none_or(|t| now - *t > Duration::from_secs(60));
            if due {
                l.insert(leader, now);
            }
            due
        });
    if due {
        tracing::warn!(
            leader,
            error,
            "replica fetcher cannot connect to the leader's inter-broker listener"
        );
    } else {
        tracing::debug!(leader, error, "replica fetcher cannot reach the leader");
    }
}

/// Kafka's follower truncation: a replica at a new epoch asks the leader where its own
/// latest epoch ends there and cuts its log to that.
async fn truncate_pending(
    conn: &mut KafkaConn,
    me: i32,
    parts: &[(Rc<Partition>, i32)],
) -> Result<(), crate::kafka_conn::ConnError> {
    for (p, epoch) in parts {
        if !p.take_truncate_pending() {
            continue;
        }
        let Some(latest) = p.latest_epoch() else {
            continue; // an empty log has nothing to cut
        };
        let req = OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(me))
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(topic_name(&p.topic))
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_partition(p.index)
                    .with_current_leader_epoch(*epoch)
                    .with_leader_epoch(latest)])]);
        let resp: Result<OffsetForLeaderEpochResponse, _> = conn
            .call(
                ApiKey::OffsetForLeaderEpoch,
                OFFSET_FOR_EPOCH_V,
                &req,
                CALL_TIMEOUT,
            )
            .await;
        let answer = resp.as_ref().ok().and_then(|r| {
            let e = r.topics.first()?.partitions.first()?;
            (e.error_code == 0).then_some((e.leader_epoch, e.end_offset))
        });
        let target = match answer {
            Some((_, end)) if end >= 0 => end,
            // The leader knows no epoch at or below ours: keep what is committed.
            Some(_) => p.high_watermark(),
            None => {
                p.set_truncate_pending();
                resp?;
                continue; // an error answer (leader not ready): again on the next pass
            }
        };
        if let Err(e) = p.truncate_replica(target).await {
            tracing::error!(topic = %p.topic, partition = p.index, error = %e, "follower truncation failed");
            p.set_truncate_pending();
        }
    }
    Ok(())
}

async fn fetch_once(
    conn: &mut KafkaConn,
    me: i32,
    leader: i32,
    parts: &[(Rc<Partition>, i32)],
    limits: &[Option<u64>],
) -> Result<(), crate::kafka_conn::ConnError> {
    let mut topics: BTreeMap<Arc<str>, Vec<FetchPartition>> = BTreeMap::new();
    let mut asked: Vec<(&Followed, Option<u64>)> = Vec::new();
    for (pe, limit) in parts.iter().zip(limits) {
        let (p, epoch) = pe;
        if p.truncate_is_pending() {
            continue;
        }
        // A throttled replica is asked for again once the quota has room (Kafka's
        // `shouldFollowerThrottle`); as in Kafka, that fetch may take a whole
        // `PARTITION_MAX_BYTES`, and the quota then waits for the rate to fall back.
        if limit.is_some_and(|l| Side::Follower.exceeded(l)) {
            continue;
        }
        topics.entry(p.topic.clone()).or_default().push(
            FetchPartition::default()
                .with_partition(p.index)
                .with_current_leader_epoch(*epoch)
                .with_fetch_offset(p.log.log_end_offset())
                // The leader's DeleteRecords waits for its followers' starts to move too.
                .with_log_start_offset(p.log.log_start_offset())
                .with_partition_max_bytes(PARTITION_MAX_BYTES),
        );
        asked.push((pe, *limit));
    }
    if asked.is_empty() {
        tokio::time::sleep(BACKOFF).await;
        return Ok(());
    }
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(me))
        .with_max_wait_ms(FETCH_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_MAX_BYTES)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    FetchTopic::default()
                        .with_topic(topic_name(&t))
                        .with_partitions(ps)
                })
                .collect(),
        );
    let resp: FetchResponse = conn
        .call(ApiKey::Fetch, FETCH_V, &req, CALL_TIMEOUT)
        .await?;
    let mut backoff = false;
    for t in resp.responses {
        for pr in t.partitions {
            let Some(((p, epoch), limit)) = asked
                .iter()
                .find(|((p, _), _)| *p.topic == *t.topic.as_str() && p.index == pr.partition_index)
            else {
                continue;
            };
            if limit.is_some() {
                Side::Follower.record(pr.records.as_ref().map_or(0, |r| r.len() as u64));
            }
            // The image may have moved on while the fetch was out.
            if !p.takes_fetched_from(leader, *epoch) {
                continue;
            }
            let out_of_range = pr.error_code == ResponseError::OffsetOutOfRange.code();
            if out_of_range && pr.log_start_offset > p.log.log_end_offset() {
                // The leader deleted what this replica would fetch next (DeleteRecords or
                // retention while it was away): it starts over at the leader's start.
                if let Err(e) = p.follow_log_start(pr.log_start_offset).await {
                    tracing::error!(topic = %p.topic, partition = p.index, error = %e, "follower cannot start over at the leader's log start");
                    backoff = true;
                }
                continue;
            }
            if pr.error_code != 0 {
                tracing::debug!(topic = %p.topic, partition = p.index, code = pr.error_code, "replica fetch refused");
                backoff = true;
                continue;
            }
            match pr.records.filter(|r| !r.is_empty()) {
                None => p.note_leader_hw(pr.high_watermark),
                Some(records) => {
                    match p
                        .append_fetched(leader, *epoch, vec![records], pr.high_watermark)
                        .await
                    {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err(e) => {
                            tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "follower append failed");
                            backoff = true;
                            continue;
                        }
                    }
                }
            }
            if let Err(e) = p.follow_log_start(pr.log_start_offset).await {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "follower cannot move its log start to the leader's");
            }
        }
    }
    if backoff {
        tokio::time::sleep(BACKOFF).await;
    }
    Ok(())
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}
