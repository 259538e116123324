//! `.txnindex`: Kafka's aborted-transaction index of one segment.
//!
//! Entries of 34 bytes, big endian, in the order their abort markers were appended
//! (Kafka's `AbortedTxn` / `TransactionIndex`):
//!
//! ```text
//! version: i16 (0) | producer_id: i64 | first_offset: i64 | last_offset: i64 | last_stable_offset: i64
//! ```
//!
//! `first_offset` is the aborted transaction's first offset in the partition,
//! `last_offset` the offset of its abort marker (in this segment), `last_stable_offset`
//! the partition's LSO once the abort completed. A `read_committed` fetch from `offset`
//! up to `upper` needs every aborted transaction that overlaps `[offset, upper)`; a
//! segment's search is complete once an entry's LSO reaches `upper`, since no later
//! segment can hold an earlier-starting transaction then.
//!
//! As in Kafka, the file is created on the first entry only, entries are written through
//! (`pwrite`) and not fsynced on their own: the transactions code rebuilds the entries
//! above the recovery point from control batches at open, as Kafka's recovery does. Entries
//! below it must be durable before the recovery point passes them (the broker fsyncs the
//! files `take_dirty` names before it checkpoints; `PartitionLog::close` syncs them).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Size of one entry on disk.
pub const ENTRY_SIZE: usize = 34;
const VERSION: i16 = 0;

