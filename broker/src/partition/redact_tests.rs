use bytes::Bytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use proptest::prelude::*;

use super::*;
use crate::test_support::TestBatch;

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn plan(rules: &str, scope: &str) -> Plan {
    Plan::compile(Some(rules), Some(scope)).unwrap().unwrap()
}

fn batch(c: Compression, values: &[&str]) -> Bytes {
    let values: Vec<Bytes> = values.iter().map(|v| Bytes::from(v.to_string())).collect();
    TestBatch::new(values.len())
        .idempotent(7, 2, 40)
        .compression(c)
        .header("x-prompt", Some(b"mail a@example.com"))
        .header("other", Some(b"mail a@example.com"))
        .encode_with(|rs| {
            for (r, v) in rs.iter_mut().zip(values) {
                r.value = Some(v);
            }
        })
}

fn decode(b: &Bytes) -> Vec<kafka_protocol::records::Record> {
    let mut buf = b.clone();
    RecordBatchDecoder::decode(&mut buf).unwrap().records
}

#[test]
fn given_each_codec_when_redacting_then_values_masked_and_the_producer_header_kept() {
    let p = plan("email", "value,header:x-prompt");
    for c in CODECS {
        let b = batch(c, &["hi a@example.com", "nothing here", "b@example.org!"]);
        let h = BatchHeader::parse(&b).unwrap();
        let mut hits = p.new_hits();
        let (h2, out) = redact_batch(&p, &h, &b, 1 << 20, &mut hits)
            .unwrap()
            .expect("matches");
        // A valid batch (length, CRC) with the producer's identity and sequence unchanged.
        let headers = storage::batch::validate_batches(&out).unwrap();
        assert_eq!(headers.len(), 1, "{c:?}");
        assert_eq!(
            (
                h2.producer_id,
                h2.producer_epoch,
                h2.base_sequence,
                h2.records_count
            ),
            (7, 2, 40, 3),
            "{c:?}"
        );
        assert_eq!(h2.last_offset_delta, h.last_offset_delta);
        assert_eq!(h2.compression(), h.compression(), "{c:?}");
        assert_eq!(hits, vec![5], "{c:?}");
        let records = decode(&out);
        let values: Vec<&[u8]> = records
            .iter()
            .map(|r| r.value.as_deref().unwrap())
            .collect();
        assert_eq!(
            values,
            [
                &b"hi <REDACTED_EMAIL>"[..],
                b"nothing here",
                b"<REDACTED_EMAIL>!"
            ],
            "{c:?}"
        );
        for r in &records {
            assert_eq!(
                r.headers[&b"x-prompt"[..]].as_deref(),
                Some(&b"mail <REDACTED_EMAIL>"[..])
            );
            assert_eq!(
                r.headers[&b"other"[..]].as_deref(),
                Some(&b"mail a@example.com"[..])
            );
            assert_eq!(r.sequence - r.offset as i32, 40);
        }
    }
}

#[test]
fn given_no_match_when_redacting_then_the_batch_is_kept() {
    let p = plan("email,cn_id", "value");
    let b = batch(Compression::Lz4, &["clean", "text"]);
    let h = BatchHeader::parse(&b).unwrap();
    let mut hits = p.new_hits();
    assert!(redact_batch(&p, &h, &b, 1 << 20, &mut hits)
        .unwrap()
        .is_none());
}

#[test]
fn given_a_bomb_when_redacting_then_refused_by_the_decompression_bound() {
    let p = plan("email", "value");
    let b = TestBatch::new(100)
        .value_size(10_000)
        .compression(Compression::Zstd)
        .encode();
    let h = BatchHeader::parse(&b).unwrap();
    let mut hits = p.new_hits();
    assert_eq!(
        redact_batch(&p, &h, &b, 1000, &mut hits).unwrap_err(),
        RecordsError::TooLarge { limit: 1000 }
    );
}

proptest! {
    /// Random values through every codec: the rewrite is a valid batch whose records are
    /// what redacting each value alone gives.
    #[test]
    fn prop_batch_rewrite_matches_value_redaction(values in proptest::collection::vec("[a-z@. 0-9]{0,40}", 1..8), codec in 0usize..5) {
        let p = plan("email,phone,card", "value");
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        let b = batch(CODECS[codec], &refs);
        let h = BatchHeader::parse(&b).unwrap();
        let mut hits = p.new_hits();
        let out = redact_batch(&p, &h, &b, 1 << 20, &mut hits).unwrap();
        let out = out.map(|(_, b)| b).unwrap_or(b);
        prop_assert!(storage::batch::validate_batches(&out).is_ok());
        let got: Vec<Vec<u8>> = decode(&out).into_iter().map(|r| r.value.unwrap().to_vec()).collect();
        let want: Vec<Vec<u8>> = values.iter().map(|v| {
            let mut h = p.new_hits();
            p.redact_value(v.as_bytes(), &mut h).unwrap_or_else(|| v.as_bytes().to_vec())
        }).collect();
        prop_assert_eq!(got, want);
    }

    /// Arbitrary bytes after a batch header never panic the rewrite.
    #[test]
    fn prop_arbitrary_records_never_panic(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let p = plan("email", "value,header:h");
        let mut b = batch(Compression::None, &["x"]).to_vec();
        b.truncate(RECORDS_OFFSET);
        b.extend_from_slice(&body);
        let h = BatchHeader::parse(&b[..]).unwrap_or_else(|_| BatchHeader::parse(&batch(Compression::None, &["x"])).unwrap());
        let mut hits = p.new_hits();
        let _ = redact_batch(&p, &h, &b, 1 << 16, &mut hits);
    }
}
