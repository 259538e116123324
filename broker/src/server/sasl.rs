//! SASL on SASL_PLAINTEXT and SASL_SSL connections: Kafka's `SaslServerAuthenticator`, in
//! the connection before any handler.
//!
//! Until the exchange completes only ApiVersions (served by its handler), SaslHandshake and
//! SaslAuthenticate are accepted; any other request closes the connection, as in Kafka. Each
//! frame is handled in the connection's reader, so the principal is set before the next
//! request is read. Before authentication a frame may be at most
//! `sasl.server.max.receive.size` bytes.
//!
//! - SaslHandshake v1 → tokens in SaslAuthenticate v0–2 requests; v0 → raw tokens (a 4-byte
//!   size and the bytes, answered alike).
//! - A mechanism that is not enabled: UNSUPPORTED_SASL_MECHANISM with the enabled ones, then
//!   the connection closes.
//! - A failure: SASL_AUTHENTICATION_FAILED after `connection.failed.authentication.delay.ms`,
//!   then the connection closes; Kafka's messages, never saying whether the user exists; a log
//!   line with the reason and `strom_authentications_total{listener,mechanism,result}`.
//! - KIP-368: with `connections.max.reauth.ms` > 0 the answer carries the session lifetime; a
//!   SaslHandshake on an authenticated connection starts a re-authentication (the same
//!   principal only); once the session is over any other request closes the connection.

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use crate::config::security::SaslMechanism;
use crate::handlers::encode_response;
use crate::metadata::scram::{CredentialStore, ScramMechanism};
use crate::security::plain::{self, PlainError};
use crate::security::scram::{self, ScramServer, Step};
use crate::security::{Principal, Session};
use crate::shard::ShardState;

enum Exchange {
    Plain,
    // Boxed: most connections are past the exchange, in the small variants.
    Scram(Box<ScramServer>),
    /// `refused`: the token failed (the reason, for the log) and the server's error message
    /// went out; the client's `\x01` that acknowledges it ends the exchange.
    OAuthBearer {
        refused: Option<String>,
    },
}

/// An exchange that completed: the user, and when its credential expires (an OAUTHBEARER
/// token's `exp`, which bounds the session as in Kafka's SaslServerAuthenticator).
#[derive(Debug)]
struct Done {
    user: String,
    expires_at_ms: Option<i64>,
}

enum State {
    /// Before SaslHandshake (ApiVersions may come first).
    Handshake,
    /// After it: the mechanism's tokens, raw after a v0 handshake.
    Exchange {
        mechanism: SaslMechanism,
        raw: bool,
        exchange: Exchange,
    },
    /// Authenticated.
    Complete,
}

/// What the connection does with a frame.
pub enum Verdict {
    /// Not for the authenticator: the handlers serve it.
    Pass,
    /// Send `frame` (size prefix included) after `delay`; then close if `close`.
    Answer {
        frame: BytesMut,
        delay: Duration,
        close: bool,
    },
    /// Close the connection without an answer, logging why.
    Close(String),
}

/// Kafka's answer for a failed exchange whose mechanism gave no message of its own.
fn generic_failure(mechanism: SaslMechanism, reauth: bool) -> String {
    format!(
        "Authentication failed during {} due to invalid credentials with SASL mechanism {}",
        if reauth {
            "re-authentication"
        } else {
            "authentication"
        },
        mechanism.name()
    )
}

pub struct Authenticator {
    state: State,
    mechanism: Option<SaslMechanism>,
    reauthenticating: bool,
    authenticated: bool,
    /// When the session ends (KIP-368), if it does.
    expires_at: Option<Instant>,
    secret: [u8; 32],
}

impl Default for Authenticator {
    fn default() -> Self {
        Self::new()
    }
}

