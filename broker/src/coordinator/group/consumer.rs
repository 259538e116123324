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

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::assignor::{Assignment, Assignor, MemberSpec};
use super::records::{ConsumerMemberMetadata, CurrentAssignment, GroupRecord, TopicPartitions};
use super::topic_regex::TopicRegex;
use super::GroupError;

pub const LEAVE_EPOCH: i32 = -1;
pub const STATIC_LEAVE_EPOCH: i32 = -2;

#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
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
    /// Subscribed names plus the existing topics the regex matches.
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
            topic_snapshot: None,
            epoch_change: false,
            persisted: Persisted::default(),
        }
    }
}

fn minus(a: &Assignment, b: &Assignment) -> Assignment {
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

fn intersect(a: &Assignment, b: &Assignment) -> Assignment {
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

    pub fn heartbeat(
        &mut self,
        p: HeartbeatParams,
        topics: &BTreeMap<String, i32>,
        now: i64,
        cfg: &ConsumerConfig,
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

    /// Kafka's rule: a newer epoch than the member's is fenced; an older one is accepted only
    /// when it is the previous epoch and the member owns nothing it should not (a lost answer).
    fn check_epoch(&self, p: &HeartbeatParams) -> Result<(), GroupError> {
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

    fn maybe_compute_target(&mut self, topics: &BTreeMap<String, i32>) {
        let mut moved = false;
        for m in self.members.values_mut() {
            let mut effective = m.subscribed.clone();
            if let Some(re) = &m.compiled {
                effective.extend(topics.keys().filter(|t| re.matches(t)).cloned());
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

    fn reconcile(&mut self, id: &str, owned: Option<&Assignment>, now: i64) {
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
}

impl ConsumerMember {
    fn blank(id: &str) -> ConsumerMember {
        ConsumerMember {
            member_id: id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            epoch: 0,
            previous_epoch: 0,
            subscribed: BTreeSet::new(),
            regex: None,
            compiled: None,
            effective: BTreeSet::new(),
            rebalance_timeout_ms: 0,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            session_deadline: 0,
            revocation_deadline: None,
            send_assignment: true,
        }
    }

    fn metadata(&self, assignor: Assignor) -> ConsumerMemberMetadata {
        ConsumerMemberMetadata {
            instance_id: self.instance_id.clone(),
            rack_id: self.rack_id.clone(),
            client_id: self.client_id.clone(),
            client_host: self.client_host.clone(),
            subscribed: self.subscribed.iter().cloned().collect(),
            regex: self.regex.clone(),
            rebalance_timeout_ms: self.rebalance_timeout_ms,
            server_assignor: Some(assignor.name().to_string()),
        }
    }
}

fn to_ids(a: &Assignment, id_of: &dyn Fn(&str) -> Option<uuid::Uuid>) -> TopicPartitions {
    a.iter()
        .filter_map(|(t, ps)| Some((id_of(t)?, ps.iter().copied().collect())))
        .collect()
}

fn to_names(tps: &TopicPartitions, name_of: &dyn Fn(&uuid::Uuid) -> Option<String>) -> Assignment {
    let mut a = Assignment::new();
    for (id, ps) in tps {
        if let Some(t) = name_of(id) {
            a.entry(t).or_default().extend(ps.iter().copied());
        }
    }
    a
}

impl ConsumerGroup {
    /// The records that bring `__consumer_offsets` up to date with this group (Kafka's
    /// KIP-848 record types), and marks them written.
    pub fn take_records(
        &mut self,
        group: &str,
        id_of: &dyn Fn(&str) -> Option<uuid::Uuid>,
    ) -> Vec<GroupRecord> {
        let mut out = Vec::new();
        let g = group.to_string();
        if self.persisted.group_epoch != Some(self.group_epoch) {
            out.push(GroupRecord::ConsumerEpoch {
                group: g.clone(),
                value: Some(self.group_epoch),
            });
            self.persisted.group_epoch = Some(self.group_epoch);
        }
        let gone: Vec<String> = self
            .persisted
            .members
            .keys()
            .filter(|id| !self.members.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            self.persisted.members.remove(&id);
            for rec in [
                GroupRecord::CurrentAssignment {
                    group: g.clone(),
                    member: id.clone(),
                    value: None,
                },
                GroupRecord::TargetMember {
                    group: g.clone(),
                    member: id.clone(),
                    value: None,
                },
                GroupRecord::ConsumerMember {
                    group: g.clone(),
                    member: id.clone(),
                    value: None,
                },
            ] {
                out.push(rec);
            }
        }
        let empty = Assignment::new();
        let target_moved = self.persisted.assignment_epoch != Some(self.assignment_epoch);
        for (id, m) in &self.members {
            let now = PersistedMember {
                metadata: m.metadata(self.assignor),
                current: (
                    m.epoch,
                    m.previous_epoch,
                    m.assigned.clone(),
                    m.pending_revocation.clone(),
                ),
                target: self.target.get(id).unwrap_or(&empty).clone(),
            };
            let before = self.persisted.members.get(id);
            if before.map(|b| &b.metadata) != Some(&now.metadata) {
                out.push(GroupRecord::ConsumerMember {
                    group: g.clone(),
                    member: id.clone(),
                    value: Some(now.metadata.clone()),
                });
            }
            if target_moved || before.map(|b| &b.target) != Some(&now.target) {
                out.push(GroupRecord::TargetMember {
                    group: g.clone(),
                    member: id.clone(),
                    value: Some(to_ids(&now.target, id_of)),
                });
            }
            if before.map(|b| &b.current) != Some(&now.current) {
                let state = if !m.pending_revocation.is_empty() {
                    1
                } else if m.assigned != now.target {
                    2
                } else {
                    0
                };
                out.push(GroupRecord::CurrentAssignment {
                    group: g.clone(),
                    member: id.clone(),
                    value: Some(CurrentAssignment {
                        epoch: m.epoch,
                        previous_epoch: m.previous_epoch,
                        state,
                        assigned: to_ids(&m.assigned, id_of),
                        pending_revocation: to_ids(&m.pending_revocation, id_of),
                    }),
                });
            }
            self.persisted.members.insert(id.clone(), now);
        }
        if target_moved {
            out.push(GroupRecord::TargetEpoch {
                group: g,
                value: Some(self.assignment_epoch),
            });
            self.persisted.assignment_epoch = Some(self.assignment_epoch);
        }
        out
    }

    /// Replays one KIP-848 record read from `__consumer_offsets`.
    pub fn restore(&mut self, rec: GroupRecord, name_of: &dyn Fn(&uuid::Uuid) -> Option<String>) {
        match rec {
            GroupRecord::ConsumerEpoch { value, .. } => self.group_epoch = value.unwrap_or(0),
            GroupRecord::TargetEpoch { value, .. } => self.assignment_epoch = value.unwrap_or(0),
            GroupRecord::ConsumerMember {
                member,
                value: None,
                ..
            } => {
                self.members.remove(&member);
                self.target.remove(&member);
            }
            GroupRecord::ConsumerMember {
                member,
                value: Some(md),
                ..
            } => {
                let m = self
                    .members
                    .entry(member.clone())
                    .or_insert_with(|| ConsumerMember::blank(&member));
                m.instance_id = md.instance_id;
                m.rack_id = md.rack_id;
                m.client_id = md.client_id;
                m.client_host = md.client_host;
                m.subscribed = md.subscribed.into_iter().collect();
                m.compiled = md.regex.as_deref().and_then(|r| TopicRegex::parse(r).ok());
                m.regex = md.regex;
                m.rebalance_timeout_ms = md.rebalance_timeout_ms.max(0);
                if let Some(a) = md.server_assignor.as_deref().and_then(Assignor::by_name) {
                    self.assignor = a;
                }
            }
            GroupRecord::TargetMember { member, value, .. } => match value {
                Some(tps) => {
                    self.target.insert(member, to_names(&tps, name_of));
                }
                None => {
                    self.target.remove(&member);
                }
            },
            GroupRecord::CurrentAssignment {
                member,
                value: Some(c),
                ..
            } => {
                let m = self
                    .members
                    .entry(member.clone())
                    .or_insert_with(|| ConsumerMember::blank(&member));
                m.epoch = c.epoch;
                m.previous_epoch = c.previous_epoch;
                m.assigned = to_names(&c.assigned, name_of);
                m.pending_revocation = to_names(&c.pending_revocation, name_of);
            }
            _ => {}
        }
    }

    /// After a load: sessions start now, and what was read counts as written.
    pub fn finish_restore(&mut self, now: i64, cfg: &ConsumerConfig) {
        self.static_members.clear();
        for m in self.members.values_mut() {
            m.session_deadline = now + cfg.session_timeout_ms as i64;
            if !m.pending_revocation.is_empty() {
                m.revocation_deadline = Some(now + m.rebalance_timeout_ms as i64);
            }
            if let Some(iid) = &m.instance_id {
                self.static_members.insert(iid.clone(), m.member_id.clone());
            }
        }
        let _ = self.take_records("", &|_| None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ConsumerConfig {
        ConsumerConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: 100,
        }
    }

    fn topics() -> BTreeMap<String, i32> {
        BTreeMap::from([("t".to_string(), 6)])
    }

    fn join(g: &mut ConsumerGroup, id: &str, now: i64) -> HeartbeatResult {
        g.heartbeat(
            HeartbeatParams {
                member_id: id.into(),
                member_epoch: 0,
                rebalance_timeout_ms: 30_000,
                subscribed: Some(BTreeSet::from(["t".to_string()])),
                owned: Some(Assignment::new()),
                ..Default::default()
            },
            &topics(),
            now,
            &cfg(),
        )
        .unwrap()
    }

    fn beat(
        g: &mut ConsumerGroup,
        id: &str,
        epoch: i32,
        owned: &Assignment,
        now: i64,
    ) -> Result<HeartbeatResult, GroupError> {
        g.heartbeat(
            HeartbeatParams {
                member_id: id.into(),
                member_epoch: epoch,
                owned: Some(owned.clone()),
                ..Default::default()
            },
            &topics(),
            now,
            &cfg(),
        )
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(|s| s.len()).sum()
    }

    #[test]
    fn given_first_member_when_joining_then_epoch_one_and_all_partitions() {
        let mut g = ConsumerGroup::default();
        let r = join(&mut g, "a", 0);
        assert_eq!(r.member_epoch, 1);
        assert_eq!(count(&r.assignment.unwrap()), 6);
        assert_eq!(g.state_name(), "Stable");
    }

    #[test]
    fn given_second_member_when_joining_then_first_revokes_before_second_gets_partitions() {
        let mut g = ConsumerGroup::default();
        let a = join(&mut g, "a", 0);
        let a_owned = a.assignment.unwrap();
        let b = join(&mut g, "b", 10);
        assert_eq!(b.member_epoch, 2);
        assert_eq!(count(&b.assignment.unwrap()), 0, "a still owns everything");
        assert_eq!(g.state_name(), "Reconciling");
        // a is told to give up three partitions, keeping epoch 1.
        let r = beat(&mut g, "a", 1, &a_owned, 20).unwrap();
        assert_eq!(r.member_epoch, 1);
        let kept = r.assignment.unwrap();
        assert_eq!(count(&kept), 3);
        // a reports the revocation done: it moves to epoch 2.
        let r = beat(&mut g, "a", 1, &kept, 30).unwrap();
        assert_eq!(r.member_epoch, 2);
        // b now receives the released partitions.
        let r = beat(&mut g, "b", 2, &Assignment::new(), 40).unwrap();
        let got = r.assignment.unwrap();
        assert_eq!(count(&got), 3);
        assert!(intersect(&got, &kept).is_empty());
        assert_eq!(g.state_name(), "Stable");
    }

    #[test]
    fn given_member_when_epoch_wrong_or_unknown_then_fenced_or_unknown() {
        let mut g = ConsumerGroup::default();
        join(&mut g, "a", 0);
        let none = Assignment::new();
        assert_eq!(
            beat(&mut g, "a", 7, &none, 1),
            Err(GroupError::FencedMemberEpoch)
        );
        assert_eq!(
            beat(&mut g, "x", 1, &none, 1),
            Err(GroupError::UnknownMemberId)
        );
        assert_eq!(
            g.validate_member_epoch("a", 0),
            Err(GroupError::StaleMemberEpoch)
        );
        assert_eq!(g.validate_member_epoch("a", 1), Ok(()));
    }

    #[test]
    fn given_member_leaves_when_heartbeat_minus_one_then_others_get_its_partitions() {
        let mut g = ConsumerGroup::default();
        let a = join(&mut g, "a", 0).assignment.unwrap();
        join(&mut g, "b", 1);
        let kept = beat(&mut g, "a", 1, &a, 2).unwrap().assignment.unwrap();
        beat(&mut g, "a", 1, &kept, 3).unwrap();
        let b = beat(&mut g, "b", 2, &Assignment::new(), 4)
            .unwrap()
            .assignment
            .unwrap();
        let r = beat(&mut g, "b", LEAVE_EPOCH, &b, 5).unwrap();
        assert_eq!(r.member_epoch, LEAVE_EPOCH);
        let r = beat(&mut g, "a", 2, &kept, 6).unwrap();
        assert_eq!(r.member_epoch, 3);
        assert_eq!(count(&r.assignment.unwrap()), 6);
    }

    #[test]
    fn given_silent_member_when_session_expires_then_removed() {
        let mut g = ConsumerGroup::default();
        join(&mut g, "a", 0);
        g.tick(45_000, &topics());
        assert!(g.members.is_empty());
        assert_eq!(g.state_name(), "Empty");
    }

    #[test]
    fn given_regex_subscription_when_topics_match_then_assigned_and_new_topic_joins_later() {
        let mut g = ConsumerGroup::default();
        let join = |g: &mut ConsumerGroup, regex: &str, topics: &BTreeMap<String, i32>| {
            g.heartbeat(
                HeartbeatParams {
                    member_id: "a".into(),
                    regex: Some(regex.into()),
                    ..Default::default()
                },
                topics,
                0,
                &cfg(),
            )
        };
        let two = BTreeMap::from([("logs-a".to_string(), 1), ("other".to_string(), 1)]);
        let r = join(&mut g, "logs-.*", &two).unwrap();
        assert_eq!(
            r.assignment.unwrap().keys().collect::<Vec<_>>(),
            vec!["logs-a"]
        );
        let three = BTreeMap::from([
            ("logs-a".to_string(), 1),
            ("logs-b".to_string(), 2),
            ("other".to_string(), 1),
        ]);
        let r = beat_with(&mut g, "a", 1, &three);
        assert_eq!(r.member_epoch, 2, "a new matching topic moves the epoch");
        assert_eq!(count(&r.assignment.unwrap()), 3);
        let mut bad = ConsumerGroup::default();
        assert!(matches!(
            join(&mut bad, "logs-(", &two),
            Err(GroupError::InvalidRegularExpression(_))
        ));
    }

    fn beat_with(
        g: &mut ConsumerGroup,
        id: &str,
        epoch: i32,
        topics: &BTreeMap<String, i32>,
    ) -> HeartbeatResult {
        let owned = g.members[id].assigned.clone();
        g.heartbeat(
            HeartbeatParams {
                member_id: id.into(),
                member_epoch: epoch,
                owned: Some(owned),
                ..Default::default()
            },
            topics,
            1,
            &cfg(),
        )
        .unwrap()
    }

    #[test]
    fn given_unknown_assignor_when_joining_then_unsupported_assignor() {
        let mut g = ConsumerGroup::default();
        let r = g.heartbeat(
            HeartbeatParams {
                member_id: "a".into(),
                subscribed: Some(BTreeSet::new()),
                assignor: Some("sticky-ish".into()),
                ..Default::default()
            },
            &topics(),
            0,
            &cfg(),
        );
        assert_eq!(r, Err(GroupError::UnsupportedAssignor));
    }

    #[test]
    fn given_static_member_when_it_leaves_temporarily_and_returns_then_same_assignment() {
        let mut g = ConsumerGroup::default();
        let p = HeartbeatParams {
            member_id: "a1".into(),
            member_epoch: 0,
            instance_id: Some("i".into()),
            subscribed: Some(BTreeSet::from(["t".to_string()])),
            ..Default::default()
        };
        let first = g.heartbeat(p.clone(), &topics(), 0, &cfg()).unwrap();
        let mut leave = p.clone();
        leave.member_epoch = STATIC_LEAVE_EPOCH;
        g.heartbeat(leave, &topics(), 1, &cfg()).unwrap();
        let mut back = p;
        back.member_id = "a2".into();
        let epoch_before = g.group_epoch;
        let r = g.heartbeat(back, &topics(), 2, &cfg()).unwrap();
        assert_eq!(r.assignment, first.assignment);
        assert_eq!(r.member_epoch, first.member_epoch);
        assert_eq!(g.group_epoch, epoch_before, "no rebalance");
    }
}
