//! ShareGroupHeartbeat (key 76, KIP-932): join (epoch 0), heartbeat, leave (-1) and receive
//! the broker-computed assignment of a share group (`coordinator::share::group`), on the
//! group's coordinator shard, its changes written to `__consumer_offsets` before the answer.
//! Partitions travel as topic ids on the wire, as names inside.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;

use super::share_common::{enabled, share_code};
use super::RequestContext;
use crate::coordinator::group;
use crate::coordinator::share::group::{Heartbeat, ShareGroups};
use crate::coordinator::share::{ShareConfig, ShareError};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = 1;

pub async fn handle(
    ctx: &RequestContext,
    req: ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    let fail = |code: i16, msg: Option<String>| {
        ShareGroupHeartbeatResponse::default()
            .with_error_code(code)
            .with_error_message(msg.map(StrBytes::from_string))
    };
    if !enabled(ctx) {
        return fail(ResponseError::UnsupportedVersion.code(), None);
    }
    let access = ctx.access();
    if !access.allows(Operation::Read, ResourceType::Group, &req.group_id) {
        return fail(ResponseError::GroupAuthorizationFailed.code(), None);
    }
    if req.group_id.is_empty() {
        return fail(
            ResponseError::InvalidRequest.code(),
            Some("GroupId can't be empty.".into()),
        );
    }
    let cfg = ShareConfig::of(ctx.ctx(), &req.group_id);
    let hb = Heartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        subscribed: req
            .subscribed_topic_names
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.to_string()).collect()),
        client_id: ctx.client_id().to_string(),
        client_host: ctx.session.client_host.to_string(),
    };
    let group_id = req.group_id.to_string();
    let gid = group_id.clone();
    let catalog = ctx.ctx().catalog.snapshot();
    let counts_catalog = catalog.clone();
    let r = group::on_coordinator(ctx.ctx(), &group_id, move |gs, _| async move {
        // Kafka's `shareGroup(groupId)`: an id a classic or consumer group has is not a
        // share group's.
        if gs.groups.borrow().contains_key(&gid) {
            return Ok(Err(ShareError::GroupIdNotFound));
        }
        let answer = {
            let groups = ShareGroups::here();
            let mut all = groups.groups.borrow_mut();
            let g = all.entry(gid.clone()).or_default();
            let counts = |t: &str| counts_catalog.get(t).map(|m| m.partitions);
            g.heartbeat(hb, crate::now_ms(), cfg.session_timeout_ms, counts)
        };
        // What the heartbeat changed (a failed one may have expired members too) is in
        // `__consumer_offsets` before the member hears back, as Kafka's records are.
        gs.persist_share(&gid).await?;
        Ok(answer)
    })
    .await;
    let answer = match r {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => return fail(share_code(&e), Some(e.to_string())),
        Err(e) => {
            return fail(super::errors::group_code(&e), Some(e.to_string()));
        }
    };
    ShareGroupHeartbeatResponse::default()
        .with_member_id(Some(req.member_id.clone()))
        .with_member_epoch(answer.member_epoch)
        .with_heartbeat_interval_ms(cfg.heartbeat_interval_ms)
        .with_assignment(answer.assignment.map(|a| {
            Assignment::default().with_topic_partitions(
                a.into_iter()
                    .filter_map(|(t, ps)| {
                        Some(
                            TopicPartitions::default()
                                .with_topic_id(catalog.get(&t)?.id)
                                .with_partitions(ps),
                        )
                    })
                    .collect(),
            )
        }))
}
