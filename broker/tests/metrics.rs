//! `/metrics` after a known workload, over real TCP, parsed with a real Prometheus text parser
//! (the prometheus-parse crate): the counters must equal what was produced and fetched, the
//! lag what was left unconsumed.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use common::{batch, start, topic_name, Client};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use prometheus_parse::{Scrape, Value};

const TOPIC: &str = "metered";
const PARTITIONS: i32 = 3;

fn produce(c: &mut Client, partition: i32, records: Bytes) {
    produce_to(c, TOPIC, partition, records)
}

fn produce_to(c: &mut Client, topic: &str, partition: i32, records: Bytes) {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])]);
    let r: ProduceResponse = c.call(ApiKey::Produce, 11, &req);
    let pr = &r.responses[0].partition_responses[0];
    assert_eq!(pr.error_code, 0, "{:?}", pr.error_message);
}

/// Fetches the whole partition in one response; returns the bytes the broker sent.
fn fetch_all(c: &mut Client, partition: i32) -> usize {
    fetch_all_of(c, TOPIC, partition)
}

fn fetch_all_of(c: &mut Client, topic: &str, partition: i32) -> usize {
    let req = FetchRequest::default()
        .with_max_bytes(10 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(0)
                .with_partition_max_bytes(10 << 20)])]);
    let r: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.records.as_ref().map_or(0, |r| r.len())
}

fn commit(c: &mut Client, group: &str, partition: i32, offset: i64) {
    commit_to(c, group, TOPIC, partition, offset)
}

fn commit_to(c: &mut Client, group: &str, topic: &str, partition: i32, offset: i64) {
    let s = |v: &str| StrBytes::from_string(v.to_string());
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(offset)])]);
    let r: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
}

fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect admin");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // One write: `write!` on a socket sends each piece of the format separately, and the admin
    // server answers whatever its first read got.
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read response");
    let (head, body) = out.split_once("\r\n\r\n").expect("http response");
    (head.to_string(), body.to_string())
}

fn scrape(addr: SocketAddr) -> Scrape {
    let (head, body) = http_get(addr, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("valid Prometheus text")
}

/// Sum over every series of `metric` whose labels include all of `want` (e.g. over shards).
fn sum(s: &Scrape, metric: &str, want: &[(&str, &str)]) -> f64 {
    s.samples
        .iter()
        .filter(|x| x.metric == metric)
        .filter(|x| want.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| match &x.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
            Value::Summary(_) => 0.0,
        })
        .sum()
}

fn create_topic(c: &mut Client, topic: &str, partitions: i32) {
    let req = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(1)]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(r.topics[0].error_code, 0);
}

