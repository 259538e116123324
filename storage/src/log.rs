//! `PartitionLog`: the segments of one partition, its offsets and the append pipeline.
//!
//! Offsets track three frontiers, each <= the next:
//! `durable_end` (fdatasync'd) <= `written_end` (writes completed, readable) <= `log_end`
//! (assigned). Writes may complete out of order; `written_end` only moves over a
//! contiguous prefix of completed writes (`pending`).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::{Rc, Weak};

use bytes::BytesMut;

use crate::batch::{self, BatchHeader};
use crate::io::IoBackend;
use crate::leader_epoch::LeaderEpochCache;
use crate::retention::{self, RetentionOutcome, RetentionPolicy, SegmentInfo};
use crate::segment::{file_name, Segment};
use crate::txn_index::AbortedTxn;
use crate::{now_ms, AppendOptions, AppendResult, Durability, LogConfig, ReadResult, StorageError};

#[path = "log_clean.rs"]
mod clean;
#[path = "log_raw.rs"]
mod raw;
#[path = "log_retention.rs"]
mod retention_ops;

/// Closed segments whose index entries stay in memory (an entry is 8 or 12 bytes; a full
/// 10 MiB index is what a 1 GiB segment has, so this bounds a log's index memory near
/// 16 x 20 MiB at worst, and to what its readers actually use).
const WARM_SEGMENTS: usize = 16;

struct PendingWrite {
    seq: u64,
    end_offset: i64,
    seg: Rc<Segment>,
    end_pos: u64,
    done: bool,
}

struct Inner {
    dir: PathBuf,
    config: LogConfig,
    io: Rc<IoBackend>,
    segments: RefCell<BTreeMap<i64, Rc<Segment>>>,
    log_start: Cell<i64>,
    log_end: Cell<i64>,
    written_end: Cell<i64>,
    durable_end: Cell<i64>,
    pending: RefCell<VecDeque<PendingWrite>>,
    next_seq: Cell<u64>,
    /// Segments with completed writes not yet covered by an fdatasync.
    dirty: RefCell<Vec<Rc<Segment>>>,
    sync_in_flight: Cell<bool>,
    /// A segment file was created in the partition dir since the last sync: the next sync
    /// also fsyncs the dir, so that no durable append into a new segment is acknowledged
    /// while the segment's directory entry could still vanish in a crash.
    dir_dirty: Cell<bool>,
    /// Number of `truncate_to` calls so far, and the offsets the recent ones cut to.
    /// A sync or a waiter that started before a truncation must not count offsets that
    /// were cut and then assigned again as its own.
    truncations: Cell<u64>,
    truncated_to: RefCell<VecDeque<(u64, i64)>>,
    last_flush_ms: Cell<i64>,
    /// Closed segments whose indexes were used lately, least recent first. Only these keep
    /// their index entries in memory, so memory does not grow with the number of segments.
    warm: RefCell<VecDeque<Rc<Segment>>>,
    /// Set after a failed write or fdatasync: the on-disk state is unknown (a failed
    /// fdatasync may have dropped dirty pages), so the log refuses further work.
    failed: RefCell<Option<String>>,
    /// Kafka's leader epoch cache (`leader-epoch-checkpoint`).
    epochs: RefCell<LeaderEpochCache>,
    /// Files of deleted segments, renamed `.deleted`, with the time (ms) from which they may
    /// be unlinked (`file.delete.delay.ms`), oldest first.
    retired: RefCell<VecDeque<(i64, Vec<PathBuf>)>>,
}

/// The log of one partition. Shard-local (`!Send`).
pub struct PartitionLog {
    inner: Rc<Inner>,
}

