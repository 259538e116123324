//! Kafka's sparse segment indexes.
//!
//! - `.index`: 8-byte entries `(relative offset: i32 BE, >= 0, file position: u32 BE)`. An entry
//!   `(o, p)` means "the batch whose *last* offset is `base + o` starts at byte `p`"; one is
//!   added once more than `index.interval.bytes` were appended since the previous one.
//! - `.timeindex`: 12-byte entries `(timestamp: i64 BE, relative offset: i32 BE)`: the
//!   largest batch max-timestamp so far and the last offset of the batch that has it,
//!   appended next to offset-index entries when the timestamp grew.
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
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub const OFFSET_ENTRY: usize = 8;
pub const TIME_ENTRY: usize = 12;

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

/// Common file handling of both indexes: entries are fixed-width records.
struct IndexFile {
    path: PathBuf,
    file: File,
    entry_size: usize,
    max_entries: usize,
    preallocated: bool,
}

impl IndexFile {
    fn open(path: &Path, entry_size: usize, max_bytes: u64) -> io::Result<IndexFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let max_entries = ((max_bytes as usize) / entry_size).max(1);
        Ok(IndexFile {
            path: path.to_path_buf(),
            file,
            entry_size,
            max_entries,
            preallocated: false,
        })
    }

    /// The file's bytes. Never more than a full index (plus the roll entry): a huge or
    /// garbage file must not turn into a huge allocation. Entries past that are dropped,
    /// and an index that then disagrees with its log is rebuilt by recovery. An unreadable
    /// file reads as empty: an index only saves scanning, lookups stay correct without it.
    fn read_raw(&self) -> Vec<u8> {
        let cap = (self.max_entries + 1) * self.entry_size;
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
        let want = (entries * self.entry_size) as u64;
        if self.file.metadata().is_ok_and(|m| m.len() != want) {
            if let Err(e) = self.file.set_len(want) {
                tracing::warn!(file = %self.path.display(), error = %e, "cannot trim index");
            }
        }
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn write_entry(&self, n: usize, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, (n * self.entry_size) as u64)
    }

    /// Sets the file to exactly `entries` entries and, for the active segment, extends it
    /// back to the preallocated size. The extension reads as zeros, so stale entries past
    /// a truncation can never be mistaken for real ones after a crash.
    fn set_entries(&mut self, entries: usize, preallocate: bool) -> io::Result<()> {
        self.file.set_len((entries * self.entry_size) as u64)?;
        if preallocate {
            self.file
                .set_len((self.max_entries * self.entry_size) as u64)?;
        }
        self.preallocated = preallocate;
        Ok(())
    }

    fn rewrite(&mut self, raw: &[u8], preallocate: bool) -> io::Result<()> {
        self.file.set_len(0)?;
        self.file.write_all_at(raw, 0)?;
        self.set_entries(raw.len() / self.entry_size, preallocate)
    }
}

/// Limits a lazily loaded index must respect: entries beyond them are garbage (the index
/// ends there). Set from the segment's size and the next segment's base, both known
/// without reading anything.
#[derive(Clone, Copy)]
struct Bounds {
    /// Relative offsets must be below this.
    max_rel: u64,
    /// File positions must be below this.
    max_pos: u64,
}

const NO_BOUNDS: Bounds = Bounds {
    max_rel: u64::MAX,
    max_pos: u64::MAX,
};

/// Offset index of one segment.
pub struct OffsetIndex {
    base_offset: i64,
    entries: OnceCell<Vec<(u32, u32)>>,
    f: IndexFile,
    bounds: Cell<Bounds>,
    loads: Cell<u64>,
}

impl OffsetIndex {
    /// fdatasync of the file (only the cleaner's output is synced: see the module doc).
    pub fn sync(&self) -> io::Result<()> {
        self.f.sync()
    }

    /// Opens (or creates empty) without reading it; entries are loaded on first use.
    pub fn open(path: &Path, base_offset: i64, max_bytes: u64) -> io::Result<OffsetIndex> {
        Ok(OffsetIndex {
            base_offset,
            entries: OnceCell::new(),
            f: IndexFile::open(path, OFFSET_ENTRY, max_bytes)?,
            bounds: Cell::new(NO_BOUNDS),
            loads: Cell::new(0),
        })
    }

    /// Entries past `max_rel` / `max_pos` are ignored when the index is loaded.
    pub fn set_bounds(&self, max_rel: u64, max_pos: u64) {
        self.bounds.set(Bounds { max_rel, max_pos });
    }

