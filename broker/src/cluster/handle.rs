//! This node's handle on the metadata quorum (`BrokerContext::cluster` holds it when
//! clustered): the applied image, proposals through the Raft leader, and the quorum state.
//! Below the shards, which hold it, and above nothing of theirs: starting the quorum and
//! applying its entries to the shards is mod.rs's and materialize.rs's.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use openraft::error::{ClientWriteError, RaftError};
use tokio::sync::watch;

use super::image::{Command, MetadataImage, Outcome};
use super::network::{PeerClient, PeerRequest, PeerResponse};
use super::types::Raft;
use super::voter_change::{self, VoterChange, VoterChangeError};
use super::voters;
use crate::partition::replica::IsrChange;
use crate::partition::Partition;

/// How long a proposal may wait for a leader and for its own node to apply it.
pub(super) const PROPOSE_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(transparent)]
    Voters(#[from] voters::VotersError),
    #[error("cannot bind the raft port {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the metadata log in {dir}: {source}")]
    Store {
        dir: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot migrate this node's single-node data dir into the cluster: {0}. Nothing was migrated and this node's topics are as they were; delete or rename one of the two topics, then start this node again")]
    MigrationConflict(String),
    #[error("raft: {0}")]
    Raft(String),
    #[error("no metadata quorum within {PROPOSE_TIMEOUT:?}: {0}")]
    NoQuorum(String),
}

/// This node's part in the cluster; `BrokerContext::cluster` holds it when clustered.
pub struct ClusterHandle {
    pub node_id: i32,
    pub(super) raft: Raft,
    pub(super) image: Arc<RwLock<Arc<MetadataImage>>>,
    pub(super) materialized: watch::Receiver<u64>,
    /// False while this node is cut off from the metadata quorum (`controller`).
    pub quorum: Arc<AtomicBool>,
    /// How this node calls the other brokers (follower fetches, transaction markers).
    pub inter_broker: super::inter_broker::InterBroker,
    pub(super) runtime: tokio::runtime::Handle,
    pub(super) liveness: Arc<super::liveness::Liveness>,
    pub(super) raft_stats: Arc<super::raft_stats::RaftStats>,
    pub(super) stop: watch::Sender<bool>,
    pub(super) thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl ClusterHandle {
    /// The metadata image as last applied on this node.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.read().expect("image lock").clone()
    }

    /// Changes whenever this node has carried out another metadata entry.
    pub fn watch_materialized(&self) -> watch::Receiver<u64> {
        self.materialized.clone()
    }

    /// Whether this node is in contact with the metadata quorum.
    pub fn in_quorum(&self) -> bool {
        self.quorum.load(Ordering::Relaxed)
    }

    /// Kafka's controller: the Raft leader, if one is known.
    pub fn controller(&self) -> Option<i32> {
        let leader = self.raft.metrics().borrow().current_leader;
        leader.map(|l| l as i32)
    }

    /// The metadata Raft on this node, for the metrics.
    pub fn raft_view(&self) -> super::raft_stats::RaftView {
        super::raft_stats::view(&self.raft, &self.raft_stats)
    }

    /// The leader of a partition, as the image places it.
    pub fn leader_of(&self, topic: &str, partition: i32) -> Option<i32> {
        self.image().partition(topic, partition).map(|p| p.leader)
    }

    /// True when the image places the partition here, as its leader.
    pub fn leads(&self, topic: &str, partition: i32) -> bool {
        self.leader_of(topic, partition) == Some(self.node_id)
    }

    /// Appends `cmd` through the Raft leader (forwarded when this node is a follower) and
    /// waits until this node has carried it out, so the caller sees its effect locally.
    pub async fn propose(&self, cmd: Command) -> Result<Outcome, ClusterError> {
        let raft = self.raft.clone();
        let (index, outcome) = self
            .runtime
            .spawn(write_through_leader(raft, cmd))
            .await
            .map_err(|e| ClusterError::Raft(e.to_string()))??;
        let mut rx = self.materialized.clone();
        tokio::time::timeout(PROPOSE_TIMEOUT, rx.wait_for(|m| *m >= index))
            .await
            .map_err(|_| ClusterError::NoQuorum(format!("entry {index} not applied here")))?
            .map_err(|_| ClusterError::Raft("the cluster thread stopped".into()))?;
        Ok(outcome)
    }

    /// Kafka's controlled shutdown, before a clean stop: asks the quorum to move this
    /// node's leaderships to other in-sync replicas and to take it out of every ISR
    /// (`Command::ControlledShutdown`), and returns once its own image shows that done, so
    /// producers and consumers find the new leaders (NOT_LEADER_OR_FOLLOWER, retriable)
    /// while this node still answers, and acks=all stops waiting on it. Bounded by
    /// `timeout`: without a quorum there is nobody to hand over to, and the node stops as
    /// after a kill (its partitions move when the controller fences it). Called from
    /// outside the cluster's runtime.
    pub fn controlled_shutdown(&self, timeout: Duration) {
        let me = self.node_id;
        let started = Instant::now();
        let image = self.image();
        if !image.live_brokers().iter().any(|b| *b != me) {
            // The last broker up (a whole cluster stopping): nobody to hand over to.
            tracing::info!("controlled shutdown: no other live broker to move leadership to");
            return;
        }
        let cmd = Command::ControlledShutdown { id: me };
        let outcome = self
            .runtime
            .block_on(async { tokio::time::timeout(timeout, self.propose(cmd)).await });
        match outcome {
            Ok(Ok(Outcome::Done)) if !self.image().leads_movable(me) => {
                tracing::info!(
                    took_ms = started.elapsed().as_millis() as u64,
                    "controlled shutdown: leadership moved away"
                );
            }
            Ok(Ok(other)) => {
                tracing::warn!(outcome = ?other, "controlled shutdown not granted; stopping anyway");
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "controlled shutdown without a metadata quorum; stopping anyway");
            }
            Err(_) => {
                tracing::warn!(?timeout, "controlled shutdown timed out; stopping anyway");
            }
        }
    }

    /// The metadata quorum as its Raft leader sees it (DescribeQuorum): here when this node
    /// leads, else asked of the leader over the peer port.
    pub async fn describe_quorum(&self) -> Result<super::quorum::QuorumView, ClusterError> {
        if let Some(v) = super::quorum::leader_view(&self.raft, &self.liveness) {
            return Ok(v);
        }
        let addr = other_leader(&self.raft)
            .ok_or_else(|| ClusterError::NoQuorum("no metadata leader known".into()))?;
        let answer = self
            .runtime
            .spawn(async move {
                PeerClient::new(addr)
                    .call(&PeerRequest::DescribeQuorum, Duration::from_secs(5))
                    .await
            })
            .await
            .map_err(|e| ClusterError::Raft(e.to_string()))?;
        match answer {
            Ok(PeerResponse::DescribeQuorum(Some(v))) => Ok(v),
            Ok(_) => Err(ClusterError::NoQuorum("the metadata leader moved".into())),
            Err(e) => Err(ClusterError::NoQuorum(e.to_string())),
        }
    }

    /// AddRaftVoter / RemoveRaftVoter: made by the Raft leader (here, or asked over the peer
    /// port), retried while the leadership moves, for at most `timeout`.
    pub async fn change_voters(
        &self,
        change: VoterChange,
        timeout: Duration,
    ) -> Result<(), VoterChangeError> {
        let raft = self.raft.clone();
        let work = async move {
            let deadline = Instant::now() + timeout;
            loop {
                let outcome = match voter_change::apply(&raft, change.clone()).await {
                    Err(VoterChangeError::NotLeader) => match other_leader(&raft) {
                        Some(addr) => {
                            let req = PeerRequest::ChangeVoters(change.clone());
                            match PeerClient::new(addr).call(&req, timeout).await {
                                Ok(PeerResponse::ChangeVoters(r)) => r,
                                _ => Err(VoterChangeError::NotLeader),
                            }
                        }
                        None => Err(VoterChangeError::NotLeader),
                    },
                    other => other,
                };
                match outcome {
                    Err(VoterChangeError::NotLeader) if Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(VoterChangeError::NotLeader) => {
                        return Err(VoterChangeError::Failed(
                            "no metadata quorum leader answered in time".into(),
                        ))
                    }
                    other => return other,
                }
            }
        };
        self.runtime
            .spawn(work)
            .await
            .map_err(|e| VoterChangeError::Failed(e.to_string()))?
    }

    /// Stops the Raft node and its thread (clean shutdown; before the shards stop).
    pub fn stop(&self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.lock().expect("cluster thread").take() {
            let _ = t.join();
        }
    }
}

