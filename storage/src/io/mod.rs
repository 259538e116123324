//! The shard's I/O backend: how appended bytes reach a segment file and how they are made
//! durable. One backend per shard, shared (`Rc`) by every log on it.
//!
//! - `Uring`: writes and fdatasyncs are io_uring operations on one ring per shard. The ring
//!   signals completions through an eventfd registered with it; tokio watches the eventfd
//!   with `AsyncFd`, so no thread blocks and no task is spawned: whichever future is waiting
//!   for I/O reaps the completion queue and runs the completion callbacks.
//! - `Sync`: `pwrite`/`pwritev` on the shard thread (it only copies into the page cache) and
//!   `fdatasync` on tokio's blocking pool, so appends keep flowing while a sync is in flight
//!   and group commit still batches them.
//!
//! A write is a list of `Bytes` chunks (`WriteBufs`, `bufs.rs`) written with one vectored
//! write, so the logs write their callers' buffers as they are.
//!
//! Completion is reported through callbacks owned by the backend, not by the future that
//! asked, so a caller that drops its future never leaves the log's bookkeeping stuck and
//! never frees a buffer the kernel is still reading.

mod bufs;
mod stats;
mod uring;
#[cfg(test)]
mod uring_tests;

pub(crate) use bufs::WriteBufs;
pub use stats::{
    Buckets, CopyStatsSnapshot, RingStatsSnapshot, SyncStatsSnapshot, GROUP_COMMIT_BOUNDS,
    QUEUE_DEPTH_BOUNDS, SYNC_LATENCY_BOUNDS_US,
};

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use tokio::sync::Notify;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoBackendKind {
    Auto,
    Uring,
    Sync,
}

impl IoBackendKind {
    /// Reads `STROM_IO_BACKEND` (`sync`, `uring`, `auto`); Auto when unset or unknown.
    /// Lets the whole test suite run on either backend.
    pub fn from_env() -> IoBackendKind {
        match std::env::var("STROM_IO_BACKEND").as_deref() {
            Ok("sync") => IoBackendKind::Sync,
            Ok("uring") => IoBackendKind::Uring,
            _ => IoBackendKind::Auto,
        }
    }
}

pub(crate) type WriteCallback = Box<dyn FnOnce(io::Result<()>)>;

/// An I/O error on a log of this backend's shard, as the logs report it to the listener
/// set with [`IoBackend::on_failure`]: the broker decides there what a failing data dir
/// means for the node (Kafka's `LogDirFailureChannel`), storage only reports.
#[derive(Debug)]
pub struct IoFailure<'a> {
    /// The partition's directory.
    pub dir: &'a Path,
    /// What failed, with the OS error.
    pub reason: &'a str,
    /// ENOSPC or EDQUOT ([`crate::is_disk_full`]).
    pub disk_full: bool,
    /// True when the log now refuses all work until it is reopened (a failed write or
    /// fdatasync); false when only the append that hit it failed (a segment roll or index
    /// write, undone before it returned).
    pub log_failed: bool,
}