impl Authenticator {
    pub fn new() -> Authenticator {
        let mut secret = [0u8; 32];
        // Per connection is as good as per process: the fake salt of an unknown user only
        // has to look like a real one within one exchange.
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret);
        Authenticator {
            state: State::Handshake,
            mechanism: None,
            reauthenticating: false,
            authenticated: false,
            expires_at: None,
            secret,
        }
    }

    /// Whether the first authentication has completed (re-authentication may be running).
    pub fn authenticated(&self) -> bool {
        self.authenticated
    }

    /// Whether the next frame is a raw token (after a v0 SaslHandshake).
    pub fn expects_raw(&self) -> bool {
        matches!(self.state, State::Exchange { raw: true, .. })
    }

    /// Whether `frame` starts a re-authentication (the connection orders it like a serial
    /// request).
    pub fn is_reauthentication(&self, frame: &[u8]) -> bool {
        matches!(self.state, State::Complete) && api_key(frame) == Some(ApiKey::SaslHandshake)
    }

    pub fn on_frame(&mut self, frame: &Bytes, session: &Session, shard: &ShardState) -> Verdict {
        let key = api_key(frame);
        match &self.state {
            State::Exchange { raw: true, .. } => self.token(frame.clone(), None, session, shard),
            State::Complete => {
                if key == Some(ApiKey::SaslHandshake) {
                    self.reauthenticating = true;
                    return self.handshake(frame, shard);
                }
                match self.expires_at {
                    Some(at) if Instant::now() >= at => Verdict::Close(
                        "SASL session expired (connections.max.reauth.ms) and the client did not re-authenticate".into(),
                    ),
                    _ => Verdict::Pass,
                }
            }
            State::Handshake => match key {
                Some(ApiKey::ApiVersions) if !self.reauthenticating => Verdict::Pass,
                Some(ApiKey::SaslHandshake) => self.handshake(frame, shard),
                other => Verdict::Close(format!(
                    "unexpected Kafka request of type {other:?} during SASL handshake"
                )),
            },
            State::Exchange { .. } => match key {
                Some(ApiKey::SaslAuthenticate) => match decode::<SaslAuthenticateRequest>(frame) {
                    Ok((header, req)) => self.token(req.auth_bytes, Some(header), session, shard),
                    Err(e) => Verdict::Close(e),
                },
                other => Verdict::Close(format!(
                    "unexpected Kafka request of type {other:?} during SASL authentication"
                )),
            },
        }
    }

    fn handshake(&mut self, frame: &Bytes, shard: &ShardState) -> Verdict {
        let (header, req) = match decode::<SaslHandshakeRequest>(frame) {
            Ok(r) => r,
            Err(e) => return Verdict::Close(e),
        };
        let enabled = shard.ctx.config.sasl_mechanisms();
        let names = enabled
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect();
        let wanted =
            SaslMechanism::from_name(req.mechanism.as_str()).filter(|m| enabled.contains(m));
        let raw = header.request_api_version == 0;
        let (code, close) = match wanted {
            // Re-authentication keeps the mechanism and needs SaslAuthenticate (KIP-368).
            Some(m) if self.reauthenticating && (Some(m) != self.mechanism || raw) => {
                (ResponseError::IllegalSaslState.code(), true)
            }
            Some(m) => {
                self.mechanism = Some(m);
                self.state =
                    State::Exchange {
                        mechanism: m,
                        raw,
                        exchange: match m {
                            SaslMechanism::Plain => Exchange::Plain,
                            SaslMechanism::ScramSha256 => Exchange::Scram(Box::new(
                                ScramServer::new(ScramMechanism::Sha256, self.secret),
                            )),
                            SaslMechanism::ScramSha512 => Exchange::Scram(Box::new(
                                ScramServer::new(ScramMechanism::Sha512, self.secret),
                            )),
                            SaslMechanism::OAuthBearer => Exchange::OAuthBearer { refused: None },
                        },
                    };
                (0, false)
            }
            None => (ResponseError::UnsupportedSaslMechanism.code(), true),
        };
        if close {
            tracing::info!(mechanism = %req.mechanism.as_str(), "SASL handshake refused (mechanism not enabled, or changed on re-authentication)");
        }
        let resp = SaslHandshakeResponse::default()
            .with_error_code(code)
            .with_mechanisms(names);
        answer(ApiKey::SaslHandshake, &header, &resp, Duration::ZERO, close)
    }

    /// One token of the exchange; `header` is the SaslAuthenticate request's (None: raw).
    fn token(
        &mut self,
        token: Bytes,
        header: Option<RequestHeader>,
        session: &Session,
        shard: &ShardState,
    ) -> Verdict {
        let State::Exchange {
            mechanism,
            exchange,
            ..
        } = &mut self.state
        else {
            return Verdict::Close("SASL token outside an exchange".into());
        };
        let mechanism = *mechanism;
        let config = &shard.ctx.config;
        let store = &shard.ctx.credentials;
        // (answer bytes, authenticated user) or (client message, log reason).
        let result: Result<(Vec<u8>, Option<Done>), (String, String)> = match exchange {
            Exchange::Plain => match plain::parse(&token) {
                Ok((user, password)) => {
                    if plain_password_matches(store.as_ref(), &user, &password) {
                        Ok((Vec::new(), Some(Done::user(user))))
                    } else {
                        Err((
                            PlainError::Invalid.to_string(),
                            format!("wrong password or unknown user `{user}`"),
                        ))
                    }
                }
                Err(e) if e.client_message() => Err((e.to_string(), e.to_string())),
                Err(e) => Err((
                    generic_failure(mechanism, self.reauthenticating),
                    e.to_string(),
                )),
            },
            Exchange::Scram(server) => {
                let m = if mechanism == SaslMechanism::ScramSha256 {
                    ScramMechanism::Sha256
                } else {
                    ScramMechanism::Sha512
                };
                match server.step(&token, |u| store.credential(u, m)) {
                    Ok(Step::Continue(b)) => Ok((b, None)),
                    Ok(Step::Done { response, user }) => Ok((response, Some(Done::user(user)))),
                    Err(e) => Err((
                        generic_failure(mechanism, self.reauthenticating),
                        e.to_string(),
                    )),
                }
            }
            Exchange::OAuthBearer { refused } => oauthbearer_step(
                &token,
                refused,
                shard.ctx.oauthbearer.as_deref(),
                self.reauthenticating,
            ),
        };
        let result = match result {
            Ok((bytes, Some(done))) => {
                let principal = Principal::user(done.user.clone());
                if self.reauthenticating && principal != session.principal() {
                    Err((
                        format!(
                            "Cannot change principals during re-authentication from {}: {}",
                            session.principal(),
                            principal
                        ),
                        "principal changed on re-authentication".into(),
                    ))
                } else {
                    Ok((bytes, Some((principal, done.expires_at_ms))))
                }
            }
            Ok((bytes, None)) => Ok((bytes, None)),
            Err(e) => Err(e),
        };
        let listener = &session.listener.name;
        let count = |result: &str| {
            shard
                .metrics
                .authentications
                .with_label_values(&[listener.as_str(), mechanism.name(), result])
                .inc();
        };
        let version = header.as_ref().map_or(0, |h| h.request_api_version);
        match result {
            Ok((bytes, done)) => {
                let mut lifetime = 0;
                if let Some((principal, credential_expiry)) = done {
                    tracing::debug!(client = %session.client_host, %listener, mechanism = mechanism.name(), %principal, "SASL authentication succeeded");
                    count("success");
                    session.set_principal(principal);
                    self.state = State::Complete;
                    self.reauthenticating = false;
                    self.authenticated = true;
                    let left = credential_expiry.map(|at| (at - crate::now_ms()).max(0));
                    let limited = left.is_some() || config.connections_max_reauth_ms > 0;
                    lifetime = session_lifetime(config.connections_max_reauth_ms, left);
                    self.expires_at =
                        limited.then(|| Instant::now() + Duration::from_millis(lifetime as u64));
                }
                match header {
                    None => raw_answer(&bytes),
                    Some(h) => {
                        let resp = SaslAuthenticateResponse::default()
                            .with_error_message(None)
                            .with_auth_bytes(Bytes::from(bytes))
                            .with_session_lifetime_ms(if version >= 1 { lifetime } else { 0 });
                        answer(ApiKey::SaslAuthenticate, &h, &resp, Duration::ZERO, false)
                    }
                }
            }
            Err((message, reason)) => {
                count("failure");
                tracing::info!(client = %session.client_host, %listener, mechanism = mechanism.name(),
                    "failed authentication with {} ({message}): {reason}", session.client_host);
                let delay =
                    Duration::from_millis(config.connection_failed_authentication_delay_ms as u64);
                match header {
                    // Kafka answers a failed raw (v0) exchange by closing.
                    None => Verdict::Close(format!("SASL authentication failed: {reason}")),
                    Some(h) => {
                        let resp = SaslAuthenticateResponse::default()
                            .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                            .with_error_message(Some(StrBytes::from_string(message)));
                        answer(ApiKey::SaslAuthenticate, &h, &resp, delay, true)
                    }
                }
            }
        }
    }
}

