//! Record batches, magic v2, as Kafka lays them out on the wire and on disk.
//!
//! ```text
//! offset  size  field
//!      0     8  base_offset
//!      8     4  batch_length            (bytes after this field)
//!     12     4  partition_leader_epoch
//!     16     1  magic                   (2)
//!     17     4  crc                     (CRC-32C over bytes 21..end)
//!     21     2  attributes
//!     23     4  last_offset_delta
//!     27     8  base_timestamp
//!     35     8  max_timestamp
//!     43     8  producer_id
//!     51     2  producer_epoch
//!     53     4  base_sequence
//!     57     4  records_count
//!     61     …  records
//! ```
//!
//! The CRC deliberately does not cover base offset and partition leader epoch, which is
//! what lets the log assign offsets without touching the rest of the producer's bytes.

/// Size of the fixed v2 header; also the smallest possible batch.
pub const HEADER_SIZE: usize = 61;
/// `base_offset` + `batch_length`: the part not counted by `batch_length`.
pub const LOG_OVERHEAD: usize = 12;
const CRC_START: usize = 21;
pub(crate) const MAGIC_V2: i8 = 2;

const ATTR_COMPRESSION_MASK: i16 = 0x7;
const ATTR_TIMESTAMP_TYPE: i16 = 0x8;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;

#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    #[error("record batch truncated")]
    Truncated,
    #[error("unsupported record batch magic {0} (only v2 is stored)")]
    BadMagic(i8),
    #[error("invalid record batch length {0}")]
    BadLength(i32),
    #[error("record batch CRC mismatch: header says {expected:#010x}, bytes give {actual:#010x}")]
    CrcMismatch { expected: u32, actual: u32 },
    #[error("unknown compression codec {0}")]
    BadCodec(u8),
    #[error(
        "last_offset_delta {last_offset_delta} inconsistent with records_count {records_count}"
    )]
    BadRecordCount {
        last_offset_delta: i32,
        records_count: i32,
    },
    #[error("no record batch in buffer")]
    Empty,
    #[error("malformed records in batch: {0}")]
    BadRecords(&'static str),
    #[error("record batch offsets out of range: base offset {base_offset}, last_offset_delta {last_offset_delta}")]
    BadOffsetRange {
        base_offset: i64,
        last_offset_delta: i32,
    },
}

/// Parsed fixed 61-byte v2 batch header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

impl BatchHeader {
    /// Parses the header fields only; checks nothing but that 61 bytes are there.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < HEADER_SIZE {
            return Err(BatchError::Truncated);
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, 0),
            batch_length: be_i32(buf, 8),
            partition_leader_epoch: be_i32(buf, 12),
            magic: buf[16] as i8,
            crc: be_i32(buf, 17) as u32,
            attributes: be_i16(buf, 21),
            last_offset_delta: be_i32(buf, 23),
            base_timestamp: be_i64(buf, 27),
            max_timestamp: be_i64(buf, 35),
            producer_id: be_i64(buf, 43),
            producer_epoch: be_i16(buf, 51),
            base_sequence: be_i32(buf, 53),
            records_count: be_i32(buf, 57),
        })
    }

    pub fn compression(&self) -> u8 {
        (self.attributes & ATTR_COMPRESSION_MASK) as u8
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
    pub fn timestamp_type_log_append(&self) -> bool {
        self.attributes & ATTR_TIMESTAMP_TYPE != 0
    }
    /// Saturates rather than overflows: base offset is not covered by the CRC, so a
    /// corrupt one must not panic arithmetic (validation rejects such batches).
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(self.last_offset_delta as i64)
    }
    pub fn total_size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length.max(0) as usize
    }
}

/// Reads the header at the start of `buf` and checks the framing (magic, length, that
/// the whole batch is present) without the CRC. Used where bytes were already validated.
pub fn frame(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let h = BatchHeader::parse(buf)?;
    if h.magic != MAGIC_V2 {
        return Err(BatchError::BadMagic(h.magic));
    }
    if (h.batch_length as i64) < (HEADER_SIZE - LOG_OVERHEAD) as i64 {
        return Err(BatchError::BadLength(h.batch_length));
    }
    if buf.len() < h.total_size() {
        return Err(BatchError::Truncated);
    }
    Ok(h)
}

/// CRC-32C over the bytes the v2 header's `crc` covers.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[CRC_START..])
}

