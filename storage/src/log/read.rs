//! Reads: batches as zero-copy slices of the segments' mmaps, timestamp lookups,
//! batch headers and aborted transactions for read_committed fetches.

use std::rc::Rc;

use super::{PartitionLog, ReadResult};
use crate::batch::{self, BatchHeader};
use crate::error::StorageError;
use crate::segment::Segment;
use crate::txn_index::AbortedTxn;

impl PartitionLog {
    /// Batches starting at the one containing `offset`, up to `max_bytes` (the first batch
    /// whole even if larger: KIP-74), never reaching `max_offset` (exclusive; a batch
    /// containing it is left out, as Kafka does). offset == end => empty.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
    ) -> Result<ReadResult, StorageError> {
        let inner = &self.inner;
        // A failed log is offline, as Kafka takes a log dir offline: what it would serve
        // may not match the disk (a failed fdatasync can drop written pages).
        inner.check_failed()?;
        inner.io.poll_completions();
        if offset < inner.log_start.get() || offset > inner.log_end.get() {
            return Err(inner.out_of_range(offset));
        }
        let limit = max_offset.min(inner.written_end.get());
        let mut out = ReadResult::default();
        if offset >= limit {
            return Ok(out);
        }
        let mut first = true;
        'segments: for seg in inner.segments_from(offset) {
            if seg.base_offset >= limit {
                break;
            }
            let start = if seg.base_offset <= offset {
                let found = seg.find(offset)?;
                inner.touched(&seg);
                match found {
                    Some((pos, _)) => pos,
                    None => continue,
                }
            } else {
                0
            };
            let written = seg.written_size.get();
            let mut stop = false;
            let end = seg
                .with_written(|buf| -> Result<u64, batch::BatchError> {
                    let mut pos = start;
                    while pos < written {
                        let h = batch::frame(&buf[pos as usize..])?;
                        let size = h.total_size() as u64;
                        let over = out.total_bytes + (pos + size - start) as usize > max_bytes;
                        if h.last_offset() >= limit || (over && !first) {
                            stop = true;
                            break;
                        }
                        first = false;
                        pos += size;
                    }
                    Ok(pos)
                })
                .map_err(|e| StorageError::io(e, seg.log_path()))?
                .map_err(|e| StorageError::Corrupt {
                    path: seg.log_path(),
                    reason: e.to_string(),
                })?;
            if end > start {
                let chunk = seg
                    .slice(start, end)
                    .map_err(|e| StorageError::io(e, seg.log_path()))?;
                out.total_bytes += chunk.len();
                out.chunks.push(chunk);
            }
            if stop {
                break 'segments;
            }
        }
        inner.io.copies().record_read(out.total_bytes as u64);
        Ok(out)
    }

    /// ListOffsets by timestamp: the first record with timestamp >= `ts`, as
    /// (offset, timestamp). Exact for uncompressed batches; for compressed ones (which
    /// storage does not decompress) the batch's first offset and max timestamp.
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64)>, StorageError> {
        let inner = &self.inner;
        inner.check_failed()?;
        let log_start = inner.log_start.get();
        let limit = inner.written_end.get();
        let segs: Vec<_> = inner.segments.borrow().values().cloned().collect();
        for seg in segs {
            if seg.next_offset.get() <= log_start {
                continue;
            }
            let seg_max = seg.max_ts().0;
            inner.touched(&seg);
            if seg_max < ts {
                continue;
            }
            let (_, ts_off) = seg.time_index.borrow().lookup(ts);
            let (_, start) = seg.index.borrow().lookup(ts_off.max(log_start));
            let found = seg
                .with_written(|buf| {
                    let mut pos = start as usize;
                    while pos < buf.len() {
                        let Ok(h) = batch::frame(&buf[pos..]) else {
                            return None;
                        };
                        if h.base_offset >= limit {
                            return None;
                        }
                        let b = &buf[pos..pos + h.total_size()];
                        pos += h.total_size();
                        if h.max_timestamp < ts || h.last_offset() < log_start {
                            continue;
                        }
                        match batch::record_timestamps(b) {
                            Some(recs) => {
                                // The match may be a record below log_start: then the
                                // answer is in a later batch, not (log_start, max_ts).
                                if let Some(hit) =
                                    recs.into_iter().find(|&(o, t)| t >= ts && o >= log_start)
                                {
                                    return Some(hit);
                                }
                            }
                            None => return Some((h.base_offset.max(log_start), h.max_timestamp)),
                        }
                    }
                    None
                })
                .map_err(|e| StorageError::io(e, seg.log_path()))?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP (-3): (offset, timestamp) of the record with the largest
    /// timestamp (first such record for uncompressed batches, else the batch's last offset).
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let inner = &self.inner;
        let mut best: Option<(i64, i64, Rc<Segment>)> = None;
        let segs: Vec<_> = inner.segments.borrow().values().cloned().collect();
        for seg in &segs {
            let (ts, off) = seg.max_ts();
            inner.touched(seg);
            if ts >= 0 && off < inner.written_end.get() && best.as_ref().is_none_or(|b| ts > b.0) {
                best = Some((ts, off, seg.clone()));
            }
        }
        let (ts, off, seg) = best?;
        let exact = seg.find(off).ok().flatten().and_then(|(pos, h)| {
            seg.with_written(|buf| {
                let b = &buf[pos as usize..pos as usize + h.total_size()];
                batch::record_timestamps(b)?
                    .into_iter()
                    .find(|&(_, t)| t == ts)
            })
            .ok()
            .flatten()
        });
        Some(exact.unwrap_or((off, ts)))
    }

    /// Aborted transactions overlapping `[fetch_offset, upper_bound)` (a read_committed
    /// fetch's range, `upper_bound` normally the LSO), from the segment holding
    /// `fetch_offset` on until a segment's search is complete. Kafka's
    /// `collectAbortedTransactions`.
    pub fn collect_aborted_txns(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        let mut out = Vec::new();
        // No stop at the first segment past `upper_bound`: a transaction that started
        // below it may have its abort marker there (another producer's open transaction
        // holds the LSO back), as Kafka's `collectAbortedTransactions` knows.
        for seg in self.inner.segments_from(fetch_offset) {
            let (found, complete) = seg
                .txn_index
                .borrow()
                .collect_aborted(fetch_offset, upper_bound);
            out.extend(found);
            if complete {
                break;
            }
        }
        out
    }

    /// Headers of all readable batches from the one containing `offset` on.
    pub fn batch_headers_from(&self, offset: i64) -> Result<Vec<BatchHeader>, StorageError> {
        let inner = &self.inner;
        inner.check_failed()?;
        inner.io.poll_completions();
        let mut out = Vec::new();
        for seg in inner.segments_from(offset) {
            let start = if seg.base_offset <= offset {
                match seg.find(offset)? {
                    Some((pos, _)) => pos,
                    None => continue,
                }
            } else {
                0
            };
            seg.with_written(|buf| -> Result<(), batch::BatchError> {
                for item in batch::BatchIter::new(&buf[start as usize..]) {
                    out.push(item?.0);
                }
                Ok(())
            })
            .map_err(|e| StorageError::io(e, seg.log_path()))?
            .map_err(|e| StorageError::Corrupt {
                path: seg.log_path(),
                reason: e.to_string(),
            })?;
        }
        Ok(out)
    }
}
