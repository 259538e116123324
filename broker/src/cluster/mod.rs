//! The cluster: the metadata quorum of `controller.quorum.voters` (Kafka's KRaft, on
//! openraft). docs/design.md "Cluster" has the design; in short:
//!
//! `image/` (the state machine: brokers, topics, partition placement, ACLs, users, quotas,
//! configs, feature levels) ← `store.rs`
//! (openraft's log, vote and snapshot on disk under `<data-dir>/cluster/`) ← openraft, on its
//! own `cluster` thread and runtime, talking to the peers through `network.rs` (its own TCP
//! port). Applied commands flow to `materialize.rs`, which changes the local catalog and
//! partitions and mirrors the rest into the node's stores; shards read the published image
//! (`ClusterHandle::image`) as an `Arc`. A single node's data dir joins the image on its
//! first clustered start (`migrate.rs`).
//!
//! Partitions with more than one replica are replicated in Kafka's ISR model: `controller.rs`
//! (broker sessions, fencing, failover through the image), `replicas.rs` (roles and the
//! follower fetchers on every shard) and `partition::replica` (high watermark, acks=all,
//! truncation). A node refuses produce for partitions it does not lead
//! (NOT_LEADER_OR_FOLLOWER). Without voters nothing here starts. A node that is not a voter
//! is a broker-only node, an observer of the quorum (`observer.rs`).

pub mod controller;
pub mod handle;
pub mod image;
pub mod inter_broker;
mod liveness;
mod materialize;
pub mod migrate;
pub mod network;
mod observer;
pub mod quorum;
pub mod raft_stats;
pub mod read_replica;
pub mod replicas;
pub mod store;
pub mod types;
pub mod voter_change;
pub mod voters;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::{BasicNode, Config, SnapshotPolicy};
use tokio::sync::watch;

use crate::shard::BrokerContext;
use handle::write_through_leader;
pub use handle::{ClusterError, ClusterHandle};
use image::{BrokerRecord, Command};
pub use types::{NodeId, Raft, TypeConfig};

/// Work the caller starts beside the quorum, on its thread, once it runs: the coordinators'
/// leadership followers (`coordinator::leadership`). Given by the caller so that the cluster
/// layer does not depend on the coordinators built on top of it.
pub type Follower =
    Box<dyn FnOnce(Arc<BrokerContext>) -> futures::future::LocalBoxFuture<'static, ()> + Send>;

