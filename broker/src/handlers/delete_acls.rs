//! DeleteAcls (key 31, v1–3): removes the ACLs each filter matches and returns them per
//! filter. Checks ALTER on the cluster (every filter CLUSTER_AUTHORIZATION_FAILED); no
//! authorizer is SECURITY_DISABLED; a filter with an UNKNOWN element INVALID_REQUEST. On a
//! cluster the filters go through the metadata quorum, which decides what they remove.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::cluster::image::{Command, Outcome};
use crate::security::acl::{AclFilter, Operation, PatternType, Permission, ResourceType};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = 3;

pub async fn handle(ctx: &RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse {
    let fail = |code: ResponseError, msg: String| {
        DeleteAclsFilterResult::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(msg)))
    };
    let all = |r: DeleteAclsFilterResult| {
        DeleteAclsResponse::default().with_filter_results(vec![r; req.filters.len()])
    };
    if let Some((code, msg)) = super::errors::acl_api_refusal(ctx, Operation::Alter) {
        return all(fail(code, msg.into()));
    }
    let filters: Vec<AclFilter> = req.filters.iter().map(filter).collect();
    let known: Vec<AclFilter> = filters
        .iter()
        .filter(|f| !f.is_unknown())
        .cloned()
        .collect();
    let removed = match ctx.ctx().cluster.get() {
        Some(_) if known.is_empty() => Ok(Vec::new()),
        Some(cluster) => match cluster
            .propose(Command::DeleteAcls { filters: known })
            .await
        {
            Ok(Outcome::AclsDeleted(removed)) => Ok(removed),
            Ok(other) => Err((
                ResponseError::UnknownServerError,
                format!("unexpected answer: {other:?}"),
            )),
            Err(e) => Err((super::errors::cluster_write_code(&e), e.to_string())),
        },
        None => ctx
            .ctx()
            .acls
            .delete(&known)
            .map_err(|e| (ResponseError::UnknownServerError, e.to_string())),
    };
    let mut removed = match removed {
        Ok(r) => r.into_iter(),
        Err((code, e)) => {
            tracing::warn!(error = %e, "DeleteAcls: cannot store ACLs");
            return all(fail(code, e));
        }
    };
    let results = filters
        .iter()
        .map(|f| {
            if f.is_unknown() {
                return fail(
                    ResponseError::InvalidRequest,
                    "DeleteAclsRequest contains UNKNOWN elements".into(),
                );
            }
            let matching = removed
                .next()
                .unwrap_or_default()
                .into_iter()
                .map(|a| {
                    DeleteAclsMatchingAcl::default()
                        .with_error_message(None)
                        .with_resource_type(a.resource_type.code())
                        .with_resource_name(StrBytes::from_string(a.resource_name))
                        .with_pattern_type(a.pattern_type.code())
                        .with_principal(StrBytes::from_string(a.principal))
                        .with_host(StrBytes::from_string(a.host))
                        .with_operation(a.operation.code())
                        .with_permission_type(a.permission.code())
                })
                .collect();
            DeleteAclsFilterResult::default()
                .with_error_message(None)
                .with_matching_acls(matching)
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}

fn filter(f: &DeleteAclsFilter) -> AclFilter {
    AclFilter {
        resource_type: ResourceType::from_code(f.resource_type_filter),
        resource_name: f.resource_name_filter.as_ref().map(|s| s.to_string()),
        pattern_type: PatternType::from_code(f.pattern_type_filter),
        principal: f.principal_filter.as_ref().map(|s| s.to_string()),
        host: f.host_filter.as_ref().map(|s| s.to_string()),
        operation: Operation::from_code(f.operation),
        permission: Permission::from_code(f.permission_type),
    }
}
