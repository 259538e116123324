//! Record-level validation of a produced batch: what Kafka's `LogValidator` checks by reading
//! every record, decompressing if need be.
//!
//! The batch header's `records_count` and `last_offset_delta` decide how many offsets the log
//! hands out, so a batch that lies about them would burn offsets and poison consumers. For
//! every batch we walk the records and check that there are exactly `records_count` of them,
//! with inner offset deltas 0, 1, 2, …, that they fill the batch exactly, and (on compacted
//! topics) that every record has a key. Decompression is bounded by
//! `max.decompressed.message.bytes`, and nothing is allocated from a count read off the wire,
//! so a hostile batch costs at most that many bytes of memory.

use std::io::Read;

/// Kafka's compression codec ids (batch attributes & 7).
const NONE: u8 = 0;
const GZIP: u8 = 1;
const SNAPPY: u8 = 2;
const LZ4: u8 = 3;
const ZSTD: u8 = 4;

/// xerial's snappy framing magic (what the Java client writes).
const XERIAL: &[u8] = b"\x82SNAPPY\x00";

/// Offset of the first record in a v2 batch.
const RECORDS_OFFSET: usize = 61;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordsError {
    #[error("batch claims {claimed} records but holds {found}")]
    CountMismatch { claimed: i32, found: i64 },
    #[error("record {index} has offset delta {delta}, expected {index}")]
    OffsetDelta { index: i64, delta: i64 },
    #[error("record {index} is malformed: {reason}")]
    Malformed { index: i64, reason: &'static str },
    #[error("cannot decompress records ({codec}): {reason}")]
    Decompress { codec: &'static str, reason: String },
    #[error("records decompress to more than {limit} bytes (max.decompressed.message.bytes)")]
    TooLarge { limit: usize },
    #[error("unknown compression codec {0}")]
    UnknownCodec(u8),
}

/// What Kafka's LogValidator checks of each record, besides its structure.
#[derive(Clone, Copy, Default)]
pub struct RecordChecks<'a> {
    /// Compacted topic: every record needs a key.
    pub require_keys: bool,
    /// CreateTime topic: every record's timestamp within `[lo, hi]` (ms), given the batch's
    /// base timestamp.
    pub timestamps: Option<TimestampBounds>,
    /// A check of each record's key and value (schema ids): `Err` names why it is refused.
    pub each: Option<&'a EachRecord<'a>>,
    /// `strom.embedding.*`: each record's value must hold a valid vector.
    pub embedding: Option<&'a strom_connectors::embedding::EmbeddingSpec>,
    /// `strom.ttl.header`: where present, its value must be a TTL in ms (ASCII digits).
    pub ttl_header: Option<&'a str>,
}

/// A check of one record; `Err` is the message naming why it is refused.
pub type EachRecord<'a> = dyn Fn(&RecordFields<'_>) -> Result<(), String> + 'a;

#[derive(Debug, Clone, Copy)]
pub struct TimestampBounds {
    pub base: i64,
    pub lo: i64,
    pub hi: i64,
}

/// One record refused by a check (KIP-467's `BatchIndexAndErrorMessage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub index: i32,
    pub message: String,
    /// INVALID_TIMESTAMP rather than INVALID_RECORD.
    pub timestamp: bool,
    /// Refused by the embedding rules (counted apart in `/metrics`).
    pub embedding: bool,
}

