//! The classic group protocol's state machine (JoinGroup / SyncGroup / Heartbeat / LeaveGroup),
//! with Kafka's states and error codes, KIP-394 member ids and KIP-345 static membership.
//!
//! Pure: the caller passes `now` (ms) and drives timers with `tick`; requests that wait
//! (a join until the rebalance completes, a follower's sync until the leader's assignment) get
//! a oneshot receiver. The coordinator persists the group when `take_dirty` says it changed.
//!
//! `rebalance` is JoinGroup and SyncGroup (the join phase, protocol selection, a new
//! generation and the leader's assignment); `session` is how members stay and go (Heartbeat,
//! LeaveGroup, expired sessions) and the timers.

mod rebalance;
mod session;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use tokio::sync::oneshot;

pub use crate::coordinator::group::records::CommittedOffset;
use crate::coordinator::group::GroupError;

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
    pub consumer: Option<crate::coordinator::group::consumer::ConsumerGroup>,
    /// Set when the group id is used by the KIP-1071 streams protocol.
    pub streams: Option<crate::coordinator::group::streams::StreamsGroup>,
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
            streams: None,
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
        if self.state != GroupState::Empty
            || self.has_consumer_members()
            || self.has_streams_members()
        {
            return Vec::new();
        }
        let simple =
            self.protocol_type.is_none() && self.consumer.is_none() && self.streams.is_none();
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
        if self.has_consumer_members() || self.has_streams_members() {
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

    /// Whether KIP-1071 streams members use this group id now.
    pub fn has_streams_members(&self) -> bool {
        self.streams.as_ref().is_some_and(|s| !s.members.is_empty())
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
