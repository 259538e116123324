//! The metadata Raft as `/metrics` shows it (Kafka's `kafka.server:type=raft-metrics`):
//! term, log, commit and applied indexes and the leader, read from openraft's `RaftMetrics`
//! watch and the store's saved commit index, plus a count of leaderships this node saw
//! established, kept by a task on the cluster thread (`count_leader_changes`) because the
//! watch only holds the current value.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use super::types::Raft;

/// Counters the cluster thread keeps for the metrics.
#[derive(Debug)]
pub struct RaftStats {
    /// Shared with the store, which sets it on every commit (-1: nothing committed).
    pub(super) commit_index: Arc<AtomicI64>,
    leader_changes: AtomicU64,
}

impl RaftStats {
    pub(super) fn new(commit_index: Arc<AtomicI64>) -> RaftStats {
        RaftStats {
            commit_index,
            leader_changes: AtomicU64::new(0),
        }
    }
}

/// One reading of the metadata Raft on this node; indexes are -1 when there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftView {
    pub node_id: i32,
    /// KRaft's leader epoch.
    pub term: u64,
    pub leader: Option<i32>,
    pub last_log_index: i64,
    pub commit_index: i64,
    pub applied_index: i64,
    pub leader_changes: u64,
    pub voters: usize,
}

pub(super) fn view(raft: &Raft, stats: &RaftStats) -> RaftView {
    let m = raft.metrics().borrow().clone();
    RaftView {
        node_id: m.id as i32,
        term: m.current_term,
        leader: m.current_leader.map(|l| l as i32),
        last_log_index: m.last_log_index.map_or(-1, |i| i as i64),
        commit_index: stats.commit_index.load(Ordering::Relaxed),
        applied_index: m.last_applied.map_or(-1, |l| l.index as i64),
        leader_changes: stats.leader_changes.load(Ordering::Relaxed),
        voters: m.membership_config.membership().voter_ids().count(),
    }
}

/// A leadership is "new" when a leader is known at a term it was not known at before: a
/// re-election of the same node at a later term is a change too (there was an election),
/// while a term that passes without a leader (a split vote) is none.
fn is_new_leadership(last: Option<u64>, term: u64, leader: Option<u64>) -> bool {
    leader.is_some() && last != Some(term)
}

/// Runs on the cluster thread until the Raft stops.
pub(super) async fn count_leader_changes(raft: Raft, stats: Arc<RaftStats>) {
    let mut rx = raft.metrics();
    let mut counted_term = None;
    loop {
        let (term, leader) = {
            let m = rx.borrow_and_update();
            (m.current_term, m.current_leader)
        };
        if is_new_leadership(counted_term, term, leader) {
            counted_term = Some(term);
            stats.leader_changes.fetch_add(1, Ordering::Relaxed);
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_terms_and_leaders_when_counting_then_only_leaders_at_new_terms_count() {
        let mut counted = None;
        let mut changes = 0;
        // (term, leader) as the watch shows them: start without a leader, a leader at term 1,
        // heartbeats at term 1, a split vote at term 2, node 1 re-elected at term 3, node 2
        // at term 4.
        for (term, leader) in [
            (0, None),
            (1, Some(1)),
            (1, Some(1)),
            (2, None),
            (3, Some(1)),
            (3, Some(1)),
            (4, Some(2)),
        ] {
            if is_new_leadership(counted, term, leader) {
                counted = Some(term);
                changes += 1;
            }
        }
        assert_eq!(changes, 3);
    }
}
