//! How a streams group member moves to its target tasks (Kafka's streams
//! `CurrentAssignmentBuilder`): tasks it must give up are revoked first — its epoch stays
//! until a heartbeat shows it no longer owns them — and only then does it move to the target
//! epoch and receive the tasks no other member still holds (the rest follow as they are
//! released). Also the epoch checks of the members' offset commits and fetches.

use super::{MemberState, StreamsGroup, TaskSet, Tasks};
use crate::coordinator::group::consumer::reconcile::{intersect, minus};
use crate::coordinator::group::GroupError;

fn union(a: &TaskSet, b: &TaskSet) -> TaskSet {
    let mut out = a.clone();
    for (s, ps) in b {
        out.entry(s.clone()).or_default().extend(ps.iter().copied());
    }
    out
}

fn contains(set: &TaskSet, s: &str, p: i32) -> bool {
    set.get(s).is_some_and(|ps| ps.contains(&p))
}

/// Every task of `owned` is among `assigned` (type by type).
pub(super) fn within(owned: &Tasks, assigned: &Tasks) -> bool {
    minus(&owned.active, &assigned.active).is_empty()
        && minus(&owned.standby, &assigned.standby).is_empty()
        && minus(&owned.warmup, &assigned.warmup).is_empty()
}

impl StreamsGroup {
    pub(super) fn reconcile(
        &mut self,
        id: &str,
        owned: Option<&Tasks>,
        now: i64,
    ) -> Result<(), GroupError> {
        let target_epoch = self.assignment_epoch;
        let target = self.target.get(id).cloned().unwrap_or_default();
        let (process, state, epoch, pending) = {
            let m = &self.members[id];
            (
                m.process_id.clone(),
                m.state,
                m.epoch,
                m.pending_revocation.clone(),
            )
        };
        if state == MemberState::Stable && epoch == target_epoch {
            return Ok(());
        }
        if state == MemberState::UnrevokedTasks {
            let released = owned.is_some_and(|o| {
                intersect(&o.active, &pending.active).is_empty()
                    && intersect(&o.standby, &pending.standby).is_empty()
                    && intersect(&o.warmup, &pending.warmup).is_empty()
            });
            if !released {
                return Ok(());
            }
        }
        // An active task is unreleased while another member holds it as active (assigned or
        // still to revoke), or another member of this process holds it in another role; a
        // standby or warm-up while another member of this process holds it as active.
        let mut held_active = TaskSet::new();
        let mut held_here = TaskSet::new();
        let mut held_here_active = TaskSet::new();
        for (mid, m) in &self.members {
            if mid == id {
                continue;
            }
            let active = union(&m.assigned.active, &m.pending_revocation.active);
            held_active = union(&held_active, &active);
            if m.process_id == process {
                held_here = union(&held_here, &union(&m.assigned.standby, &m.assigned.warmup));
                held_here_active = union(&held_here_active, &active);
            }
        }
        let m = self.members.get_mut(id).expect("member");
        let current = m.assigned.clone();
        let revoke = Tasks {
            active: minus(&current.active, &target.active),
            standby: minus(&current.standby, &target.standby),
            warmup: minus(&current.warmup, &target.warmup),
        };
        let keep = Tasks {
            active: intersect(&current.active, &target.active),
            standby: intersect(&current.standby, &target.standby),
            warmup: intersect(&current.warmup, &target.warmup),
        };
        if !revoke.is_empty() {
            m.assigned = keep;
            m.pending_revocation = revoke;
            m.state = MemberState::UnrevokedTasks;
            m.revocation_deadline = Some(now + i64::from(m.rebalance_timeout_ms));
            return Ok(());
        }
        let unreleased_active = union(&held_active, &held_here);
        let add_active = minus(&minus(&target.active, &current.active), &unreleased_active);
        let add_standby = minus(&minus(&target.standby, &current.standby), &held_here_active);
        let add_warmup = minus(&minus(&target.warmup, &current.warmup), &held_here_active);
        let held_back = union(&add_active, &add_standby)
            != union(
                &minus(&target.active, &current.active),
                &minus(&target.standby, &current.standby),
            )
            || add_warmup != minus(&target.warmup, &current.warmup);
        for (s, ps) in &add_active {
            for p in ps {
                m.task_epochs.insert((s.clone(), *p), target_epoch);
            }
        }
        m.assigned = Tasks {
            active: union(&keep.active, &add_active),
            standby: union(&keep.standby, &add_standby),
            warmup: union(&keep.warmup, &add_warmup),
        };
        m.task_epochs
            .retain(|(s, p), _| contains(&m.assigned.active, s, *p));
        m.pending_revocation = Tasks::default();
        m.revocation_deadline = None;
        m.state = if held_back {
            MemberState::UnreleasedTasks
        } else {
            MemberState::Stable
        };
        if m.epoch != target_epoch {
            m.previous_epoch = m.epoch;
            m.epoch = target_epoch;
        }
        Ok(())
    }

    /// OffsetCommit and TxnOffsetCommit from a member (Kafka's `StreamsGroup.validateOffsetCommit`):
    /// `partitions` are the (topic, partition) pairs committed.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        epoch: i32,
        transactional: bool,
        version: i16,
        partitions: &[(String, i32)],
    ) -> Result<(), GroupError> {
        if epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        if transactional && member_id.is_empty() && epoch < 0 {
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if !transactional && version < 9 {
            return Err(GroupError::UnsupportedVersion(
                "OffsetCommit version 9 or above must be used by members using the streams group protocol".into(),
            ));
        }
        if epoch == m.epoch {
            return Ok(());
        }
        if epoch > m.epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        // An older epoch: each task must still be the member's, granted at or before it.
        let topology = self.topology.as_ref().ok_or(GroupError::StaleMemberEpoch)?;
        for (topic, p) in partitions {
            let s = topology
                .reader_of(topic)
                .ok_or(GroupError::StaleMemberEpoch)?;
            let owned = contains(&m.assigned.active, &s.id, *p)
                || contains(&m.pending_revocation.active, &s.id, *p);
            let granted = m.task_epochs.get(&(s.id.clone(), *p)).copied().unwrap_or(0);
            if !owned || granted > epoch {
                return Err(GroupError::StaleMemberEpoch);
            }
        }
        Ok(())
    }

    /// OffsetFetch from a member: its epoch must be exactly the member's.
    pub fn validate_offset_fetch(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if m.epoch != epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }
}
