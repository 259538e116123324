//! One io_uring per shard, driven from tokio through an eventfd.
//!
//! Every in-flight operation owns what the kernel reads or writes through it (the
//! `Bytes` chunks, the iovec array pointing into them for a vectored write, and an
//! `Arc<File>` keeping the fd open) in `ops`, keyed by user_data, until its completion is
//! reaped; `Drop` waits for all of them. That is what makes the raw pointers handed to
//! the kernel valid for as long as it uses them.
//!
//! A submission the kernel refuses (any error but "busy" or an interrupt) breaks the
//! ring: every operation not completed yet is failed at once (its buffer stays owned
//! until the kernel is done with it, should it have been submitted), and later ones fail
//! without being queued. The logs waiting on them fail with `LogFailed` rather than wait
//! forever. A full queue is never spun on: the ring waits for a completion instead.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;

use io_uring::{opcode, squeue, types, IoUring};
use tokio::io::unix::AsyncFd;

use super::stats::{Buckets, RingStatsSnapshot, QUEUE_DEPTH_BOUNDS};
use super::{WriteBufs, WriteCallback};

const RING_ENTRIES: u32 = 256;
/// `io_uring_enter` flag: wait for completions (linux/io_uring.h).
const IORING_ENTER_GETEVENTS: u32 = 1;

pub(crate) type SyncSlot = Rc<RefCell<Option<io::Result<()>>>>;

enum Op {
    Write {
        file: Arc<File>,
        buf: WriteBufs,
        /// The iovecs a `WRITEV` entry points at (empty for a plain `WRITE`): the kernel
        /// may read them until the operation completes, so they live in the op.
        _iov: Vec<libc::iovec>,
        written: usize,
        pos: u64,
        /// Taken when the op is failed early (broken ring) while the kernel may still
        /// hold the buffer.
        done: Option<WriteCallback>,
    },
    Sync {
        // Held only to keep the fd open until the kernel is done with it.
        _file: Arc<File>,
        slot: SyncSlot,
    },
}

pub(crate) struct Ring {
    ring: RefCell<IoUring>,
    ops: RefCell<HashMap<u64, Op>>,
    /// Completions taken off the queue while making room to submit; handled on next reap.
    backlog: RefCell<Vec<(u64, i32)>>,
    next_id: Cell<u64>,
    eventfd: AsyncFd<OwnedFd>,
    /// Why submitting failed for good, once it has.
    broken: RefCell<Option<String>>,
    /// Queue depth seen by each submission (for metrics).
    depth: RefCell<Buckets>,
    /// Tests: the errno every submit fails with (0: none).
    #[cfg(test)]
    pub(crate) inject_submit_errno: Cell<i32>,
}

