//! Broker-only nodes (Kafka's `process.roles=broker`): a node whose `node.id` is not in
//! `controller.quorum.voters` joins the cluster as an openraft learner. It receives and
//! applies the metadata log like a voter, registers, heartbeats and hosts replicas, but
//! never votes and never leads the quorum, so a cluster grows its brokers without growing
//! the quorum that every metadata write waits for. openraft pushes the log to its learners,
//! so such a node listens on `strom.raft.listen` for the leader's appends and asks the
//! voters to add it (`stay_in_membership`); only the Raft leader admits it
//! (`voter_change::admit`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::network::{PeerClient, PeerRequest, PeerResponse};
use super::types::{NodeId, Raft};
use super::voter_change::NOT_LEADER;

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
