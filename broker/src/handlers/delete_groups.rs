//! DeleteGroups (key 42): an empty group's metadata and offsets are tombstoned in
//! `__consumer_offsets`, an empty share group's state in `__share_group_state`; a group with
//! members gets NON_EMPTY_GROUP.

use kafka_protocol::messages::DeleteGroupsRequest;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::codec::delete_groups::{DeletableGroupResult, DeleteGroupsResponse};
use crate::codec::Capped;
use crate::coordinator::group::{self};
use crate::coordinator::share;
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
/// v3 carries an error message per group (`codec::delete_groups`).
pub const MAX_VERSION: i16 = 3;

/// The one place DeleteGroups failures become Kafka error codes.
pub async fn handle(
    ctx: &RequestContext,
    req: Capped<DeleteGroupsRequest>,
) -> DeleteGroupsResponse {
    // Kafka's `handleDeleteGroupsRequest`: DELETE on each group, else that group is
    // GROUP_AUTHORIZATION_FAILED.
    let access = ctx.access();
    let mut results = Vec::new();
    for gid in req.into_inner().groups_names {
        let id = gid.to_string();
        if !access.allows(Operation::Delete, ResourceType::Group, &id) {
            results.push(DeletableGroupResult {
                group_id: gid.0,
                error_code: kafka_protocol::error::ResponseError::GroupAuthorizationFailed.code(),
                error_message: Some(StrBytes::from_static_str(
                    super::errors::GROUP_AUTHORIZATION_FAILED,
                )),
                ..Default::default()
            });
            continue;
        }
        // Kafka chains the group types: a share group is deleted (its share state
        // tombstoned) first, any other id goes on to the classic/consumer groups.
        let r = match share::admin::delete_group(ctx.ctx(), &id).await {
            Ok(true) => Ok(()),
            Ok(false) => {
                let key = id.clone();
                group::on_coordinator(ctx.ctx(), &id, move |gs, _| async move {
                    gs.delete_group(&key).await
                })
                .await
                .map_err(|e| (super::errors::group_code(&e), e.to_string()))
            }
            Err(e) => Err((super::share_common::share_code(&e), e.to_string())),
        };
        let (error_code, error_message) = match r {
            Ok(()) => (0, None),
            Err((code, msg)) => (code, Some(StrBytes::from_string(msg))),
        };
        results.push(DeletableGroupResult {
            group_id: gid.0,
            error_code,
            error_message,
            ..Default::default()
        });
    }
    DeleteGroupsResponse {
        results,
        ..Default::default()
    }
}