#[test]
fn given_known_workload_when_scraping_metrics_then_counters_and_lag_match_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), 2);
    let (_, ready) = http_get(server.metrics_addr, "/ready");
    assert_eq!(ready, "ready\n");

    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, TOPIC, PARTITIONS);

    // Partition p gets p+1 batches of 10·(p+1) records: different counts per partition, so a
    // counter attributed to the wrong partition shows.
    let mut produced = vec![(0u64, 0u64); PARTITIONS as usize];
    let mut produce_requests = 0;
    for p in 0..PARTITIONS {
        for b in 0..=p {
            let n = 10 * (p as usize + 1);
            let records = batch(n, &format!("p{p}b{b}"));
            produced[p as usize].0 += records.len() as u64;
            produced[p as usize].1 += n as u64;
            produce(&mut c, p, records);
            produce_requests += 1;
        }
    }
    // Partitions 0 and 1 are read once in full; partition 2 is never read.
    let mut fetched_bytes = [0u64; PARTITIONS as usize];
    for p in 0..2 {
        fetched_bytes[p as usize] = fetch_all(&mut c, p) as u64;
    }
    // Group g1 consumed partition 0 up to 4 and partition 2 up to nothing (offset 0).
    commit(&mut c, "g1", 0, 4);
    commit(&mut c, "g1", 2, 0);

    let s = scrape(server.metrics_addr);
    for p in 0..PARTITIONS {
        let ps = p.to_string();
        let l = [("topic", TOPIC), ("partition", ps.as_str())];
        let (bytes, records) = produced[p as usize];
        assert_eq!(
            sum(&s, "strom_produced_bytes_total", &l),
            bytes as f64,
            "p{p}"
        );
        assert_eq!(
            sum(&s, "strom_produced_records_total", &l),
            records as f64,
            "p{p}"
        );
        let (fb, fr) = if p < 2 {
            (fetched_bytes[p as usize], records)
        } else {
            (0, 0)
        };
        assert_eq!(
            fb,
            if p < 2 { bytes } else { 0 },
            "a full fetch sends every batch byte"
        );
        assert_eq!(sum(&s, "strom_fetched_bytes_total", &l), fb as f64, "p{p}");
        assert_eq!(
            sum(&s, "strom_fetched_records_total", &l),
            fr as f64,
            "p{p}"
        );
        assert_eq!(
            sum(&s, "strom_partition_high_watermark", &l),
            records as f64,
            "p{p}"
        );
        // No transactions: read_committed reads up to the high watermark.
        assert_eq!(
            sum(&s, "strom_partition_last_stable_offset", &l),
            records as f64,
            "p{p}"
        );
        assert_eq!(sum(&s, "strom_partition_open_transactions", &l), 0.0);
        assert!(
            sum(&s, "strom_partition_size_bytes", &l) >= bytes as f64,
            "p{p}"
        );
    }
    let lag = |p: &str| {
        sum(
            &s,
            "strom_consumer_group_lag",
            &[("group", "g1"), ("topic", TOPIC), ("partition", p)],
        )
    };
    assert_eq!(lag("0"), produced[0].1 as f64 - 4.0);
    assert_eq!(lag("2"), produced[2].1 as f64);
    assert_eq!(
        sum(&s, "strom_consumer_group_members", &[("group", "g1")]),
        0.0
    );

    let produce_seen = sum(
        &s,
        "strom_request_duration_seconds",
        &[("api", "Produce"), ("version", "11")],
    );
    assert_eq!(produce_seen, produce_requests as f64);
    assert_eq!(sum(&s, "strom_connections_open", &[]), 1.0);
    assert!(sum(&s, "strom_connections_accepted_total", &[]) >= 1.0);
    assert_eq!(sum(&s, "strom_ready", &[]), 1.0);
    assert_eq!(sum(&s, "strom_shards_reporting", &[]), 2.0);
    // acks=-1: every produce waited for an fdatasync.
    assert!(sum(&s, "strom_fdatasync_duration_seconds", &[]) >= 1.0);
    assert!(sum(&s, "strom_process_resident_memory_bytes", &[]) > 0.0);
    for shard in ["0", "1"] {
        assert_eq!(
            sum(
                &s,
                "strom_inflight_request_bytes_limit",
                &[("shard", shard)]
            ),
            256.0 * 1024.0 * 1024.0
        );
    }

    // Every strom_* series the shipped dashboard and alert rules query is one we serve (or,
    // strom_migrate_*, one `strom migrate` serves on the same address while it runs; or one
    // only a clustered node serves).
    let migrator = strom::migrate::metrics::names();
    let clustered = strom::metrics::cluster::names();
    let mut served: std::collections::HashSet<&str> =
        s.samples.iter().map(|x| x.metric.as_str()).collect();
    served.extend(migrator.iter().map(|n| n.as_str()));
    served.extend(clustered.iter().map(|n| n.as_str()));
    for file in [
        "grafana/strom-dashboard.json",
        "prometheus/strom-alerts.yml",
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../deploy")
            .join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        for name in metric_names(&text) {
            let base = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .filter(|b| served.contains(b))
                .unwrap_or(&name);
            assert!(
                served.contains(base),
                "{file} queries {name}, which /metrics does not serve"
            );
        }
    }

    drop(c);
    server.shutdown().unwrap();
}

/// `strom_…` metric names in a text (recording rules are `strom:…`, so they do not match).
fn metric_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("strom_") {
        let name: String = rest[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[i + name.len()..];
        out.push(name);
    }
    out
}

