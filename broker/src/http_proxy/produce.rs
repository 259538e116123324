//! `POST /v3/clusters/{c}/topics/{t}/records`: produce, one record or a stream of them.
//!
//! The body is one JSON object or several in a row (Confluent's streaming produce). It is
//! read as it arrives: each complete object is one record, produced on its own (acks=all,
//! through the broker's Produce handler as the caller, so ACLs and topic settings apply as
//! for a Kafka producer), and answered by one JSON object on the response stream in order,
//! as soon as it is acknowledged. The HTTP status is the first record's (so a one-record
//! request gets its own status, e.g. 404 for an unknown topic); later records carry theirs
//! in `error_code`. Memory is bounded by `MAX_PENDING`: an object not complete within that
//! many bytes ends the stream with 413.
//!
//! Without `partition_id` the partition is the Java producer's: murmur2 of the key modulo the
//! partition count, and round robin for records without a key.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};

use axum::body::Body;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::ProduceRequest;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use serde::Deserialize;
use serde_json::Value;

use super::error::{ProxyError, ProxyResult};
use super::formats::{self, Encoded, ProduceData, Side};
use super::time::{iso8601, parse_iso8601};
use super::{content_type_is, Caller, Proxy};
use crate::cli::client::{Client, ANY};

/// Produce requests (streams) in flight at once; more answer 429.
pub const MAX_STREAMS: usize = 64;
/// Bytes of a record object still incomplete before the stream is cut (413).
pub const MAX_PENDING: usize = 4 * 1024 * 1024;

static ROUND_ROBIN: AtomicU32 = AtomicU32::new(0);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProduceRecord {
    pub partition_id: Option<i32>,
    #[serde(default)]
    pub headers: Vec<HeaderIn>,
    pub key: Option<ProduceData>,
    pub value: Option<ProduceData>,
    pub timestamp: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderIn {
    pub name: String,
    /// base64, or null.
    pub value: Option<String>,
}

pub async fn produce(
    proxy: Proxy,
    who: Caller,
    cluster: String,
    topic: String,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !content_type_is(&headers, &["application/json"]) {
        return ProxyError::UnsupportedMediaType.into_response();
    }
    let Ok(permit) = proxy.produce_streams.clone().try_acquire_owned() else {
        return ProxyError::TooManyStreams(MAX_STREAMS).into_response();
    };
    let mut client = proxy.client(&who);
    if let Err(e) = super::topics::check_cluster(&mut client, &cluster).await {
        return e.into_response();
    }
    let partitions = match crate::cli::topic::partitions_of(&mut client, &topic).await {
        Ok(t) => t.partitions.len() as i32,
        Err(e) => return ProxyError::from(e).into_response(),
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(StatusCode, Value)>(16);
    let producer = Producer {
        proxy: proxy.clone(),
        client,
        cluster,
        topic,
        partitions,
    };
    tokio::spawn(async move {
        producer.run(body, tx).await;
        drop(permit);
    });
    // The first answer decides the status; the rest stream behind it.
    let Some((status, first)) = rx.recv().await else {
        return ProxyError::BadRequest("the request body holds no record".into()).into_response();
    };
    let head = futures::stream::once(async move { Ok::<_, Infallible>(line(&first)) });
    let rest = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|(_, v)| (Ok::<_, Infallible>(line(&v)), rx))
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(head.chain(rest)),
    )
        .into_response()
}

