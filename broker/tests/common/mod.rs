//! A minimal Kafka client over TCP for the broker's own integration tests: encodes requests
//! with the kafka-protocol crate, reads size-prefixed responses. Real client libraries are
//! exercised in compat-tests/; this one lets tests send exactly the bytes they want.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use strom::test_support::TestBatch;

pub mod cluster;
pub mod pki;

/// A connection to the broker: a TCP socket, or anything else that reads and writes (a TLS
/// stream).
pub struct Client<S: Read + Write = TcpStream> {
    pub stream: S,
    correlation: i32,
}

impl<S: Read + Write> Client<S> {
    /// A client over an already connected (and, for TLS, handshaken) stream.
    pub fn over(stream: S) -> Client<S> {
        Client {
            stream,
            correlation: 0,
        }
    }
}

impl Client {
    /// A request frame (size prefix included) without a connection, e.g. for benchmarks.
    pub fn encode_detached<Req: Encodable>(key: ApiKey, version: i16, req: &Req) -> BytesMut {
        Self::encode_with(1, key, version, req)
    }

    fn encode_with<Req: Encodable>(
        correlation: i32,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> BytesMut {
        let mut body = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(StrBytes::from_static_str("strom-it")))
            .encode(&mut body, key.request_header_version(version))
            .unwrap();
        req.encode(&mut body, version).unwrap();
        let mut frame = BytesMut::new();
        frame.put_i32(body.len() as i32);
        frame.put_slice(&body);
        frame
    }

    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            correlation: 0,
        }
    }
}

impl<S: Read + Write> Client<S> {
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads one response frame; Err when the broker closed the connection.
    pub fn read_frame(&mut self) -> std::io::Result<Bytes> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut body)?;
        Ok(Bytes::from(body))
    }

    pub fn encode<Req: Encodable>(&mut self, key: ApiKey, version: i16, req: &Req) -> BytesMut {
        self.correlation += 1;
        Client::encode_with(self.correlation, key, version, req)
    }

    /// Sends a request without waiting (pipelining); returns its correlation id.
    pub fn send<Req: Encodable>(&mut self, key: ApiKey, version: i16, req: &Req) -> i32 {
        let frame = self.encode(key, version, req);
        self.send_raw(&frame).expect("send");
        self.correlation
    }

    /// Reads the next response, which must answer `correlation`.
    pub fn receive<Resp: Decodable + HeaderVersion>(
        &mut self,
        version: i16,
        correlation: i32,
    ) -> Resp {
        let mut resp = self.read_frame().expect("response");
        let header = ResponseHeader::decode(&mut resp, Resp::header_version(version)).unwrap();
        assert_eq!(
            header.correlation_id, correlation,
            "responses in request order"
        );
        let r = Resp::decode(&mut resp, version).expect("decode response");
        assert!(!resp.has_remaining(), "trailing bytes in response");
        r
    }

    pub fn call<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> Resp {
        let frame = self.encode(key, version, req);
        self.send_raw(&frame).expect("send");
        let mut resp = self.read_frame().expect("response");
        let header = ResponseHeader::decode(&mut resp, Resp::header_version(version)).unwrap();
        assert_eq!(header.correlation_id, self.correlation);
        let r = Resp::decode(&mut resp, version).expect("decode response");
        assert!(!resp.has_remaining(), "trailing bytes in response");
        r
    }
}

/// Starts a broker on ephemeral ports with a temp data dir (kept by the returned guard).
pub fn start(dir: &std::path::Path, shards: usize) -> strom::Server {
    start_with(dir, shards, |_| {})
}

/// `start`, with `tune` changing the config first (intervals, limits).
pub fn start_with(
    dir: &std::path::Path,
    shards: usize,
    tune: impl FnOnce(&mut strom::config::BrokerConfig),
) -> strom::Server {
    let mut config = strom::config::BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        schema_registry_listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.to_path_buf(),
        shards,
        ..Default::default()
    };
    tune(&mut config);
    strom::Server::start(config, Default::default()).expect("broker starts")
}

/// CreateTopics v7 of one topic; panics unless it succeeds.
pub fn create_topic<S: Read + Write>(c: &mut Client<S>, name: &str, partitions: i32) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let req = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions)
        .with_replication_factor(1)]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(r.topics[0].error_code, 0, "creating {name}");
}

