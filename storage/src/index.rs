//! Kafka's sparse segment indexes: one lazily loaded file type, [`LazyIndex`], over two
//! entry kinds.
//!
//! - `.index` ([`OffsetIndex`], entries [`OffsetEntry`]): 8 bytes, `(relative offset: i32
//!   BE, >= 0, file position: u32 BE)`. An entry `(o, p)` means "the batch whose *last*
//!   offset is `base + o` starts at byte `p`"; one is added once more than
//!   `index.interval.bytes` were appended since the previous one.
//! - `.timeindex` ([`TimeIndex`], entries [`TimeEntry`]): 12 bytes, `(timestamp: i64 BE,
//!   relative offset: i32 BE)`: the largest batch max-timestamp so far and the last offset
//!   of the batch that has it, appended next to offset-index entries when the timestamp
//!   grew.
//!
//! What differs between the two is the entry: its encoding, the order entries must keep
//! and the key a lookup searches by ([`IndexEntry`]). Everything else is shared: the file,
//! preallocation, laziness, truncation and rebuild.
//!
//! As Kafka does, the active segment's index files are preallocated to
//! `segment.index.bytes` (rounded down to whole entries) and trimmed to their entries
//! when the segment is rolled or closed. Entries are written through with `pwrite` (an
//! index is never fsynced: recovery can rebuild it from the log) and kept in memory once
//! loaded.
//!
//! Loading is lazy, as Kafka's `LazyIndex`: opening an index reads nothing, so opening a
//! log after a clean shutdown costs the same whatever its size. The entries are read on
//! first use and can be dropped again (`unload`) for a closed segment, whose file always
//! holds every entry, so a log keeps only its recently used indexes in memory.

use std::cell::{Cell, OnceCell};
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// `offset - base` as the index stores it: a non-negative 32-bit value (signed in
/// Kafka's reader), else the offset does not belong in this segment.
fn relative(offset: i64, base: i64) -> io::Result<u32> {
    match offset.checked_sub(base) {
        Some(r) if (0..=i32::MAX as i64).contains(&r) => Ok(r as u32),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("offset {offset} out of the index range of segment {base}"),
        )),
    }
}

/// Limits a lazily loaded index must respect: entries beyond them are garbage (the index
/// ends there). Set from the segment's size and the next segment's base, both known
/// without reading anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Relative offsets must be below this.
    pub max_rel: u64,
    /// File positions must be below this (offset index only).
    pub max_pos: u64,
}

impl Bounds {
    pub const NONE: Bounds = Bounds {
        max_rel: u64::MAX,
        max_pos: u64::MAX,
    };
}

/// One fixed-width entry of an index file: what a [`LazyIndex`] is parameterised by.
pub trait IndexEntry: Copy + PartialEq + Debug {
    /// Bytes per entry on disk.
    const SIZE: usize;
    /// `raw` is exactly `SIZE` bytes.
    fn decode(raw: &[u8]) -> Self;
    /// `out` is exactly `SIZE` bytes.
    fn encode(&self, out: &mut [u8]);
    /// Offset relative to the segment base: what truncation cuts by.
    fn relative_offset(&self) -> u32;
    /// What lookups search by (entries are sorted by it).
    fn key(&self) -> i64;
    /// Whether `self` may come after `prev`: the order Kafka keeps when appending. An
    /// entry that breaks it is skipped when appended and ends the index when loaded.
    fn follows(&self, prev: &Self) -> bool;
    /// Whether `self`, read from a file, can be a real entry (`first`: the first one);
    /// the first that cannot ends the index, as preallocated zeros after a crash do.
    fn plausible(&self, first: bool, bounds: Bounds) -> bool;
}

/// An `.index` entry: the batch whose last offset is `base + rel` starts at byte `pos`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetEntry {
    pub rel: u32,
    pub pos: u32,
}

impl IndexEntry for OffsetEntry {
    const SIZE: usize = 8;

