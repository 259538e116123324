//! AlterPartitionReassignments and ListPartitionReassignments through the wire codec at each
//! version they are advertised at, on 3 real `strom serve` processes (common/cluster.rs):
//! advertised on a cluster, v1's `allow_replication_factor_change` honoured, a move listed
//! while it runs and completed once the new replica is in sync, the removed replica's
//! directory deleted, a cancel of a finished move NO_REASSIGNMENT_IN_PROGRESS.
//! (`compat-tests/python/test_cluster_reassign.py` runs Kafka's own tool against Strom and
//! Kafka.)

mod common;

use std::time::Duration;

use common::cluster::{try_call, TestCluster};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey,
    ApiVersionsResponse, BrokerId, CreateTopicsRequest, CreateTopicsResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use strom::codec::api_versions::ApiVersionsRequest;
use strom::codec::Capped;

const WAIT: Duration = Duration::from_secs(30);

/// (replicas, ISR) of `name`-0 as node `i` reports them.
fn placement(c: &TestCluster, i: usize, name: &str) -> Option<(Vec<i32>, Vec<i32>)> {
    let m = c.metadata(i)?;
    let t = m
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(name))?;
    let p = t.partitions.first()?;
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    Some((ids(&p.replica_nodes), ids(&p.isr_nodes)))
}

fn alter(
    c: &TestCluster,
    version: i16,
    name: &str,
    replicas: Option<Vec<i32>>,
    allow_rf_change: bool,
) -> AlterPartitionReassignmentsResponse {
    let req = AlterPartitionReassignmentsRequest::default()
        .with_allow_replication_factor_change(allow_rf_change)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(common::topic_name(name))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(0)
                .with_replicas(
                    replicas.map(|r| r.into_iter().map(BrokerId).collect()),
                )])]);
    try_call(
        c.nodes[0].kafka,
        ApiKey::AlterPartitionReassignments,
        version,
        &req,
    )
    .expect("AlterPartitionReassignments answered")
}

fn outcome(r: &AlterPartitionReassignmentsResponse) -> (i16, Option<String>) {
    let p = &r.responses[0].partitions[0];
    (
        p.error_code,
        p.error_message.as_ref().map(|m| m.to_string()),
    )
}

#[test]
fn given_a_cluster_when_reassigning_over_the_wire_then_advertised_checked_listed_and_completed() {
    let c = TestCluster::start(3);
    c.wait_for("three brokers", WAIT, || {
        (c.metadata(0)?.brokers.len() == 3).then_some(())
    });
    let v: Capped<ApiVersionsResponse> = try_call(
        c.nodes[1].kafka,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .unwrap();
    let range = |key: ApiKey| {
        v.api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(range(ApiKey::AlterPartitionReassignments), Some((0, 1)));
    assert_eq!(range(ApiKey::ListPartitionReassignments), Some((0, 0)));

    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(20_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(common::topic_name("moved"))
            .with_num_partitions(1)
            .with_replication_factor(2)]);
    let r: CreateTopicsResponse =
        try_call(c.nodes[0].kafka, ApiKey::CreateTopics, 7, &req).unwrap();
    assert_eq!(r.topics[0].error_code, 0);
    let (old, _) = c.wait_for("an ISR of two", WAIT, || {
        placement(&c, 0, "moved").filter(|(_, isr)| isr.len() == 2)
    });
    let spare = (1..=3).find(|b| !old.contains(b)).unwrap();
    let target = vec![spare, old[1]];

    // v1 without a change of the replication factor allowed: refused, nothing recorded.
    let r = alter(&c, 1, "moved", Some(vec![spare]), false);
    assert_eq!(
        outcome(&r),
        (
            38,
            Some("The replication factor is changed from 2 to 1".into())
        )
    );
    assert!(!r.allow_replication_factor_change);
    for version in [0, 1] {
        // An empty list is refused the same at both versions.
        let r = alter(&c, version, "moved", Some(vec![]), true);
        assert_eq!(r.responses[0].partitions[0].error_code, 39, "v{version}");
    }
    let r = alter(&c, 1, "moved", Some(target.clone()), false);
    assert_eq!((r.error_code, outcome(&r)), (0, (0, None)));

    // Listed while it runs (it may already be done: the partition is empty), then done.
    let listed: ListPartitionReassignmentsResponse = try_call(
        c.nodes[2].kafka,
        ApiKey::ListPartitionReassignments,
        0,
        &ListPartitionReassignmentsRequest::default().with_topics(Some(vec![
            ListPartitionReassignmentsTopics::default()
                .with_name(common::topic_name("moved"))
                .with_partition_indexes(vec![0]),
        ])),
    )
    .unwrap();
    assert_eq!(listed.error_code, 0);
    if let Some(t) = listed.topics.first() {
        let p = &t.partitions[0];
        assert_eq!(p.adding_replicas, vec![BrokerId(spare)]);
        assert_eq!(p.removing_replicas, vec![BrokerId(old[0])]);
    }
    c.wait_for("the move completed everywhere", WAIT, || {
        (0..3)
            .all(|i| {
                placement(&c, i, "moved").is_some_and(|(r, isr)| r == target && isr.len() == 2)
            })
            .then_some(())
    });
    let gone = c.nodes[c.index_of(old[0])].dir.join("moved-0");
    c.wait_for("the removed replica's directory deleted", WAIT, || {
        (!gone.exists()).then_some(())
    });
    assert!(c.nodes[c.index_of(spare)].dir.join("moved-0").exists());
    let r = alter(&c, 0, "moved", None, true);
    assert_eq!(outcome(&r), (85, None));
}
