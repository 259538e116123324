//! Strom's storage: Kafka-format partition logs on one shard.
//!
//! Data flow:
//! - **Append** ([`PartitionLog::append`]): the broker hands over validated magic-v2
//!   batches; the log assigns offsets at call time (rewriting only base offset and
//!   partition leader epoch, which the CRC does not cover), rolls the segment if needed,
//!   updates the sparse indexes, and queues the bytes on the shard's [`IoBackend`]
//!   (io_uring, or pwrite). The returned future resolves once the bytes are written, and
//!   for [`Durability::Fsync`] once an fdatasync covering them finished. Group commit:
//!   while one fdatasync runs, later appends queue up and share the next one.
//! - **Read** ([`PartitionLog::read`]): segment by binary search, offset index lookup,
//!   header scan, then `Bytes` slices straight over an mmap of the segment: no copy. The
//!   slices stay valid however the log changes later (see `segment.rs`).
//! - **Recovery** ([`PartitionLog::open`]): segments wholly below the recovery point are
//!   trusted (their indexes are sanity checked); from the recovery point on, every batch is
//!   validated (framing + CRC-32C), a torn/corrupt tail is truncated and indexes rebuilt.
//!   When the recovery point is the log end (clean shutdown) only the bytes after the last
//!   index entry of the last segment are read, so open time does not grow with log size.
//!
//! On-disk formats are Apache Kafka's (segments, indexes, checkpoints, meta.properties,
//! partition.metadata, producer snapshots), so a Kafka log dir opens here and back.

pub mod batch;
pub mod cleaner;
pub mod index;
pub mod io;
mod leader_epoch;
mod log;
pub mod logdir;
pub mod producer_snapshot;
pub mod retention;
mod segment;
pub mod txn_index;

use std::path::{Path, PathBuf};

pub use bytes::Bytes;
pub use io::{IoBackend, IoBackendKind};
pub use leader_epoch::{UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
pub use log::PartitionLog;
pub use retention::{RetentionOutcome, RetentionPolicy, RetentionReason};
pub use segment::SegmentProbe;

/// Per-topic log config (Kafka names in comments). Changes need a reopen of the log.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// segment.bytes: roll when the active segment would exceed this. Default 1 GiB.
    pub segment_bytes: u64,
    /// segment.ms: roll when the active segment's first batch is older. Default 7 days.
    pub segment_ms: u64,
    /// segment.index.bytes: index file size; roll when full. Default 10 MiB.
    pub segment_index_bytes: u64,
    /// index.interval.bytes: bytes between offset index entries. Default 4096.
    pub index_interval_bytes: u64,
    /// flush.messages: fdatasync after this many unflushed messages (offsets).
    /// Default i64::MAX (never; rely on durable appends and the OS).
    pub flush_messages: u64,
    /// flush.ms: fdatasync when the last one is older than this. Default i64::MAX.
    pub flush_ms: u64,
    /// file.delete.delay.ms: how long files of deleted segments stay (renamed `.deleted`)
    /// before they are unlinked. Default 60000. Readers' mmaps would survive an unlink too;
    /// the delay is kept for tools and operators that expect Kafka's behaviour.
    pub file_delete_delay_ms: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            flush_messages: i64::MAX as u64,
            flush_ms: i64::MAX as u64,
            file_delete_delay_ms: 60_000,
        }
    }
}

impl LogConfig {
    /// Bounds that keep the on-disk format readable by Kafka: file positions are 32-bit
    /// signed in Kafka's readers, so neither a segment nor an index may exceed i32::MAX
    /// bytes. Checked by `PartitionLog::open`.
    pub fn validate(&self) -> Result<(), StorageError> {
        let bad = |reason: String| {
            Err(StorageError::Invalid {
                what: "log config",
                reason,
            })
        };
        // 14: Kafka's own lower bound (LegacyRecord.RECORD_OVERHEAD_V0).
        if !(14..=i32::MAX as u64).contains(&self.segment_bytes) {
            return bad(format!(
                "segment.bytes {} not in [14, {}]",
                self.segment_bytes,
                i32::MAX
            ));
        }
        if self.segment_index_bytes > i32::MAX as u64 {
            return bad(format!(
                "segment.index.bytes {} above {}",
                self.segment_index_bytes,
                i32::MAX
            ));
        }
        Ok(())
    }
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

#[derive(thiserror::Error, Debug)]
pub enum StorageError {
    #[error("I/O error on {path}: {source}")]
    Io {
        #[source]
        source: std::io::Error,
        path: PathBuf,
    },
    #[error("offset {offset} out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },
    #[error("corrupt data in {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("invalid record batch: {0}")]
    Batch(#[from] batch::BatchError),
    #[error("data dir {0} is locked by another process")]
    LockHeld(PathBuf),
    #[error("log {path} failed after an I/O error and must be reopened: {reason}")]
    LogFailed { path: PathBuf, reason: String },
    #[error("operation needs all appends completed first ({pending} offsets in flight)")]
    WritesInFlight { pending: i64 },
    #[error(
        "offsets below {end} were truncated (log end now {log_end}) before the append completed"
    )]
    Truncated { end: i64, log_end: i64 },
    #[error("invalid {what}: {reason}")]
    Invalid { what: &'static str, reason: String },
}

impl StorageError {
    pub(crate) fn io(source: std::io::Error, path: impl AsRef<Path>) -> StorageError {
        StorageError::Io {
            source,
            path: path.as_ref().to_path_buf(),
        }
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
