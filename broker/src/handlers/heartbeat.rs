//! Heartbeat (key 12): keeps a classic member's session alive; REBALANCE_IN_PROGRESS tells it
//! to rejoin.

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::RequestContext;
use crate::coordinator::group::{self};
use crate::security::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 4;

/// The one place Heartbeat failures become Kafka error codes.
///
/// Checks READ on the group (GROUP_AUTHORIZATION_FAILED), as Kafka's `handleHeartbeatRequest`.
pub async fn handle(ctx: &RequestContext, req: HeartbeatRequest) -> HeartbeatResponse {
    let group_id = req.group_id.to_string();
    if !ctx
        .access()
        .allows(Operation::Read, ResourceType::Group, &group_id)
    {
        return HeartbeatResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let gid = group_id.clone();
    let r = group::on_coordinator(ctx.ctx(), &group_id, move |gs, _| async move {
        gs.heartbeat(
            &gid,
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id,
        )
        .await
    })
    .await;
    HeartbeatResponse::default()
        .with_error_code(r.err().map(|e| super::errors::group_code(&e)).unwrap_or(0))
}
