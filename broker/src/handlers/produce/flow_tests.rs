//! The flow configs (issue 20) through the Produce and Fetch handlers: dedup by message id
//! with an idempotent producer's sequences, embedding refusals with KIP-467 record errors,
//! expired records left out of a fetch.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use crate::handlers::testing::*;
use crate::test_support::TestBatch;

fn produce(h: &Harness, topic: &str, records: Bytes) -> ProduceResponse {
    h.call(ApiKey::Produce, 9, produce_req(topic, 0, -1, records))
}

fn answer(h: &Harness, topic: &str, records: Bytes) -> (i16, i64) {
    let r = produce(h, topic, records);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// A batch whose records carry header `name` with `values` (None: no header).
fn with_header(b: TestBatch, name: &'static str, values: &[Option<&str>]) -> Bytes {
    b.encode_with(|records| {
        for (r, v) in records.iter_mut().zip(values) {
            if let Some(v) = v {
                r.headers.insert(
                    StrBytes::from_static_str(name),
                    Some(Bytes::copy_from_slice(v.as_bytes())),
                );
            }
        }
    })
}

/// (offset, value) of every record a fetch from 0 returns.
fn fetched(h: &Harness, topic: &str) -> Vec<(i64, Bytes)> {
    let mut data = fetch_records(h, topic, 0);
    RecordBatchDecoder::decode_all(&mut data)
        .expect("valid batches")
        .iter()
        .flat_map(|s| &s.records)
        .map(|r| (r.offset, r.value.clone().unwrap_or_default()))
        .collect()
}

#[test]
fn given_dedup_topic_when_idempotent_batches_repeat_ids_then_new_records_kept_and_sequences_line_up(
) {
    let h = Harness::new();
    assert_eq!(
        create_topic_with(&h, "d", &[("strom.dedup.header", "msg-id")]).error_code,
        0
    );
    let b = |n, seq, c| TestBatch::new(n).idempotent(9, 0, seq).compression(c);
    let first = with_header(
        b(2, 0, Compression::None),
        "msg-id",
        &[Some("A"), Some("B")],
    );
    assert_eq!(answer(&h, "d", first), (0, 0));
    // A is a duplicate, C is new: the batch is appended without A, at offsets 2..3.
    let mixed = with_header(
        b(2, 2, Compression::Gzip),
        "msg-id",
        &[Some("A"), Some("C")],
    );
    assert_eq!(answer(&h, "d", mixed.clone()), (0, 2));
    // The producer's next sequence (4) is in order; a retry of the mixed batch is answered
    // by its sequence numbers with its offset.
    let next = with_header(b(1, 4, Compression::None), "msg-id", &[Some("D")]);
    assert_eq!(answer(&h, "d", next), (0, 4));
    assert_eq!(answer(&h, "d", mixed), (0, 2));
    // Duplicates only, from the idempotent producer: the original offset, and an empty
    // batch keeps the sequence range (the next batch at sequence 6 is accepted).
    let dups = with_header(b(1, 5, Compression::None), "msg-id", &[Some("C")]);
    assert_eq!(answer(&h, "d", dups), (0, 3));
    let last = with_header(b(1, 6, Compression::None), "msg-id", &[Some("E")]);
    assert_eq!(answer(&h, "d", last), (0, 6));
    let offsets: Vec<i64> = fetched(&h, "d").iter().map(|r| r.0).collect();
    assert_eq!(offsets, vec![0, 1, 3, 4, 6]);
}

#[test]
fn given_dedup_topic_when_plain_producer_repeats_an_id_then_original_offset_nothing_appended() {
    let h = Harness::new();
    assert_eq!(
        create_topic_with(&h, "p", &[("strom.dedup.header", "msg-id")]).error_code,
        0
    );
    let one = |id| with_header(TestBatch::new(1), "msg-id", &[Some(id)]);
    assert_eq!(answer(&h, "p", one("X")), (0, 0));
    assert_eq!(answer(&h, "p", one("Y")), (0, 1));
    assert_eq!(answer(&h, "p", one("X")), (0, 0));
    assert_eq!(answer(&h, "p", one("Z")), (0, 2));
    assert_eq!(fetched(&h, "p").len(), 3);
}

#[test]
fn given_embedding_topic_when_a_batch_holds_bad_vectors_then_invalid_record_naming_each() {
    let h = Harness::new();
    let configs = [
        ("strom.embedding.format", "json"),
        ("strom.embedding.field", "/v"),
        ("strom.embedding.dimension", "2"),
    ];
    assert_eq!(create_topic_with(&h, "e", &configs).error_code, 0);
    let values = [
        r#"{"v": [1, 2]}"#,
        r#"{"v": [1]}"#,
        r#"{"v": [1, 2]}"#,
        r#"{"w": 1}"#,
    ];
    let batch = TestBatch::new(4).encode_with(|records| {
        for (r, v) in records.iter_mut().zip(values) {
            r.value = Some(Bytes::from_static(v.as_bytes()));
        }
    });
    let r = produce(&h, "e", batch);
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 87);
    let named: Vec<i32> = p.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(named, vec![1, 3]);
    assert!(p.record_errors[0]
        .batch_index_error_message
        .as_deref()
        .unwrap()
        .contains("dimension 1, topic requires 2"));
    assert!(
        fetched(&h, "e").is_empty(),
        "Kafka's semantics: the batch is refused whole"
    );
    let ok = TestBatch::new(1)
        .encode_with(|r| r[0].value = Some(Bytes::from_static(b"{\"v\": [0, 1]}")));
    assert_eq!(answer(&h, "e", ok), (0, 0));
}

#[test]
fn given_ttl_header_when_records_expired_then_fetch_leaves_an_offset_gap() {
    let h = Harness::new();
    assert_eq!(
        create_topic_with(&h, "x", &[("strom.ttl.header", "ttl-ms")]).error_code,
        0
    );
    // Records stamped now: TTL 0 has expired by the fetch, an hour has not.
    let b = with_header(
        TestBatch::new(3).compression(Compression::Zstd),
        "ttl-ms",
        &[Some("0"), None, Some("3600000")],
    );
    assert_eq!(answer(&h, "x", b), (0, 0));
    let offsets: Vec<i64> = fetched(&h, "x").iter().map(|r| r.0).collect();
    assert_eq!(offsets, vec![1, 2]);
    let bad = with_header(TestBatch::new(1), "ttl-ms", &[Some("1h")]);
    assert_eq!(answer(&h, "x", bad).0, 87);
}