    fn decode(raw: &[u8]) -> Self {
        OffsetEntry {
            rel: u32::from_be_bytes(raw[0..4].try_into().expect("4")),
            pos: u32::from_be_bytes(raw[4..8].try_into().expect("4")),
        }
    }
    fn encode(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.rel.to_be_bytes());
        out[4..8].copy_from_slice(&self.pos.to_be_bytes());
    }
    fn relative_offset(&self) -> u32 {
        self.rel
    }
    fn key(&self) -> i64 {
        self.rel as i64
    }
    fn follows(&self, prev: &Self) -> bool {
        self.rel > prev.rel && self.pos > prev.pos
    }
    fn plausible(&self, first: bool, b: Bounds) -> bool {
        // Kafka reads relative offsets as signed ints: a negative one is garbage; and it
        // never indexes the first batch of a segment (position 0).
        self.rel <= i32::MAX as u32
            && (self.rel as u64) < b.max_rel
            && (self.pos as u64) < b.max_pos
            && !(first && self.pos == 0)
    }
}

/// A `.timeindex` entry: the largest timestamp so far, `ts`, is that of the batch whose
/// last offset is `base + rel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeEntry {
    pub ts: i64,
    pub rel: u32,
}

impl IndexEntry for TimeEntry {
    const SIZE: usize = 12;

    fn decode(raw: &[u8]) -> Self {
        TimeEntry {
            ts: i64::from_be_bytes(raw[0..8].try_into().expect("8")),
            rel: u32::from_be_bytes(raw[8..12].try_into().expect("4")),
        }
    }
    fn encode(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.ts.to_be_bytes());
        out[8..12].copy_from_slice(&self.rel.to_be_bytes());
    }
    fn relative_offset(&self) -> u32 {
        self.rel
    }
    fn key(&self) -> i64 {
        self.ts
    }
    fn follows(&self, prev: &Self) -> bool {
        self.ts > prev.ts && self.rel >= prev.rel
    }
    fn plausible(&self, _first: bool, b: Bounds) -> bool {
        // An all-zero entry is preallocation, never a real one.
        !(self.ts == 0 && self.rel == 0)
            && self.rel <= i32::MAX as u32
            && (self.rel as u64) < b.max_rel
    }
}

/// Offset index of one segment.
pub type OffsetIndex = LazyIndex<OffsetEntry>;
/// Time index of one segment.
pub type TimeIndex = LazyIndex<TimeEntry>;

/// One index file of a segment, its entries read on first use.
pub struct LazyIndex<E: IndexEntry> {
    base_offset: i64,
    path: PathBuf,
    file: File,
    max_entries: usize,
    /// The file is extended past its entries (the active segment's); its length then
    /// says nothing about how many entries there are.
    preallocated: bool,
    entries: OnceCell<Vec<E>>,
    bounds: Cell<Bounds>,
    loads: Cell<u64>,
}

