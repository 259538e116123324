//! Racks on a 3-node cluster of real `strom serve` processes, one rack per node and Kafka's
//! rack-aware replica selector (KIP-392), driven through the wire codec: DescribeCluster and
//! Metadata name the racks, an RF 3 partition has a replica in each rack, the leader sends a
//! consumer of another rack to the follower there (`preferred_read_replica`, no records), that
//! follower serves the records to a Fetch v11+ up to its high watermark and refuses an older
//! one, and a consumer without a rack reads from the leader.

mod common;

use std::time::Duration;

use common::cluster::{try_call, TestCluster};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DescribeClusterRequest,
    DescribeClusterResponse, FetchRequest, FetchResponse,
};

const WAIT: Duration = Duration::from_secs(30);
const SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

fn rack(id: i32) -> String {
    format!("rack-{id}")
}

/// What one partition's Fetch answered: error, preferred read replica, high watermark,
/// record bytes.
#[derive(Debug)]
struct Fetched {
    error: i16,
    preferred: i32,
    high_watermark: i64,
    bytes: usize,
}

fn fetch(c: &TestCluster, i: usize, version: i16, name: &str, client_rack: &str) -> Fetched {
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_rack_id(client_rack.to_string().into())
        .with_topics(vec![FetchTopic::default()
            .with_topic(common::topic_name(name))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_current_leader_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = try_call(c.nodes[i].kafka, ApiKey::Fetch, version, &req).unwrap();
    let p = &r.responses[0].partitions[0];
    Fetched {
        error: p.error_code,
        preferred: p.preferred_read_replica.0,
        high_watermark: p.high_watermark,
        bytes: p.records.as_ref().map_or(0, |b| b.len()),
    }
}

#[test]
fn given_racks_and_the_rack_aware_selector_when_consumers_fetch_then_they_read_in_their_rack() {
    let c = TestCluster::start_with(3, |id| {
        vec![
            ("broker.rack".into(), rack(id)),
            ("replica.selector.class".into(), SELECTOR.into()),
        ]
    });
    // Every node knows the three racks.
    let described: DescribeClusterResponse = c.wait_for("three brokers with racks", WAIT, || {
        let r: DescribeClusterResponse = try_call(
            c.nodes[2].kafka,
            ApiKey::DescribeCluster,
            0,
            &DescribeClusterRequest::default(),
        )
        .ok()?;
        (r.brokers.len() == 3).then_some(r)
    });
    for b in &described.brokers {
        assert_eq!(b.rack.as_deref(), Some(rack(b.broker_id.0).as_str()));
    }

    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(20_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(common::topic_name("near"))
            .with_num_partitions(1)
            .with_replication_factor(3)]);
    let r: CreateTopicsResponse =
        try_call(c.nodes[0].kafka, ApiKey::CreateTopics, 7, &req).unwrap();
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    let (leader, replicas) = c.wait_for("the partition with its ISR of 3", WAIT, || {
        let m = c.metadata(0)?;
        let racks: Vec<_> = m.brokers.iter().map(|b| b.rack.clone()).collect();
        assert!(racks.iter().all(|r| r.is_some()), "{racks:?}");
        let t = m
            .topics
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some("near"))?;
        let p = t.partitions.first()?;
        (p.isr_nodes.len() == 3).then(|| {
            let replicas: Vec<i32> = p.replica_nodes.iter().map(|b| b.0).collect();
            (p.leader_id.0, replicas)
        })
    });
    let mut sorted = replicas.clone();
    sorted.sort();
    assert_eq!(sorted, vec![1, 2, 3], "a replica in each rack");
    let l = c.index_of(leader);
    let follower = *replicas.iter().find(|r| **r != leader).unwrap();
    let f = c.index_of(follower);
    // acks=all waits for the leader to be in touch with the quorum (NOT_ENOUGH_REPLICAS
    // until then, right after the start).
    c.wait_for("an acks=all produce", WAIT, || {
        let (code, _) = common::produce(&mut c.client(l), "near", 0, common::batch(3, "x"));
        (code == 0).then_some(())
    });

    // The leader sends a consumer of the follower's rack there, with no records, once the
    // follower has fetched what it asks for.
    let sent = c.wait_for("the leader naming the follower", WAIT, || {
        let r = fetch(&c, l, 12, "near", &rack(follower));
        (r.preferred == follower).then_some(r)
    });
    assert_eq!((sent.error, sent.bytes, sent.high_watermark), (0, 0, 3));
    // The follower serves it, up to its high watermark.
    let served = c.wait_for("the follower serving the records", WAIT, || {
        let r = fetch(&c, f, 12, "near", &rack(follower));
        (r.bytes > 0).then_some(r)
    });
    assert_eq!(
        (served.error, served.preferred, served.high_watermark),
        (0, -1, 3)
    );
    // Before KIP-392 (v10) only the leader serves: NOT_LEADER_OR_FOLLOWER.
    assert_eq!(fetch(&c, f, 10, "near", "").error, 6);
    // No rack, or the leader's own: read from the leader.
    for client_rack in [String::new(), rack(leader)] {
        let r = fetch(&c, l, 12, "near", &client_rack);
        assert_eq!((r.error, r.preferred), (0, -1), "rack {client_rack:?}");
        assert!(r.bytes > 0);
    }
}
