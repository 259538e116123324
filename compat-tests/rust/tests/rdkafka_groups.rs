//! Consumer groups through the rdkafka crate (librdkafka), over both group protocols:
//! `classic` (JoinGroup/SyncGroup) and `consumer` (KIP-848). Run against `strom serve` and
//! Apache Kafka by compat-tests/run-clients.sh (STROM_COMPAT_BOOTSTRAP).
//!
//! Two members of one group split a 4-partition topic: disjoint, non-empty, complete.
//! (Commit-and-resume is covered by the Python suites; with rust-rdkafka 0.38 a BaseConsumer
//! that has committed blocked in close against Kafka 4.4 and Strom alike, so it is not here.)

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::DefaultProducerContext;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};

const PARTITIONS: i32 = 4;
const PER_PARTITION: usize = 50;

fn bootstrap() -> String {
    std::env::var("STROM_COMPAT_BOOTSTRAP")
        .expect("STROM_COMPAT_BOOTSTRAP is not set (run through compat-tests/run-clients.sh)")
}

fn unique(what: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "rust-groups-{what}-{:x}",
        nanos ^ (std::process::id() as u128) << 40
    )
}

/// A topic with PER_PARTITION records in each partition, values "p<partition>-<i>".
fn topic_with_records() -> String {
    let topic = unique("t");
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("admin");
    let r = block_on(admin.create_topics(
        &[NewTopic::new(
            &topic,
            PARTITIONS,
            TopicReplication::Fixed(1),
        )],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
    ))
    .expect("create_topics");
    assert!(r.iter().all(|r| r.is_ok()), "create {topic}: {r:?}");
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("acks", "all")
        .set("message.timeout.ms", "60000")
        .create()
        .expect("producer");
    for p in 0..PARTITIONS {
        for i in 0..PER_PARTITION {
            let v = format!("p{p}-{i}");
            let mut rec = BaseRecord::<[u8], [u8]>::to(&topic)
                .partition(p)
                .payload(v.as_bytes());
            // Partitions of a brand-new topic may need a moment on Kafka: retry sends.
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match producer.send(rec) {
                    Ok(()) => break,
                    Err((e, r)) if Instant::now() < deadline => {
                        let _ = e;
                        std::thread::sleep(Duration::from_millis(20));
                        rec = r;
                    }
                    Err((e, _)) => panic!("send: {e}"),
                }
            }
        }
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    topic
}

fn member(group: &str, protocol: &str) -> BaseConsumer {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap())
        .set("group.id", group)
        .set("group.protocol", protocol)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    if protocol == "classic" {
        c.set("session.timeout.ms", "10000")
            .set("heartbeat.interval.ms", "500");
    }
    c.create().expect("consumer")
}

/// Leaves the group the way an application does: unsubscribe, serve the revocation by
/// polling, then close. (Dropping a BaseConsumer that still holds an assignment can block in
/// librdkafka's close, against Kafka as against Strom.)
fn leave(c: BaseConsumer) {
    c.unsubscribe();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !assigned(&c).is_empty() && Instant::now() < deadline {
        let _ = c.poll(Duration::from_millis(100));
    }
    drop(c);
}

fn assigned(c: &BaseConsumer) -> BTreeSet<i32> {
    c.assignment()
        .map(|a| a.elements().iter().map(|e| e.partition()).collect())
        .unwrap_or_default()
}

fn two_members_split_the_partitions(protocol: &str) {
    let topic = topic_with_records();
    let group = unique("split");
    let a = member(&group, protocol);
    let b = member(&group, protocol);
    a.subscribe(&[&topic]).unwrap();
    b.subscribe(&[&topic]).unwrap();
    // Both poll until the group has settled with both members holding partitions.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let _ = a.poll(Duration::from_millis(100));
        let _ = b.poll(Duration::from_millis(100));
        let (pa, pb) = (assigned(&a), assigned(&b));
        if !pa.is_empty() && !pb.is_empty() && pa.len() + pb.len() == PARTITIONS as usize {
            assert!(
                pa.is_disjoint(&pb),
                "{protocol}: overlapping assignments {pa:?} {pb:?}"
            );
            let all: BTreeSet<i32> = pa.union(&pb).copied().collect();
            assert_eq!(all, (0..PARTITIONS).collect::<BTreeSet<_>>());
            leave(a);
            leave(b);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{protocol}: no balanced assignment: {pa:?} {pb:?}"
        );
    }
}

#[test]
fn classic_two_members_split_the_partitions() {
    two_members_split_the_partitions("classic");
}

#[test]
fn consumer_protocol_two_members_split_the_partitions() {
    two_members_split_the_partitions("consumer");
}
