//! Who is calling the console: HTTP Basic credentials checked against the broker's SCRAM
//! credentials (as PLAIN does, so there is no second password store).
//!
//! The console is read-only unless the principal may write: every request runs through the
//! broker's own handlers as the signed-in `User:NAME`, or as `User:ANONYMOUS` (the principal of
//! a PLAINTEXT connection), so with an authorizer (`authorizer.class.name`) the ACLs decide
//! exactly as they do for a Kafka client (`GROUP_AUTHORIZATION_FAILED` → 403). The page asks
//! `/api/v1/session?group=G` whether to offer an offset reset (READ on the group, what
//! OffsetCommit needs) and offers a sign-in otherwise. Without an authorizer nothing is
//! checked, as on a PLAINTEXT listener.

use axum::http::{header, HeaderMap};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::Serialize;

use crate::metadata::scram::ScramMechanism;
use crate::security::scram::password_matches;
use crate::security::Principal;
use crate::shard::BrokerContext;

/// Why a request's credentials were not accepted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    #[error("the Authorization header is not Basic base64(user:password)")]
    Malformed,
    #[error("wrong user or password")]
    BadCredentials,
    #[error("sign in with a user the ACLs let write")]
    SignIn,
}

/// The signed-in user of a request: `None` without an Authorization header.
pub fn caller(ctx: &BrokerContext, headers: &HeaderMap) -> Result<Option<String>, AuthError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let (user, password) = basic(value.as_bytes()).ok_or(AuthError::Malformed)?;
    // Either mechanism's credential proves the password (PLAIN's rule, security/plain.rs).
    let ok = ScramMechanism::ALL.into_iter().any(|m| {
        ctx.credentials
            .credential(&user, m)
            .is_some_and(|c| password_matches(m, &c, &password))
    });
    if ok {
        Ok(Some(user))
    } else {
        Err(AuthError::BadCredentials)
    }
}

fn basic(value: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(value).ok()?;
    let (scheme, b64) = text.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(B64.decode(b64.trim()).ok()?).ok()?;
    let (u, p) = decoded.split_once(':')?;
    (!u.is_empty()).then(|| (u.to_string(), p.to_string()))
}

/// The principal requests of `user` run as.
pub fn principal(user: Option<&str>) -> Principal {
    user.map_or_else(Principal::anonymous, Principal::user)
}

/// `/api/v1/session`: who the console sees, and whether it may reset a group's offsets.
#[derive(Debug, Serialize)]
pub struct SessionView {
    pub principal: String,
    pub authenticated: bool,
    /// Whether the broker checks ACLs (`authorizer.class.name` is set).
    pub authorizer: bool,
    /// Whether the ACLs let the principal commit the group's offsets (READ on the group;
    /// each topic's READ is checked by the commit itself); true without an authorizer.
    pub may_write: bool,
}

/// Where the console's requests come from, for host-specific ACLs (`Client::local_as`).
pub const CONSOLE_HOST: &str = "console";

pub fn session(ctx: &BrokerContext, user: Option<&str>, group: Option<&str>) -> SessionView {
    use crate::security::acl::{Operation, ResourceType};
    let principal = principal(user).to_string();
    let may_write = match &ctx.authorizer {
        None => true,
        Some(a) => group.is_some_and(|g| {
            a.authorize(
                &principal,
                CONSOLE_HOST,
                Operation::Read,
                ResourceType::Group,
                g,
            )
        }),
    };
    SessionView {
        principal,
        authenticated: user.is_some(),
        authorizer: ctx.authorizer.is_some(),
        may_write,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_basic_headers_when_parsed_then_user_and_password() {
        let h = |s: &str| format!("Basic {}", B64.encode(s));
        assert_eq!(
            basic(h("alice:pw:with:colons").as_bytes()),
            Some(("alice".into(), "pw:with:colons".into()))
        );
        assert_eq!(
            basic(h("alice:").as_bytes()),
            Some(("alice".into(), String::new()))
        );
        assert_eq!(basic(h(":pw").as_bytes()), None);
        assert_eq!(basic(h("no-colon").as_bytes()), None);
        assert_eq!(basic(b"Bearer abc"), None);
        assert_eq!(basic(b"Basic !!!"), None);
        assert_eq!(basic(b"\xff"), None);
    }
}
