//! How a KIP-848 member gets its share: the target assignment, recomputed when the group epoch
//! moves, and each member's reconciliation towards it (revoke first, then grant what no other
//! member still owns), with the epoch checks of heartbeats and offset commits.

use std::collections::{BTreeMap, BTreeSet};

use super::{ConsumerGroup, HeartbeatParams};
use crate::coordinator::group::assignor::{Assignment, MemberSpec};
use crate::coordinator::group::GroupError;

/// What `a` has that `b` has not, topic by topic (also the streams groups' task sets).
pub(in crate::coordinator::group) fn minus(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (t, ps) in a {
        let keep: BTreeSet<i32> = match b.get(t) {
            Some(other) => ps.difference(other).copied().collect(),
            None => ps.clone(),
        };
        if !keep.is_empty() {
            out.insert(t.clone(), keep);
        }
    }
    out
}

pub(in crate::coordinator::group) fn intersect(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (t, ps) in a {
        if let Some(other) = b.get(t) {
            let keep: BTreeSet<i32> = ps.intersection(other).copied().collect();
            if !keep.is_empty() {
                out.insert(t.clone(), keep);
            }
        }
    }
    out
}

fn overlaps(a: &Assignment, b: &Assignment) -> bool {
    !intersect(a, b).is_empty()
}

fn is_subset(a: &Assignment, b: &Assignment) -> bool {
    minus(a, b).is_empty()
}

impl ConsumerGroup {
    /// Kafka's rule: a newer epoch than the member's is fenced; an older one is accepted only
    /// when it is the previous epoch and the member owns nothing it should not (a lost answer).
    pub(super) fn check_epoch(&self, p: &HeartbeatParams) -> Result<(), GroupError> {
        let m = self
            .members
            .get(&p.member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if p.member_epoch == m.epoch {
            return Ok(());
        }
        if p.member_epoch < m.epoch
            && p.member_epoch == m.previous_epoch
            && p.owned.as_ref().is_some_and(|o| is_subset(o, &m.assigned))
        {
            return Ok(());
        }
        Err(GroupError::FencedMemberEpoch)
    }

    pub(super) fn maybe_compute_target(&mut self, topics: &BTreeMap<String, i32>) {
        let mut moved = false;
        let regexes = &self.regexes;
        for m in self.members.values_mut() {
            let mut effective = m.subscribed.clone();
            // The regex's resolution, never a match of its own: that is what the principal
            // of the heartbeat that resolved it may see (`regex`).
            if let Some(resolved) = m.regex.as_ref().and_then(|re| regexes.get(re)) {
                effective.extend(
                    resolved
                        .topics
                        .iter()
                        .filter(|t| topics.contains_key(*t))
                        .cloned(),
                );
            }
            if effective != m.effective {
                m.effective = effective;
                moved = true;
            }
        }
        // Right after a load (no snapshot yet) this only rebuilds what was not persisted.
        if moved && self.topic_snapshot.is_some() {
            self.bump();
        }
        let subscribed: BTreeSet<&String> =
            self.members.values().flat_map(|m| &m.effective).collect();
        let snapshot: BTreeMap<String, i32> = topics
            .iter()
            .filter(|(t, _)| subscribed.contains(t))
            .map(|(t, c)| (t.clone(), *c))
            .collect();
        match &self.topic_snapshot {
            Some(old) if *old == snapshot => {}
            Some(_) => {
                self.topic_snapshot = Some(snapshot);
                self.bump();
            }
            None => self.topic_snapshot = Some(snapshot),
        }
        if std::mem::take(&mut self.epoch_change) {
            self.group_epoch += 1;
        }
        if self.assignment_epoch >= self.group_epoch {
            return;
        }
        let empty = Assignment::new();
        let specs: Vec<MemberSpec<'_>> = self
            .members
            .values()
            .map(|m| MemberSpec {
                member_id: &m.member_id,
                topics: &m.effective,
                current: self.target.get(&m.member_id).unwrap_or(&empty),
            })
            .collect();
        let partitions = self.topic_snapshot.clone().unwrap_or_default();
        let target = self.assignor.assign(&specs, &partitions);
        self.target = target;
        self.assignment_epoch = self.group_epoch;
    }

    pub(super) fn reconcile(&mut self, id: &str, owned: Option<&Assignment>, now: i64) {
        let assignment_epoch = self.assignment_epoch;
        let target = self.target.get(id).cloned().unwrap_or_default();
        let others: Assignment = {
            let mut all = Assignment::new();
            for (mid, m) in &self.members {
                if mid == id {
                    continue;
                }
                for src in [&m.assigned, &m.pending_revocation] {
                    for (t, ps) in src {
                        all.entry(t.clone()).or_default().extend(ps.iter().copied());
                    }
                }
            }
            all
        };
        let m = self.members.get_mut(id).expect("member");
        if !m.pending_revocation.is_empty() {
            match owned {
                Some(o) if !overlaps(o, &m.pending_revocation) => {
                    m.pending_revocation.clear();
                    m.revocation_deadline = None;
                }
                _ => return,
            }
        }
        let to_revoke = minus(&m.assigned, &target);
        if !to_revoke.is_empty() {
            m.assigned = intersect(&m.assigned, &target);
            m.pending_revocation = to_revoke;
            m.revocation_deadline = Some(now + m.rebalance_timeout_ms as i64);
            m.send_assignment = true;
            return;
        }
        let granted = minus(&target, &others);
        if granted != m.assigned {
            m.assigned = granted;
            m.send_assignment = true;
        }
        if m.epoch != assignment_epoch {
            m.previous_epoch = m.epoch;
            m.epoch = assignment_epoch;
        }
    }

    /// OffsetCommit / OffsetFetch from a member of this group.
    pub fn validate_member_epoch(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        if member_id.is_empty() && epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        match epoch.cmp(&m.epoch) {
            std::cmp::Ordering::Equal => Ok(()),
            std::cmp::Ordering::Greater => Err(GroupError::FencedMemberEpoch),
            std::cmp::Ordering::Less => Err(GroupError::StaleMemberEpoch),
        }
    }
}
