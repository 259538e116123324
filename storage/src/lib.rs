//! Strom's storage: Kafka-format partition logs on one shard.
//!
//! Data flow:
//! - **Append** ([`PartitionLog::append`], `log/append.rs`): the broker hands over
//!   validated magic-v2 batches as the `Bytes` it received; the log assigns offsets at
//!   call time, rolls the segment if needed, updates the sparse indexes, and queues the
//!   bytes on the shard's [`IoBackend`] (io_uring, or pwrite). No copy: the fields it
//!   rewrites (base offset, partition leader epoch) lie in each batch's first 16 bytes,
//!   outside the CRC, so it writes a rewritten 16-byte prefix of its own followed by the
//!   caller's bytes, in one vectored write; only LogAppendTime, whose timestamp is under
//!   the CRC, copies the batch. The returned future resolves once the bytes are written,
//!   and for [`Durability::Fsync`] once an fdatasync covering them finished. Group
//!   commit: while one fdatasync runs, later appends queue up and share the next one.
//! - **Read** ([`PartitionLog::read`], `log/read.rs`): segment by binary search, offset
//!   index lookup, header scan, then `Bytes` slices straight over an mmap of the segment:
//!   no copy. The slices stay valid however the log changes later (see `segment.rs`).
//! - **Recovery** ([`PartitionLog::open`], `log/recovery.rs`): segments wholly below the
//!   recovery point are trusted (their indexes load lazily, `index.rs`); from the recovery
//!   point on, every batch is validated (framing + CRC-32C), a torn/corrupt tail is
//!   truncated and indexes rebuilt. When the recovery point is the log end (clean
//!   shutdown) only the bytes after the last index entry of the last segment are read, so
//!   open time does not grow with log size.
//!
//! Layers, each using only those below it: `log/` (a partition's segments and offsets)
//! over `segment.rs` (one segment's files), `cleaner/` (compaction), `logdir.rs`,
//! `leader_epoch.rs` and `producer_snapshot.rs` (Kafka's side files); under them the
//! formats and mechanisms: `batch.rs`, `index.rs`, `txn_index.rs`, `retention.rs` (rules),
//! `io/` (the backend, its statistics and the bytes it copied: [`IoBackend::copy_stats`]),
//! `config.rs`, `error.rs`, `clock.rs`. This file only names the public face.
//!
//! On-disk formats are Apache Kafka's (segments, indexes, checkpoints, meta.properties,
//! partition.metadata, producer snapshots), so a Kafka log dir opens here and back.

pub mod batch;
pub mod cleaner;
mod clock;
mod config;
mod error;
pub mod expiry;
pub mod index;
pub mod io;
mod leader_epoch;
mod log;
pub mod logdir;
pub mod producer_snapshot;
pub mod remote;
pub mod retention;
mod segment;
pub mod txn_index;

pub use bytes::Bytes;
pub use config::LogConfig;
pub use error::{is_disk_full, StorageError};
pub use io::{IoBackend, IoBackendKind, IoFailure};
pub use leader_epoch::{UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
pub use log::{
    leader_epoch_checkpoint, AppendOptions, AppendResult, ClosedSegment, Durability, PartitionLog,
    ReadResult,
};
pub use retention::{RetentionOutcome, RetentionPolicy, RetentionReason};
pub use segment::SegmentProbe;

/// What the crate's unit-test modules share: a current-thread runtime with a `LocalSet` (a
/// log's futures are `!Send`, as on a shard) and the acks=all append options.
#[cfg(test)]
pub(crate) mod test_support {
    pub fn run<F: std::future::Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f)
    }

    pub fn fsync() -> crate::AppendOptions {
        crate::AppendOptions {
            durability: crate::Durability::Fsync,
            log_append_time_ms: None,
            leader_epoch: 0,
        }
    }
}
