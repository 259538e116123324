//! A connection's requests take effect in the order they arrived, per partition and per
//! group, while their work overlaps (handlers' two phases). Each test pipelines requests on
//! one connection, as librdkafka does with up to five in flight, and checks the order of
//! their effects.

mod common;

use common::{create_topic, idempotent_batch, topic_name, Client};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, GroupId, InitProducerIdRequest, InitProducerIdResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, ProduceRequest, ProduceResponse,
};
use kafka_protocol::protocol::StrBytes;

fn produce_req(acks: i16, parts: &[(&str, bytes::Bytes)]) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(
            parts
                .iter()
                .map(|(t, records)| {
                    TopicProduceData::default()
                        .with_name(topic_name(t))
                        .with_partition_data(vec![PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(records.clone()))])
                })
                .collect(),
        )
}

fn init_producer(c: &mut Client) -> i64 {
    let r: InitProducerIdResponse = c.call(
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1),
    );
    assert_eq!(r.error_code, 0, "{r:?}");
    r.producer_id.0
}

/// Request 1 names topics A and B, request 2 (pipelined right behind it) names only B. B's
/// batch of request 1 must be appended before request 2's, however long A's write takes:
/// otherwise an idempotent producer's sequence arrives out of order.
#[test]
fn given_pipelined_produce_when_the_next_names_only_b_then_b_keeps_request_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), 2);
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, "a", 1);
    create_topic(&mut c, "b", 1);
    for round in 0..30i64 {
        let pid = init_producer(&mut c);
        // Several topics before B in request 1, so that B is handed over last.
        let first = c.send(
            ApiKey::Produce,
            9,
            &produce_req(
                -1,
                &[
                    ("a", idempotent_batch(200, "a", pid, 0, 0)),
                    ("b", idempotent_batch(1, "b1", pid, 0, 0)),
                ],
            ),
        );
        let second = c.send(
            ApiKey::Produce,
            9,
            &produce_req(-1, &[("b", idempotent_batch(1, "b2", pid, 0, 1))]),
        );
        let r1: ProduceResponse = c.receive(9, first);
        let r2: ProduceResponse = c.receive(9, second);
        let b1 = &r1.responses[1].partition_responses[0];
        let b2 = &r2.responses[0].partition_responses[0];
        assert_eq!(
            r1.responses[0].partition_responses[0].error_code, 0,
            "round {round}"
        );
        assert_eq!((b1.error_code, b2.error_code), (0, 0), "round {round}");
        assert_eq!(
            b2.base_offset,
            b1.base_offset + 1,
            "round {round}: B in request order"
        );
    }
    server.shutdown().unwrap();
}

fn commit(group: &str, topic: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])])
}

/// Asynchronous commits in a loop, then the committed offset read back right away on the same
/// connection (librdkafka's `commitAsync` + `committed()`): the read sees the last commit, as
/// Kafka, which answers a connection's requests one at a time, guarantees.
#[test]
fn given_pipelined_offset_commits_when_fetching_right_after_then_the_last_commit() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), 2);
    let mut c = Client::connect(server.kafka_addr);
    create_topic(&mut c, "t", 1);
    for round in 0..10 {
        let group = format!("g{round}");
        let commits: Vec<i32> = (1..=20)
            .map(|o| c.send(ApiKey::OffsetCommit, 8, &commit(&group, "t", o)))
            .collect();
        let fetch = c.send(
            ApiKey::OffsetFetch,
            7,
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(group.clone())))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(topic_name("t"))
                    .with_partition_indexes(vec![0])])),
        );
        for corr in commits {
            let r: OffsetCommitResponse = c.receive(8, corr);
            assert_eq!(r.topics[0].partitions[0].error_code, 0);
        }
        let r: OffsetFetchResponse = c.receive(7, fetch);
        assert_eq!(
            r.topics[0].partitions[0].committed_offset, 20,
            "round {round}: the last of the pipelined commits"
        );
    }
    server.shutdown().unwrap();
}
