//! StreamsGroupHeartbeat (key 88, KIP-1071): a Kafka Streams member joins, heartbeats and
//! leaves, and receives the tasks the broker assigned it. The request checks are Kafka's
//! (`KafkaApis.handleStreamsGroupHeartbeat` and `GroupCoordinatorService`), in its order and
//! with its messages; the internal topics the topology needs are created here, after the
//! coordinator answered, as Kafka's `AutoTopicCreationManager` does, under the member's
//! principal.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;

use super::RequestContext;
use crate::codec::generated::streams_group_heartbeat_request::{
    self as req_schema, StreamsGroupHeartbeatRequest,
};
use crate::codec::generated::streams_group_heartbeat_response::{
    Endpoint, EndpointToPartitions, Status, StreamsGroupHeartbeatResponse, TaskIds, TopicPartition,
};
use crate::coordinator::group;
use crate::coordinator::group::coordinator::StreamsFailure;
use crate::coordinator::group::streams::topology::{
    CopartitionGroup, Subtopology, TopicInfo, Topology,
};
use crate::coordinator::group::streams::{
    status, EndpointPartitions, HeartbeatParams, HeartbeatResult, InternalTopic, TaskSet, Tasks,
};
use crate::security::acl::{Operation, ResourceType};

pub const API_KEY: i16 = req_schema::API_KEY;
pub const MIN_VERSION: i16 = req_schema::MIN_VERSION;
pub const MAX_VERSION: i16 = req_schema::MAX_VERSION;

