//! An open transaction goes on across a broker restart: the coordinator keeps it in
//! `__transaction_state`, and the partitions it was added to, which lost the in-memory
//! KIP-890 guard with the old process, ask the coordinator again (Kafka's produce-time
//! verification) instead of refusing the producer's next batch with INVALID_TXN_STATE.
//! A partition that was never added is still refused.

mod common;

use common::{start, topic_name, transactional_batch, Client};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "txr";
const TID: &str = "restart-tx";
const INVALID_TXN_STATE: i16 = 48;

fn tid() -> TransactionalId {
    TransactionalId(StrBytes::from_static_str(TID))
}

fn produce(c: &mut Client, partition: i32, pid: i64, epoch: i16, seq: i32) -> i16 {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_transactional_id(Some(tid()))
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(TOPIC))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(transactional_batch(3, "r", pid, epoch, seq)))])]);
    let r: ProduceResponse = c.call(ApiKey::Produce, 10, &req);
    r.responses[0].partition_responses[0].error_code
}

#[test]
fn given_open_transaction_when_broker_restarts_then_added_partition_still_accepts_its_batches() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), 2);
    let mut c = Client::connect(server.kafka_addr);
    let req = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name(TOPIC))
        .with_num_partitions(2)
        .with_replication_factor(1)]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(r.topics[0].error_code, 0);
    let r: InitProducerIdResponse = c.call(
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(Some(tid()))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    assert_eq!(r.error_code, 0);
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    let r: AddPartitionsToTxnResponse = c.call(
        ApiKey::AddPartitionsToTxn,
        3,
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(tid())
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(topic_name(TOPIC))
                .with_partitions(vec![0])]),
    );
    let codes: Vec<i16> = r.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect();
    assert_eq!(codes, [0]);
    drop(c);
    server.shutdown().unwrap();

    let server = start(dir.path(), 2);
    let mut c = Client::connect(server.kafka_addr);
    assert_eq!(
        produce(&mut c, 0, pid, epoch, 0),
        0,
        "the added partition takes the transaction's first batch after the restart"
    );
    assert_eq!(produce(&mut c, 0, pid, epoch, 3), 0);
    assert_eq!(
        produce(&mut c, 1, pid, epoch, 0),
        INVALID_TXN_STATE,
        "a partition never added to the transaction is refused"
    );
    server.shutdown().unwrap();
}
