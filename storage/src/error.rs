//! Storage's error type: what the broker maps to Kafka error codes at its edge.

use std::path::{Path, PathBuf};

use crate::batch;

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

/// Whether `e`, or an error it wraps, is the filesystem out of space (ENOSPC) or the user
/// over quota (EDQUOT): the "disk full" an operator is told about, as opposed to a failing
/// device (EIO) that needs a different fix.
pub fn is_disk_full(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
                || io.kind() == std::io::ErrorKind::StorageFull
            {
                return true;
            }
        }
        next = err.source();
    }
    false
}

impl StorageError {
    pub(crate) fn io(source: std::io::Error, path: impl AsRef<Path>) -> StorageError {
        StorageError::Io {
            source,
            path: path.as_ref().to_path_buf(),
        }
    }
}
