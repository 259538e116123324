//! A streams group in `__consumer_offsets`, in Kafka's own records (types 17 and 19–23, the
//! codec generated from the group coordinator's schemas): what changed since the last write
//! becomes records (`take_records`), and a load replays them (`restore`), so a restarted
//! broker knows its streams groups, their members, epochs and tasks, and the members carry on
//! without a rebalance.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::protocol::Decodable;

use super::topology::{CopartitionGroup, Subtopology, TopicInfo, Topology};
use super::{MemberState, StreamsGroup, StreamsMember, TaskSet, Tasks};
use crate::codec::generated::{decode_record_value as decode, encode_record as encode};
use crate::codec::generated::{
    streams_group_current_member_assignment_key as current_key,
    streams_group_current_member_assignment_value as current_value,
    streams_group_member_metadata_key as member_key,
    streams_group_member_metadata_value as member_value, streams_group_metadata_key as meta_key,
    streams_group_metadata_value as meta_value,
    streams_group_target_assignment_member_key as target_key,
    streams_group_target_assignment_member_value as target_value,
    streams_group_target_assignment_metadata_key as target_meta_key,
    streams_group_target_assignment_metadata_value as target_meta_value,
    streams_group_topology_key as topology_key, streams_group_topology_value as topology_value,
};

/// The assignment config Strom's sticky assignor reads, as Kafka names it in
/// `LastAssignmentConfigs`.
const STANDBY_KEY: &str = "num.standby.replicas";

/// One streams group record; `None` values are tombstones.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamsRecord {
    Metadata(String, Option<meta_value::StreamsGroupMetadataValue>),
    Member(
        String,
        String,
        Option<member_value::StreamsGroupMemberMetadataValue>,
    ),
    TargetMetadata(
        String,
        Option<target_meta_value::StreamsGroupTargetAssignmentMetadataValue>,
    ),
    TargetMember(
        String,
        String,
        Option<target_value::StreamsGroupTargetAssignmentMemberValue>,
    ),
    Current(
        String,
        String,
        Option<current_value::StreamsGroupCurrentMemberAssignmentValue>,
    ),
    Topology(String, Option<topology_value::StreamsGroupTopologyValue>),
}

/// The record types (key versions) of streams group records.
pub fn is_streams_type(t: i16) -> bool {
    t == meta_key::API_KEY || (member_key::API_KEY..=topology_key::API_KEY).contains(&t)
}

impl StreamsRecord {
    pub fn group(&self) -> &str {
        match self {
            StreamsRecord::Metadata(g, _)
            | StreamsRecord::Member(g, _, _)
            | StreamsRecord::TargetMetadata(g, _)
            | StreamsRecord::TargetMember(g, _, _)
            | StreamsRecord::Current(g, _, _)
            | StreamsRecord::Topology(g, _) => g,
        }
    }

    pub fn encode(&self) -> (Bytes, Option<Bytes>) {
        let s = |g: &String| g.clone();
        match self {
            StreamsRecord::Metadata(g, v) => {
                let k = meta_key::StreamsGroupMetadataKey {
                    group_id: s(g),
                    ..Default::default()
                };
                encode(meta_key::API_KEY, &k, v.as_ref())
            }
            StreamsRecord::Member(g, m, v) => {
                let k = member_key::StreamsGroupMemberMetadataKey {
                    group_id: s(g),
                    member_id: s(m),
                    ..Default::default()
                };
                encode(member_key::API_KEY, &k, v.as_ref())
            }
            StreamsRecord::TargetMetadata(g, v) => {
                let k = target_meta_key::StreamsGroupTargetAssignmentMetadataKey {
                    group_id: s(g),
                    ..Default::default()
                };
                encode(target_meta_key::API_KEY, &k, v.as_ref())
            }
            StreamsRecord::TargetMember(g, m, v) => {
                let k = target_key::StreamsGroupTargetAssignmentMemberKey {
                    group_id: s(g),
                    member_id: s(m),
                    ..Default::default()
                };
                encode(target_key::API_KEY, &k, v.as_ref())
            }
            StreamsRecord::Current(g, m, v) => {
                let k = current_key::StreamsGroupCurrentMemberAssignmentKey {
                    group_id: s(g),
                    member_id: s(m),
                    ..Default::default()
                };
                encode(current_key::API_KEY, &k, v.as_ref())
            }
            StreamsRecord::Topology(g, v) => {
                let k = topology_key::StreamsGroupTopologyKey {
                    group_id: s(g),
                    ..Default::default()
                };
                encode(topology_key::API_KEY, &k, v.as_ref())
            }
        }
    }

