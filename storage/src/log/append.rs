//! The append path: offsets are assigned and every state change made when `append` is
//! called, the bytes queued on the shard's I/O backend, and the returned future waits for
//! the write and, for `Durability::Fsync`, for a group-commit fdatasync covering it.
//!
//! Zero copy: the caller's `Bytes` are written as received. The fields the log rewrites
//! (base offset, partition leader epoch) lie in each batch's first
//! [`batch::REWRITTEN_PREFIX`] bytes, outside the CRC, so a batch is written as a rewritten
//! 16-byte prefix from a small buffer of the log's own followed by the rest of the
//! caller's bytes, all in one vectored write ([`Stored`]). Only LogAppendTime copies a
//! batch: its timestamp and attributes are under the CRC, which must be recomputed.

use std::future::Future;
use std::rc::{Rc, Weak};

use bytes::{Bytes, BytesMut};

use super::{AppendOptions, AppendResult, Durability, Inner, PartitionLog, PendingWrite};
use crate::batch::{self, BatchHeader, REWRITTEN_PREFIX};
use crate::clock::now_ms;
use crate::error::StorageError;
use crate::io::WriteBufs;
use crate::segment::Segment;

fn below_end(base: i64, end: i64) -> StorageError {
    StorageError::Invalid {
        what: "offset-preserving append",
        reason: format!("batch base offset {base} is below the log end offset {end}"),
    }
}

/// The bytes one append writes, as chunks over the caller's buffer `src`: runs of it as
/// received, rewritten prefixes, and whole copies where the CRC changes.
struct Stored<'a> {
    src: &'a Bytes,
    bufs: WriteBufs,
    /// Where the run of `src` not yet in `bufs` starts.
    run: usize,
    /// Rewritten prefixes; each is split off as its own chunk, sharing one allocation
    /// while the capacity lasts.
    own: BytesMut,
    copied: u64,
    header: u64,
}

impl<'a> Stored<'a> {
    fn new(src: &'a Bytes) -> Stored<'a> {
        Stored {
            src,
            bufs: WriteBufs::default(),
            run: 0,
            own: BytesMut::new(),
            copied: 0,
            header: 0,
        }
    }

    fn end_run(&mut self, upto: usize) {
        if upto > self.run {
            self.bufs.push(self.src.slice(self.run..upto));
        }
    }

    /// The batch at `at` is stored with `prefix` in place of its first bytes. A prefix
    /// that is already right (offset-preserving append, same epoch) stays in the run.
    fn rewrite_prefix(&mut self, at: usize, prefix: [u8; REWRITTEN_PREFIX]) {
        if self.src[at..at + REWRITTEN_PREFIX] == prefix {
            return;
        }
        self.end_run(at);
        if self.own.capacity() < REWRITTEN_PREFIX {
            self.own.reserve(4 * REWRITTEN_PREFIX);
        }
        self.own.extend_from_slice(&prefix);
        self.bufs.push(self.own.split().freeze());
        self.header += REWRITTEN_PREFIX as u64;
        self.run = at + REWRITTEN_PREFIX;
    }

    /// The batch at `at..end` is stored as `copy`.
    fn replace(&mut self, at: usize, end: usize, copy: Bytes) {
        self.end_run(at);
        self.copied += copy.len() as u64;
        self.bufs.push(copy);
        self.run = end;
    }

    fn finish(mut self) -> (WriteBufs, u64, u64) {
        self.end_run(self.src.len());
        (self.bufs, self.copied, self.header)
    }
}

impl Inner {
    fn on_write_done(&self, seq: u64, r: std::io::Result<()>) {
        if let Err(e) = r {
            self.fail("write failed".into(), &e);
            return;
        }
        let mut pending = self.pending.borrow_mut();
        let Some(front) = pending.front() else { return };
        let i = (seq - front.seq) as usize;
        if let Some(p) = pending.get_mut(i) {
            p.done = true;
        }
        let mut dirty = self.dirty.borrow_mut();
        if let Some(p) = pending.get(i) {
            if !dirty.iter().any(|s| Rc::ptr_eq(s, &p.seg)) {
                dirty.push(p.seg.clone());
            }
        }
        while pending.front().is_some_and(|p| p.done) {
            let p = pending.pop_front().expect("checked");
            self.written_end.set(p.end_offset);
            p.seg.written_size.set(p.end_pos);
        }
        drop(dirty);
        drop(pending);
        self.io.notify();
    }

