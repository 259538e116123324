//! KIP-1071 streams groups (StreamsGroupHeartbeat): Kafka Streams applications whose tasks the
//! broker assigns. The application's heartbeat brings its topology; the broker configures it
//! against the topics that exist (`topology`: tasks per subtopology, internal topics to
//! create), assigns the tasks (`assignor`, Kafka's sticky assignor) and hands each member its
//! share incrementally, revoking before it grants (`reconcile`), as KIP-848 consumer groups
//! do.
//!
//! Pure, like `consumer`: time and the topics' partition counts come in as arguments. Epochs
//! as Kafka's: a new group starts at group and assignment epoch 1; membership, member
//! metadata and configured-topology changes bump the group epoch; the target assignment is
//! recomputed at most once per `assignment.interval.ms` and not before the initial rebalance
//! delay has passed since the first member came (ASSIGNMENT_DELAYED meanwhile).
//!
//! Durable as Kafka's are (`records`): what a heartbeat changed is written to
//! `__consumer_offsets` in Kafka's streams group records before the member hears back, and a
//! load replays them, so after a restart the members carry on at their epochs.

mod assignor;
mod reconcile;
pub mod records;
#[cfg(test)]
mod tests;
pub mod topology;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::coordinator::group::GroupError;
pub use topology::{Configured, InternalTopic, Topology};

pub const LEAVE_EPOCH: i32 = -1;
pub const STATIC_LEAVE_EPOCH: i32 = -2;
pub const ASSIGNOR_NAME: &str = assignor::NAME;

/// The status codes of StreamsGroupHeartbeat responses (`Status.StatusCode`).
pub mod status {
    pub const STALE_TOPOLOGY: i8 = 0;
    pub const MISSING_SOURCE_TOPICS: i8 = 1;
    pub const INCORRECTLY_PARTITIONED_TOPICS: i8 = 2;
    pub const MISSING_INTERNAL_TOPICS: i8 = 3;
    pub const SHUTDOWN_APPLICATION: i8 = 4;
    pub const ASSIGNMENT_DELAYED: i8 = 5;
}

/// Partitions by subtopology id.
pub type TaskSet = BTreeMap<String, BTreeSet<i32>>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tasks {
    pub active: TaskSet,
    pub standby: TaskSet,
    pub warmup: TaskSet,
}

impl Tasks {
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.standby.is_empty() && self.warmup.is_empty()
    }
}

/// Broker (and group config) settings the state machine needs.
#[derive(Debug, Clone)]
pub struct StreamsConfig {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
    pub num_standby_replicas: i32,
    pub initial_rebalance_delay_ms: i64,
    pub assignment_interval_ms: i64,
    pub task_offset_interval_ms: i32,
    pub acceptable_recovery_lag: i64,
}

#[derive(Debug, Clone, Default)]
pub struct HeartbeatParams {
    pub member_id: String,
    pub member_epoch: i32,
    pub endpoint_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    pub client_id: String,
    pub client_host: String,
    pub topology: Option<Topology>,
    /// What the member owns now (`None`: unchanged).
    pub owned: Option<Tasks>,
    pub process_id: Option<String>,
    pub user_endpoint: Option<(String, u16)>,
    pub client_tags: Option<BTreeMap<String, String>>,
    pub shutdown_application: bool,
}

