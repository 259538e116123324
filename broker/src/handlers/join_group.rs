//! JoinGroup (key 11): runs on the group's coordinator shard and waits there until the
//! rebalance completes (the classic protocol's long poll). v4+ first joins get
//! MEMBER_ID_REQUIRED (KIP-394); v5+ carries `group.instance.id` (KIP-345).

use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::coordinator::group::classic::{JoinParams, JoinResult};
use crate::coordinator::group::{self, GroupError};
use crate::security::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 9;

/// The one place JoinGroup failures become Kafka error codes.
///
/// Checks READ on the group (GROUP_AUTHORIZATION_FAILED), as Kafka's `handleJoinGroupRequest`.
pub async fn handle(ctx: &RequestContext, req: JoinGroupRequest) -> JoinGroupResponse {
    let version = ctx.version();
    let group_id = req.group_id.to_string();
    if !ctx
        .access()
        .allows(Operation::Read, ResourceType::Group, &group_id)
    {
        return JoinGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let params = JoinParams {
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: ctx
            .header
            .client_id
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default(),
        client_host: ctx.session.client_host.to_string(),
        session_timeout_ms: req.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect::<Vec<(String, Bytes)>>(),
        require_known_member_id: version >= 4,
    };
    let gid = group_id.clone();
    let r = group::on_coordinator(ctx.ctx(), &group_id, move |gs, _| async move {
        gs.join(&gid, params).await
    })
    .await;
    respond(version, req.member_id, r)
}

fn respond(version: i16, asked: StrBytes, r: Result<JoinResult, GroupError>) -> JoinGroupResponse {
    match r {
        Ok(j) => JoinGroupResponse::default()
            .with_generation_id(j.generation)
            .with_protocol_type(
                j.protocol_type
                    .filter(|_| version >= 7)
                    .map(StrBytes::from_string),
            )
            .with_protocol_name(match j.protocol_name {
                Some(p) => Some(StrBytes::from_string(p)),
                None if version < 7 => Some(StrBytes::default()),
                None => None,
            })
            .with_leader(StrBytes::from_string(j.leader))
            .with_skip_assignment(j.skip_assignment && version >= 9)
            .with_member_id(StrBytes::from_string(j.member_id))
            .with_members(
                j.members
                    .into_iter()
                    .map(|m| {
                        JoinGroupResponseMember::default()
                            .with_member_id(StrBytes::from_string(m.member_id))
                            .with_group_instance_id(
                                m.instance_id
                                    .filter(|_| version >= 5)
                                    .map(StrBytes::from_string),
                            )
                            .with_metadata(m.metadata)
                    })
                    .collect(),
            ),
        Err(e) => {
            let member_id = match &e {
                GroupError::MemberIdRequired(id) => StrBytes::from_string(id.clone()),
                _ => asked,
            };
            JoinGroupResponse::default()
                .with_error_code(super::errors::group_code(&e))
                .with_generation_id(-1)
                .with_protocol_name((version < 7).then(StrBytes::default))
                .with_member_id(member_id)
        }
    }
}
