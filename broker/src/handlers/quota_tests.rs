//! Quota enforcement through the handlers (`quota`): what a client over its quota is told.
//! The harness's client has no client id and is `User:ANONYMOUS`, so these quotas are the
//! user's.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::testing::*;
use crate::metadata::quotas::{entity, USER};

fn set_anonymous_quota(h: &Harness, key: &str, value: f64) {
    h.state
        .ctx
        .quotas
        .store()
        .alter(&[(
            entity(&[(USER, Some("ANONYMOUS"))]),
            [(key.to_string(), Some(value))].into(),
        )])
        .unwrap();
}

#[test]
fn given_a_producer_quota_when_a_produce_takes_the_rate_over_then_appended_and_throttled() {
    let h = Harness::new();
    create(&h, "q", 1);
    // 10 s of 10 B/s is 100 bytes: one produce of 50 records is over it.
    set_anonymous_quota(&h, "producer_byte_rate", 10.0);
    let r: ProduceResponse = h.call(
        ApiKey::Produce,
        9,
        produce_req("q", 0, 1, batch(50, -1, -1, -1)),
    );
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    assert!(r.throttle_time_ms > 0, "{}", r.throttle_time_ms);
    // Kafka appends an over-quota produce.
    assert!(!fetch_records(&h, "q", 0).is_empty());
    // Without the quota the next produce is not throttled.
    h.state
        .ctx
        .quotas
        .store()
        .alter(&[(
            entity(&[(USER, Some("ANONYMOUS"))]),
            [("producer_byte_rate".to_string(), None)].into(),
        )])
        .unwrap();
    let r: ProduceResponse = h.call(
        ApiKey::Produce,
        9,
        produce_req("q", 0, 1, batch(50, -1, -1, -1)),
    );
    assert_eq!(r.throttle_time_ms, 0);
}

#[test]
fn given_a_consumer_quota_when_a_fetch_takes_the_rate_over_then_answered_empty_and_throttled() {
    let h = Harness::new();
    create(&h, "q", 1);
    let _: ProduceResponse = h.call(
        ApiKey::Produce,
        9,
        produce_req("q", 0, 1, batch(200, -1, -1, -1)),
    );
    let size = fetch_records(&h, "q", 0).len();
    // Exactly one such response per 10 s (the windows' floor): the first fetch is within it,
    // the second takes the rate to twice the quota.
    set_anonymous_quota(&h, "consumer_byte_rate", size as f64 / 10.0);
    let records = |r: &FetchResponse| -> usize {
        r.responses
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
            .sum()
    };
    let first = fetch_v12(&h, "q", 0);
    assert_eq!((records(&first), first.throttle_time_ms), (size, 0));
    let second = fetch_v12(&h, "q", 0);
    assert!(second.throttle_time_ms > 0, "{}", second.throttle_time_ms);
    assert_eq!(records(&second), 0, "a throttled fetch carries no records");
    // Its bytes were taken back: the third is throttled as much as the second (twice the
    // quota: one window, 10 s), not twice as much (three times the quota: 20 s).
    let third = fetch_v12(&h, "q", 0);
    assert!(
        (5_000..15_000).contains(&third.throttle_time_ms),
        "{} then {}",
        second.throttle_time_ms,
        third.throttle_time_ms
    );
}

#[test]
fn given_a_request_quota_when_any_request_runs_then_its_response_says_throttle_time() {
    let h = Harness::new();
    let r: MetadataResponse = h.call(
        ApiKey::Metadata,
        12,
        MetadataRequest::default().with_topics(None),
    );
    assert_eq!(r.throttle_time_ms, 0);
    // Any work at all is over a quota this small.
    set_anonymous_quota(&h, "request_percentage", 1e-9);
    let r: MetadataResponse = h.call(
        ApiKey::Metadata,
        12,
        MetadataRequest::default().with_topics(None),
    );
    assert!(r.throttle_time_ms > 0);
    // ... capped at one window (quota.window.size.seconds = 1).
    assert!(r.throttle_time_ms <= 1000, "{}", r.throttle_time_ms);
    let r: DescribeClusterResponse = h.call(
        ApiKey::DescribeCluster,
        0,
        DescribeClusterRequest::default(),
    );
    assert!(r.throttle_time_ms > 0);
    // ApiVersions is exempt.
    let r: ApiVersionsResponse = h.call(ApiKey::ApiVersions, 3, ApiVersionsRequest::default());
    assert_eq!(r.throttle_time_ms, 0);
}

fn create_topics(h: &Harness, version: i16, topics: &[(&str, i32)]) -> CreateTopicsResponse {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let req = CreateTopicsRequest::default().with_topics(
        topics
            .iter()
            .map(|(n, p)| {
                CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_string(n.to_string())))
                    .with_num_partitions(*p)
                    .with_replication_factor(1)
            })
            .collect(),
    );
    h.call(ApiKey::CreateTopics, version, req)
}

