//! One segment: `<base>.log` plus its `.index`, `.timeindex` and `.txnindex`.
//!
//! ## Why mmap'd reads never SIGBUS
//! Readers get `Bytes` built with `Bytes::from_owner` over an `Arc<Mmap>`; the mapping (and
//! so the inode's pages) lives as long as any such `Bytes`. Touching a mapped page past
//! the *current* end of the file is what raises SIGBUS, so the log never shrinks a file
//! that a live reader maps:
//! - reads only cover bytes whose writes completed (`written_size`), never in-flight ones;
//! - deleting a segment unlinks its files: the inode, and the pages a reader maps, stay
//!   until the last mapping goes;
//! - truncating a segment shrinks it in place only when no reader holds *any* mapping of
//!   the file: the current one (`Arc::strong_count == 1`) and every earlier one replaced
//!   by a larger remap (tracked as `Weak`s in `old_maps`; checked on the shard thread,
//!   the only one able to hand out new references). Otherwise the kept prefix is copied to
//!   a new file that is renamed over the old name; readers keep the old, unshrunk inode.

use std::cell::{Cell, RefCell};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use memmap2::{Mmap, MmapOptions};

use crate::batch::{self, BatchHeader};
use crate::config::LogConfig;
use crate::error::StorageError;
use crate::index::{Bounds, OffsetIndex, TimeIndex};
use crate::txn_index::TxnIndex;

pub(crate) fn file_name(base: i64, ext: &str) -> String {
    format!("{base:020}.{ext}")
}

/// The part of an `Arc<Mmap>` a `Bytes` points at.
struct MapSlice {
    map: Arc<Mmap>,
    start: usize,
    end: usize,
}

impl AsRef<[u8]> for MapSlice {
    fn as_ref(&self) -> &[u8] {
        &self.map[self.start..self.end]
    }
}

pub(crate) struct Segment {
    pub base_offset: i64,
    dir: PathBuf,
    /// Appended to every file name: "" for a live segment, ".cleaned" for one the log
    /// cleaner is writing.
    suffix: &'static str,
    pub file: RefCell<Arc<File>>,
    /// Bytes assigned to appends, including writes still in flight.
    pub size: Cell<u64>,
    /// Bytes from the start whose writes all completed: the readable extent.
    pub written_size: Cell<u64>,
    /// Offset after the last batch assigned to this segment.
    pub next_offset: Cell<i64>,
    pub index: RefCell<OffsetIndex>,
    pub time_index: RefCell<TimeIndex>,
    pub txn_index: RefCell<TxnIndex>,
    bytes_since_index: Cell<u64>,
    /// (largest batch max_timestamp, last offset of that batch); (-1, -1) when none.
    /// Read through `max_ts()`: not known yet for a segment opened lazily.
    max_ts: Cell<(i64, i64)>,
    max_ts_known: Cell<bool>,
    /// Max timestamp of the first batch: what `segment.ms` counts from, as in Kafka.
    first_batch_ts: Cell<Option<i64>>,
    created_ms: i64,
    index_interval: u64,
    map: RefCell<Option<Arc<Mmap>>>,
    /// Mappings of the current file replaced by larger ones; readers may still hold them.
    old_maps: RefCell<Vec<std::sync::Weak<Mmap>>>,
    /// How much to map: the active segment maps up to `segment.bytes` at once (one
    /// mapping for its whole life; pages past EOF are never touched), others their size.
    map_len_hint: Cell<u64>,
    active_map_len: u64,
    /// Mappings of the log file made so far (a probe: a mapping is how log bytes are read).
    log_maps: Cell<u64>,
}

#[derive(Clone, Copy)]
pub(crate) struct Bookkeeping {
    next_offset: i64,
    max_ts: (i64, i64),
    bytes_since_index: u64,
    first_batch_ts: Option<i64>,
}

/// What of a segment has been read into memory (for tests and metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentProbe {
    pub base_offset: i64,
    /// Times the `.index` / `.timeindex` file was read.
    pub index_loads: u64,
    pub time_index_loads: u64,
    /// Times the `.log` file was mmapped.
    pub log_maps: u64,
    /// Whether the index entries are in memory now.
    pub indexes_loaded: bool,
}

