//! A 3-node cluster of real `strom serve` processes (common/cluster.rs): the metadata quorum
//! replicates topics to every node, survives a kill -9 of its leader, and a restarted node
//! catches up. One cluster for the whole module (each start costs a few seconds of CI).

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::cluster::{try_call, TestCluster};
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, DescribeClusterRequest, DescribeClusterResponse, MetadataResponse,
};
use strom::codec::api_versions::ApiVersionsRequest;
use strom::codec::Capped;

const WAIT: Duration = Duration::from_secs(30);

/// A node's two listeners (common/cluster.rs): PLAINTEXT (the inter-broker one) and CLIENTS.
#[derive(Clone, Copy)]
enum Listener {
    Plaintext,
    Clients,
}

impl Listener {
    fn of(self, c: &TestCluster, i: usize) -> std::net::SocketAddr {
        match self {
            Listener::Plaintext => c.nodes[i].kafka,
            Listener::Clients => c.nodes[i].clients,
        }
    }
}

fn topic<'a>(m: &'a MetadataResponse, name: &str) -> Option<&'a MetadataResponseTopic> {
    m.topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(name))
}

/// (topic id, leader of each partition) as node `i` reports them.
fn placement(c: &TestCluster, i: usize, name: &str) -> Option<(uuid::Uuid, Vec<i32>)> {
    let m = c.metadata(i)?;
    let t = topic(&m, name)?;
    let mut parts: Vec<_> = t
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    parts.sort();
    Some((t.topic_id, parts.into_iter().map(|(_, l)| l).collect()))
}

/// Node `i`'s view once it lists `brokers` brokers and knows a controller among `alive`.
fn controller_seen(c: &TestCluster, i: usize, brokers: usize, alive: &[i32]) -> Option<i32> {
    let m = c.metadata(i)?;
    let ctl = m.controller_id.0;
    (m.brokers.len() == brokers && alive.contains(&ctl)).then_some(ctl)
}

fn create(c: &TestCluster, i: usize, name: &str, partitions: i32, rf: i16) -> CreateTopicsResponse {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(20_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(common::topic_name(name))
            .with_num_partitions(partitions)
            .with_replication_factor(rf)]);
    try_call(c.nodes[i].kafka, ApiKey::CreateTopics, 7, &req).expect("CreateTopics answered")
}

/// Produce v11 of one batch to node `i` on `listener`: (error code, KIP-951 (leader, epoch)
/// hint, the response's node endpoints as (id, port)).
fn produce_v11(
    c: &TestCluster,
    i: usize,
    listener: Listener,
    name: &str,
    partition: i32,
) -> (i16, (i32, i32), Vec<(i32, i32)>) {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(common::topic_name(name))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(common::batch(2, "x")))])]);
    let r: ProduceResponse = try_call(listener.of(c, i), ApiKey::Produce, 11, &req).unwrap();
    let p = &r.responses[0].partition_responses[0];
    let hint = (p.current_leader.leader_id.0, p.current_leader.leader_epoch);
    let endpoints = r
        .node_endpoints
        .iter()
        .map(|e| (e.node_id.0, e.port))
        .collect();
    (p.error_code, hint, endpoints)
}

/// Fetch v16 (topics by id) of one partition on node `i` on `listener`: (error code, KIP-951
/// (leader, epoch) hint, the response's node endpoints as (id, port)).
fn fetch_v16(
    c: &TestCluster,
    i: usize,
    listener: Listener,
    topic_id: uuid::Uuid,
    partition: i32,
) -> (i16, (i32, i32), Vec<(i32, i32)>) {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, FetchResponse};
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(0)
                .with_current_leader_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = try_call(listener.of(c, i), ApiKey::Fetch, 16, &req).unwrap();
    let p = &r.responses[0].partitions[0];
    let hint = (p.current_leader.leader_id.0, p.current_leader.leader_epoch);
    let endpoints = r
        .node_endpoints
        .iter()
        .map(|e| (e.node_id.0, e.port))
        .collect();
    (p.error_code, hint, endpoints)
}

/// ListOffsets v7 LATEST of one partition on node `i`: (error code, offset).
fn latest(c: &TestCluster, i: usize, name: &str, partition: i32) -> (i16, i64) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
    let req = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(common::topic_name(name))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(-1)])]);
    let r: ListOffsetsResponse = try_call(c.nodes[i].kafka, ApiKey::ListOffsets, 7, &req).unwrap();
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset)
}