    /// The longest valid prefix of entries: strictly increasing offsets and positions,
    /// within bounds. A preallocated file left by a crash has zero entries after the real
    /// ones, which end the prefix.
    fn load(&self) -> Vec<(u32, u32)> {
        self.loads.set(self.loads.get() + 1);
        let raw = self.f.read_raw();
        let b = self.bounds.get();
        let mut entries: Vec<(u32, u32)> = Vec::new();
        for e in raw.chunks_exact(OFFSET_ENTRY) {
            let rel = u32::from_be_bytes(e[0..4].try_into().expect("4"));
            let pos = u32::from_be_bytes(e[4..8].try_into().expect("4"));
            // Kafka reads relative offsets as signed ints: a negative one is garbage.
            if rel > i32::MAX as u32 || rel as u64 >= b.max_rel || pos as u64 >= b.max_pos {
                break;
            }
            if let Some(&(lr, lp)) = entries.last() {
                if rel <= lr || pos <= lp {
                    break;
                }
            } else if pos == 0 {
                // Kafka never indexes the first batch of a segment.
                break;
            }
            entries.push((rel, pos));
        }
        self.f.trim_after_load(entries.len());
        entries
    }

    fn loaded(&self) -> &Vec<(u32, u32)> {
        self.entries.get_or_init(|| self.load())
    }

    fn loaded_mut(&mut self) -> &mut Vec<(u32, u32)> {
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
        if !self.f.preallocated {
            self.entries.take();
        }
    }

    pub fn path(&self) -> &Path {
        &self.f.path
    }
    pub fn entries(&self) -> &[(u32, u32)] {
        self.loaded()
    }
    pub fn len(&self) -> usize {
        self.loaded().len()
    }
    pub fn is_empty(&self) -> bool {
        self.loaded().is_empty()
    }
    pub fn is_full(&self) -> bool {
        self.len() >= self.f.max_entries
    }
    pub fn last(&self) -> Option<(i64, u32)> {
        self.loaded()
            .last()
            .map(|&(r, p)| (self.base_offset + r as i64, p))
    }

    /// Adds an entry if it moves forward; Kafka rejects anything else.
    pub fn append(&mut self, offset: i64, pos: u32) -> io::Result<()> {
        let rel = relative(offset, self.base_offset)?;
        if let Some(&(lr, lp)) = self.loaded().last() {
            if rel <= lr || pos <= lp {
                return Ok(());
            }
        }
        if self.is_full() {
            return Ok(());
        }
        let mut e = [0u8; OFFSET_ENTRY];
        e[0..4].copy_from_slice(&rel.to_be_bytes());
        e[4..8].copy_from_slice(&pos.to_be_bytes());
        self.f.write_entry(self.len(), &e)?;
        self.loaded_mut().push((rel, pos));
        Ok(())
    }

    /// Largest entry with offset <= target, else the segment start.
    pub fn lookup(&self, target: i64) -> (i64, u32) {
        let rel = target - self.base_offset;
        let entries = self.loaded();
        let i = entries.partition_point(|&(r, _)| (r as i64) <= rel);
        if i == 0 {
            (self.base_offset, 0)
        } else {
            let (r, p) = entries[i - 1];
            (self.base_offset + r as i64, p)
        }
    }

    /// Drops entries for offsets >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let rel = offset - self.base_offset;
        let entries = self.loaded_mut();
        let keep = entries.partition_point(|&(r, _)| (r as i64) < rel);
        entries.truncate(keep);
        let pre = self.f.preallocated;
        self.f.set_entries(keep, pre)
    }

    /// Replaces all entries (after a rebuild by recovery).
    pub fn rebuild(&mut self, entries: Vec<(u32, u32)>, preallocate: bool) -> io::Result<()> {
        let mut raw = Vec::with_capacity(entries.len() * OFFSET_ENTRY);
        for &(r, p) in &entries {
            raw.extend_from_slice(&r.to_be_bytes());
            raw.extend_from_slice(&p.to_be_bytes());
        }
        self.f.rewrite(&raw, preallocate)?;
        self.entries = OnceCell::from(entries);
        Ok(())
    }

    /// Not loaded: a closed segment's index is trimmed when it is loaded, not now, so
    /// that opening a log reads no index.
    pub fn set_preallocated(&mut self, on: bool) -> io::Result<()> {
        match self.entries.get() {
            Some(e) => {
                let n = e.len();
                self.f.set_entries(n, on)
            }
            None if on => {
                let n = self.len();
                self.f.set_entries(n, on)
            }
            None => {
                self.f.preallocated = false;
                Ok(())
            }
        }
    }
}

/// Time index of one segment.
pub struct TimeIndex {
    base_offset: i64,
    entries: OnceCell<Vec<(i64, u32)>>,
    f: IndexFile,
    bounds: Cell<Bounds>,
    loads: Cell<u64>,
}

impl TimeIndex {
    /// fdatasync of the file (only the cleaner's output is synced: see the module doc).
    pub fn sync(&self) -> io::Result<()> {
        self.f.sync()
    }

    /// Opens (or creates empty) without reading it; entries are loaded on first use.
    pub fn open(path: &Path, base_offset: i64, max_bytes: u64) -> io::Result<TimeIndex> {
        Ok(TimeIndex {
            base_offset,
            entries: OnceCell::new(),
            f: IndexFile::open(path, TIME_ENTRY, max_bytes)?,
            bounds: Cell::new(NO_BOUNDS),
            loads: Cell::new(0),
        })
    }

