//! StreamsGroupDescribe (key 89, KIP-1071): a streams group's state, epochs, topology (with
//! the partition counts the broker derived, once it is configured) and members with their
//! current and target tasks, as Kafka's `StreamsGroup.asDescribedGroup` answers. No topology
//! description plugin is configured (Kafka's default), so a v1 request asking for the
//! description gets status NOT_STORED (1).

use kafka_protocol::error::ResponseError;

use super::streams_group_heartbeat::streams_enabled;
use super::RequestContext;
use crate::codec::generated::streams_group_describe_request::{
    self as req_schema, StreamsGroupDescribeRequest,
};
use crate::codec::generated::streams_group_describe_response::{
    Assignment, DescribedGroup, Endpoint, KeyValue, Member, StreamsGroupDescribeResponse,
    Subtopology, TaskIds, TopicInfo, Topology,
};
use crate::coordinator::group::coordinator::StreamsFailure;
use crate::coordinator::group::streams::{self, StreamsGroup, TaskSet, Tasks};
use crate::coordinator::group::{self};
use crate::security::acl::{Operation, ResourceType};

pub const API_KEY: i16 = req_schema::API_KEY;
pub const MIN_VERSION: i16 = req_schema::MIN_VERSION;
pub const MAX_VERSION: i16 = req_schema::MAX_VERSION;

/// Kafka's default: no description plugin, so a requested description is "not stored".
const DESCRIPTION_NOT_STORED: i8 = 1;

fn failed(group_id: &str, code: i16, message: Option<String>) -> DescribedGroup {
    DescribedGroup {
        group_id: group_id.to_string(),
        error_code: code,
        error_message: message,
        ..Default::default()
    }
}

pub async fn handle(
    ctx: &RequestContext,
    req: StreamsGroupDescribeRequest,
) -> StreamsGroupDescribeResponse {
    let mut groups = Vec::with_capacity(req.group_ids.len());
    let access = ctx.access();
    for id in &req.group_ids {
        if !streams_enabled(ctx) {
            groups.push(failed(id, ResponseError::UnsupportedVersion.code(), None));
            continue;
        }
        if id.is_empty() {
            groups.push(failed("", ResponseError::InvalidGroupId.code(), None));
            continue;
        }
        if !access.allows(Operation::Describe, ResourceType::Group, id) {
            groups.push(failed(
                id,
                ResponseError::GroupAuthorizationFailed.code(),
                None,
            ));
            continue;
        }
        let group_id = id.clone();
        let r = group::on_coordinator(ctx.ctx(), id, move |gs, _| async move {
            Ok(gs.with_streams_group(&group_id, |g| described(&group_id, g)))
        })
        .await;
        let mut d = match r {
            Ok(Ok(d)) => d,
            Ok(Err(StreamsFailure { error, message })) => {
                failed(id, super::errors::group_code(&error), message)
            }
            Err(e) => failed(id, super::errors::group_code(&e), None),
        };
        if d.error_code == 0 {
            let topics: Vec<&String> = d
                .topology
                .iter()
                .flat_map(|t| t.subtopologies.iter().flatten())
                .flat_map(|s| {
                    s.source_topics
                        .iter()
                        .chain(&s.repartition_sink_topics)
                        .chain(s.state_changelog_topics.iter().map(|t| &t.name))
                        .chain(s.repartition_source_topics.iter().map(|t| &t.name))
                })
                .collect();
            if topics
                .iter()
                .any(|t| !access.allows(Operation::Describe, ResourceType::Topic, t))
            {
                d = failed(
                    id,
                    ResponseError::TopicAuthorizationFailed.code(),
                    Some("The described group uses topics that the client is not authorized to describe.".into()),
                );
            } else {
                d.authorized_operations =
                    access.operations(req.include_authorized_operations, ResourceType::Group, id);
                if ctx.version() >= 1 {
                    d.assignor_name = Some(streams::ASSIGNOR_NAME.to_string());
                    if req.include_topology_description {
                        d.topology_description_status = DESCRIPTION_NOT_STORED;
                    }
                }
            }
        }
        groups.push(d);
    }
    StreamsGroupDescribeResponse {
        groups,
        ..Default::default()
    }
}