fn start_on(dir: &std::path::Path, io_backend: &str, listen: SocketAddr) -> strom::Server {
    let config = strom::config::BrokerConfig {
        listen,
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        schema_registry_listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.to_path_buf(),
        shards: 2,
        io_backend: io_backend.into(),
        ..Default::default()
    };
    strom::Server::start(config, Default::default()).expect("broker starts")
}

/// Series of any metric carrying `label=value`.
fn series_with(s: &Scrape, label: &str, value: &str) -> Vec<String> {
    s.samples
        .iter()
        .filter(|x| x.labels.get(label) == Some(value))
        .map(|x| x.metric.clone())
        .collect()
}

#[test]
fn given_io_uring_deleted_topic_and_restart_when_scraping_then_queue_depth_no_stale_series_and_lag_reloaded(
) {
    // io_uring where the kernel allows it (then its queue depth must be served), else sync.
    let uring = io_uring::IoUring::new(8).is_ok();
    let backend = if uring { "uring" } else { "sync" };
    let dir = tempfile::tempdir().unwrap();
    let server = start_on(dir.path(), backend, "127.0.0.1:0".parse().unwrap());
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, "doomed", 2);
    create_topic(&mut c, "kept", 1);
    for p in 0..2 {
        produce_to(&mut c, "doomed", p, batch(5, "d"));
        assert!(fetch_all_of(&mut c, "doomed", p) > 0);
    }
    for i in 0..3 {
        produce_to(&mut c, "kept", 0, batch(10, &format!("k{i}")));
    }
    commit_to(&mut c, "g2", "doomed", 0, 2);
    commit_to(&mut c, "g2", "kept", 0, 7);

    let s = scrape(server.metrics_addr);
    assert!(!series_with(&s, "topic", "doomed").is_empty());
    let depth = sum(&s, "strom_io_uring_queue_depth", &[]);
    if uring {
        // Every acks=-1 produce submitted at least a write and an fdatasync on the ring.
        assert!(depth >= 2.0 * 5.0, "queue depth observations: {depth}");
        assert_eq!(
            sum(&s, "strom_io_uring_in_flight", &[]),
            0.0,
            "all completed"
        );
    } else {
        assert_eq!(depth, 0.0, "no ring, no queue depth series");
    }

    let req = DeleteTopicsRequest::default().with_topic_names(vec![topic_name("doomed")]);
    let r: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 4, &req);
    assert_eq!(r.responses[0].error_code, 0);
    let s = scrape(server.metrics_addr);
    assert_eq!(
        series_with(&s, "topic", "doomed"),
        Vec::<String>::new(),
        "a deleted topic's series are gone"
    );
    assert_eq!(
        sum(&s, "strom_produced_records_total", &[("topic", "kept")]),
        30.0
    );
    drop(c);
    let addr = server.kafka_addr;
    server.shutdown().unwrap();

    // After a restart the group's offsets are loaded from __consumer_offsets; its lag must
    // come back with them (polled: loading is asynchronous to the listener opening).
    let server = start_on(dir.path(), backend, addr);
    let want = [("group", "g2"), ("topic", "kept"), ("partition", "0")];
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let s = loop {
        let s = scrape(server.metrics_addr);
        if s.samples
            .iter()
            .any(|x| x.metric == "strom_consumer_group_lag" && x.labels.get("group") == Some("g2"))
        {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "g2's lag never appeared after restart"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(sum(&s, "strom_consumer_group_lag", &want), 30.0 - 7.0);
    assert_eq!(sum(&s, "strom_consumer_group_committed_offset", &want), 7.0);
    assert!(series_with(&s, "topic", "doomed").is_empty());
    // Counters are per process: the restarted broker has produced nothing yet.
    assert_eq!(
        sum(&s, "strom_produced_records_total", &[("topic", "kept")]),
        0.0
    );
    server.shutdown().unwrap();
}

/// Bytes copied per byte: 0 on the zero-copy paths (uncompressed produce, every fetch), and
/// more than 0 once a LogAppendTime topic makes storage rewrite its batches — the counter
/// sees a copy when there is one.
#[test]
fn given_uncompressed_produce_and_fetch_when_scraping_then_no_bytes_copied_until_log_append_time() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), 2);
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, "plain", 1);
    for i in 0..10 {
        produce_to(&mut c, "plain", 0, batch(50, &format!("p{i}")));
    }
    let fetched = fetch_all_of(&mut c, "plain", 0);
    assert!(fetched > 0);
    let s = scrape(server.metrics_addr);
    assert!(sum(&s, "strom_fetch_record_bytes_total", &[]) >= fetched as f64);
    assert!(sum(&s, "strom_produce_record_bytes_total", &[]) > 0.0);
    assert_eq!(
        sum(
            &s,
            "strom_record_bytes_copied_per_byte",
            &[("path", "produce")]
        ),
        0.0
    );
    assert_eq!(
        sum(
            &s,
            "strom_record_bytes_copied_per_byte",
            &[("path", "fetch")]
        ),
        0.0
    );

    let req = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name("stamped"))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(vec![
            kafka_protocol::messages::create_topics_request::CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("message.timestamp.type"))
                .with_value(Some(StrBytes::from_static_str("LogAppendTime"))),
        ])]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(r.topics[0].error_code, 0);
    produce_to(&mut c, "stamped", 0, batch(50, "s"));
    let s = scrape(server.metrics_addr);
    assert!(sum(&s, "strom_produce_record_bytes_copied_total", &[]) > 0.0);
    assert!(
        sum(
            &s,
            "strom_record_bytes_copied_per_byte",
            &[("path", "produce")]
        ) > 0.0
    );
    server.shutdown().unwrap();
}

