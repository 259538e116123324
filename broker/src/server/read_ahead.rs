//! Large socket reads under a TLS stream.
//!
//! rustls reads the socket into its record buffer a little at a time: 4 KiB on an empty
//! buffer, then at most what is left of one TLS record (16 KiB and a header), and tokio-rustls
//! reads again only when the last record's plaintext is used up. A 1 MB produce request over
//! TLS took hundreds of `recv` calls where the plaintext path, reading straight into the
//! frame, takes a few, and every small `recv` costs a wake-up, a syscall and often a TCP
//! window update sent back to the client (profiled in benches/README.md, "TLS against
//! plaintext"). `ReadAhead` sits between the socket and rustls: it reads up to `capacity`
//! bytes per `recv` and hands rustls its small reads from memory, one copy of bytes that are
//! still in cache.
//!
//! Memory stays bounded per connection and is given back when the connection goes quiet: the
//! buffer exists only while it holds bytes or a read is under way; once it is drained and the
//! socket has nothing more (the read returns `Pending`), it is freed, so an idle TLS
//! connection holds nothing here. A read at least `capacity` long skips the buffer.
//!
//! Writes pass straight through: responses leave as rustls seals them.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What one `recv` may take under a TLS stream: four TLS records, enough to cut the syscalls
/// of a large request by an order of magnitude, and small enough to stay in L2 until rustls
/// has copied it.
pub const READ_AHEAD: usize = 64 * 1024;

pub struct ReadAhead<S> {
    inner: S,
    /// Read but not yet handed on; no allocation while empty between reads.
    buf: BytesMut,
    capacity: usize,
}

impl<S> ReadAhead<S> {
    pub fn new(inner: S, capacity: usize) -> ReadAhead<S> {
        ReadAhead {
            inner,
            buf: BytesMut::new(),
            capacity: capacity.max(1),
        }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Bytes held (read from the socket, not yet handed on) and bytes allocated, for tests.
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        (self.buf.len(), self.buf.capacity())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ReadAhead<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.buf.is_empty() {
            if out.remaining() >= this.capacity {
                return Pin::new(&mut this.inner).poll_read(cx, out);
            }
            // Allocates after a quiet spell; otherwise takes the drained buffer back from its
            // start, without allocating.
            this.buf.reserve(this.capacity);
            match tokio_util::io::poll_read_buf(Pin::new(&mut this.inner), cx, &mut this.buf) {
                Poll::Pending => {
                    // Quiet socket: give the buffer back until the next bytes come.
                    this.buf = BytesMut::new();
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(_)) => {} // 0: end of stream, `out` stays unfilled
            }
        }
        let n = out.remaining().min(this.buf.len());
        out.put_slice(&this.buf[..n]);
        this.buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ReadAhead<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A socket that has `ready` bytes now, then nothing (`Pending`) until more are fed, and
    /// counts the reads it is asked for.
    struct Socket {
        ready: Vec<u8>,
        eof: bool,
        reads: usize,
    }

    impl AsyncRead for Socket {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            out: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            this.reads += 1;
            if this.ready.is_empty() {
                return if this.eof {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Pending
                };
            }
            let n = out.remaining().min(this.ready.len());
            out.put_slice(&this.ready[..n]);
            this.ready.drain(..n);
            Poll::Ready(Ok(()))
        }
    }

    fn socket(bytes: usize) -> Socket {
        Socket {
            ready: (0..bytes).map(|i| (i * 7 % 251) as u8).collect(),
            eof: true,
            reads: 0,
        }
    }

    /// Reads `total` bytes `step` at a time, as rustls asks for them.
    async fn read_in_steps<R: AsyncRead + Unpin>(r: &mut R, total: usize, step: usize) -> Vec<u8> {
        let mut got = Vec::new();
        while got.len() < total {
            let mut chunk = vec![0u8; step.min(total - got.len())];
            let n = r.read(&mut chunk).await.unwrap();
            assert!(n > 0, "early end of stream");
            got.extend_from_slice(&chunk[..n]);
        }
        got
    }

    #[tokio::test]
    async fn given_small_reads_when_the_socket_has_much_then_one_socket_read_serves_many() {
        let expected = socket(200 * 1024).ready;
        let mut r = ReadAhead::new(socket(200 * 1024), READ_AHEAD);
        let got = read_in_steps(&mut r, expected.len(), 4096).await;
        assert_eq!(got, expected);
        // 50 reads of 4 KiB from four socket reads of 64 KiB (the last one 8 KiB).
        assert_eq!(r.get_ref().reads, 4);
    }

    #[tokio::test]
    async fn given_uneven_reads_then_every_byte_arrives_once_in_order() {
        let expected = socket(300_001).ready;
        let mut r = ReadAhead::new(socket(300_001), 1000);
        let mut got = Vec::new();
        for step in [1, 999, 1000, 1001, 4096, 7, 100_000].iter().cycle() {
            if got.len() == expected.len() {
                break;
            }
            got.extend(read_in_steps(&mut r, (*step).min(expected.len() - got.len()), *step).await);
        }
        assert_eq!(got, expected);
        let mut rest = [0u8; 10];
        assert_eq!(
            r.read(&mut rest).await.unwrap(),
            0,
            "end of stream passes through"
        );
    }

    #[tokio::test]
    async fn given_a_read_as_large_as_the_buffer_then_it_goes_straight_to_the_socket() {
        let mut r = ReadAhead::new(socket(10_000), 4096);
        let mut big = vec![0u8; 8192];
        assert_eq!(r.read(&mut big).await.unwrap(), 8192);
        assert_eq!(r.held(), (0, 0), "nothing buffered, nothing allocated");
    }

    #[tokio::test]
    async fn given_a_quiet_socket_when_the_buffer_is_drained_then_its_memory_is_freed() {
        let mut sock = socket(10_000);
        sock.eof = false;
        let mut r = ReadAhead::new(sock, READ_AHEAD);
        let got = read_in_steps(&mut r, 10_000, 4096).await;
        assert_eq!(got.len(), 10_000);
        assert!(r.held().1 > 0, "the buffer stays while the socket streams");
        let mut more = [0u8; 100];
        let waker = futures::task::noop_waker();
        let poll = Pin::new(&mut r).poll_read(
            &mut Context::from_waker(&waker),
            &mut ReadBuf::new(&mut more),
        );
        assert!(poll.is_pending());
        assert_eq!(r.held(), (0, 0), "an idle connection holds no read buffer");
    }
}
