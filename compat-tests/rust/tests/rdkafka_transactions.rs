//! Transactions through the rdkafka crate (librdkafka's transactional producer), against
//! `strom serve` and Apache Kafka (run by compat-tests/run-clients.sh, STROM_COMPAT_BOOTSTRAP):
//! a committed, an aborted and a committed transaction of 10 records each on one partition;
//! a read_committed consumer sees the 20 committed records at Kafka's offsets (0–9, 22–31: each
//! marker takes an offset), a read_uncommitted one all 30.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

const WAIT: Duration = Duration::from_secs(60);

fn bootstrap() -> String {
    std::env::var("STROM_COMPAT_BOOTSTRAP")
        .expect("STROM_COMPAT_BOOTSTRAP is not set (run through compat-tests/run-clients.sh)")
}

fn unique(what: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("rust-txn-{what}-{:x}", nanos ^ (std::process::id() as u128) << 40)
}

/// (offset, value) of every record up to the partition's end for `isolation`, at least
/// `expect` of them (markers follow EndTxn's answer, so the LSO may lag a moment).
fn read(topic: &str, isolation: &str, expect: usize) -> Vec<(i64, String)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", unique("reader"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", isolation)
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning).unwrap();
    c.assign(&tpl).unwrap();
    let (mut out, mut eof) = (Vec::new(), false);
    let deadline = Instant::now() + WAIT;
    while (!eof || out.len() < expect) && Instant::now() < deadline {
        match c.poll(Duration::from_millis(200)) {
            None => {}
            Some(Ok(m)) => {
                eof = false;
                let v = String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string();
                out.push((m.offset(), v));
            }
            Some(Err(KafkaError::PartitionEOF(_))) => eof = true,
            Some(Err(e)) => panic!("consume: {e}"),
        }
    }
    assert!(eof && out.len() >= expect, "{isolation}: {} of {expect} records", out.len());
    out
}

#[test]
fn commit_abort_commit_seen_by_isolation_level_at_kafka_offsets() {
    let topic = unique("vis");
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("admin");
    let r = block_on(admin.create_topics(
        &[NewTopic::new(&topic, 1, TopicReplication::Fixed(1))],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
    ))
    .expect("create_topics");
    assert!(r.iter().all(|r| r.is_ok()), "create {topic}: {r:?}");
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", unique("tx"))
        .set("linger.ms", "5")
        .create()
        .expect("producer");
    p.init_transactions(WAIT).expect("init_transactions");
    for (tag, commit) in [("c1", true), ("a", false), ("c2", true)] {
        p.begin_transaction().expect("begin");
        for i in 0..10 {
            let v = format!("{tag}-{i}");
            let mut rec = BaseRecord::<[u8], [u8]>::to(&topic).partition(0).payload(v.as_bytes());
            loop {
                match p.send(rec) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                        p.poll(Duration::from_millis(10));
                        rec = r;
                    }
                    Err((e, _)) => panic!("send: {e}"),
                }
            }
        }
        p.flush(WAIT).expect("flush");
        if commit {
            p.commit_transaction(WAIT).expect("commit");
        } else {
            p.abort_transaction(WAIT).expect("abort");
        }
    }
    let committed = read(&topic, "read_committed", 20);
    let want: Vec<(i64, String)> = (0..10)
        .map(|i| (i, format!("c1-{i}")))
        .chain((0..10).map(|i| (22 + i, format!("c2-{i}"))))
        .collect();
    assert_eq!(committed, want);
    let all: Vec<i64> = read(&topic, "read_uncommitted", 30).into_iter().map(|(o, _)| o).collect();
    let want: Vec<i64> = (0..10).chain(11..21).chain(22..32).collect();
    assert_eq!(all, want);
}
