//! The KIP-848 consumer group protocol (ConsumerGroupHeartbeat): the broker computes the
//! assignment and hands each member its share incrementally.
//!
//! Epochs: the group epoch moves when membership, subscriptions or the subscribed topics'
//! partition counts change; the target assignment is then recomputed (assignment epoch = group
//! epoch). Each member reconciles towards its target: partitions it must give up are revoked
//! first (its epoch stays until it reports, in a heartbeat, that it no longer owns them); only
//! then does it move to the new epoch and receive the partitions no other member still owns
//! (the rest follow on later heartbeats, as they are released). Pure, like `classic`: time
//! and the topics' partition counts come in as arguments.
//!
//! `reconcile` computes the target assignment and moves each member towards it (with the epoch
//! checks of heartbeats and commits); `regex` resolves the subscribed regular expressions to
//! the topics the heartbeat's principal may see; `persist` writes the group to
//! `__consumer_offsets` as Kafka's KIP-848 records and replays it from there.

mod persist;
pub(super) mod reconcile;
mod regex;
#[cfg(test)]
mod regex_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::coordinator::group::assignor::{Assignment, Assignor};
use crate::coordinator::group::records::{ConsumerMemberMetadata, ResolvedRegex};
use crate::coordinator::group::topic_regex::TopicRegex;
use crate::coordinator::group::GroupError;

pub use regex::RegexResolver;

pub const LEAVE_EPOCH: i32 = -1;
pub const STATIC_LEAVE_EPOCH: i32 = -2;

#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
    /// Kafka's `group.consumer.regex.refresh.interval.ms`: a regex resolution older than this
    /// is made again at the next heartbeat.
    pub regex_refresh_interval_ms: i64,
}

#[derive(Debug, Clone, Default)]
pub struct HeartbeatParams {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    /// `None`: unchanged since the last heartbeat.
    pub subscribed: Option<BTreeSet<String>>,
    /// `None`: unchanged; `Some("")`: no regex any more.
    pub regex: Option<String>,
    pub assignor: Option<String>,
    /// What the member owns now (`None`: unchanged).
    pub owned: Option<Assignment>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatResult {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Sent only when it changed (or on join).
    pub assignment: Option<Assignment>,
}

#[derive(Debug, Clone)]
pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub epoch: i32,
    previous_epoch: i32,
    pub subscribed: BTreeSet<String>,
    pub regex: Option<String>,
    compiled: Option<TopicRegex>,
    /// Subscribed names plus the existing topics of the regex's resolution.
    pub effective: BTreeSet<String>,
    pub rebalance_timeout_ms: i32,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
    session_deadline: i64,
    revocation_deadline: Option<i64>,
    send_assignment: bool,
}

#[derive(Debug)]
pub struct ConsumerGroup {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: Assignor,
    pub members: BTreeMap<String, ConsumerMember>,
    pub target: BTreeMap<String, Assignment>,
    static_members: HashMap<String, String>,
    /// The subscribed regular expressions as last resolved, shared by every member subscribed
    /// to the same one (`regex`).
    pub regexes: BTreeMap<String, ResolvedRegex>,
    /// Partition counts of the subscribed topics the target was computed from (`None` right
    /// after a load from the log: the first look only records them).
    topic_snapshot: Option<BTreeMap<String, i32>>,
    /// What `__consumer_offsets` holds, to write only what changed.
    persisted: Persisted,
    /// Something changed that moves the group epoch (once per request, however many).
    epoch_change: bool,
}

impl Default for ConsumerGroup {
    fn default() -> Self {
        ConsumerGroup {
            group_epoch: 0,
            assignment_epoch: 0,
            assignor: Assignor::Uniform,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            static_members: HashMap::new(),
            regexes: BTreeMap::new(),
            topic_snapshot: None,
            epoch_change: false,
            persisted: Persisted::default(),
        }
    }
}

/// The member state as persisted (metadata record, current assignment record, target).
#[derive(Debug, Clone, PartialEq, Default)]
struct PersistedMember {
    metadata: ConsumerMemberMetadata,
    current: (i32, i32, Assignment, Assignment),
    target: Assignment,
}

