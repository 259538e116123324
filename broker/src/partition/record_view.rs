//! Reading the records of stored v2 batches one by one from an offset, borrowing their
//! fields (records::parse_one, the one record parser): for the HTTP readers that turn them
//! into JSON (`server::streams`, `server::sessions`) and the key index.

use storage::batch::{BatchHeader, BatchIter};

use super::records::{self, RecordFields, RecordsError};

/// Offset of the first record in a v2 batch.
pub const RECORDS_OFFSET: usize = 61;

/// Every record of the batches in `chunk` (batch-aligned log data) from offset `from` on,
/// with its absolute offset and timestamp; control batches are skipped. Stops at the first
/// batch that does not read (a torn tail is never served anyway).
pub fn for_each_record(
    chunk: &[u8],
    from: i64,
    max_decompressed: usize,
    mut f: impl FnMut(&BatchHeader, i64, i64, &RecordFields<'_>),
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
            let (r, next) = records::parse_one(section, pos, index)?;
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
