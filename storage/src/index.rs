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
//! when the segment is rolled or closed. Entries are kept in memory too (indexes are
//! small next to their segments) and written through with `pwrite`: an index is never
//! fsynced because recovery can rebuild it from the log.

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
    fn open(path: &Path, entry_size: usize, max_bytes: u64) -> io::Result<(IndexFile, Vec<u8>)> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let max_entries = ((max_bytes as usize) / entry_size).max(1);
        // Never more than a full index (plus the roll entry): a huge or garbage file must
        // not turn into a huge allocation. Entries past that are dropped, and an index
        // that then disagrees with its log is rebuilt by recovery.
        let cap = (max_entries + 1) * entry_size;
        let len = (file.metadata()?.len() as usize).min(cap);
        let mut raw = vec![0u8; len];
        file.read_exact_at(&mut raw, 0)?;
        Ok((
            IndexFile {
                path: path.to_path_buf(),
                file,
                entry_size,
                max_entries,
                preallocated: false,
            },
            raw,
        ))
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

/// Offset index of one segment.
pub struct OffsetIndex {
    base_offset: i64,
    entries: Vec<(u32, u32)>,
    f: IndexFile,
}

impl OffsetIndex {
    /// Opens (or creates empty) and loads the longest valid prefix of entries: strictly
    /// increasing offsets and positions. A preallocated file left by a crash has zero
    /// entries after the real ones, which end the prefix.
    pub fn open(path: &Path, base_offset: i64, max_bytes: u64) -> io::Result<OffsetIndex> {
        let (f, raw) = IndexFile::open(path, OFFSET_ENTRY, max_bytes)?;
        let mut entries: Vec<(u32, u32)> = Vec::new();
        for e in raw.chunks_exact(OFFSET_ENTRY) {
            let rel = u32::from_be_bytes(e[0..4].try_into().expect("4"));
            let pos = u32::from_be_bytes(e[4..8].try_into().expect("4"));
            // Kafka reads relative offsets as signed ints: a negative one is garbage.
            if rel > i32::MAX as u32 {
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
        Ok(OffsetIndex {
            base_offset,
            entries,
            f,
        })
    }

    pub fn path(&self) -> &Path {
        &self.f.path
    }
    pub fn entries(&self) -> &[(u32, u32)] {
        &self.entries
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.f.max_entries
    }
    pub fn last(&self) -> Option<(i64, u32)> {
        self.entries
            .last()
            .map(|&(r, p)| (self.base_offset + r as i64, p))
    }

    /// Adds an entry if it moves forward; Kafka rejects anything else.
    pub fn append(&mut self, offset: i64, pos: u32) -> io::Result<()> {
        let rel = relative(offset, self.base_offset)?;
        if let Some(&(lr, lp)) = self.entries.last() {
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
        self.f.write_entry(self.entries.len(), &e)?;
        self.entries.push((rel, pos));
        Ok(())
    }

    /// Largest entry with offset <= target, else the segment start.
    pub fn lookup(&self, target: i64) -> (i64, u32) {
        let rel = target - self.base_offset;
        let i = self.entries.partition_point(|&(r, _)| (r as i64) <= rel);
        if i == 0 {
            (self.base_offset, 0)
        } else {
            let (r, p) = self.entries[i - 1];
            (self.base_offset + r as i64, p)
        }
    }

    /// Drops entries for offsets >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let rel = offset - self.base_offset;
        let keep = self.entries.partition_point(|&(r, _)| (r as i64) < rel);
        self.entries.truncate(keep);
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
        self.entries = entries;
        Ok(())
    }

    pub fn set_preallocated(&mut self, on: bool) -> io::Result<()> {
        self.f.set_entries(self.entries.len(), on)
    }
}

/// Time index of one segment.
pub struct TimeIndex {
    base_offset: i64,
    entries: Vec<(i64, u32)>,
    f: IndexFile,
}

impl TimeIndex {
    /// Loads the longest valid prefix: strictly increasing timestamps, non-decreasing
    /// offsets; an all-zero entry (preallocation) ends it.
    pub fn open(path: &Path, base_offset: i64, max_bytes: u64) -> io::Result<TimeIndex> {
        let (f, raw) = IndexFile::open(path, TIME_ENTRY, max_bytes)?;
        let mut entries: Vec<(i64, u32)> = Vec::new();
        for e in raw.chunks_exact(TIME_ENTRY) {
            let ts = i64::from_be_bytes(e[0..8].try_into().expect("8"));
            let rel = u32::from_be_bytes(e[8..12].try_into().expect("4"));
            if (ts == 0 && rel == 0) || rel > i32::MAX as u32 {
                break;
            }
            if let Some(&(lt, lr)) = entries.last() {
                if ts <= lt || rel < lr {
                    break;
                }
            }
            entries.push((ts, rel));
        }
        Ok(TimeIndex {
            base_offset,
            entries,
            f,
        })
    }

    pub fn path(&self) -> &Path {
        &self.f.path
    }
    pub fn entries(&self) -> &[(i64, u32)] {
        &self.entries
    }
    /// Full one entry early, as Kafka's `TimeIndex.isFull`: the last slot is kept for
    /// the entry written when the segment is rolled.
    pub fn is_full(&self) -> bool {
        self.entries.len() + 1 >= self.f.max_entries
    }
    pub fn last(&self) -> Option<(i64, i64)> {
        self.entries
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
        if let Some(&(lt, lr)) = self.entries.last() {
            if ts <= lt || rel < lr {
                return Ok(());
            }
        }
        if !skip_full_check && self.is_full() {
            return Ok(());
        }
        if self.entries.len() >= self.f.max_entries && self.f.preallocated {
            // Keep the file one entry longer than the preallocation rather than fail.
            self.f.preallocated = false;
        }
        let mut e = [0u8; TIME_ENTRY];
        e[0..8].copy_from_slice(&ts.to_be_bytes());
        e[8..12].copy_from_slice(&rel.to_be_bytes());
        self.f.write_entry(self.entries.len(), &e)?;
        self.entries.push((ts, rel));
        Ok(())
    }

    /// Largest entry with timestamp <= ts, else (-1, segment base).
    pub fn lookup(&self, ts: i64) -> (i64, i64) {
        let i = self.entries.partition_point(|&(t, _)| t <= ts);
        if i == 0 {
            (-1, self.base_offset)
        } else {
            let (t, r) = self.entries[i - 1];
            (t, self.base_offset + r as i64)
        }
    }

    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let rel = offset - self.base_offset;
        let keep = self.entries.partition_point(|&(_, r)| (r as i64) < rel);
        self.entries.truncate(keep);
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
        self.entries = entries;
        Ok(())
    }

    pub fn set_preallocated(&mut self, on: bool) -> io::Result<()> {
        self.f.set_entries(self.entries.len(), on)
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
