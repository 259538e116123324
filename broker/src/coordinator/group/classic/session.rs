//! How classic members stay and go: a heartbeat keeps the session, LeaveGroup and expired
//! sessions remove the member (the others rebalance), and `tick` drives every timer.

use super::{Group, GroupConfig, GroupState, Member};
use crate::coordinator::group::GroupError;

impl Group {
    pub(super) fn remove_member_only(&mut self, id: &str) -> Option<Member> {
        let mut m = self.members.remove(id)?;
        self.order.retain(|x| x != id);
        if let Some(iid) = &m.instance_id {
            if self.static_members.get(iid).map(String::as_str) == Some(id) {
                self.static_members.remove(iid);
            }
        }
        if let Some(w) = m.join_waiter.take() {
            let _ = w.send(Err(GroupError::UnknownMemberId));
        }
        if let Some(w) = m.sync_waiter.take() {
            let _ = w.send(Err(GroupError::UnknownMemberId));
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = self.order.first().cloned();
        }
        Some(m)
    }

    /// A member left or expired: the others rebalance.
    fn remove_member_and_update(&mut self, id: &str, now: i64, cfg: &GroupConfig) {
        if self.remove_member_only(id).is_none() {
            return;
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(now, cfg)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Result<(), GroupError> {
        self.validate_member(member_id, instance_id)?;
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.members
                    .get_mut(member_id)
                    .expect("validated")
                    .touch(now);
                Ok(())
            }
            GroupState::PreparingRebalance => {
                self.members
                    .get_mut(member_id)
                    .expect("validated")
                    .touch(now);
                Err(GroupError::RebalanceInProgress)
            }
        }
    }

    /// LeaveGroup for one member (v3+ batches call this per member).
    pub fn leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        now: i64,
        cfg: &GroupConfig,
    ) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let id = match instance_id {
            Some(iid) => {
                let known = self
                    .static_members
                    .get(iid)
                    .cloned()
                    .ok_or(GroupError::UnknownMemberId)?;
                if !member_id.is_empty() && known != member_id {
                    return Err(GroupError::FencedInstanceId);
                }
                known
            }
            None => {
                if self.pending.remove(member_id).is_some() {
                    self.maybe_complete_join(now);
                    return Ok(());
                }
                if !self.members.contains_key(member_id) {
                    return Err(GroupError::UnknownMemberId);
                }
                member_id.to_string()
            }
        };
        self.remove_member_and_update(&id, now, cfg);
        Ok(())
    }

    /// Drives timers: expired sessions leave, a join phase past its deadline completes, a
    /// leader that never synced restarts the rebalance.
    pub fn tick(&mut self, now: i64, cfg: &GroupConfig) {
        self.pending.retain(|_, deadline| *deadline > now);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.alive(now))
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            tracing::debug!(group = %self.id, member = %id, "session expired");
            self.remove_member_and_update(&id, now, cfg);
        }
        match (self.state, self.deadline) {
            (GroupState::PreparingRebalance, Some(d)) if now >= d => self.complete_join(now),
            (GroupState::PreparingRebalance, _) => self.maybe_complete_join(now),
            (GroupState::CompletingRebalance, Some(d)) if now >= d => {
                let unsynced: Vec<String> = self
                    .members
                    .values()
                    .filter(|m| m.sync_waiter.is_none())
                    .map(|m| m.member_id.clone())
                    .collect();
                for id in unsynced {
                    self.remove_member_only(&id);
                }
                if self.members.is_empty() {
                    // Kafka goes through PreparingRebalance to Empty with a new generation.
                    self.transition(GroupState::PreparingRebalance, now);
                    self.complete_join(now);
                } else {
                    self.prepare_rebalance(now, cfg);
                }
            }
            _ => {}
        }
    }
}