/// Starts the metadata quorum if `controller.quorum.voters` names any; `None` = single node.
/// Called once the shards run (applying entries opens partitions on them). `endpoints` are
/// this broker's listeners as advertised, registered (again on every start) for clients and
/// peers; `inter_broker` is how this node calls the others; `followers` start once the
/// quorum runs.
pub fn start(
    ctx: Arc<BrokerContext>,
    endpoints: Vec<image::Endpoint>,
    inter_broker: inter_broker::InterBroker,
    followers: Vec<Follower>,
) -> Result<Option<Arc<ClusterHandle>>, ClusterError> {
    let voters = voters::parse(&ctx.config.controller_quorum_voters)?;
    if voters.is_empty() {
        return Ok(None);
    }
    let node_id = ctx.config.node_id;
    let is_voter = voters.contains_key(&(node_id as u64));
    let own = match voters.get(&(node_id as u64)) {
        Some(addr) => *addr,
        None => voters::observer_address(node_id, &ctx.config.raft_listen)?,
    };
    let dir = ctx.config.data_dir.join("cluster");
    // Before the metadata log exists: its directory is what says the node has been clustered.
    let migration = if !dir.exists() || dir.join(migrate::PENDING_FILE).exists() {
        migrate::capture(&ctx)
    } else {
        None
    };
    if migration.is_some() {
        migrate::mark_pending(&dir).map_err(|source| ClusterError::Store {
            dir: dir.clone(),
            source,
        })?;
    } else if dir.join(migrate::PENDING_FILE).exists() {
        // Pending, but the data dir holds nothing to migrate any more.
        migrate::finish(&dir);
    }
    let listener = std::net::TcpListener::bind(own)
        .and_then(|l| l.set_nonblocking(true).map(|_| l))
        .map_err(|source| ClusterError::Bind { addr: own, source })?;
    let (applied_tx, applied_rx) = tokio::sync::mpsc::unbounded_channel();
    let store = store::Store::open(&dir, applied_tx).map_err(|source| ClusterError::Store {
        dir: dir.clone(),
        source,
    })?;
    let image = store.image.clone();
    let raft_stats = Arc::new(raft_stats::RaftStats::new(store.commit_index.clone()));
    let thread_stats = raft_stats.clone();
    let (materialized_tx, materialized_rx) = watch::channel(0u64);
    let (stop_tx, stop_rx) = watch::channel(false);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (migrated_tx, migrated_rx) = std::sync::mpsc::channel();
    let (hold_tx, hold_rx) = tokio::sync::oneshot::channel();
    let migrating = migration.is_some();
    let hold = migrating.then_some(hold_rx);
    let quorum = Arc::new(AtomicBool::new(false));
    let liveness = Arc::new(liveness::Liveness::default());
    let handle_liveness = liveness.clone();
    let quorum_flag = quorum.clone();
    let shared_image = image.clone();
    let registration = BrokerRecord::new(node_id, ctx.config.rack(), endpoints);
    let thread = std::thread::Builder::new()
        .name("cluster".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(ClusterError::Raft(e.to_string())));
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                let raft = match new_raft(node_id as u64, store).await {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok((raft.clone(), tokio::runtime::Handle::current())));
                tokio::spawn(raft_stats::count_leader_changes(raft.clone(), thread_stats));
                let listener = tokio::net::TcpListener::from_std(listener).expect("in runtime");
                tokio::spawn(network::serve(
                    listener,
                    raft.clone(),
                    liveness.clone(),
                    stop_rx.clone(),
                ));
                tokio::task::spawn_local(materialize::run(
                    ctx.clone(),
                    dir,
                    applied_rx,
                    materialized_tx,
                    hold,
                ));
                if is_voter {
                    form(&raft, &voters).await;
                }
                tokio::spawn(observer::stay_in_membership(
                    raft.clone(),
                    node_id as u64,
                    own,
                    voters.clone(),
                ));
                if let Some(m) = migration {
                    match migrate::propose(raft.clone(), m).await {
                        Ok(index) => {
                            let _ = hold_tx.send(index);
                            let _ = migrated_tx.send(Ok(()));
                        }
                        Err(e) => {
                            // `start` fails with it and stops this thread.
                            let _ = migrated_tx.send(Err(e));
                            let mut stop = stop_rx;
                            let _ = stop.wait_for(|s| *s).await;
                            let _ = raft.shutdown().await;
                            return;
                        }
                    }
                }
                tokio::spawn(register(raft.clone(), registration, ctx.cluster_id.clone()));
                tokio::spawn(controller::heartbeat(
                    raft.clone(),
                    node_id,
                    quorum_flag,
                    liveness.clone(),
                ));
                if ctx.config.auto_leader_rebalance_enable {
                    tokio::spawn(controller::rebalance(
                        raft.clone(),
                        node_id as u64,
                        shared_image.clone(),
                        Duration::from_secs(ctx.config.leader_imbalance_check_interval_seconds),
                    ));
                }
                tokio::spawn(controller::fence(
                    raft.clone(),
                    node_id as u64,
                    shared_image,
                    liveness,
                ));
                tokio::task::spawn_local(replicas::start_on_shards(ctx.clone()));
                for follower in followers {
                    tokio::task::spawn_local(follower(ctx.clone()));
                }
                let mut stop = stop_rx;
                let _ = stop.wait_for(|s| *s).await;
                let _ = raft.shutdown().await;
            });
        })
        .map_err(|e| ClusterError::Raft(e.to_string()))?;
    let (raft, runtime) = ready_rx
        .recv()
        .map_err(|_| ClusterError::Raft("the cluster thread died while starting".into()))??;
    if migrating {
        // The node serves nothing until its data is in the image (or refused by it).
        let migrated = migrated_rx
            .recv()
            .map_err(|_| ClusterError::Raft("the cluster thread died while migrating".into()))
            .and_then(|r| r);
        if let Err(e) = migrated {
            let _ = stop_tx.send(true);
            let _ = thread.join();
            return Err(e);
        }
    }
    tracing::info!(node_id, raft = %own, voters = voters_summary(&raft), "metadata quorum started");
    Ok(Some(Arc::new(ClusterHandle {
        node_id,
        raft,
        image,
        materialized: materialized_rx,
        quorum,
        inter_broker,
        runtime,
        liveness: handle_liveness,
        raft_stats,
        stop: stop_tx,
        thread: Mutex::new(Some(thread)),
    })))
}

fn voters_summary(raft: &Raft) -> String {
    let m = raft.metrics().borrow().membership_config.clone();
    let ids: BTreeSet<u64> = m.voter_ids().collect();
    format!("{ids:?}")
}