/// One aborted transaction, as Kafka's `AbortedTxn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    pub fn encode(&self) -> [u8; ENTRY_SIZE] {
        let mut e = [0u8; ENTRY_SIZE];
        e[0..2].copy_from_slice(&VERSION.to_be_bytes());
        e[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        e[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        e[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        e[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        e
    }

    /// None for an unknown version (Kafka refuses those too).
    pub fn decode(e: &[u8]) -> Option<AbortedTxn> {
        let e: &[u8; ENTRY_SIZE] = e.get(..ENTRY_SIZE)?.try_into().ok()?;
        let i64_at = |at: usize| i64::from_be_bytes(e[at..at + 8].try_into().expect("8 bytes"));
        if i16::from_be_bytes([e[0], e[1]]) != VERSION {
            return None;
        }
        Some(AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

/// The aborted-transaction index of one segment.
pub struct TxnIndex {
    path: PathBuf,
    file: Option<File>,
    entries: Vec<AbortedTxn>,
    /// Entries were written since the file was last synced (or `take_dirty` last asked).
    dirty: bool,
}

impl TxnIndex {
    /// Loads the entries of `path` if it exists (without creating it). A trailing
    /// partial entry (a torn write) or an entry of unknown version ends the index; the
    /// file is cut back to the entries kept, so later appends line up.
    pub fn open(path: &Path) -> io::Result<TxnIndex> {
        let mut idx = TxnIndex {
            path: path.to_path_buf(),
            file: None,
            entries: Vec::new(),
            dirty: false,
        };
        let file = match OpenOptions::new().read(true).write(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(idx),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        // The file's real length bounds the read; nothing is sized by its contents.
        let mut raw = vec![0u8; len as usize];
        file.read_exact_at(&mut raw, 0)?;
        let mut last = i64::MIN;
        for e in raw.chunks_exact(ENTRY_SIZE) {
            match AbortedTxn::decode(e) {
                Some(t) if t.last_offset > last && t.first_offset <= t.last_offset => {
                    last = t.last_offset;
                    idx.entries.push(t);
                }
                _ => {
                    tracing::warn!(file = %path.display(), "ignoring bad .txnindex entry and all after it");
                    break;
                }
            }
        }
        let keep = (idx.entries.len() * ENTRY_SIZE) as u64;
        if keep != len {
            file.set_len(keep)?;
            idx.dirty = true;
        }
        idx.file = Some(file);
        Ok(idx)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// fdatasync of the file, if there is one.
    pub fn sync(&self) -> io::Result<()> {
        match &self.file {
            Some(f) => f.sync_data(),
            None => Ok(()),
        }
    }

    /// Whether entries were written since the last call, and clears that: the caller takes
    /// on syncing the file.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// Adds an entry. Abort markers are appended in offset order, so `last_offset` must
    /// grow (Kafka's rule); anything else is refused.
    pub fn append(&mut self, txn: AbortedTxn) -> io::Result<()> {
        if let Some(prev) = self.entries.last() {
            if txn.last_offset <= prev.last_offset {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "aborted txn last offset {} not above the previous {}",
                        txn.last_offset, prev.last_offset
                    ),
                ));
            }
        }
        if txn.first_offset > txn.last_offset {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "aborted txn first offset above its last offset",
            ));
        }
        if self.file.is_none() {
            self.file = Some(
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&self.path)?,
            );
        }
        let file = self.file.as_ref().expect("just set");
        file.write_all_at(&txn.encode(), (self.entries.len() * ENTRY_SIZE) as u64)?;
        self.entries.push(txn);
        self.dirty = true;
        Ok(())
    }

    /// Aborted transactions overlapping `[fetch_offset, upper_bound)`, and whether the
    /// search is complete (an entry's LSO reached `upper_bound`: later segments cannot
    /// add any). Kafka's `TransactionIndex.collectAbortedTxns`.
    pub fn collect_aborted(&self, fetch_offset: i64, upper_bound: i64) -> (Vec<AbortedTxn>, bool) {
        let mut out = Vec::new();
        for t in &self.entries {
            if t.last_offset >= fetch_offset && t.first_offset < upper_bound {
                out.push(*t);
            }
            if t.last_stable_offset >= upper_bound {
                return (out, true);
            }
        }
        (out, false)
    }

    /// Drops entries whose abort marker is at or after `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let keep = self.entries.partition_point(|t| t.last_offset < offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        if let Some(f) = &self.file {
            f.set_len((keep * ENTRY_SIZE) as u64)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn given_entries_when_reopened_then_bytes_are_kafkas_and_entries_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("00000000000000000000.txnindex");
        let mut idx = TxnIndex::open(&p).unwrap();
        assert!(!p.exists(), "created on the first entry only");
        idx.append(txn(4, 4, 6, 7)).unwrap();
        idx.append(txn(9, 8, 12, 13)).unwrap();
        let raw = std::fs::read(&p).unwrap();
        assert_eq!(raw.len(), 2 * ENTRY_SIZE);
        assert_eq!(&raw[0..2], &[0, 0]);
        assert_eq!(&raw[2..10], &4i64.to_be_bytes());
        let again = TxnIndex::open(&p).unwrap();
        assert_eq!(again.entries(), &[txn(4, 4, 6, 7), txn(9, 8, 12, 13)]);
    }

    #[test]
    fn given_appends_when_taking_dirty_then_reported_once_until_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TxnIndex::open(&dir.path().join("a.txnindex")).unwrap();
        assert!(!idx.take_dirty(), "nothing written yet");
        idx.append(txn(1, 0, 5, 6)).unwrap();
        assert!(idx.take_dirty());
        assert!(!idx.take_dirty(), "the caller took on the sync");
        assert!(idx.append(txn(2, 3, 5, 6)).is_err());
        assert!(!idx.take_dirty(), "a refused entry writes nothing");
        idx.append(txn(2, 6, 9, 10)).unwrap();
        assert!(idx.take_dirty());
    }

    #[test]
    fn given_marker_offsets_not_increasing_when_appending_then_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TxnIndex::open(&dir.path().join("a.txnindex")).unwrap();
        idx.append(txn(1, 0, 5, 6)).unwrap();
        assert!(idx.append(txn(2, 3, 5, 6)).is_err());
        assert!(idx.append(txn(2, 9, 7, 8)).is_err());
        assert_eq!(idx.entries().len(), 1);
    }

    #[test]
    fn given_range_when_collecting_then_overlapping_txns_and_completion_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TxnIndex::open(&dir.path().join("a.txnindex")).unwrap();
        idx.append(txn(1, 0, 3, 4)).unwrap();
        idx.append(txn(2, 5, 9, 10)).unwrap();
        idx.append(txn(3, 11, 20, 21)).unwrap();
        assert_eq!(idx.collect_aborted(4, 11), (vec![txn(2, 5, 9, 10)], true));
        assert_eq!(
            idx.collect_aborted(0, 100),
            (
                vec![txn(1, 0, 3, 4), txn(2, 5, 9, 10), txn(3, 11, 20, 21)],
                false
            )
        );
        assert_eq!(idx.collect_aborted(21, 30), (vec![], false));
    }

    #[test]
    fn given_truncation_when_reopened_then_later_entries_gone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txnindex");
        let mut idx = TxnIndex::open(&p).unwrap();
        idx.append(txn(1, 0, 3, 4)).unwrap();
        idx.append(txn(2, 5, 9, 10)).unwrap();
        idx.truncate_to(9).unwrap();
        assert_eq!(TxnIndex::open(&p).unwrap().entries(), &[txn(1, 0, 3, 4)]);
    }

    #[test]
    fn given_torn_or_bad_version_entry_when_opening_then_index_ends_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txnindex");
        let mut raw = txn(1, 0, 3, 4).encode().to_vec();
        let mut bad = txn(2, 5, 9, 10).encode();
        bad[1] = 7;
        raw.extend_from_slice(&bad);
        raw.extend_from_slice(&[0u8; 10]);
        std::fs::write(&p, &raw).unwrap();
        let mut idx = TxnIndex::open(&p).unwrap();
        assert_eq!(idx.entries(), &[txn(1, 0, 3, 4)]);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), ENTRY_SIZE as u64);
        idx.append(txn(2, 5, 9, 10)).unwrap();
        assert_eq!(TxnIndex::open(&p).unwrap().entries().len(), 2);
    }
}