    /// Entries whose relative offset is `max_rel` or more are ignored when loaded.
    pub fn set_bounds(&self, max_rel: u64) {
        self.bounds.set(Bounds {
            max_rel,
            max_pos: u64::MAX,
        });
    }

    /// The longest valid prefix: strictly increasing timestamps, non-decreasing offsets,
    /// within bounds; an all-zero entry (preallocation) ends it.
    fn load(&self) -> Vec<(i64, u32)> {
        self.loads.set(self.loads.get() + 1);
        let raw = self.f.read_raw();
        let b = self.bounds.get();
        let mut entries: Vec<(i64, u32)> = Vec::new();
        for e in raw.chunks_exact(TIME_ENTRY) {
            let ts = i64::from_be_bytes(e[0..8].try_into().expect("8"));
            let rel = u32::from_be_bytes(e[8..12].try_into().expect("4"));
            if (ts == 0 && rel == 0) || rel > i32::MAX as u32 || rel as u64 >= b.max_rel {
                break;
            }
            if let Some(&(lt, lr)) = entries.last() {
                if ts <= lt || rel < lr {
                    break;
                }
            }
            entries.push((ts, rel));
        }
        self.f.trim_after_load(entries.len());
        entries
    }

    fn loaded(&self) -> &Vec<(i64, u32)> {
        self.entries.get_or_init(|| self.load())
    }

    fn loaded_mut(&mut self) -> &mut Vec<(i64, u32)> {
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
    /// As [`OffsetIndex::unload`].
    pub fn unload(&mut self) {
        if !self.f.preallocated {
            self.entries.take();
        }
    }

    pub fn path(&self) -> &Path {
        &self.f.path
    }
    pub fn entries(&self) -> &[(i64, u32)] {
        self.loaded()
    }
    /// Full one entry early, as Kafka's `TimeIndex.isFull`: the last slot is kept for
    /// the entry written when the segment is rolled.
    pub fn is_full(&self) -> bool {
        self.loaded().len() + 1 >= self.f.max_entries
    }
    pub fn last(&self) -> Option<(i64, i64)> {
        self.loaded()
            .last()
            .map(|&(t, r)| (t, self.base_offset + r as i64))
    }

    /// Appends `(ts, offset)` only if `ts` is larger than the last entry's, as Kafka does.
    /// `skip_full_check` is used for the final entry at roll/close.
    pub fn maybe_append(&mut self, ts: i64, offset: i64, skip_full_check: bool) -> io::Result<()> {
        if ts < 0 {
            return Ok(());
        }
        let rel = relative(offset, self.base_offset)?;
        if let Some(&(lt, lr)) = self.loaded().last() {
            if ts <= lt || rel < lr {
                return Ok(());
            }
        }
        if !skip_full_check && self.is_full() {
            return Ok(());
        }
        let n = self.loaded().len();
        if n >= self.f.max_entries && self.f.preallocated {
            // Keep the file one entry longer than the preallocation rather than fail.
            self.f.preallocated = false;
        }
        let mut e = [0u8; TIME_ENTRY];
        e[0..8].copy_from_slice(&ts.to_be_bytes());
        e[8..12].copy_from_slice(&rel.to_be_bytes());
        self.f.write_entry(n, &e)?;
        self.loaded_mut().push((ts, rel));
        Ok(())
    }

    /// Largest entry with timestamp <= ts, else (-1, segment base).
    pub fn lookup(&self, ts: i64) -> (i64, i64) {
        let entries = self.loaded();
        let i = entries.partition_point(|&(t, _)| t <= ts);
        if i == 0 {
            (-1, self.base_offset)
        } else {
            let (t, r) = entries[i - 1];
            (t, self.base_offset + r as i64)
        }
    }

    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let rel = offset - self.base_offset;
        let entries = self.loaded_mut();
        let keep = entries.partition_point(|&(_, r)| (r as i64) < rel);
        entries.truncate(keep);
        let pre = self.f.preallocated;
        self.f.set_entries(keep, pre)
    }

    pub fn rebuild(&mut self, entries: Vec<(i64, u32)>, preallocate: bool) -> io::Result<()> {
        let mut raw = Vec::with_capacity(entries.len() * TIME_ENTRY);
        for &(t, r) in &entries {
            raw.extend_from_slice(&t.to_be_bytes());
            raw.extend_from_slice(&r.to_be_bytes());
        }
        self.f.rewrite(&raw, preallocate)?;
        self.entries = OnceCell::from(entries);
        Ok(())
    }

    /// As [`OffsetIndex::set_preallocated`].
    pub fn set_preallocated(&mut self, on: bool) -> io::Result<()> {
        match self.entries.get() {
            Some(e) => {
                let n = e.len();
                self.f.set_entries(n, on)
            }
            None if on => {
                let n = self.loaded().len();
                self.f.set_entries(n, on)
            }
            None => {
                self.f.preallocated = false;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(idx.entries(), &[(5, 4100), (9, 8200)]);
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
        assert_eq!(ti.entries(), &[(10, 1)]);
        assert_eq!(ti.lookup(9), (-1, 0));
        assert_eq!(ti.lookup(12), (10, 1));
    }
}