#[derive(Debug, Default)]
struct Persisted {
    group_epoch: Option<i32>,
    assignment_epoch: Option<i32>,
    members: BTreeMap<String, PersistedMember>,
    regexes: BTreeMap<String, ResolvedRegex>,
}

impl ConsumerGroup {
    /// Kafka's consumer group states (ConsumerGroupDescribe, ListGroups).
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.assignment_epoch < self.group_epoch {
            "Assigning"
        } else if self.members.values().any(|m| {
            let empty = Assignment::new();
            let target = self.target.get(&m.member_id).unwrap_or(&empty);
            m.epoch != STATIC_LEAVE_EPOCH
                && (m.epoch != self.assignment_epoch
                    || !m.pending_revocation.is_empty()
                    || &m.assigned != target)
        }) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    fn bump(&mut self) {
        self.epoch_change = true;
    }

    /// One ConsumerGroupHeartbeat; `resolver` resolves the group's regexes if they are due
    /// (with the rights of the principal sending it).
    pub fn heartbeat(
        &mut self,
        p: HeartbeatParams,
        topics: &BTreeMap<String, i32>,
        now: i64,
        cfg: &ConsumerConfig,
        resolver: &RegexResolver<'_>,
    ) -> Result<HeartbeatResult, GroupError> {
        if let Some(name) = &p.assignor {
            self.assignor = Assignor::by_name(name).ok_or(GroupError::UnsupportedAssignor)?;
        }
        if p.member_epoch == LEAVE_EPOCH || p.member_epoch == STATIC_LEAVE_EPOCH {
            return self.leave(&p, cfg);
        }
        let id = if p.member_epoch == 0 {
            self.join(&p, now, cfg)?
        } else {
            self.check_epoch(&p)?;
            p.member_id.clone()
        };
        let m = self.members.get_mut(&id).expect("member present");
        m.session_deadline = now + cfg.session_timeout_ms as i64;
        if p.rebalance_timeout_ms > 0 {
            m.rebalance_timeout_ms = p.rebalance_timeout_ms;
        }
        m.client_id = p.client_id.clone();
        if p.rack_id.is_some() {
            m.rack_id = p.rack_id.clone();
        }
        let mut changed = false;
        if let Some(subs) = p.subscribed {
            if subs != m.subscribed {
                m.subscribed = subs;
                changed = true;
            }
        }
        if let Some(r) = p.regex {
            let r = Some(r).filter(|r| !r.is_empty());
            if r != m.regex {
                m.compiled = r
                    .as_deref()
                    .map(TopicRegex::parse)
                    .transpose()
                    .map_err(|e| GroupError::InvalidRegularExpression(e.to_string()))?;
                m.regex = r;
                changed = true;
            }
        }
        if changed {
            self.bump();
        }
        self.maybe_resolve_regexes(topics, now, cfg.regex_refresh_interval_ms, resolver);
        self.maybe_compute_target(topics);
        self.reconcile(&id, p.owned.as_ref(), now);
        let m = self.members.get_mut(&id).expect("member present");
        let assignment = std::mem::take(&mut m.send_assignment).then(|| m.assigned.clone());
        Ok(HeartbeatResult {
            member_id: id,
            member_epoch: m.epoch,
            heartbeat_interval_ms: cfg.heartbeat_interval_ms,
            assignment,
        })
    }

    fn leave(
        &mut self,
        p: &HeartbeatParams,
        cfg: &ConsumerConfig,
    ) -> Result<HeartbeatResult, GroupError> {
        let id = match (&p.instance_id, self.members.contains_key(&p.member_id)) {
            (_, true) => p.member_id.clone(),
            (Some(iid), false) => self
                .static_members
                .get(iid)
                .cloned()
                .ok_or(GroupError::UnknownMemberId)?,
            (None, false) => return Err(GroupError::UnknownMemberId),
        };
        if p.member_epoch == STATIC_LEAVE_EPOCH && p.instance_id.is_some() {
            // KIP-345 for KIP-848: the static member keeps its assignment until its session
            // expires, so a restarted instance takes it over without a rebalance.
            let m = self.members.get_mut(&id).expect("member");
            m.previous_epoch = m.epoch;
            m.epoch = STATIC_LEAVE_EPOCH;
        } else {
            self.remove(&id);
        }
        if std::mem::take(&mut self.epoch_change) {
            self.group_epoch += 1;
        }
        Ok(HeartbeatResult {
            member_id: id,
            member_epoch: p.member_epoch,
            heartbeat_interval_ms: cfg.heartbeat_interval_ms,
            assignment: None,
        })
    }