/// A fetch of many partitions reaches each other shard with one message, not one per
/// partition, and a long poll woken by one partition reads that one again, not all of them.
/// Counted by `strom_cross_shard_sent_total` (messages a shard sent to another).
#[test]
fn given_a_fetch_of_many_partitions_when_served_then_one_message_per_other_shard() {
    const N: i32 = 16;
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), 2);
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, "wide", N);
    for p in 0..N {
        produce_to(&mut c, "wide", p, batch(5, &format!("w{p}")));
    }
    let fetch = |offset: i64, max_wait: i32| {
        FetchRequest::default()
            .with_max_bytes(10 << 20)
            .with_max_wait_ms(max_wait)
            .with_min_bytes(1)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name("wide"))
                .with_partitions(
                    (0..N)
                        .map(|p| {
                            FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(1 << 20)
                        })
                        .collect(),
                )])
    };
    let sent = |addr| sum(&scrape(addr), "strom_cross_shard_sent_total", &[]);
    let before = sent(server.metrics_addr);
    let r: FetchResponse = c.call(ApiKey::Fetch, 12, &fetch(0, 0));
    let parts = &r.responses[0].partitions;
    assert_eq!(parts.len(), N as usize);
    assert!(parts
        .iter()
        .all(|p| p.error_code == 0 && p.records.as_ref().is_some_and(|r| !r.is_empty())));
    let one_fetch = sent(server.metrics_addr) - before;
    assert!(
        one_fetch <= 1.0,
        "{one_fetch} cross-shard messages for one fetch of {N} partitions"
    );

    // A long poll at the end of every partition, woken by a produce to one of them: the wake
    // re-reads that partition only (at most one more message), whatever N is.
    let mut poller = Client::connect(server.kafka_addr);
    let before = sent(server.metrics_addr);
    let poll = poller.send(ApiKey::Fetch, 12, &fetch(5, 10_000));
    std::thread::sleep(Duration::from_millis(200));
    let after_read = sent(server.metrics_addr) - before;
    produce_to(&mut c, "wide", 3, batch(1, "late"));
    let r: FetchResponse = poller.receive(12, poll);
    let with_data: Vec<i32> = r.responses[0]
        .partitions
        .iter()
        .filter(|p| p.records.as_ref().is_some_and(|r| !r.is_empty()))
        .map(|p| p.partition_index)
        .collect();
    assert_eq!(with_data, vec![3]);
    // The produce itself may cross shards once (the producer's connection); the wake adds at
    // most one read message.
    let total = sent(server.metrics_addr) - before;
    assert!(total - after_read <= 2.0, "{after_read} then {total}");
    server.shutdown().unwrap();
}
