//! CreateAcls (key 30, v1–3). Checks ALTER on the cluster (else every creation gets
//! CLUSTER_AUTHORIZATION_FAILED, as Kafka's `AclApis.handleCreateAcls`); with no authorizer
//! every creation gets SECURITY_DISABLED. Each creation is validated alone (INVALID_REQUEST
//! with Kafka's message); the valid ones are stored together, durably, before the answer —
//! on a cluster through the metadata quorum, answered once this node has them.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::cluster::image::Command;
use crate::security::acl::{AclBinding, Operation, PatternType, Permission, ResourceType};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = 3;

pub async fn handle(ctx: &RequestContext, req: CreateAclsRequest) -> CreateAclsResponse {
    let fail = |code: ResponseError, msg: String| {
        AclCreationResult::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(msg)))
    };
    let all = |r: AclCreationResult| {
        CreateAclsResponse::default().with_results(vec![r; req.creations.len()])
    };
    if let Some((code, msg)) = super::errors::acl_api_refusal(ctx, Operation::Alter) {
        return all(fail(code, msg.into()));
    }
    let bindings: Vec<Result<AclBinding, String>> = req
        .creations
        .iter()
        .map(|c| {
            let b = binding(c);
            b.validate().map(|()| b).map_err(|e| e.to_string())
        })
        .collect();
    let valid: Vec<AclBinding> = bindings.iter().filter_map(|b| b.clone().ok()).collect();
    let stored = match ctx.ctx().cluster.get() {
        Some(_) if valid.is_empty() => Ok(()),
        Some(cluster) => cluster
            .propose(Command::CreateAcls { acls: valid })
            .await
            .map(|_| ())
            .map_err(|e| (super::errors::cluster_write_code(&e), e.to_string())),
        None => ctx
            .ctx()
            .acls
            .create(&valid)
            .map_err(|e| (ResponseError::UnknownServerError, e.to_string())),
    };
    if let Err((_, e)) = &stored {
        tracing::warn!(error = %e, "CreateAcls: cannot store ACLs");
    }
    let results = bindings
        .into_iter()
        .map(|b| match (b, &stored) {
            (Err(msg), _) => fail(ResponseError::InvalidRequest, msg),
            (Ok(_), Err((code, msg))) => fail(*code, msg.clone()),
            (Ok(_), Ok(())) => AclCreationResult::default().with_error_message(None),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

fn binding(c: &AclCreation) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::from_code(c.resource_type),
        resource_name: c.resource_name.to_string(),
        pattern_type: PatternType::from_code(c.resource_pattern_type),
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: Operation::from_code(c.operation),
        permission: Permission::from_code(c.permission_type),
    }
}