/// The check of a batch read back from disk, and only that: framing (size, magic), CRC
/// and a sane offset range. This is what Kafka's `LogSegment.recover` checks
/// (`ensureValid` + `ensureOffsetInRange`), and deliberately no more: Kafka's log cleaner
/// keeps a compacted batch's original last offset while dropping records, so a stored
/// batch may have `records_count - 1 != last_offset_delta`, or even no records at all
/// (kept to preserve an idempotent producer's last sequence). Refusing those would make
/// recovery truncate valid Kafka data.
pub fn validate_stored(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let h = frame(buf)?;
    let batch = &buf[..h.total_size()];
    let actual = compute_crc(batch);
    if actual != h.crc {
        return Err(BatchError::CrcMismatch {
            expected: h.crc,
            actual,
        });
    }
    if h.base_offset < 0
        || h.last_offset_delta < 0
        || h.base_offset
            .checked_add(h.last_offset_delta as i64)
            .is_none()
    {
        return Err(BatchError::BadOffsetRange {
            base_offset: h.base_offset,
            last_offset_delta: h.last_offset_delta,
        });
    }
    Ok(h)
}

/// Full check of one batch at the start of `buf` as a producer sends it: framing, CRC,
/// codec, and the record count Kafka's `LogValidator` demands of clients:
/// `records_count >= 1` and `last_offset_delta == records_count - 1`. For uncompressed
/// batches the records themselves are walked: exactly `records_count` well-formed
/// records must fill the batch, so a small batch cannot claim (and burn) 2^31 offsets.
/// Compressed batches are checked by the broker after decompression; storage does not
/// decompress. Stricter than [`validate_stored`]; never use it on disk data.
pub fn validate_one(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let h = frame(buf)?;
    let batch = &buf[..h.total_size()];
    let actual = compute_crc(batch);
    if actual != h.crc {
        return Err(BatchError::CrcMismatch {
            expected: h.crc,
            actual,
        });
    }
    if h.compression() > 4 {
        return Err(BatchError::BadCodec(h.compression()));
    }
    if h.records_count < 1 || h.last_offset_delta != h.records_count - 1 {
        return Err(BatchError::BadRecordCount {
            last_offset_delta: h.last_offset_delta,
            records_count: h.records_count,
        });
    }
    if h.compression() == 0 {
        let mut records = Records::new(batch, &h);
        let mut n: i64 = 0;
        for r in &mut records {
            r?;
            n += 1;
        }
        if n != h.records_count as i64 {
            return Err(BatchError::BadRecordCount {
                last_offset_delta: h.last_offset_delta,
                records_count: h.records_count,
            });
        }
        if !records.at_end() {
            return Err(BatchError::BadRecords("bytes left after the last record"));
        }
    }
    Ok(h)
}

/// Validates a buffer of one or more v2 batches as a producer sends them: every batch
/// complete, magic == 2, batch_length sane, CRC-32C correct, last_offset_delta consistent
/// with records_count, compression codec id in 0..=4. Returns the headers in order.
pub fn validate_batches(buf: &[u8]) -> Result<Vec<BatchHeader>, BatchError> {
    if buf.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let h = validate_one(&buf[at..])?;
        at += h.total_size();
        out.push(h);
    }
    Ok(out)
}