/// Checks the records of one batch (header already validated: length, magic, CRC): the
/// structure (an `Err`, the whole batch is refused), then `checks` record by record (the
/// records that fail them, all of them, as Kafka collects them).
pub fn validate(
    batch: &[u8],
    codec: u8,
    records_count: i32,
    checks: RecordChecks<'_>,
    max_decompressed: usize,
) -> Result<Vec<RecordError>, RecordsError> {
    let body = &batch[RECORDS_OFFSET.min(batch.len())..];
    let owned;
    let records: &[u8] = match codec {
        NONE => body,
        _ => {
            owned = decompress(codec, body, max_decompressed)?;
            &owned
        }
    };
    let mut errors = Vec::new();
    walk(records, records_count, true, |index, r| {
        if checks.require_keys && r.key_null {
            errors.push(RecordError {
                index,
                message: "Compacted topic cannot accept message without key".into(),
                timestamp: false,
                embedding: false,
            });
        }
        if let Some(each) = checks.each {
            if let Err(message) = each(&r) {
                errors.push(RecordError {
                    index,
                    message,
                    timestamp: false,
                    embedding: false,
                });
            }
        }
        if let Some(spec) = checks.embedding {
            if let Err(e) = spec.check_value(r.value) {
                errors.push(RecordError {
                    index,
                    message: format!("invalid embedding: {e}"),
                    timestamp: false,
                    embedding: true,
                });
            }
        }
        if let Some(name) = checks.ttl_header {
            if let Some(v) = r.header(name) {
                if v.and_then(storage::expiry::parse_ttl).is_none() {
                    errors.push(RecordError {
                        index,
                        message: format!(
                            "header {name} must be a time to live in milliseconds (ASCII digits)"
                        ),
                        timestamp: false,
                        embedding: false,
                    });
                }
            }
        }
        if let Some(t) = checks.timestamps {
            let ts = t.base.saturating_add(r.timestamp_delta);
            if ts >= 0 && (ts < t.lo || ts > t.hi) {
                errors.push(RecordError {
                    index,
                    message: format!(
                        "Timestamp {ts} of message with offset {index} is out of range. The timestamp should be within [{}, {}]",
                        t.lo, t.hi
                    ),
                    timestamp: true,
                    embedding: false,
                });
            }
        }
    })?;
    Ok(errors)
}

/// One record's fields, borrowed from the (decompressed) records section: what
/// [`parse_one`] reads, `walk` visits and `record_view` hands to its readers.
pub struct RecordFields<'a> {
    pub attributes: u8,
    pub timestamp_delta: i64,
    pub offset_delta: i64,
    pub key_null: bool,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// The whole encoded record, its length prefix included (copied as is into a rebuilt
    /// batch that keeps the record's offset delta).
    pub raw: &'a [u8],
    /// The encoded headers (after their count), `header_count` of them.
    headers: &'a [u8],
    header_count: i64,
}

impl<'a> RecordFields<'a> {
    /// The value of the first header named `name` (`Some(None)`: present with a null value).
    pub fn header(&self, name: &str) -> Option<Option<&'a [u8]>> {
        self.headers()
            .find(|(k, _)| *k == name.as_bytes())
            .map(|(_, v)| v)
    }

    /// The headers in order: (key, value or None for null).
    pub fn headers(&self) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + 'a {
        let (buf, mut pos) = (self.headers, 0usize);
        // `parse_one` checked the structure: these cannot fail on a parsed record.
        (0..self.header_count).map_while(move |_| {
            let key_at = pos;
            skip_bytes(buf, &mut pos, buf.len())?;
            let key = field(buf, key_at, pos);
            let value_at = pos;
            let null = skip_bytes(buf, &mut pos, buf.len())?;
            Some((key, (!null).then(|| field(buf, value_at, pos))))
        })
    }

    pub fn header_count(&self) -> usize {
        self.header_count as usize
    }
}

