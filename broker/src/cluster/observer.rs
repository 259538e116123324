//! Broker-only nodes (Kafka's `process.roles=broker`): a node whose `node.id` is not in
//! `controller.quorum.voters` joins the cluster as an openraft learner. It receives and
//! applies the metadata log like a voter, registers, heartbeats and hosts replicas, but
//! never votes and never leads the quorum, so a cluster grows its brokers without growing
//! the quorum that every metadata write waits for. openraft pushes the log to its learners,
//! so such a node listens on `strom.raft.listen` for the leader's appends and asks the
//! voters to add it (`stay_in_membership`); only the Raft leader admits it (`admit`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use openraft::{BasicNode, ChangeMembers};

use super::network::{PeerClient, PeerRequest, PeerResponse};
use super::types::{NodeId, Raft};

/// What a voter that does not lead answers a join: the joiner asks the next voter.
const NOT_LEADER: &str = "not the metadata quorum's leader";

/// For as long as the node runs: whenever the membership this node has applied lacks it at
/// `own` (a broker-only node's first start, or a leader that removed itself from the voters,
/// `voter_change.rs`), asks each voter in turn to admit it as an observer. The voters asked
/// are the configured ones and those its membership names.
pub async fn stay_in_membership(
    raft: Raft,
    me: NodeId,
    own: SocketAddr,
    seeds: BTreeMap<u64, SocketAddr>,
) {
    let own = own.to_string();
    let mut attempts = 0u32;
    loop {
        let (known, mut voters) = {
            let m = raft.metrics().borrow().clone();
            let membership = m.membership_config.membership();
            let voters: Vec<SocketAddr> = membership
                .voter_ids()
                .filter_map(|id| membership.get_node(&id)?.addr.parse().ok())
                .collect();
            (membership.get_node(&me).map(|n| n.addr.clone()), voters)
        };
        if known.as_deref() == Some(own.as_str()) {
            attempts = 0;
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        voters.extend(
            seeds
                .values()
                .filter(|a| !voters.contains(a))
                .collect::<Vec<_>>(),
        );
        for addr in voters {
            let req = PeerRequest::Join {
                id: me,
                addr: own.clone(),
            };
            match PeerClient::new(addr)
                .call(&req, Duration::from_secs(5))
                .await
            {
                Ok(PeerResponse::Join(Ok(()))) => {
                    tracing::info!(raft = %own, "in the metadata quorum as an observer");
                    break;
                }
                // Refused for good (e.g. its id is a voter at another address): say so now and
                // then, keep asking; the operator fixes the config.
                Ok(PeerResponse::Join(Err(e)))
                    if e != NOT_LEADER && attempts.is_multiple_of(20) =>
                {
                    tracing::warn!(voter = %addr, error = %e, "the metadata quorum refuses this node");
                }
                _ => {}
            }
        }
        attempts += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// On the Raft leader: adds `id` at `addr` as a learner (or moves a learner to a new
/// address); a voter cannot be re-added as an observer.
pub async fn admit(raft: &Raft, id: NodeId, addr: String) -> Result<(), String> {
    let m = raft.metrics().borrow().clone();
    if m.current_leader != Some(m.id) {
        return Err(NOT_LEADER.into());
    }
    let membership = m.membership_config.membership();
    let current = membership.get_node(&id).map(|n| n.addr.clone());
    if current.as_deref() == Some(addr.as_str()) {
        return Ok(());
    }
    if membership.voter_ids().any(|v| v == id) {
        return Err(format!(
            "node {id} is a voter of the metadata quorum at {}; a voter is not re-added as an observer",
            current.unwrap_or_default()
        ));
    }
    let nodes = BTreeMap::from([(id, BasicNode::new(addr.clone()))]);
    let change = if current.is_some() {
        // Its address changed across a restart: safe for a learner, which never votes.
        ChangeMembers::SetNodes(nodes)
    } else {
        ChangeMembers::AddNodes(nodes)
    };
    raft.change_membership(change, false)
        .await
        .map(|_| tracing::info!(node = id, raft = %addr, "observer (broker-only node) admitted to the metadata quorum"))
        .map_err(|e| e.to_string())
}
