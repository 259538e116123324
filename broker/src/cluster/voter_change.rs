//! The membership changes the Raft leader makes: an observer admitted (`admit`, asked by
//! `observer.rs`), and KIP-853's AddRaftVoter / RemoveRaftVoter (`kafka-metadata-quorum
//! add-controller` / `remove-controller`). A voter is added from the observers only
//! (a broker-only node already running and caught up, `observer.rs`), as Kafka adds a
//! controller that already fetches the log; a removed voter stays an observer, still a
//! broker. openraft changes the membership through a joint configuration, one change at a
//! time. `controller.quorum.voters` then only seeds a new cluster: the voters are what the
//! metadata log says, across restarts.

use std::collections::{BTreeMap, BTreeSet};

use openraft::{BasicNode, ChangeMembers};
use serde::{Deserialize, Serialize};

use super::types::{NodeId, Raft};

/// What a voter that does not lead answers a join: the joiner asks the next voter.
pub const NOT_LEADER: &str = "not the metadata quorum's leader";

/// An observer this many entries or fewer behind the leader counts as caught up: the log
/// moves by a few entries a second (heartbeats are not entries), so more means it is not
/// fetching.
const CAUGHT_UP_SLACK: u64 = 16;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum VoterChange {
    /// `addrs`: the `HOST:PORT`s the request names for it (its controller listeners); when
    /// any, one must be its Raft address.
    Add {
        id: NodeId,
        addrs: Vec<String>,
    },
    Remove {
        id: NodeId,
    },
}

/// Why a change was not made, each with Kafka's error code (`code`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum VoterChangeError {
    #[error("this node does not lead the metadata quorum")]
    NotLeader,
    #[error("{0}")]
    Duplicate(String),
    #[error("{0}")]
    NotFound(String),
    /// Not now: another change in progress, an observer not caught up or not there.
    #[error("{0}")]
    NotNow(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Failed(String),
}

impl VoterChangeError {
    /// Kafka's error code for it (AddVoterHandler / RemoveVoterHandler).
    pub fn code(&self) -> i16 {
        use kafka_protocol::error::ResponseError as E;
        match self {
            Self::NotLeader | Self::NotNow(_) | Self::Failed(_) => E::RequestTimedOut.code(),
            Self::Duplicate(_) => E::DuplicateVoter.code(),
            Self::NotFound(_) => E::VoterNotFound.code(),
            Self::Invalid(_) => E::InvalidRequest.code(),
        }
    }
}

/// On the Raft leader: checks `change` against the current membership and commits it.
pub async fn apply(raft: &Raft, change: VoterChange) -> Result<(), VoterChangeError> {
    let m = raft.metrics().borrow().clone();
    if m.current_leader != Some(m.id) {
        return Err(VoterChangeError::NotLeader);
    }
    let membership = m.membership_config.membership();
    if membership.get_joint_config().len() > 1 {
        return Err(VoterChangeError::NotNow(
            "a change of the voters is still in progress".into(),
        ));
    }
    let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
    let (changes, retain, what) = match change {
        VoterChange::Add { id, addrs } => {
            if voters.contains(&id) {
                return Err(VoterChangeError::Duplicate(format!(
                    "node {id} is already a voter of the metadata quorum {voters:?}"
                )));
            }
            let Some(node) = membership.get_node(&id) else {
                return Err(VoterChangeError::NotNow(format!(
                    "node {id} is not an observer of the metadata quorum: start it first as a \
                     broker-only node (not in controller.quorum.voters, with strom.raft.listen)"
                )));
            };
            if !addrs.is_empty() && !addrs.iter().any(|a| same_address(a, &node.addr)) {
                return Err(VoterChangeError::Invalid(format!(
                    "the listeners {addrs:?} name none of node {id}'s Raft address {}",
                    node.addr
                )));
            }
            let leader_end = m.last_log_index.unwrap_or(0);
            let matched = m
                .replication
                .as_ref()
                .and_then(|r| r.get(&id).cloned().flatten())
                .map_or(0, |l| l.index);
            if matched + CAUGHT_UP_SLACK < leader_end {
                return Err(VoterChangeError::NotNow(format!(
                    "node {id} is lagging behind: it has the metadata log up to {matched}, the \
                     leader up to {leader_end}"
                )));
            }
            (
                ChangeMembers::AddVoterIds(BTreeSet::from([id])),
                true,
                "added",
            )
        }
        VoterChange::Remove { id } => {
            if !voters.contains(&id) {
                return Err(VoterChangeError::NotFound(format!(
                    "node {id} is not a voter of the metadata quorum {voters:?}"
                )));
            }
            if voters.len() == 1 {
                return Err(VoterChangeError::Invalid(
                    "the last voter of the metadata quorum cannot be removed".into(),
                ));
            }
            // retain: it stays in the membership as an observer, a broker like any other. Not
            // the leader itself: openraft lets a leader that is still a learner go on leading,
            // so it leaves the membership, steps down, and asks back in as an observer
            // (`observer::stay_in_membership`).
            let retain = id != m.id;
            (
                ChangeMembers::RemoveVoters(BTreeSet::from([id])),
                retain,
                "removed",
            )
        }
    };
    raft.change_membership(changes, retain)
        .await
        .map_err(|e| VoterChangeError::Failed(e.to_string()))?;
    let now: BTreeSet<NodeId> = raft
        .metrics()
        .borrow()
        .membership_config
        .membership()
        .voter_ids()
        .collect();
    tracing::info!(voters = ?now, "metadata quorum voter {what}");
    Ok(())
}

/// On the Raft leader: adds `id` at `addr` as a learner (or moves a learner to a new
/// address); a voter cannot be re-added as an observer.
pub async fn admit(raft: &Raft, id: NodeId, addr: String) -> Result<(), String> {
    let m = raft.metrics().borrow().clone();
    // Not itself: a leader that just removed itself (`apply`) keeps leading until openraft's
    // next tick steps it down, and re-admitted as a learner before that tick it would lead
    // on (openraft counts a learner that holds the vote as leading). Its own
    // `stay_in_membership` asks it first; the next leader admits it instead.
    if m.current_leader != Some(m.id) || id == m.id {
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

/// `a` and `b` are `HOST:PORT`; hosts compare as the addresses they resolve to.
fn same_address(a: &str, b: &str) -> bool {
    use std::net::ToSocketAddrs;
    if a == b {
        return true;
    }
    let resolve = |s: &str| -> BTreeSet<std::net::SocketAddr> {
        s.to_socket_addrs().map(|i| i.collect()).unwrap_or_default()
    };
    let (a, b) = (resolve(a), resolve(b));
    !a.is_disjoint(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_listener_hosts_when_comparing_to_a_raft_address_then_resolved() {
        assert!(same_address("127.0.0.1:9195", "127.0.0.1:9195"));
        assert!(same_address("localhost:9195", "127.0.0.1:9195"));
        assert!(!same_address("127.0.0.1:9196", "127.0.0.1:9195"));
        assert!(!same_address("nohost:1", "127.0.0.1:9195"));
    }

    #[test]
    fn given_each_refusal_when_answering_then_kafkas_error_code() {
        assert_eq!(VoterChangeError::Duplicate(String::new()).code(), 126);
        assert_eq!(VoterChangeError::NotFound(String::new()).code(), 127);
        assert_eq!(VoterChangeError::NotNow(String::new()).code(), 7);
        assert_eq!(VoterChangeError::Invalid(String::new()).code(), 42);
    }
}