#[test]
fn given_a_controller_mutation_quota_when_the_bucket_is_empty_then_strict_versions_refuse_and_old_ones_throttle(
) {
    let h = Harness::new();
    // 1 partition/s: a burst of 11 (quota.window.num 11 × 1 s).
    set_anonymous_quota(&h, "controller_mutation_rate", 1.0);
    // The bucket may go negative once: 20 partitions are taken, then the next topic waits.
    let started = std::time::Instant::now();
    let r = create_topics(&h, 7, &[("m1", 20), ("m2", 1)]);
    let took = started.elapsed().as_millis() as i32;
    let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![0, 89]);
    assert_eq!(
        r.topics[1].error_message.as_deref(),
        Some("The throttling quota has been exceeded.")
    );
    // About 9 s until the bucket is back at 0, less what refilled while the 20 partitions
    // were being created (over a second on a loaded CI machine).
    assert!(
        (8_000 - took..=9_000).contains(&r.throttle_time_ms),
        "{} after {took} ms",
        r.throttle_time_ms
    );
    assert!(h.catalog_has("m1") && !h.catalog_has("m2"));
    // CreateTopics v5 knows no THROTTLING_QUOTA_EXCEEDED: created, and told to wait.
    let r = create_topics(&h, 5, &[("m3", 1)]);
    assert_eq!(r.topics[0].error_code, 0);
    assert!(r.throttle_time_ms > 0);
    // DeleteTopics v6 is strict too.
    let r: DeleteTopicsResponse = h.call(
        ApiKey::DeleteTopics,
        6,
        DeleteTopicsRequest::default().with_topics(vec![
            kafka_protocol::messages::delete_topics_request::DeleteTopicState::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("m1")))),
        ]),
    );
    assert_eq!(r.responses[0].error_code, 89);
    assert!(h.catalog_has("m1"));
}

/// A Fetch in a session (KIP-227) of partition 0 of `topic` from `offset`.
fn session_fetch(h: &Harness, topic: &str, id: i32, epoch: i32, offset: i64) -> FetchResponse {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(50 << 20)
        .with_session_id(id)
        .with_session_epoch(epoch)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(10 << 20)])]);
    h.call(ApiKey::Fetch, 12, req)
}

#[test]
fn given_a_throttled_session_fetch_when_the_next_one_comes_then_the_session_did_not_remember_it() {
    let h = Harness::new();
    create(&h, "q", 1);
    let _: ProduceResponse = h.call(
        ApiKey::Produce,
        9,
        produce_req("q", 0, 1, batch(100, -1, -1, -1)),
    );
    // A session at the end of the log: it remembers high watermark 100.
    let full = session_fetch(&h, "q", 0, 0, 100);
    let id = full.session_id;
    assert!(id != 0);
    assert_eq!(full.responses[0].partitions[0].high_watermark, 100);
    let _: ProduceResponse = h.call(
        ApiKey::Produce,
        9,
        produce_req("q", 0, 1, batch(100, -1, -1, -1)),
    );
    // Over the consumer quota: answered empty, throttled.
    set_anonymous_quota(&h, "consumer_byte_rate", 1.0);
    let throttled = session_fetch(&h, "q", id, 1, 100);
    assert!(throttled.throttle_time_ms > 0);
    assert!(throttled.responses.is_empty(), "{:?}", throttled.responses);
    h.state
        .ctx
        .quotas
        .store()
        .alter(&[(
            entity(&[(USER, Some("ANONYMOUS"))]),
            [("consumer_byte_rate".to_string(), None)].into(),
        )])
        .unwrap();
    // The next incremental fetch, at the new end: no records, yet the partition is in the
    // answer with high watermark 200, which the consumer never got (Kafka's
    // getThrottledResponse leaves the cached partitions as they were).
    let next = session_fetch(&h, "q", id, 2, 200);
    assert_eq!(next.throttle_time_ms, 0);
    assert_eq!(next.responses.len(), 1, "{:?}", next.responses);
    assert_eq!(next.responses[0].partitions[0].high_watermark, 200);
}

/// Busy on the test's thread for `d`, as a handler's own work is.
fn spin(d: std::time::Duration) {
    let until = std::time::Instant::now() + d;
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}

#[test]
fn given_a_request_quota_when_a_request_waits_then_the_wait_is_not_metered_but_work_is() {
    use std::time::Duration;
    let h = Harness::new();
    // 1 % of a thread: 300 ms of it over the 10 s a new client is measured on is 3 %.
    set_anonymous_quota(&h, "request_percentage", 1.0);
    // 300 ms parked on an fsync or a replication round: the thread served others meanwhile.
    let waits = h.request_context(ApiKey::OffsetCommit, 8);
    let throttle = h.block_on(waits.meter.run(async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        waits.record_request_time()
    }));
    assert_eq!(throttle, 0, "the wait was metered");
    // 300 ms of work on the thread: over the quota, throttled (at most one window).
    let works = h.request_context(ApiKey::OffsetCommit, 8);
    let throttle = h.block_on(works.meter.run(async {
        spin(Duration::from_millis(300));
        works.record_request_time()
    }));
    assert!((1..=1000).contains(&throttle), "{throttle}");
}
