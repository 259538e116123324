//! AlterShareGroupOffsets (key 91, KIP-932): sets the start offset (SPSO) of share
//! partitions of an empty share group, with nothing in flight; what `kafka-share-groups.sh
//! --reset-offsets --execute` sends. Kafka's order: share groups on, READ on the group,
//! READ on each topic, then the group must be empty (NON_EMPTY_GROUP); an id no group has
//! becomes an empty share group, as in Kafka (a classic or consumer group's id:
//! GROUP_ID_NOT_FOUND). An unknown topic or partition fails only its partitions.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse};
use kafka_protocol::protocol::StrBytes;

use super::errors::TOPIC_AUTHORIZATION_FAILED;
use super::share_common::{enabled, share_code};
use super::RequestContext;
use crate::coordinator::share::{admin, ShareError};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

fn failed(e: ResponseError, msg: Option<String>) -> AlterShareGroupOffsetsResponse {
    AlterShareGroupOffsetsResponse::default()
        .with_error_code(e.code())
        .with_error_message(msg.map(StrBytes::from_string))
}

fn partition(p: i32, r: Result<(), ShareError>) -> AlterShareGroupOffsetsResponsePartition {
    let out = AlterShareGroupOffsetsResponsePartition::default().with_partition_index(p);
    match r {
        Ok(()) => out,
        Err(e) => out
            .with_error_code(share_code(&e))
            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
    }
}

pub async fn handle(
    ctx: &RequestContext,
    req: AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    if !enabled(ctx) {
        return failed(ResponseError::UnsupportedVersion, None);
    }
    let access = ctx.access();
    if !access.allows(Operation::Read, ResourceType::Group, &req.group_id) {
        return failed(ResponseError::GroupAuthorizationFailed, None);
    }
    if req.group_id.is_empty() {
        return failed(ResponseError::InvalidGroupId, None);
    }
    let group_id = req.group_id.to_string();
    let catalog = ctx.ctx().catalog.snapshot();
    // Per topic: its answer so far (an error for every partition) or what to alter.
    let mut topics = Vec::new();
    for t in req.topics {
        let name = t.topic_name.to_string();
        let parts: Vec<(i32, i64)> = t
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.start_offset))
            .collect();
        let early = if !access.allows(Operation::Read, ResourceType::Topic, &name) {
            Some((
                ResponseError::TopicAuthorizationFailed.code(),
                TOPIC_AUTHORIZATION_FAILED.to_string(),
            ))
        } else if catalog.get(&name).is_none() {
            let e = ShareError::UnknownTopicOrPartition;
            Some((share_code(&e), e.to_string()))
        } else {
            None
        };
        topics.push((t.topic_name, name, parts, early));
    }
    let alterable: Vec<String> = topics
        .iter()
        .filter(|t| t.3.is_none())
        .map(|t| t.1.clone())
        .collect();
    if let Err(e) = admin::empty_group(ctx.ctx(), &group_id, alterable, admin::Lookup::Create).await
    {
        return AlterShareGroupOffsetsResponse::default()
            .with_error_code(share_code(&e))
            .with_error_message(Some(StrBytes::from_string(e.to_string())));
    }
    let mut responses = Vec::new();
    for (topic_name, name, parts, early) in topics {
        let results = match early {
            Some((code, msg)) => parts
                .iter()
                .map(|(p, _)| {
                    AlterShareGroupOffsetsResponsePartition::default()
                        .with_partition_index(*p)
                        .with_error_code(code)
                        .with_error_message(Some(StrBytes::from_string(msg.clone())))
                })
                .collect(),
            None => admin::reset_topic(
                ctx.ctx(),
                &group_id,
                &name,
                parts.iter().map(|&(p, o)| (p, Some(o))),
            )
            .await
            .into_iter()
            .map(|(p, r)| partition(p, r))
            .collect(),
        };
        responses.push(
            AlterShareGroupOffsetsResponseTopic::default()
                .with_topic_id(catalog.get(&name).map(|m| m.id).unwrap_or_default())
                .with_topic_name(topic_name)
                .with_partitions(results),
        );
    }
    AlterShareGroupOffsetsResponse::default().with_responses(responses)
}