impl Done {
    fn user(user: String) -> Done {
        Done {
            user,
            expires_at_ms: None,
        }
    }
}

/// Kafka's session lifetime (SaslServerAuthenticator): `connections.max.reauth.ms` when
/// set, the credential's remaining life when it has one, the smaller of the two when both.
fn session_lifetime(max_reauth_ms: i64, credential_left_ms: Option<i64>) -> i64 {
    match (credential_left_ms, max_reauth_ms > 0) {
        (None, false) => 0,
        (None, true) => max_reauth_ms,
        (Some(left), false) => left,
        (Some(left), true) => left.min(max_reauth_ms),
    }
}

/// One OAUTHBEARER message, as Kafka's OAuthBearerSaslServer answers it: a bad token gets
/// the `{"status":"invalid_token"}` server message (not yet a failure), and the client's
/// `\x01` after it fails the exchange with that message.
fn oauthbearer_step(
    token: &[u8],
    refused: &mut Option<String>,
    validator: Option<&crate::security::oauthbearer::OAuthValidator>,
    reauth: bool,
) -> Result<(Vec<u8>, Option<Done>), (String, String)> {
    use crate::security::oauthbearer::{parse_client_first, INVALID_TOKEN};
    let generic = || generic_failure(SaslMechanism::OAuthBearer, reauth);
    if token == [0x01] {
        if let Some(reason) = refused.take() {
            return Err((INVALID_TOKEN.into(), reason));
        }
    }
    *refused = None;
    let first = parse_client_first(token).map_err(|e| (generic(), e.to_string()))?;
    let Some(validator) = validator else {
        return Err((generic(), "no OAUTHBEARER validator configured".into()));
    };
    match validator.check(&first.token) {
        Err(e) => {
            *refused = Some(format!("invalid token: {e}"));
            Ok((INVALID_TOKEN.as_bytes().to_vec(), None))
        }
        Ok(t) if !first.authzid.is_empty() && first.authzid != t.principal => Err((
            format!("Authentication failed: Client requested an authorization id ({}) that is different from the token's principal name ({})", first.authzid, t.principal),
            "authzid differs from the token's principal".into(),
        )),
        Ok(t) => Ok((
            Vec::new(),
            Some(Done {
                user: t.principal,
                expires_at_ms: Some(t.expires_at_ms),
            }),
        )),
    }
}

