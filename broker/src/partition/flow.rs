//! The flow features' steps of `Partition::append` (issue 20): dedup by message id (the
//! window itself is `dedup`), kept apart from the append path they hook into.

use std::time::Instant;

use bytes::Bytes;
use storage::batch::BatchHeader;

use super::{dedup, Partition, PartitionError, ProduceOutcome};
use crate::config::effective::TopicSettings;

/// The dedup step's outcome (`Partition::dedup_batch`).
pub(super) enum Deduped {
    /// Append this batch; the ids it brings (None: dedup off); duplicates dropped from it;
    /// the offset to answer instead of the batch's (a batch emptied of duplicates).
    Append(BatchHeader, Bytes, Option<dedup::NewIds>, u64, Option<i64>),
    /// Nothing to append: the first record's original offset, the duplicates.
    Answered(i64, u64),
}

impl Partition {
    /// The dedup step of `append` (`dedup` module): the batch to append and the ids it
    /// brings, or the answer for a batch of duplicates only.
    pub(super) fn dedup_batch(
        &self,
        settings: &TopicSettings,
        header: BatchHeader,
        records: Bytes,
        next_offset: i64,
        now_ms: i64,
    ) -> Result<Deduped, PartitionError> {
        let Some(ds) = settings.flow.dedup.as_ref() else {
            return Ok(Deduped::Append(header, records, None, 0, None));
        };
        if header.is_transactional() || header.is_control() {
            return Ok(Deduped::Append(header, records, None, 0, None));
        }
        let mut slot = self.dedup.borrow_mut();
        if slot.as_ref().is_none_or(|w| w.header() != ds.header) {
            *slot = Some(self.rebuild_dedup_window(ds, settings.max_decompressed_bytes, now_ms)?);
        }
        let window = slot.as_mut().expect("just built");
        window.expire(now_ms, ds.window_ms);
        let (verdict, ids) = window
            .check(
                &records,
                &header,
                ds,
                next_offset,
                now_ms,
                settings.max_decompressed_bytes,
            )
            .map_err(PartitionError::Records)?;
        Ok(match verdict {
            dedup::Verdict::Keep => Deduped::Append(header, records, Some(ids), 0, None),
            dedup::Verdict::Rebuilt {
                batch,
                header,
                duplicates,
                first_original,
            } => {
                // Duplicates only, from an idempotent producer: the empty batch carries its
                // sequence range; the answer is the first record's original offset.
                let answer = first_original.filter(|_| header.records_count == 0);
                Deduped::Append(header, batch, Some(ids), duplicates as u64, answer)
            }
            dedup::Verdict::AllDuplicates {
                first_original,
                duplicates,
            } => Deduped::Answered(first_original, duplicates as u64),
        })
    }

    /// The window as the log holds it: the ids of the records from `now - window` on (by
    /// record timestamp) to the log end. What makes dedup survive a restart or kill -9.
    fn rebuild_dedup_window(
        &self,
        ds: &crate::config::ai_flow::DedupSettings,
        max_decompressed: usize,
        now_ms: i64,
    ) -> Result<dedup::DedupWindow, PartitionError> {
        let mut window = dedup::DedupWindow::new(&ds.header);
        let end = self.log.written_end_offset();
        let Some((mut offset, _)) = self
            .log
            .offset_for_timestamp(now_ms.saturating_sub(ds.window_ms))?
        else {
            return Ok(window);
        };
        let started = Instant::now();
        while offset < end {
            let read = self.log.read(offset, 1 << 20, end)?;
            let before = offset;
            for chunk in &read.chunks {
                for (h, batch) in storage::batch::BatchIter::new(chunk).filter_map(Result::ok) {
                    if let Err(e) = window.replay_batch(batch, ds, max_decompressed) {
                        tracing::warn!(topic = %self.topic, partition = self.index, offset = h.base_offset, error = %e, "dedup window: unreadable batch skipped");
                    }
                    offset = h.last_offset() + 1;
                }
            }
            if offset == before {
                break; // nothing readable past here (the read validates framing only)
            }
        }
        window.expire(now_ms, ds.window_ms);
        tracing::debug!(topic = %self.topic, partition = self.index, ids = window.len(), took_ms = started.elapsed().as_millis() as u64, "dedup window rebuilt from the log");
        Ok(window)
    }

    /// A batch of duplicates only, from a plain producer: answered with the first record's
    /// original offset, once that is as durable as acks asks.
    pub(super) async fn answer_dedup(
        &self,
        first_original: i64,
        duplicates: u64,
        acks: i16,
    ) -> Result<ProduceOutcome, PartitionError> {
        if acks == -1 && self.log.durable_end_offset() <= first_original {
            self.log.flush().await?;
        }
        Ok(ProduceOutcome {
            base_offset: first_original,
            log_append_time_ms: -1,
            log_start_offset: self.log.log_start_offset(),
            dedup_duplicates: duplicates,
            dedup_evicted: 0,
        })
    }
}