type FailureListener = Box<dyn Fn(&IoFailure<'_>)>;

/// One shard's I/O backend. `!Send`: it lives on the shard thread.
pub struct IoBackend {
    ring: Option<uring::Ring>,
    /// Woken whenever any I/O completes or log state changes; every waiter rechecks its
    /// own condition. Simple and correct; one shard's waiters are few.
    progress: Notify,
    syncs: Cell<u64>,
    dir_syncs: Cell<u64>,
    stats: stats::SyncStats,
    copies: stats::CopyStats,
    on_failure: RefCell<Option<FailureListener>>,
    /// Tests, pwrite backend: bytes the "disk" still takes (None: unlimited). A write
    /// past it lands in part and fails with ENOSPC, as on a filesystem that fills mid-write.
    #[cfg(test)]
    pub(crate) space_left: Cell<Option<u64>>,
    /// Tests, pwrite backend: the errno every fdatasync fails with (0: none).
    #[cfg(test)]
    pub(crate) inject_sync_errno: Cell<i32>,
}

impl IoBackend {
    /// Must be called inside the shard's tokio runtime. Auto tries io_uring and falls back
    /// to pwrite+fdatasync with a log line; `kind()` tells which one is in use.
    pub fn new(kind: IoBackendKind) -> io::Result<Rc<IoBackend>> {
        let ring = match kind {
            IoBackendKind::Sync => None,
            IoBackendKind::Uring => Some(uring::Ring::new()?),
            IoBackendKind::Auto => match uring::Ring::new() {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(error = %e, "io_uring unavailable; using pwrite+fdatasync");
                    None
                }
            },
        };
        if ring.is_some() {
            tracing::info!("storage io backend: io_uring");
        }
        Ok(Rc::new(IoBackend {
            ring,
            progress: Notify::new(),
            syncs: Cell::new(0),
            dir_syncs: Cell::new(0),
            stats: stats::SyncStats::new(),
            copies: stats::CopyStats::default(),
            on_failure: RefCell::new(None),
            #[cfg(test)]
            space_left: Cell::new(None),
            #[cfg(test)]
            inject_sync_errno: Cell::new(0),
        }))
    }

    /// The backend in use; never Auto.
    pub fn kind(&self) -> IoBackendKind {
        if self.ring.is_some() {
            IoBackendKind::Uring
        } else {
            IoBackendKind::Sync
        }
    }

    /// Sets who hears of every I/O error of the logs on this backend (replacing any
    /// earlier listener). It runs on the shard thread, from inside the failing call or
    /// completion, after the log has logged the error and (for `log_failed`) stopped
    /// taking work; it may end the process.
    pub fn on_failure(&self, listener: impl Fn(&IoFailure<'_>) + 'static) {
        *self.on_failure.borrow_mut() = Some(Box::new(listener));
    }

    pub(crate) fn report_failure(&self, failure: &IoFailure<'_>) {
        if let Some(listener) = &*self.on_failure.borrow() {
            listener(failure);
        }
    }

    /// Number of fdatasyncs issued so far (to observe group commit).
    pub fn sync_count(&self) -> u64 {
        self.syncs.get()
    }

    /// Number of directory fsyncs issued so far (to observe that new and removed segment
    /// files are made durable).
    pub fn dir_sync_count(&self) -> u64 {
        self.dir_syncs.get()
    }

    /// fdatasync latency and group-commit batch sizes so far (for the broker's metrics).
    pub fn sync_stats(&self) -> SyncStatsSnapshot {
        self.stats.snapshot()
    }

    /// fdatasyncs issued and not completed yet: the sync queue depth on this shard's ring.
    pub fn syncs_in_flight(&self) -> u64 {
        self.stats.in_flight()
    }

    /// The io_uring's queue depth: `None` on the pwrite+fdatasync backend, which has no queue.
    pub fn ring_stats(&self) -> Option<RingStatsSnapshot> {
        self.ring.as_ref().map(|r| r.stats())
    }

    /// Bytes appended and read by the logs on this backend, and how many of them storage
    /// copied (for the broker's bytes-copied-per-byte metrics).
    pub fn copy_stats(&self) -> CopyStatsSnapshot {
        self.copies.snapshot()
    }

    pub(crate) fn copies(&self) -> &stats::CopyStats {
        &self.copies
    }

    /// Records how many offsets one group-commit fdatasync made durable.
    pub(crate) fn record_group_commit(&self, offsets: u64) {
        self.stats.record_batch(offsets);
    }

    /// Writes all of `data` at `pos`, its chunks in order with one vectored write. `done`
    /// runs exactly once, possibly before this returns (sync backend) or later from
    /// whichever task reaps the completion.
    pub(crate) fn write_at(&self, file: Arc<File>, pos: u64, data: WriteBufs, done: WriteCallback) {
        match &self.ring {
            Some(ring) => ring.write_at(file, pos, data, done),
            None => {
                #[cfg(not(test))]
                let r = data.write_all_at(&file, pos);
                #[cfg(test)]
                let r = self.write_within_space_left(&file, pos, &data);
                done(r);
                self.notify();
            }
        }
    }

    #[cfg(test)]
    fn write_within_space_left(&self, file: &File, pos: u64, data: &WriteBufs) -> io::Result<()> {
        let Some(left) = self.space_left.get() else {
            return data.write_all_at(file, pos);
        };
        let len = data.len() as u64;
        if len <= left {
            self.space_left.set(Some(left - len));
            return data.write_all_at(file, pos);
        }
        use std::os::unix::fs::FileExt;
        file.write_all_at(&data.to_vec()[..left as usize], pos)?;
        self.space_left.set(Some(0));
        Err(io::Error::from_raw_os_error(libc::ENOSPC))
    }

    /// fdatasync of `file`: metadata that reads need (the size) is included, mtime is not.
    pub(crate) async fn datasync(&self, file: Arc<File>) -> io::Result<()> {
        self.syncs.set(self.syncs.get() + 1);
        // A guard, so a sync whose future is dropped still leaves the in-flight count right.
        let _timer = self.stats.start_sync();
        self.sync_file(file, true).await
    }

    /// fsync of a directory: makes the entries created, renamed or unlinked in it durable
    /// (a new segment file is only reachable after a crash once its directory entry is).
    pub(crate) async fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.dir_syncs.set(self.dir_syncs.get() + 1);
        let file = Arc::new(File::open(dir)?);
        self.sync_file(file, false).await
    }

    /// The same, blocking the calling thread: for rare operations that are synchronous
    /// anyway (opening, truncating, deleting segments).
    pub(crate) fn sync_dir_blocking(&self, dir: &Path) -> io::Result<()> {
        self.dir_syncs.set(self.dir_syncs.get() + 1);
        File::open(dir)?.sync_all()
    }

    async fn sync_file(&self, file: Arc<File>, data_only: bool) -> io::Result<()> {
        match &self.ring {
            Some(ring) => {
                let slot = ring.fsync(file, data_only);
                self.wait_until(|| slot.borrow().is_some()).await;
                let r = slot.borrow_mut().take().expect("checked above");
                r
            }
            None => {
                #[cfg(test)]
                if self.inject_sync_errno.get() != 0 {
                    return Err(io::Error::from_raw_os_error(self.inject_sync_errno.get()));
                }
                let r = tokio::task::spawn_blocking(move || {
                    // SAFETY: the fd is owned by `file`, which this closure keeps alive.
                    let rc = unsafe {
                        if data_only {
                            libc::fdatasync(file.as_raw_fd())
                        } else {
                            libc::fsync(file.as_raw_fd())
                        }
                    };
                    if rc == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::last_os_error())
                    }
                })
                .await
                .map_err(io::Error::other)?;
                self.notify();
                r
            }
        }
    }

    /// Wakes every `wait_until` so it rechecks its condition.
    pub(crate) fn notify(&self) {
        self.progress.notify_waiters();
    }

    /// Runs completion callbacks for I/O that already finished, without blocking.
    pub(crate) fn poll_completions(&self) {
        if let Some(ring) = &self.ring {
            if ring.submit_and_reap() > 0 {
                self.notify();
            }
        }
    }

    /// Waits until `cond()` holds, driving the ring meanwhile.
    pub(crate) async fn wait_until(&self, mut cond: impl FnMut() -> bool) {
        loop {
            // Registered before the condition is checked, so a notify between the check
            // and the await is not lost.
            let notified = self.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            self.poll_completions();
            if cond() {
                return;
            }
            match &self.ring {
                None => notified.await,
                Some(ring) => {
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = ring.wait_eventfd() => {}
                    }
                }
            }
        }
    }
}
