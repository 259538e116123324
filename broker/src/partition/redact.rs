//! The produce-path hook of PII redaction (`crate::redact`): on the partition's home shard,
//! just before the append, a batch of a topic with `strom.redact.rules` has its records
//! rewritten with the topic's plan.
//!
//! Only record values and headers change. The batch header is kept as the producer wrote it —
//! producer id, epoch, base sequence, offset delta, record count, timestamps, the
//! transactional bit — so idempotence and transactions see the same batch; the records are
//! compressed again with the batch's own codec and the length and CRC are rewritten. A batch
//! where no rule matched is appended as it came (no copy).

use bytes::{Bytes, BytesMut};
use storage::batch::BatchHeader;

use super::record_view::RECORDS_OFFSET;
use super::records::{self, RecordsError};
use super::records::{parse_one, RecordFields};
use crate::redact::{Hits, Plan};

/// The hook: `records` as the topic's redaction leaves them (unchanged without rules or
/// matches), counting matches in `metrics`. Rules that no longer compile refuse the batch:
/// storing it unredacted would leak what the topic was configured to mask.
pub fn on_home_shard(
    partition: &super::Partition,
    metrics: &crate::metrics::ShardMetrics,
    header: BatchHeader,
    records: Bytes,
) -> Result<(BatchHeader, Bytes), super::PartitionError> {
    let settings = partition.settings();
    let plan = match &settings.redact {
        None => return Ok((header, records)),
        Some(Ok(plan)) => plan,
        Some(Err(e)) => {
            return Err(super::PartitionError::InvalidRecord(format!(
                "the topic's redaction rules do not compile: {e}"
            )))
        }
    };
    let mut hits = plan.new_hits();
    let out = redact_batch(
        plan,
        &header,
        &records,
        settings.max_decompressed_bytes,
        &mut hits,
    )
    .map_err(super::PartitionError::Records)?;
    for (rule, n) in plan.rules.iter().zip(&hits) {
        if *n > 0 {
            metrics
                .redactions
                .with_label_values(&[&*partition.topic, rule.name.as_str()])
                .inc_by(*n);
        }
    }
    Ok(out.unwrap_or((header, records)))
}

/// The batch with `plan` applied, or `None` when nothing matched. `hits` counts the matches
/// per rule. `max_decompressed` bounds the inflated records as validation did.
pub fn redact_batch(
    plan: &Plan,
    header: &BatchHeader,
    batch: &[u8],
    max_decompressed: usize,
    hits: &mut Hits,
) -> Result<Option<(BatchHeader, Bytes)>, RecordsError> {
    let codec = header.compression();
    let body = batch.get(RECORDS_OFFSET..).ok_or(RecordsError::Malformed {
        index: 0,
        reason: "batch shorter than its header",
    })?;
    let plain;
    let section: &[u8] = if codec == 0 {
        body
    } else {
        plain = records::decompress(codec, body, max_decompressed)?;
        &plain
    };
    let mut out = Vec::with_capacity(section.len() + 64);
    let mut changed = false;
    let mut pos = 0;
    let mut index = 0i64;
    let value_in_scope = plan.scope.value || !plan.scope.json_pointers.is_empty();
    let headers_in_scope = !plan.scope.headers.is_empty();
    // Reused across records: a record without a header in scope allocates nothing here.
    let mut headers: Vec<Option<Vec<u8>>> = Vec::new();
    while pos < section.len() {
        let (record, next) = parse_one(section, pos, index)?;
        let value = record
            .value
            .filter(|_| value_in_scope)
            .and_then(|v| plan.redact_value(v, hits));
        headers.clear();
        if headers_in_scope {
            headers.extend(record.headers().map(|(k, v)| match v {
                Some(v) if plan.covers_header(k) => plan.redact_text(v, hits),
                _ => None,
            }));
        }
        if value.is_none() && headers.iter().all(Option::is_none) {
            out.extend_from_slice(&section[pos..next]);
        } else {
            changed = true;
            encode_record(&record, value.as_deref(), &headers, &mut out);
        }
        pos = next;
        index += 1;
    }
    if !changed {
        return Ok(None);
    }
    let section = if codec == 0 {
        out
    } else {
        records::compress(codec, &out).ok_or(RecordsError::UnknownCodec(codec))?
    };
    let mut batch_out = BytesMut::with_capacity(RECORDS_OFFSET + section.len());
    batch_out.extend_from_slice(&batch[..RECORDS_OFFSET]);
    batch_out.extend_from_slice(&section);
    let length = (batch_out.len() - 12) as i32;
    batch_out[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch_out[21..]);
    batch_out[17..21].copy_from_slice(&crc.to_be_bytes());
    let batch_out = batch_out.freeze();
    let header = BatchHeader::parse(&batch_out).map_err(|_| RecordsError::Malformed {
        index: 0,
        reason: "re-encoded batch does not parse",
    })?;
    Ok(Some((header, batch_out)))
}

/// `record` with `value` and the `Some` entries of `headers` replaced (an empty `headers`:
/// none is), appended to `out`. The body is written in place after room for its length
/// prefix, then moved back when the prefix turns out shorter: no buffer per record.
fn encode_record(
    record: &RecordFields<'_>,
    value: Option<&[u8]>,
    headers: &[Option<Vec<u8>>],
    out: &mut Vec<u8>,
) {
    const ROOM: usize = 10; // the longest varint
    let at = out.len();
    out.resize(at + ROOM, 0);
    out.push(record.attributes);
    put_varlong(out, record.timestamp_delta);
    put_varlong(out, record.offset_delta);
    put_bytes(out, record.key);
    put_bytes(out, value.or(record.value));
    put_varlong(out, record.header_count() as i64);
    for (i, (k, v)) in record.headers().enumerate() {
        put_bytes(out, Some(k));
        let new = headers.get(i).and_then(Option::as_deref);
        put_bytes(out, new.or(v));
    }
    let body_len = out.len() - at - ROOM;
    let (prefix, n) = varlong_bytes(body_len as i64);
    out[at..at + n].copy_from_slice(&prefix[..n]);
    out.copy_within(at + ROOM.., at + n);
    out.truncate(at + n + body_len);
}

/// Kafka's zigzag varint of `v`: the bytes and how many.
fn varlong_bytes(v: i64) -> ([u8; 10], usize) {
    let (mut buf, mut n) = ([0u8; 10], 0);
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        buf[n] = (raw as u8) | 0x80;
        raw >>= 7;
        n += 1;
    }
    buf[n] = raw as u8;
    (buf, n + 1)
}

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let (buf, n) = varlong_bytes(v);
    out.extend_from_slice(&buf[..n]);
}

fn put_bytes(out: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        None => put_varlong(out, -1),
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
