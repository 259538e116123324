//! Removing data from a log: truncation (recovery of a replica's divergent tail, tests),
//! the log start moving (DeleteRecords, retention), and retention's segment deletion with
//! Kafka's `file.delete.delay.ms`.

use std::path::PathBuf;
use std::rc::Rc;

use super::PartitionLog;
use crate::clock::now_ms;
use crate::error::StorageError;
use crate::retention::{self, RetentionOutcome, RetentionPolicy, SegmentInfo};
use crate::segment::Segment;

impl PartitionLog {
    pub(super) fn ensure_quiescent(&self) -> Result<(), StorageError> {
        let inner = &self.inner;
        inner.check_failed()?;
        inner.io.poll_completions();
        let pending = inner.log_end.get() - inner.written_end.get();
        if pending > 0 {
            return Err(StorageError::WritesInFlight { pending });
        }
        Ok(())
    }

    /// Removes every batch from the one containing `offset` on. Needs all appends
    /// completed (await them first). If `offset` falls inside a batch, the whole batch
    /// goes and the log end becomes that batch's base offset.
    pub fn truncate_to(&self, offset: i64) -> Result<(), StorageError> {
        self.ensure_quiescent()?;
        let r = self.truncate_files(offset);
        if let Err(e) = &r {
            // Some segments may be gone and others not: the log's state is unknown.
            self.inner.fail(format!("truncate_to({offset}) failed"), e);
        }
        r
    }