/// PLAIN's check: the password against any SCRAM credential of the user.
pub(crate) fn plain_password_matches(
    store: &dyn CredentialStore,
    user: &str,
    password: &str,
) -> bool {
    ScramMechanism::ALL.into_iter().any(|m| {
        store
            .credential(user, m)
            .is_some_and(|c| scram::password_matches(m, &c, password))
    })
}

fn api_key(frame: &[u8]) -> Option<ApiKey> {
    let k = i16::from_be_bytes([*frame.first()?, *frame.get(1)?]);
    ApiKey::try_from(k).ok()
}

fn decode<R: Decodable>(frame: &Bytes) -> Result<(RequestHeader, R), String> {
    let mut b = frame.clone();
    let key = api_key(&b).ok_or("no API key")?;
    if b.len() < 4 {
        return Err("frame too short".into());
    }
    let version = i16::from_be_bytes([b[2], b[3]]);
    let range = if key == ApiKey::SaslHandshake {
        0..=1
    } else {
        0..=2
    };
    if !range.contains(&version) {
        return Err(format!("unsupported {key:?} version {version}"));
    }
    let header = RequestHeader::decode(&mut b, key.request_header_version(version))
        .map_err(|e| format!("malformed {key:?} header: {e:#}"))?;
    let req =
        R::decode(&mut b, version).map_err(|e| format!("malformed {key:?} v{version}: {e:#}"))?;
    Ok((header, req))
}

fn answer<R: kafka_protocol::protocol::Encodable + kafka_protocol::protocol::HeaderVersion>(
    key: ApiKey,
    header: &RequestHeader,
    resp: &R,
    delay: Duration,
    close: bool,
) -> Verdict {
    match encode_response(key, header.request_api_version, header.correlation_id, resp) {
        Ok(frame) => Verdict::Answer {
            frame,
            delay,
            close,
        },
        Err(e) => Verdict::Close(e.to_string()),
    }
}

fn raw_answer(bytes: &[u8]) -> Verdict {
    let mut frame = BytesMut::with_capacity(4 + bytes.len());
    frame.put_i32(bytes.len() as i32);
    frame.put_slice(bytes);
    Verdict::Answer {
        frame,
        delay: Duration::ZERO,
        close: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_reauth_setting_and_credential_life_when_computing_then_kafkas_session_lifetime() {
        assert_eq!(session_lifetime(0, None), 0);
        assert_eq!(session_lifetime(60_000, None), 60_000);
        assert_eq!(session_lifetime(0, Some(5_000)), 5_000);
        assert_eq!(session_lifetime(60_000, Some(5_000)), 5_000);
        assert_eq!(session_lifetime(3_000, Some(5_000)), 3_000);
    }

    #[test]
    fn given_oauthbearer_messages_without_a_validator_when_stepping_then_failures_not_panics() {
        let mut refused = None;
        // No validator: the generic failure, as Kafka's internal-error answer.
        let e = oauthbearer_step(
            b"n,,\x01auth=Bearer a.b.c\x01\x01",
            &mut refused,
            None,
            false,
        )
        .unwrap_err();
        assert!(e.0.contains("invalid credentials"), "{e:?}");
        // A lone \x01 without an error sent is a malformed first message.
        let e = oauthbearer_step(b"\x01", &mut refused, None, false).unwrap_err();
        assert!(
            e.1.contains("Invalid OAUTHBEARER client first message"),
            "{e:?}"
        );
        // After an error was sent, \x01 ends the exchange with Kafka's JSON message.
        refused = Some("invalid token: expired".into());
        let e = oauthbearer_step(b"\x01", &mut refused, None, false).unwrap_err();
        assert_eq!(e.0, crate::security::oauthbearer::INVALID_TOKEN);
    }
}
