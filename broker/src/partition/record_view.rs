//! Reading the records of a v2 batch one by one, borrowing their fields: for the produce
//! hooks that rewrite records (`redact`) and the HTTP readers that turn them into JSON
//! (`server::streams`, the key index).

use storage::batch::{BatchHeader, BatchIter};

use super::records::{self, varlong, RecordsError};

/// Offset of the first record in a v2 batch.
pub const RECORDS_OFFSET: usize = 61;

/// One record's fields, borrowed from the (decompressed) records section.
pub struct Record<'a> {
    pub attributes: u8,
    pub timestamp_delta: i64,
    pub offset_delta: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
}

/// The record at `at` of a records section and where the next one starts.
pub fn parse_record(
    buf: &[u8],
    at: usize,
    index: i64,
) -> Result<(Record<'_>, usize), RecordsError> {
    let bad = |reason| RecordsError::Malformed { index, reason };
    let mut pos = at;
    let len = varlong(buf, &mut pos).ok_or(bad("bad length"))?;
    let len = usize::try_from(len).map_err(|_| bad("negative length"))?;
    let end = pos
        .checked_add(len)
        .filter(|e| *e <= buf.len())
        .ok_or(bad("length past the batch"))?;
    let rec = &buf[..end];
    let attributes = *rec.get(pos).ok_or(bad("no attributes"))?;
    pos += 1;
    let timestamp_delta = varlong(rec, &mut pos).ok_or(bad("bad timestamp delta"))?;
    let offset_delta = varlong(rec, &mut pos).ok_or(bad("bad offset delta"))?;
    let key = bytes_field(rec, &mut pos).ok_or(bad("bad key"))?;
    let value = bytes_field(rec, &mut pos).ok_or(bad("bad value"))?;
    let count = varlong(rec, &mut pos).ok_or(bad("bad header count"))?;
    if count < 0 {
        return Err(bad("negative header count"));
    }
    let mut headers = Vec::new();
    for _ in 0..count {
        let k = bytes_field(rec, &mut pos)
            .ok_or(bad("bad header key"))?
            .ok_or(bad("null header key"))?;
        let v = bytes_field(rec, &mut pos).ok_or(bad("bad header value"))?;
        headers.push((k, v));
    }
    if pos != end {
        return Err(bad("record length does not match its fields"));
    }
    let record = Record {
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers,
    };
    Ok((record, end))
}

/// Every record of the batches in `chunk` (batch-aligned log data) from offset `from` on,
/// with its absolute offset and timestamp; control batches are skipped. Stops at the first
/// batch that does not read (a torn tail is never served anyway).
pub fn for_each_record(
    chunk: &[u8],
    from: i64,
    max_decompressed: usize,
    mut f: impl FnMut(&BatchHeader, i64, i64, &Record<'_>),
) -> Result<(), RecordsError> {
    for item in BatchIter::new(chunk) {
        let Ok((h, batch)) = item else { break };
        if h.is_control() || h.last_offset() < from {
            continue;
        }
        let body = batch.get(RECORDS_OFFSET..).unwrap_or_default();
        let plain;
        let section: &[u8] = match h.compression() {
            0 => body,
            c => {
                plain = records::decompress(c, body, max_decompressed)?;
                &plain
            }
        };
        let mut pos = 0;
        let mut index = 0;
        while pos < section.len() {
            let (r, next) = parse_record(section, pos, index)?;
            let offset = h.base_offset + r.offset_delta;
            if offset >= from {
                let ts = if h.timestamp_type_log_append() {
                    h.max_timestamp
                } else {
                    h.base_timestamp + r.timestamp_delta
                };
                f(&h, offset, ts, &r);
            }
            pos = next;
            index += 1;
        }
    }
    Ok(())
}

/// A length-prefixed field: `Some(None)` for null (-1), `None` if malformed.
fn bytes_field<'a>(buf: &'a [u8], pos: &mut usize) -> Option<Option<&'a [u8]>> {
    let len = varlong(buf, pos)?;
    if len == -1 {
        return Some(None);
    }
    let len = usize::try_from(len).ok()?;
    let field = buf.get(*pos..pos.checked_add(len)?)?;
    *pos += len;
    Some(Some(field))
}
