//! Record-level reading and re-encoding of v2 batches for the cleaner.
//!
//! A cleaned batch keeps its base offset, last offset delta, producer id/epoch and base
//! sequence (Kafka's `MemoryRecords.filterTo` for magic v2), so offsets never change and
//! producer state rebuilt from the log stays right. Retained records are copied verbatim
//! unless the batch's base timestamp changes (the KIP-534 delete horizon), which moves
//! every record's timestamp delta.

use crate::batch::{self, BatchHeader, HEADER_SIZE};

/// Batch attribute bit 6: the base timestamp holds the delete horizon (KIP-534).
pub const ATTR_DELETE_HORIZON: i16 = 0x40;
const ATTR_COMPRESSION_MASK: i16 = 0x7;

/// One record of a batch, as far as the cleaner needs it.
pub struct Record<'a> {
    /// The whole encoded record, length prefix included.
    pub raw: &'a [u8],
    pub attributes: u8,
    pub timestamp_delta: i64,
    pub offset_delta: i64,
    /// None for a keyless record.
    pub key: Option<&'a [u8]>,
    /// False for a tombstone (null value).
    pub has_value: bool,
    pub value: Option<&'a [u8]>,
    /// The encoded bytes after the timestamp delta (offset delta to the end).
    pub after_timestamp: &'a [u8],
    /// The encoded headers: their count, then each key and value (read by [`Record::header`]).
    pub headers: &'a [u8],
}

impl<'a> Record<'a> {
    /// The value of the first header named `name` (`Some(None)`: present with a null
    /// value); None when absent or the headers do not read.
    pub fn header(&self, name: &[u8]) -> Option<Option<&'a [u8]>> {
        let buf = self.headers;
        let mut at = 0;
        let count = read_varint(buf, &mut at)?;
        for _ in 0..count.max(0) {
            let key = bytes_at(buf, &mut at)??;
            let value = bytes_at(buf, &mut at)?;
            if key == name {
                return Some(value);
            }
        }
        None
    }
}

/// A varint-length-prefixed field at `at`: `Some(None)` for null (-1), None if malformed.
fn bytes_at<'a>(buf: &'a [u8], at: &mut usize) -> Option<Option<&'a [u8]>> {
    let len = read_varint(buf, at)?;
    if len == -1 {
        return Some(None);
    }
    let len = usize::try_from(len).ok()?;
    let field = buf.get(*at..at.checked_add(len)?)?;
    *at += len;
    Some(Some(field))
}

pub use crate::batch::read_varint;

pub fn put_varint(out: &mut Vec<u8>, v: i64) {
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

/// Parses the records of an (uncompressed) records section. None when malformed: the
/// cleaner then keeps the batch as it is rather than guess.
pub fn parse_records(mut buf: &[u8], count: i32) -> Option<Vec<Record<'_>>> {
    // Never trust the count for an allocation: at most one record per 7 bytes.
    let mut out = Vec::with_capacity((count.max(0) as usize).min(buf.len() / 7));
    for _ in 0..count.max(0) {
        if buf.is_empty() {
            break;
        }
        let mut at = 0;
        let len = read_varint(buf, &mut at)?;
        if len < 6 || len as u64 > (buf.len() - at) as u64 {
            return None;
        }
        let end = at + len as usize;
        let rec = &buf[..end];
        let attributes = rec[at];
        at += 1;
        let timestamp_delta = read_varint(rec, &mut at)?;
        let after_ts_start = at;
        let offset_delta = read_varint(rec, &mut at)?;
        let klen = read_varint(rec, &mut at)?;
        if klen < -1 || klen > (end - at) as i64 {
            return None;
        }
        let key = (klen >= 0).then(|| &rec[at..at + klen as usize]);
        at += klen.max(0) as usize;
        let vlen = read_varint(rec, &mut at)?;
        if vlen < -1 || vlen > (end - at) as i64 {
            return None;
        }
        let headers_at = at + vlen.max(0) as usize;
        out.push(Record {
            raw: rec,
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            has_value: vlen >= 0,
            value: (vlen >= 0).then(|| &rec[at..at + vlen as usize]),
            after_timestamp: &rec[after_ts_start..end],
            headers: &rec[headers_at..end],
        });
        buf = &buf[end..];
    }
    buf.is_empty().then_some(out)
}

