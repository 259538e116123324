//! CreateTopics (key 19), with `validate_only`, config overrides and replica assignments
//! checked as Kafka's controller checks them on a one-broker cluster. `create_topic` is also
//! how Metadata auto-creates topics.

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::config::topic::{self as topic_config, TopicConfigError};
use crate::metadata::catalog::validate_topic_name;
use crate::metadata::topics::create_replicated;
pub use crate::metadata::topics::CreateError;
use crate::security::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;

pub const MIN_VERSION: i16 = 2;
pub const MAX_VERSION: i16 = 7;

/// Checks one requested topic; returns the partition count and config overrides to use.
fn check(
    ctx: &RequestContext,
    t: &CreatableTopic,
) -> Result<(i32, BTreeMap<String, String>), CreateError> {
    let broker = &ctx.ctx().config;
    validate_topic_name(t.name.as_str()).map_err(CreateError::InvalidName)?;
    if ctx.ctx().catalog.snapshot().get(t.name.as_str()).is_some() {
        return Err(CreateError::AlreadyExists);
    }
    let partitions = if !t.assignments.is_empty() {
        if t.num_partitions != -1 || t.replication_factor != -1 {
            return Err(CreateError::InvalidRequest(
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".into(),
            ));
        }
        let mut indices: Vec<i32> = t.assignments.iter().map(|a| a.partition_index).collect();
        indices.sort_unstable();
        if indices.iter().enumerate().any(|(i, p)| *p != i as i32) {
            return Err(CreateError::InvalidAssignment(
                "partitions should be a consecutive 0-based integer sequence".into(),
            ));
        }
        for a in &t.assignments {
            if a.broker_ids.is_empty() {
                return Err(CreateError::InvalidAssignment(
                    "The manual partition assignment includes an empty replica list.".into(),
                ));
            }
            if let Some(b) = a.broker_ids.iter().find(|b| b.0 != broker.node_id) {
                return Err(CreateError::InvalidAssignment(format!(
                    "The manual partition assignment includes broker {}, but no such broker is registered.",
                    b.0
                )));
            }
            if a.broker_ids.len() > 1 {
                return Err(CreateError::InvalidAssignment(
                    "The manual partition assignment includes the partition more than once.".into(),
                ));
            }
        }
        indices.len() as i32
    } else {
        let partitions = match t.num_partitions {
            -1 => broker.num_partitions,
            n if n <= 0 => return Err(CreateError::InvalidPartitions),
            n => n,
        };
        match t.replication_factor {
            -1 | 1 => {}
            n if n <= 0 => {
                return Err(CreateError::InvalidReplicationFactor(
                    "Replication factor must be larger than 0, or -1 to use the default value.".into(),
                ))
            }
            // Clustered: the metadata quorum checks it against the live brokers.
            _ if ctx.ctx().cluster.get().is_some() => {}
            n => {
                return Err(CreateError::InvalidReplicationFactor(format!(
                    "Unable to replicate the partition {n} time(s): The target replication factor of {n} cannot be reached because only 1 broker(s) are registered."
                )))
            }
        }
        partitions
    };
    let mut configs = BTreeMap::new();
    for c in &t.configs {
        let Some(value) = &c.value else {
            return Err(CreateError::InvalidConfig(TopicConfigError::Invalid {
                name: c.name.to_string(),
                value: "null".into(),
                reason: "Null value not supported for topic configs".into(),
            }));
        };
        topic_config::validate(c.name.as_str(), value.as_str())?;
        configs.insert(c.name.to_string(), value.to_string());
    }
    crate::config::topic_set::validate_set(
        &configs,
        &BTreeMap::new(),
        &ctx.ctx().catalog.broker(),
    )?;
    Ok((partitions, configs))
}

fn describe_configs(
    ctx: &RequestContext,
    overrides: &BTreeMap<String, String>,
) -> Vec<CreatableTopicConfigs> {
    let view = ctx.ctx().catalog.broker();
    topic_config::TOPIC_CONFIGS
        .iter()
        .map(|d| {
            let e = crate::config::effective::effective(d, overrides, &view);
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_static_str(e.name))
                .with_value(Some(StrBytes::from_string(e.value)))
                .with_config_source(e.source as i8)
        })
        .collect()
}