/// Visits every record of a stored or produced batch (header already validated), in order.
/// Unlike [`validate`] it accepts offset gaps (a compacted or deduplicated batch), but not
/// deltas that go backwards or past the batch's last offset delta.
pub fn for_each_record(
    batch: &[u8],
    max_decompressed: usize,
    mut visit: impl FnMut(&RecordFields<'_>),
) -> Result<(), RecordsError> {
    let header =
        storage::batch::BatchHeader::parse(batch).map_err(|_| RecordsError::Malformed {
            index: 0,
            reason: "batch header does not parse",
        })?;
    let body = &batch[RECORDS_OFFSET.min(batch.len())..];
    let owned;
    let records: &[u8] = match header.compression() {
        NONE => body,
        codec => {
            owned = decompress(codec, body, max_decompressed)?;
            &owned
        }
    };
    let mut last = -1i64;
    let mut bad_delta = None;
    walk(records, header.records_count, false, |_, r| {
        if r.offset_delta <= last || r.offset_delta > header.last_offset_delta as i64 {
            bad_delta.get_or_insert(r.offset_delta);
        }
        last = r.offset_delta;
        visit(&r)
    })?;
    match bad_delta {
        Some(delta) => Err(RecordsError::OffsetDelta { index: last, delta }),
        None => Ok(()),
    }
}

/// A v2 batch holding `records` (encoded records, each keeping its offset delta) in place of
/// `batch`'s: the header is kept — base offset, last offset delta, producer id, epoch, base
/// sequence, base timestamp, attributes — so the batch spans the same offsets and sequence
/// numbers (the dropped records leave an offset gap, as compaction does); the count, max
/// timestamp, length and CRC are rewritten, the records re-compressed with the batch's codec.
pub fn rebuild(
    batch: &[u8],
    records: &[u8],
    records_count: i32,
    max_timestamp: i64,
) -> Result<bytes::Bytes, RecordsError> {
    let header = batch.get(..RECORDS_OFFSET).ok_or(RecordsError::Malformed {
        index: 0,
        reason: "batch shorter than its header",
    })?;
    let codec = batch[22] & 7;
    let encoded;
    let body: &[u8] = if codec == NONE || records.is_empty() {
        records
    } else {
        encoded = compress(codec, records).ok_or(RecordsError::UnknownCodec(codec))?;
        &encoded
    };
    let mut out = bytes::BytesMut::with_capacity(RECORDS_OFFSET + body.len());
    out.extend_from_slice(header);
    out.extend_from_slice(body);
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    if records.is_empty() && codec != NONE {
        // An empty batch is written uncompressed (what Kafka's cleaner writes).
        out[22] &= !7;
    }
    // The max timestamp of a LogAppendTime batch is the append time: kept.
    let log_append_time = batch[22] & 0x08 != 0;
    if !log_append_time {
        out[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    }
    out[57..61].copy_from_slice(&records_count.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

/// The records section of a compressed batch (`codec` != 0), inflated to at most `limit`
/// bytes.
pub fn decompress(codec: u8, body: &[u8], limit: usize) -> Result<Vec<u8>, RecordsError> {
    match codec {
        GZIP => read_bounded(flate2::read::GzDecoder::new(body), "gzip", limit),
        SNAPPY => snappy(body, limit),
        LZ4 => {
            let decoder = lz4::Decoder::new(body).map_err(|e| RecordsError::Decompress {
                codec: "lz4",
                reason: e.to_string(),
            })?;
            read_bounded(decoder, "lz4", limit)
        }
        ZSTD => {
            let decoder =
                zstd::stream::read::Decoder::new(body).map_err(|e| RecordsError::Decompress {
                    codec: "zstd",
                    reason: e.to_string(),
                })?;
            read_bounded(decoder, "zstd", limit)
        }
        other => Err(RecordsError::UnknownCodec(other)),
    }
}

/// Compresses a records section with Kafka codec `codec` (snappy in xerial framing, as
/// the Java client writes it; lz4 as an LZ4 frame). None for an unknown codec or an
/// encoder error.
pub fn compress(codec: u8, data: &[u8]) -> Option<Vec<u8>> {
    compress_at(codec, data, None)
}

/// `compress` at `level` (Kafka's `compression.<codec>.level`; `None` = the codec's default;
/// snappy has none).
pub fn compress_at(codec: u8, data: &[u8], level: Option<i32>) -> Option<Vec<u8>> {
    use std::io::Write;
    match codec {
        GZIP => {
            let level = level.map_or(flate2::Compression::default(), |l| {
                flate2::Compression::new(l.clamp(0, 9) as u32)
            });
            let mut e = flate2::write::GzEncoder::new(Vec::new(), level);
            e.write_all(data).ok()?;
            e.finish().ok()
        }
        SNAPPY => {
            // xerial: magic, version 1, compatible version 1, then length-prefixed blocks.
            let mut out = XERIAL.to_vec();
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut enc = snap::raw::Encoder::new();
            for chunk in data.chunks(32 * 1024) {
                let block = enc.compress_vec(chunk).ok()?;
                out.extend_from_slice(&(block.len() as u32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            Some(out)
        }
        LZ4 => {
            let mut b = lz4::EncoderBuilder::new();
            if let Some(l) = level {
                b.level(l.clamp(0, 16) as u32);
            }
            let mut e = b.build(Vec::new()).ok()?;
            e.write_all(data).ok()?;
            let (out, r) = e.finish();
            r.ok().map(|_| out)
        }
        ZSTD => zstd::encode_all(data, level.unwrap_or(3)).ok(),
        _ => None,
    }
}

/// Kafka's topic `compression.type`: one v2 batch with its records re-encoded with `codec`
/// (0 = none) at `level`. The header is kept as the producer wrote it — producer id, epoch
/// and sequence, timestamps, offset delta and count, the transactional bit — so offsets and
/// idempotence are unchanged; the codec bits, length and CRC are rewritten.
pub fn recompress(
    batch: &[u8],
    codec: u8,
    level: Option<i32>,
    max_decompressed: usize,
) -> Result<bytes::Bytes, RecordsError> {
    let header = batch.get(..RECORDS_OFFSET).ok_or(RecordsError::Malformed {
        index: 0,
        reason: "batch shorter than its header",
    })?;
    let attributes = u16::from_be_bytes([batch[21], batch[22]]);
    let from = (attributes & 7) as u8;
    let body = &batch[RECORDS_OFFSET..];
    let plain;
    let records: &[u8] = if from == NONE {
        body
    } else {
        plain = decompress(from, body, max_decompressed)?;
        &plain
    };
    let encoded;
    let records: &[u8] = if codec == NONE {
        records
    } else {
        encoded = compress_at(codec, records, level).ok_or(RecordsError::UnknownCodec(codec))?;
        &encoded
    };
    let mut out = bytes::BytesMut::with_capacity(RECORDS_OFFSET + records.len());
    out.extend_from_slice(header);
    out.extend_from_slice(records);
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let attributes = (attributes & !7) | codec as u16;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

fn read_bounded(r: impl Read, codec: &'static str, limit: usize) -> Result<Vec<u8>, RecordsError> {
    let mut out = Vec::new();
    r.take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| RecordsError::Decompress {
            codec,
            reason: e.to_string(),
        })?;
    if out.len() > limit {
        return Err(RecordsError::TooLarge { limit });
    }
    Ok(out)
}

/// Kafka's snappy is either raw snappy or xerial's framing (magic header, then
/// big-endian-length-prefixed raw blocks), which the Java client writes.
fn snappy(body: &[u8], limit: usize) -> Result<Vec<u8>, RecordsError> {
    let err = |reason: String| RecordsError::Decompress {
        codec: "snappy",
        reason,
    };
    let block = |data: &[u8], out: &mut Vec<u8>| -> Result<(), RecordsError> {
        let len = snap::raw::decompress_len(data).map_err(|e| err(e.to_string()))?;
        if out.len() + len > limit {
            return Err(RecordsError::TooLarge { limit });
        }
        let start = out.len();
        out.resize(start + len, 0);
        snap::raw::Decoder::new()
            .decompress(data, &mut out[start..])
            .map_err(|e| err(e.to_string()))?;
        Ok(())
    };
    let mut out = Vec::new();
    if body.len() >= 16 && body.starts_with(XERIAL) {
        let mut rest = &body[16..];
        while !rest.is_empty() {
            if rest.len() < 4 {
                return Err(err("truncated xerial block length".into()));
            }
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let data = rest
                .get(4..4 + len)
                .ok_or_else(|| err("truncated xerial block".into()))?;
            block(data, &mut out)?;
            rest = &rest[4 + len..];
        }
    } else {
        block(body, &mut out)?;
    }
    Ok(out)
}

/// Zigzag varint (Kafka's record fields), at most 10 bytes.
pub(crate) fn varlong(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in 0..10 {
        let b = *buf.get(*pos)?;
        *pos += 1;
        raw |= ((b & 0x7f) as u64) << (7 * shift);
        if b & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

/// The bytes of a length-prefixed field that `skip_bytes` just passed (`at`..`end`): what
/// follows its varint length.
fn field(buf: &[u8], at: usize, end: usize) -> &[u8] {
    let mut pos = at;
    let _ = varlong(buf, &mut pos);
    &buf[pos..end]
}

/// Skips a length-prefixed field; returns whether it was null (-1).
fn skip_bytes(buf: &[u8], pos: &mut usize, end: usize) -> Option<bool> {
    let len = varlong(buf, pos)?;
    if len == -1 {
        return Some(true);
    }
    let len = usize::try_from(len).ok()?;
    if *pos + len > end {
        return None;
    }
    *pos += len;
    Some(false)
}

/// The record at `at` of a records section (the `index`-th, for errors) and where the next
/// one starts. The one parser of a record's structure: length, attributes, deltas, key,
/// value, headers, and that the length matches them.
pub fn parse_one(
    records: &[u8],
    at: usize,
    index: i64,
) -> Result<(RecordFields<'_>, usize), RecordsError> {
    let bad = |reason| RecordsError::Malformed { index, reason };
    let mut pos = at;
    let len = varlong(records, &mut pos).ok_or(bad("bad length"))?;
    let len = usize::try_from(len).map_err(|_| bad("negative length"))?;
    let end = pos
        .checked_add(len)
        .filter(|e| *e <= records.len())
        .ok_or(bad("length past the batch"))?;
    let attributes = *records[..end].get(pos).ok_or(bad("no attributes"))?;
    pos += 1;
    let timestamp_delta = varlong(&records[..end], &mut pos).ok_or(bad("bad timestamp delta"))?;
    let offset_delta = varlong(&records[..end], &mut pos).ok_or(bad("bad offset delta"))?;
    let key_at = pos;
    let key_null = skip_bytes(records, &mut pos, end).ok_or(bad("bad key"))?;
    let key = (!key_null).then(|| field(records, key_at, pos));
    let value_at = pos;
    let value_null = skip_bytes(records, &mut pos, end).ok_or(bad("bad value"))?;
    let value = (!value_null).then(|| field(records, value_at, pos));
    let header_count = varlong(&records[..end], &mut pos).ok_or(bad("bad header count"))?;
    if header_count < 0 {
        return Err(bad("negative header count"));
    }
    let headers_at = pos;
    for _ in 0..header_count {
        if skip_bytes(records, &mut pos, end).ok_or(bad("bad header key"))? {
            return Err(bad("null header key"));
        }
        skip_bytes(records, &mut pos, end).ok_or(bad("bad header value"))?;
    }
    if pos != end {
        return Err(bad("record length does not match its fields"));
    }
    let fields = RecordFields {
        attributes,
        timestamp_delta,
        offset_delta,
        key_null,
        key,
        value,
        raw: &records[at..end],
        headers: &records[headers_at..end],
        header_count,
    };
    Ok((fields, end))
}

/// Walks the encoded records; `strict` (a produced batch): offset deltas must be 0, 1, 2, ….
fn walk<'a>(
    records: &'a [u8],
    claimed: i32,
    strict: bool,
    mut visit: impl FnMut(i32, RecordFields<'a>),
) -> Result<(), RecordsError> {
    let mut pos = 0usize;
    let mut index: i64 = 0;
    while pos < records.len() {
        let (r, next) = parse_one(records, pos, index)?;
        if strict && r.offset_delta != index {
            return Err(RecordsError::OffsetDelta {
                index,
                delta: r.offset_delta,
            });
        }
        visit(index as i32, r);
        pos = next;
        index += 1;
    }
    if index != claimed as i64 {
        return Err(RecordsError::CountMismatch {
            claimed,
            found: index,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::Compression;
    use proptest::prelude::*;

    fn encode(n: usize, compression: Compression, keys: bool) -> bytes::Bytes {
        let b = crate::test_support::TestBatch::new(n)
            .compression(compression)
            .at(1_000)
            .header("h", Some(b"x"));
        if keys {
            b.encode()
        } else {
            b.keyless().encode()
        }
    }

    const KEYS: RecordChecks = RecordChecks {
        require_keys: true,
        timestamps: None,
        each: None,
        embedding: None,
        ttl_header: None,
    };
    const NONE_CHECKED: RecordChecks = RecordChecks {
        require_keys: false,
        timestamps: None,
        each: None,
        embedding: None,
        ttl_header: None,
    };

    #[test]
    fn given_each_codec_when_validating_then_counts_and_keys_checked() {
        for (c, id) in [
            (Compression::None, 0),
            (Compression::Gzip, 1),
            (Compression::Snappy, 2),
            (Compression::Lz4, 3),
            (Compression::Zstd, 4),
        ] {
            let b = encode(20, c, true);
            assert_eq!(validate(&b, id, 20, KEYS, 1 << 20), Ok(vec![]), "{c:?}");
            assert_eq!(
                validate(&b, id, 21, NONE_CHECKED, 1 << 20),
                Err(RecordsError::CountMismatch {
                    claimed: 21,
                    found: 20
                }),
                "{c:?}"
            );
            let keyless = encode(3, c, false);
            let errors = validate(&keyless, id, 3, KEYS, 1 << 20).unwrap();
            // Every keyless record is named, by its index in the batch.
            assert_eq!(
                errors.iter().map(|e| e.index).collect::<Vec<_>>(),
                vec![0, 1, 2],
                "{c:?}"
            );
            assert!(errors.iter().all(|e| !e.timestamp));
            assert_eq!(
                validate(&keyless, id, 3, NONE_CHECKED, 1 << 20),
                Ok(vec![]),
                "{c:?}"
            );
        }
    }

    #[test]
    fn given_records_out_of_the_timestamp_bounds_when_validating_then_each_is_named() {
        // Records have timestamps 1000, 1001, ... (encode); allow [1001, 1003].
        let b = encode(5, Compression::Gzip, true);
        let checks = RecordChecks {
            require_keys: false,
            timestamps: Some(TimestampBounds {
                base: 1000,
                lo: 1001,
                hi: 1003,
            }),
            each: None,
            embedding: None,
            ttl_header: None,
        };
        let errors = validate(&b, 1, 5, checks, 1 << 20).unwrap();
        assert_eq!(
            errors.iter().map(|e| e.index).collect::<Vec<_>>(),
            vec![0, 4]
        );
        assert!(errors.iter().all(|e| e.timestamp));
        assert!(errors[0]
            .message
            .starts_with("Timestamp 1000 of message with offset 0 is out of range."));
    }

    #[test]
    fn given_decompression_bomb_when_validating_then_too_large_without_allocating_it() {
        let b = encode(200, Compression::Zstd, true);
        assert_eq!(
            validate(&b, 4, 200, NONE_CHECKED, 1000),
            Err(RecordsError::TooLarge { limit: 1000 })
        );
    }

    #[test]
    fn given_huge_claimed_count_when_validating_then_mismatch_not_allocation() {
        let b = encode(1, Compression::None, true);
        assert!(matches!(
            validate(&b, 0, i32::MAX, NONE_CHECKED, 1 << 20),
            Err(RecordsError::CountMismatch { .. })
        ));
    }

    proptest! {
        #[test]
        fn prop_arbitrary_record_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..300), codec in 0u8..6, count in any::<i32>()) {
            let mut batch = vec![0u8; RECORDS_OFFSET];
            batch.extend_from_slice(&body);
            let _ = validate(&batch, codec, count, KEYS, 1 << 16);
        }
    }
}
