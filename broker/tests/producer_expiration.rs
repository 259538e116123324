//! Producer state expires as in Kafka: each shard checks every
//! `producer.id.expiration.check.interval.ms` and forgets the producers whose last batch's
//! timestamp is older than `producer.id.expiration.ms`, so the state of short-lived producers
//! does not pile up in memory. A producer that wrote recently keeps its state.

mod common;

use common::{idempotent_batch_at, topic_name, Client};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;

const TOPIC: &str = "expiring";

fn produce(c: &mut Client, records: bytes::Bytes) -> i16 {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(TOPIC))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let r: ProduceResponse = c.call(ApiKey::Produce, 11, &req);
    r.responses[0].partition_responses[0].error_code
}

fn producers(c: &mut Client) -> Vec<i64> {
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(topic_name(TOPIC))
        .with_partition_indexes(vec![0])]);
    let r: DescribeProducersResponse = c.call(ApiKey::DescribeProducers, 0, &req);
    let mut v: Vec<i64> = r.topics[0].partitions[0]
        .active_producers
        .iter()
        .map(|s| s.producer_id.0)
        .collect();
    v.sort();
    v
}

#[test]
fn given_idle_producer_when_expiration_passes_then_its_state_is_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let config = strom::config::BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_path_buf(),
        shards: 1,
        producer_id_expiration_ms: 3_600_000,
        producer_id_expiration_check_interval_ms: 100,
        ..Default::default()
    };
    let server = strom::Server::start(config, Default::default()).expect("broker starts");
    let mut c = Client::connect(server.kafka_addr);
    let req = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name(TOPIC))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(r.topics[0].error_code, 0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // Producer 11 last wrote two hours ago (by its batch's timestamps), producer 22 now.
    assert_eq!(
        produce(
            &mut c,
            idempotent_batch_at(3, "old", 11, 0, now - 7_200_000)
        ),
        0
    );
    assert_eq!(
        produce(&mut c, idempotent_batch_at(3, "new", 22, 0, now)),
        0
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while producers(&mut c) != [22] {
        assert!(
            std::time::Instant::now() < deadline,
            "producer 11 not expired: {:?}",
            producers(&mut c)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Forgotten means a fresh start: its next batch is accepted from any sequence.
    assert_eq!(
        produce(&mut c, idempotent_batch_at(2, "old", 11, 40, now)),
        0
    );
    assert_eq!(producers(&mut c), [11, 22]);
    server.shutdown().unwrap();
}