    /// `key` without its record type `t` (the first two bytes).
    pub fn decode(t: i16, key: &[u8], value: Option<&[u8]>) -> anyhow::Result<StreamsRecord> {
        let mut k = Bytes::copy_from_slice(key);
        Ok(match t {
            meta_key::API_KEY => {
                let k = meta_key::StreamsGroupMetadataKey::decode(&mut k, 0)?;
                StreamsRecord::Metadata(k.group_id, decode(value)?)
            }
            member_key::API_KEY => {
                let k = member_key::StreamsGroupMemberMetadataKey::decode(&mut k, 0)?;
                StreamsRecord::Member(k.group_id, k.member_id, decode(value)?)
            }
            target_meta_key::API_KEY => {
                let k =
                    target_meta_key::StreamsGroupTargetAssignmentMetadataKey::decode(&mut k, 0)?;
                StreamsRecord::TargetMetadata(k.group_id, decode(value)?)
            }
            target_key::API_KEY => {
                let k = target_key::StreamsGroupTargetAssignmentMemberKey::decode(&mut k, 0)?;
                StreamsRecord::TargetMember(k.group_id, k.member_id, decode(value)?)
            }
            current_key::API_KEY => {
                let k = current_key::StreamsGroupCurrentMemberAssignmentKey::decode(&mut k, 0)?;
                StreamsRecord::Current(k.group_id, k.member_id, decode(value)?)
            }
            topology_key::API_KEY => {
                let k = topology_key::StreamsGroupTopologyKey::decode(&mut k, 0)?;
                StreamsRecord::Topology(k.group_id, decode(value)?)
            }
            other => anyhow::bail!("record type {other} is not a streams group's"),
        })
    }
}

/// What `__consumer_offsets` holds of the group, to write only what changed.
#[derive(Debug, Default)]
pub(super) struct Persisted {
    /// Group epoch, validated topology epoch, the standby count the target used.
    metadata: Option<(i32, i32, Option<i32>)>,
    topology_epoch: Option<i32>,
    target_epoch: Option<i32>,
    members: BTreeMap<String, member_value::StreamsGroupMemberMetadataValue>,
    targets: BTreeMap<String, Tasks>,
    current: BTreeMap<String, current_value::StreamsGroupCurrentMemberAssignmentValue>,
}

fn state_code(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 1,
        MemberState::UnrevokedTasks => 2,
        MemberState::UnreleasedTasks => 3,
    }
}

fn state_of(code: i8) -> MemberState {
    match code {
        2 => MemberState::UnrevokedTasks,
        3 => MemberState::UnreleasedTasks,
        _ => MemberState::Stable,
    }
}

fn target_ids(set: &TaskSet) -> Vec<target_value::TaskIds> {
    set.iter()
        .map(|(s, ps)| target_value::TaskIds {
            subtopology_id: s.clone(),
            partitions: ps.iter().copied().collect(),
            ..Default::default()
        })
        .collect()
}

fn from_target_ids(ids: &[target_value::TaskIds]) -> TaskSet {
    ids.iter()
        .map(|t| {
            (
                t.subtopology_id.clone(),
                t.partitions.iter().copied().collect(),
            )
        })
        .filter(|(_, ps): &(String, std::collections::BTreeSet<i32>)| !ps.is_empty())
        .collect()
}

/// Task ids with each active task's assignment epoch (Kafka's `AssignmentEpochs`).
fn current_ids(
    set: &TaskSet,
    epochs: Option<&BTreeMap<(String, i32), i32>>,
) -> Vec<current_value::TaskIds> {
    set.iter()
        .map(|(s, ps)| current_value::TaskIds {
            subtopology_id: s.clone(),
            partitions: ps.iter().copied().collect(),
            assignment_epochs: epochs.map(|e| {
                ps.iter()
                    .map(|p| e.get(&(s.clone(), *p)).copied().unwrap_or(0))
                    .collect()
            }),
            ..Default::default()
        })
        .collect()
}

