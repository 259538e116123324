//! DeleteShareGroupOffsets (key 92, KIP-932): deletes the share state of whole topics of an
//! empty share group, so it starts from `share.auto.offset.reset` there again; what
//! `kafka-share-groups.sh --delete-offsets` sends. Kafka's order: share groups on, DELETE on
//! the group, READ on each topic, then the group must exist (GROUP_ID_NOT_FOUND) and be
//! empty (NON_EMPTY_GROUP); an unknown topic fails only itself.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse};
use kafka_protocol::protocol::StrBytes;

use super::errors::TOPIC_AUTHORIZATION_FAILED;
use super::share_common::{enabled, share_code};
use super::RequestContext;
use crate::coordinator::share::{admin, ShareError};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

fn failed(code: i16, msg: Option<String>) -> DeleteShareGroupOffsetsResponse {
    DeleteShareGroupOffsetsResponse::default()
        .with_error_code(code)
        .with_error_message(msg.map(StrBytes::from_string))
}

pub async fn handle(
    ctx: &RequestContext,
    req: DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    if !enabled(ctx) {
        return failed(ResponseError::UnsupportedVersion.code(), None);
    }
    let access = ctx.access();
    if !access.allows(Operation::Delete, ResourceType::Group, &req.group_id) {
        return failed(ResponseError::GroupAuthorizationFailed.code(), None);
    }
    if req.group_id.is_empty() {
        return failed(ResponseError::InvalidGroupId.code(), None);
    }
    let group_id = req.group_id.to_string();
    let catalog = ctx.ctx().catalog.snapshot();
    if let Err(e) =
        admin::empty_group(ctx.ctx(), &group_id, Vec::new(), admin::Lookup::Existing).await
    {
        return failed(share_code(&e), Some(e.to_string()));
    }
    let mut responses = Vec::new();
    for t in req.topics {
        let name = t.topic_name.to_string();
        let meta = catalog.get(&name);
        let out = DeleteShareGroupOffsetsResponseTopic::default()
            .with_topic_id(meta.map(|m| m.id).unwrap_or_default())
            .with_topic_name(t.topic_name);
        let refused = if !access.allows(Operation::Read, ResourceType::Topic, &name) {
            Some((
                ResponseError::TopicAuthorizationFailed.code(),
                TOPIC_AUTHORIZATION_FAILED.to_string(),
            ))
        } else if meta.is_none() {
            let e = ShareError::UnknownTopicOrPartition;
            Some((share_code(&e), e.to_string()))
        } else {
            None
        };
        if let Some((code, msg)) = refused {
            responses.push(
                out.with_error_code(code)
                    .with_error_message(Some(StrBytes::from_string(msg))),
            );
            continue;
        }
        let n = meta.map_or(0, |m| m.partitions);
        let failed = admin::reset_topic(ctx.ctx(), &group_id, &name, (0..n).map(|p| (p, None)))
            .await
            .into_iter()
            .find_map(|(_, r)| r.err());
        responses.push(match failed {
            None => out,
            Some(e) => out
                .with_error_code(share_code(&e))
                .with_error_message(Some(StrBytes::from_string(e.to_string()))),
        });
    }
    DeleteShareGroupOffsetsResponse::default().with_responses(responses)
}