/// Authorization (Kafka's `ControllerApis.createTopics`): CREATE on the cluster or on the
/// topic (else TOPIC_AUTHORIZATION_FAILED, "Authorization failed."); the created topic's
/// configs are returned only with DESCRIBE_CONFIGS on it (else `topic_config_error_code`
/// TOPIC_AUTHORIZATION_FAILED).
fn exists(ctx: &RequestContext, name: &str) -> bool {
    ctx.ctx().catalog.snapshot().get(name).is_some()
}

pub async fn handle(ctx: &RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse {
    let access = ctx.access();
    let cluster_create = access.allows_cluster(Operation::Create);
    let mut seen = HashSet::new();
    let duplicates: HashSet<String> = req
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.to_string()))
        .map(|t| t.name.to_string())
        .collect();
    let mut results = Vec::new();
    // The controller mutation quota (`quota`): strict since v6, which knows
    // THROTTLING_QUOTA_EXCEEDED; validate_only creates nothing and is not metered.
    let strict = ctx.version() >= 6;
    let mut throttle_ms = 0i64;
    for t in &req.topics {
        let mut result = CreatableTopicResult::default().with_name(t.name.clone());
        // -1: the broker's `default.replication.factor`, as Kafka resolves it (and reports it).
        let rf = match (t.assignments.first(), t.replication_factor) {
            (Some(a), _) => a.broker_ids.len() as i32,
            (None, -1) => i32::from(ctx.ctx().config.default_replication_factor),
            (None, n) => i32::from(n),
        };
        let outcome = if duplicates.contains(t.name.as_str()) {
            Err(CreateError::InvalidRequest(format!(
                "Create topics request from client contains multiple entries for the following topics: {}",
                t.name.as_str()
            )))
        } else if !cluster_create
            && !access.allows(Operation::Create, ResourceType::Topic, t.name.as_str())
        {
            results.push(
                result
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(StrBytes::from_static_str("Authorization failed.")))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
            );
            continue;
        } else {
            match check(ctx, t) {
                Ok((partitions, configs)) if req.validate_only => Ok((partitions, configs, None)),
                // A topic that exists already creates nothing, so it takes no quota.
                Ok((partitions, configs)) => match if exists(ctx, t.name.as_str()) {
                    Ok(0)
                } else {
                    ctx.record_mutation(partitions, strict)
                } {
                    Err(ms) => {
                        throttle_ms = throttle_ms.max(ms);
                        Err(CreateError::ThrottlingQuotaExceeded)
                    }
                    Ok(ms) => {
                        throttle_ms = throttle_ms.max(ms);
                        create_replicated(
                            ctx.ctx(),
                            t.name.as_str(),
                            partitions,
                            rf,
                            configs.clone(),
                        )
                        .await
                        .map(|meta| (partitions, configs, Some(meta)))
                    }
                },
                Err(e) => Err(e),
            }
        };
        match outcome {
            Ok((partitions, configs, meta)) => {
                if ctx.version() >= 5 {
                    result = result
                        .with_num_partitions(partitions)
                        .with_replication_factor(rf as i16);
                    let name = t.name.as_str();
                    if access.allows(Operation::DescribeConfigs, ResourceType::Topic, name) {
                        result = result.with_configs(Some(describe_configs(ctx, &configs)));
                    } else {
                        result.topic_config_error_code =
                            ResponseError::TopicAuthorizationFailed.code();
                    }
                }
                if let (Some(m), true) = (meta, ctx.version() >= 7) {
                    result = result.with_topic_id(m.id);
                }
            }
            Err(e) => {
                result = result
                    .with_error_code(super::errors::create_code(&e))
                    .with_error_message(Some(StrBytes::from_string(match &e {
                        CreateError::AlreadyExists => {
                            format!("Topic '{}' already exists.", t.name.as_str())
                        }
                        other => other.to_string(),
                    })))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1);
            }
        }
        results.push(result);
    }
    CreateTopicsResponse::default()
        .with_topics(results)
        .with_throttle_time_ms(ctx.throttle(throttle_ms))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use kafka_protocol::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopicConfig,
    };
    use kafka_protocol::messages::{ApiKey, BrokerId, TopicName};

    fn topic(name: &str, partitions: i32, rf: i16) -> CreatableTopic {
        CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_num_partitions(partitions)
            .with_replication_factor(rf)
    }

    #[test]
    fn given_error_variants_when_mapping_then_kafka_codes() {
        let table = [
            (CreateError::InvalidName("x".into()), 17),
            (CreateError::AlreadyExists, 36),
            (CreateError::ThrottlingQuotaExceeded, 89),
            (CreateError::InvalidPartitions, 37),
            (CreateError::InvalidReplicationFactor("x".into()), 38),
            (CreateError::InvalidAssignment("x".into()), 39),
            (
                CreateError::InvalidConfig(TopicConfigError::Unknown("x".into())),
                40,
            ),
            (CreateError::InvalidRequest("x".into()), 42),
            (CreateError::Storage("x".into()), 56),
        ];
        for (e, code) in table {
            assert_eq!(crate::handlers::errors::create_code(&e), code, "{e}");
        }
    }

    #[test]
    fn given_create_requests_when_handled_then_kafka_answers() {
        let h = Harness::new();
        let bad_cfg = topic("cfg", 1, 1).with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("segment.bytes"))
            .with_value(Some(StrBytes::from_static_str("1")))]);
        let assigned = topic("assigned", -1, -1).with_assignments(vec![
            CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(vec![BrokerId(0)]),
            CreatableReplicaAssignment::default()
                .with_partition_index(1)
                .with_broker_ids(vec![BrokerId(0)]),
        ]);
        let bad_broker =
            topic("badbroker", -1, -1)
                .with_assignments(vec![CreatableReplicaAssignment::default()
                    .with_partition_index(0)
                    .with_broker_ids(vec![BrokerId(5)])]);
        let req = CreateTopicsRequest::default().with_topics(vec![
            topic("ok", 3, 1),
            topic("bad name", 1, 1),
            topic("zero", 0, 1),
            topic("rf3", 1, 3),
            bad_cfg,
            assigned,
            bad_broker,
            topic("dup", 1, 1),
            topic("dup", 1, 1),
        ]);
        let resp: CreateTopicsResponse = h.call(ApiKey::CreateTopics, 7, req);
        let codes: Vec<(String, i16)> = resp
            .topics
            .iter()
            .map(|t| (t.name.to_string(), t.error_code))
            .collect();
        assert_eq!(
            codes,
            vec![
                ("ok".into(), 0),
                ("bad name".into(), 17),
                ("zero".into(), 37),
                ("rf3".into(), 38),
                ("cfg".into(), 40),
                ("assigned".into(), 0),
                ("badbroker".into(), 39),
                ("dup".into(), 42),
                ("dup".into(), 42),
            ]
        );
        assert_eq!(resp.topics[0].num_partitions, 3);
        assert_eq!(resp.topics[5].num_partitions, 2);
        assert!(!resp.topics[0].topic_id.is_nil());
        let again: CreateTopicsResponse = h.call(
            ApiKey::CreateTopics,
            7,
            CreateTopicsRequest::default().with_topics(vec![topic("ok", 1, 1)]),
        );
        assert_eq!(again.topics[0].error_code, 36);
    }

    #[test]
    fn given_validate_only_when_creating_then_nothing_created() {
        let h = Harness::new();
        let req = CreateTopicsRequest::default()
            .with_topics(vec![topic("dry", 2, 1)])
            .with_validate_only(true);
        let resp: CreateTopicsResponse = h.call(ApiKey::CreateTopics, 7, req);
        assert_eq!(resp.topics[0].error_code, 0);
        assert_eq!(resp.topics[0].num_partitions, 2);
        assert!(!h.catalog_has("dry"));
    }
}
