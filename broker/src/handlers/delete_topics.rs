//! DeleteTopics (key 20): by name (v0-5) or by name or topic id (v6+). The catalog entry goes
//! first (so the topic stops being served), then each partition's files on its home shard.
//!
//! The committed offsets of a deleted topic are deleted from every group too (Kafka's
//! `GroupCoordinatorService.onPartitionsDeleted`), before the answer.
//!
//! Authorization (Kafka's `ControllerApis.deleteTopics`): DELETE on the topic (else
//! TOPIC_AUTHORIZATION_FAILED); a topic id whose topic the client may not DESCRIBE is
//! UNKNOWN_TOPIC_ID, as if it did not exist.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::coordinator::group;
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = 6;

pub async fn handle(ctx: &RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let broker = ctx.ctx();
    let wanted: Vec<(Option<TopicName>, uuid::Uuid)> = if ctx.version() >= 6 {
        req.topics
            .into_iter()
            .map(|t| (t.name, t.topic_id))
            .collect()
    } else {
        req.topic_names
            .into_iter()
            .map(|n| (Some(n), uuid::Uuid::nil()))
            .collect()
    };
    let access = ctx.access();
    let mut results = Vec::new();
    // The controller mutation quota (`quota`): a deleted topic's partitions, strict since v5.
    let strict = ctx.version() >= 5;
    let mut throttle_ms = 0i64;
    let mut deleted = Vec::new();
    for (name, id) in wanted {
        let catalog = broker.catalog.snapshot();
        let meta = match &name {
            Some(n) => catalog.get(n.as_str()).cloned(),
            None => catalog
                .by_id(&id)
                .filter(|m| access.allows(Operation::Describe, ResourceType::Topic, &m.name))
                .cloned(),
        };
        let mut r = DeletableTopicResult::default()
            .with_name(name.clone())
            .with_topic_id(id);
        let target = meta
            .as_ref()
            .map(|m| &*m.name)
            .or(name.as_deref().map(|n| n.as_str()));
        if target.is_some_and(|t| !access.allows(Operation::Delete, ResourceType::Topic, t)) {
            results.push(r.with_error_code(ResponseError::TopicAuthorizationFailed.code()));
            continue;
        }
        if let Some(m) = &meta {
            match ctx.record_mutation(m.partitions, strict) {
                Err(ms) => {
                    throttle_ms = throttle_ms.max(ms);
                    results.push(
                        r.with_error_code(ResponseError::ThrottlingQuotaExceeded.code())
                            .with_error_message(Some(StrBytes::from_static_str(
                                super::errors::THROTTLING_QUOTA_EXCEEDED,
                            ))),
                    );
                    continue;
                }
                Ok(ms) => throttle_ms = throttle_ms.max(ms),
            }
        }
        match meta {
            None => {
                let code = if name.is_none() {
                    ResponseError::UnknownTopicId.code()
                } else {
                    ResponseError::UnknownTopicOrPartition.code()
                };
                r = r.with_error_code(code);
            }
            Some(meta) => match crate::metadata::topics::delete_topic(broker, &meta).await {
                Ok(()) => {
                    deleted.push(meta.name.to_string());
                    r = r
                        .with_name(Some(TopicName(StrBytes::from_string(
                            meta.name.to_string(),
                        ))))
                        .with_topic_id(if ctx.version() >= 6 {
                            meta.id
                        } else {
                            uuid::Uuid::nil()
                        });
                }
                Err(e) => {
                    r = r
                        .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                        .with_error_message(
                            (ctx.version() >= 5).then(|| StrBytes::from_string(e.to_string())),
                        );
                }
            },
        }
        results.push(r);
    }
    delete_offsets_of(broker, deleted).await;
    DeleteTopicsResponse::default()
        .with_responses(results)
        .with_throttle_time_ms(ctx.throttle(throttle_ms))
}

/// Tombstones the groups' offsets of `topics` on every coordinator shard of this node. Not
/// when `__consumer_offsets` does not exist: there are no offsets, and it is not created for it.
async fn delete_offsets_of(broker: &crate::shard::BrokerContext, topics: Vec<String>) {
    if topics.is_empty()
        || broker
            .catalog
            .snapshot()
            .get(group::OFFSETS_TOPIC)
            .is_none()
    {
        return;
    }
    let r = group::on_every_shard(broker, move |gs| {
        let topics = topics.clone();
        async move { gs.delete_topic_offsets(&topics).await }
    })
    .await;
    if let Err(e) = r {
        // They expire with offsets.retention.minutes; only a topic created again under the same
        // name before then would see them.
        tracing::warn!(error = %e, "cannot delete the committed offsets of deleted topics");
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::handlers::testing::{batch, create, produce_req};
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    use kafka_protocol::messages::{ApiKey, ProduceResponse};

    #[test]
    fn given_topic_when_deleted_and_recreated_then_empty_and_unknown_errors() {
        let h = Harness::new();
        create(&h, "t", 2);
        let r: ProduceResponse = h.call(
            ApiKey::Produce,
            11,
            produce_req("t", 1, 1, batch(3, -1, -1, -1)),
        );
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        let req = DeleteTopicsRequest::default().with_topics(vec![
            DeleteTopicState::default().with_name(Some(TopicName(StrBytes::from_static_str("t")))),
            DeleteTopicState::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("nope")))),
            DeleteTopicState::default().with_topic_id(uuid::Uuid::new_v4()),
        ]);
        let resp: DeleteTopicsResponse = h.call(ApiKey::DeleteTopics, 6, req);
        let codes: Vec<i16> = resp.responses.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, vec![0, 3, 100]);
        assert!(!h.catalog_has("t"));
        create(&h, "t", 2);
        let r: ProduceResponse = h.call(
            ApiKey::Produce,
            11,
            produce_req("t", 1, 1, batch(1, -1, -1, -1)),
        );
        assert_eq!(
            r.responses[0].partition_responses[0].base_offset, 0,
            "recreated topic starts empty"
        );
    }
}
