//! DeleteGroups (key 42): an empty group's metadata and offsets are tombstoned in
//! `__consumer_offsets`; a group with members gets NON_EMPTY_GROUP.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::RequestContext;
use crate::coordinator::group::{self};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 2;

/// The one place DeleteGroups failures become Kafka error codes.
pub async fn handle(ctx: &RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut results = Vec::new();
    for gid in req.groups_names {
        let id = gid.to_string();
        let key = id.clone();
        let r = group::on_coordinator(ctx.ctx(), &id, move |gs, _| async move {
            gs.delete_group(&key).await
        })
        .await;
        results.push(
            DeletableGroupResult::default()
                .with_group_id(gid)
                .with_error_code(r.err().map(|e| super::errors::group_code(&e)).unwrap_or(0)),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