    fn remove(&mut self, id: &str) {
        if let Some(m) = self.members.remove(id) {
            if let Some(iid) = &m.instance_id {
                if self.static_members.get(iid).map(String::as_str) == Some(id) {
                    self.static_members.remove(iid);
                }
            }
            self.target.remove(id);
            self.prune_regexes();
            self.bump();
        }
    }

    fn join(
        &mut self,
        p: &HeartbeatParams,
        now: i64,
        cfg: &ConsumerConfig,
    ) -> Result<String, GroupError> {
        if p.subscribed.is_none() && p.regex.is_none() {
            return Err(GroupError::InvalidRequest(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request".into(),
            ));
        }
        // v0 lets the broker choose the id; v1 clients bring their own.
        let id = if p.member_id.is_empty() {
            uuid::Uuid::new_v4().simple().to_string()
        } else {
            p.member_id.clone()
        };
        if let Some(iid) = &p.instance_id {
            if let Some(old_id) = self.static_members.get(iid).cloned() {
                if old_id != id {
                    let old_epoch = self.members.get(&old_id).map(|m| m.epoch);
                    if old_epoch != Some(STATIC_LEAVE_EPOCH) {
                        return Err(GroupError::UnreleasedInstanceId);
                    }
                    // The restarted instance takes over the old member's place and epoch.
                    let mut m = self.members.remove(&old_id).expect("static member");
                    let target = self.target.remove(&old_id);
                    m.member_id = id.clone();
                    m.epoch = m.previous_epoch;
                    m.send_assignment = true;
                    if let Some(t) = target {
                        self.target.insert(id.clone(), t);
                    }
                    self.members.insert(id.clone(), m);
                    self.static_members.insert(iid.clone(), id.clone());
                    return Ok(id);
                }
            }
        }
        if let Some(m) = self.members.get_mut(&id) {
            // A known member rejoining from scratch: it owns nothing any more.
            m.assigned.clear();
            m.pending_revocation.clear();
            m.revocation_deadline = None;
            m.epoch = 0;
            m.send_assignment = true;
            return Ok(id);
        }
        if self.members.len() >= cfg.max_size {
            return Err(GroupError::GroupMaxSizeReached);
        }
        self.members.insert(
            id.clone(),
            ConsumerMember {
                member_id: id.clone(),
                instance_id: p.instance_id.clone(),
                rack_id: p.rack_id.clone(),
                client_id: p.client_id.clone(),
                client_host: p.client_host.clone(),
                epoch: 0,
                previous_epoch: 0,
                subscribed: BTreeSet::new(),
                regex: None,
                compiled: None,
                effective: BTreeSet::new(),
                rebalance_timeout_ms: p.rebalance_timeout_ms.max(0),
                assigned: Assignment::new(),
                pending_revocation: Assignment::new(),
                session_deadline: now + cfg.session_timeout_ms as i64,
                revocation_deadline: None,
                send_assignment: true,
            },
        );
        if let Some(iid) = &p.instance_id {
            self.static_members.insert(iid.clone(), id.clone());
        }
        self.bump();
        Ok(id)
    }

    /// Expired sessions and revocations past the rebalance timeout leave the group.
    pub fn tick(&mut self, now: i64, topics: &BTreeMap<String, i32>) {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.session_deadline <= now || m.revocation_deadline.is_some_and(|d| d <= now)
            })
            .map(|m| m.member_id.clone())
            .collect();
        if gone.is_empty() {
            return;
        }
        for id in gone {
            tracing::debug!(member = %id, "consumer group member expired");
            self.remove(&id);
        }
        self.maybe_compute_target(topics);
    }
}