impl Segment {
    fn path(&self, ext: &str) -> PathBuf {
        self.dir.join(format!(
            "{}{}",
            file_name(self.base_offset, ext),
            self.suffix
        ))
    }

    pub fn log_path(&self) -> PathBuf {
        self.path("log")
    }

    /// Opens the segment's files, creating missing ones. State (size, indexes' meaning) is
    /// established afterwards by `restore_from_indexes` or `recover`.
    pub fn open(dir: &Path, base: i64, cfg: &LogConfig, now_ms: i64) -> io::Result<Segment> {
        Self::open_suffixed(dir, base, cfg, now_ms, "")
    }

    fn open_suffixed(
        dir: &Path,
        base: i64,
        cfg: &LogConfig,
        now_ms: i64,
        suffix: &'static str,
    ) -> io::Result<Segment> {
        let name = |ext| dir.join(format!("{}{suffix}", file_name(base, ext)));
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(name("log"))?;
        let size = log.metadata()?.len();
        let index = OffsetIndex::open(&name("index"), base, cfg.segment_index_bytes)?;
        let time_index = TimeIndex::open(&name("timeindex"), base, cfg.segment_index_bytes)?;
        let txn_index = TxnIndex::open(&name("txnindex"))?;
        Ok(Segment {
            base_offset: base,
            dir: dir.to_path_buf(),
            suffix,
            file: RefCell::new(Arc::new(log)),
            size: Cell::new(size),
            written_size: Cell::new(size),
            next_offset: Cell::new(base),
            index: RefCell::new(index),
            time_index: RefCell::new(time_index),
            txn_index: RefCell::new(txn_index),
            bytes_since_index: Cell::new(0),
            max_ts: Cell::new((-1, -1)),
            max_ts_known: Cell::new(true),
            first_batch_ts: Cell::new(None),
            created_ms: now_ms,
            index_interval: cfg.index_interval_bytes,
            map: RefCell::new(None),
            old_maps: RefCell::new(Vec::new()),
            map_len_hint: Cell::new(size.max(1)),
            active_map_len: cfg.segment_bytes.clamp(1, 1 << 30),
            log_maps: Cell::new(0),
        })
    }

    /// State of a closed segment below the recovery point after a clean shutdown, set
    /// without reading anything, as Kafka does: such a segment was fdatasync'd and its
    /// indexes trimmed before the recovery point was checkpointed. Its offsets end at or
    /// before `next_base` (the next segment's base; compaction may leave a gap), its
    /// indexes and max timestamp are loaded on first use, bounded by what the segment can
    /// hold so garbage entries are dropped then.
    pub fn open_trusted(&self, next_base: i64) {
        let size = self.size.get();
        self.written_size.set(size);
        self.next_offset.set(next_base);
        self.max_ts_known.set(false);
        let max_rel = (next_base - self.base_offset).max(0) as u64;
        self.index.borrow().set_bounds(Bounds {
            max_rel,
            max_pos: size,
        });
        self.time_index.borrow().set_bounds(Bounds {
            max_rel,
            max_pos: u64::MAX,
        });
    }

    /// Whether the offset index file can be trusted to be there: a missing (empty) index
    /// of a segment that must have entries means the segment needs a scan at open.
    pub fn index_file_present(&self, cfg: &LogConfig) -> bool {
        let idx_len = std::fs::metadata(self.index.borrow().path()).map_or(0, |m| m.len());
        idx_len > 0 || self.size.get() <= cfg.index_interval_bytes
    }

    /// (largest batch max_timestamp, last offset of that batch); (-1, -1) when none. For a
    /// segment opened lazily this loads the time index; an empty or garbage one is
    /// answered by a scan of the segment (recovery writes the time index's last entry for
    /// every segment with timestamps, so an empty one is missing, not meaningful).
    pub fn max_ts(&self) -> (i64, i64) {
        if !self.max_ts_known.get() {
            let last = self.time_index.borrow().last();
            let v = match last {
                Some(v) => v,
                None => self.scan_max_ts().unwrap_or((-1, -1)),
            };
            self.max_ts.set(v);
            self.max_ts_known.set(true);
        }
        self.max_ts.get()
    }