fn task_ids(set: &TaskSet) -> Vec<TaskIds> {
    set.iter()
        .map(|(s, ps)| TaskIds {
            subtopology_id: s.clone(),
            partitions: ps.iter().copied().collect(),
            ..Default::default()
        })
        .collect()
}

fn assignment(t: &Tasks) -> Assignment {
    Assignment {
        active_tasks: task_ids(&t.active),
        standby_tasks: task_ids(&t.standby),
        warmup_tasks: task_ids(&t.warmup),
        ..Default::default()
    }
}

fn key_values<'a>(pairs: impl Iterator<Item = (&'a String, &'a String)>) -> Vec<KeyValue> {
    pairs
        .map(|(k, v)| KeyValue {
            key: k.clone(),
            value: v.clone(),
            ..Default::default()
        })
        .collect()
}

fn topic_info(t: &streams::topology::TopicInfo, partitions: i32) -> TopicInfo {
    TopicInfo {
        name: t.name.clone(),
        partitions,
        replication_factor: t.replication_factor,
        topic_configs: key_values(t.configs.iter().map(|(k, v)| (k, v))),
        ..Default::default()
    }
}

/// The group as StreamsGroupDescribe shows it: subtopologies sorted by id, topics by name;
/// internal topics with their derived partition counts once the topology is configured.
fn described(id: &str, g: &StreamsGroup) -> DescribedGroup {
    let configured = g.configured().filter(|c| c.is_ready());
    let topology = g.topology.as_ref().map(|t| {
        let mut subs: Vec<Subtopology> = t
            .subtopologies
            .iter()
            .map(|s| {
                let count = |name: &str, given: i32| {
                    configured
                        .and_then(|c| c.inputs.get(&s.id))
                        .and_then(|inputs| inputs.iter().find(|(t, _)| t == name))
                        .map_or(given, |(_, n)| *n)
                };
                let tasks = configured
                    .and_then(|c| c.tasks.as_ref())
                    .and_then(|t| t.get(&s.id))
                    .copied();
                let mut changelogs: Vec<TopicInfo> = s
                    .changelogs
                    .iter()
                    .map(|c| topic_info(c, tasks.unwrap_or(c.partitions)))
                    .collect();
                changelogs.sort_by(|a, b| a.name.cmp(&b.name));
                let mut reps: Vec<TopicInfo> = s
                    .repartition_sources
                    .iter()
                    .map(|r| topic_info(r, count(&r.name, r.partitions)))
                    .collect();
                reps.sort_by(|a, b| a.name.cmp(&b.name));
                let mut sources = s.source_topics.clone();
                sources.sort();
                let mut sinks = s.repartition_sinks.clone();
                sinks.sort();
                Subtopology {
                    subtopology_id: s.id.clone(),
                    source_topics: sources,
                    repartition_sink_topics: sinks,
                    state_changelog_topics: changelogs,
                    repartition_source_topics: reps,
                    ..Default::default()
                }
            })
            .collect();
        subs.sort_by(|a, b| a.subtopology_id.cmp(&b.subtopology_id));
        Topology {
            epoch: t.epoch,
            subtopologies: Some(subs),
            ..Default::default()
        }
    });
    let empty = Tasks::default();
    DescribedGroup {
        group_id: id.to_string(),
        group_state: g.state_name().to_string(),
        group_epoch: g.group_epoch,
        assignment_epoch: g.assignment_epoch,
        topology: topology.or_else(|| Some(Topology::default())),
        members: g
            .members
            .values()
            .map(|m| Member {
                member_id: m.member_id.clone(),
                member_epoch: m.epoch,
                instance_id: m.instance_id.clone(),
                rack_id: m.rack_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                topology_epoch: m.topology_epoch,
                process_id: m.process_id.clone(),
                user_endpoint: m.user_endpoint.as_ref().map(|(host, port)| Endpoint {
                    host: host.clone(),
                    port: *port,
                    ..Default::default()
                }),
                client_tags: key_values(m.client_tags.iter()),
                assignment: assignment(&m.assigned),
                target_assignment: assignment(g.target.get(&m.member_id).unwrap_or(&empty)),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}