async fn new_raft(node_id: NodeId, store: store::Store) -> Result<Raft, ClusterError> {
    // Elections within a second or two of a leader's loss; Kafka's KRaft defaults are
    // 1–2 s of election timeout with 500 ms fetches, so these are of the same order.
    let config = Config {
        cluster_name: "strom".into(),
        heartbeat_interval: 150,
        election_timeout_min: 600,
        election_timeout_max: 1200,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(256),
        max_in_snapshot_log_to_keep: 64,
        ..Default::default()
    }
    .validate()
    .map_err(|e| ClusterError::Raft(e.to_string()))?;
    let (log_store, state_machine) = openraft::storage::Adaptor::new(store);
    Raft::new(
        node_id,
        Arc::new(config),
        network::Network,
        log_store,
        state_machine,
    )
    .await
    .map_err(|e| ClusterError::Raft(e.to_string()))
}

/// Every voter proposes the same initial membership on a pristine log: the first entry is
/// identical on all of them, so it does not matter which nodes start first. A node whose log
/// is not empty (a restart) is refused, which is what we want.
async fn form(raft: &Raft, voters: &BTreeMap<u64, SocketAddr>) {
    if raft.is_initialized().await.unwrap_or(true) {
        return;
    }
    let members: BTreeMap<NodeId, BasicNode> = voters
        .iter()
        .map(|(id, addr)| (*id, BasicNode::new(addr.to_string())))
        .collect();
    if let Err(e) = raft.initialize(members).await {
        tracing::debug!(error = %e, "raft initialize (another voter may have formed the cluster)");
    }
}

/// Registers this broker (and its address) once a leader is known; again after every
/// restart, since the address may have changed.
async fn register(raft: Raft, broker: BrokerRecord, cluster_id: String) {
    let cmd = Command::RegisterBroker { broker, cluster_id };
    loop {
        match write_through_leader(raft.clone(), cmd.clone()).await {
            Ok(_) => {
                tracing::info!("broker registered with the metadata quorum");
                return;
            }
            Err(e) => tracing::info!(error = %e, "broker registration waits for a quorum"),
        }
    }
}

/// KIP-951: the partition's leader and leader epoch as this node's image has them, with
/// the leader's endpoint on `listener` (the one the request came in on; none when the leader
/// lacks it, as Kafka's `getAliveBrokerNode`), for a NOT_LEADER_OR_FOLLOWER answer that tells
/// the client where to go (Produce v10+, Fetch v12+ and its v16+ node endpoints) without a
/// Metadata round trip.
pub fn current_leader(
    ctx: &BrokerContext,
    topic: &str,
    partition: i32,
    listener: &str,
) -> Option<(i32, i32, Option<image::BrokerNode>)> {
    let image = ctx.cluster.get()?.image();
    let p = image.partition(topic, partition)?;
    image.brokers.get(&p.leader)?;
    Some((p.leader, p.leader_epoch, image.node_on(p.leader, listener)))
}

/// True when this node is clustered and does not lead the partition: another node leads
/// it, or this node's image does not place it yet (just restarted, or a topic still being
/// created) — it must not take writes it may not own.
pub fn led_elsewhere(ctx: &BrokerContext, topic: &str, partition: i32) -> bool {
    ctx.cluster
        .get()
        .is_some_and(|c| !c.leads(topic, partition))
}

/// Whether this node may lead `partition` without knowing it was replaced: it leads a
/// replicated partition as its image says, but has lost the metadata quorum (a minority side
/// of a split, or a heal it has not caught up with), so a new leader may hold records past
/// this log's end.
pub fn leads_unconfirmed(ctx: &BrokerContext, topic: &str, partition: i32) -> bool {
    ctx.cluster.get().is_some_and(|c| {
        !c.in_quorum()
            && c.leads(topic, partition)
            && c.image()
                .partition(topic, partition)
                .is_some_and(|p| p.replicated())
    })
}

/// acks=all refused before the append (Kafka's `Partition.appendRecordsToLeader`): the ISR
/// (as the image has it) when it is smaller than `min_isr`, or when this node has lost the
/// metadata quorum and the partition is replicated. A single node is an ISR of one.
pub fn isr_shortfall(
    ctx: &BrokerContext,
    topic: &str,
    partition: i32,
    min_isr: i32,
) -> Option<Vec<i32>> {
    let Some(cluster) = ctx.cluster.get() else {
        return (min_isr > 1).then(|| vec![ctx.config.node_id]);
    };
    let image = cluster.image();
    let p = image.partition(topic, partition)?;
    let isr = p.in_sync();
    if p.replicated() && !cluster.in_quorum() {
        return Some(isr);
    }
    ((isr.len() as i32) < min_isr).then_some(isr)
}