    fn scan_max_ts(&self) -> Option<(i64, i64)> {
        tracing::warn!(file = %self.log_path().display(), "time index empty; scanning the segment");
        self.with_written(|buf| {
            let mut best = (-1, -1);
            for item in batch::BatchIter::new(buf) {
                let (h, _) = item.ok()?;
                if h.max_timestamp > best.0 {
                    best = (h.max_timestamp, h.last_offset());
                }
            }
            Some(best)
        })
        .ok()
        .flatten()
    }

    /// Drops the in-memory index entries of a closed segment (they are read again on the
    /// next lookup), so a log's memory does not grow with its number of segments.
    pub fn unload_indexes(&self) {
        self.index.borrow_mut().unload();
        self.time_index.borrow_mut().unload();
    }

    pub fn probe(&self) -> SegmentProbe {
        let idx = self.index.borrow();
        let tidx = self.time_index.borrow();
        SegmentProbe {
            base_offset: self.base_offset,
            index_loads: idx.loads(),
            time_index_loads: tidx.loads(),
            log_maps: self.log_maps.get(),
            indexes_loaded: idx.is_loaded() || tidx.is_loaded(),
        }
    }

    /// A new, empty segment (files truncated if leftovers exist).
    pub fn create(dir: &Path, base: i64, cfg: &LogConfig, now_ms: i64) -> io::Result<Segment> {
        Self::create_suffixed(dir, base, cfg, now_ms, "")
    }