#[test]
fn given_three_nodes_when_leader_killed_and_restarted_then_topics_agree_everywhere() {
    let mut c = TestCluster::start(3);
    let all = [1, 2, 3];

    // Formed: every node lists the three brokers and the same controller.
    let controllers: BTreeSet<i32> = (0..3)
        .map(|i| c.wait_for("a controller", WAIT, || controller_seen(&c, i, 3, &all)))
        .collect();
    assert_eq!(
        controllers.len(),
        1,
        "one controller for all: {controllers:?}"
    );
    let d: DescribeClusterResponse = try_call(
        c.nodes[1].kafka,
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default(),
    )
    .unwrap();
    let ids: Vec<i32> = d.brokers.iter().map(|b| b.broker_id.0).collect();
    assert_eq!(ids, vec![1, 2, 3]);
    assert_eq!(
        d.brokers[2].port,
        c.nodes[2].kafka.port() as i32,
        "advertised address"
    );
    // Every listener is registered: asked on CLIENTS, the CLIENTS endpoints.
    let d: DescribeClusterResponse = try_call(
        c.nodes[1].clients,
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default(),
    )
    .unwrap();
    let ports: Vec<i32> = d.brokers.iter().map(|b| b.port).collect();
    let clients: Vec<i32> = c.nodes.iter().map(|n| n.clients.port() as i32).collect();
    assert_eq!(ports, clients, "the CLIENTS listener's endpoints");
    let cluster_ids: BTreeSet<String> = (0..3)
        .map(|i| c.metadata(i).unwrap().cluster_id.unwrap().to_string())
        .collect();
    assert_eq!(cluster_ids.len(), 1, "one cluster id: {cluster_ids:?}");
    // KIP-1242: a client (the Java client 4.x) names the cluster id Metadata gave it and the
    // node it dials in ApiVersions v5; each node accepts the cluster's id, which is not its
    // own on two of them, and refuses another node's id with REBOOTSTRAP_REQUIRED.
    let cluster_id = cluster_ids.into_iter().next().unwrap();
    for (i, node_id) in all.iter().enumerate() {
        let versions = |node_id| -> i16 {
            let req = ApiVersionsRequest {
                cluster_id: Some(cluster_id.clone().into()),
                node_id,
                ..Default::default()
            };
            let r: Capped<ApiVersionsResponse> =
                try_call(c.nodes[i].kafka, ApiKey::ApiVersions, 5, &req).unwrap();
            r.error_code
        };
        assert_eq!(
            versions(*node_id),
            0,
            "node {node_id} takes the cluster's id"
        );
        assert_eq!(
            versions(node_id % 3 + 1),
            129,
            "node {node_id} named as another"
        );
    }

    // A topic created through node 1 is on nodes 2 and 3 with the same id and leaders, and
    // its partitions are led by all three nodes.
    let r = create(&c, 0, "before", 6, 1);
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    let seen = placement(&c, 0, "before").expect("creator answers with it");
    for i in 1..3 {
        let other = c.wait_for("the topic on every node", WAIT, || {
            placement(&c, i, "before")
        });
        assert_eq!(other, seen, "node {} agrees", i + 1);
    }
    assert_eq!(
        seen.1.iter().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from(all)
    );
    // Created twice (through another node): TOPIC_ALREADY_EXISTS from the replicated state.
    assert_eq!(create(&c, 2, "before", 1, 1).topics[0].error_code, 36);
    // A replication factor above the live brokers: INVALID_REPLICATION_FACTOR.
    let r = create(&c, 1, "rf4", 1, 4);
    assert_eq!(
        r.topics[0].error_code, 38,
        "{:?}",
        r.topics[0].error_message
    );

    // Produce goes to the leader only: another node answers NOT_LEADER_OR_FOLLOWER.
    let p0_leader = seen.1[0];
    let leader_i = c.index_of(p0_leader);
    let other_i = (leader_i + 1) % 3;
    let (code, hint, endpoints) = produce_v11(&c, other_i, Listener::Plaintext, "before", 0);
    assert_eq!(code, 6, "NOT_LEADER_OR_FOLLOWER from node {}", other_i + 1);
    // KIP-951: the answer names the leader and where it listens, on the request's listener.
    assert_eq!(hint, (p0_leader, 0));
    let leader_port = c.nodes[leader_i].kafka.port() as i32;
    assert_eq!(endpoints, vec![(p0_leader, leader_port)]);
    let (code, hint, endpoints) = produce_v11(&c, other_i, Listener::Clients, "before", 0);
    assert_eq!((code, hint), (6, (p0_leader, 0)));
    let leader_clients = c.nodes[leader_i].clients.port() as i32;
    assert_eq!(endpoints, vec![(p0_leader, leader_clients)]);
    let (code, base) = common::produce(&mut c.client(leader_i), "before", 0, common::batch(2, "x"));
    assert_eq!((code, base), (0, 0));
    // Fetch likewise, with the same KIP-951 hint (v12+) and endpoints (v16+).
    let (code, hint, endpoints) = fetch_v16(&c, other_i, Listener::Plaintext, seen.0, 0);
    assert_eq!(code, 6, "NOT_LEADER_OR_FOLLOWER from node {}", other_i + 1);
    assert_eq!(hint, (p0_leader, 0));
    assert_eq!(endpoints, vec![(p0_leader, leader_port)]);
    let (_, _, endpoints) = fetch_v16(&c, other_i, Listener::Clients, seen.0, 0);
    assert_eq!(endpoints, vec![(p0_leader, leader_clients)]);
    assert_eq!(fetch_v16(&c, leader_i, Listener::Plaintext, seen.0, 0).0, 0);
    // ListOffsets likewise: the latest offset from the leader, NOT_LEADER_OR_FOLLOWER elsewhere.
    assert_eq!(latest(&c, leader_i, "before", 0), (0, 2));
    assert_eq!(latest(&c, other_i, "before", 0).0, 6);

    // kill -9 the Raft leader: the two others elect a new one and take new topics.
    let old = *controllers.iter().next().unwrap();
    let killed = c.index_of(old);
    c.kill(killed);
    let alive: Vec<i32> = all.iter().copied().filter(|id| *id != old).collect();
    let survivors: Vec<usize> = (0..3).filter(|i| *i != killed).collect();
    for &i in &survivors {
        c.wait_for("a new controller", WAIT, || {
            controller_seen(&c, i, 3, &alive)
        });
    }
    let r = create(&c, survivors[0], "after", 2, 1);
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    let after = placement(&c, survivors[0], "after").unwrap();
    let other = c.wait_for("the new topic on the survivor", WAIT, || {
        placement(&c, survivors[1], "after")
    });
    assert_eq!(other, after);
    // Deleted while the killed node is away.
    let del = DeleteTopicsRequest::default()
        .with_topic_names(vec![common::topic_name("before")])
        .with_timeout_ms(20_000);
    let r: DeleteTopicsResponse =
        try_call(c.nodes[survivors[1]].kafka, ApiKey::DeleteTopics, 5, &del).unwrap();
    assert_eq!(r.responses[0].error_code, 0);

    // The killed node restarts and catches up: the new topic with the same id and leaders,
    // the deleted one gone (and its files with it).
    c.spawn(killed);
    c.wait_for("the restarted node to catch up", WAIT, || {
        let m = c.metadata(killed)?;
        (topic(&m, "before").is_none() && topic(&m, "after").is_some()).then_some(())
    });
    assert_eq!(placement(&c, killed, "after").unwrap(), after);
    let dir = c.nodes[killed].dir.clone();
    c.wait_for("the deleted topic's files removed", WAIT, || {
        let left = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().starts_with("before-"));
        (!left).then_some(())
    });
    for i in 0..3 {
        c.wait_for("all three brokers again", WAIT, || {
            controller_seen(&c, i, 3, &all)
        });
        assert!(c.running(i));
    }

    // auto.leader.rebalance.enable: a partition whose preferred leader was killed moves to
    // another replica, and back to the preferred one once it returned and is in sync.
    let r = create(&c, 0, "balanced", 1, 3);
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    let preferred = c.wait_for("balanced's replicas", WAIT, || {
        let m = c.metadata(0)?;
        let p = topic(&m, "balanced")?.partitions.first()?.clone();
        (p.isr_nodes.len() == 3).then(|| p.replica_nodes[0].0)
    });
    let gone = c.index_of(preferred);
    c.kill(gone);
    let other = (gone + 1) % 3;
    c.wait_for(
        "another leader while the preferred one is away",
        WAIT,
        || {
            let l = placement(&c, other, "balanced")?.1[0];
            (l != preferred && l >= 0).then_some(())
        },
    );
    c.spawn(gone);
    c.wait_for(
        "the preferred replica leading again",
        Duration::from_secs(60),
        || (placement(&c, other, "balanced")?.1[0] == preferred).then_some(()),
    );
}
