//! How a connection is secured: TLS (a rustls client config, asked for afresh at each
//! connect so that a broker's reloaded certificate is the one its next connection presents),
//! then SASL with PLAIN or SCRAM-SHA-256/512 — SaslHandshake v1 and SaslAuthenticate v1 as
//! Kafka's clients send them.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use super::scram::ScramClient;
use super::{ConnError, KafkaConn, Stream};
use crate::metadata::scram::ScramMechanism;

/// The TLS client config for the next connection.
pub type TlsClient = Arc<dyn Fn() -> Arc<rustls::ClientConfig> + Send + Sync>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
        }
    }

    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (the mechanisms a Strom client speaks).
    pub fn from_name(name: &str) -> Option<Mechanism> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            other => ScramMechanism::from_name(other).map(Mechanism::Scram),
        }
    }
}

/// Who the connection authenticates as.
#[derive(Clone)]
pub struct SaslLogin {
    pub mechanism: Mechanism,
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .field("password", &"[hidden]")
            .finish()
    }
}

/// TLS and SASL of a connection; the default is PLAINTEXT.
#[derive(Clone, Default)]
pub struct ClientSecurity {
    pub tls: Option<TlsClient>,
    pub sasl: Option<SaslLogin>,
}

impl ClientSecurity {
    /// `tcp` with TLS when asked, the server's certificate checked against the host of
    /// `addr` (Kafka's `ssl.endpoint.identification.algorithm=https`).
    pub(super) async fn wrap(
        &self,
        addr: &str,
        tcp: TcpStream,
        timeout: Duration,
    ) -> Result<Stream, ConnError> {
        let Some(tls) = &self.tls else {
            return Ok(Box::new(tcp));
        };
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string()).map_err(|e| ConnError::Setup {
            addr: addr.to_string(),
            what: format!("TLS server name {host:?}: {e}"),
        })?;
        let unreachable = |what: String| ConnError::Io {
            addr: addr.to_string(),
            what,
        };
        let connector = tokio_rustls::TlsConnector::from(tls());
        let stream = tokio::time::timeout(timeout, connector.connect(name, tcp))
            .await
            .map_err(|_| unreachable(format!("no TLS handshake within {timeout:?}")))?
            .map_err(|e| ConnError::Tls {
                addr: addr.to_string(),
                what: e.to_string(),
            })?;
        Ok(Box::new(stream))
    }
}

/// The SASL exchange of a new connection, before any other request.
pub(super) async fn authenticate(
    conn: &mut KafkaConn,
    login: &SaslLogin,
    timeout: Duration,
) -> Result<(), ConnError> {
    let mech = login.mechanism.name();
    let req = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mech));
    let resp: SaslHandshakeResponse = conn.call(ApiKey::SaslHandshake, 1, &req, timeout).await?;
    if resp.error_code != 0 {
        let enabled: Vec<String> = resp.mechanisms.iter().map(|m| m.to_string()).collect();
        return Err(ConnError::Refused {
            addr: conn.addr.clone(),
            context: format!("SASL {mech}"),
            code: resp.error_code,
            message: Some(format!("the broker enables {}", enabled.join(", "))),
        });
    }
    let context = format!("authenticating as {:?} with {mech}", login.user);
    let addr = conn.addr.clone();
    let auth_failed = |what: String| ConnError::Auth {
        addr: addr.clone(),
        what: format!("{context}: {what}"),
    };
    match login.mechanism {
        Mechanism::Plain => {
            let token = format!("\0{}\0{}", login.user, login.password).into_bytes();
            step(conn, &context, token, timeout).await?;
        }
        Mechanism::Scram(m) => {
            let client = ScramClient::new(m, &login.user, &login.password);
            let first = client.first().into_bytes();
            let server_first = step(conn, &context, first, timeout).await?;
            let (fin, signature) = client.last(&server_first).map_err(auth_failed)?;
            let server_final = step(conn, &context, fin.into_bytes(), timeout).await?;
            ScramClient::verify(&server_final, &signature).map_err(auth_failed)?;
        }
    }
    Ok(())
}

/// One SaslAuthenticate round trip: our token, the broker's.
async fn step(
    conn: &mut KafkaConn,
    context: &str,
    token: Vec<u8>,
    timeout: Duration,
) -> Result<Bytes, ConnError> {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    let resp: SaslAuthenticateResponse = conn
        .call(ApiKey::SaslAuthenticate, 1, &req, timeout)
        .await?;
    if resp.error_code != 0 {
        return Err(ConnError::Refused {
            addr: conn.addr.clone(),
            context: context.to_string(),
            code: resp.error_code,
            message: resp.error_message.map(|m| m.to_string()),
        });
    }
    Ok(resp.auth_bytes)
}