/// The partitions one member's tasks read, for interactive queries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPartitions {
    pub endpoint: (String, u16),
    pub active: BTreeMap<String, BTreeSet<i32>>,
    pub standby: BTreeMap<String, BTreeSet<i32>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatResult {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub task_offset_interval_ms: i32,
    pub acceptable_recovery_lag: i64,
    pub statuses: Vec<(i8, String)>,
    /// Sent on a join or when the member's tasks changed.
    pub tasks: Option<Tasks>,
    pub endpoint_epoch: i32,
    /// Sent when the member's endpoint epoch is not the group's.
    pub endpoints: Option<Vec<EndpointPartitions>>,
    /// Internal topics the coordinator's caller creates (MISSING_INTERNAL_TOPICS).
    pub to_create: Vec<InternalTopic>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemberState {
    Stable,
    UnrevokedTasks,
    UnreleasedTasks,
}

#[derive(Debug, Clone)]
pub struct StreamsMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub process_id: String,
    pub user_endpoint: Option<(String, u16)>,
    pub client_tags: BTreeMap<String, String>,
    pub topology_epoch: i32,
    pub rebalance_timeout_ms: i32,
    pub epoch: i32,
    previous_epoch: i32,
    state: MemberState,
    pub assigned: Tasks,
    pub pending_revocation: Tasks,
    /// The target epoch at which each active task was granted (OffsetCommit checks it).
    task_epochs: BTreeMap<(String, i32), i32>,
    session_deadline: i64,
    revocation_deadline: Option<i64>,
}

impl StreamsMember {
    /// A member as a load first meets it (its records fill it in).
    fn restored(id: &str) -> StreamsMember {
        StreamsMember {
            member_id: id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            process_id: String::new(),
            user_endpoint: None,
            client_tags: BTreeMap::new(),
            topology_epoch: -1,
            rebalance_timeout_ms: 0,
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: Tasks::default(),
            pending_revocation: Tasks::default(),
            task_epochs: BTreeMap::new(),
            session_deadline: 0,
            revocation_deadline: None,
        }
    }

    fn new(id: &str, now: i64, cfg: &StreamsConfig) -> StreamsMember {
        StreamsMember {
            session_deadline: now + i64::from(cfg.session_timeout_ms),
            ..StreamsMember::restored(id)
        }
    }
}

#[derive(Debug)]
pub struct StreamsGroup {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    assignment_timestamp: i64,
    pub topology: Option<Topology>,
    /// The configured topology and the partition counts of the required topics it was
    /// configured from.
    configured: Option<(Configured, BTreeMap<String, i32>)>,
    validated_topology_epoch: i32,
    last_standby_replicas: Option<i32>,
    pub members: BTreeMap<String, StreamsMember>,
    pub target: BTreeMap<String, Tasks>,
    static_members: HashMap<String, String>,
    /// The initial rebalance delay's end, while it runs.
    initial_delay_until: Option<i64>,
    shutdown_requester: Option<String>,
    endpoint_epoch: i32,
    epoch_change: bool,
    persisted: records::Persisted,
}

impl Default for StreamsGroup {
    fn default() -> Self {
        StreamsGroup {
            group_epoch: 1,
            assignment_epoch: 1,
            assignment_timestamp: 0,
            topology: None,
            configured: None,
            validated_topology_epoch: -1,
            last_standby_replicas: None,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            static_members: HashMap::new(),
            initial_delay_until: None,
            shutdown_requester: None,
            endpoint_epoch: 0,
            epoch_change: false,
            persisted: records::Persisted::default(),
        }
    }
}

