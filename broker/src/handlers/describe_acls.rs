//! DescribeAcls (key 29, v1–3): the ACLs a filter matches, grouped by resource pattern.
//! Checks DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED); no authorizer is
//! SECURITY_DISABLED; a filter with an UNKNOWN element INVALID_REQUEST (Kafka's
//! `DescribeAclsRequest.validate`).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::security::acl::{AclFilter, Operation, PatternType, Permission, ResourceType};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = 3;

pub async fn handle(ctx: &RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse {
    let fail = |code: ResponseError, msg: &str| {
        DescribeAclsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(msg.into())))
    };
    if let Some((code, msg)) = super::errors::acl_api_refusal(ctx, Operation::Describe) {
        return fail(code, msg);
    }
    let filter = AclFilter {
        resource_type: ResourceType::from_code(req.resource_type_filter),
        resource_name: req.resource_name_filter.map(|s| s.to_string()),
        pattern_type: PatternType::from_code(req.pattern_type_filter),
        principal: req.principal_filter.map(|s| s.to_string()),
        host: req.host_filter.map(|s| s.to_string()),
        operation: Operation::from_code(req.operation),
        permission: Permission::from_code(req.permission_type),
    };
    if filter.is_unknown() {
        return fail(
            ResponseError::InvalidRequest,
            "DescribeAclsRequest contains UNKNOWN elements",
        );
    }
    let mut by_pattern: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for a in ctx
        .ctx()
        .acls
        .snapshot()
        .iter()
        .filter(|a| filter.matches(a))
    {
        by_pattern
            .entry((
                a.resource_type.code(),
                a.resource_name.clone(),
                a.pattern_type.code(),
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(StrBytes::from_string(a.principal.clone()))
                    .with_host(StrBytes::from_string(a.host.clone()))
                    .with_operation(a.operation.code())
                    .with_permission_type(a.permission.code()),
            );
    }
    let resources = by_pattern
        .into_iter()
        .map(|((t, name, p), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(t)
                .with_resource_name(StrBytes::from_string(name))
                .with_pattern_type(p)
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default()
        .with_error_message(None)
        .with_resources(resources)
}
