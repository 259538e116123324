use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::super::testing::*;

pub fn batch(n: usize, producer_id: i64, epoch: i16, first_seq: i32) -> Bytes {
    producer_batch(n, producer_id, epoch, first_seq, false)
}

/// A batch of a transactional producer (the transactional attribute set).
pub fn txn_batch(n: usize, producer_id: i64, epoch: i16, first_seq: i32) -> Bytes {
    producer_batch(n, producer_id, epoch, first_seq, true)
}

fn producer_batch(
    n: usize,
    producer_id: i64,
    epoch: i16,
    first_seq: i32,
    transactional: bool,
) -> Bytes {
    let now = crate::now_ms();
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder keeps one batch only while offset - sequence stays constant, so a
            // plain batch counts up from its base sequence -1 too.
            sequence: first_seq.wrapping_add(i as i32),
            timestamp: now,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("v{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encodes");
    buf.freeze()
}

pub fn produce_req(topic: &str, partition: i32, acks: i16, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

pub fn create(h: &Harness, topic: &str, partitions: i32) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let req = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(topic.into())))
        .with_num_partitions(partitions)
        .with_replication_factor(1)]);
    let resp: CreateTopicsResponse = h.call(ApiKey::CreateTopics, 7, req);
    assert_eq!(resp.topics[0].error_code, 0);
}

