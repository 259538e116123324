//! The metadata quorum as DescribeQuorum (`kafka-metadata-quorum.sh`) reports it: its leader,
//! epoch (the Raft term), high watermark and each voter's progress. Only the Raft leader
//! knows the voters' progress, so a follower asks it over the peer port, as a Kafka broker
//! forwards DescribeQuorum to the active controller.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::liveness::Liveness;
use super::types::Raft;

/// One voter's progress as the leader sees it (Kafka's `ReplicaState`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoterState {
    pub id: i32,
    /// The Raft port it votes and replicates on (Kafka's controller listener).
    pub addr: String,
    /// The next metadata offset it lacks (the leader's own for the leader); -1 unknown.
    pub log_end_offset: i64,
    /// Milliseconds since the epoch of its last heartbeat to the leader; -1 unknown.
    pub last_fetch_ms: i64,
    /// Of the last time it had all the leader had; -1 unknown.
    pub last_caught_up_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumView {
    pub leader: i32,
    /// The Raft term: KRaft's leader epoch.
    pub epoch: i64,
    /// What the leader has applied (the committed metadata offset it serves).
    pub high_watermark: i64,
    pub voters: Vec<VoterState>,
    /// Broker-only nodes (openraft learners, `observer.rs`): Kafka's observers.
    #[serde(default)]
    pub observers: Vec<VoterState>,
}

fn epoch_ms(ago: Duration) -> i64 {
    SystemTime::now()
        .checked_sub(ago)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(-1, |d| d.as_millis() as i64)
}

/// The leader's view, or `None` when this node does not lead. Offsets are Raft log indexes
/// plus one (an offset past the last entry, as Kafka's log end offsets are). Fetch times are
/// the broker heartbeats the leader last had from each voter (openraft 0.9 keeps no
/// per-follower times); a voter counts as caught up at that time when it has the leader's
/// last entry.
pub fn leader_view(raft: &Raft, liveness: &Liveness) -> Option<QuorumView> {
    let m = raft.metrics().borrow().clone();
    let me = m.id;
    if m.current_leader != Some(me) {
        return None;
    }
    let leader_end = m.last_log_index.map_or(0, |i| i as i64 + 1);
    let replication = m.replication.clone().unwrap_or_default();
    let membership = m.membership_config.membership();
    let voter_ids: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
    if !voter_ids.contains(&me) {
        // A leader that removed itself (RemoveRaftVoter) leads until that change commits,
        // then steps down: no longer the quorum's leader for Kafka's tools, which look for
        // the leader among the voters.
        return None;
    }
    let state = |id: u64, addr: &str| {
        let log_end_offset = if id == me {
            leader_end
        } else {
            replication
                .get(&id)
                .map_or(-1, |l| l.map_or(0, |l| l.index as i64 + 1))
        };
        let seen = if id == me {
            Some(Duration::ZERO)
        } else {
            liveness.seen_ago(id as i32)
        };
        let last_fetch_ms = seen.map_or(-1, epoch_ms);
        let last_caught_up_ms = if log_end_offset == leader_end {
            last_fetch_ms
        } else {
            -1
        };
        VoterState {
            id: id as i32,
            addr: addr.to_string(),
            log_end_offset,
            last_fetch_ms,
            last_caught_up_ms,
        }
    };
    let (voters, observers) = membership
        .nodes()
        .map(|(id, node)| (voter_ids.contains(id), state(*id, &node.addr)))
        .partition::<Vec<_>, _>(|(voter, _)| *voter);
    let voters = voters.into_iter().map(|(_, s)| s).collect();
    let observers = observers.into_iter().map(|(_, s)| s).collect();
    Some(QuorumView {
        leader: me as i32,
        epoch: m.current_term as i64,
        high_watermark: m.last_applied.map_or(0, |l| l.index as i64 + 1),
        voters,
        observers,
    })
}