const KAFKA_INTERNAL: &[&str] = &[
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

fn failed(code: i16, message: Option<String>) -> StreamsGroupHeartbeatResponse {
    StreamsGroupHeartbeatResponse {
        error_code: code,
        error_message: message,
        ..Default::default()
    }
}

fn invalid(message: impl Into<String>) -> StreamsGroupHeartbeatResponse {
    failed(ResponseError::InvalidRequest.code(), Some(message.into()))
}

/// Kafka's `streamsGroupSupported`: `streams.version` >= 1.
pub fn streams_enabled(ctx: &RequestContext) -> bool {
    ctx.ctx()
        .features
        .snapshot()
        .level(crate::metadata::features::STREAMS_VERSION)
        >= 1
}

pub async fn handle(
    ctx: &RequestContext,
    req: StreamsGroupHeartbeatRequest,
) -> StreamsGroupHeartbeatResponse {
    if !streams_enabled(ctx) {
        return failed(ResponseError::UnsupportedVersion.code(), None);
    }
    let access = ctx.access();
    if !access.allows(Operation::Read, ResourceType::Group, &req.group_id) {
        return failed(ResponseError::GroupAuthorizationFailed.code(), None);
    }
    if let Some(t) = &req.topology {
        if let Some(resp) = check_topics(ctx, t) {
            return resp;
        }
    }
    if let Err(message) = validate(&req) {
        return invalid(message);
    }
    if let Some(t) = &req.topology {
        for s in &t.subtopologies {
            if let Some(c) = s.state_changelog_topics.iter().find(|c| c.partitions != 0) {
                return failed(
                    ResponseError::StreamsInvalidTopology.code(),
                    Some(format!(
                        "Changelog topic {} must have an undefined partition count, but it is set to {}.",
                        c.name, c.partitions
                    )),
                );
            }
        }
    }
    let version = ctx.version();
    let params = params(ctx, &req);
    let group_id = req.group_id.clone();
    let r = group::on_coordinator(ctx.ctx(), &req.group_id, move |gs, _| async move {
        Ok(gs.streams_heartbeat(&group_id, params).await)
    })
    .await;
    let mut result = match r {
        Ok(Ok(result)) => result,
        Ok(Err(StreamsFailure { error, message })) => {
            return failed(super::errors::group_code(&error), message)
        }
        Err(e) => return failed(super::errors::group_code(&e), None),
    };
    if !result.to_create.is_empty() {
        create_internal_topics(ctx, &mut result).await;
    }
    response(result, version)
}

/// Kafka's `KafkaApis` checks of the topics a topology names: none of Kafka's internal
/// topics, valid names, DESCRIBE on each.
fn check_topics(
    ctx: &RequestContext,
    t: &req_schema::Topology,
) -> Option<StreamsGroupHeartbeatResponse> {
    let mut required: Vec<&str> = Vec::new();
    for s in &t.subtopologies {
        required.extend(s.source_topics.iter().map(String::as_str));
        required.extend(s.repartition_sink_topics.iter().map(String::as_str));
        required.extend(s.repartition_source_topics.iter().map(|t| t.name.as_str()));
        required.extend(s.state_changelog_topics.iter().map(|t| t.name.as_str()));
    }
    let mut seen = BTreeSet::new();
    required.retain(|t| seen.insert(*t));
    let internal: Vec<&str> = required
        .iter()
        .copied()
        .filter(|t| KAFKA_INTERNAL.contains(t))
        .collect();
    if !internal.is_empty() {
        return Some(failed(
            ResponseError::StreamsInvalidTopology.code(),
            Some(format!(
                "Use of Kafka internal topics {} in a Kafka Streams topology is prohibited.",
                internal.join(",")
            )),
        ));
    }
    let bad: Vec<&str> = required
        .iter()
        .copied()
        .filter(|t| crate::metadata::catalog::validate_topic_name(t).is_err())
        .collect();
    if !bad.is_empty() {
        return Some(failed(
            ResponseError::StreamsInvalidTopology.code(),
            Some(format!(
                "Topic names {} are not valid topic names.",
                bad.join(",")
            )),
        ));
    }
    let access = ctx.access();
    if required
        .iter()
        .any(|t| !access.allows(Operation::Describe, ResourceType::Topic, t))
    {
        return Some(failed(ResponseError::TopicAuthorizationFailed.code(), None));
    }
    None
}

/// Kafka's `throwIfStreamsGroupHeartbeatRequestIsInvalid` (INVALID_REQUEST, its messages).
fn validate(req: &StreamsGroupHeartbeatRequest) -> Result<(), String> {
    if req
        .topology
        .iter()
        .flat_map(|t| &t.subtopologies)
        .any(|s| !s.source_topic_regex.is_empty())
    {
        return Err("Regular expressions for source topics are not supported yet.".into());
    }
    let blank = |s: &str| s.trim().is_empty();
    if blank(&req.member_id) {
        return Err("MemberId can't be empty.".into());
    }
    if blank(&req.group_id) {
        return Err("GroupId can't be empty.".into());
    }
    if req.instance_id.as_deref().is_some_and(blank) {
        return Err("InstanceId can't be empty.".into());
    }
    if req.rack_id.as_deref().is_some_and(blank) {
        return Err("RackId can't be empty.".into());
    }
    let lists = [
        ("ActiveTasks", &req.active_tasks),
        ("StandbyTasks", &req.standby_tasks),
        ("WarmupTasks", &req.warmup_tasks),
    ];
    match req.member_epoch {
        0 => {
            if req.rebalance_timeout_ms == -1 {
                return Err("RebalanceTimeoutMs must be provided in first request.".into());
            }
            for (name, list) in lists {
                if !list.as_ref().is_some_and(Vec::is_empty) {
                    return Err(format!("{name} must be empty when (re-)joining."));
                }
            }
            if req.topology.is_none() {
                return Err("Topology must be non-null when (re-)joining.".into());
            }
        }
        -2 if req.instance_id.is_none() => return Err("InstanceId can't be null.".into()),
        e if e < -2 => {
            return Err(format!(
                "MemberEpoch is {e}, but must be greater than or equal to -2."
            ))
        }
        _ => {}
    }
    let present = lists.iter().filter(|(_, l)| l.is_some()).count();
    if present != 0 && present != 3 {
        return Err("If one task-type is non-null, all must be non-null.".into());
    }
    if req.member_epoch != 0 && req.topology.is_some() {
        return Err("Topology can only be provided when (re-)joining.".into());
    }
    Ok(())
}

fn task_set(list: &[req_schema::TaskIds]) -> TaskSet {
    let mut out = TaskSet::new();
    for t in list {
        out.entry(t.subtopology_id.clone())
            .or_default()
            .extend(t.partitions.iter().copied());
    }
    out.retain(|_, ps| !ps.is_empty());
    out
}

fn topic_info(t: &req_schema::TopicInfo) -> TopicInfo {
    TopicInfo {
        name: t.name.clone(),
        partitions: t.partitions,
        replication_factor: t.replication_factor,
        configs: t
            .topic_configs
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect(),
    }
}

fn topology(t: &req_schema::Topology) -> Topology {
    Topology {
        epoch: t.epoch,
        subtopologies: t
            .subtopologies
            .iter()
            .map(|s| Subtopology {
                id: s.subtopology_id.clone(),
                source_topics: s.source_topics.clone(),
                changelogs: s.state_changelog_topics.iter().map(topic_info).collect(),
                repartition_sinks: s.repartition_sink_topics.clone(),
                repartition_sources: s.repartition_source_topics.iter().map(topic_info).collect(),
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

fn params(ctx: &RequestContext, req: &StreamsGroupHeartbeatRequest) -> HeartbeatParams {
    let owned = match (&req.active_tasks, &req.standby_tasks, &req.warmup_tasks) {
        (Some(a), Some(s), Some(w)) => Some(Tasks {
            active: task_set(a),
            standby: task_set(s),
            warmup: task_set(w),
        }),
        _ => None,
    };
    HeartbeatParams {
        member_id: req.member_id.clone(),
        member_epoch: req.member_epoch,
        endpoint_epoch: req.endpoint_information_epoch,
        instance_id: req.instance_id.clone(),
        rack_id: req.rack_id.clone(),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        client_id: ctx.client_id().to_string(),
        client_host: ctx.session.client_host.to_string(),
        topology: req.topology.as_ref().map(topology),
        owned,
        process_id: req.process_id.clone(),
        user_endpoint: req.user_endpoint.as_ref().map(|e| (e.host.clone(), e.port)),
        client_tags: req.client_tags.as_ref().map(|tags| {
            tags.iter()
                .map(|kv| (kv.key.clone(), kv.value.clone()))
                .collect()
        }),
        shutdown_application: req.shutdown_application,
    }
}

/// Creates the internal topics the coordinator found missing, with CREATE on the cluster or
/// on each topic; what cannot be created is said in the MISSING_INTERNAL_TOPICS detail.
async fn create_internal_topics(ctx: &RequestContext, result: &mut HeartbeatResult) {
    let access = ctx.access();
    let cluster = access.allows_cluster(Operation::Create);
    let (allowed, denied): (Vec<InternalTopic>, Vec<InternalTopic>) =
        std::mem::take(&mut result.to_create)
            .into_iter()
            .partition(|t| {
                cluster || access.allows(Operation::Create, ResourceType::Topic, &t.name)
            });
    let mut notes = Vec::new();
    if !denied.is_empty() {
        let names: Vec<&str> = denied.iter().map(|t| t.name.as_str()).collect();
        notes.push(format!(
            "Unauthorized to CREATE on topics {}.",
            names.join(", ")
        ));
    }
    let broker = ctx.ctx();
    let mut failures = Vec::new();
    for t in allowed {
        let configs: BTreeMap<String, String> = t.configs.iter().cloned().collect();
        let rf = match t.replication_factor {
            -1 => i32::from(broker.config.default_replication_factor),
            n => i32::from(n),
        };
        let created = match broker.cluster.get() {
            Some(_) => {
                crate::metadata::topics::create_replicated(
                    broker,
                    &t.name,
                    t.partitions,
                    rf,
                    configs,
                )
                .await
            }
            None => {
                crate::metadata::topics::create_topic(broker, &t.name, t.partitions, configs).await
            }
        };
        match created {
            Ok(_) => {
                tracing::info!(topic = %t.name, partitions = t.partitions, "created a streams group's internal topic")
            }
            Err(crate::metadata::topics::CreateError::AlreadyExists) => {}
            Err(e) => failures.push(format!("{} ({e})", t.name)),
        }
    }
    if !failures.is_empty() {
        let shown: Vec<&str> = failures.iter().take(3).map(String::as_str).collect();
        let mut note = format!("Creation failed: {}", shown.join(", "));
        if failures.len() > 3 {
            note.push_str(&format!(" and {} more", failures.len() - 3));
        }
        notes.push(format!("{note}."));
    }
    if notes.is_empty() {
        return;
    }
    let extra = notes.join("; ");
    match result
        .statuses
        .iter_mut()
        .find(|(c, _)| *c == status::MISSING_INTERNAL_TOPICS)
    {
        Some((_, detail)) => *detail = format!("{detail}; {extra}"),
        None => result
            .statuses
            .push((status::MISSING_INTERNAL_TOPICS, extra)),
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

fn topic_partitions(by_topic: &BTreeMap<String, BTreeSet<i32>>) -> Vec<TopicPartition> {
    by_topic
        .iter()
        .map(|(t, ps)| TopicPartition {
            topic: t.clone(),
            partitions: ps.iter().copied().collect(),
            ..Default::default()
        })
        .collect()
}

fn endpoint(e: &EndpointPartitions) -> EndpointToPartitions {
    EndpointToPartitions {
        user_endpoint: Endpoint {
            host: e.endpoint.0.clone(),
            port: e.endpoint.1,
            ..Default::default()
        },
        active_partitions: topic_partitions(&e.active),
        standby_partitions: topic_partitions(&e.standby),
        ..Default::default()
    }
}

fn response(r: HeartbeatResult, version: i16) -> StreamsGroupHeartbeatResponse {
    let (active, standby, warmup) = match &r.tasks {
        Some(t) => (
            Some(task_ids(&t.active)),
            Some(task_ids(&t.standby)),
            Some(task_ids(&t.warmup)),
        ),
        None => (None, None, None),
    };
    StreamsGroupHeartbeatResponse {
        member_id: r.member_id,
        member_epoch: r.member_epoch,
        heartbeat_interval_ms: r.heartbeat_interval_ms,
        task_offset_interval_ms: r.task_offset_interval_ms,
        // v0's int32 AcceptableRecoveryLagLegacy stays 0, as Kafka leaves it.
        acceptable_recovery_lag: if version >= 1 {
            r.acceptable_recovery_lag
        } else {
            -1
        },
        status: Some(
            r.statuses
                .into_iter()
                .map(|(code, detail)| Status {
                    status_code: code,
                    status_detail: detail,
                    ..Default::default()
                })
                .collect(),
        ),
        active_tasks: active,
        standby_tasks: standby,
        warmup_tasks: warmup,
        endpoint_information_epoch: r.endpoint_epoch,
        partitions_by_user_endpoint: r.endpoints.map(|es| es.iter().map(endpoint).collect()),
        ..Default::default()
    }
}
