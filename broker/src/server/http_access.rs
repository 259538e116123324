//! Who a token stream (SSE) or a key read on the admin port runs as, and whether the ACLs let
//! it read: the console's rule (`console::auth`: HTTP Basic against the SCRAM users, else
//! `User:ANONYMOUS`, the principal of a PLAINTEXT connection), checked as Kafka checks a
//! consumer — READ on the topic (Fetch), READ on the group (OffsetCommit). Without an
//! authorizer nothing is checked, as on a PLAINTEXT listener.
//!
//! The topic's ACL is checked before its existence, as Kafka answers
//! TOPIC_AUTHORIZATION_FAILED rather than say whether a topic it may not see exists.

use std::net::SocketAddr;

use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::admin_auth::AdminPeer;
use super::console::auth;
use crate::security::acl::{Operation, ResourceType};
use crate::security::authorizer::Access;
use crate::security::Principal;
use crate::shard::BrokerContext;

/// The JSON error answer of the admin port's HTTP APIs (`{"error_code", "message"}`).
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error_code": status.as_u16(), "message": message.into() });
    (status, Json(body)).into_response()
}

/// The caller's view of the authorizer, or the 401 its credentials earn.
pub fn reader(
    ctx: &BrokerContext,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Result<Access, Box<Response>> {
    let principal = match auth::caller(ctx, headers) {
        Ok(Some(user)) => Principal::user(user),
        Ok(None) => Principal::anonymous(),
        Err(e) => return Err(Box::new(error(StatusCode::UNAUTHORIZED, e.to_string()))),
    };
    // The admin port is served with the peer's address (plain) or its TLS peer (secured).
    let host = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0)
        .or_else(|| extensions.get::<ConnectInfo<AdminPeer>>().map(|c| c.0.addr))
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    Ok(Access::for_principal(
        &ctx.authorizer,
        &principal.to_string(),
        &host,
    ))
}

/// 403 with Kafka's error name unless `access` may READ `name` of `rtype`.
pub fn require_read(access: &Access, rtype: ResourceType, name: &str) -> Result<(), Box<Response>> {
    if access.allows(Operation::Read, rtype, name) {
        return Ok(());
    }
    let (code, what) = match rtype {
        ResourceType::Group => ("GROUP_AUTHORIZATION_FAILED", "group"),
        _ => ("TOPIC_AUTHORIZATION_FAILED", "topic"),
    };
    Err(Box::new(error(
        StatusCode::FORBIDDEN,
        format!("{code}: not allowed to READ {what} {name}"),
    )))
}
