//! An outbound Kafka connection: requests on the kafka-protocol crate, one in flight at a
//! time, each bounded in time, the answer's size bounded. A follower's fetcher uses it
//! towards its leader (cluster/replicas.rs), `strom migrate` towards the source cluster.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("{addr}: {what}")]
    Io { addr: String, what: String },
}

pub struct KafkaConn {
    stream: TcpStream,
    addr: String,
    correlation: i32,
    client_id: &'static str,
    /// A larger answer is refused (bounds what one response makes us allocate).
    max_response: usize,
}

impl KafkaConn {
    pub async fn connect(
        addr: &str,
        timeout: Duration,
        client_id: &'static str,
        max_response: usize,
    ) -> Result<KafkaConn, ConnError> {
        let err = |what: String| ConnError::Io {
            addr: addr.to_string(),
            what,
        };
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| err("connect timed out".into()))?
            .map_err(|e| err(e.to_string()))?;
        stream.set_nodelay(true).ok();
        Ok(KafkaConn {
            stream,
            addr: addr.to_string(),
            correlation: 0,
            client_id,
            max_response,
        })
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
            .map_err(|e| err(e.to_string()))?;
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
