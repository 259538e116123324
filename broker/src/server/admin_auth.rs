//! The admin HTTP port behind TLS and authentication (docs/security.md "Admin port").
//!
//! - `admin_ssl_enable`: the port speaks HTTPS with the broker's key and chain
//!   (`ssl.keystore.*`, `ssl.enabled.protocols`; reloaded like the Kafka listeners'), asking
//!   for client certificates as `admin_ssl_client_auth` says (none, requested, required,
//!   against `ssl.truststore.*`).
//! - `admin_authentication`: `basic` and/or `mtls`. `basic` checks HTTP basic credentials
//!   against the SCRAM credentials, as SASL/PLAIN does (no password is stored); `mtls` takes
//!   the client certificate's principal (`ssl.principal.mapping.rules`). A request passes
//!   with either method that is on; `/health` always passes (liveness probes carry no
//!   credentials). No credentials, or wrong ones: 401 with `WWW-Authenticate: Basic` (after
//!   `connection.failed.authentication.delay.ms` for a wrong password, as Kafka delays a
//!   failed SASL exchange, and a log line).
//! - `admin_principals`: `;`-separated principals (`User:ops`) allowed in; empty = any
//!   authenticated one. Another principal gets 403.
//!
//! With all three off the port is served as before, by `axum::serve` on the TCP listener.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::either::Either;

use super::tls::{TlsAcceptors, HANDSHAKE_TIMEOUT};
use crate::config::listeners::SecurityProtocol;
use crate::config::security::ClientAuth;
use crate::config::BrokerConfig;
use crate::metadata::scram::CredentialStore;
use crate::security::Principal;

#[derive(Debug, thiserror::Error)]
pub enum AdminSecurityError {
    #[error("admin_ssl_client_auth: `{0}` is not one of none, requested, required")]
    ClientAuth(String),
    #[error("admin_authentication: {0}")]
    Method(String),
    #[error("admin_authentication=mtls needs admin_ssl_enable and admin_ssl_client_auth requested or required")]
    MtlsWithoutCertificates,
    #[error("admin_ssl_enable: {0}")]
    Tls(String),
}

/// How the admin port is secured; `None` from `from_config` = not at all.
pub struct AdminSecurity {
    pub tls: Option<Arc<TlsAcceptors>>,
    basic: bool,
    mtls: bool,
    principals: Vec<String>,
    credentials: Arc<dyn CredentialStore>,
    failure_delay: Duration,
}

impl AdminSecurity {
    /// Checks the admin settings (also at config load, without credentials: `validate`).
    pub fn from_config(
        config: &BrokerConfig,
        credentials: Arc<dyn CredentialStore>,
    ) -> Result<Option<AdminSecurity>, AdminSecurityError> {
        let (basic, mtls) =
            crate::config::security::parse_admin_methods(&config.admin_authentication)
                .map_err(AdminSecurityError::Method)?;
        let client_auth = ClientAuth::parse(&config.admin_ssl_client_auth)
            .ok_or_else(|| AdminSecurityError::ClientAuth(config.admin_ssl_client_auth.clone()))?;
        if mtls && (!config.admin_ssl_enable || client_auth == ClientAuth::None) {
            return Err(AdminSecurityError::MtlsWithoutCertificates);
        }
        if !config.admin_ssl_enable && !basic && !mtls {
            return Ok(None);
        }
        let tls = if config.admin_ssl_enable {
            let mut settings = config
                .tls_settings()
                .map_err(|(k, m)| AdminSecurityError::Tls(format!("{k}: {m}")))?;
            settings.client_auth = client_auth;
            let t = TlsAcceptors::load(settings, &config.ssl_principal_mapping_rules)
                .map_err(|e| AdminSecurityError::Tls(e.to_string()))?;
            Some(Arc::new(t))
        } else {
            None
        };
        Ok(Some(AdminSecurity {
            tls,
            basic,
            mtls,
            principals: config
                .admin_principals
                .split(';')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(String::from)
                .collect(),
            credentials,
            failure_delay: Duration::from_millis(
                config.connection_failed_authentication_delay_ms.max(0) as u64,
            ),
        }))
    }

    fn authenticated(&self) -> bool {
        self.basic || self.mtls
    }
}

/// Who is on the other end of an admin connection.
#[derive(Debug, Clone)]
pub struct AdminPeer {
    pub addr: SocketAddr,
    /// The client certificate's principal (TLS with a certificate only).
    pub certificate: Option<Principal>,
}

/// The admin port's listener when it is secured: TLS handshakes run in tasks of their own
/// (a slow or silent client does not hold up the next one) and hand finished connections
/// over.
pub struct AdminListener {
    rx: tokio::sync::mpsc::Receiver<(
        Either<TcpStream, tokio_rustls::server::TlsStream<TcpStream>>,
        AdminPeer,
    )>,
    local: SocketAddr,
}

impl AdminListener {
    pub fn new(listener: TcpListener, tls: Option<Arc<TlsAcceptors>>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            loop {
                let (tcp, addr) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!(error = %e, "admin accept");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Some(tls) = tls.clone() else {
                    let peer = AdminPeer {
                        addr,
                        certificate: None,
                    };
                    if tx.send((Either::Left(tcp), peer)).await.is_err() {
                        return;
                    }
                    continue;
                };
                let tx = tx.clone();
                tokio::spawn(async move {
                    let acceptor = tls.acceptor(SecurityProtocol::Ssl);
                    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
                        .await
                    {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::info!(client = %addr, "admin port: TLS handshake failed: {e}");
                            return;
                        }
                        Err(_) => {
                            tracing::info!(client = %addr, "admin port: no TLS handshake within {HANDSHAKE_TIMEOUT:?}");
                            return;
                        }
                    };
                    let certificate = match tls.principal(stream.get_ref().1.peer_certificates()) {
                        Ok(p) if stream.get_ref().1.peer_certificates().is_some() => Some(p),
                        Ok(_) => None,
                        Err(e) => {
                            tracing::info!(client = %addr, "admin port: client certificate refused: {e}");
                            return;
                        }
                    };
                    let _ = tx
                        .send((Either::Right(stream), AdminPeer { addr, certificate }))
                        .await;
                });
            }
        });
        Ok(AdminListener { rx, local })
    }
}

