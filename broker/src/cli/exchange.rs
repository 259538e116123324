//! One Kafka request and its answer on a stream, with the CLI's client id: the framing, the
//! headers and their checks, shared by the admin client (client.rs) and the SASL exchange of
//! a new connection (secure.rs), which runs before any client call.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::error::CliError;

/// A larger answer is refused (bounds what one response makes the CLI allocate).
const MAX_RESPONSE: usize = 128 << 20;

pub(super) fn encode_request<Req: Encodable>(
    key: ApiKey,
    version: i16,
    correlation: i32,
    req: &Req,
) -> Result<BytesMut, CliError> {
    let bad = |what: String| CliError::Client(format!("{key:?} v{version}: {what}"));
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str("strom-cli")))
        .encode(&mut body, key.request_header_version(version))
        .map_err(|e| bad(format!("encoding request: {e}")))?;
    req.encode(&mut body, version)
        .map_err(|e| bad(format!("encoding request: {e}")))?;
    Ok(body)
}

pub(super) fn decode_response<Resp: Decodable + HeaderVersion>(
    key: ApiKey,
    version: i16,
    correlation: i32,
    mut resp: Bytes,
) -> Result<Resp, CliError> {
    let bad = |what: String| CliError::Client(format!("{key:?} v{version}: {what}"));
    let header = ResponseHeader::decode(&mut resp, Resp::header_version(version))
        .map_err(|e| bad(format!("decoding response header: {e}")))?;
    if header.correlation_id != correlation {
        return Err(bad("correlation id mismatch".into()));
    }
    Resp::decode(&mut resp, version).map_err(|e| bad(format!("decoding response: {e}")))
}

/// One request and its answer on `stream` (to `addr`, for messages); also the SASL
/// exchange of a new connection, before any `Client` call.
pub(super) async fn exchange<S, Req, Resp>(
    stream: &mut S,
    addr: &str,
    key: ApiKey,
    version: i16,
    correlation: i32,
    req: &Req,
) -> Result<Resp, CliError>
where
    S: AsyncRead + AsyncWrite + Unpin,
    Req: Encodable,
    Resp: Decodable + HeaderVersion,
{
    let body = encode_request(key, version, correlation, req)?;
    let mut frame = BytesMut::with_capacity(body.len() + 4);
    frame.put_i32(body.len() as i32);
    frame.put_slice(&body);
    let io = async {
        stream.write_all(&frame).await?;
        stream.flush().await?;
        let len = stream.read_i32().await?;
        if len < 0 || len as usize > MAX_RESPONSE {
            return Err(std::io::Error::other(format!("response of {len} bytes")));
        }
        let mut buf = vec![0u8; len as usize];
        stream.read_exact(&mut buf).await?;
        Ok(Bytes::from(buf))
    };
    let resp = io.await.map_err(|e| CliError::Unreachable {
        addr: addr.to_string(),
        reason: match e.kind() {
            // A broker closes the connection on an authentication failure it cannot answer.
            std::io::ErrorKind::UnexpectedEof => "the broker closed the connection".into(),
            _ => e.to_string(),
        },
    })?;
    decode_response(key, version, correlation, resp)
}
