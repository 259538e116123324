//! DescribeGroups (key 15): state, protocol and members; member metadata and assignments
//! only for a Stable group (what Kafka shows). A group that does not exist is "Dead" before
//! v6 and GROUP_ID_NOT_FOUND from v6 (KIP-1043).

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use kafka_protocol::error::ResponseError;

use super::RequestContext;
use crate::coordinator::group::classic::GroupState;
use crate::coordinator::group::{self, GroupError};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 6;

/// The one place DescribeGroups failures become Kafka error codes.
struct Described {
    state: &'static str,
    protocol_type: String,
    protocol: String,
    members: Vec<(
        String,
        Option<String>,
        String,
        String,
        bytes::Bytes,
        bytes::Bytes,
    )>,
}

/// Authorization (Kafka's `handleDescribeGroupsRequest`): DESCRIBE on each group (else that
/// group is GROUP_AUTHORIZATION_FAILED); `include_authorized_operations` (v3+) fills in what
/// the client may do on it.
pub async fn handle(ctx: &RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let version = ctx.version();
    let access = ctx.access();
    let mut out = Vec::new();
    for gid in req.groups {
        let id = gid.to_string();
        if !access.allows(Operation::Describe, ResourceType::Group, &id) {
            let code = ResponseError::GroupAuthorizationFailed;
            out.push(
                DescribedGroup::default()
                    .with_group_id(gid)
                    .with_error_code(code.code())
                    .with_error_message((version >= 6).then(|| {
                        StrBytes::from_static_str(super::errors::GROUP_AUTHORIZATION_FAILED)
                    }))
                    .with_authorized_operations(i32::MIN),
            );
            continue;
        }
        let key = id.clone();
        let r = group::on_coordinator(ctx.ctx(), &id, move |gs, _| async move {
            let groups = gs.groups.borrow();
            let g = groups.get(&key).ok_or(GroupError::GroupIdNotFound)?;
            if g.streams.is_some() && g.members.is_empty() {
                // Kafka: a streams group is "not a classic group" (GROUP_ID_NOT_FOUND).
                return Err(GroupError::GroupIdNotFound);
            }
            let stable = g.state == GroupState::Stable;
            let protocol = g.protocol.clone().unwrap_or_default();
            Ok(Described {
                state: g.state.name(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                protocol: if stable {
                    protocol.clone()
                } else {
                    String::new()
                },
                members: g
                    .members_in_order()
                    .map(|m| {
                        (
                            m.member_id.clone(),
                            m.instance_id.clone(),
                            m.client_id.clone(),
                            m.client_host.clone(),
                            if stable {
                                m.metadata(&protocol)
                            } else {
                                Default::default()
                            },
                            if stable {
                                m.assignment.clone()
                            } else {
                                Default::default()
                            },
                        )
                    })
                    .collect(),
            })
        })
        .await;
        let mut d = DescribedGroup::default()
            .with_group_id(gid)
            .with_authorized_operations(if version >= 3 { i32::MIN } else { -2147483648 });
        match r {
            Ok(g) => {
                d = d
                    .with_authorized_operations(access.operations(
                        version >= 3 && req.include_authorized_operations,
                        ResourceType::Group,
                        &id,
                    ))
                    .with_group_state(StrBytes::from_static_str(g.state))
                    .with_protocol_type(StrBytes::from_string(g.protocol_type))
                    .with_protocol_data(StrBytes::from_string(g.protocol))
                    .with_members(
                        g.members
                            .into_iter()
                            .map(|(m, i, c, h, md, a)| {
                                DescribedGroupMember::default()
                                    .with_member_id(StrBytes::from_string(m))
                                    .with_group_instance_id(
                                        i.filter(|_| version >= 4).map(StrBytes::from_string),
                                    )
                                    .with_client_id(StrBytes::from_string(c))
                                    .with_client_host(StrBytes::from_string(h))
                                    .with_member_metadata(md)
                                    .with_member_assignment(a)
                            })
                            .collect(),
                    );
            }
            Err(GroupError::GroupIdNotFound) if version < 6 => {
                d = d.with_group_state(StrBytes::from_static_str("Dead"));
            }
            Err(e) => {
                d = d
                    .with_error_code(super::errors::group_code(&e))
                    .with_error_message(
                        (version >= 6).then(|| StrBytes::from_string(e.to_string())),
                    )
                    .with_group_state(StrBytes::from_static_str("Dead"));
            }
        }
        out.push(d);
    }
    DescribeGroupsResponse::default().with_groups(out)
}