    /// A new, empty segment whose file names end in `suffix` (the cleaner's ".cleaned").
    pub fn create_suffixed(
        dir: &Path,
        base: i64,
        cfg: &LogConfig,
        now_ms: i64,
        suffix: &'static str,
    ) -> io::Result<Segment> {
        for ext in ["log", "index", "timeindex", "txnindex"] {
            let p = dir.join(format!("{}{suffix}", file_name(base, ext)));
            match std::fs::remove_file(p) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        let seg = Segment::open_suffixed(dir, base, cfg, now_ms, suffix)?;
        seg.set_active(true)?;
        Ok(seg)
    }

    /// fsyncs the log and its offset and time indexes (the cleaner's output must be
    /// durable before it replaces anything).
    pub fn sync_all(&self) -> io::Result<()> {
        self.file.borrow().sync_data()?;
        self.index.borrow().sync()?;
        self.time_index.borrow().sync()?;
        self.txn_index.borrow().sync()
    }

    /// Kafka keeps the active segment's indexes preallocated and trims them otherwise.
    pub fn set_active(&self, active: bool) -> io::Result<()> {
        self.index.borrow_mut().set_preallocated(active)?;
        self.time_index.borrow_mut().set_preallocated(active)?;
        self.map_len_hint.set(if active {
            self.active_map_len
        } else {
            self.size.get().max(1)
        });
        Ok(())
    }

    /// Bookkeeping of one batch placed at `pos`, exactly as Kafka's `LogSegment.append`
    /// does it, so that indexes written by either broker are alike.
    pub fn record_batch(&self, h: &BatchHeader, pos: u64) -> io::Result<()> {
        if self.first_batch_ts.get().is_none() {
            self.first_batch_ts.set(Some(h.max_timestamp));
        }
        if h.max_timestamp > self.max_ts().0 {
            self.max_ts.set((h.max_timestamp, h.last_offset()));
        }
        if self.bytes_since_index.get() > self.index_interval {
            self.index
                .borrow_mut()
                .append(h.last_offset(), pos as u32)?;
            let (ts, off) = self.max_ts.get();
            self.time_index.borrow_mut().maybe_append(ts, off, false)?;
            self.bytes_since_index.set(0);
        }
        self.bytes_since_index
            .set(self.bytes_since_index.get() + h.total_size() as u64);
        self.next_offset.set(h.last_offset() + 1);
        Ok(())
    }

    /// The in-memory bookkeeping `record_batch` changes, to undo a partly recorded append.
    pub fn bookkeeping(&self) -> Bookkeeping {
        Bookkeeping {
            next_offset: self.next_offset.get(),
            max_ts: self.max_ts(),
            bytes_since_index: self.bytes_since_index.get(),
            first_batch_ts: self.first_batch_ts.get(),
        }
    }

    /// Back to `b`, index entries added since included.
    pub fn rollback(&self, b: Bookkeeping) -> io::Result<()> {
        self.next_offset.set(b.next_offset);
        self.max_ts.set(b.max_ts);
        self.bytes_since_index.set(b.bytes_since_index);
        self.first_batch_ts.set(b.first_batch_ts);
        self.index.borrow_mut().truncate_to(b.next_offset)?;
        self.time_index.borrow_mut().truncate_to(b.next_offset)
    }

    /// Kafka's `shouldRoll`, given the size and largest timestamp of the next append.
    pub fn should_roll(
        &self,
        cfg: &LogConfig,
        add: u64,
        max_ts: i64,
        last_offset: i64,
        now_ms: i64,
    ) -> bool {
        let size = self.size.get();
        if size == 0 {
            return false;
        }
        let waited = match self.first_batch_ts.get() {
            Some(t) if t >= 0 => max_ts - t,
            _ => now_ms - self.created_ms,
        };
        size + add > cfg.segment_bytes
            || (waited > 0 && waited as u64 > cfg.segment_ms)
            || self.index.borrow().is_full()
            || self.time_index.borrow().is_full()
            || last_offset - self.base_offset > i32::MAX as i64
            || size + add > u32::MAX as u64
    }

    /// Called when the segment stops being the active one (roll, close).
    pub fn seal(&self) -> io::Result<()> {
        let (ts, off) = self.max_ts();
        if ts >= 0 {
            self.time_index.borrow_mut().maybe_append(ts, off, true)?;
        }
        self.set_active(false)
    }

    /// A mapping that covers at least `need` bytes of the file.
    fn mapping(&self, need: u64) -> io::Result<Arc<Mmap>> {
        if let Some(m) = &*self.map.borrow() {
            if m.len() as u64 >= need {
                return Ok(m.clone());
            }
        }
        let len = need.max(self.map_len_hint.get()).max(1);
        let file = self.file.borrow().clone();
        // SAFETY: the mapping is read-only and we only ever dereference bytes below
        // `written_size`, which are in the file; the file is never shrunk under a live
        // mapping (see the module doc), and within this process nothing writes to bytes
        // below `written_size` once written. The data dir lock keeps other brokers out.
        let map = unsafe { MmapOptions::new().len(len as usize).map(&*file)? };
        self.log_maps.set(self.log_maps.get() + 1);
        let map = Arc::new(map);
        if let Some(old) = self.map.borrow_mut().replace(map.clone()) {
            let mut olds = self.old_maps.borrow_mut();
            olds.retain(|w| w.strong_count() > 0);
            olds.push(Arc::downgrade(&old));
        }
        Ok(map)
    }

    /// Zero-copy view of `[start, end)`; `end` must be <= `written_size`.
    pub fn slice(&self, start: u64, end: u64) -> io::Result<Bytes> {
        debug_assert!(end <= self.written_size.get());
        let map = self.mapping(end)?;
        Ok(Bytes::from_owner(MapSlice {
            map,
            start: start as usize,
            end: end as usize,
        }))
    }

    /// Runs `f` over the readable bytes (no copy, no Bytes).
    pub fn with_written<R>(&self, f: impl FnOnce(&[u8]) -> R) -> io::Result<R> {
        let end = self.written_size.get();
        if end == 0 {
            return Ok(f(&[]));
        }
        let map = self.mapping(end)?;
        Ok(f(&map[..end as usize]))
    }

    /// Position and header of the first readable batch with last offset >= `offset`.
    pub fn find(&self, offset: i64) -> Result<Option<(u64, BatchHeader)>, StorageError> {
        let (_, start) = self.index.borrow().lookup(offset);
        match self.find_from(start as u64, offset) {
            // A lazily loaded index is not checked against its log at open: an entry that
            // does not point at a batch is garbage, and the scan from the start is right.
            Err(StorageError::Corrupt { .. }) if start > 0 => {
                tracing::warn!(file = %self.log_path().display(), position = start,
                    "index entry does not point at a batch; scanning the segment");
                self.find_from(0, offset)
            }
            r => r,
        }
    }

    fn find_from(
        &self,
        start: u64,
        offset: i64,
    ) -> Result<Option<(u64, BatchHeader)>, StorageError> {
        let r = self.with_written(|buf| {
            let mut pos = start as usize;
            while pos < buf.len() {
                let h = batch::frame(&buf[pos..])?;
                if h.last_offset() >= offset {
                    return Ok(Some((pos as u64, h)));
                }
                pos += h.total_size();
            }
            Ok(None)
        });
        match r {
            Ok(r) => r.map_err(|e| self.corrupt(e)),
            Err(e) => Err(StorageError::io(e, self.log_path())),
        }
    }

    /// Kafka's `ensureOffsetInRange`: a batch belongs in this segment only if its offsets
    /// are at or above the base and fit the indexes' 32-bit relative offsets.
    fn offset_in_range(&self, h: &BatchHeader) -> bool {
        h.base_offset >= self.base_offset && h.last_offset() - self.base_offset <= i32::MAX as i64
    }

    fn corrupt(&self, e: batch::BatchError) -> StorageError {
        StorageError::Corrupt {
            path: self.log_path(),
            reason: e.to_string(),
        }
    }

    /// Restores in-memory state after a clean shutdown without reading the whole segment:
    /// resume at the last offset-index entry and validate every batch from there to the
    /// end of the file. Returns false when the index does not agree with the log (the
    /// caller then does a full `recover`).
    pub fn restore_from_indexes(&self) -> Result<bool, StorageError> {
        let last = self.index.borrow().last();
        let (start, expect_last) = match last {
            Some((off, pos)) => (pos as u64, Some(off)),
            None => (0, None),
        };
        if start > self.size.get() {
            return Ok(false);
        }
        match self.time_index.borrow().last() {
            Some((ts, off)) => self.max_ts.set((ts, off)),
            // Every offset-index entry comes with a time-index entry once timestamps are
            // set, so an empty time index next to a non-empty offset index is a missing or
            // garbage file: rebuild it, or segment-level max timestamps would be wrong.
            None if last.is_some() => return Ok(false),
            None => {}
        }
        let size = self.size.get();
        self.written_size.set(size);
        let map = if size > 0 {
            Some(
                self.mapping(size)
                    .map_err(|e| StorageError::io(e, self.log_path()))?,
            )
        } else {
            None
        };
        let buf: &[u8] = map.as_ref().map(|m| &m[..size as usize]).unwrap_or(&[]);
        // segment.ms counts from the segment's real first batch, not from where the scan
        // resumes (Kafka's loadFirstBatchTimestamp).
        if size > 0 {
            match batch::frame(buf) {
                Ok(h) => self.first_batch_ts.set(Some(h.max_timestamp)),
                Err(_) => return Ok(false),
            }
        }
        let mut pos = start as usize;
        let mut first = true;
        let mut ok = true;
        while pos < buf.len() {
            let h = match batch::validate_stored(&buf[pos..]) {
                Ok(h) if self.offset_in_range(&h) => h,
                _ => {
                    ok = false;
                    break;
                }
            };
            if first {
                first = false;
                if let Some(o) = expect_last {
                    if h.last_offset() != o {
                        return Ok(false);
                    }
                    // The entry for this batch exists already: just re-arm the interval.
                    self.bytes_since_index.set(0);
                }
            }
            self.record_batch(&h, pos as u64)
                .map_err(|e| StorageError::io(e, self.log_path()))?;
            pos += h.total_size();
        }
        if first && expect_last.is_some() {
            return Ok(false);
        }
        if !ok {
            // Bad bytes after the last index entry: leave it to full recovery, which
            // truncates them.
            return Ok(false);
        }
        // The time index may not point past the segment's last offset.
        if self.max_ts.get().1 >= self.next_offset.get() && self.max_ts.get().0 >= 0 {
            return Ok(false);
        }
        Ok(true)
    }

    /// Full recovery: validates every batch from the start, rebuilds both indexes, and
    /// truncates the file at the first bad batch. Returns the number of bytes cut.
    ///
    /// Nothing below `recovery_point` is ever cut: those offsets were fdatasync'd and
    /// acknowledged, so a bad batch there is corruption of durable data, not a torn
    /// write. Cutting it would also throw away every later (good) batch; instead the
    /// open fails with [`StorageError::Corrupt`] naming the file and position, and the
    /// files stay as they are for an operator to look at.
    pub fn recover(&self, active: bool, recovery_point: i64) -> Result<u64, StorageError> {
        let path = self.log_path();
        let size = self.size.get();
        self.index
            .borrow_mut()
            .rebuild(Vec::new(), active)
            .map_err(|e| StorageError::io(e, &path))?;
        self.time_index
            .borrow_mut()
            .rebuild(Vec::new(), active)
            .map_err(|e| StorageError::io(e, &path))?;
        self.bytes_since_index.set(0);
        self.max_ts.set((-1, -1));
        self.max_ts_known.set(true);
        self.first_batch_ts.set(None);
        self.next_offset.set(self.base_offset);
        self.written_size.set(size);
        let map = if size > 0 {
            Some(self.mapping(size).map_err(|e| StorageError::io(e, &path))?)
        } else {
            None
        };
        let buf: &[u8] = map.as_ref().map(|m| &m[..size as usize]).unwrap_or(&[]);
        let mut pos = 0usize;
        let mut bad: Option<batch::BatchError> = None;
        let mut prev_next = self.base_offset;
        while pos < buf.len() {
            match batch::validate_stored(&buf[pos..]) {
                Ok(h) if h.base_offset >= prev_next && self.offset_in_range(&h) => {
                    self.record_batch(&h, pos as u64)
                        .map_err(|e| StorageError::io(e, &path))?;
                    prev_next = h.last_offset() + 1;
                    pos += h.total_size();
                }
                Ok(h) => {
                    bad = Some(batch::BatchError::BadLength(h.batch_length));
                    tracing::warn!(file = %path.display(), offset = h.base_offset,
                        "batch offsets go backwards or out of the segment's range");
                    break;
                }
                Err(e) => {
                    bad = Some(e);
                    break;
                }
            }
        }
        drop(map);
        // Like Kafka's recover: the time index ends with the largest timestamp seen.
        let (ts, off) = self.max_ts.get();
        if ts >= 0 {
            self.time_index
                .borrow_mut()
                .maybe_append(ts, off, true)
                .map_err(|e| StorageError::io(e, &path))?;
        }
        let cut = size - pos as u64;
        if let Some(e) = &bad {
            if prev_next < recovery_point {
                return Err(StorageError::Corrupt {
                    path,
                    reason: format!(
                        "bad batch at position {pos} (offset {prev_next}), below the recovery \
                         point {recovery_point}: {e}; refusing to truncate durable data"
                    ),
                });
            }
        }
        if let Some(e) = bad {
            tracing::warn!(file = %path.display(), position = pos, next_offset = prev_next,
                bytes = cut, error = %e, "truncating torn or corrupt log tail");
            self.truncate_file(pos as u64)
                .map_err(|e| StorageError::io(e, &path))?;
        }
        // Aborted transactions whose markers were cut are gone with them.
        self.txn_index
            .borrow_mut()
            .truncate_to(prev_next)
            .map_err(|e| StorageError::io(e, &path))?;
        Ok(cut)
    }

    /// Cuts the log file to `pos` bytes without SIGBUS risk to readers (module doc).
    /// A file with other hard links (segments adopted from a Kafka log dir by
    /// `logdir::link_segments`) is never cut in place either: the other names must keep
    /// their bytes, so the kept prefix goes to a new file that replaces only our name.
    pub fn truncate_file(&self, pos: u64) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let linked = self.file.borrow().metadata()?.nlink() > 1;
        let shared = linked
            || self
                .map
                .borrow()
                .as_ref()
                .is_some_and(|m| Arc::strong_count(m) > 1)
            || self.old_maps.borrow().iter().any(|w| w.strong_count() > 0);
        *self.map.borrow_mut() = None;
        if shared {
            let path = self.log_path();
            let tmp = self.path("log.cleaned");
            let src = self.file.borrow().clone();
            let dst = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            copy_prefix(&src, &dst, pos)?;
            dst.sync_data()?;
            std::fs::rename(&tmp, &path)?;
            // The name now points at `dst`: switch to it before anything else can fail,
            // so the segment never keeps writing to the unlinked old inode.
            *self.file.borrow_mut() = Arc::new(dst);
            // Those map the old inode, which is no longer ours to shrink.
            self.old_maps.borrow_mut().clear();
            self.size.set(pos);
            self.written_size.set(pos);
            File::open(&self.dir)?.sync_all()?;
        } else {
            self.file.borrow().set_len(pos)?;
        }
        self.size.set(pos);
        self.written_size.set(pos);
        Ok(())
    }