impl StreamsGroup {
    /// Kafka's streams group states (StreamsGroupDescribe, ListGroups).
    pub fn state_name(&self) -> &'static str {
        let ready = self
            .topology
            .as_ref()
            .is_some_and(|t| t.epoch == self.validated_topology_epoch);
        if self.members.is_empty() {
            "Empty"
        } else if !ready {
            "NotReady"
        } else if self.assignment_epoch < self.group_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.state != MemberState::Stable || m.epoch != self.assignment_epoch)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The configured topology, when the group has one.
    pub fn configured(&self) -> Option<&Configured> {
        self.configured.as_ref().map(|(c, _)| c)
    }

    fn bump(&mut self) {
        self.epoch_change = true;
    }

    pub fn heartbeat(
        &mut self,
        p: HeartbeatParams,
        topics: &BTreeMap<String, i32>,
        now: i64,
        cfg: &StreamsConfig,
    ) -> Result<HeartbeatResult, GroupError> {
        if p.member_epoch == LEAVE_EPOCH || p.member_epoch == STATIC_LEAVE_EPOCH {
            return self.leave(&p);
        }
        let was_empty = self.members.is_empty();
        let id = self.member_for(&p, now, cfg)?;
        self.update_member(&id, &p);
        let mut statuses = Vec::new();
        if let Some(t) = &p.topology {
            match &self.topology {
                None => {
                    self.topology = Some(t.clone());
                    self.configured = None;
                    self.bump();
                }
                Some(g) if g.epoch > t.epoch => {}
                Some(g) if g != t => {
                    return Err(GroupError::InvalidRequest(
                        "Topology updates are not supported yet.".into(),
                    ))
                }
                Some(_) => {}
            }
        }
        let group_topology_epoch = self.topology.as_ref().map_or(-1, |t| t.epoch);
        let member_topology_epoch = self.members[&id].topology_epoch;
        if member_topology_epoch < group_topology_epoch {
            statuses.push((
                status::STALE_TOPOLOGY,
                format!(
                    "The member's topology epoch {member_topology_epoch} is behind the group's topology epoch {group_topology_epoch}."
                ),
            ));
        }
        self.configure(topics)?;
        if let (Some(owned), Some(c)) = (&p.owned, self.configured()) {
            if c.is_ready() {
                check_owned(owned, c)?;
            }
        }
        if self.last_standby_replicas != Some(cfg.num_standby_replicas) {
            self.last_standby_replicas = Some(cfg.num_standby_replicas);
            self.bump();
        }
        if std::mem::take(&mut self.epoch_change) {
            self.group_epoch += 1;
        }
        if was_empty && cfg.initial_rebalance_delay_ms > 0 && self.initial_delay_until.is_none() {
            self.initial_delay_until = Some(now + cfg.initial_rebalance_delay_ms);
        }
        if let Some(delayed) = self.maybe_compute_target(now, cfg) {
            statuses.push((status::ASSIGNMENT_DELAYED, delayed.into()));
        }
        let before = self.members[&id].assigned.clone();
        let before_epochs = self.members[&id].task_epochs.clone();
        self.reconcile(&id, p.owned.as_ref(), now)?;
        let m = self.members.get_mut(&id).expect("member");
        m.session_deadline = now + i64::from(cfg.session_timeout_ms);
        let changed = m.assigned != before || m.task_epochs != before_epochs;
        if changed && m.user_endpoint.is_some() {
            self.endpoint_epoch += 1;
        }
        if p.shutdown_application && self.shutdown_requester.is_none() {
            self.shutdown_requester = Some(id.clone());
        }
        if let Some(requester) = &self.shutdown_requester {
            statuses.push((
                status::SHUTDOWN_APPLICATION,
                format!("Streams group member {requester} encountered a fatal error and requested a shutdown for the entire application."),
            ));
        }
        // Only the status and the topics to create: the configured topology stays here.
        let (status, to_create) = self
            .configured()
            .map(|c| (c.status.clone(), c.to_create.clone()))
            .unwrap_or_default();
        statuses.extend(status);
        let m = &self.members[&id];
        let tasks = (p.member_epoch == 0 || changed).then(|| m.assigned.clone());
        let endpoints = (p.endpoint_epoch != self.endpoint_epoch).then(|| self.endpoints(&id));
        Ok(HeartbeatResult {
            member_id: id,
            member_epoch: m.epoch,
            heartbeat_interval_ms: cfg.heartbeat_interval_ms,
            task_offset_interval_ms: cfg.task_offset_interval_ms,
            acceptable_recovery_lag: cfg.acceptable_recovery_lag,
            statuses,
            tasks,
            endpoint_epoch: self.endpoint_epoch,
            endpoints,
            to_create,
        })
    }

    /// Finds the member of a heartbeat (or creates it, at epoch 0), with Kafka's checks.
    fn member_for(
        &mut self,
        p: &HeartbeatParams,
        now: i64,
        cfg: &StreamsConfig,
    ) -> Result<String, GroupError> {
        let id = p.member_id.clone();
        if let Some(iid) = &p.instance_id {
            match (self.static_members.get(iid).cloned(), p.member_epoch) {
                (None, 0) => {}
                (None, _) => return Err(GroupError::UnknownMemberId),
                (Some(owner), 0) if owner != id => {
                    if self.members.get(&owner).map(|m| m.epoch) != Some(STATIC_LEAVE_EPOCH) {
                        return Err(GroupError::UnreleasedInstanceId);
                    }
                    // The restarted instance takes over the old member's place.
                    let mut m = self.members.remove(&owner).expect("static member");
                    m.member_id = id.clone();
                    m.epoch = 0;
                    m.previous_epoch = 0;
                    if let Some(t) = self.target.remove(&owner) {
                        self.target.insert(id.clone(), t);
                    }
                    self.members.insert(id.clone(), m);
                    self.static_members.insert(iid.clone(), id.clone());
                    return Ok(id);
                }
                (Some(owner), e) if e != 0 && owner != id => {
                    return Err(GroupError::FencedInstanceId)
                }
                _ => {}
            }
        }
        if p.member_epoch == 0 {
            if !self.members.contains_key(&id) {
                if self.members.len() >= cfg.max_size {
                    return Err(GroupError::GroupMaxSizeReached);
                }
                self.members
                    .insert(id.clone(), StreamsMember::new(&id, now, cfg));
                if let Some(iid) = &p.instance_id {
                    self.static_members.insert(iid.clone(), id.clone());
                }
                self.bump();
            }
            return Ok(id);
        }
        let m = self.members.get(&id).ok_or(GroupError::UnknownMemberId)?;
        self.check_epoch(m, p)?;
        Ok(id)
    }

    /// Kafka's `throwIfStreamsGroupMemberEpochIsInvalid`.
    fn check_epoch(&self, m: &StreamsMember, p: &HeartbeatParams) -> Result<(), GroupError> {
        if p.member_epoch == m.epoch {
            return Ok(());
        }
        if p.member_epoch < m.epoch
            && p.member_epoch == m.previous_epoch
            && p.owned
                .as_ref()
                .is_some_and(|o| reconcile::within(o, &m.assigned))
        {
            return Ok(());
        }
        Err(GroupError::FencedMemberEpoch)
    }

    fn update_member(&mut self, id: &str, p: &HeartbeatParams) {
        let m = self.members.get_mut(id).expect("member");
        let is_static = m.instance_id.is_some() || p.instance_id.is_some();
        let mut changed = false;
        let mut assignment_relevant = false;
        macro_rules! set {
            ($field:ident, $value:expr, $relevant:expr) => {
                if m.$field != $value {
                    m.$field = $value;
                    changed = true;
                    assignment_relevant |= $relevant;
                }
            };
        }
        if let Some(v) = &p.instance_id {
            set!(instance_id, Some(v.clone()), false);
        }
        if let Some(v) = &p.rack_id {
            set!(rack_id, Some(v.clone()), true);
        }
        if p.rebalance_timeout_ms >= 0 {
            set!(rebalance_timeout_ms, p.rebalance_timeout_ms, false);
        }
        if let Some(v) = &p.process_id {
            set!(process_id, v.clone(), true);
        }
        if let Some(v) = &p.client_tags {
            set!(client_tags, v.clone(), true);
        }
        if let Some(t) = &p.topology {
            set!(topology_epoch, t.epoch, true);
        }
        let endpoint_before = m.user_endpoint.clone();
        if p.member_epoch == 0 || p.user_endpoint.is_some() {
            set!(user_endpoint, p.user_endpoint.clone(), false);
        }
        m.client_id = p.client_id.clone();
        m.client_host = p.client_host.clone();
        if m.user_endpoint != endpoint_before {
            self.endpoint_epoch += 1;
        }
        if changed && (!is_static || assignment_relevant) {
            self.bump();
        }
    }

    /// Configures the topology when it or the partition counts of its topics changed; a
    /// change of the configured form moves the group epoch.
    fn configure(&mut self, topics: &BTreeMap<String, i32>) -> Result<(), GroupError> {
        let Some(t) = &self.topology else {
            return Ok(());
        };
        let required = t.required_topics();
        let snapshot: BTreeMap<String, i32> = topics
            .iter()
            .filter(|(n, _)| required.contains(*n))
            .map(|(n, c)| (n.clone(), *c))
            .collect();
        if self
            .configured
            .as_ref()
            .is_some_and(|(_, s)| *s == snapshot)
        {
            return Ok(());
        }
        let c = topology::configure(t, &snapshot)
            .map_err(|e| GroupError::StreamsInvalidTopology(e.0))?;
        let validated = if c.is_ready() { t.epoch } else { -1 };
        // The first configuration after a load changes nothing the members were assigned from
        // unless its readiness differs (a new topology bumped the epoch when it was set).
        let moved = self.configured.as_ref().is_some_and(|(old, _)| *old != c);
        if moved || validated != self.validated_topology_epoch {
            self.bump();
        }
        self.validated_topology_epoch = validated;
        self.configured = Some((c, snapshot));
        Ok(())
    }

    /// Recomputes the target when the group epoch moved, unless a delay holds it back (then
    /// the reason, ASSIGNMENT_DELAYED's detail).
    fn maybe_compute_target(&mut self, now: i64, cfg: &StreamsConfig) -> Option<&'static str> {
        if self.initial_delay_until.is_some() {
            return Some("Assignment delayed due to the configured initial rebalance delay.");
        }
        if self.assignment_epoch >= self.group_epoch {
            return None;
        }
        if self.assignment_timestamp != 0
            && cfg.assignment_interval_ms != 0
            && now < self.assignment_timestamp + cfg.assignment_interval_ms
        {
            return Some("Assignment delayed due to the configured assignment interval.");
        }
        self.compute_target(now, cfg);
        None
    }

    fn compute_target(&mut self, now: i64, cfg: &StreamsConfig) {
        let ready = self.configured().filter(|c| c.is_ready());
        self.target = match (ready, &self.topology) {
            (Some(c), Some(t)) => {
                let specs: Vec<assignor::MemberSpec<'_>> = self
                    .members
                    .values()
                    .map(|m| assignor::MemberSpec {
                        member_id: &m.member_id,
                        process_id: &m.process_id,
                        current: &m.assigned,
                    })
                    .collect();
                let stateful: BTreeSet<String> = t
                    .subtopologies
                    .iter()
                    .filter(|s| !s.changelogs.is_empty())
                    .map(|s| s.id.clone())
                    .collect();
                let tasks = c.tasks.clone().unwrap_or_default();
                assignor::assign(&specs, &tasks, &stateful, cfg.num_standby_replicas)
            }
            _ => self
                .members
                .keys()
                .map(|id| (id.clone(), Tasks::default()))
                .collect(),
        };
        self.assignment_epoch = self.group_epoch;
        self.assignment_timestamp = now;
    }

    fn leave(&mut self, p: &HeartbeatParams) -> Result<HeartbeatResult, GroupError> {
        let id = match &p.instance_id {
            Some(iid) => {
                let owner = self
                    .static_members
                    .get(iid)
                    .cloned()
                    .ok_or(GroupError::UnknownMemberId)?;
                if owner != p.member_id {
                    return Err(GroupError::FencedInstanceId);
                }
                owner
            }
            None if self.members.contains_key(&p.member_id) => p.member_id.clone(),
            None => return Err(GroupError::UnknownMemberId),
        };
        if p.shutdown_application && self.shutdown_requester.is_none() {
            self.shutdown_requester = Some(id.clone());
        }
        if p.member_epoch == STATIC_LEAVE_EPOCH {
            // The member stays (its session runs on) so the restarted instance takes over.
            let m = self.members.get_mut(&id).expect("member");
            m.previous_epoch = m.epoch;
            m.epoch = STATIC_LEAVE_EPOCH;
            m.pending_revocation = Tasks::default();
            m.task_epochs.values_mut().for_each(|e| *e = 0);
        } else {
            self.fence(&id);
        }
        Ok(HeartbeatResult {
            member_id: p.member_id.clone(),
            member_epoch: p.member_epoch,
            heartbeat_interval_ms: 0,
            task_offset_interval_ms: 0,
            acceptable_recovery_lag: 0,
            statuses: Vec::new(),
            tasks: None,
            endpoint_epoch: 0,
            endpoints: None,
            to_create: Vec::new(),
        })
    }

    /// Removes a member and moves the group epoch (its tasks go to the others).
    fn fence(&mut self, id: &str) {
        if let Some(m) = self.members.remove(id) {
            if let Some(iid) = &m.instance_id {
                if self.static_members.get(iid).map(String::as_str) == Some(id) {
                    self.static_members.remove(iid);
                }
            }
            self.target.remove(id);
            self.group_epoch += 1;
            if m.user_endpoint.is_some() {
                self.endpoint_epoch += 1;
            }
        }
        if self.members.is_empty() {
            self.shutdown_requester = None;
            self.initial_delay_until = None;
        }
    }

    /// Expired sessions and revocations past the rebalance timeout fence their members; the
    /// initial rebalance delay's end computes the target.
    pub fn tick(&mut self, now: i64, cfg: &StreamsConfig) {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.session_deadline <= now || m.revocation_deadline.is_some_and(|d| d <= now)
            })
            .map(|m| m.member_id.clone())
            .collect();
        for id in gone {
            tracing::debug!(member = %id, "streams group member expired");
            self.fence(&id);
        }
        if self.initial_delay_until.is_some_and(|d| d <= now) {
            self.initial_delay_until = None;
            if !self.members.is_empty() {
                self.compute_target(now, cfg);
            }
        }
    }

    /// The partitions each member with an endpoint reads (interactive queries); `last` comes
    /// last, as Kafka orders them.
    fn endpoints(&self, last: &str) -> Vec<EndpointPartitions> {
        let inputs = self.configured().map(|c| &c.inputs);
        let partitions = |set: &[&TaskSet]| {
            let mut out: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
            let Some(inputs) = inputs else { return out };
            for tasks in set {
                for (s, ps) in tasks.iter() {
                    for (topic, count) in inputs.get(s).into_iter().flatten() {
                        for p in ps.iter().filter(|p| **p < *count) {
                            out.entry(topic.clone()).or_default().insert(*p);
                        }
                    }
                }
            }
            out
        };
        let mut members: Vec<&StreamsMember> = self.members.values().collect();
        members.sort_by_key(|m| m.member_id == last);
        members
            .into_iter()
            .filter_map(|m| {
                Some(EndpointPartitions {
                    endpoint: m.user_endpoint.clone()?,
                    active: partitions(&[&m.assigned.active]),
                    standby: partitions(&[&m.assigned.standby, &m.assigned.warmup]),
                })
            })
            .collect()
    }
}

/// Owned tasks must name subtopologies and tasks of the configured topology.
fn check_owned(owned: &Tasks, c: &Configured) -> Result<(), GroupError> {
    let tasks = c.tasks.as_ref().expect("ready");
    for set in [&owned.active, &owned.standby, &owned.warmup] {
        for (s, ps) in set {
            let Some(n) = tasks.get(s) else {
                return Err(GroupError::InvalidRequest(format!(
                    "Subtopology {s} does not exist in the topology."
                )));
            };
            if let Some(p) = ps.iter().find(|p| **p < 0 || **p >= *n) {
                return Err(GroupError::InvalidRequest(format!(
                    "Task {p} for subtopology {s} is invalid. Number of tasks for this subtopology: {n}"
                )));
            }
        }
    }
    Ok(())
}
