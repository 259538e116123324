//! ConsumerGroupDescribe (key 69, KIP-848): epochs, assignor, members with their current and
//! target assignments. Classic and share groups and unknown ids answer GROUP_ID_NOT_FOUND, as
//! Kafka does ("Group X is not a consumer group." for a group of another type).

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::coordinator::group::assignor::Assignment as Parts;
use crate::coordinator::group::{self, GroupError};
use crate::coordinator::share::group::ShareGroups;
use crate::metadata::catalog::Catalog;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 1;

/// The one place ConsumerGroupDescribe failures become Kafka error codes.
fn assignment(catalog: &Catalog, a: &Parts) -> Assignment {
    Assignment::default().with_topic_partitions(
        a.iter()
            .filter_map(|(t, ps)| {
                let meta = catalog.get(t)?;
                Some(
                    TopicPartitions::default()
                        .with_topic_id(meta.id)
                        .with_topic_name(TopicName(StrBytes::from_string(t.clone())))
                        .with_partitions(ps.iter().copied().collect()),
                )
            })
            .collect(),
    )
}

pub async fn handle(
    ctx: &RequestContext,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let version = ctx.version();
    let catalog = ctx.ctx().catalog.snapshot();
    let mut out = Vec::new();
    if !ctx.ctx().features.consumer_protocol_enabled() {
        // group.version 0: every group answers UNSUPPORTED_VERSION (Kafka's getErrorResponse).
        let code = kafka_protocol::error::ResponseError::UnsupportedVersion.code();
        for gid in req.group_ids {
            out.push(
                DescribedGroup::default()
                    .with_group_id(gid)
                    .with_error_code(code),
            );
        }
        return ConsumerGroupDescribeResponse::default().with_groups(out);
    }
    // Kafka's `handleConsumerGroupDescribe`: DESCRIBE on each group (else
    // GROUP_AUTHORIZATION_FAILED); `include_authorized_operations` fills in what the client
    // may do on it; a group whose members own or are heading for a topic the client may not
    // DESCRIBE is not described (TOPIC_AUTHORIZATION_FAILED, KAFKA-18813): a regex member's
    // assignment would otherwise name topics the client cannot see.
    let access = ctx.access();
    for gid in req.group_ids {
        let id = gid.to_string();
        if !access.allows(
            crate::security::acl::Operation::Describe,
            crate::security::acl::ResourceType::Group,
            &id,
        ) {
            out.push(
                DescribedGroup::default()
                    .with_group_id(gid)
                    .with_error_code(
                        kafka_protocol::error::ResponseError::GroupAuthorizationFailed.code(),
                    )
                    .with_error_message(Some(StrBytes::from_static_str(
                        super::errors::GROUP_AUTHORIZATION_FAILED,
                    )))
                    .with_authorized_operations(i32::MIN),
            );
            continue;
        }
        let ops = access.operations(
            req.include_authorized_operations,
            crate::security::acl::ResourceType::Group,
            &id,
        );
        let key = id.clone();
        let c2 = catalog.clone();
        let r = group::on_coordinator(ctx.ctx(), &id, move |gs, _| async move {
            // None: a group of another type has the id (Kafka's "is not a consumer group").
            if ShareGroups::here().groups.borrow().contains_key(&key) {
                return Ok(None);
            }
            let groups = gs.groups.borrow();
            let g = groups.get(&key).ok_or(GroupError::GroupIdNotFound)?;
            let Some(c) = g
                .consumer
                .as_ref()
                .filter(|_| g.members.is_empty() && !g.has_streams_members())
            else {
                return Ok(None);
            };
            let empty = Parts::new();
            let members = c
                .members
                .values()
                .map(|m| {
                    Member::default()
                        .with_member_id(StrBytes::from_string(m.member_id.clone()))
                        .with_instance_id(m.instance_id.clone().map(StrBytes::from_string))
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
                        .with_assignment(assignment(&c2, &m.assigned))
                        .with_target_assignment(assignment(
                            &c2,
                            c.target.get(&m.member_id).unwrap_or(&empty),
                        ))
                        // v1: 1 = consumer (KIP-848) member.
                        .with_member_type(if version >= 1 { 1 } else { -1 })
                })
                .collect::<Vec<_>>();
            Ok(Some(
                DescribedGroup::default()
                    .with_group_state(StrBytes::from_static_str(c.state_name()))
                    .with_group_epoch(c.group_epoch)
                    .with_assignment_epoch(c.assignment_epoch)
                    .with_assignor_name(StrBytes::from_static_str(c.assignor.name()))
                    .with_members(members),
            ))
        })
        .await;
        let d = match r {
            Ok(Some(d)) if hides_topics(&access, &d) => DescribedGroup::default()
                .with_error_code(
                    kafka_protocol::error::ResponseError::TopicAuthorizationFailed.code(),
                )
                .with_error_message(Some(StrBytes::from_static_str(
                    "The group has described topic(s) that the client is not authorized to describe.",
                )))
                .with_authorized_operations(i32::MIN),
            Ok(Some(d)) => d.with_authorized_operations(ops),
            Ok(None) => DescribedGroup::default()
                .with_error_code(super::errors::group_code(&GroupError::GroupIdNotFound))
                .with_error_message(Some(StrBytes::from_string(format!(
                    "Group {id} is not a consumer group."
                ))))
                .with_authorized_operations(i32::MIN),
            Err(e) => DescribedGroup::default()
                .with_error_code(super::errors::group_code(&e))
                .with_error_message(Some(StrBytes::from_string(e.to_string())))
                .with_authorized_operations(i32::MIN),
        };
        out.push(d.with_group_id(gid));
    }
    ConsumerGroupDescribeResponse::default().with_groups(out)
}

/// Whether a member of `d` owns or is assigned a topic `access` may not DESCRIBE.
fn hides_topics(access: &crate::security::authorizer::Access, d: &DescribedGroup) -> bool {
    use crate::security::acl::{Operation, ResourceType};
    access.enabled()
        && d.members
            .iter()
            .flat_map(|m| [&m.assignment, &m.target_assignment])
            .flat_map(|a| &a.topic_partitions)
            .any(|tp| !access.allows(Operation::Describe, ResourceType::Topic, &tp.topic_name))
}