impl Ring {
    pub(crate) fn new() -> io::Result<Ring> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(io::Error::other("io_uring backend needs a tokio runtime"));
        }
        let ring = IoUring::new(RING_ENTRIES)?;
        // SAFETY: plain syscall; the returned fd (if any) is owned by the OwnedFd below.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: efd is a fresh descriptor nobody else owns.
        let efd = unsafe { OwnedFd::from_raw_fd(efd) };
        ring.submitter().register_eventfd(efd.as_raw_fd())?;
        // SAFETY: `efd` is an OwnedFd moved into the AsyncFd, so the descriptor stays open
        // and unchanged for the AsyncFd's whole life.
        let eventfd =
            unsafe { AsyncFd::register_with_interest(efd, tokio::io::Interest::READABLE) }?;
        Ok(Ring {
            ring: RefCell::new(ring),
            ops: RefCell::new(HashMap::new()),
            backlog: RefCell::new(Vec::new()),
            next_id: Cell::new(1),
            eventfd,
            broken: RefCell::new(None),
            depth: RefCell::new(Buckets::new(QUEUE_DEPTH_BOUNDS)),
            #[cfg(test)]
            inject_submit_errno: Cell::new(0),
        })
    }

    fn id(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    /// The entry writing what is left of `buf` after `written` bytes: a plain `WRITE` of
    /// a single chunk, else a `WRITEV` over the iovecs it returns (to keep in the op).
    fn write_sqe(
        file: &File,
        buf: &WriteBufs,
        written: usize,
        pos: u64,
        id: u64,
    ) -> (squeue::Entry, Vec<libc::iovec>) {
        let fd = types::Fd(file.as_raw_fd());
        let at = pos + written as u64;
        if let Some(one) = buf.single() {
            let rest = &one[written..];
            let len = rest.len().min(u32::MAX as usize) as u32;
            let sqe = opcode::Write::new(fd, rest.as_ptr(), len).offset(at);
            return (sqe.build().user_data(id), Vec::new());
        }
        let iov = buf.iovecs(written);
        let sqe = opcode::Writev::new(fd, iov.as_ptr(), iov.len() as u32).offset(at);
        (sqe.build().user_data(id), iov)
    }

    pub(crate) fn write_at(&self, file: Arc<File>, pos: u64, buf: WriteBufs, done: WriteCallback) {
        if let Some(e) = self.broken_error() {
            done(Err(e));
            return;
        }
        let id = self.id();
        // The iovecs' heap array does not move when the Vec is moved into the op.
        let (sqe, iov) = Self::write_sqe(&file, &buf, 0, pos, id);
        self.ops.borrow_mut().insert(
            id,
            Op::Write {
                file,
                buf,
                _iov: iov,
                written: 0,
                pos,
                done: Some(done),
            },
        );
        self.push(sqe);
    }

    /// fdatasync (`data_only`) or fsync of `file`.
    pub(crate) fn fsync(&self, file: Arc<File>, data_only: bool) -> SyncSlot {
        let id = self.id();
        let slot: SyncSlot = Rc::new(RefCell::new(None));
        if let Some(e) = self.broken_error() {
            *slot.borrow_mut() = Some(Err(e));
            return slot;
        }
        let mut op = opcode::Fsync::new(types::Fd(file.as_raw_fd()));
        if data_only {
            op = op.flags(types::FsyncFlags::DATASYNC);
        }
        let sqe = op.build().user_data(id);
        self.ops.borrow_mut().insert(
            id,
            Op::Sync {
                _file: file,
                slot: slot.clone(),
            },
        );
        self.push(sqe);
        slot
    }

    fn broken_error(&self) -> Option<io::Error> {
        self.broken
            .borrow()
            .as_ref()
            .map(|r| io::Error::other(format!("io_uring unusable: {r}")))
    }

    pub(crate) fn stats(&self) -> RingStatsSnapshot {
        RingStatsSnapshot {
            in_flight: self.ops.borrow().len() as u64,
            depth: self.depth.borrow().clone(),
        }
    }

    /// Queues and submits one entry. The op it refers to is already in `ops`, so the
    /// buffer and fd outlive the kernel's use of them.
    fn push(&self, sqe: squeue::Entry) {
        // `ops` holds every operation not completed, this one included: the queue depth.
        let depth = self.ops.borrow().len() as u64;
        self.depth.borrow_mut().record(depth);
        let r = {
            let mut ring = self.ring.borrow_mut();
            loop {
                // SAFETY: the entry's buffer and fd belong to an op stored in `self.ops`,
                // which is only removed after its completion is reaped (or in Drop, after
                // waiting for it).
                if unsafe { ring.submission().push(&sqe) }.is_ok() {
                    break self.submit_locked(&mut ring);
                }
                // Queue full: submitting empties it (waiting for completions if the
                // kernel has no room for more).
                if let Err(e) = self.submit_locked(&mut ring) {
                    break Err(e);
                }
            }
        };
        if let Err(e) = r {
            self.break_ring(e);
        }
    }

    /// Submits what is queued. "Busy" means the completion queue is full: completions
    /// are taken off it (kept in `backlog`) to make room, and when there are none yet the
    /// ring waits for one, so a full ring never spins.
    fn submit_locked(&self, ring: &mut IoUring) -> io::Result<()> {
        loop {
            #[cfg(test)]
            if self.inject_submit_errno.get() != 0 {
                return Err(io::Error::from_raw_os_error(self.inject_submit_errno.get()));
            }
            match ring.submit() {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    let mut b = self.backlog.borrow_mut();
                    let before = b.len();
                    b.extend(ring.completion().map(|c| (c.user_data(), c.result())));
                    if b.len() == before {
                        // SAFETY: submits nothing and waits for one completion; no
                        // argument pointer is passed.
                        let r = unsafe {
                            ring.submitter().enter::<libc::sigset_t>(
                                0,
                                1,
                                IORING_ENTER_GETEVENTS,
                                None,
                            )
                        };
                        match r {
                            Err(e)
                                if e.raw_os_error() != Some(libc::EINTR)
                                    && e.raw_os_error() != Some(libc::EBUSY) =>
                            {
                                return Err(e)
                            }
                            _ => {}
                        }
                        b.extend(ring.completion().map(|c| (c.user_data(), c.result())));
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Submitting failed for good: fail every operation not completed yet (their waiters
    /// must not hang) and refuse new ones. Buffers stay in `ops` until their completion
    /// arrives, as the kernel may have taken some of the entries.
    fn break_ring(&self, e: io::Error) {
        tracing::error!(error = %e, "io_uring submit failed; failing its pending operations");
        self.broken.borrow_mut().get_or_insert(e.to_string());
        let mut callbacks = Vec::new();
        for op in self.ops.borrow_mut().values_mut() {
            match op {
                Op::Write { done, .. } => callbacks.extend(done.take()),
                Op::Sync { slot, .. } => {
                    slot.borrow_mut()
                        .get_or_insert_with(|| Err(io::Error::other(e.to_string())));
                }
            }
        }
        // After the borrow of `ops` ends: callbacks may start new operations.
        for done in callbacks {
            done(Err(io::Error::other(format!(
                "io_uring submit failed: {e}"
            ))));
        }
    }

    /// Submits queued entries and runs callbacks of finished operations. Returns how many
    /// completions were handled.
    pub(crate) fn submit_and_reap(&self) -> usize {
        let mut done: Vec<(u64, i32)> = std::mem::take(&mut *self.backlog.borrow_mut());
        let r = {
            let mut ring = self.ring.borrow_mut();
            let r = if !ring.submission().is_empty() && self.broken.borrow().is_none() {
                self.submit_locked(&mut ring)
            } else {
                Ok(())
            };
            done.extend(ring.completion().map(|c| (c.user_data(), c.result())));
            // Completions the completion queue had no room for wait in the kernel's overflow
            // list: they reach the queue only on the next io_uring_enter, and nothing signals
            // the eventfd for them. Without a submission to come (the last writes of a burst
            // of more operations than the queue holds) they would wait forever, and with
            // them every waiter of those writes. Flush them here.
            while r.is_ok() && ring.submission().cq_overflow() {
                // SAFETY: submits nothing, waits for nothing; flushes the overflow list.
                let e = unsafe {
                    ring.submitter()
                        .enter::<libc::sigset_t>(0, 0, IORING_ENTER_GETEVENTS, None)
                };
                if let Err(e) = e {
                    if e.raw_os_error() != Some(libc::EINTR)
                        && e.raw_os_error() != Some(libc::EBUSY)
                    {
                        break;
                    }
                }
                let before = done.len();
                done.extend(ring.completion().map(|c| (c.user_data(), c.result())));
                if done.len() == before {
                    break;
                }
            }
            r
        };
        if let Err(e) = r {
            self.break_ring(e);
        }
        let n = done.len();
        for (id, res) in done {
            self.complete(id, res);
        }
        n
    }

    fn complete(&self, id: u64, res: i32) {
        let Some(op) = self.ops.borrow_mut().remove(&id) else {
            return;
        };
        match op {
            Op::Sync { slot, .. } => {
                // A sync failed early by `break_ring` keeps that answer.
                slot.borrow_mut().get_or_insert(if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else {
                    Ok(())
                });
            }
            Op::Write {
                file,
                buf,
                _iov: _,
                mut written,
                pos,
                done,
            } => {
                // Failed early by `break_ring`: the kernel is done with the buffer now.
                let Some(done) = done else { return };
                if let Some(e) = self.broken_error() {
                    done(Err(e));
                    return;
                }
                if res == -libc::EINTR || res == -libc::EAGAIN {
                    // retry as is
                } else if res < 0 {
                    done(Err(io::Error::from_raw_os_error(-res)));
                    return;
                } else if res == 0 {
                    done(Err(io::Error::new(io::ErrorKind::WriteZero, "short write")));
                    return;
                } else {
                    written += res as usize;
                    if written >= buf.len() {
                        done(Ok(()));
                        return;
                    }
                }
                // Short write: queue the rest under the same id.
                let (sqe, iov) = Self::write_sqe(&file, &buf, written, pos, id);
                self.ops.borrow_mut().insert(
                    id,
                    Op::Write {
                        file,
                        buf,
                        _iov: iov,
                        written,
                        pos,
                        done: Some(done),
                    },
                );
                self.push(sqe);
            }
        }
    }

    /// Resolves when the eventfd (signalled by the kernel on each completion) is readable.
    pub(crate) async fn wait_eventfd(&self) {
        match self.eventfd.readable().await {
            Ok(mut guard) => {
                // Drains the counter; readiness is cleared only on EAGAIN, so a
                // completion signalled after this read is never missed.
                let _ = guard.try_io(|fd| {
                    let mut buf = [0u8; 8];
                    // SAFETY: reads 8 bytes into a stack buffer of 8 bytes from our fd.
                    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
                    if n < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(())
                    }
                });
            }
            Err(e) => {
                tracing::error!(error = %e, "eventfd wait failed");
                tokio::task::yield_now().await;
            }
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // The kernel may still be reading buffers owned by `ops`: wait for every
        // outstanding operation before they are freed.
        let ring = self.ring.get_mut();
        let ops = self.ops.get_mut();
        for (id, _) in self.backlog.get_mut().drain(..) {
            ops.remove(&id);
        }
        while !ops.is_empty() {
            if let Err(e) = ring.submit_and_wait(1) {
                if e.raw_os_error() != Some(libc::EINTR) && e.raw_os_error() != Some(libc::EBUSY) {
                    tracing::error!(error = %e, "io_uring drain at drop failed; leaking buffers");
                    std::mem::forget(std::mem::take(ops));
                    return;
                }
            }
            for c in ring.completion() {
                ops.remove(&c.user_data());
            }
        }
    }
}
