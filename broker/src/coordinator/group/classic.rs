//! The classic group protocol's state machine (JoinGroup / SyncGroup / Heartbeat / LeaveGroup),
//! with Kafka's states and error codes, KIP-394 member ids and KIP-345 static membership.
//!
//! Pure: the caller passes `now` (ms) and drives timers with `tick`; requests that wait
//! (a join until the rebalance completes, a follower's sync until the leader's assignment) get
//! a oneshot receiver. The coordinator persists the group when `take_dirty` says it changed.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use tokio::sync::oneshot;

pub use super::records::CommittedOffset;
use super::GroupError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The names DescribeGroups and ListGroups report (Kafka's).
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// Broker settings the state machine needs.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub initial_rebalance_delay_ms: i64,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub max_size: usize,
}

impl GroupConfig {
    pub fn from_broker(c: &crate::config::BrokerConfig) -> GroupConfig {
        GroupConfig {
            initial_rebalance_delay_ms: c.group_initial_rebalance_delay_ms,
            min_session_timeout_ms: c.group_min_session_timeout_ms,
            max_session_timeout_ms: c.group_max_session_timeout_ms,
            max_size: c.group_max_size.max(1) as usize,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct JoinParams {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// KIP-394 (JoinGroup v4+): a first join gets MEMBER_ID_REQUIRED and a member id.
    pub require_known_member_id: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct JoinResult {
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Filled for the leader only: everyone's metadata for the chosen protocol.
    pub members: Vec<JoinedMember>,
    /// KIP-814: a rejoining static leader gets the members but must not reassign.
    pub skip_assignment: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncResult {
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

pub type JoinReply = Result<JoinResult, GroupError>;
pub type SyncReply = Result<SyncResult, GroupError>;

/// An answer now, or a receiver that gets it when the group moves on.
#[derive(Debug)]
pub enum Reply<T> {
    Now(Result<T, GroupError>),
    Later(oneshot::Receiver<Result<T, GroupError>>),
}

impl<T> Reply<T> {
    pub async fn wait(self) -> Result<T, GroupError> {
        match self {
            Reply::Now(r) => r,
            // The sender is dropped only when the group is unloaded or deleted.
            Reply::Later(rx) => rx.await.unwrap_or(Err(GroupError::CoordinatorNotAvailable)),
        }
    }
}

#[derive(Debug)]
pub struct Member {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    session_deadline: i64,
    join_waiter: Option<oneshot::Sender<JoinReply>>,
    sync_waiter: Option<oneshot::Sender<SyncReply>>,
}

impl Member {
    fn from_join(id: String, p: &JoinParams, now: i64) -> Member {
        Member {
            member_id: id,
            instance_id: p.instance_id.clone(),
            client_id: p.client_id.clone(),
            client_host: p.client_host.clone(),
            session_timeout_ms: p.session_timeout_ms,
            rebalance_timeout_ms: p.rebalance_timeout_ms,
            protocol_type: p.protocol_type.clone(),
            protocols: p.protocols.clone(),
            assignment: Bytes::new(),
            session_deadline: now + p.session_timeout_ms as i64,
            join_waiter: None,
            sync_waiter: None,
        }
    }

    /// Restored from `__consumer_offsets` (no waiters; the session clock starts now).
    #[allow(clippy::too_many_arguments)]
    pub fn restored(
        member_id: String,
        instance_id: Option<String>,
        client_id: String,
        client_host: String,
        session_timeout_ms: i32,
        rebalance_timeout_ms: i32,
        protocol_type: String,
        protocols: Vec<(String, Bytes)>,
        assignment: Bytes,
        now: i64,
    ) -> Member {
        Member {
            member_id,
            instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            assignment,
            session_deadline: now + session_timeout_ms as i64,
            join_waiter: None,
            sync_waiter: None,
        }
    }

    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    fn touch(&mut self, now: i64) {
        self.session_deadline = now + self.session_timeout_ms as i64;
    }

    /// A member waiting in a join or sync is alive (Kafka's `shouldKeepAlive`).
    fn alive(&self, now: i64) -> bool {
        self.join_waiter.is_some() || self.sync_waiter.is_some() || self.session_deadline > now
    }
}

pub struct Group {
    pub id: String,
    pub state: GroupState,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// Insertion order matters for picking a new leader, so a Vec-backed map is not needed:
    /// ids are kept in `order`.
    pub members: HashMap<String, Member>,
    order: Vec<String>,
    pub static_members: HashMap<String, String>,
    /// KIP-394: member ids handed out with MEMBER_ID_REQUIRED, with their expiry.
    pending: HashMap<String, i64>,
    /// PreparingRebalance: when the join phase ends regardless of stragglers;
    /// CompletingRebalance: when a missing leader sync makes us start over.
    deadline: Option<i64>,
    /// During the initial delay of a new group (`group.initial.rebalance.delay.ms`): the
    /// latest the delay may be extended to.
    initial_delay_limit: Option<i64>,
    pub state_timestamp: i64,
    pub offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// Set when the group id is used by the KIP-848 consumer protocol.
    pub consumer: Option<super::consumer::ConsumerGroup>,
    dirty: bool,
}

impl Group {
    pub fn new(id: &str, now: i64) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: HashMap::new(),
            order: Vec::new(),
            static_members: HashMap::new(),
            pending: HashMap::new(),
            deadline: None,
            initial_delay_limit: None,
            state_timestamp: now,
            offsets: BTreeMap::new(),
            consumer: None,
            dirty: false,
        }
    }

    /// Members in join order.
    pub fn members_in_order(&self) -> impl Iterator<Item = &Member> {
        self.order.iter().filter_map(|id| self.members.get(id))
    }

    /// Adds a member restored from the log (group metadata record).
    pub fn restore_member(&mut self, m: Member) {
        if let Some(iid) = &m.instance_id {
            self.static_members.insert(iid.clone(), m.member_id.clone());
        }
        self.order.push(m.member_id.clone());
        self.members.insert(m.member_id.clone(), m);
    }

    /// Whether the group changed in a way that must be written to `__consumer_offsets`.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    fn transition(&mut self, to: GroupState, now: i64) {
        self.state = to;
        self.state_timestamp = now;
    }

    fn is_fenced(&self, instance_id: Option<&str>, member_id: &str) -> bool {
        match instance_id.and_then(|i| self.static_members.get(i)) {
            Some(known) => known != member_id,
            None => false,
        }
    }

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

    fn prepare_rebalance(&mut self, now: i64, cfg: &GroupConfig) {
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

    fn maybe_complete_join(&mut self, now: i64) {
        if self.state != GroupState::PreparingRebalance || self.initial_delay_limit.is_some() {
            return;
        }
        let all_joined = self.members.values().all(|m| m.join_waiter.is_some());
        if all_joined && self.pending.is_empty() {
            self.complete_join(now);
        }
    }

    /// Ends the join phase: stragglers are removed, a new generation starts.
    fn complete_join(&mut self, now: i64) {
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

    fn remove_member_only(&mut self, id: &str) -> Option<Member> {
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

    /// Kafka's order: dead group, fenced static member, unknown member.
    fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if self.is_fenced(instance_id, member_id) {
            return Err(GroupError::FencedInstanceId);
        }
        if !self.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        Ok(())
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

    /// Offset commits from a member must be from the current generation (Kafka's
    /// `validateOffsetCommit`); generation < 0 on an empty group is a simple/admin commit.
    pub fn validate_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if generation < 0 && self.state == GroupState::Empty {
            return Ok(());
        }
        self.validate_member(member_id, instance_id)?;
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        if self.state == GroupState::CompletingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
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

    /// Protocol type "consumer" members' subscribed topics (for OffsetDelete).
    pub fn subscribed_topics(&self) -> Option<std::collections::HashSet<String>> {
        use kafka_protocol::messages::ConsumerProtocolSubscription;
        use kafka_protocol::protocol::Decodable;
        if self.protocol_type.as_deref() != Some("consumer") || self.state == GroupState::Empty {
            return None;
        }
        let protocol = self.protocol.clone()?;
        let mut topics = std::collections::HashSet::new();
        for m in self.members.values() {
            let mut b = m.metadata(&protocol);
            if b.len() < 2 {
                continue;
            }
            let version = i16::from_be_bytes([b[0], b[1]]);
            let _ = bytes::Buf::get_i16(&mut b);
            if let Ok(s) = ConsumerProtocolSubscription::decode(&mut b, version.clamp(0, 3)) {
                topics.extend(s.topics.into_iter().map(|t| t.to_string()));
            }
        }
        Some(topics)
    }

    /// Offsets past `offsets.retention.minutes` (Kafka's KIP-211 rule): a group that had
    /// members keeps its offsets until it has been empty for the retention period; a group
    /// that only ever committed (no protocol) expires each offset from its commit time.
    pub fn expired_offsets(&self, now: i64, retention_ms: i64) -> Vec<(String, i32)> {
        if self.state != GroupState::Empty || self.has_consumer_members() {
            return Vec::new();
        }
        let simple = self.protocol_type.is_none() && self.consumer.is_none();
        if !simple && self.state_timestamp.saturating_add(retention_ms) > now {
            return Vec::new();
        }
        self.offsets
            .iter()
            .filter(|(_, o)| !simple || o.commit_timestamp.saturating_add(retention_ms) <= now)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Deletes the group (DeleteGroups): only an empty group may go.
    pub fn can_delete(&self) -> Result<(), GroupError> {
        if self.has_consumer_members() {
            return Err(GroupError::NonEmptyGroup);
        }
        match self.state {
            GroupState::Dead => Err(GroupError::GroupIdNotFound),
            GroupState::Empty => Ok(()),
            _ => Err(GroupError::NonEmptyGroup),
        }
    }

    /// Whether KIP-848 members use this group id now (then classic requests are refused).
    pub fn has_consumer_members(&self) -> bool {
        self.consumer
            .as_ref()
            .is_some_and(|c| !c.members.is_empty())
    }

    pub fn mark_dead(&mut self, now: i64) {
        self.transition(GroupState::Dead, now);
    }

    /// Restores the state after loading members from the log: Stable with members.
    pub fn restore_state(&mut self, now: i64) {
        let s = if self.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        self.transition(s, now);
    }
}