    /// Assigns offsets and queues the write; everything a caller must see happen in call
    /// order happens here, before any await.
    /// `preserve`: the batches keep their base offsets (a mirror of another log; gaps as
    /// compaction leaves them are kept), which must not go below the log end.
    pub(super) fn start_append(
        self: &Rc<Self>,
        batches: Bytes,
        opts: &AppendOptions,
        preserve: bool,
    ) -> Result<(i64, AppendResult), StorageError> {
        self.check_failed()?;
        let mut headers: Vec<BatchHeader> = Vec::new();
        let mut at = 0;
        let mut max_ts = -1;
        let mut base = self.log_end.get();
        if preserve {
            base = batch::frame(&batches)?.base_offset;
        }
        let mut next = self.log_end.get();
        let mut stored = Stored::new(&batches);
        while at < batches.len() {
            let mut h = batch::frame(&batches[at..])?;
            let size = h.total_size();
            if !preserve {
                h.base_offset = next;
            } else if h.base_offset < next {
                return Err(below_end(h.base_offset, next));
            }
            h.partition_leader_epoch = opts.leader_epoch;
            match opts.log_append_time_ms {
                Some(t) => {
                    let mut copy = BytesMut::from(&batches[at..at + size]);
                    batch::set_base_offset(&mut copy, h.base_offset);
                    batch::set_partition_leader_epoch(&mut copy, h.partition_leader_epoch);
                    batch::set_log_append_time(&mut copy, t);
                    h = BatchHeader::parse(&copy)?;
                    stored.replace(at, at + size, copy.freeze());
                }
                None => stored.rewrite_prefix(
                    at,
                    batch::rewritten_prefix(
                        &batches[at..],
                        h.base_offset,
                        h.partition_leader_epoch,
                    ),
                ),
            }
            max_ts = max_ts.max(h.max_timestamp);
            next = h.last_offset() + 1;
            headers.push(h);
            at += size;
        }
        if headers.is_empty() {
            return Err(batch::BatchError::Empty.into());
        }
        if self.epochs.borrow().latest_epoch() < Some(opts.leader_epoch) {
            // A new leader epoch starts here (Kafka's `assign` on append); rare: once per
            // epoch, and the broker assigns its epoch when it opens the partition.
            let assigned = self.epochs.borrow_mut().assign(opts.leader_epoch, base);
            if let Err(e) = assigned {
                self.append_failed("writing leader-epoch-checkpoint", &e);
                return Err(e);
            }
        }
        let len = batches.len() as u64;
        let now = now_ms();
        let mut seg = self.active();
        if seg.should_roll(&self.config, len, max_ts, next - 1, now) {
            if let Err(e) = self.roll(base, now) {
                self.append_failed("rolling a new segment", &e);
                return Err(e);
            }
            seg = self.active();
        }
        let pos = seg.size.get();
        let mut p = pos;
        // An index write can fail after earlier batches were recorded: undo them all, so
        // no index entry, next offset or max timestamp stands for bytes never written.
        let before = seg.bookkeeping();
        for h in &headers {
            if let Err(e) = seg.record_batch(h, p) {
                let e = StorageError::io(e, seg.log_path());
                let undone = seg
                    .rollback(before)
                    .map_err(|e| StorageError::io(e, seg.log_path()));
                self.append_failed("writing an index entry", &e);
                undone?;
                return Err(e);
            }
            p += h.total_size() as u64;
        }
        seg.size.set(pos + len);
        self.log_end.set(next);
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        self.pending.borrow_mut().push_back(PendingWrite {
            seq,
            end_offset: next,
            seg: seg.clone(),
            end_pos: pos + len,
            done: false,
        });
        let (bufs, copied, header) = stored.finish();
        self.io.copies().record_append(len, copied, header);
        let weak: Weak<Inner> = Rc::downgrade(self);
        let file = seg.file.borrow().clone();
        self.io.write_at(
            file,
            pos,
            bufs,
            Box::new(move |r| {
                if let Some(inner) = weak.upgrade() {
                    inner.on_write_done(seq, r);
                }
            }),
        );
        Ok((
            next,
            AppendResult {
                base_offset: base,
                last_offset: next - 1,
                log_append_time_ms: opts.log_append_time_ms.unwrap_or(-1),
                log_start_offset: self.log_start.get(),
            },
        ))
    }