fn line(v: &Value) -> Bytes {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

struct Producer {
    proxy: Proxy,
    client: Client,
    cluster: String,
    topic: String,
    partitions: i32,
}

impl Producer {
    async fn run(mut self, body: Body, tx: tokio::sync::mpsc::Sender<(StatusCode, Value)>) {
        let mut stream = body.into_data_stream();
        let mut split = Splitter::default();
        let mut any = false;
        loop {
            let chunk = match stream.next().await {
                Some(Ok(chunk)) => chunk,
                Some(Err(e)) => {
                    let _ = tx.send(err(ProxyError::BadRequest(e.to_string()))).await;
                    return;
                }
                None => break,
            };
            split.feed(&chunk);
            // Every complete object so far, in order.
            loop {
                match split.next_object() {
                    Ok(Some(obj)) => {
                        any = true;
                        let answer = match serde_json::from_slice::<Value>(&obj) {
                            Ok(v) => self.one(v).await,
                            Err(e) => {
                                let _ = tx.send(err(ProxyError::BadRequest(e.to_string()))).await;
                                return;
                            }
                        };
                        if tx.send(answer).await.is_err() {
                            return; // the client went away
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let _ = tx.send(err(e)).await;
                        return;
                    }
                }
            }
        }
        let e = if split.pending() {
            ProxyError::BadRequest("the request body ends inside a JSON object".into())
        } else if !any {
            ProxyError::BadRequest("the request body holds no record".into())
        } else {
            return;
        };
        let _ = tx.send(err(e)).await;
    }

    async fn one(&mut self, v: Value) -> (StatusCode, Value) {
        match self.produce_one(v).await {
            Ok(v) => (StatusCode::OK, v),
            Err(e) => err(e),
        }
    }

    async fn produce_one(&mut self, v: Value) -> ProxyResult<Value> {
        let rec: ProduceRecord =
            serde_json::from_value(v).map_err(|e| ProxyError::BadRequest(e.to_string()))?;
        let registry = self.proxy.registry.get();
        let empty = ProduceData::default();
        let key = match &rec.key {
            Some(k) => formats::encode(registry, &self.topic, Side::Key, k)?,
            None => formats::encode(registry, &self.topic, Side::Key, &empty)?,
        };
        let value = match &rec.value {
            Some(v) => formats::encode(registry, &self.topic, Side::Value, v)?,
            None => formats::encode(registry, &self.topic, Side::Value, &empty)?,
        };
        let partition = match rec.partition_id {
            Some(p) if p < 0 || p >= self.partitions => return Err(ProxyError::PartitionNotFound),
            Some(p) => p,
            None => choose_partition(key.bytes.as_deref(), self.partitions),
        };
        let timestamp = match &rec.timestamp {
            Some(t) => parse_iso8601(t).ok_or_else(|| {
                ProxyError::BadRequest(format!(
                    "timestamp {t:?} is not ISO 8601 (2024-01-31T12:00:00.000Z)"
                ))
            })?,
            None => crate::now_ms(),
        };
        let mut headers = IndexMap::new();
        for h in &rec.headers {
            let v = match &h.value {
                Some(b) => Some(Bytes::from(B64.decode(b).map_err(|e| {
                    ProxyError::BadRequest(format!("header {} is not base64: {e}", h.name))
                })?)),
                None => None,
            };
            headers.insert(StrBytes::from_string(h.name.clone()), v);
        }
        let (offset, appended_at) = self
            .send(partition, timestamp, &key, &value, headers)
            .await?;
        Ok(serde_json::json!({
            "error_code": 200,
            "cluster_id": self.cluster,
            "topic_name": self.topic,
            "partition_id": partition,
            "offset": offset,
            "timestamp": iso8601(if appended_at >= 0 { appended_at } else { timestamp }),
            "key": key.bytes.as_ref().map(|_| key.describe()),
            "value": value.bytes.as_ref().map(|_| value.describe()),
        }))
    }

    async fn send(
        &mut self,
        partition: i32,
        timestamp: i64,
        key: &Encoded,
        value: &Encoded,
        headers: IndexMap<StrBytes, Option<Bytes>>,
    ) -> ProxyResult<(i64, i64)> {
        let record = Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: -1,
            timestamp,
            key: key.bytes.clone(),
            value: value.bytes.clone(),
            headers,
        };
        let mut batch = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut batch,
            [&record],
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .map_err(|e| ProxyError::Internal(format!("encoding the batch: {e:#}")))?;
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(self.client.timeout.as_millis() as i32)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(crate::cli::topic_name(&self.topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch.freeze()))])]);
        // v12: topics by name (v13 names them by id).
        let (resp, _) = self.client.call(ANY, &req, 12).await?;
        let p = resp
            .responses
            .into_iter()
            .flat_map(|t| t.partition_responses)
            .next()
            .ok_or_else(|| ProxyError::Internal("Produce: empty answer".into()))?;
        if p.error_code != 0 {
            let message = p
                .record_errors
                .first()
                .and_then(|r| r.batch_index_error_message.as_ref())
                .or(p.error_message.as_ref())
                .map(|m| m.to_string());
            return Err(ProxyError::Kafka {
                code: p.error_code,
                message,
            });
        }
        Ok((p.base_offset, p.log_append_time_ms))
    }
}

