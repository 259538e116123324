//! ShareGroupDescribe (key 77, KIP-932): a share group's epoch, state, assignor and members
//! with their subscriptions and assignments, read on the group's coordinator shard.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::share_common::enabled;
use super::RequestContext;
use crate::coordinator::group;
use crate::coordinator::share::group::{ShareGroup, ShareGroups};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = 1;

/// Kafka's "all operations" bitfield is not computed here: -2^31 means not requested.
const NOT_REQUESTED: i32 = i32::MIN;

pub async fn handle(
    ctx: &RequestContext,
    req: ShareGroupDescribeRequest,
) -> ShareGroupDescribeResponse {
    let mut out = Vec::new();
    let catalog = ctx.ctx().catalog.snapshot();
    for gid in req.group_ids {
        let base = DescribedGroup::default()
            .with_group_id(gid.clone())
            .with_authorized_operations(NOT_REQUESTED);
        if !enabled(ctx) {
            out.push(base.with_error_code(ResponseError::UnsupportedVersion.code()));
            continue;
        }
        if !ctx
            .access()
            .allows(Operation::Describe, ResourceType::Group, &gid)
        {
            out.push(base.with_error_code(ResponseError::GroupAuthorizationFailed.code()));
            continue;
        }
        let id = gid.to_string();
        let r = group::on_coordinator(ctx.ctx(), &gid, move |_, _| async move {
            Ok(ShareGroups::here().groups.borrow().get(&id).cloned())
        })
        .await;
        let g: ShareGroup = match r {
            Ok(Some(g)) => g,
            Ok(None) => {
                out.push(
                    base.with_error_code(ResponseError::GroupIdNotFound.code())
                        .with_error_message(Some(StrBytes::from_string(format!(
                            "Group {} not found.",
                            gid.as_str()
                        )))),
                );
                continue;
            }
            Err(e) => {
                out.push(base.with_error_code(super::errors::group_code(&e)));
                continue;
            }
        };
        let members = g
            .members
            .iter()
            .map(|(id, m)| {
                let parts = m
                    .assignment
                    .iter()
                    .filter_map(|(t, ps)| {
                        Some(
                            TopicPartitions::default()
                                .with_topic_id(catalog.get(t)?.id)
                                .with_topic_name(TopicName(StrBytes::from_string(t.clone())))
                                .with_partitions(ps.clone()),
                        )
                    })
                    .collect();
                Member::default()
                    .with_member_id(StrBytes::from_string(id.clone()))
                    .with_rack_id(m.rack_id.clone().map(StrBytes::from_string))
                    .with_member_epoch(m.epoch)
                    .with_client_id(StrBytes::from_string(m.client_id.clone()))
                    .with_client_host(StrBytes::from_string(m.client_host.clone()))
                    .with_subscribed_topic_names(
                        m.subscribed
                            .iter()
                            .map(|t| TopicName(StrBytes::from_string(t.clone())))
                            .collect(),
                    )
                    .with_assignment(Assignment::default().with_topic_partitions(parts))
            })
            .collect();
        out.push(
            base.with_group_state(StrBytes::from_static_str(g.state()))
                .with_group_epoch(g.epoch)
                .with_assignment_epoch(g.assignment_epoch)
                .with_assignor_name(StrBytes::from_static_str("simple"))
                .with_members(members),
        );
    }
    ShareGroupDescribeResponse::default().with_groups(out)
}