fn produce(h: &Harness, topic: &str, partition: i32, acks: i16, records: Bytes) -> (i16, i64) {
    let resp: ProduceResponse = h.call(
        ApiKey::Produce,
        11,
        produce_req(topic, partition, acks, records),
    );
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

#[test]
fn given_plain_batches_when_producing_then_contiguous_offsets() {
    let h = Harness::new();
    create(&h, "t", 1);
    assert_eq!(produce(&h, "t", 0, 1, batch(3, -1, -1, -1)), (0, 0));
    assert_eq!(produce(&h, "t", 0, -1, batch(2, -1, -1, -1)), (0, 3));
    assert_eq!(produce(&h, "t", 0, 1, batch(1, -1, -1, -1)), (0, 5));
}

#[test]
fn given_idempotent_retry_when_producing_then_original_offset_and_no_second_copy() {
    let h = Harness::new();
    create(&h, "t", 1);
    let b = batch(3, 42, 0, 0);
    assert_eq!(produce(&h, "t", 0, -1, b.clone()), (0, 0));
    assert_eq!(produce(&h, "t", 0, -1, batch(2, 42, 0, 3)), (0, 3));
    // The retry of the first batch: same offset, nothing appended.
    assert_eq!(produce(&h, "t", 0, -1, b), (0, 0));
    assert_eq!(produce(&h, "t", 0, -1, batch(1, 42, 0, 5)), (0, 5));
}

#[test]
fn given_sequence_gap_or_old_epoch_when_producing_then_kafka_errors() {
    let h = Harness::new();
    create(&h, "t", 1);
    assert_eq!(produce(&h, "t", 0, -1, batch(2, 7, 1, 0)).0, 0);
    // Gap: expected 2.
    assert_eq!(produce(&h, "t", 0, -1, batch(1, 7, 1, 5)).0, 45);
    // Older epoch.
    assert_eq!(produce(&h, "t", 0, -1, batch(1, 7, 0, 2)).0, 47);
    // New epoch must start at 0.
    assert_eq!(produce(&h, "t", 0, -1, batch(1, 7, 2, 2)).0, 45);
    assert_eq!(produce(&h, "t", 0, -1, batch(1, 7, 2, 0)), (0, 2));
}

#[test]
fn given_bad_batches_when_producing_then_kafka_error_codes() {
    let h = Harness::new();
    create(&h, "t", 2);
    // CRC flipped.
    let mut bad = BytesMut::from(&batch(2, -1, -1, -1)[..]);
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    assert_eq!(produce(&h, "t", 0, 1, bad.freeze()).0, 2);
    // Old magic.
    let mut old = BytesMut::from(&batch(1, -1, -1, -1)[..]);
    old[16] = 1;
    assert_eq!(produce(&h, "t", 0, 1, old.freeze()).0, 87);
    // Two batches in one partition.
    let mut two = BytesMut::from(&batch(1, -1, -1, -1)[..]);
    two.extend_from_slice(&batch(1, -1, -1, -1));
    assert_eq!(produce(&h, "t", 0, 1, two.freeze()).0, 87);
    // Truncated.
    let b = batch(2, -1, -1, -1);
    assert_eq!(produce(&h, "t", 0, 1, b.slice(..b.len() - 3)).0, 2);
    // Unknown topic and partition; bad acks.
    assert_eq!(produce(&h, "nope", 0, 1, batch(1, -1, -1, -1)).0, 3);
    assert_eq!(produce(&h, "t", 9, 1, batch(1, -1, -1, -1)).0, 3);
    assert_eq!(produce(&h, "t", 0, 2, batch(1, -1, -1, -1)).0, 21);
    // Nothing bad was written: the next good batch gets offset 0.
    assert_eq!(produce(&h, "t", 0, 1, batch(1, -1, -1, -1)), (0, 0));
}

#[test]
fn given_batch_over_max_message_bytes_when_producing_then_message_too_large() {
    let config = crate::config::BrokerConfig {
        message_max_bytes: 100,
        ..Default::default()
    };
    let h = Harness::with_config(config);
    create(&h, "t", 1);
    assert_eq!(produce(&h, "t", 0, 1, batch(10, -1, -1, -1)).0, 10);
}

#[test]
fn given_acks_zero_when_producing_then_no_response_but_data_written() {
    let h = Harness::new();
    create(&h, "t", 1);
    let r: Option<ProduceResponse> = h.try_call(
        ApiKey::Produce,
        11,
        produce_req("t", 0, 0, batch(2, -1, -1, -1)),
    );
    assert!(r.is_none());
    assert_eq!(produce(&h, "t", 0, 1, batch(1, -1, -1, -1)), (0, 2));
}

#[test]
fn given_each_error_when_mapping_then_table_of_kafka_codes() {
    use crate::partition::producer_state::SequenceError;
    use crate::partition::records::RecordsError;
    use crate::partition::txn::TxnError;
    use crate::partition::PartitionError;
    use crate::shard::frontend::FrontendError;
    let seq = SequenceError::OutOfOrder {
        producer_id: 1,
        first_seq: 1,
        last_seq: 1,
        offset: 0,
    };
    let epoch = SequenceError::InvalidProducerEpoch {
        producer_id: 1,
        epoch: 0,
        current: 1,
        offset: 0,
    };
    let table: Vec<(FrontendError, i16)> = vec![
        (FrontendError::UnknownPartition("t".into(), 0), 3),
        (FrontendError::ShardGone(1), 6),
        (FrontendError::Offline("t".into(), 0, "corrupt".into()), 56),
        (
            FrontendError::Partition(PartitionError::Corrupt(
                storage::batch::BatchError::Truncated,
            )),
            2,
        ),
        (
            FrontendError::Partition(PartitionError::InvalidRecord("x".into())),
            87,
        ),
        (
            FrontendError::Partition(PartitionError::Records(RecordsError::MissingKey)),
            87,
        ),
        (
            FrontendError::Partition(PartitionError::Records(RecordsError::CountMismatch {
                claimed: 2,
                found: 1,
            })),
            87,
        ),
        (
            FrontendError::Partition(PartitionError::Records(RecordsError::Malformed {
                index: 0,
                reason: "x",
            })),
            2,
        ),
        (
            FrontendError::Partition(PartitionError::Records(RecordsError::TooLarge { limit: 1 })),
            10,
        ),
        (
            FrontendError::Partition(PartitionError::TooLarge { size: 2, max: 1 }),
            10,
        ),
        (
            FrontendError::Partition(PartitionError::InvalidTimestamp {
                timestamp: 0,
                reason: "x".into(),
            }),
            32,
        ),
        (FrontendError::Partition(PartitionError::Sequence(seq)), 45),
        (
            FrontendError::Partition(PartitionError::Sequence(epoch)),
            47,
        ),
        (
            FrontendError::Partition(PartitionError::Txn(TxnError::InvalidProducerEpoch {
                producer_id: 1,
                epoch: 0,
                current: 1,
                offset: 0,
            })),
            47,
        ),
        (
            FrontendError::Partition(PartitionError::Txn(TxnError::NotAddedToTxn {
                producer_id: 1,
                epoch: 0,
            })),
            48,
        ),
        (
            FrontendError::Partition(PartitionError::Txn(TxnError::ExpectedTransactional {
                producer_id: 1,
                offset: 0,
            })),
            48,
        ),
        (
            FrontendError::Partition(PartitionError::Txn(TxnError::CoordinatorFenced {
                producer_id: 1,
                epoch: 0,
                current: 1,
                offset: 0,
            })),
            52,
        ),
    ];
    for (e, code) in table {
        assert_eq!(super::error_code(&e), code, "{e}");
    }
}

#[test]
fn given_compacted_topic_when_record_has_no_key_then_invalid_record() {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let h = Harness::new();
    let req = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("c")))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("cleanup.policy"))
            .with_value(Some(StrBytes::from_static_str("compact")))])]);
    let r: CreateTopicsResponse = h.call(ApiKey::CreateTopics, 7, req);
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(produce(&h, "c", 0, 1, batch(3, -1, -1, -1)), (0, 0));
    let keyless = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: crate::now_ms(),
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: Default::default(),
    };
    for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            [&keyless],
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .unwrap();
        assert_eq!(
            produce(&h, "c", 0, 1, buf.freeze()).0,
            87,
            "{compression:?}"
        );
    }
}