    /// Kafka's `truncateFullyAndStartAt`: every segment goes and the log starts again,
    /// empty, at `offset` (a follower whose leader's log now starts past this log's end).
    /// Needs all appends completed.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), StorageError> {
        self.ensure_quiescent()?;
        let r = self.restart_empty_at(offset);
        if let Err(e) = &r {
            self.inner
                .fail(format!("truncate_fully_and_start_at({offset}) failed"), e);
        }
        r
    }

    fn restart_empty_at(&self, offset: i64) -> Result<(), StorageError> {
        let inner = &self.inner;
        let bases: Vec<i64> = inner.segments.borrow().keys().copied().collect();
        // The new segment exists before the old ones go, so that a failure leaves the log
        // with a segment; one already based at `offset` is emptied instead.
        if bases.contains(&offset) {
            let seg = inner.segments.borrow()[&offset].clone();
            seg.set_active(true)
                .map_err(|e| StorageError::io(e, seg.log_path()))?;
            seg.truncate_to(offset)?;
        } else {
            let seg = Segment::create(&inner.dir, offset, &inner.config, now_ms())
                .map_err(|e| StorageError::io(e, &inner.dir))?;
            inner.segments.borrow_mut().insert(offset, Rc::new(seg));
        }
        for b in bases.into_iter().filter(|b| *b != offset) {
            inner.delete_segment(b)?;
        }
        inner
            .io
            .sync_dir_blocking(&inner.dir)
            .map_err(|e| StorageError::io(e, &inner.dir))?;
        self.note_truncation(offset);
        inner.log_start.set(offset);
        inner.log_end.set(offset);
        inner.written_end.set(offset);
        inner.durable_end.set(offset);
        inner.io.notify();
        let mut epochs = inner.epochs.borrow_mut();
        epochs.truncate_from_end(offset)?;
        epochs.truncate_from_start(offset)
    }

    /// Readers that cached positions learn of a cut (`truncations`, `truncated_to`).
    fn note_truncation(&self, end: i64) {
        let inner = &self.inner;
        let epoch = inner.truncations.get() + 1;
        inner.truncations.set(epoch);
        let mut cuts = inner.truncated_to.borrow_mut();
        cuts.push_back((epoch, end));
        if cuts.len() > 64 {
            cuts.pop_front();
        }
    }

    fn truncate_files(&self, offset: i64) -> Result<(), StorageError> {
        let inner = &self.inner;
        if offset >= inner.log_end.get() {
            return Ok(());
        }
        let first_base = *inner.segments.borrow().keys().next().expect("segment");
        if offset < first_base {
            // Everything goes: start afresh at `offset` (Kafka's truncateFullyAndStartAt).
            return self.restart_empty_at(offset);
        }
        let doomed: Vec<i64> = inner
            .segments
            .borrow()
            .range(offset.max(first_base + 1)..)
            .map(|(b, _)| *b)
            .collect();
        for b in doomed {
            inner.delete_segment(b)?;
        }
        // Includes offset == first_base: the only segment left is emptied in place.
        let end = {
            let seg = inner.active();
            seg.set_active(true)
                .map_err(|e| StorageError::io(e, seg.log_path()))?;
            seg.truncate_to(offset)?
        };
        // Unlinked segments must stay unlinked: one resurrected by a crash would make
        // recovery cut the current segment at its base.
        inner
            .io
            .sync_dir_blocking(&inner.dir)
            .map_err(|e| StorageError::io(e, &inner.dir))?;
        self.note_truncation(end);
        inner.log_end.set(end);
        inner.written_end.set(end);
        inner.durable_end.set(inner.durable_end.get().min(end));
        inner.io.notify();
        if inner.log_start.get() > end {
            inner.log_start.set(end);
        }
        inner.epochs.borrow_mut().truncate_from_end(end)
    }

    /// Advances the log start offset (DeleteRecords, restart) and retires segments wholly
    /// below it (renamed `.deleted`, unlinked after `file.delete.delay.ms`). The new start is
    /// not persisted here: the broker keeps it in `log-start-offset-checkpoint` and
    /// re-applies it after `open`.
    pub fn advance_log_start(&self, offset: i64) -> Result<(), StorageError> {
        let inner = &self.inner;
        if offset > inner.log_end.get() {
            return Err(inner.out_of_range(offset));
        }
        if offset <= inner.log_start.get() {
            return Ok(());
        }
        inner.log_start.set(offset);
        inner.epochs.borrow_mut().truncate_from_start(offset)?;
        let now = now_ms();
        let active = inner.active();
        if offset == inner.log_end.get() && active.size.get() > 0 {
            // The active segment is wholly below the new start: roll so it can go.
            inner.roll(offset, now)?;
        }
        let doomed: Vec<i64> = {
            let segs = inner.segments.borrow();
            let bases: Vec<i64> = segs.keys().copied().collect();
            bases
                .windows(2)
                .take_while(|w| w[1] <= offset)
                .map(|w| w[0])
                .collect()
        };
        inner.retire_segments(&doomed, now)?;
        if !doomed.is_empty() || inner.dir_dirty.get() {
            // A crash must not bring back segments a DeleteRecords answer said are gone.
            inner
                .io
                .sync_dir_blocking(&inner.dir)
                .map_err(|e| StorageError::io(e, &inner.dir))?;
        }
        Ok(())
    }

    /// Retention (Kafka's `deleteOldSegments`, rules in `retention.rs`): deletes the oldest
    /// segments that are below the log start offset, over `retention.bytes` or older than
    /// `retention.ms`, never reaching `high_watermark`; rolls first when the active segment
    /// goes too. The log start moves to the first remaining segment. Files are renamed
    /// `.deleted` (no fsync: a segment that comes back after a crash is deleted again, as in
    /// Kafka) and unlinked later by whoever calls [`Self::take_due_deletions`].
    pub fn delete_old_segments(
        &self,
        policy: &RetentionPolicy,
        high_watermark: i64,
        now: i64,
    ) -> Result<RetentionOutcome, StorageError> {
        let inner = &self.inner;
        inner.check_failed()?;
        inner.io.poll_completions();
        let segs: Vec<Rc<Segment>> = inner.segments.borrow().values().cloned().collect();
        let infos: Vec<SegmentInfo> = segs
            .iter()
            .map(|s| SegmentInfo {
                base_offset: s.base_offset,
                size: s.size.get(),
            })
            .collect();
        let (n, reasons) = retention::deletable_prefix(
            &infos,
            inner.log_start.get(),
            inner.log_end.get(),
            high_watermark.min(inner.written_end.get()),
            now,
            policy,
            |i| {
                let ts = segs[i].largest_timestamp();
                inner.touched(&segs[i]);
                ts
            },
        );
        let mut out = RetentionOutcome {
            reasons,
            log_start_offset: inner.log_start.get(),
            ..RetentionOutcome::default()
        };
        if n == 0 {
            return Ok(out);
        }
        if n == segs.len() {
            // Kafka rolls so that the log keeps a (new, empty) segment at its end.
            inner.roll(inner.log_end.get(), now)?;
        }
        out.deleted = infos[..n].iter().map(|s| s.base_offset).collect();
        let next_base = *inner
            .segments
            .borrow()
            .range(out.deleted[n - 1] + 1..)
            .next()
            .map(|(b, _)| b)
            .expect("a later segment exists (rolled if needed)");
        if next_base > inner.log_start.get() {
            inner.log_start.set(next_base);
            inner.epochs.borrow_mut().truncate_from_start(next_base)?;
        }
        out.log_start_offset = inner.log_start.get();
        out.bytes = inner.retire_segments(&out.deleted, now)?;
        Ok(out)
    }

    /// Files of retired segments whose `file.delete.delay.ms` has passed as of `now`: the
    /// caller unlinks them (off the shard's hot path). Files never taken are removed by the
    /// next `open`.
    pub fn take_due_deletions(&self, now: i64) -> Vec<PathBuf> {
        let mut retired = self.inner.retired.borrow_mut();
        let mut out = Vec::new();
        while retired.front().is_some_and(|(due, _)| *due <= now) {
            out.extend(retired.pop_front().expect("checked").1);
        }
        out
    }

    /// Retired segment files not yet handed out by `take_due_deletions`.
    pub fn pending_deletions(&self) -> usize {
        self.inner
            .retired
            .borrow()
            .iter()
            .map(|(_, p)| p.len())
            .sum()
    }
}
