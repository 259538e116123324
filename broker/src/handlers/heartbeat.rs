//! Heartbeat (key 12): keeps a classic member's session alive; REBALANCE_IN_PROGRESS tells it
//! to rejoin.

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::RequestContext;
use crate::coordinator::group::{self};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 4;

/// The one place Heartbeat failures become Kafka error codes.
pub async fn handle(ctx: &RequestContext, req: HeartbeatRequest) -> HeartbeatResponse {
    let group_id = req.group_id.to_string();
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