#[test]
fn given_batch_lying_about_its_record_count_when_producing_then_invalid_record_and_no_offsets_burnt(
) {
    let h = Harness::new();
    create(&h, "t", 1);
    let mut b = BytesMut::from(&batch(2, -1, -1, -1)[..]);
    // Claim 1000 records (last_offset_delta 999) and re-seal the CRC, as a hostile client would.
    b[23..27].copy_from_slice(&999i32.to_be_bytes());
    b[57..61].copy_from_slice(&1000i32.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(produce(&h, "t", 0, 1, b.freeze()).0, 87);
    assert_eq!(produce(&h, "t", 0, 1, batch(1, -1, -1, -1)), (0, 0));
}

#[test]
fn given_flush_ms_when_data_is_older_then_timer_flushes_it_and_not_before() {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    use std::time::{Duration, Instant};
    let h = Harness::new();
    let req = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("f")))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("flush.ms"))
            .with_value(Some(StrBytes::from_static_str("1000")))])]);
    let r: CreateTopicsResponse = h.call(ApiKey::CreateTopics, 7, req);
    assert_eq!(r.topics[0].error_code, 0);
    let p = h.state.partition("f", 0).unwrap();
    let start = Instant::now();
    // Clean partition: the timer only notes the time.
    assert!(!h.block_on(p.flush_if_due(start)).unwrap());
    assert_eq!(produce(&h, "f", 0, 1, batch(3, -1, -1, -1)), (0, 0));
    assert!(
        p.log.durable_end_offset() < p.log.written_end_offset(),
        "acks=1 is not flushed"
    );
    assert!(!h
        .block_on(p.flush_if_due(start + Duration::from_millis(500)))
        .unwrap());
    assert!(h
        .block_on(p.flush_if_due(start + Duration::from_millis(1001)))
        .unwrap());
    assert_eq!(p.log.durable_end_offset(), p.log.written_end_offset());
}