impl<E: IndexEntry> LazyIndex<E> {
    /// Opens (or creates empty) without reading it; entries are loaded on first use.
    pub fn open(path: &Path, base_offset: i64, max_bytes: u64) -> io::Result<LazyIndex<E>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        Ok(LazyIndex {
            base_offset,
            path: path.to_path_buf(),
            file,
            max_entries: ((max_bytes as usize) / E::SIZE).max(1),
            preallocated: false,
            entries: OnceCell::new(),
            bounds: Cell::new(Bounds::NONE),
            loads: Cell::new(0),
        })
    }

    /// Entries outside `bounds` are ignored when the index is loaded.
    pub fn set_bounds(&self, bounds: Bounds) {
        self.bounds.set(bounds);
    }

    /// fdatasync of the file (only the cleaner's output is synced: see the module doc).
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// The longest valid prefix of the file's entries: each plausible and following the
    /// one before.
    fn load(&self) -> Vec<E> {
        self.loads.set(self.loads.get() + 1);
        let raw = self.read_raw();
        let bounds = self.bounds.get();
        let mut entries: Vec<E> = Vec::new();
        for chunk in raw.chunks_exact(E::SIZE) {
            let e = E::decode(chunk);
            let fits = match entries.last() {
                Some(prev) => e.follows(prev),
                None => true,
            };
            if !fits || !e.plausible(entries.is_empty(), bounds) {
                break;
            }
            entries.push(e);
        }
        self.trim_after_load(entries.len());
        entries
    }

    /// The file's bytes. Never more than a full index (plus the roll entry): a huge or
    /// garbage file must not turn into a huge allocation. Entries past that are dropped,
    /// and an index that then disagrees with its log is rebuilt by recovery. An unreadable
    /// file reads as empty: an index only saves scanning, lookups stay correct without it.
    fn read_raw(&self) -> Vec<u8> {
        let cap = (self.max_entries + 1) * E::SIZE;
        let r = self.file.metadata().and_then(|m| {
            let mut raw = vec![0u8; (m.len() as usize).min(cap)];
            self.file.read_exact_at(&mut raw, 0)?;
            Ok(raw)
        });
        r.unwrap_or_else(|e| {
            tracing::warn!(file = %self.path.display(), error = %e, "index unreadable; ignoring it");
            Vec::new()
        })
    }

    /// A closed segment's file is trimmed to its entries (it may still be preallocated
    /// after a crash); done at load because trimming needs to know the entries.
    fn trim_after_load(&self, entries: usize) {
        if self.preallocated {
            return;
        }
        let want = (entries * E::SIZE) as u64;
        if self.file.metadata().is_ok_and(|m| m.len() != want) {
            if let Err(e) = self.file.set_len(want) {
                tracing::warn!(file = %self.path.display(), error = %e, "cannot trim index");
            }
        }
    }

    fn loaded(&self) -> &Vec<E> {
        self.entries.get_or_init(|| self.load())
    }

    fn loaded_mut(&mut self) -> &mut Vec<E> {
        self.loaded();
        self.entries.get_mut().expect("loaded above")
    }

    /// How many times the file was read (a probe for tests and metrics).
    pub fn loads(&self) -> u64 {
        self.loads.get()
    }
    pub fn is_loaded(&self) -> bool {
        self.entries.get().is_some()
    }
    /// Drops the in-memory entries of a closed segment's index; the next use reads the
    /// file again. The active one keeps them: its file is preallocated, not authoritative.
    pub fn unload(&mut self) {
        if !self.preallocated {
            self.entries.take();
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn entries(&self) -> &[E] {
        self.loaded()
    }
    pub fn len(&self) -> usize {
        self.loaded().len()
    }
    pub fn is_empty(&self) -> bool {
        self.loaded().is_empty()
    }
    /// Entries the preallocated file holds.
    pub fn capacity(&self) -> usize {
        self.max_entries
    }
    pub fn last_entry(&self) -> Option<E> {
        self.loaded().last().copied()
    }

    /// The last entry whose key is <= `key`.
    pub fn floor(&self, key: i64) -> Option<E> {
        let entries = self.loaded();
        let i = entries.partition_point(|e| e.key() <= key);
        i.checked_sub(1).map(|i| entries[i])
    }

    /// Appends `e` if it follows the last entry (else skips it, as Kafka does; Ok(false)).
    /// An entry beyond the preallocated size (the time index's roll entry) makes the file
    /// one entry longer than the preallocation rather than fail.
    pub fn push(&mut self, e: E) -> io::Result<bool> {
        if self.loaded().last().is_some_and(|prev| !e.follows(prev)) {
            return Ok(false);
        }
        let n = self.loaded().len();
        if n >= self.max_entries && self.preallocated {
            self.preallocated = false;
        }
        let mut raw = [0u8; 16];
        let raw = &mut raw[..E::SIZE];
        e.encode(raw);
        self.file.write_all_at(raw, (n * E::SIZE) as u64)?;
        self.loaded_mut().push(e);
        Ok(true)
    }

    /// Drops entries for offsets >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let rel = offset - self.base_offset;
        let entries = self.loaded_mut();
        let keep = entries.partition_point(|e| (e.relative_offset() as i64) < rel);
        entries.truncate(keep);
        let pre = self.preallocated;
        self.set_entries(keep, pre)
    }

    /// Replaces all entries (after a rebuild by recovery).
    pub fn rebuild(&mut self, entries: Vec<E>, preallocate: bool) -> io::Result<()> {
        let mut raw = vec![0u8; entries.len() * E::SIZE];
        for (e, out) in entries.iter().zip(raw.chunks_exact_mut(E::SIZE)) {
            e.encode(out);
        }
        self.file.set_len(0)?;
        self.file.write_all_at(&raw, 0)?;
        self.set_entries(entries.len(), preallocate)?;
        self.entries = OnceCell::from(entries);
        Ok(())
    }

    /// Kafka keeps the active segment's index preallocated and trims it otherwise. Not
    /// loaded and turned off: a closed segment's index is trimmed when it is loaded, not
    /// now, so that opening a log reads no index.
    pub fn set_preallocated(&mut self, on: bool) -> io::Result<()> {
        match self.entries.get() {
            Some(e) => {
                let n = e.len();
                self.set_entries(n, on)
            }
            None if on => {
                let n = self.len();
                self.set_entries(n, on)
            }
            None => {
                self.preallocated = false;
                Ok(())
            }
        }
    }

    /// Sets the file to exactly `entries` entries and, for the active segment, extends it
    /// back to the preallocated size. The extension reads as zeros, so stale entries past
    /// a truncation can never be mistaken for real ones after a crash.
    fn set_entries(&mut self, entries: usize, preallocate: bool) -> io::Result<()> {
        self.file.set_len((entries * E::SIZE) as u64)?;
        if preallocate {
            self.file.set_len((self.max_entries * E::SIZE) as u64)?;
        }
        self.preallocated = preallocate;
        Ok(())
    }
}