    /// Whether a truncation since `epoch` (the `truncations` count when the caller's
    /// offsets were assigned) cut below `end`, taking the caller's offsets with it.
    fn cut_since(&self, epoch: u64, end: i64) -> bool {
        if self.truncations.get() == epoch {
            return false;
        }
        let cuts = self.truncated_to.borrow();
        match cuts.front() {
            // Older than the history kept: assume the worst.
            Some(&(first, _)) if first > epoch + 1 => true,
            None => true,
            _ => cuts.iter().any(|&(e, o)| e > epoch && o < end),
        }
    }

    fn truncated_error(&self, end: i64) -> StorageError {
        StorageError::Truncated {
            end,
            log_end: self.log_end.get(),
        }
    }

    async fn wait_written(&self, end: i64, epoch: u64) -> Result<(), StorageError> {
        self.io
            .wait_until(|| {
                self.written_end.get() >= end
                    || self.failed.borrow().is_some()
                    || self.cut_since(epoch, end)
            })
            .await;
        if self.cut_since(epoch, end) {
            return Err(self.truncated_error(end));
        }
        if self.written_end.get() >= end {
            Ok(())
        } else {
            self.check_failed()
        }
    }

    /// Group commit: returns once an fdatasync that started after offsets below `end`
    /// were written has completed. One caller at a time leads a sync; the others wait
    /// for it and then, if still uncovered, one of them leads the next.
    async fn sync_upto(self: &Rc<Self>, end: i64, epoch: u64) -> Result<(), StorageError> {
        loop {
            self.check_failed()?;
            if self.cut_since(epoch, end) {
                return Err(self.truncated_error(end));
            }
            if self.durable_end.get() >= end {
                return Ok(());
            }
            if !self.sync_in_flight.get() {
                self.lead_sync().await?;
                continue;
            }
            self.io
                .wait_until(|| !self.sync_in_flight.get() || self.failed.borrow().is_some())
                .await;
        }
    }