/// The Raft address of the metadata leader when another node leads (this node asks it over
/// the peer port); `None` when none is known or this node leads.
fn other_leader(raft: &Raft) -> Option<SocketAddr> {
    let m = raft.metrics().borrow().clone();
    let leader = m.current_leader.filter(|l| *l != m.id)?;
    let node = m.membership_config.membership().get_node(&leader)?.clone();
    node.addr.parse().ok()
}

pub(super) async fn write_through_leader(
    raft: Raft,
    cmd: Command,
) -> Result<(u64, Outcome), ClusterError> {
    let deadline = Instant::now() + PROPOSE_TIMEOUT;
    let mut last = String::from("no leader elected");
    loop {
        // Bounded by the deadline: a node that restarts holding a committed vote of its own
        // becomes leader of that old term for a moment; a write it takes then is truncated
        // by the real leader, and openraft never answers it (a restarted node's registration
        // hung for good: test_cluster.py's rolling restart, then the replaced node). The
        // caller gets NoQuorum as for any write that did not commit in time, and may ask
        // again (`register` does), which reaches the leader.
        let attempt = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(100));
        let written = match tokio::time::timeout(attempt, raft.client_write(cmd.clone())).await {
            Ok(r) => r,
            Err(_) => {
                last = format!("no answer to the write within {attempt:?}");
                if Instant::now() >= deadline {
                    return Err(ClusterError::NoQuorum(last));
                }
                continue;
            }
        };
        match written {
            Ok(r) => return Ok((r.log_id.index, r.data)),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                if let Some(addr) = f.leader_node.and_then(|n| n.addr.parse().ok()) {
                    let mut peer = PeerClient::new(addr);
                    let req = PeerRequest::Forward(cmd.clone());
                    match peer.call(&req, Duration::from_secs(5)).await {
                        Ok(PeerResponse::Forward(Ok(done))) => return Ok(done),
                        Ok(PeerResponse::Forward(Err(e))) => last = e,
                        Ok(_) => last = "mismatched peer response".into(),
                        Err(e) => last = e.to_string(),
                    }
                }
            }
            Err(e) => last = e.to_string(),
        }
        if Instant::now() >= deadline {
            return Err(ClusterError::NoQuorum(last));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A leader proposes a grown or shrunk ISR (Kafka's AlterPartition). Like Kafka's
/// `AlterPartitionManager`, a proposal without an answer (no quorum, a timeout) is sent again
/// until the image decides it or this node no longer has it in flight: the image may take it
/// later, and until the role shows the outcome the high watermark keeps counting the member
/// it adds. Resending is safe because the image takes it only from the ISR it was made on.
pub fn propose_isr(cluster: &Arc<ClusterHandle>, p: &Rc<Partition>, change: IsrChange) {
    let cluster = cluster.clone();
    let p = p.clone();
    tokio::task::spawn_local(async move {
        let IsrChange {
            leader_epoch,
            isr,
            from,
        } = change;
        let cmd = Command::AlterIsr {
            topic: p.topic.to_string(),
            partition: p.index,
            leader: cluster.node_id,
            leader_epoch,
            isr: isr.clone(),
            from: Some(from),
        };
        loop {
            match cluster.propose(cmd.clone()).await {
                Ok(Outcome::Done) => {
                    tracing::info!(topic = %p.topic, partition = p.index, ?isr, "ISR changed");
                    return p.isr_change_made();
                }
                // Decided: the image's ISR or leadership moved on from what this was made on
                // (maybe by this very proposal, sent before). The next role shows which.
                Ok(Outcome::Stale) => return p.isr_change_made(),
                Ok(other) => {
                    tracing::debug!(topic = %p.topic, partition = p.index, ?other, "ISR change refused");
                    return p.isr_change_failed();
                }
                Err(e) if p.isr_change_in_flight(&isr) => {
                    tracing::debug!(topic = %p.topic, partition = p.index, error = %e, "ISR change unanswered; sending it again");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(_) => return,
            }
        }
    });
}