/// The offset index's own rules: Kafka's `OffsetIndex`.
impl LazyIndex<OffsetEntry> {
    pub fn is_full(&self) -> bool {
        self.len() >= self.max_entries
    }

    /// (offset, position) of the last entry.
    pub fn last(&self) -> Option<(i64, u32)> {
        self.last_entry()
            .map(|e| (self.base_offset + e.rel as i64, e.pos))
    }

    /// Adds an entry if it moves forward and the index is not full; Kafka rejects
    /// anything else.
    pub fn append(&mut self, offset: i64, pos: u32) -> io::Result<()> {
        let rel = relative(offset, self.base_offset)?;
        let e = OffsetEntry { rel, pos };
        if self.last_entry().is_some_and(|prev| !e.follows(&prev)) || self.is_full() {
            return Ok(());
        }
        self.push(e).map(|_| ())
    }

    /// Largest entry with offset <= target, as (offset, position), else the segment start.
    pub fn lookup(&self, target: i64) -> (i64, u32) {
        match self.floor(target - self.base_offset) {
            Some(e) => (self.base_offset + e.rel as i64, e.pos),
            None => (self.base_offset, 0),
        }
    }
}

/// The time index's own rules: Kafka's `TimeIndex`.
impl LazyIndex<TimeEntry> {
    /// Full one entry early, as Kafka's `TimeIndex.isFull`: the last slot is kept for
    /// the entry written when the segment is rolled.
    pub fn is_full(&self) -> bool {
        self.len() + 1 >= self.max_entries
    }

    /// (timestamp, offset) of the last entry.
    pub fn last(&self) -> Option<(i64, i64)> {
        self.last_entry()
            .map(|e| (e.ts, self.base_offset + e.rel as i64))
    }

    /// Appends `(ts, offset)` only if `ts` is set and larger than the last entry's, as
    /// Kafka does. `skip_full_check` is used for the final entry at roll/close.
    pub fn maybe_append(&mut self, ts: i64, offset: i64, skip_full_check: bool) -> io::Result<()> {
        if ts < 0 {
            return Ok(());
        }
        let e = TimeEntry {
            ts,
            rel: relative(offset, self.base_offset)?,
        };
        if self.last_entry().is_some_and(|prev| !e.follows(&prev)) {
            return Ok(());
        }
        if !skip_full_check && self.is_full() {
            return Ok(());
        }
        self.push(e).map(|_| ())
    }