/// Appends `r` re-encoded for a batch whose base timestamp moved by `shift` ms
/// (new delta = old delta - shift). With `shift == 0` the bytes are copied as they are.
pub fn write_record(out: &mut Vec<u8>, r: &Record<'_>, shift: i64) {
    if shift == 0 {
        out.extend_from_slice(r.raw);
        return;
    }
    let mut body = Vec::with_capacity(r.raw.len() + 10);
    body.push(r.attributes);
    put_varint(&mut body, r.timestamp_delta.saturating_sub(shift));
    body.extend_from_slice(r.after_timestamp);
    put_varint(out, body.len() as i64);
    out.extend_from_slice(&body);
}

/// A v2 batch with `orig`'s offsets and producer fields, the given attributes, timestamps
/// and (already compressed, if the codec bits say so) records section.
pub fn encode_batch(
    orig: &BatchHeader,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    records_count: i32,
    records: &[u8],
) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER_SIZE + records.len());
    b.extend_from_slice(&orig.base_offset.to_be_bytes());
    b.extend_from_slice(
        &((HEADER_SIZE - batch::LOG_OVERHEAD + records.len()) as i32).to_be_bytes(),
    );
    b.extend_from_slice(&orig.partition_leader_epoch.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&orig.last_offset_delta.to_be_bytes());
    b.extend_from_slice(&base_timestamp.to_be_bytes());
    b.extend_from_slice(&max_timestamp.to_be_bytes());
    b.extend_from_slice(&orig.producer_id.to_be_bytes());
    b.extend_from_slice(&orig.producer_epoch.to_be_bytes());
    b.extend_from_slice(&orig.base_sequence.to_be_bytes());
    b.extend_from_slice(&records_count.to_be_bytes());
    b.extend_from_slice(records);
    let crc = batch::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The delete horizon of a batch (KIP-534), if set.
pub fn delete_horizon(h: &BatchHeader) -> Option<i64> {
    (h.attributes & ATTR_DELETE_HORIZON != 0).then_some(h.base_timestamp)
}

/// `attributes` with the compression codec replaced.
pub fn with_codec(attributes: i16, codec: u8) -> i16 {
    (attributes & !ATTR_COMPRESSION_MASK) | codec as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ts_delta: i64, off_delta: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> Vec<u8> {
        let mut body = vec![0u8];
        put_varint(&mut body, ts_delta);
        put_varint(&mut body, off_delta);
        match key {
            Some(k) => {
                put_varint(&mut body, k.len() as i64);
                body.extend_from_slice(k);
            }
            None => put_varint(&mut body, -1),
        }
        match value {
            Some(v) => {
                put_varint(&mut body, v.len() as i64);
                body.extend_from_slice(v);
            }
            None => put_varint(&mut body, -1),
        }
        put_varint(&mut body, 0);
        let mut out = Vec::new();
        put_varint(&mut out, body.len() as i64);
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn given_records_when_parsed_then_keys_tombstones_and_deltas_read() {
        let mut buf = record(0, 0, Some(b"a"), Some(b"1"));
        buf.extend(record(5, 1, Some(b"b"), None));
        buf.extend(record(7, 2, None, Some(b"x")));
        let recs = parse_records(&buf, 3).unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].key, Some(&b"a"[..]));
        assert!(recs[0].has_value);
        assert!(!recs[1].has_value);
        assert_eq!(recs[1].timestamp_delta, 5);
        assert_eq!(recs[2].offset_delta, 2);
        assert_eq!(recs[2].key, None);
        assert!(parse_records(&buf[..buf.len() - 1], 3).is_none());
    }

    #[test]
    fn given_a_shift_when_rewriting_then_timestamp_delta_moves_and_rest_is_kept() {
        let buf = record(100, 3, Some(b"key"), Some(b"value"));
        let recs = parse_records(&buf, 1).unwrap();
        let mut out = Vec::new();
        write_record(&mut out, &recs[0], 1000);
        let again = parse_records(&out, 1).unwrap();
        assert_eq!(again[0].timestamp_delta, -900);
        assert_eq!(again[0].offset_delta, 3);
        assert_eq!(again[0].key, Some(&b"key"[..]));
        let mut same = Vec::new();
        write_record(&mut same, &recs[0], 0);
        assert_eq!(same, buf);
    }
}
