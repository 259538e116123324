//! ListGroups (key 16): every group on every coordinator shard, with state (v4+) and type
//! (v5+, "classic", "consumer" for KIP-848 groups, "share" for KIP-932 ones, "streams" for
//! KIP-1071 ones) filters.

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::coordinator::group::classic::GroupState;
use crate::coordinator::group::{self};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 5;

/// The one place ListGroups failures become Kafka error codes.
pub async fn handle(ctx: &RequestContext, req: ListGroupsRequest) -> ListGroupsResponse {
    let version = ctx.version();
    let r = group::on_every_shard(ctx.ctx(), |gs| async move {
        gs.groups
            .borrow()
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .map(|g| {
                let kip848 = g.members.is_empty();
                match (g.streams.as_ref(), g.consumer.as_ref()) {
                    // KIP-1071 groups report protocol type and type "streams" and their states.
                    (Some(s), _) if kip848 => (
                        g.id.clone(),
                        "streams".to_string(),
                        s.state_name(),
                        "streams",
                    ),
                    // KIP-848 groups report protocol type "consumer" and their own states.
                    (_, Some(c)) if kip848 => (
                        g.id.clone(),
                        "consumer".to_string(),
                        c.state_name(),
                        "consumer",
                    ),
                    _ => (
                        g.id.clone(),
                        g.protocol_type.clone().unwrap_or_default(),
                        g.state.name(),
                        "classic",
                    ),
                }
            })
            .chain(
                // Share groups (KIP-932) live beside the others on the coordinator shard.
                crate::coordinator::share::group::ShareGroups::here()
                    .groups
                    .borrow()
                    .iter()
                    .map(|(id, g)| (id.clone(), "share".to_string(), g.state(), "share")),
            )
            .collect::<Vec<_>>()
    })
    .await;
    let all = match r {
        Ok(per_shard) => per_shard.into_iter().flatten(),
        Err(e) => {
            return ListGroupsResponse::default().with_error_code(super::errors::group_code(&e))
        }
    };
    // Kafka compares the filters case-insensitively.
    let states: Vec<String> = req
        .states_filter
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    let types: Vec<String> = req
        .types_filter
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    // Kafka's `handleListGroupsRequest`: all groups with DESCRIBE on the cluster, else only
    // those the client may DESCRIBE.
    let access = ctx.access();
    let cluster = access.allows_cluster(Operation::Describe);
    let groups = all
        .filter(|(id, _, _, _)| {
            cluster || access.allows(Operation::Describe, ResourceType::Group, id)
        })
        .filter(|(_, _, state, _)| {
            // Kafka matches a streams group's NotReady as "not_ready" (its enum's name).
            let lower = state.to_ascii_lowercase();
            states.is_empty()
                || states.contains(&lower)
                || (lower == "notready" && states.iter().any(|s| s == "not_ready"))
        })
        .filter(|(_, _, _, kind)| types.is_empty() || types.iter().any(|t| t == kind))
        .map(|(id, protocol_type, state, kind)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(if version >= 4 {
                    StrBytes::from_static_str(state)
                } else {
                    StrBytes::default()
                })
                .with_group_type(if version >= 5 {
                    StrBytes::from_static_str(kind)
                } else {
                    StrBytes::default()
                })
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