fn from_current_ids(
    ids: &[current_value::TaskIds],
    epochs: &mut BTreeMap<(String, i32), i32>,
) -> TaskSet {
    let mut out = TaskSet::new();
    for t in ids {
        for (i, p) in t.partitions.iter().enumerate() {
            out.entry(t.subtopology_id.clone()).or_default().insert(*p);
            if let Some(e) = t.assignment_epochs.as_ref().and_then(|e| e.get(i)) {
                epochs.insert((t.subtopology_id.clone(), *p), *e);
            }
        }
    }
    out
}

fn topology_value(t: &Topology) -> topology_value::StreamsGroupTopologyValue {
    let info = |i: &TopicInfo| topology_value::TopicInfo {
        name: i.name.clone(),
        partitions: i.partitions,
        replication_factor: i.replication_factor,
        topic_configs: i
            .configs
            .iter()
            .map(|(k, v)| topology_value::TopicConfig {
                key: k.clone(),
                value: v.clone(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    topology_value::StreamsGroupTopologyValue {
        epoch: t.epoch,
        subtopologies: t
            .subtopologies
            .iter()
            .map(|s| topology_value::Subtopology {
                subtopology_id: s.id.clone(),
                source_topics: s.source_topics.clone(),
                state_changelog_topics: s.changelogs.iter().map(info).collect(),
                repartition_sink_topics: s.repartition_sinks.clone(),
                repartition_source_topics: s.repartition_sources.iter().map(info).collect(),
                copartition_groups: s
                    .copartition_groups
                    .iter()
                    .map(|g| topology_value::CopartitionGroup {
                        source_topics: g.source_topics.clone(),
                        repartition_source_topics: g.repartition_source_topics.clone(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn topology_of(v: &topology_value::StreamsGroupTopologyValue) -> Topology {
    let info = |i: &topology_value::TopicInfo| TopicInfo {
        name: i.name.clone(),
        partitions: i.partitions,
        replication_factor: i.replication_factor,
        configs: i
            .topic_configs
            .iter()
            .map(|c| (c.key.clone(), c.value.clone()))
            .collect(),
    };
    Topology {
        epoch: v.epoch,
        subtopologies: v
            .subtopologies
            .iter()
            .map(|s| Subtopology {
                id: s.subtopology_id.clone(),
                source_topics: s.source_topics.clone(),
                changelogs: s.state_changelog_topics.iter().map(info).collect(),
                repartition_sinks: s.repartition_sink_topics.clone(),
                repartition_sources: s.repartition_source_topics.iter().map(info).collect(),
                copartition_groups: s
                    .copartition_groups
                    .iter()
                    .map(|g| CopartitionGroup {
                        source_topics: g.source_topics.clone(),
                        repartition_source_topics: g.repartition_source_topics.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

impl StreamsMember {
    fn metadata_value(&self) -> member_value::StreamsGroupMemberMetadataValue {
        member_value::StreamsGroupMemberMetadataValue {
            instance_id: self.instance_id.clone(),
            rack_id: self.rack_id.clone(),
            client_id: self.client_id.clone(),
            client_host: self.client_host.clone(),
            rebalance_timeout_ms: self.rebalance_timeout_ms,
            topology_epoch: self.topology_epoch,
            process_id: self.process_id.clone(),
            user_endpoint: self
                .user_endpoint
                .as_ref()
                .map(|(host, port)| member_value::Endpoint {
                    host: host.clone(),
                    port: *port,
                    ..Default::default()
                }),
            client_tags: self
                .client_tags
                .iter()
                .map(|(k, v)| member_value::KeyValue {
                    key: k.clone(),
                    value: v.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn current_value(&self) -> current_value::StreamsGroupCurrentMemberAssignmentValue {
        current_value::StreamsGroupCurrentMemberAssignmentValue {
            member_epoch: self.epoch,
            previous_member_epoch: self.previous_epoch,
            state: state_code(self.state),
            active_tasks: current_ids(&self.assigned.active, Some(&self.task_epochs)),
            standby_tasks: current_ids(&self.assigned.standby, None),
            warmup_tasks: current_ids(&self.assigned.warmup, None),
            active_tasks_pending_revocation: current_ids(
                &self.pending_revocation.active,
                Some(&self.task_epochs),
            ),
            standby_tasks_pending_revocation: current_ids(&self.pending_revocation.standby, None),
            warmup_tasks_pending_revocation: current_ids(&self.pending_revocation.warmup, None),
            ..Default::default()
        }
    }
}

impl StreamsGroup {
    /// The records that bring `__consumer_offsets` up to date with the group, in Kafka's
    /// order (members, topology, group metadata, targets, target metadata, current
    /// assignments; a member gone: its current assignment, target and metadata tombstones),
    /// and marks them written.
    pub fn take_records(&mut self, group: &str) -> Vec<StreamsRecord> {
        let g = || group.to_string();
        let mut out = Vec::new();
        let p = &mut self.persisted;
        let gone: Vec<String> = p
            .members
            .keys()
            .filter(|id| !self.members.contains_key(*id))
            .cloned()
            .collect();
        for id in &gone {
            out.push(StreamsRecord::Current(g(), id.clone(), None));
            out.push(StreamsRecord::TargetMember(g(), id.clone(), None));
            out.push(StreamsRecord::Member(g(), id.clone(), None));
            p.members.remove(id);
            p.targets.remove(id);
            p.current.remove(id);
        }
        for (id, m) in &self.members {
            let v = m.metadata_value();
            if p.members.get(id) != Some(&v) {
                out.push(StreamsRecord::Member(g(), id.clone(), Some(v.clone())));
                p.members.insert(id.clone(), v);
            }
        }
        if let Some(t) = &self.topology {
            if p.topology_epoch != Some(t.epoch) {
                out.push(StreamsRecord::Topology(g(), Some(topology_value(t))));
                p.topology_epoch = Some(t.epoch);
            }
        }
        let meta = (
            self.group_epoch,
            self.validated_topology_epoch,
            self.last_standby_replicas,
        );
        if p.metadata != Some(meta) {
            out.push(StreamsRecord::Metadata(
                g(),
                Some(meta_value::StreamsGroupMetadataValue {
                    epoch: meta.0,
                    validated_topology_epoch: meta.1,
                    // Kafka's LastAssignmentConfigs: a change of them moves the epoch.
                    last_assignment_configs: meta.2.map(|n| {
                        vec![meta_value::LastAssignmentConfig {
                            key: STANDBY_KEY.into(),
                            value: n.to_string(),
                            ..Default::default()
                        }]
                    }),
                    ..Default::default()
                }),
            ));
            p.metadata = Some(meta);
        }
        for (id, t) in &self.target {
            if p.targets.get(id) != Some(t) {
                out.push(StreamsRecord::TargetMember(
                    g(),
                    id.clone(),
                    Some(target_value::StreamsGroupTargetAssignmentMemberValue {
                        active_tasks: target_ids(&t.active),
                        standby_tasks: target_ids(&t.standby),
                        warmup_tasks: target_ids(&t.warmup),
                        ..Default::default()
                    }),
                ));
                p.targets.insert(id.clone(), t.clone());
            }
        }
        if p.target_epoch != Some(self.assignment_epoch) {
            out.push(StreamsRecord::TargetMetadata(
                g(),
                Some(
                    target_meta_value::StreamsGroupTargetAssignmentMetadataValue {
                        assignment_epoch: self.assignment_epoch,
                        assignment_timestamp: self.assignment_timestamp,
                        ..Default::default()
                    },
                ),
            ));
            p.target_epoch = Some(self.assignment_epoch);
        }
        for (id, m) in &self.members {
            let v = m.current_value();
            if p.current.get(id) != Some(&v) {
                out.push(StreamsRecord::Current(g(), id.clone(), Some(v.clone())));
                p.current.insert(id.clone(), v);
            }
        }
        out
    }

    /// The tombstones of the whole group (DeleteGroups), in Kafka's order.
    pub fn tombstones(&self, group: &str) -> Vec<StreamsRecord> {
        let g = || group.to_string();
        let mut out = Vec::new();
        for id in self.persisted.current.keys() {
            out.push(StreamsRecord::Current(g(), id.clone(), None));
        }
        for id in self.persisted.targets.keys() {
            out.push(StreamsRecord::TargetMember(g(), id.clone(), None));
        }
        out.push(StreamsRecord::TargetMetadata(g(), None));
        for id in self.persisted.members.keys() {
            out.push(StreamsRecord::Member(g(), id.clone(), None));
        }
        out.push(StreamsRecord::Metadata(g(), None));
        out.push(StreamsRecord::Topology(g(), None));
        out
    }

    /// Replays one record of the group (a load of `__consumer_offsets`); what it restores
    /// counts as written.
    pub fn restore(&mut self, rec: StreamsRecord) {
        let p = &mut self.persisted;
        match rec {
            StreamsRecord::Metadata(_, Some(v)) => {
                self.group_epoch = v.epoch;
                self.validated_topology_epoch = v.validated_topology_epoch;
                self.last_standby_replicas = v
                    .last_assignment_configs
                    .iter()
                    .flatten()
                    .find(|c| c.key == STANDBY_KEY)
                    .and_then(|c| c.value.parse().ok());
                p.metadata = Some((
                    v.epoch,
                    v.validated_topology_epoch,
                    self.last_standby_replicas,
                ));
            }
            StreamsRecord::Metadata(_, None) => {}
            StreamsRecord::Topology(_, v) => {
                self.topology = v.as_ref().map(topology_of);
                p.topology_epoch = self.topology.as_ref().map(|t| t.epoch);
                self.configured = None;
            }
            StreamsRecord::TargetMetadata(_, v) => {
                let v = v.unwrap_or_default();
                self.assignment_epoch = v.assignment_epoch;
                self.assignment_timestamp = v.assignment_timestamp;
                p.target_epoch = Some(v.assignment_epoch);
            }
            StreamsRecord::TargetMember(_, id, Some(v)) => {
                let t = Tasks {
                    active: from_target_ids(&v.active_tasks),
                    standby: from_target_ids(&v.standby_tasks),
                    warmup: from_target_ids(&v.warmup_tasks),
                };
                p.targets.insert(id.clone(), t.clone());
                self.target.insert(id, t);
            }
            StreamsRecord::TargetMember(_, id, None) => {
                p.targets.remove(&id);
                self.target.remove(&id);
            }
            StreamsRecord::Member(_, id, Some(v)) => {
                let m = self
                    .members
                    .entry(id.clone())
                    .or_insert_with(|| StreamsMember::restored(&id));
                m.instance_id = v.instance_id.clone();
                m.rack_id = v.rack_id.clone();
                m.client_id = v.client_id.clone();
                m.client_host = v.client_host.clone();
                m.rebalance_timeout_ms = v.rebalance_timeout_ms;
                m.topology_epoch = v.topology_epoch;
                m.process_id = v.process_id.clone();
                m.user_endpoint = v.user_endpoint.as_ref().map(|e| (e.host.clone(), e.port));
                m.client_tags = v
                    .client_tags
                    .iter()
                    .map(|kv| (kv.key.clone(), kv.value.clone()))
                    .collect();
                if let Some(iid) = &v.instance_id {
                    self.static_members.insert(iid.clone(), id.clone());
                }
                p.members.insert(id, v);
            }
            StreamsRecord::Member(_, id, None) => {
                if let Some(m) = self.members.remove(&id) {
                    if let Some(iid) = &m.instance_id {
                        self.static_members.remove(iid);
                    }
                }
                p.members.remove(&id);
            }
            StreamsRecord::Current(_, id, Some(v)) => {
                let m = self
                    .members
                    .entry(id.clone())
                    .or_insert_with(|| StreamsMember::restored(&id));
                m.epoch = v.member_epoch;
                m.previous_epoch = v.previous_member_epoch;
                m.state = state_of(v.state);
                m.task_epochs.clear();
                m.assigned = Tasks {
                    active: from_current_ids(&v.active_tasks, &mut m.task_epochs),
                    standby: from_current_ids(&v.standby_tasks, &mut BTreeMap::new()),
                    warmup: from_current_ids(&v.warmup_tasks, &mut BTreeMap::new()),
                };
                m.pending_revocation = Tasks {
                    active: from_current_ids(
                        &v.active_tasks_pending_revocation,
                        &mut m.task_epochs,
                    ),
                    standby: from_current_ids(
                        &v.standby_tasks_pending_revocation,
                        &mut BTreeMap::new(),
                    ),
                    warmup: from_current_ids(
                        &v.warmup_tasks_pending_revocation,
                        &mut BTreeMap::new(),
                    ),
                };
                p.current.insert(id, v);
            }
            StreamsRecord::Current(_, id, None) => {
                p.current.remove(&id);
            }
        }
    }

    /// After a load: the members' sessions start now (Kafka's coordinator does the same when
    /// it becomes a group's coordinator).
    pub fn finish_restore(&mut self, now: i64, session_timeout_ms: i32) {
        for m in self.members.values_mut() {
            m.session_deadline = now + i64::from(session_timeout_ms);
            if m.state == MemberState::UnrevokedTasks {
                m.revocation_deadline = Some(now + i64::from(m.rebalance_timeout_ms));
            }
        }
    }
}
