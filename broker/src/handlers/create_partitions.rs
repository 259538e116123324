//! CreatePartitions (key 37): grows a topic's partition count (never shrinks, as Kafka).

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 3;

pub async fn handle(
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let broker = ctx.ctx();
    let access = ctx.access();
    let mut seen = HashSet::new();
    let dups: HashSet<String> = req
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.to_string()))
        .map(|t| t.name.to_string())
        .collect();
    let mut results = Vec::new();
    let mut throttle_ms = 0i64;
    for t in req.topics {
        let fail = |code: ResponseError, msg: String| {
            CreatePartitionsTopicResult::default()
                .with_name(t.name.clone())
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(msg)))
        };
        if dups.contains(t.name.as_str()) {
            results.push(fail(
                ResponseError::InvalidRequest,
                "Duplicate topic in request.".into(),
            ));
            continue;
        }
        // Kafka's `ControllerApis.createPartitions`: ALTER on the topic, refused with the
        // code alone (no message).
        if !access.allows(Operation::Alter, ResourceType::Topic, t.name.as_str()) {
            results.push(
                CreatePartitionsTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
            );
            continue;
        }
        let Some(meta) = broker.catalog.snapshot().get(t.name.as_str()).cloned() else {
            results.push(fail(
                ResponseError::UnknownTopicOrPartition,
                format!("The topic '{}' does not exist.", t.name.as_str()),
            ));
            continue;
        };
        let current = meta.partitions;
        if t.count < current {
            results.push(fail(
                ResponseError::InvalidPartitions,
                format!("The topic {} currently has {current} partition(s); {} would not be an increase.", t.name.as_str(), t.count),
            ));
            continue;
        }
        if t.count == current {
            results.push(fail(
                ResponseError::InvalidPartitions,
                format!("Topic already has {current} partition(s)."),
            ));
            continue;
        }
        if let Some(assignments) = &t.assignments {
            let bad = assignments.len() as i32 != t.count - current
                || assignments
                    .iter()
                    .any(|a| a.broker_ids.len() != 1 || a.broker_ids[0].0 != broker.config.node_id);
            if bad {
                results.push(fail(
                    ResponseError::InvalidReplicaAssignment,
                    "Replica assignment must name this broker once per new partition.".into(),
                ));
                continue;
            }
        }
        if !req.validate_only {
            // The controller mutation quota (`quota`): the partitions added, strict since v3.
            match ctx.record_mutation(t.count - current, ctx.version() >= 3) {
                Err(ms) => {
                    throttle_ms = throttle_ms.max(ms);
                    results.push(fail(
                        ResponseError::ThrottlingQuotaExceeded,
                        super::errors::THROTTLING_QUOTA_EXCEEDED.into(),
                    ));
                    continue;
                }
                Ok(ms) => throttle_ms = throttle_ms.max(ms),
            }
            use crate::metadata::topics::{add_partitions, ChangeError};
            match add_partitions(broker, &meta, t.count).await {
                Ok(()) => {}
                Err(e @ ChangeError::UnknownTopic(_)) => {
                    results.push(fail(ResponseError::UnknownTopicOrPartition, e.to_string()));
                    continue;
                }
                Err(e @ ChangeError::InvalidPartitions) => {
                    results.push(fail(ResponseError::InvalidPartitions, e.to_string()));
                    continue;
                }
                Err(e @ ChangeError::Storage(_)) => {
                    results.push(fail(ResponseError::KafkaStorageError, e.to_string()));
                    continue;
                }
            }
        }
        results.push(CreatePartitionsTopicResult::default().with_name(t.name.clone()));
    }
    CreatePartitionsResponse::default()
        .with_results(results)
        .with_throttle_time_ms(ctx.throttle(throttle_ms))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::handlers::testing::create;
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    use kafka_protocol::messages::{ApiKey, TopicName};

    fn grow(name: &str, count: i32) -> CreatePartitionsTopic {
        CreatePartitionsTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_count(count)
            .with_assignments(None)
    }

    #[test]
    fn given_topic_when_growing_and_shrinking_then_kafka_answers() {
        let h = Harness::new();
        create(&h, "t", 2);
        let req =
            CreatePartitionsRequest::default().with_topics(vec![grow("t", 5), grow("nope", 3)]);
        let resp: CreatePartitionsResponse = h.call(ApiKey::CreatePartitions, 3, req);
        assert_eq!(
            resp.results
                .iter()
                .map(|r| r.error_code)
                .collect::<Vec<_>>(),
            vec![0, 3]
        );
        assert_eq!(
            h.state.ctx.catalog.snapshot().get("t").unwrap().partitions,
            5
        );
        assert!(h.state.partition("t", 4).is_some());
        let req = CreatePartitionsRequest::default().with_topics(vec![grow("t", 4)]);
        let resp: CreatePartitionsResponse = h.call(ApiKey::CreatePartitions, 3, req);
        assert_eq!(resp.results[0].error_code, 37);
    }
}
