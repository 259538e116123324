//! The classic rebalance: JoinGroup collects the members (with the initial delay of a new
//! group, KIP-394 member ids and KIP-345 static members), a vote picks the protocol, a new
//! generation starts, and SyncGroup hands out the leader's assignment.

use std::collections::HashMap;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::{
    Group, GroupConfig, GroupState, JoinParams, JoinReply, JoinResult, JoinedMember, Member, Reply,
    SyncResult,
};
use crate::coordinator::group::GroupError;

impl Group {
    /// Protocols every current member supports (the candidates for selection).
    fn candidate_protocols(&self) -> Vec<String> {
        let mut members = self.members_in_order();
        let Some(first) = members.next() else {
            return Vec::new();
        };
        let mut c: Vec<String> = first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for m in members {
            c.retain(|p| m.protocols.iter().any(|(n, _)| n == p));
        }
        c
    }

    fn supports(&self, p: &JoinParams) -> bool {
        if self.members.is_empty() {
            return !p.protocol_type.is_empty() && !p.protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(p.protocol_type.as_str())
            && self
                .candidate_protocols()
                .iter()
                .any(|c| p.protocols.iter().any(|(n, _)| n == c))
    }

    /// Kafka's vote: each member votes for its most preferred candidate; most votes wins
    /// (ties go to the earlier candidate).
    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: Vec<(String, usize)> = candidates.iter().map(|c| (c.clone(), 0)).collect();
        for m in self.members_in_order() {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(n)) {
                if let Some(v) = votes.iter_mut().find(|(c, _)| c == name) {
                    v.1 += 1;
                }
            }
        }
        let best = votes.iter().map(|(_, n)| *n).max()?;
        votes.into_iter().find(|(_, n)| *n == best).map(|(c, _)| c)
    }

    fn max_rebalance_timeout(&self) -> i64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms as i64)
            .max()
            .unwrap_or(0)
    }

    pub fn join(&mut self, p: JoinParams, now: i64, cfg: &GroupConfig) -> Reply<JoinResult> {
        if self.state == GroupState::Dead {
            return Reply::Now(Err(GroupError::CoordinatorNotAvailable));
        }
        if p.session_timeout_ms < cfg.min_session_timeout_ms
            || p.session_timeout_ms > cfg.max_session_timeout_ms
        {
            return Reply::Now(Err(GroupError::InvalidSessionTimeout(p.session_timeout_ms)));
        }
        if !self.supports(&p) {
            return Reply::Now(Err(GroupError::InconsistentGroupProtocol));
        }
        if p.member_id.is_empty() {
            self.join_new(p, now, cfg)
        } else {
            self.join_known(p, now, cfg)
        }
    }

    fn join_new(&mut self, p: JoinParams, now: i64, cfg: &GroupConfig) -> Reply<JoinResult> {
        let suffix = uuid::Uuid::new_v4();
        if let Some(iid) = p.instance_id.clone() {
            let new_id = format!("{iid}-{suffix}");
            if let Some(old_id) = self.static_members.get(&iid).cloned() {
                return self.replace_static_member(&old_id, new_id, p, now, cfg);
            }
            if self.members.len() >= cfg.max_size {
                return Reply::Now(Err(GroupError::GroupMaxSizeReached));
            }
            return self.add_member_and_rebalance(new_id, p, now, cfg);
        }
        if self.members.len() + self.pending.len() >= cfg.max_size {
            return Reply::Now(Err(GroupError::GroupMaxSizeReached));
        }
        let new_id = format!("{}-{suffix}", p.client_id);
        if p.require_known_member_id {
            self.pending
                .insert(new_id.clone(), now + p.session_timeout_ms as i64);
            return Reply::Now(Err(GroupError::MemberIdRequired(new_id)));
        }
        self.add_member_and_rebalance(new_id, p, now, cfg)
    }

    fn join_known(&mut self, p: JoinParams, now: i64, cfg: &GroupConfig) -> Reply<JoinResult> {
        let id = p.member_id.clone();
        if self.pending.remove(&id).is_some() {
            if self.members.len() >= cfg.max_size {
                return Reply::Now(Err(GroupError::GroupMaxSizeReached));
            }
            return self.add_member_and_rebalance(id, p, now, cfg);
        }
        if self.is_fenced(p.instance_id.as_deref(), &id) {
            return Reply::Now(Err(GroupError::FencedInstanceId));
        }
        if !self.members.contains_key(&id) {
            return Reply::Now(Err(GroupError::UnknownMemberId));
        }
        let protocols_changed = self.members[&id].protocols != p.protocols;
        match self.state {
            GroupState::Empty | GroupState::Dead => Reply::Now(Err(GroupError::UnknownMemberId)),
            GroupState::PreparingRebalance => {
                let rx = self.update_member_awaiting_join(&id, &p, now);
                self.maybe_complete_join(now);
                Reply::Later(rx)
            }
            GroupState::CompletingRebalance if !protocols_changed => {
                // A retried join of this generation: answer it again.
                self.members.get_mut(&id).expect("member").touch(now);
                Reply::Now(Ok(self.join_result_for(&id, false)))
            }
            GroupState::Stable if !protocols_changed && self.leader.as_deref() != Some(&id) => {
                self.members.get_mut(&id).expect("member").touch(now);
                Reply::Now(Ok(self.join_result_for(&id, false)))
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                let rx = self.update_member_awaiting_join(&id, &p, now);
                self.prepare_rebalance(now, cfg);
                Reply::Later(rx)
            }
        }
    }

    fn update_member_awaiting_join(
        &mut self,
        id: &str,
        p: &JoinParams,
        now: i64,
    ) -> oneshot::Receiver<JoinReply> {
        let (tx, rx) = oneshot::channel();
        let m = self.members.get_mut(id).expect("member");
        m.protocols = p.protocols.clone();
        m.session_timeout_ms = p.session_timeout_ms;
        m.rebalance_timeout_ms = p.rebalance_timeout_ms;
        m.touch(now);
        // A second join from the same member replaces the first (Kafka answers the old one
        // with UNKNOWN_MEMBER_ID... it simply completes it; clients only wait on the latest).
        if let Some(old) = m.join_waiter.replace(tx) {
            let _ = old.send(Err(GroupError::RebalanceInProgress));
        }
        rx
    }

    fn add_member_and_rebalance(
        &mut self,
        id: String,
        p: JoinParams,
        now: i64,
        cfg: &GroupConfig,
    ) -> Reply<JoinResult> {
        let (tx, rx) = oneshot::channel();
        let mut m = Member::from_join(id.clone(), &p, now);
        m.join_waiter = Some(tx);
        if self.members.is_empty() {
            self.protocol_type = Some(p.protocol_type.clone());
        }
        if let Some(iid) = &p.instance_id {
            self.static_members.insert(iid.clone(), id.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(id.clone());
        }
        self.members.insert(id.clone(), m);
        self.order.push(id);
        match self.state {
            GroupState::PreparingRebalance => {
                // A newcomer during the initial delay pushes the delay out (bounded).
                if let (Some(limit), Some(_)) = (self.initial_delay_limit, self.deadline) {
                    let limit = limit.max(now + p.rebalance_timeout_ms as i64);
                    self.initial_delay_limit = Some(limit);
                    self.deadline = Some((now + cfg.initial_rebalance_delay_ms).min(limit));
                }
                self.maybe_complete_join(now);
            }
            _ => self.prepare_rebalance(now, cfg),
        }
        Reply::Later(rx)
    }

    /// KIP-345: a static member restarted (new member id, same instance id). In a stable group
    /// with unchanged protocols it takes the old member's place without a rebalance.
    fn replace_static_member(
        &mut self,
        old_id: &str,
        new_id: String,
        p: JoinParams,
        now: i64,
        cfg: &GroupConfig,
    ) -> Reply<JoinResult> {
        let Some(mut m) = self.members.remove(old_id) else {
            return self.add_member_and_rebalance(new_id, p, now, cfg);
        };
        if let Some(w) = m.join_waiter.take() {
            let _ = w.send(Err(GroupError::FencedInstanceId));
        }
        if let Some(w) = m.sync_waiter.take() {
            let _ = w.send(Err(GroupError::FencedInstanceId));
        }
        let protocols_changed = m.protocols != p.protocols;
        m.member_id = new_id.clone();
        m.client_id = p.client_id.clone();
        m.client_host = p.client_host.clone();
        m.session_timeout_ms = p.session_timeout_ms;
        m.rebalance_timeout_ms = p.rebalance_timeout_ms;
        m.touch(now);
        if let Some(pos) = self.order.iter().position(|x| x == old_id) {
            self.order[pos] = new_id.clone();
        }
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        if let Some(iid) = &p.instance_id {
            self.static_members.insert(iid.clone(), new_id.clone());
        }
        self.members.insert(new_id.clone(), m);
        if self.state == GroupState::Stable && !protocols_changed {
            // The new id must survive a coordinator restart, or the member would be unknown.
            self.dirty = true;
            let is_leader = self.leader.as_deref() == Some(new_id.as_str());
            return Reply::Now(Ok(self.join_result_for(&new_id, is_leader)));
        }
        let (tx, rx) = oneshot::channel();
        let m = self.members.get_mut(&new_id).expect("member");
        m.protocols = p.protocols;
        m.join_waiter = Some(tx);
        if self.state == GroupState::PreparingRebalance {
            self.maybe_complete_join(now);
        } else {
            self.prepare_rebalance(now, cfg);
        }
        Reply::Later(rx)
    }

    /// The current generation's join answer for `id` (the leader sees all members).
    fn join_result_for(&self, id: &str, skip_assignment: bool) -> JoinResult {
        let protocol = self.protocol.clone().unwrap_or_default();
        let is_leader = self.leader.as_deref() == Some(id);
        JoinResult {
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: id.to_string(),
            members: if is_leader {
                self.members_in_order()
                    .map(|m| JoinedMember {
                        member_id: m.member_id.clone(),
                        instance_id: m.instance_id.clone(),
                        metadata: m.metadata(&protocol),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            skip_assignment,
        }
    }

    pub(super) fn prepare_rebalance(&mut self, now: i64, cfg: &GroupConfig) {
        if self.state == GroupState::CompletingRebalance {
            for m in self.members.values_mut() {
                m.assignment = Bytes::new();
                if let Some(w) = m.sync_waiter.take() {
                    let _ = w.send(Err(GroupError::RebalanceInProgress));
                }
            }
        }
        let initial = self.state == GroupState::Empty;
        self.transition(GroupState::PreparingRebalance, now);
        let timeout = self.max_rebalance_timeout();
        if initial && cfg.initial_rebalance_delay_ms > 0 {
            let limit = now + timeout;
            self.initial_delay_limit = Some(limit);
            self.deadline = Some((now + cfg.initial_rebalance_delay_ms).min(limit));
        } else {
            self.initial_delay_limit = None;
            self.deadline = Some(now + timeout);
            self.maybe_complete_join(now);
        }
    }

    pub(super) fn maybe_complete_join(&mut self, now: i64) {
        if self.state != GroupState::PreparingRebalance || self.initial_delay_limit.is_some() {
            return;
        }
        let all_joined = self.members.values().all(|m| m.join_waiter.is_some());
        if all_joined && self.pending.is_empty() {
            self.complete_join(now);
        }
    }

    /// Ends the join phase: stragglers are removed, a new generation starts.
    pub(super) fn complete_join(&mut self, now: i64) {
        let stragglers: Vec<String> = self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in stragglers {
            self.remove_member_only(&id);
        }
        self.initial_delay_limit = None;
        self.generation += 1;
        self.dirty = true;
        if self.members.is_empty() {
            self.protocol = None;
            self.leader = None;
            self.deadline = None;
            self.transition(GroupState::Empty, now);
            return;
        }
        self.protocol = self.select_protocol();
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self.order.first().cloned();
        }
        self.transition(GroupState::CompletingRebalance, now);
        self.deadline = Some(now + self.max_rebalance_timeout());
        let ids: Vec<String> = self.order.clone();
        for id in ids {
            let result = self.join_result_for(&id, false);
            let m = self.members.get_mut(&id).expect("member");
            m.touch(now);
            if let Some(w) = m.join_waiter.take() {
                let _ = w.send(Ok(result));
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        assignments: Vec<(String, Bytes)>,
        now: i64,
    ) -> Reply<SyncResult> {
        if let Err(e) = self.validate_member(member_id, instance_id) {
            return Reply::Now(Err(e));
        }
        if generation != self.generation {
            return Reply::Now(Err(GroupError::IllegalGeneration));
        }
        if protocol_type.is_some_and(|t| Some(t) != self.protocol_type.as_deref())
            || protocol_name.is_some_and(|n| Some(n) != self.protocol.as_deref())
        {
            return Reply::Now(Err(GroupError::InconsistentGroupProtocol));
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => Reply::Now(Err(GroupError::UnknownMemberId)),
            GroupState::PreparingRebalance => Reply::Now(Err(GroupError::RebalanceInProgress)),
            GroupState::Stable => {
                let m = self.members.get_mut(member_id).expect("validated");
                m.touch(now);
                let assignment = m.assignment.clone();
                Reply::Now(Ok(self.sync_result(assignment)))
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                let m = self.members.get_mut(member_id).expect("validated");
                m.touch(now);
                if let Some(old) = m.sync_waiter.replace(tx) {
                    let _ = old.send(Err(GroupError::RebalanceInProgress));
                }
                if self.leader.as_deref() == Some(member_id) {
                    let mut by_member: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for m in self.members.values_mut() {
                        m.assignment = by_member.remove(&m.member_id).unwrap_or_default();
                    }
                    self.transition(GroupState::Stable, now);
                    self.deadline = None;
                    self.dirty = true;
                    let ids: Vec<String> = self.order.clone();
                    for id in ids {
                        let m = self.members.get_mut(&id).expect("member");
                        let a = m.assignment.clone();
                        if let Some(w) = m.sync_waiter.take() {
                            let r = self.sync_result(a);
                            let _ = w.send(Ok(r));
                        }
                    }
                }
                Reply::Later(rx)
            }
        }
    }

    fn sync_result(&self, assignment: Bytes) -> SyncResult {
        SyncResult {
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            assignment,
        }
    }
}