/// Finds the top-level JSON objects of a byte stream as it arrives, in one pass (brace
/// depth outside strings), so a record is parsed once however it was cut into chunks, and a
/// record that grows past `MAX_PENDING` is refused without holding more.
#[derive(Default)]
struct Splitter {
    buf: BytesMut,
    /// Bytes of `buf` scanned already.
    scanned: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl Splitter {
    fn feed(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// Whether an object has begun and not ended.
    fn pending(&self) -> bool {
        self.buf.iter().any(|b| !b.is_ascii_whitespace())
    }

    fn next_object(&mut self) -> ProxyResult<Option<Bytes>> {
        while self.scanned < self.buf.len() {
            let b = self.buf[self.scanned];
            self.scanned += 1;
            if self.depth == 0 {
                if b.is_ascii_whitespace() {
                    // Between objects: drop what was scanned.
                    let _ = self.buf.split_to(self.scanned);
                    self.scanned = 0;
                    continue;
                }
                if b != b'{' {
                    return Err(ProxyError::BadRequest(format!(
                        "expected a JSON object for each record, found {:?}",
                        b as char
                    )));
                }
                self.depth = 1;
                continue;
            }
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        let obj = self.buf.split_to(self.scanned).freeze();
                        self.scanned = 0;
                        return Ok(Some(obj));
                    }
                }
                _ => {}
            }
        }
        if self.buf.len() > MAX_PENDING {
            return Err(ProxyError::TooLarge(MAX_PENDING));
        }
        Ok(None)
    }
}

fn err(e: ProxyError) -> (StatusCode, Value) {
    (e.status_and_code().0, e.body())
}

/// The Java producer's partition for a key (murmur2, positive, modulo), round robin
/// without one.
pub fn choose_partition(key: Option<&[u8]>, partitions: i32) -> i32 {
    let n = partitions.max(1) as u32;
    match key {
        Some(k) => ((murmur2(k) & 0x7fff_ffff) as u32 % n) as i32,
        None => (ROUND_ROBIN.fetch_add(1, Ordering::Relaxed) % n) as i32,
    }
}

/// Kafka's murmur2 (`Utils.murmur2`), which the Java client's default partitioner uses.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    match tail.len() {
        3 => {
            h ^= (tail[2] as u32) << 16;
            h ^= (tail[1] as u32) << 8;
            h ^= tail[0] as u32;
            h = h.wrapping_mul(M);
        }
        2 => {
            h ^= (tail[1] as u32) << 8;
            h ^= tail[0] as u32;
            h = h.wrapping_mul(M);
        }
        1 => {
            h ^= tail[0] as u32;
            h = h.wrapping_mul(M);
        }
        _ => {}
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_keys_when_partitioned_then_same_as_the_java_client() {
        // Values of Kafka's own UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
        let p = choose_partition(Some(b"foobar"), 3);
        assert_eq!(p, ((-790332482i32 & 0x7fffffff) % 3));
    }

    #[test]
    fn given_objects_cut_anywhere_when_split_then_each_comes_whole_once() {
        let text = br#" {"a":"}{\"","b":[{"c":1}]}
{"d":2}{"e":"x"} "#;
        for cut in 1..text.len() {
            let mut s = Splitter::default();
            let mut got = Vec::new();
            for part in [&text[..cut], &text[cut..]] {
                s.feed(part);
                while let Some(o) = s.next_object().unwrap() {
                    got.push(serde_json::from_slice::<Value>(&o).unwrap());
                }
            }
            assert_eq!(got.len(), 3, "cut at {cut}");
            assert_eq!(got[0]["a"], "}{\"");
            assert!(!s.pending());
        }
        let mut s = Splitter::default();
        s.feed(b"[1]");
        assert!(s.next_object().is_err());
        let mut s = Splitter::default();
        s.feed(b"{\"a\":\"");
        s.feed(&vec![b'x'; MAX_PENDING + 1]);
        assert_eq!(s.next_object().unwrap_err().status_and_code().1, 413);
    }

    #[test]
    fn given_record_json_then_fields_parse_and_unknown_ones_are_refused() {
        let r: ProduceRecord = serde_json::from_str(
            r#"{"partition_id":1,"headers":[{"name":"h","value":"aGk="}],
                "key":{"type":"STRING","data":"k"},"value":{"type":"JSON","data":{"a":1}}}"#,
        )
        .unwrap();
        assert_eq!(r.partition_id, Some(1));
        assert_eq!(r.headers[0].value.as_deref(), Some("aGk="));
        assert!(serde_json::from_str::<ProduceRecord>(r#"{"valeu":{}}"#).is_err());
        assert!(serde_json::from_str::<ProduceRecord>(r#"{"value":{"type":"XML"}}"#).is_err());
    }
}