    /// Largest entry with timestamp <= ts, as (timestamp, offset), else (-1, segment base).
    pub fn lookup(&self, ts: i64) -> (i64, i64) {
        match self.floor(ts) {
            Some(e) => (e.ts, self.base_offset + e.rel as i64),
            None => (-1, self.base_offset),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn off(rel: u32, pos: u32) -> OffsetEntry {
        OffsetEntry { rel, pos }
    }

    #[test]
    fn given_entries_when_looking_up_then_returns_largest_entry_not_above_target() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = OffsetIndex::open(&dir.path().join("a.index"), 100, 1024).unwrap();
        idx.append(110, 4000).unwrap();
        idx.append(120, 8000).unwrap();
        assert_eq!(idx.lookup(99), (100, 0));
        assert_eq!(idx.lookup(109), (100, 0));
        assert_eq!(idx.lookup(110), (110, 4000));
        assert_eq!(idx.lookup(119), (110, 4000));
        assert_eq!(idx.lookup(500), (120, 8000));
    }

    #[test]
    fn given_preallocated_index_when_reopened_then_zero_tail_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.index");
        {
            let mut idx = OffsetIndex::open(&p, 0, 800).unwrap();
            idx.set_preallocated(true).unwrap();
            idx.append(5, 4100).unwrap();
            idx.append(9, 8200).unwrap();
        }
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 800);
        let idx = OffsetIndex::open(&p, 0, 800).unwrap();
        assert_eq!(idx.entries(), &[off(5, 4100), off(9, 8200)]);
    }

    #[test]
    fn given_truncation_when_reopened_then_stale_entries_gone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.timeindex");
        {
            let mut ti = TimeIndex::open(&p, 0, 1200).unwrap();
            ti.set_preallocated(true).unwrap();
            ti.maybe_append(10, 1, false).unwrap();
            ti.maybe_append(20, 5, false).unwrap();
            ti.maybe_append(15, 6, false).unwrap(); // not larger: skipped
            assert_eq!(ti.entries().len(), 2);
            ti.truncate_to(5).unwrap();
        }
        let ti = TimeIndex::open(&p, 0, 1200).unwrap();
        assert_eq!(ti.entries(), &[TimeEntry { ts: 10, rel: 1 }]);
        assert_eq!(ti.lookup(9), (-1, 0));
        assert_eq!(ti.lookup(12), (10, 1));
    }

    #[test]
    fn given_bounds_when_loading_then_entries_past_them_end_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.index");
        {
            let mut idx = OffsetIndex::open(&p, 0, 800).unwrap();
            for (o, pos) in [(5, 100), (9, 200), (20, 300)] {
                idx.append(o, pos).unwrap();
            }
        }
        let idx = OffsetIndex::open(&p, 0, 800).unwrap();
        idx.set_bounds(Bounds {
            max_rel: 10,
            max_pos: u64::MAX,
        });
        assert_eq!(idx.entries(), &[off(5, 100), off(9, 200)]);
        let idx = OffsetIndex::open(&p, 0, 800).unwrap();
        idx.set_bounds(Bounds {
            max_rel: u64::MAX,
            max_pos: 150,
        });
        assert_eq!(idx.entries(), &[off(5, 100)]);
    }

    #[test]
    fn given_full_time_index_when_rolling_then_last_slot_takes_the_roll_entry() {
        let dir = tempfile::tempdir().unwrap();
        let mut ti = TimeIndex::open(&dir.path().join("a.timeindex"), 0, 36).unwrap();
        ti.set_preallocated(true).unwrap();
        ti.maybe_append(10, 1, false).unwrap();
        ti.maybe_append(20, 2, false).unwrap();
        assert!(ti.is_full());
        ti.maybe_append(30, 3, false).unwrap();
        assert_eq!(ti.len(), 2, "a full index takes no regular entry");
        ti.maybe_append(30, 3, true).unwrap();
        ti.maybe_append(40, 4, true).unwrap();
        assert_eq!(ti.len(), 4, "roll entries go past the preallocation");
        ti.set_preallocated(false).unwrap();
        let again = TimeIndex::open(&dir.path().join("a.timeindex"), 0, 36).unwrap();
        assert_eq!(again.last(), Some((40, 4)));
    }
}
