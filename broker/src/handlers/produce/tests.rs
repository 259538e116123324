use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ApiKey, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use super::super::testing::*;

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
fn given_compacted_topic_when_record_has_no_key_then_invalid_record() {
    let h = Harness::new();
    let created = create_topic_with(&h, "c", &[("cleanup.policy", "compact")]);
    assert_eq!(created.error_code, 0);
    assert_eq!(produce(&h, "c", 0, 1, batch(3, -1, -1, -1)), (0, 0));
    for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
        let keyless = crate::test_support::TestBatch::new(1)
            .keyless()
            .compression(compression)
            .encode();
        assert_eq!(produce(&h, "c", 0, 1, keyless).0, 87, "{compression:?}");
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

fn produce_v(h: &Harness, version: i16, topic: &str, records: Bytes) -> PartitionProduceResponse {
    let resp: ProduceResponse = h.call(ApiKey::Produce, version, produce_req(topic, 0, 1, records));
    resp.responses[0].partition_responses[0].clone()
}

#[test]
fn given_keyless_records_on_a_compacted_topic_when_producing_then_kip467_record_errors_name_them() {
    let h = Harness::new();
    let created = create_topic_with(&h, "c", &[("cleanup.policy", "compact")]);
    assert_eq!(created.error_code, 0);
    for compression in [Compression::None, Compression::Lz4] {
        let mixed = crate::test_support::TestBatch::new(5)
            .compression(compression)
            .encode_with(|rs| {
                rs[1].key = None;
                rs[3].key = None;
            });
        let p = produce_v(&h, 9, "c", mixed);
        assert_eq!(p.error_code, 87, "{compression:?}");
        let named: Vec<i32> = p.record_errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(named, vec![1, 3], "{compression:?}");
        assert!(p.record_errors[0]
            .batch_index_error_message
            .as_deref()
            .is_some_and(|m| m.contains("without key")));
        assert!(p.error_message.as_deref().is_some_and(
            |m| m.starts_with("One or more records have been rejected due to 2 record errors")
        ));
        assert_eq!(p.base_offset, -1, "nothing appended");
    }
    // The keyed batch after them goes in at offset 0: the refused ones burnt no offsets.
    assert_eq!(produce_v(&h, 9, "c", batch(2, -1, -1, -1)).base_offset, 0);
}

#[test]
fn given_one_record_too_old_when_producing_then_invalid_timestamp_naming_it() {
    let h = Harness::new();
    create(&h, "t", 1);
    let now = crate::now_ms();
    // message.timestamp.before.max.ms defaults to Long.MAX in Kafka 4: set a bound first.
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    };
    let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("t"))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_static_str("message.timestamp.before.max.ms"))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_static_str("3600000")))]),
    ]);
    let r: IncrementalAlterConfigsResponse = h.call(ApiKey::IncrementalAlterConfigs, 1, alter);
    assert_eq!(r.responses[0].error_code, 0);
    let b = crate::test_support::TestBatch::new(3)
        .at(now)
        .encode_with(|rs| {
            rs[2].timestamp = now - 7_200_000;
        });
    let p = produce_v(&h, 9, "t", b);
    assert_eq!(p.error_code, 32);
    assert_eq!(
        p.record_errors
            .iter()
            .map(|e| e.batch_index)
            .collect::<Vec<_>>(),
        vec![2]
    );
    assert_eq!(
        p.error_message.as_deref(),
        Some("One or more records have been rejected due to invalid timestamp")
    );
    // Before v8 the response has no record errors (and no message).
    let b = crate::test_support::TestBatch::new(1)
        .at(now - 7_200_000)
        .encode();
    let p = produce_v(&h, 7, "t", b);
    assert_eq!((p.error_code, p.record_errors.len()), (32, 0));
}
