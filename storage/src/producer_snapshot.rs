//! Producer state snapshots in Kafka's `<20-digit offset>.snapshot` format (version 1):
//!
//! ```text
//! version: i16 (1) | crc: u32 (CRC-32C of everything after it) | count: i32 |
//! count x { producer_id i64, producer_epoch i16, last_sequence i32, last_offset i64,
//!           offset_delta i32, timestamp i64, coordinator_epoch i32,
//!           current_txn_first_offset i64 }
//! ```
//! The storage crate only reads and writes the file; what the entries mean is the broker's.

use std::path::{Path, PathBuf};

use crate::error::StorageError;

const VERSION: i16 = 1;
const ENTRY_SIZE: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;
const HEADER_SIZE: usize = 2 + 4 + 4;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerSnapshotEntry {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_sequence: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp: i64,
    pub coordinator_epoch: i32,
    /// -1 when no transaction is ongoing.
    pub current_txn_first_offset: i64,
}

/// `<dir>/<20-digit offset>.snapshot`
pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}.snapshot"))
}

pub fn encode(entries: &[ProducerSnapshotEntry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER_SIZE + entries.len() * ENTRY_SIZE);
    b.extend_from_slice(&VERSION.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&(entries.len() as i32).to_be_bytes());
    for e in entries {
        b.extend_from_slice(&e.producer_id.to_be_bytes());
        b.extend_from_slice(&e.producer_epoch.to_be_bytes());
        b.extend_from_slice(&e.last_sequence.to_be_bytes());
        b.extend_from_slice(&e.last_offset.to_be_bytes());
        b.extend_from_slice(&e.offset_delta.to_be_bytes());
        b.extend_from_slice(&e.timestamp.to_be_bytes());
        b.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        b.extend_from_slice(&e.current_txn_first_offset.to_be_bytes());
    }
    let crc = crc32c::crc32c(&b[6..]);
    b[2..6].copy_from_slice(&crc.to_be_bytes());
    b
}

fn corrupt(path: &Path, why: &str) -> StorageError {
    StorageError::Corrupt {
        path: path.to_path_buf(),
        reason: why.to_string(),
    }
}

pub fn decode(path: &Path, b: &[u8]) -> Result<Vec<ProducerSnapshotEntry>, StorageError> {
    if b.len() < HEADER_SIZE {
        return Err(corrupt(path, "snapshot too short"));
    }
    let version = i16::from_be_bytes([b[0], b[1]]);
    if version != VERSION {
        return Err(corrupt(
            path,
            &format!("unsupported snapshot version {version}"),
        ));
    }
    let crc = u32::from_be_bytes(b[2..6].try_into().expect("4"));
    if crc32c::crc32c(&b[6..]) != crc {
        return Err(corrupt(path, "snapshot CRC mismatch"));
    }
    let count = i32::from_be_bytes(b[6..10].try_into().expect("4"));
    if count < 0 || b.len() != HEADER_SIZE + count as usize * ENTRY_SIZE {
        return Err(corrupt(
            path,
            "snapshot length does not match its entry count",
        ));
    }
    let mut out = Vec::with_capacity(count as usize);
    for e in b[HEADER_SIZE..].chunks_exact(ENTRY_SIZE) {
        let i64_at = |at: usize| i64::from_be_bytes(e[at..at + 8].try_into().expect("8"));
        let i32_at = |at: usize| i32::from_be_bytes(e[at..at + 4].try_into().expect("4"));
        out.push(ProducerSnapshotEntry {
            producer_id: i64_at(0),
            producer_epoch: i16::from_be_bytes([e[8], e[9]]),
            last_sequence: i32_at(10),
            last_offset: i64_at(14),
            offset_delta: i32_at(22),
            timestamp: i64_at(26),
            coordinator_epoch: i32_at(34),
            current_txn_first_offset: i64_at(38),
        });
    }
    Ok(out)
}

/// Writes `<dir>/<offset>.snapshot` atomically.
pub fn write(
    dir: &Path,
    offset: i64,
    entries: &[ProducerSnapshotEntry],
) -> Result<PathBuf, StorageError> {
    let path = snapshot_path(dir, offset);
    crate::logdir::write_atomic(&path, &encode(entries))?;
    Ok(path)
}

/// Writes `<dir>/<offset>.snapshot` through a rename but without fdatasync: for the snapshot
/// taken at a segment roll on the append path, where two fsyncs would stall the shard. After a
/// power loss such a file may be empty or torn; its CRC then fails and the reader falls back
/// to an older snapshot or to the log's batch headers, which is always correct, only slower.
pub fn write_unsynced(
    dir: &Path,
    offset: i64,
    entries: &[ProducerSnapshotEntry],
) -> Result<PathBuf, StorageError> {
    let path = snapshot_path(dir, offset);
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, encode(entries)).map_err(|e| StorageError::io(e, &tmp))?;
    std::fs::rename(&tmp, &path).map_err(|e| StorageError::io(e, &path))?;
    Ok(path)
}

pub fn read(path: &Path) -> Result<Vec<ProducerSnapshotEntry>, StorageError> {
    let b = std::fs::read(path).map_err(|e| StorageError::io(e, path))?;
    decode(path, &b)
}

/// Snapshot offsets present in `dir`, ascending.
pub fn list(dir: &Path) -> Result<Vec<i64>, StorageError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| StorageError::io(e, dir))? {
        let entry = entry.map_err(|e| StorageError::io(e, dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".snapshot") {
            if stem.len() == 20 {
                if let Ok(o) = stem.parse() {
                    out.push(o);
                }
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> ProducerSnapshotEntry {
        ProducerSnapshotEntry {
            producer_id: 1000,
            producer_epoch: 2,
            last_sequence: 41,
            last_offset: 99,
            offset_delta: 4,
            timestamp: 1_700_000_000_000,
            coordinator_epoch: -1,
            current_txn_first_offset: -1,
        }
    }

    #[test]
    fn given_entries_when_written_then_read_back_and_layout_matches_kafka() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), 100, &[entry()]).unwrap();
        assert!(p.ends_with("00000000000000000100.snapshot"));
        let raw = std::fs::read(&p).unwrap();
        assert_eq!(raw.len(), 10 + 46);
        assert_eq!(&raw[0..2], &[0, 1]);
        assert_eq!(&raw[6..10], &[0, 0, 0, 1]);
        assert_eq!(&raw[10..18], &1000i64.to_be_bytes());
        assert_eq!(read(&p).unwrap(), vec![entry()]);
        assert_eq!(list(dir.path()).unwrap(), vec![100]);
    }

    #[test]
    fn given_flipped_byte_when_reading_snapshot_then_corrupt() {
        let mut raw = encode(&[entry()]);
        raw[20] ^= 1;
        assert!(matches!(
            decode(Path::new("x"), &raw),
            Err(StorageError::Corrupt { .. })
        ));
    }
}
