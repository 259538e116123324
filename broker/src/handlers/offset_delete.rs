//! OffsetDelete (key 47): removes committed offsets of partitions the group no longer
//! consumes (GROUP_SUBSCRIBED_TO_TOPIC for topics its members still subscribe to).

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use super::RequestContext;
use crate::coordinator::group::{self};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

/// The one place OffsetDelete failures become Kafka error codes.
/// Authorization (Kafka's `handleOffsetDeleteRequest`): DELETE on the group (else
/// GROUP_AUTHORIZATION_FAILED), then READ on each topic (else its partitions are
/// TOPIC_AUTHORIZATION_FAILED and not deleted).
pub async fn handle(ctx: &RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    use crate::security::acl::{Operation, ResourceType};
    let access = ctx.access();
    if !access.allows(Operation::Delete, ResourceType::Group, &req.group_id) {
        return OffsetDeleteResponse::default().with_error_code(
            kafka_protocol::error::ResponseError::GroupAuthorizationFailed.code(),
        );
    }
    let allowed: Vec<bool> = req
        .topics
        .iter()
        .map(|t| access.allows(Operation::Read, ResourceType::Topic, t.name.as_str()))
        .collect();
    let partitions: Vec<(String, i32)> = req
        .topics
        .iter()
        .zip(&allowed)
        .filter(|(_, ok)| **ok)
        .map(|(t, _)| t)
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index))
        })
        .collect();
    let group_id = req.group_id.to_string();
    let gid = group_id.clone();
    let r = group::on_coordinator(ctx.ctx(), &group_id, move |gs, _| async move {
        gs.delete_offsets(&gid, partitions).await
    })
    .await;
    let results = match r {
        Ok(r) => r,
        Err(e) => {
            return OffsetDeleteResponse::default().with_error_code(super::errors::group_code(&e))
        }
    };
    let mut results = results.into_iter();
    let topics = req
        .topics
        .into_iter()
        .zip(allowed)
        .map(|(t, ok)| {
            OffsetDeleteResponseTopic::default()
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let denied =
                                kafka_protocol::error::ResponseError::TopicAuthorizationFailed;
                            let code = if !ok {
                                denied.code()
                            } else {
                                results
                                    .next()
                                    .and_then(|r| r.err())
                                    .map(|e| super::errors::group_code(&e))
                                    .unwrap_or(0)
                            };
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
                .with_name(t.name)
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}