    async fn lead_sync(self: &Rc<Self>) -> Result<(), StorageError> {
        /// Puts the taken segments back if the leader's future is dropped mid-sync, so
        /// the next leader syncs them.
        struct Guard<'a> {
            inner: &'a Inner,
            segs: Vec<Rc<Segment>>,
            dir: bool,
            finished: bool,
        }
        impl Drop for Guard<'_> {
            fn drop(&mut self) {
                self.inner.sync_in_flight.set(false);
                if !self.finished {
                    if self.dir {
                        self.inner.dir_dirty.set(true);
                    }
                    let mut d = self.inner.dirty.borrow_mut();
                    for s in self.segs.drain(..) {
                        if !d.iter().any(|x| Rc::ptr_eq(x, &s)) {
                            d.push(s);
                        }
                    }
                }
                self.inner.io.notify();
            }
        }
        self.sync_in_flight.set(true);
        let target = self.written_end.get();
        let epoch = self.truncations.get();
        let segs = std::mem::take(&mut *self.dirty.borrow_mut());
        let mut guard = Guard {
            inner: self,
            segs,
            dir: self.dir_dirty.replace(false),
            finished: false,
        };
        for seg in guard.segs.clone() {
            let file = seg.file.borrow().clone();
            if let Err(e) = self.io.datasync(file).await {
                self.fail(
                    format!("fdatasync of {} failed", seg.log_path().display()),
                    &e,
                );
                guard.finished = true;
                return self.check_failed();
            }
        }
        // After the files: their new entries are in the dir, and Kafka's LocalLog.flush
        // syncs the dir last too.
        if guard.dir {
            if let Err(e) = self.io.sync_dir(&self.dir).await {
                self.fail(format!("fsync of dir {} failed", self.dir.display()), &e);
                guard.finished = true;
                return self.check_failed();
            }
        }
        guard.finished = true;
        drop(guard);
        // A truncation while the sync ran may have cut below `target`, and the offsets
        // above the cut may since have been assigned to bytes this sync never covered.
        if self.truncations.get() == epoch && target > self.durable_end.get() {
            self.io
                .record_group_commit((target - self.durable_end.get()) as u64);
            self.durable_end.set(target);
        }
        self.last_flush_ms.set(now_ms());
        Ok(())
    }

    fn needs_policy_flush(&self) -> bool {
        let unflushed = (self.written_end.get() - self.durable_end.get()).max(0) as u64;
        unflushed >= self.config.flush_messages
            || (unflushed > 0
                && (now_ms() - self.last_flush_ms.get()).max(0) as u64 >= self.config.flush_ms)
    }
}

impl PartitionLog {
    /// Appends one or more validated v2 batches exactly as the producer sent them; the log
    /// rewrites base offsets and partition leader epoch. Offsets are assigned when this is
    /// *called* (not when the future is first polled), in call order; the future resolves
    /// when the write is done (`Durability::None`) or fdatasync'd (`Durability::Fsync`,
    /// group commit). Dropping the future does not cancel the write.
    ///
    /// The bytes are written from `batches` itself (no copy but for LogAppendTime, see the
    /// module doc), which is held until the write completes: a `Bytes` slice of a request
    /// keeps the request's buffer alive that long. A `BytesMut` converts without a copy.
    pub fn append(
        &self,
        batches: impl Into<Bytes>,
        opts: AppendOptions,
    ) -> impl Future<Output = Result<AppendResult, StorageError>> + 'static {
        let epoch = self.inner.truncations.get();
        let started = self.inner.start_append(batches.into(), &opts, false);
        self.finish_append(started, opts.durability, epoch)
    }

    pub(super) fn finish_append(
        &self,
        started: Result<(i64, AppendResult), StorageError>,
        durability: Durability,
        epoch: u64,
    ) -> impl Future<Output = Result<AppendResult, StorageError>> + 'static {
        let inner = self.inner.clone();
        async move {
            let (end, result) = started?;
            inner.wait_written(end, epoch).await?;
            if durability == Durability::Fsync || inner.needs_policy_flush() {
                inner.sync_upto(end, epoch).await?;
            }
            Ok(result)
        }
    }

    /// Waits until the appends below `end` are written (readable, not yet fdatasync'd): a
    /// replicated leader hands them to its followers then, so their fetch, write and
    /// fdatasync run beside its own fdatasync instead of after it.
    pub async fn wait_written(&self, end: i64) -> Result<(), StorageError> {
        let epoch = self.inner.truncations.get();
        self.inner.wait_written(end, epoch).await
    }

    /// Waits for every append so far to be written and fdatasync'd.
    pub async fn flush(&self) -> Result<(), StorageError> {
        let end = self.inner.log_end.get();
        let epoch = self.inner.truncations.get();
        self.inner.wait_written(end, epoch).await?;
        self.inner.sync_upto(end, epoch).await
    }
}
