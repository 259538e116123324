//! Transactions on a 3-node cluster whose coordinators sit on different nodes: the group's
//! coordinator (leader of its `__consumer_offsets` partition) is not the transactional id's
//! (leader of its `__transaction_state` partition). TxnOffsetCommit reaches the group's
//! coordinator, which must ask the other node whether the offsets partition is in the
//! transaction; it used to ask its own table and answer NOT_COORDINATOR, for as long as the
//! two leaders stayed apart (the fault tests' transactional worker stalled on it after its
//! coordinators' leaders had moved). The commit's marker then reaches the group's node too.

mod common;

use std::time::Duration;

use common::cluster::{try_call, TestCluster};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const WAIT: Duration = Duration::from_secs(60);
const TID: &str = "cross-node-tx";
const TOPIC: &str = "cross";
const KEY_GROUP: i8 = 0;
const KEY_TXN: i8 = 1;

/// The node id coordinating `key` as node 1 answers, once it has one.
fn coordinator(c: &TestCluster, key_type: i8, key: &str) -> Option<i32> {
    let req = FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_key(StrBytes::from_string(key.to_string()));
    let r: FindCoordinatorResponse =
        try_call(c.nodes[0].kafka, ApiKey::FindCoordinator, 3, &req).ok()?;
    (r.error_code == 0).then_some(r.node_id.0)
}

fn tid() -> TransactionalId {
    TransactionalId(StrBytes::from_static_str(TID))
}

#[test]
fn given_group_and_txn_coordinators_on_different_nodes_when_offsets_committed_in_txn_then_accepted_and_applied(
) {
    // Few coordinator partitions: the search for a group led elsewhere is short.
    let c = TestCluster::start_with(3, |_| {
        vec![
            ("offsets.topic.num.partitions".into(), "6".into()),
            ("transaction.state.log.num.partitions".into(), "6".into()),
        ]
    });
    let txn_node = c.wait_for("the transaction coordinator", WAIT, || {
        coordinator(&c, KEY_TXN, TID)
    });
    let (group, group_node) = c.wait_for("a group coordinated by another node", WAIT, || {
        (0..100).find_map(|i| {
            let g = format!("cross-group-{i}");
            coordinator(&c, KEY_GROUP, &g)
                .filter(|n| *n != txn_node)
                .map(|n| (g, n))
        })
    });
    let (txn_at, group_at) = (
        c.nodes[c.index_of(txn_node)].kafka,
        c.nodes[c.index_of(group_node)].kafka,
    );

    let create = CreateTopicsRequest::default()
        .with_timeout_ms(20_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(common::topic_name(TOPIC))
            .with_num_partitions(1)
            .with_replication_factor(3)]);
    let r: CreateTopicsResponse = try_call(c.nodes[0].kafka, ApiKey::CreateTopics, 7, &create)
        .expect("CreateTopics answered");
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    c.wait_for("the topic on the group's node", WAIT, || {
        let m = c.metadata(c.index_of(group_node))?;
        let t = m
            .topics
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(TOPIC))?;
        (t.error_code == 0 && t.partitions.iter().all(|p| p.leader_id.0 >= 0)).then_some(())
    });

    // The coordinator may still be loading its partition: retried until it answers.
    let (pid, epoch) = c.wait_for("a producer id", WAIT, || {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(tid()))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let r: InitProducerIdResponse = try_call(txn_at, ApiKey::InitProducerId, 4, &req).ok()?;
        (r.error_code == 0).then_some((r.producer_id.0, r.producer_epoch))
    });
    let add = AddOffsetsToTxnRequest::default()
        .with_transactional_id(tid())
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(StrBytes::from_string(group.clone())));
    let r: AddOffsetsToTxnResponse = try_call(txn_at, ApiKey::AddOffsetsToTxn, 3, &add).unwrap();
    assert_eq!(r.error_code, 0, "AddOffsetsToTxn");

    // v3, as librdkafka and the Java client send it; generation -1 and no member: a
    // generation-less commit, which an empty group takes.
    let commit = TxnOffsetCommitRequest::default()
        .with_transactional_id(tid())
        .with_group_id(GroupId(StrBytes::from_string(group.clone())))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(common::topic_name(TOPIC))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(5)
                .with_committed_leader_epoch(-1)])]);
    // Retried on what clients retry (a coordinator moving); before the fix NOT_COORDINATOR
    // came back for as long as the two coordinators stayed apart.
    let what = format!(
        "TxnOffsetCommit on node {group_node}, the transaction's coordinator being node {txn_node}"
    );
    c.wait_for(&what, Duration::from_secs(20), || {
        let r: TxnOffsetCommitResponse =
            try_call(group_at, ApiKey::TxnOffsetCommit, 3, &commit).ok()?;
        (r.topics[0].partitions[0].error_code == 0).then_some(())
    });

    let end = EndTxnRequest::default()
        .with_transactional_id(tid())
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(true);
    let r: EndTxnResponse = try_call(txn_at, ApiKey::EndTxn, 3, &end).unwrap();
    assert_eq!(r.error_code, 0, "EndTxn");

    // The commit marker reaches the group's node, whose coordinator applies the offset.
    c.wait_for("the committed offset", WAIT, || {
        let req = OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.clone())))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(common::topic_name(TOPIC))
                .with_partition_indexes(vec![0])]));
        let r: OffsetFetchResponse = try_call(group_at, ApiKey::OffsetFetch, 5, &req).ok()?;
        (r.topics[0].partitions[0].committed_offset == 5).then_some(())
    });
}
