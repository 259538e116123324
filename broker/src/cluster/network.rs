//! The peer transport of the metadata quorum: its own TCP port (the node's entry in
//! `controller.quorum.voters`), frames of `LengthDelimitedCodec` carrying serde_json of
//! openraft's request and response types, one request in flight per connection. A peer that
//! cannot be reached is `Unreachable` to openraft, which backs off and retries; the connection
//! is opened again on the next call.

use std::net::SocketAddr;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::image::{Command, Outcome};
use super::types::{NodeId, Raft, TypeConfig};

/// Largest frame either side accepts: a snapshot chunk or a batch of entries is far smaller.
const MAX_FRAME: usize = 16 * 1024 * 1024;

#[derive(Serialize, Deserialize)]
pub enum PeerRequest {
    Append(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    Snapshot(InstallSnapshotRequest<TypeConfig>),
    /// A write proposed on a follower, for the leader to append.
    Forward(Command),
    /// A broker's heartbeat to the Raft leader (`controller`).
    Heartbeat(i32),
    /// DescribeQuorum, asked of the Raft leader (`quorum.rs`).
    DescribeQuorum,
    /// A broker-only node asks to receive the metadata log (`observer.rs`).
    Join {
        id: NodeId,
        addr: String,
    },
    /// AddRaftVoter / RemoveRaftVoter, for the Raft leader (`voter_change.rs`).
    ChangeVoters(super::voter_change::VoterChange),
}

#[derive(Serialize, Deserialize)]
pub enum PeerResponse {
    Append(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    Snapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
    /// The entry's log index and outcome, or why the receiver could not append it.
    Forward(Result<(u64, Outcome), String>),
    /// When the receiver leads the metadata quorum with a fresh quorum ack: the index its
    /// state machine has applied (the sender counts as caught up once it has that too).
    Heartbeat(Option<u64>),
    /// The leader's view of the quorum; `None` when the receiver does not lead.
    DescribeQuorum(Option<super::quorum::QuorumView>),
    /// Admitted (or already in at that address), or why not.
    Join(Result<(), String>),
    ChangeVoters(Result<(), super::voter_change::VoterChangeError>),
}

fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

/// One peer's connection, opened on first use and after any error.
pub struct PeerClient {
    addr: SocketAddr,
    conn: Option<Framed<TcpStream, LengthDelimitedCodec>>,
}

impl PeerClient {
    pub fn new(addr: SocketAddr) -> PeerClient {
        PeerClient { addr, conn: None }
    }

    pub async fn call(
        &mut self,
        req: &PeerRequest,
        timeout: Duration,
    ) -> std::io::Result<PeerResponse> {
        let result = tokio::time::timeout(timeout, self.exchange(req)).await;
        let result = result.unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("peer {} did not answer in {timeout:?}", self.addr),
            ))
        });
        if result.is_err() {
            self.conn = None;
        }
        result
    }

    async fn exchange(&mut self, req: &PeerRequest) -> std::io::Result<PeerResponse> {
        if self.conn.is_none() {
            let stream = TcpStream::connect(self.addr).await?;
            stream.set_nodelay(true)?;
            self.conn = Some(Framed::new(stream, codec()));
        }
        let conn = self.conn.as_mut().expect("just connected");
        let bytes = serde_json::to_vec(req).map_err(std::io::Error::other)?;
        conn.send(bytes::Bytes::from(bytes)).await?;
        let frame = conn.next().await.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "peer closed")
        })??;
        serde_json::from_slice(&frame).map_err(std::io::Error::other)
    }
}

/// openraft's view of the peers: one `PeerClient` per target.
pub struct Network;

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, _target: NodeId, node: &BasicNode) -> PeerClient {
        // A voter's address was parsed from `controller.quorum.voters`; an address that no
        // longer parses makes every call fail as unreachable (logged by openraft).
        let addr = node
            .addr
            .parse()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        PeerClient::new(addr)
    }
}

type RpcErr<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

fn unreachable<E: std::error::Error>(e: std::io::Error) -> RPCError<NodeId, BasicNode, E> {
    RPCError::Unreachable(Unreachable::new(&e))
}

fn unexpected<E: std::error::Error>() -> RPCError<NodeId, BasicNode, E> {
    let e = std::io::Error::new(std::io::ErrorKind::InvalidData, "mismatched peer response");
    RPCError::Network(NetworkError::new(&e))
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr> {
        match self
            .call(&PeerRequest::Append(rpc), option.hard_ttl())
            .await
        {
            Ok(PeerResponse::Append(r)) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(0, e)))
            }
            Ok(_) => Err(unexpected()),
            Err(e) => Err(unreachable(e)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcErr<InstallSnapshotError>> {
        match self
            .call(&PeerRequest::Snapshot(rpc), option.hard_ttl())
            .await
        {
            Ok(PeerResponse::Snapshot(r)) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(0, e)))
            }
            Ok(_) => Err(unexpected()),
            Err(e) => Err(unreachable(e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcErr> {
        match self.call(&PeerRequest::Vote(rpc), option.hard_ttl()).await {
            Ok(PeerResponse::Vote(r)) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(0, e)))
            }
            Ok(_) => Err(unexpected()),
            Err(e) => Err(unreachable(e)),
        }
    }
}

/// Accepts peers on the Raft port until `shutdown`; each connection answers its requests in
/// order. Undecodable frames close the connection with a log line.
pub async fn serve(
    listener: tokio::net::TcpListener,
    raft: Raft,
    liveness: std::sync::Arc<super::liveness::Liveness>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "raft port accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let raft = raft.clone();
        let liveness = liveness.clone();
        tokio::spawn(async move {
            let mut conn = Framed::new(stream, codec());
            while let Some(frame) = conn.next().await {
                let Ok(frame) = frame else { break };
                let req: PeerRequest = match serde_json::from_slice(&frame) {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!(%peer, error = %e, "undecodable raft frame; closing");
                        break;
                    }
                };
                let resp = answer(&raft, &liveness, req).await;
                let Ok(bytes) = serde_json::to_vec(&resp) else {
                    break;
                };
                if conn.send(bytes::Bytes::from(bytes)).await.is_err() {
                    break;
                }
            }
        });
    }
}

async fn answer(
    raft: &Raft,
    liveness: &super::liveness::Liveness,
    req: PeerRequest,
) -> PeerResponse {
    match req {
        PeerRequest::Heartbeat(id) => {
            let me = raft.metrics().borrow().id;
            let leads = liveness.leads_with_quorum(raft, me);
            if leads {
                liveness.saw(id);
            }
            let applied = raft.metrics().borrow().last_applied.map_or(0, |l| l.index);
            PeerResponse::Heartbeat(leads.then_some(applied))
        }
        PeerRequest::DescribeQuorum => {
            PeerResponse::DescribeQuorum(super::quorum::leader_view(raft, liveness))
        }
        PeerRequest::Join { id, addr } => {
            PeerResponse::Join(super::voter_change::admit(raft, id, addr).await)
        }
        PeerRequest::ChangeVoters(change) => {
            PeerResponse::ChangeVoters(super::voter_change::apply(raft, change).await)
        }
        PeerRequest::Append(r) => PeerResponse::Append(raft.append_entries(r).await),
        PeerRequest::Vote(r) => PeerResponse::Vote(raft.vote(r).await),
        PeerRequest::Snapshot(r) => PeerResponse::Snapshot(raft.install_snapshot(r).await),
        PeerRequest::Forward(cmd) => PeerResponse::Forward(
            raft.client_write(cmd)
                .await
                .map(|r| (r.log_id.index, r.data))
                .map_err(|e| e.to_string()),
        ),
    }
}