/// Produce v11, acks=all, one batch to one partition: (error code, base offset).
pub fn produce<S: Read + Write>(
    c: &mut Client<S>,
    name: &str,
    partition: i32,
    records: Bytes,
) -> (i16, i64) {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(name))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])]);
    let r: ProduceResponse = c.call(ApiKey::Produce, 11, &req);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// The producer ids DescribeProducers lists on partition 0 of `name`, sorted.
pub fn producer_ids<S: Read + Write>(c: &mut Client<S>, name: &str) -> Vec<i64> {
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse};
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(topic_name(name))
        .with_partition_indexes(vec![0])]);
    let r: DescribeProducersResponse = c.call(ApiKey::DescribeProducers, 0, &req);
    let mut v: Vec<i64> = r.topics[0].partitions[0]
        .active_producers
        .iter()
        .map(|s| s.producer_id.0)
        .collect();
    v.sort();
    v
}

pub fn topic_name(s: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(StrBytes::from_string(s.into()))
}

/// Timestamps of test batches: fixed, so tests that look at them are repeatable.
const TEST_TIMESTAMP_MS: i64 = 1_700_000_000_000;

/// `n` records keyed `<tag>-k<i>` and valued `<tag>-v<i>`, as one v2 batch.
pub fn batch(n: usize, tag: &str) -> Bytes {
    TestBatch::new(n).tag(tag).at(TEST_TIMESTAMP_MS).encode()
}

pub fn idempotent_batch(
    n: usize,
    tag: &str,
    producer_id: i64,
    epoch: i16,
    first_seq: i32,
) -> Bytes {
    TestBatch::new(n)
        .tag(tag)
        .at(TEST_TIMESTAMP_MS)
        .idempotent(producer_id, epoch, first_seq)
        .encode()
}

/// Like `idempotent_batch`, with the transactional attribute set.
pub fn transactional_batch(
    n: usize,
    tag: &str,
    producer_id: i64,
    epoch: i16,
    first_seq: i32,
) -> Bytes {
    TestBatch::new(n)
        .tag(tag)
        .at(TEST_TIMESTAMP_MS)
        .transactional(producer_id, epoch, first_seq)
        .encode()
}

/// Like `idempotent_batch`, with record timestamps from `timestamp_ms` on (the batch's
/// max timestamp is what producer-state expiration looks at, as in Kafka).
pub fn idempotent_batch_at(
    n: usize,
    tag: &str,
    producer_id: i64,
    first_seq: i32,
    timestamp_ms: i64,
) -> Bytes {
    TestBatch::new(n)
        .tag(tag)
        .at(timestamp_ms)
        .idempotent(producer_id, 0, first_seq)
        .encode()
}

/// kill -9 tests run the broker to kill in a child process: this test binary re-executed
/// with `env` set to `dir`, running only `test_name`, whose body (seeing `env`) builds its
/// state, calls `child_ready` and waits. This spawns it, waits up to 120 s for READY and
/// SIGKILLs it (no shutdown code runs); panics if it never got ready.
pub fn kill_child_when_ready(test_name: &str, env: &str, dir: &std::path::Path) {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut proc = Command::new(std::env::current_exe().unwrap())
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(env, dir)
        .stdout(Stdio::piped())
        .spawn()
        .expect("child broker starts");
    let stdout = proc.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("READY") {
                let _ = tx.send(());
                return;
            }
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(120));
    proc.kill().expect("SIGKILL"); // std's kill is SIGKILL
    proc.wait().unwrap();
    ready.expect("child broker got ready before the kill");
    assert!(!dir.join(".kafka_cleanshutdown").exists());
}

/// The child's side of `kill_child_when_ready`: says READY and waits to be killed.
pub fn child_ready() -> ! {
    println!("READY");
    std::io::stdout().flush().unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// Every record of a partition from offset 0 (Fetch v12, one call of up to 64 MiB).
pub fn fetch_all<S: Read + Write>(
    c: &mut Client<S>,
    name: &str,
    partition: i32,
) -> Vec<(i64, Bytes)> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, FetchResponse};
    use kafka_protocol::records::RecordBatchDecoder;
    let req = FetchRequest::default()
        .with_max_bytes(64 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(name))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(0)
                .with_partition_max_bytes(64 << 20)])]);
    let r: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let mut records = p.records.clone().unwrap_or_default();
    RecordBatchDecoder::decode_all(&mut records)
        .unwrap()
        .into_iter()
        .flat_map(|s| {
            s.records
                .into_iter()
                .map(|r| (r.offset, r.value.unwrap_or_default()))
        })
        .collect()
}

/// The admin port's `/metrics` body (and headers), over a plain HTTP/1.0 GET.
pub fn metrics_text(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}
