//! SyncGroup (key 14): the leader hands in the assignment, every member waits for its share.

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::coordinator::group::{self};
use crate::security::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 5;

/// The one place SyncGroup failures become Kafka error codes.
///
/// Checks READ on the group (GROUP_AUTHORIZATION_FAILED), as Kafka's `handleSyncGroupRequest`.
pub async fn handle(ctx: &RequestContext, req: SyncGroupRequest) -> SyncGroupResponse {
    let version = ctx.version();
    let group_id = req.group_id.to_string();
    if !ctx
        .access()
        .allows(Operation::Read, ResourceType::Group, &group_id)
    {
        return SyncGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let gid = group_id.clone();
    let r = group::on_coordinator(ctx.ctx(), &group_id, move |gs, _| async move {
        let assignments = req
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect();
        gs.sync(
            &gid,
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id,
            req.protocol_type.as_deref(),
            req.protocol_name.as_deref(),
            assignments,
        )
        .await
    })
    .await;
    match r {
        Ok(s) => {
            let v5 = version >= 5;
            SyncGroupResponse::default()
                .with_protocol_type(s.protocol_type.filter(|_| v5).map(StrBytes::from_string))
                .with_protocol_name(s.protocol_name.filter(|_| v5).map(StrBytes::from_string))
                .with_assignment(s.assignment)
        }
        Err(e) => SyncGroupResponse::default().with_error_code(super::errors::group_code(&e)),
    }
}