impl Inner {
    fn check_failed(&self) -> Result<(), StorageError> {
        match &*self.failed.borrow() {
            Some(reason) => Err(StorageError::LogFailed {
                path: self.dir.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    fn fail(&self, reason: String) {
        tracing::error!(dir = %self.dir.display(), %reason, "partition log failed");
        self.failed.borrow_mut().get_or_insert(reason);
        self.io.notify();
    }

    fn active(&self) -> Rc<Segment> {
        self.segments
            .borrow()
            .values()
            .next_back()
            .expect("a log always has a segment")
            .clone()
    }

    fn on_write_done(&self, seq: u64, r: std::io::Result<()>) {
        if let Err(e) = r {
            self.fail(format!("write failed: {e}"));
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

    fn roll(&self, base: i64, now: i64) -> Result<(), StorageError> {
        let old = self.active();
        old.seal()
            .map_err(|e| StorageError::io(e, old.log_path()))?;
        let seg = Segment::create(&self.dir, base, &self.config, now)
            .map_err(|e| StorageError::io(e, self.dir.join(file_name(base, "log"))))?;
        self.segments.borrow_mut().insert(base, Rc::new(seg));
        self.dir_dirty.set(true);
        Ok(())
    }

    /// Assigns offsets and queues the write; everything a caller must see happen in call
    /// order happens here, before any await.
    /// `preserve`: the batches keep their base offsets (a mirror of another log; gaps as
    /// compaction leaves them are kept), which must not go below the log end.
    fn start_append(
        self: &Rc<Self>,
        mut batches: BytesMut,
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
        while at < batches.len() {
            let b = &mut batches[at..];
            let h0 = batch::frame(b)?;
            let size = h0.total_size();
            let b = &mut b[..size];
            if !preserve {
                batch::set_base_offset(b, next);
            } else if h0.base_offset < next {
                return Err(raw::below_end(h0.base_offset, next));
            }
            batch::set_partition_leader_epoch(b, opts.leader_epoch);
            if let Some(t) = opts.log_append_time_ms {
                batch::set_log_append_time(b, t);
            }
            let h = BatchHeader::parse(b)?;
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
            self.epochs.borrow_mut().assign(opts.leader_epoch, base)?;
        }
        let len = batches.len() as u64;
        let now = now_ms();
        let mut seg = self.active();
        if seg.should_roll(&self.config, len, max_ts, next - 1, now) {
            self.roll(base, now)?;
            seg = self.active();
        }
        let pos = seg.size.get();
        let mut p = pos;
        // An index write can fail after earlier batches were recorded: undo them all, so
        // no index entry, next offset or max timestamp stands for bytes never written.
        let before = seg.bookkeeping();
        for h in &headers {
            if let Err(e) = seg.record_batch(h, p) {
                seg.rollback(before)
                    .map_err(|e| StorageError::io(e, seg.log_path()))?;
                return Err(StorageError::io(e, seg.log_path()));
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
        let weak: Weak<Inner> = Rc::downgrade(self);
        let file = seg.file.borrow().clone();
        self.io.write_at(
            file,
            pos,
            batches.freeze(),
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
                self.fail(format!(
                    "fdatasync of {} failed: {e}",
                    seg.log_path().display()
                ));
                guard.finished = true;
                return self.check_failed();
            }
        }
        // After the files: their new entries are in the dir, and Kafka's LocalLog.flush
        // syncs the dir last too.
        if guard.dir {
            if let Err(e) = self.io.sync_dir(&self.dir).await {
                self.fail(format!("fsync of dir {} failed: {e}", self.dir.display()));
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

    /// Notes that `seg`'s indexes were used; unloads those of the least recently used
    /// closed segments beyond [`WARM_SEGMENTS`].
    fn touched(&self, seg: &Rc<Segment>) {
        if Rc::ptr_eq(seg, &self.active()) {
            return;
        }
        let mut warm = self.warm.borrow_mut();
        warm.retain(|s| !Rc::ptr_eq(s, seg));
        warm.push_back(seg.clone());
        while warm.len() > WARM_SEGMENTS {
            if let Some(cold) = warm.pop_front() {
                cold.unload_indexes();
            }
        }
    }

    fn segments_from(&self, offset: i64) -> Vec<Rc<Segment>> {
        let segs = self.segments.borrow();
        let start = segs
            .range(..=offset)
            .next_back()
            .map(|(b, _)| *b)
            .unwrap_or(i64::MIN);
        segs.range(start..).map(|(_, s)| s.clone()).collect()
    }

    fn out_of_range(&self, offset: i64) -> StorageError {
        StorageError::OffsetOutOfRange {
            offset,
            log_start: self.log_start.get(),
            log_end: self.log_end.get(),
        }
    }

    /// Takes segments out of the log and renames their files `.deleted`; they are unlinked
    /// once `file.delete.delay.ms` has passed (`take_due_deletions`). Readers holding bytes
    /// of them keep their mappings either way.
    fn retire_segments(&self, bases: &[i64], now: i64) -> Result<u64, StorageError> {
        let mut bytes = 0;
        for base in bases {
            let seg = self.segments.borrow_mut().remove(base);
            let Some(seg) = seg else { continue };
            self.dirty.borrow_mut().retain(|s| !Rc::ptr_eq(s, &seg));
            self.warm.borrow_mut().retain(|s| !Rc::ptr_eq(s, &seg));
            bytes += seg.size.get();
            let paths = seg
                .rename_deleted()
                .map_err(|e| StorageError::io(e, seg.log_path()))?;
            let due =
                now.saturating_add(self.config.file_delete_delay_ms.min(i64::MAX as u64) as i64);
            self.retired.borrow_mut().push_back((due, paths));
        }
        Ok(bytes)
    }

    fn delete_segment(&self, base: i64) -> Result<(), StorageError> {
        let seg = self.segments.borrow_mut().remove(&base);
        if let Some(seg) = seg {
            self.dirty.borrow_mut().retain(|s| !Rc::ptr_eq(s, &seg));
            self.warm.borrow_mut().retain(|s| !Rc::ptr_eq(s, &seg));
            seg.delete_files()
                .map_err(|e| StorageError::io(e, seg.log_path()))?;
        }
        Ok(())
    }
}

impl PartitionLog {
    /// Opens (creating if needed) `<data_dir>/<topic>-<partition>/`, recovering from
    /// `recovery_point`. See the crate docs for what is validated.
    pub fn open(
        data_dir: &Path,
        topic: &str,
        partition: i32,
        config: LogConfig,
        io: Rc<IoBackend>,
        recovery_point: i64,
    ) -> Result<PartitionLog, StorageError> {
        config.validate()?;
        let dir = data_dir.join(format!("{topic}-{partition}"));
        let existed = dir.is_dir();
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::io(e, &dir))?;
        if !existed {
            // The partition dir's own entry must survive a crash before anything in it
            // is acknowledged as durable.
            io.sync_dir_blocking(data_dir)
                .map_err(|e| StorageError::io(e, data_dir))?;
        }
        let segments = crate::log_recovery::load_segments(&dir, &config, recovery_point)?;
        // Recovery may have created, removed or renamed files; a new log has its first
        // segment. One dir fsync makes all of that durable.
        io.sync_dir_blocking(&dir)
            .map_err(|e| StorageError::io(e, &dir))?;
        let first = *segments.keys().next().expect("at least one segment");
        let end = segments
            .values()
            .next_back()
            .expect("at least one segment")
            .next_offset
            .get();
        let first_epoch = || {
            segments.get(&first).and_then(|s| {
                s.with_written(|b| BatchHeader::parse(b).ok().map(|h| h.partition_leader_epoch))
                    .ok()
                    .flatten()
            })
        };
        let epochs = LeaderEpochCache::load(dir.clone(), first, end, first_epoch)?;
        let inner = Inner {
            epochs: RefCell::new(epochs),
            dir,
            config,
            io,
            segments: RefCell::new(segments),
            log_start: Cell::new(first),
            log_end: Cell::new(end),
            written_end: Cell::new(end),
            durable_end: Cell::new(end),
            pending: RefCell::new(VecDeque::new()),
            next_seq: Cell::new(0),
            dirty: RefCell::new(Vec::new()),
            sync_in_flight: Cell::new(false),
            dir_dirty: Cell::new(false),
            truncations: Cell::new(0),
            truncated_to: RefCell::new(VecDeque::new()),
            last_flush_ms: Cell::new(now_ms()),
            warm: RefCell::new(VecDeque::new()),
            failed: RefCell::new(None),
            retired: RefCell::new(VecDeque::new()),
        };
        Ok(PartitionLog {
            inner: Rc::new(inner),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Appends one or more validated v2 batches exactly as the producer sent them; the log
    /// rewrites base offsets and partition leader epoch. Offsets are assigned when this is
    /// *called* (not when the future is first polled), in call order; the future resolves
    /// when the write is done (`Durability::None`) or fdatasync'd (`Durability::Fsync`,
    /// group commit). Dropping the future does not cancel the write.
    pub fn append(
        &self,
        batches: BytesMut,
        opts: AppendOptions,
    ) -> impl Future<Output = Result<AppendResult, StorageError>> + 'static {
        let epoch = self.inner.truncations.get();
        let started = self.inner.start_append(batches, &opts, false);
        self.finish_append(started, opts.durability, epoch)
    }

    fn finish_append(
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
        Ok(out)
    }

    pub fn log_start_offset(&self) -> i64 {
        self.inner.log_start.get()
    }
    /// Next offset to assign.
    pub fn log_end_offset(&self) -> i64 {
        self.inner.log_end.get()
    }
    /// All offsets below are readable (their writes completed).
    pub fn written_end_offset(&self) -> i64 {
        self.inner.io.poll_completions();
        self.inner.written_end.get()
    }
    /// All offsets below are fdatasync'd: the recovery point to checkpoint.
    pub fn durable_end_offset(&self) -> i64 {
        self.inner.durable_end.get()
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

    pub fn size_bytes(&self) -> u64 {
        self.inner
            .segments
            .borrow()
            .values()
            .map(|s| s.size.get())
            .sum()
    }

    /// Records that leader `epoch` starts at the log end (Kafka's
    /// `maybeAssignEpochStartOffset` when a replica becomes leader). No-op unless newer
    /// than the latest epoch.
    pub fn assign_leader_epoch(&self, epoch: i32) -> Result<(), StorageError> {
        let end = self.inner.log_end.get();
        self.inner
            .epochs
            .borrow_mut()
            .assign(epoch, end)
            .map(|_| ())
    }

    /// OffsetForLeaderEpoch: Kafka's `endOffsetFor(epoch, end)`, as (epoch, end offset);
    /// (-1, -1) for an unknown epoch. `end` is what the caller treats as the log end.
    pub fn end_offset_for_epoch(&self, epoch: i32, end: i64) -> (i32, i64) {
        self.inner.epochs.borrow().end_offset_for(epoch, end)
    }

    /// The leader epoch cache's entries (epoch, start offset), oldest first.
    pub fn leader_epochs(&self) -> Vec<(i32, i64)> {
        self.inner.epochs.borrow().entries().to_vec()
    }

    /// Records an aborted transaction in the `.txnindex` of the segment holding its abort
    /// marker (`txn.last_offset`, which must already be appended). Entries must come in
    /// marker order, as Kafka requires.
    pub fn append_aborted_txn(&self, txn: AbortedTxn) -> Result<(), StorageError> {
        let inner = &self.inner;
        inner.check_failed()?;
        if txn.last_offset < inner.log_start.get() || txn.last_offset >= inner.log_end.get() {
            return Err(inner.out_of_range(txn.last_offset));
        }
        let seg = inner.segments_from(txn.last_offset).into_iter().next();
        let seg = seg.ok_or_else(|| inner.out_of_range(txn.last_offset))?;
        let mut idx = seg.txn_index.borrow_mut();
        let path = idx.path().to_path_buf();
        idx.append(txn).map_err(|e| StorageError::io(e, path))
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

    /// Waits for every append so far to be written and fdatasync'd.
    pub async fn flush(&self) -> Result<(), StorageError> {
        let end = self.inner.log_end.get();
        let epoch = self.inner.truncations.get();
        self.inner.wait_written(end, epoch).await?;
        self.inner.sync_upto(end, epoch).await
    }

    /// The `.txnindex` files written since the last call, whose entries must be synced
    /// before a recovery point above them is checkpointed (see `txn_index`): the caller
    /// fsyncs them, off the shard thread.
    pub fn take_dirty_txn_indexes(&self) -> Vec<PathBuf> {
        self.inner
            .segments
            .borrow()
            .values()
            .filter_map(|s| {
                let mut idx = s.txn_index.borrow_mut();
                idx.take_dirty().then(|| idx.path().to_path_buf())
            })
            .collect()
    }

    /// Flush, trim indexes, write nothing else; the log can be reopened without a scan
    /// when the broker checkpoints `log_end_offset()` as its recovery point.
    pub async fn close(self) -> Result<(), StorageError> {
        self.flush().await?;
        for seg in self.inner.segments.borrow().values() {
            let mut idx = seg.txn_index.borrow_mut();
            if idx.take_dirty() {
                idx.sync().map_err(|e| StorageError::io(e, idx.path()))?;
            }
        }
        let seg = self.inner.active();
        seg.seal().map_err(|e| StorageError::io(e, seg.log_path()))
    }

    /// Renames the dir to `<topic>-<partition>.<uuid>-delete` and deletes it. Deletion is
    /// immediate: open mmaps keep the inodes of files readers still use.
    pub fn delete(self) -> Result<(), StorageError> {
        let dir = self.inner.dir.clone();
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let uuid = crate::logdir::random_uuid();
        let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
        let target = dir.with_file_name(format!("{name}.{hex}-delete"));
        let io = self.inner.io.clone();
        drop(self);
        std::fs::rename(&dir, &target).map_err(|e| StorageError::io(e, &dir))?;
        std::fs::remove_dir_all(&target).map_err(|e| StorageError::io(e, &target))?;
        // Without this a crash could bring the partition dir back after a delete.
        match dir.parent() {
            Some(parent) => io
                .sync_dir_blocking(parent)
                .map_err(|e| StorageError::io(e, parent)),
            None => Ok(()),
        }
    }

    /// What of each segment has been read into memory, in offset order (for tests and
    /// metrics: opening after a clean shutdown reads nothing of closed segments).
    pub fn segment_probes(&self) -> Vec<crate::SegmentProbe> {
        self.inner
            .segments
            .borrow()
            .values()
            .map(|s| s.probe())
            .collect()
    }

    /// Base offset of the active (last) segment: it changes exactly when the log rolls.
    pub fn active_segment_base(&self) -> i64 {
        self.inner.active().base_offset
    }

    /// Which segments exist, as base offsets (for tests and tools).
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.inner.segments.borrow().keys().copied().collect()
    }

    /// fdatasyncs issued by this log's backend so far (to observe group commit).
    pub fn io_backend(&self) -> &Rc<IoBackend> {
        &self.inner.io
    }
}