impl axum::serve::Listener for AdminListener {
    type Io = Either<TcpStream, tokio_rustls::server::TlsStream<TcpStream>>;
    type Addr = AdminPeer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept task ended (the runtime is going down): wait for the shutdown.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(AdminPeer {
            addr: self.local,
            certificate: None,
        })
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, AdminListener>>
    for AdminPeer
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, AdminListener>) -> Self {
        stream.remote_addr().clone()
    }
}

/// Why a request is not let in.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// No usable credentials: 401.
    Unauthenticated,
    /// Wrong credentials: 401 after the failure delay.
    WrongCredentials(String),
    /// Authenticated but not in `admin_principals`: 403.
    NotAllowed(Principal),
}

impl AdminSecurity {
    fn check(&self, peer: Option<&AdminPeer>, headers: &HeaderMap) -> Result<Principal, Refusal> {
        if !self.authenticated() {
            return Ok(Principal::anonymous());
        }
        let principal = match (self.mtls, peer.and_then(|p| p.certificate.clone())) {
            (true, Some(p)) => p,
            _ => self.basic_principal(headers)?,
        };
        if self.principals.is_empty() || self.principals.contains(&principal.to_string()) {
            Ok(principal)
        } else {
            Err(Refusal::NotAllowed(principal))
        }
    }

    fn basic_principal(&self, headers: &HeaderMap) -> Result<Principal, Refusal> {
        if !self.basic {
            return Err(Refusal::Unauthenticated);
        }
        let value = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or(Refusal::Unauthenticated)?;
        let (scheme, b64) = value.split_once(' ').ok_or(Refusal::Unauthenticated)?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(Refusal::Unauthenticated);
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| Refusal::WrongCredentials("malformed basic credentials".into()))?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or_else(|| Refusal::WrongCredentials("malformed basic credentials".into()))?;
        if super::sasl::plain_password_matches(self.credentials.as_ref(), user, password) {
            Ok(Principal::user(user))
        } else {
            Err(Refusal::WrongCredentials(format!(
                "wrong password or unknown user `{user}`"
            )))
        }
    }
}

/// How a refusal is written: the admin port's plain text, or the error body Confluent's
/// schema registry answers (`{"error_code": 401, "message": "Unauthorized"}`), which its
/// clients parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalBody {
    Text,
    Confluent,
}

/// The middleware's state: who may come in, and how a refusal reads.
#[derive(Clone)]
pub struct Guard {
    pub security: Arc<AdminSecurity>,
    body: RefusalBody,
}

impl Guard {
    pub fn new(security: Arc<AdminSecurity>, body: RefusalBody) -> Guard {
        Guard { security, body }
    }
}

/// The principal the port authenticated, in the request's extensions for the services that
/// run requests as it (the HTTP proxy).
#[derive(Debug, Clone)]
pub struct Authenticated(pub Principal);

/// The middleware: `/health` open, everything else authenticated as configured.
pub async fn guard(State(g): State<Guard>, mut req: Request, next: Next) -> Response {
    let sec = &g.security;
    if req.uri().path() == "/health" {
        return next.run(req).await;
    }
    let peer = req
        .extensions()
        .get::<ConnectInfo<AdminPeer>>()
        .map(|c| c.0.clone());
    match sec.check(peer.as_ref(), req.headers()) {
        Ok(principal) => {
            if sec.authenticated() {
                req.extensions_mut().insert(Authenticated(principal));
            }
            next.run(req).await
        }
        Err(refusal) => {
            let client = peer.map(|p| p.addr.to_string()).unwrap_or_default();
            let path = req.uri().path().to_string();
            match refusal {
                Refusal::NotAllowed(p) => {
                    tracing::info!(%client, %path, principal = %p, "admin port: principal not in admin_principals");
                    refused(g.body, StatusCode::FORBIDDEN, "forbidden", "Forbidden")
                }
                Refusal::WrongCredentials(reason) => {
                    tracing::info!(%client, %path, "admin port: failed authentication: {reason}");
                    tokio::time::sleep(sec.failure_delay).await;
                    unauthorized(g.body, sec.basic)
                }
                Refusal::Unauthenticated => unauthorized(g.body, sec.basic),
            }
        }
    }
}

fn refused(body: RefusalBody, status: StatusCode, text: &str, confluent: &str) -> Response {
    match body {
        RefusalBody::Text => (status, format!("{text}\n")).into_response(),
        RefusalBody::Confluent => (
            status,
            [(
                header::CONTENT_TYPE,
                "application/vnd.schemaregistry.v1+json",
            )],
            serde_json::json!({ "error_code": status.as_u16(), "message": confluent }).to_string(),
        )
            .into_response(),
    }
}

fn unauthorized(body: RefusalBody, basic: bool) -> Response {
    let mut r = refused(
        body,
        StatusCode::UNAUTHORIZED,
        "authentication required",
        "Unauthorized",
    );
    if basic {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"strom-admin\", charset=\"UTF-8\""),
        );
    }
    r
}
