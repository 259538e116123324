//! `PartitionLog`: the segments of one partition and its offsets. One file per seam:
//!
//! - `append.rs`: offset assignment, the write queue, group commit (the hot path);
//! - `read.rs`: reads, timestamp lookups, batch headers, aborted transactions;
//! - `recovery.rs`: which segments exist at open and the recovery of the unsynced tail;
//! - `retention.rs`: truncation, log start, retention's segment deletion;
//! - `clean.rs`: the log cleaner's planning and swap;
//! - `raw.rs`: offset-preserving appends (`strom migrate`).
//!
//! Offsets track three frontiers, each <= the next:
//! `durable_end` (fdatasync'd) <= `written_end` (writes completed, readable) <= `log_end`
//! (assigned). Writes may complete out of order; `written_end` only moves over a
//! contiguous prefix of completed writes (`pending`).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;

use crate::batch::BatchHeader;
use crate::clock::now_ms;
use crate::config::LogConfig;
use crate::error::StorageError;
use crate::io::{IoBackend, IoFailure};
use crate::leader_epoch::LeaderEpochCache;
use crate::segment::{file_name, Segment, SegmentProbe};
use crate::txn_index::AbortedTxn;

mod append;
mod clean;
#[cfg(test)]
mod disk_full_tests;
mod raw;
mod read;
mod recovery;
mod retention;
mod tiered;

pub use tiered::{leader_epoch_checkpoint, ClosedSegment};

/// Closed segments whose index entries stay in memory (an entry is 8 or 12 bytes; a full
/// 10 MiB index is what a 1 GiB segment has, so this bounds a log's index memory near
/// 16 x 20 MiB at worst, and to what its readers actually use).
const WARM_SEGMENTS: usize = 16;

/// One queued write: `written_end` moves past `end_offset` once it and all before it
/// completed.
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Resolves once the bytes are in the page cache.
    None,
    /// Resolves once an fdatasync covering the bytes completed (acks=all, single node).
    Fsync,
}

#[derive(Clone, Debug)]
pub struct AppendOptions {
    pub durability: Durability,
    /// Some(now_ms) => LogAppendTime: max_timestamp rewritten, CRC recomputed.
    pub log_append_time_ms: Option<i64>,
    pub leader_epoch: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendResult {
    pub base_offset: i64,
    pub last_offset: i64,
    /// -1 unless LogAppendTime.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
}

#[derive(Clone, Debug, Default)]
pub struct ReadResult {
    /// Zero-copy slices over the mmapped segment(s), batch aligned, in offset order.
    pub chunks: Vec<Bytes>,
    pub total_bytes: usize,
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

    /// The log stops taking work: after a failed write or fdatasync what the disk holds
    /// is unknown (a failed fdatasync may have dropped dirty pages), so only a reopen, which
    /// validates the unsynced tail, may serve it again.
    /// Only the first failure is logged and reported: the writes in flight behind it fail
    /// too, and say nothing new.
    fn fail(&self, what: String, cause: &(dyn std::error::Error + 'static)) {
        if self.failed.borrow().is_none() {
            let reason = format!("{what}: {cause}");
            let disk_full = crate::error::is_disk_full(cause);
            tracing::error!(dir = %self.dir.display(), %reason, disk_full, "partition log failed");
            *self.failed.borrow_mut() = Some(reason.clone());
            self.io.report_failure(&IoFailure {
                dir: &self.dir,
                reason: &reason,
                disk_full,
                log_failed: true,
            });
        }
        self.io.notify();
    }

    /// An append failed before its bytes were queued (a segment roll, an index or leader
    /// epoch write) and was undone: the log still works, but the broker hears of the I/O
    /// error as of any other (a full disk fails the next write anyway).
    fn append_failed(&self, what: &str, e: &StorageError) {
        let reason = format!("{what}: {e}");
        self.io.report_failure(&IoFailure {
            dir: &self.dir,
            reason: &reason,
            disk_full: crate::error::is_disk_full(e),
            log_failed: false,
        });
    }

    fn active(&self) -> Rc<Segment> {
        self.segments
            .borrow()
            .values()
            .next_back()
            .expect("a log always has a segment")
            .clone()
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
        let segments = recovery::load_segments(&dir, &config, recovery_point)?;
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

    /// Renames the dir to `<topic>-<partition>.<uuid>-delete`, then makes the rename durable
    /// and deletes the renamed dir on a thread of its own (`logdir::remove_deleted_dir`): the
    /// partition is gone for the broker once renamed, and unlinking a log's segments (GBs)
    /// on the shard's thread stalled every partition of the shard for hundreds of ms (e2e
    /// p99 of ~500 ms in benches/cluster.sh, whose workloads delete their topics), and so did
    /// the fsync of the data dir, which on ext4 waits for the journal. Open mmaps
    /// keep the inodes of files readers still use. A crash before the removal ends leaves
    /// the `-delete` dir to `logdir::sweep_deleted_dirs` at the next start.
    pub fn delete(self) -> Result<(), StorageError> {
        let dir = self.inner.dir.clone();
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let uuid = crate::logdir::random_uuid();
        let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
        let target = dir.with_file_name(format!("{name}.{hex}-delete"));
        drop(self);
        std::fs::rename(&dir, &target).map_err(|e| StorageError::io(e, &dir))?;
        crate::logdir::remove_deleted_dir(target);
        Ok(())
    }

    /// What of each segment has been read into memory, in offset order (for tests and
    /// metrics: opening after a clean shutdown reads nothing of closed segments).
    pub fn segment_probes(&self) -> Vec<SegmentProbe> {
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
