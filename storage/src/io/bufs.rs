//! What one write puts at one file position: a list of `Bytes` chunks written in order
//! with one vectored write (`pwritev`, io_uring `WRITEV`), so an append writes the
//! caller's buffer as it is and only the few header bytes the log rewrote come from a
//! buffer of its own.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

use bytes::Bytes;

/// Linux's UIO_MAXIOV: a vectored write takes at most this many chunks; a longer list is
/// written in several calls, as a short write would be.
const MAX_IOVECS: usize = 1024;

/// The chunks of one write, kept alive (with the caller's buffers they share) until the
/// write completed.
#[derive(Clone, Debug, Default)]
pub(crate) struct WriteBufs {
    chunks: Vec<Bytes>,
    len: usize,
}

impl From<Bytes> for WriteBufs {
    fn from(b: Bytes) -> WriteBufs {
        let mut w = WriteBufs::default();
        w.push(b);
        w
    }
}

impl WriteBufs {
    pub(crate) fn push(&mut self, b: Bytes) {
        if !b.is_empty() {
            self.len += b.len();
            self.chunks.push(b);
        }
    }

    /// All the bytes in one buffer (tests: a write cut short at a byte boundary).
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        self.chunks.iter().flat_map(|c| c.iter().copied()).collect()
    }

    /// Total bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The one chunk, when there is exactly one (written with a plain write).
    pub(crate) fn single(&self) -> Option<&Bytes> {
        match self.chunks.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// iovecs over the bytes from `skip` on (what a short write left), at most
    /// [`MAX_IOVECS`]. They point into `self`'s chunks: valid while `self` lives unchanged.
    pub(crate) fn iovecs(&self, mut skip: usize) -> Vec<libc::iovec> {
        let mut out = Vec::with_capacity(self.chunks.len().min(MAX_IOVECS));
        for c in &self.chunks {
            if skip >= c.len() {
                skip -= c.len();
                continue;
            }
            let rest = &c[skip..];
            skip = 0;
            out.push(libc::iovec {
                iov_base: rest.as_ptr() as *mut libc::c_void,
                iov_len: rest.len(),
            });
            if out.len() == MAX_IOVECS {
                break;
            }
        }
        out
    }

    /// Writes everything at `pos` with `pwritev`, retrying short writes and interrupts.
    pub(crate) fn write_all_at(&self, file: &File, pos: u64) -> io::Result<()> {
        if let Some(one) = self.single() {
            use std::os::unix::fs::FileExt;
            return file.write_all_at(one, pos);
        }
        let mut done = 0usize;
        while done < self.len {
            let iov = self.iovecs(done);
            let at = libc::off_t::try_from(pos + done as u64)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset"))?;
            // SAFETY: every iovec points into a chunk `self` owns and keeps unchanged for
            // the call; the fd is owned by `file`, alive for the call.
            let n = unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), iov.len() as _, at) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
            }
            done += n as usize;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn bufs(parts: &[&[u8]]) -> WriteBufs {
        let mut w = WriteBufs::default();
        for p in parts {
            w.push(Bytes::copy_from_slice(p));
        }
        w
    }

    #[test]
    fn given_skip_inside_a_chunk_when_building_iovecs_then_they_start_there() {
        let w = bufs(&[b"abc", b"", b"defg", b"h"]);
        assert_eq!(w.len(), 8);
        assert_eq!(w.iovecs(0).len(), 3, "empty chunks are dropped");
        let lens: Vec<usize> = w.iovecs(4).iter().map(|v| v.iov_len).collect();
        assert_eq!(lens, vec![3, 1]);
        assert!(w.iovecs(8).is_empty());
    }

    #[test]
    fn given_more_chunks_than_one_call_takes_when_writing_then_all_reach_the_file() {
        let parts: Vec<Vec<u8>> = (0..MAX_IOVECS + 300)
            .map(|i| vec![(i % 251) as u8; 1 + i % 3])
            .collect();
        let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
        let w = bufs(&refs);
        assert_eq!(w.iovecs(0).len(), MAX_IOVECS);
        let dir = tempfile::tempdir().unwrap();
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        w.write_all_at(&f, 5).unwrap();
        let mut got = vec![0u8; w.len()];
        f.read_exact_at(&mut got, 5).unwrap();
        assert_eq!(got, parts.concat());
    }
}