/// Iterates complete batches in a buffer. Checks framing only, or also the CRC and offset
/// range ([`validate_stored`]) when built with [`BatchIter::validating`]. Stops after the
/// first error.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
    validate: bool,
    failed: bool,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        BatchIter {
            buf,
            pos: 0,
            validate: false,
            failed: false,
        }
    }
    pub fn validating(buf: &'a [u8]) -> Self {
        BatchIter {
            validate: true,
            ..BatchIter::new(buf)
        }
    }
    /// Byte position of the next batch (after the last one returned).
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<(BatchHeader, &'a [u8]), BatchError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let r = if self.validate {
            validate_stored(rest)
        } else {
            frame(rest)
        };
        match r {
            Ok(h) => {
                let bytes = &rest[..h.total_size()];
                self.pos += h.total_size();
                Some(Ok((h, bytes)))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Bytes at the start of a batch that hold every field the log rewrites on a normal append
/// (base offset, partition leader epoch, and the batch length between them, unchanged):
/// all before the magic byte, outside the CRC.
pub const REWRITTEN_PREFIX: usize = 16;

/// `batch`'s first [`REWRITTEN_PREFIX`] bytes as the log stores them: base offset and
/// partition leader epoch replaced. The rest of the batch is written as received.
pub fn rewritten_prefix(batch: &[u8], base_offset: i64, epoch: i32) -> [u8; REWRITTEN_PREFIX] {
    let mut p = [0u8; REWRITTEN_PREFIX];
    p.copy_from_slice(&batch[..REWRITTEN_PREFIX]);
    set_base_offset(&mut p, base_offset);
    set_partition_leader_epoch(&mut p, epoch);
    p
}

/// Rewrites the base offset (not covered by the CRC).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Rewrites the partition leader epoch (not covered by the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[12..16].copy_from_slice(&epoch.to_be_bytes());
}

/// LogAppendTime: sets the timestamp-type attribute and max_timestamp, then recomputes
/// the CRC, because both fields are covered by it.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    let attrs = be_i16(batch, 21) | ATTR_TIMESTAMP_TYPE;
    batch[21..23].copy_from_slice(&attrs.to_be_bytes());
    batch[35..43].copy_from_slice(&now_ms.to_be_bytes());
    let crc = compute_crc(batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// A zigzag varint (Kafka's record fields), at most 10 bytes; `at` moves past it.
pub fn read_varint(buf: &[u8], at: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in (0..70).step_by(7) {
        let b = *buf.get(*at)?;
        *at += 1;
        raw |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            // zigzag
            return Some(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    None
}

/// Smallest encoded record: length, attributes, timestamp delta, offset delta, key
/// length, value length and header count, one byte each.
const MIN_RECORD_SIZE: usize = 7;

/// One record's framing fields.
struct RecordFields {
    timestamp_delta: i64,
    offset_delta: i64,
}

/// Walks the records of an uncompressed batch, checking each one's framing the way
/// Kafka's `DefaultRecord.readFrom` does (every length inside the record's own size).
/// Yields at most `records_count` records and never more than the bytes can hold, so a
/// count taken from input bounds nothing but the loop.
struct Records<'a> {
    buf: &'a [u8],
    at: usize,
    left: i64,
    failed: bool,
}

impl<'a> Records<'a> {
    fn new(batch: &'a [u8], h: &BatchHeader) -> Self {
        let end = h.total_size().min(batch.len());
        Records {
            buf: &batch[..end],
            at: HEADER_SIZE.min(end),
            left: h.records_count.max(0) as i64,
            failed: false,
        }
    }

    fn at_end(&self) -> bool {
        self.at == self.buf.len()
    }

    fn read_one(&mut self) -> Result<RecordFields, BatchError> {
        let bad = BatchError::BadRecords;
        let len = read_varint(self.buf, &mut self.at).ok_or(bad("record length"))?;
        if len < (MIN_RECORD_SIZE - 1) as i64 || len as u64 > (self.buf.len() - self.at) as u64 {
            return Err(bad("record length out of the batch"));
        }
        let end = self.at + len as usize;
        let rec = &self.buf[..end];
        let mut at = self.at + 1; // attributes
        let timestamp_delta = read_varint(rec, &mut at).ok_or(bad("timestamp delta"))?;
        let offset_delta = read_varint(rec, &mut at).ok_or(bad("offset delta"))?;
        for _ in 0..2 {
            // key, then value: -1 is null
            let n = read_varint(rec, &mut at).ok_or(bad("key/value length"))?;
            if n < -1 || n > (end - at) as i64 {
                return Err(bad("key/value length out of the record"));
            }
            at += n.max(0) as usize;
        }
        let headers = read_varint(rec, &mut at).ok_or(bad("header count"))?;
        if headers < 0 || headers > (end - at) as i64 {
            return Err(bad("header count out of the record"));
        }
        for _ in 0..headers {
            let k = read_varint(rec, &mut at).ok_or(bad("header key length"))?;
            if k < 0 || k > (end - at) as i64 {
                return Err(bad("header key length out of the record"));
            }
            at += k as usize;
            let v = read_varint(rec, &mut at).ok_or(bad("header value length"))?;
            if v < -1 || v > (end - at) as i64 {
                return Err(bad("header value length out of the record"));
            }
            at += v.max(0) as usize;
        }
        if at != end {
            return Err(bad("record fields do not fill the record length"));
        }
        self.at = end;
        Ok(RecordFields {
            timestamp_delta,
            offset_delta,
        })
    }
}

impl Iterator for Records<'_> {
    type Item = Result<RecordFields, BatchError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.left == 0 || self.at_end() {
            return None;
        }
        self.left -= 1;
        let r = self.read_one();
        self.failed = r.is_err();
        Some(r)
    }
}

/// (offset, timestamp) of every record of an uncompressed batch, by walking the record
/// framing only. None for compressed or malformed batches: the storage crate does not
/// decompress, and callers then fall back to batch-level answers. The result holds at
/// most one entry per 7 bytes of the batch, whatever its records_count says.
pub fn record_timestamps(batch: &[u8]) -> Option<Vec<(i64, i64)>> {
    let h = frame(batch).ok()?;
    if h.compression() != 0 {
        return None;
    }
    let room = (h.total_size() - HEADER_SIZE) / MIN_RECORD_SIZE;
    let mut out = Vec::with_capacity((h.records_count.max(0) as usize).min(room));
    for r in Records::new(batch, &h) {
        let r = r.ok()?;
        let ts = if h.timestamp_type_log_append() {
            h.max_timestamp
        } else {
            h.base_timestamp.checked_add(r.timestamp_delta)?
        };
        out.push((h.base_offset.checked_add(r.offset_delta)?, ts));
    }
    Some(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn put_varint(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            if z < 0x80 {
                out.push(z as u8);
                return;
            }
            out.push((z as u8 & 0x7f) | 0x80);
            z >>= 7;
        }
    }

    /// Builds an uncompressed v2 batch the way a producer would (offsets from 0).
    pub(crate) fn build_batch(base_ts: i64, values: &[&[u8]]) -> Vec<u8> {
        let mut records = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let mut body = Vec::new();
            body.push(0u8); // attributes
            put_varint(&mut body, i as i64); // timestamp delta
            put_varint(&mut body, i as i64); // offset delta
            put_varint(&mut body, -1); // key: null
            put_varint(&mut body, v.len() as i64);
            body.extend_from_slice(v);
            put_varint(&mut body, 0); // headers
            put_varint(&mut records, body.len() as i64);
            records.extend_from_slice(&body);
        }
        let n = values.len() as i32;
        let mut b = Vec::with_capacity(HEADER_SIZE + records.len());
        b.extend_from_slice(&0i64.to_be_bytes());
        b.extend_from_slice(&((HEADER_SIZE - LOG_OVERHEAD + records.len()) as i32).to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.push(2);
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&0i16.to_be_bytes());
        b.extend_from_slice(&(n - 1).to_be_bytes());
        b.extend_from_slice(&base_ts.to_be_bytes());
        b.extend_from_slice(&(base_ts + n as i64 - 1).to_be_bytes());
        b.extend_from_slice(&(-1i64).to_be_bytes());
        b.extend_from_slice(&(-1i16).to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&n.to_be_bytes());
        b.extend_from_slice(&records);
        let crc = compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn given_built_batch_when_validating_then_header_fields_round_trip() {
        let b = build_batch(1000, &[b"a", b"bb", b"ccc"]);
        let hs = validate_batches(&b).unwrap();
        assert_eq!(hs.len(), 1);
        let h = hs[0];
        assert_eq!(h.magic, 2);
        assert_eq!(h.records_count, 3);
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(h.max_timestamp, 1002);
        assert_eq!(h.total_size(), b.len());
        assert_eq!(
            record_timestamps(&b).unwrap(),
            vec![(0, 1000), (1, 1001), (2, 1002)]
        );
    }

    #[test]
    fn given_flipped_payload_byte_when_validating_then_crc_mismatch() {
        let mut b = build_batch(1, &[b"hello"]);
        let last = b.len() - 2;
        b[last] ^= 0xff;
        assert!(matches!(
            validate_batches(&b),
            Err(BatchError::CrcMismatch { .. })
        ));
    }

    #[test]
    fn given_rewritten_base_offset_and_epoch_when_validating_then_crc_still_matches() {
        let mut b = build_batch(1, &[b"x"]);
        set_base_offset(&mut b, 42);
        set_partition_leader_epoch(&mut b, 7);
        let h = validate_one(&b).unwrap();
        assert_eq!((h.base_offset, h.partition_leader_epoch), (42, 7));
    }

    #[test]
    fn given_log_append_time_when_rewriting_then_crc_recomputed_and_flag_set() {
        let mut b = build_batch(1, &[b"x", b"y"]);
        set_log_append_time(&mut b, 99);
        let h = validate_one(&b).unwrap();
        assert!(h.timestamp_type_log_append());
        assert_eq!(h.max_timestamp, 99);
        assert_eq!(record_timestamps(&b).unwrap(), vec![(0, 99), (1, 99)]);
    }

    #[test]
    fn given_bad_magic_or_short_buffer_when_validating_then_errors() {
        let mut b = build_batch(1, &[b"x"]);
        assert_eq!(validate_batches(&b[..30]), Err(BatchError::Truncated));
        assert_eq!(
            validate_batches(&b[..b.len() - 1]),
            Err(BatchError::Truncated)
        );
        b[16] = 1;
        assert_eq!(validate_batches(&b), Err(BatchError::BadMagic(1)));
        assert_eq!(validate_batches(&[]), Err(BatchError::Empty));
    }

    #[test]
    fn given_two_batches_when_iterating_then_both_returned_in_order() {
        let mut buf = build_batch(1, &[b"x"]);
        let mut second = build_batch(5, &[b"y", b"z"]);
        set_base_offset(&mut second, 1);
        buf.extend_from_slice(&second);
        let hs: Vec<_> = BatchIter::validating(&buf)
            .map(|r| r.unwrap().0.base_offset)
            .collect();
        assert_eq!(hs, vec![0, 1]);
    }

    /// Sets records_count and last_offset_delta as a lying producer would, with a
    /// correct CRC so that only the count check can catch it.
    fn with_count(mut b: Vec<u8>, count: i32) -> Vec<u8> {
        b[23..27].copy_from_slice(&(count.wrapping_sub(1)).to_be_bytes());
        b[57..61].copy_from_slice(&count.to_be_bytes());
        let crc = compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn given_header_only_batch_claiming_i32_max_records_when_validating_then_rejected() {
        let mut b = build_batch(1, &[b"x"]);
        b.truncate(HEADER_SIZE);
        b[8..12].copy_from_slice(&((HEADER_SIZE - LOG_OVERHEAD) as i32).to_be_bytes());
        let b = with_count(b, i32::MAX);
        assert!(validate_batches(&b).is_err());
        // And nothing allocates by the claimed count.
        assert_eq!(record_timestamps(&b), Some(vec![]));
    }

    #[test]
    fn given_records_count_not_matching_records_when_validating_then_rejected() {
        let b = build_batch(1, &[b"a", b"b", b"c"]);
        for n in [1, 2, 4, 1000] {
            assert!(
                validate_batches(&with_count(b.clone(), n)).is_err(),
                "count {n}"
            );
        }
        assert!(validate_batches(&with_count(b, 3)).is_ok());
    }

    #[test]
    fn given_zero_records_count_when_validating_then_rejected() {
        // No records, one offset: what Kafka's cleaner leaves on disk to keep an
        // idempotent producer's last sequence, but never valid producer input.
        let mut b = build_batch(1, &[b"x"]);
        b.truncate(HEADER_SIZE);
        b[8..12].copy_from_slice(&((HEADER_SIZE - LOG_OVERHEAD) as i32).to_be_bytes());
        b[23..27].copy_from_slice(&0i32.to_be_bytes());
        b[57..61].copy_from_slice(&0i32.to_be_bytes());
        let crc = compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            validate_batches(&b),
            Err(BatchError::BadRecordCount { .. })
        ));
        assert!(validate_stored(&b).is_ok());
    }

    #[test]
    fn given_bytes_after_last_record_when_validating_then_rejected() {
        let mut b = build_batch(1, &[b"x"]);
        b.extend_from_slice(&[0u8; 9]);
        let len = (b.len() - LOG_OVERHEAD) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        let crc = compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(validate_batches(&b).is_err());
    }

    #[test]
    fn given_record_length_past_batch_end_when_validating_then_rejected() {
        let mut b = build_batch(1, &[b"x"]);
        b[HEADER_SIZE] = 0x7e; // zigzag 63: longer than what is left
        let crc = compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            validate_batches(&b),
            Err(BatchError::BadRecords("record length out of the batch"))
        );
        assert_eq!(record_timestamps(&b), None);
    }

    #[test]
    fn given_timestamp_delta_overflowing_when_reading_timestamps_then_none_not_panic() {
        let mut b = build_batch(0, &[b"x", b"y"]);
        b[27..35].copy_from_slice(&i64::MAX.to_be_bytes());
        let crc = compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(record_timestamps(&b), None);
        let mut h = BatchHeader::parse(&b).unwrap();
        h.base_offset = i64::MAX;
        assert_eq!(h.last_offset(), i64::MAX);
    }
}
