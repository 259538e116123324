//! Topic configs the produce path applies: `compression.type` (recompression), the
//! `min.insync.replicas` of a one-node ISR, and configs Strom refuses instead of ignoring.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ProduceResponse};
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use crate::handlers::testing::*;
use crate::test_support::TestBatch;

fn produce(h: &Harness, topic: &str, acks: i16, records: Bytes) -> (i16, i64) {
    let resp: ProduceResponse = h.call(ApiKey::Produce, 9, produce_req(topic, 0, acks, records));
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// (codec of each stored batch, keys and values of every record) of a fetch from 0.
fn stored(h: &Harness, topic: &str) -> (Vec<u8>, Vec<(Bytes, Bytes)>) {
    let mut data = fetch_records(h, topic, 0);
    let mut codecs = Vec::new();
    for (header, _) in storage::batch::BatchIter::new(&data).filter_map(Result::ok) {
        codecs.push(header.compression());
    }
    let sets = RecordBatchDecoder::decode_all(&mut data).expect("valid batches");
    let records = sets
        .iter()
        .flat_map(|s| &s.records)
        .map(|r| {
            (
                r.key.clone().unwrap_or_default(),
                r.value.clone().unwrap_or_default(),
            )
        })
        .collect();
    (codecs, records)
}

#[test]
fn given_topic_compression_when_batches_differ_then_re_encoded_with_offsets_and_sequences_kept() {
    let h = Harness::new();
    for (codec, name, level) in [
        (4u8, "zstd", Some(("compression.zstd.level", "7"))),
        (1, "gzip", Some(("compression.gzip.level", "1"))),
        (3, "lz4", None),
        (2, "snappy", None),
    ] {
        let topic = format!("t-{name}");
        let mut configs = vec![("compression.type", name)];
        configs.extend(level);
        assert_eq!(create_topic_with(&h, &topic, &configs).error_code, 0);
        // An idempotent producer's plain batch, then a gzip batch of the same producer.
        let first = TestBatch::new(50).tag("a").idempotent(7, 0, 0);
        assert_eq!(produce(&h, &topic, -1, first.encode()), (0, 0));
        let second = TestBatch::new(30)
            .tag("b")
            .idempotent(7, 0, 50)
            .compression(Compression::Gzip);
        assert_eq!(produce(&h, &topic, -1, second.encode()), (0, 50));
        // The retry of the first is still a duplicate with its original offset.
        assert_eq!(produce(&h, &topic, -1, first.encode()), (0, 0));
        let (codecs, records) = stored(&h, &topic);
        assert_eq!(codecs, vec![codec, codec], "{name}");
        let want: Vec<(Bytes, Bytes)> = first
            .records()
            .into_iter()
            .chain(second.records())
            .map(|r| (r.key.unwrap(), r.value.unwrap()))
            .collect();
        assert_eq!(records, want, "{name}: every record, in order");
    }
}

#[test]
fn given_uncompressed_topic_when_a_batch_is_compressed_then_stored_plain() {
    let h = Harness::new();
    assert_eq!(
        create_topic_with(&h, "plain", &[("compression.type", "uncompressed")]).error_code,
        0
    );
    let b = TestBatch::new(20).compression(Compression::Lz4);
    assert_eq!(produce(&h, "plain", 1, b.encode()), (0, 0));
    let (codecs, records) = stored(&h, "plain");
    assert_eq!((codecs, records.len()), (vec![0], 20));
    // `producer` (the default) keeps the producer's codec.
    assert_eq!(create_topic_with(&h, "kept", &[]).error_code, 0);
    assert_eq!(produce(&h, "kept", 1, b.encode()), (0, 0));
    assert_eq!(stored(&h, "kept").0, vec![3]);
}

#[test]
fn given_min_insync_replicas_above_one_when_producing_acks_all_then_not_enough_replicas() {
    let h = Harness::new();
    assert_eq!(
        create_topic_with(&h, "m", &[("min.insync.replicas", "2")]).error_code,
        0
    );
    assert_eq!(produce(&h, "m", -1, batch(1, -1, -1, -1)), (19, -1));
    // acks=1 does not ask for the ISR, as in Kafka.
    assert_eq!(produce(&h, "m", 1, batch(1, -1, -1, -1)), (0, 0));
}

#[test]
fn given_configs_strom_does_not_implement_when_set_then_refused_unless_default() {
    let h = Harness::new();
    for (name, value) in [
        ("preallocate", "true"),
        ("segment.jitter.ms", "100"),
        ("remote.copy.lag.ms", "5"),
    ] {
        let r = create_topic_with(
            &h,
            &format!("x-{}", name.replace('.', "-")),
            &[(name, value)],
        );
        assert_eq!(r.error_code, 40, "{name}={value}");
        let msg = r.error_message.as_deref().unwrap_or_default().to_string();
        assert!(msg.contains(name) && msg.contains("Strom"), "{msg}");
    }
    // Their defaults go through (what `strom migrate` and tools pass along).
    let r = create_topic_with(
        &h,
        "defaults",
        &[
            ("remote.storage.enable", "false"),
            ("preallocate", "FALSE"),
            ("segment.jitter.ms", "0"),
        ],
    );
    assert_eq!(r.error_code, 0);
    // Tiered storage without the broker switch: Kafka's INVALID_CONFIG and message.
    let r = create_topic_with(&h, "tiered", &[("remote.storage.enable", "true")]);
    assert_eq!(r.error_code, 40);
    assert_eq!(
        r.error_message.as_deref(),
        Some(crate::config::tiered::DISABLED_IN_BROKER)
    );
    // Out-of-range codec levels are Kafka's INVALID_CONFIG too.
    let r = create_topic_with(&h, "lvl", &[("compression.gzip.level", "12")]);
    assert_eq!(r.error_code, 40);
}

/// A registry with schema 1 under `ids-value`.
struct OneSchema;

impl crate::partition::schema_ids::SchemaView for OneSchema {
    fn id_in_subject(&self, id: i32, subject: &str) -> bool {
        id == 1 && subject == "ids-value"
    }
    fn record_name(&self, _: i32) -> Option<String> {
        None
    }
}

#[test]
fn given_schema_validation_when_a_record_lacks_a_registered_id_then_kip467_names_it() {
    use kafka_protocol::messages::produce_response::PartitionProduceResponse;
    let h = Harness::new();
    let created = create_topic_with(&h, "ids", &[("confluent.value.schema.validation", "true")]);
    assert_eq!(created.error_code, 0);
    let framed = |id: i32| {
        let mut v = vec![0u8];
        v.extend(id.to_be_bytes());
        v.extend(b"avro bytes");
        Bytes::from(v)
    };
    let batch = |values: Vec<Bytes>| {
        TestBatch::new(values.len()).encode_with(|rs| {
            for (r, v) in rs.iter_mut().zip(values) {
                r.value = Some(v);
            }
        })
    };
    let call = |records: Bytes| -> PartitionProduceResponse {
        let resp: ProduceResponse = h.call(ApiKey::Produce, 9, produce_req("ids", 0, 1, records));
        resp.responses[0].partition_responses[0].clone()
    };
    // No registry running: nothing is registered, every record is refused.
    let p = call(batch(vec![framed(1)]));
    assert_eq!((p.error_code, p.record_errors.len()), (87, 1));
    h.state
        .ctx
        .schema_view
        .set(std::sync::Arc::new(OneSchema))
        .ok();
    // Registered id, unknown id, no magic byte: the last two are named.
    let p = call(batch(vec![
        framed(1),
        framed(7),
        Bytes::from_static(b"plain json"),
    ]));
    assert_eq!(p.error_code, 87);
    let named: Vec<i32> = p.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(named, vec![1, 2]);
    assert!(p.record_errors[0]
        .batch_index_error_message
        .as_deref()
        .is_some_and(|m| m.contains("schema id 7")));
    // All registered: appended.
    assert_eq!(call(batch(vec![framed(1), framed(1)])).error_code, 0);
    // DescribeConfigs lists the extension config on this topic (only where it is set).
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
    use kafka_protocol::protocol::StrBytes;
    let describe = |topic: &'static str| -> Vec<String> {
        let r: DescribeConfigsResponse = h.call(
            ApiKey::DescribeConfigs,
            4,
            DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str(topic)),
            ]),
        );
        r.results[0]
            .configs
            .iter()
            .map(|c| c.name.to_string())
            .collect()
    };
    assert!(describe("ids")
        .iter()
        .any(|n| n == "confluent.value.schema.validation"));
    assert_eq!(create_topic_with(&h, "plainer", &[]).error_code, 0);
    assert!(!describe("plainer")
        .iter()
        .any(|n| n.starts_with("confluent.")));
}
