//! An outbound Kafka connection: requests on the kafka-protocol crate, one in flight at a
//! time, each bounded in time, the answer's size bounded. A follower's fetcher uses it
//! towards its leader and the transaction coordinator towards other partition leaders
//! (`cluster::inter_broker`), `strom migrate` towards the source cluster, and the CLI opens
//! its connections with it.
//!
//! A connection is secured as its `ClientSecurity` says (`secure.rs`): TLS with rustls (the
//! broker's own TLS stack), then SaslHandshake v1 and SaslAuthenticate v1 with PLAIN or SCRAM
//! (`scram.rs`, the client side of RFC 5802 in Kafka's dialect), before its first request.

pub mod scram;
pub mod secure;

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

pub use secure::{ClientSecurity, Mechanism, SaslLogin, TlsClient};

/// A connection to a broker, plain or TLS.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}
pub type Stream = Box<dyn Io>;

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The broker cannot be reached or talked to (refused, timed out, a broken answer).
    #[error("{addr}: {what}")]
    Io { addr: String, what: String },
    /// The TLS handshake failed (the peer's certificate, or ours, is not accepted).
    #[error("{addr}: TLS handshake failed: {what}")]
    Tls { addr: String, what: String },
    /// The broker answered the SASL handshake or authentication with a Kafka error code.
    #[error("{addr}: {context}: error code {code}{}", message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Refused {
        addr: String,
        context: String,
        code: i16,
        message: Option<String>,
    },
    /// The broker's side of an authentication does not hold up (SCRAM's server signature).
    #[error("{addr}: {what}")]
    Auth { addr: String, what: String },
    /// Our settings cannot open this connection (a host that is no TLS server name).
    #[error("{addr}: {what}")]
    Setup { addr: String, what: String },
}

impl ConnError {
    /// Whether the peer or our own settings refuse the connection (TLS, SASL, a bad server
    /// name): unlike an unreachable peer, trying again changes nothing until a config does.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, ConnError::Io { .. })
    }
}

pub struct KafkaConn {
    stream: Stream,
    addr: String,
    correlation: i32,
    client_id: &'static str,
    /// A larger answer is refused (bounds what one response makes us allocate).
    max_response: usize,
}

impl KafkaConn {
    /// A PLAINTEXT connection.
    pub async fn connect(
        addr: &str,
        timeout: Duration,
        client_id: &'static str,
        max_response: usize,
    ) -> Result<KafkaConn, ConnError> {
        Self::connect_with(
            addr,
            &ClientSecurity::default(),
            timeout,
            client_id,
            max_response,
        )
        .await
    }

    /// A connection secured as `security` says: TCP, TLS, SASL, each within `timeout`.
    pub async fn connect_with(
        addr: &str,
        security: &ClientSecurity,
        timeout: Duration,
        client_id: &'static str,
        max_response: usize,
    ) -> Result<KafkaConn, ConnError> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| io_error(addr, format!("connect timed out after {timeout:?}")))?
            .map_err(|e| io_error(addr, e.to_string()))?;
        stream.set_nodelay(true).ok();
        Self::open(addr, stream, security, timeout, client_id, max_response).await
    }

    /// Secures a connected `tcp` (the CLI picks among bootstrap addresses itself).
    pub async fn open(
        addr: &str,
        tcp: TcpStream,
        security: &ClientSecurity,
        timeout: Duration,
        client_id: &'static str,
        max_response: usize,
    ) -> Result<KafkaConn, ConnError> {
        let stream = security.wrap(addr, tcp, timeout).await?;
        let mut conn = KafkaConn {
            stream,
            addr: addr.to_string(),
            correlation: 0,
            client_id,
            max_response,
        };
        if let Some(login) = &security.sasl {
            tokio::time::timeout(timeout, secure::authenticate(&mut conn, login, timeout))
                .await
                .map_err(|_| io_error(addr, format!("no SASL answer within {timeout:?}")))??;
        }
        Ok(conn)
    }

    /// The authenticated stream, for a caller with its own framing.
    pub fn into_stream(self) -> Stream {
        self.stream
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub async fn call<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, ConnError> {
        let addr = self.addr.clone();
        let err = move |what: String| ConnError::Io {
            addr: addr.clone(),
            what: format!("{key:?}: {what}"),
        };
        self.correlation = self.correlation.wrapping_add(1);
        let mut body = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str(self.client_id)))
            .encode(&mut body, key.request_header_version(version))
            .map_err(|e| err(format!("encoding request: {e}")))?;
        req.encode(&mut body, version)
            .map_err(|e| err(format!("encoding request: {e}")))?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.put_slice(&body);
        let max_response = self.max_response;
        let io = async {
            self.stream.write_all(&frame).await?;
            // A TLS stream holds the record until flushed.
            self.stream.flush().await?;
            let len = self.stream.read_i32().await?;
            if len < 0 || len as usize > max_response {
                return Err(std::io::Error::other(format!("response size {len}")));
            }
            let mut buf = vec![0u8; len as usize];
            self.stream.read_exact(&mut buf).await?;
            Ok(Bytes::from(buf))
        };
        let mut resp = tokio::time::timeout(timeout, io)
            .await
            .map_err(|_| err("timed out".into()))?
            .map_err(|e| {
                err(match e.kind() {
                    // A broker closes the connection on an authentication failure it cannot
                    // answer.
                    std::io::ErrorKind::UnexpectedEof => "the broker closed the connection".into(),
                    _ => e.to_string(),
                })
            })?;
        let header = ResponseHeader::decode(&mut resp, Resp::header_version(version))
            .map_err(|e| err(format!("decoding response header: {e}")))?;
        if header.correlation_id != self.correlation {
            return Err(err("correlation id mismatch".into()));
        }
        let r =
            Resp::decode(&mut resp, version).map_err(|e| err(format!("decoding response: {e}")))?;
        if resp.has_remaining() {
            return Err(err("trailing bytes in response".into()));
        }
        Ok(r)
    }
}

fn io_error(addr: &str, what: String) -> ConnError {
    ConnError::Io {
        addr: addr.to_string(),
        what,
    }
}
