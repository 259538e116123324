//! LeaveGroup (key 13): v0–2 one member by id; v3+ a batch of members by id or
//! `group.instance.id` (KIP-345), each with its own error.

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::coordinator::group::{self};
use crate::security::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 5;

/// The one place LeaveGroup failures become Kafka error codes.
///
/// Checks READ on the group (GROUP_AUTHORIZATION_FAILED), as Kafka's `handleLeaveGroupRequest`.
pub async fn handle(ctx: &RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse {
    let version = ctx.version();
    let group_id = req.group_id.to_string();
    if !ctx
        .access()
        .allows(Operation::Read, ResourceType::Group, &group_id)
    {
        return LeaveGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let gid = group_id.clone();
    let asked = members.clone();
    let r = group::on_coordinator(ctx.ctx(), &group_id, move |gs, _| async move {
        gs.leave(&gid, asked).await
    })
    .await;
    match r {
        Err(e) => LeaveGroupResponse::default().with_error_code(super::errors::group_code(&e)),
        Ok(results) if version < 3 => LeaveGroupResponse::default().with_error_code(
            results
                .first()
                .and_then(|r| r.as_ref().err())
                .map(super::errors::group_code)
                .unwrap_or(0),
        ),
        Ok(results) => LeaveGroupResponse::default().with_members(
            members
                .into_iter()
                .zip(results)
                .map(|((m, i), r)| {
                    MemberResponse::default()
                        .with_member_id(StrBytes::from_string(m))
                        .with_group_instance_id(i.map(StrBytes::from_string))
                        .with_error_code(
                            r.err().map(|e| super::errors::group_code(&e)).unwrap_or(0),
                        )
                })
                .collect(),
        ),
    }
}