    /// Removes everything from `offset` on; returns the segment's new next offset.
    pub fn truncate_to(&self, offset: i64) -> Result<i64, StorageError> {
        let path = self.log_path();
        let pos = match self.find(offset)? {
            Some((pos, _)) => pos,
            None => return Ok(self.next_offset.get()),
        };
        self.truncate_file(pos)
            .map_err(|e| StorageError::io(e, &path))?;
        self.index
            .borrow_mut()
            .truncate_to(offset)
            .map_err(|e| StorageError::io(e, &path))?;
        self.time_index
            .borrow_mut()
            .truncate_to(offset)
            .map_err(|e| StorageError::io(e, &path))?;
        self.txn_index
            .borrow_mut()
            .truncate_to(offset)
            .map_err(|e| StorageError::io(e, &path))?;
        self.bytes_since_index.set(0);
        self.max_ts.set((-1, -1));
        self.max_ts_known.set(true);
        self.first_batch_ts.set(None);
        self.next_offset.set(self.base_offset);
        if !self.restore_from_indexes()? {
            // Called by the log's truncate_to: cutting is what the caller asked for.
            self.recover(true, i64::MIN)?;
        }
        Ok(self.next_offset.get())
    }

    /// Renames the segment's files to `<name>.deleted` (Kafka's suffix for files waiting for
    /// `file.delete.delay.ms`) and returns the new paths. Readers' mappings and the open file
    /// keep working: only names change. Recovery removes `.deleted` files it finds.
    pub fn rename_deleted(&self) -> io::Result<Vec<PathBuf>> {
        *self.map.borrow_mut() = None;
        let mut out = Vec::new();
        for ext in ["log", "index", "timeindex", "txnindex"] {
            let from = self.path(ext);
            let to = self.path(&format!("{ext}.deleted"));
            match std::fs::rename(&from, &to) {
                Ok(()) => out.push(to),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Kafka's `LogSegment.largestTimestamp`: the largest record timestamp, or the file's
    /// last-modified time when the segment has none.
    pub fn largest_timestamp(&self) -> i64 {
        let (ts, _) = self.max_ts();
        if ts >= 0 {
            return ts;
        }
        std::fs::metadata(self.log_path())
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(self.created_ms, |d| d.as_millis() as i64)
    }

    pub fn delete_files(&self) -> io::Result<()> {
        *self.map.borrow_mut() = None;
        for ext in ["log", "index", "timeindex", "txnindex"] {
            match std::fs::remove_file(self.path(ext)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

fn copy_prefix(src: &File, dst: &File, len: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < len {
        let n = ((len - at) as usize).min(buf.len());
        src.read_exact_at(&mut buf[..n], at)?;
        dst.write_all_at(&buf[..n], at)?;
        at += n as u64;
    }
    Ok(())
}
