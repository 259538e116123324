//! One client connection: framing, ordering, pipelining and backpressure.
//!
//! **Order** (`handlers` overview): the reader takes one frame at a time and runs its first
//! phase before it reads the next, so request N+1's effects reach every partition, group and
//! transaction after request N's. A serial request (groups, transactions, admin) first waits
//! until every earlier request of the connection is answered — Kafka's one-at-a-time
//! semantics; a pipelined one (Produce, Fetch) only until the previous first phase is done.
//! The second phases run as tasks and overlap; the writer awaits them in arrival order, so
//! responses leave in request order, as Kafka requires.
//!
//! **Memory** is bounded three ways: the queue caps requests in flight per connection, a
//! per-connection semaphore caps its request bytes in flight at one maximum frame
//! (`socket_request_max_bytes`), and a per-shard semaphore caps the shard's
//! (`queued_max_request_bytes`) — when any is full the reader stops reading, and TCP pushes
//! back on the client.
//!
//! **Writes** are vectored: a response is a list of chunks (a fetch's records are slices of
//! the mapped segments), written with `writev` without being joined first.

use std::io::IoSlice;
use std::rc::Rc;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinHandle;

use crate::handlers::{self, Answer, Ordering, ResponseFrame};
use crate::security::Session;
use crate::shard::ShardState;

/// At most this many chunks per `writev` (Linux's IOV_MAX is 1024).
const MAX_IOVECS: usize = 512;

/// Serves one connection's requests, read from `rd` and answered on `wr`: the two halves of
/// a TCP socket (PLAINTEXT, no lock between them) or of a TLS stream. `session` says who the
/// client is (`server::listener` authenticated it).
pub async fn serve<R, W>(
    mut rd: R,
    wr: W,
    peer: String,
    session: Rc<Session>,
    shard: Rc<ShardState>,
    mut shutdown: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + 'static,
{
    let config = &shard.ctx.config;
    let max_frame = config.socket_request_max_bytes as usize;
    let max_permits = config.queued_max_request_bytes.min(u32::MAX as u64) as usize;
    let (tx, rx) = mpsc::channel::<JoinHandle<Answer>>(config.max_in_flight_per_connection);
    let conn_bytes = Arc::new(Semaphore::new(max_frame));
    // How many of the connection's requests are answered; a serial request waits for all.
    let (answered_tx, mut answered) = watch::channel(0u64);
    let answered_tx = Rc::new(answered_tx);
    let writer = tokio::task::spawn_local(write_responses(wr, rx, peer.clone()));

    // SASL listeners authenticate in this loop (`server::sasl`); others pay nothing for it.
    let mut auth = session
        .listener
        .protocol
        .sasl()
        .then(super::sasl::Authenticator::new);
    let sasl_limit = config.sasl_server_max_receive_size as usize;
    let mut read = 0u64;
    loop {
        // A client over its quota is not read from until its throttle time is over (Kafka
        // mutes the channel); TCP holds back what it sends meanwhile.
        if let Some(until) = session.take_mute() {
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = tokio::time::sleep_until(until) => {}
            }
        }
        let mut len_buf = [0u8; 4];
        tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            _ = tx.closed() => break,
            r = rd.read_exact(&mut len_buf) => {
                if r.is_err() {
                    break; // EOF or reset: the client went away
                }
            }
        }
        let len = i32::from_be_bytes(len_buf);
        // A raw SASL token (after a v0 SaslHandshake) may be shorter than a request header.
        let min = if auth.as_ref().is_some_and(|a| a.expects_raw()) {
            0
        } else {
            8
        };
        if len < min || len as usize > max_frame {
            tracing::warn!(peer = %peer, len, max_frame,
                "request frame size out of range (socket.request.max.bytes); closing connection");
            break;
        }
        let len = len as usize;
        if len > sasl_limit && auth.as_ref().is_some_and(|a| !a.authenticated()) {
            tracing::info!(peer = %peer, len, "request before SASL authentication larger than sasl.server.max.receive.size; closing connection");
            break;
        }
        // Reserve the bytes before allocating them, so a flood of large frames waits here:
        // first against this connection's own budget (one frame's worth, so one client cannot
        // take the whole shard's), then against the shard's.
        let Ok(conn_permits) = conn_bytes.clone().acquire_many_owned(len as u32).await else {
            break;
        };
        let permits = match shard
            .inflight_bytes
            .clone()
            .acquire_many_owned(len.min(max_permits) as u32)
            .await
        {
            Ok(p) => p,
            Err(_) => break,
        };
        let r = tokio::select! {
            _ = shutdown.changed() => break,
            r = read_body(&mut rd, len) => r,
        };
        let Ok(frame) = r else {
            tracing::debug!(peer = %peer, "connection closed mid-frame");
            break;
        };
        if let Some(a) = auth.as_mut() {
            // A re-authentication comes after everything the connection sent before it.
            if a.is_reauthentication(&frame) {
                let earlier = read;
                tokio::select! {
                    _ = shutdown.changed() => break,
                    _ = tx.closed() => break,
                    r = answered.wait_for(|n| *n >= earlier) => if r.is_err() { break },
                }
            }
            match a.on_frame(&frame, &session, &shard) {
                super::sasl::Verdict::Pass => {}
                super::sasl::Verdict::Close(reason) => {
                    tracing::info!(peer = %peer, listener = %session.listener.name, "closing connection: {reason}");
                    break;
                }
                super::sasl::Verdict::Answer {
                    frame,
                    delay,
                    close,
                } => {
                    let done = Answered(answered_tx.clone());
                    let task = tokio::task::spawn_local(async move {
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        drop(permits);
                        drop(conn_permits);
                        drop(done);
                        Ok(Some(ResponseFrame::from(frame)))
                    });
                    read += 1;
                    if tx.send(task).await.is_err() || close {
                        break;
                    }
                    continue;
                }
            }
        }
        // A mute set by a response that was still in flight when this frame came in.
        if let Some(until) = session.take_mute() {
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = tokio::time::sleep_until(until) => {}
            }
        }
        if handlers::ordering_of(&frame) == Ordering::Serial {
            let earlier = read;
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = tx.closed() => break, // the writer gave up on the connection
                r = answered.wait_for(|n| *n >= earlier) => if r.is_err() { break },
            }
        }
        let dispatched = handlers::dispatch_frame(shard.clone(), session.clone(), frame).await;
        let done = Answered(answered_tx.clone());
        let task = tokio::task::spawn_local(async move {
            let answer = dispatched.answer().await;
            drop(permits);
            drop(conn_permits);
            drop(done);
            answer
        });
        read += 1;
        if tx.send(task).await.is_err() {
            break;
        }
    }
    // Finish what was read (clean shutdown answers in-flight requests), then close.
    drop(tx);
    let _ = writer.await;
}

/// Reads a frame's `len` bytes into a buffer of exactly that size, which is not zeroed first:
/// a produce request is up to a megabyte, and zeroing it cost as much CPU as validating it.
async fn read_body<R: AsyncRead + Unpin>(rd: &mut R, len: usize) -> std::io::Result<Bytes> {
    let mut body = BytesMut::with_capacity(len);
    while body.len() < len {
        // `limit`: never a byte of the next frame, whatever capacity the allocator gave.
        let want = len - body.len();
        if rd.read_buf(&mut (&mut body).limit(want)).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(body.freeze())
}

/// Counts a request as answered when dropped: also when its task panics or is cancelled, so a
/// serial request behind it is never left waiting.
struct Answered(Rc<watch::Sender<u64>>);

impl Drop for Answered {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n += 1);
    }
}

async fn write_responses<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: mpsc::Receiver<JoinHandle<Answer>>,
    peer: String,
) {
    while let Some(pending) = rx.recv().await {
        match pending.await {
            Ok(Ok(Some(response))) => {
                if let Err(e) = write_frame(&mut wr, response).await {
                    tracing::debug!(peer = %peer, error = %e, "write failed; closing");
                    break;
                }
            }
            Ok(Ok(None)) => {} // acks=0 produce: Kafka sends nothing back
            Ok(Err(e)) => {
                tracing::warn!(peer = %peer, error = %e, "closing connection");
                break;
            }
            Err(e) => {
                tracing::error!(peer = %peer, error = %e, "request task failed; closing connection");
                break;
            }
        }
    }
    let _ = wr.shutdown().await;
}

/// Writes every chunk of `frame` with vectored writes, resuming after partial ones.
async fn write_frame<W: AsyncWrite + Unpin>(
    wr: &mut W,
    frame: ResponseFrame,
) -> std::io::Result<()> {
    let mut chunks = frame.chunks;
    chunks.retain(|c| !c.is_empty());
    let mut first = 0usize;
    while first < chunks.len() {
        let end = chunks.len().min(first + MAX_IOVECS);
        let slices: Vec<IoSlice<'_>> = chunks[first..end].iter().map(|c| IoSlice::new(c)).collect();
        let mut written = wr.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let c = &mut chunks[first];
            if written >= c.len() {
                written -= c.len();
                first += 1;
            } else {
                c.advance(written);
                written = 0;
            }
        }
    }
    // TLS keeps what the socket did not take in its own buffer; a TCP socket has none.
    wr.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn given_a_frame_and_more_behind_it_when_reading_the_body_then_exactly_len_bytes_are_taken(
    ) {
        let wire: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let mut rd = &wire[..];
        let body = read_body(&mut rd, 600).await.unwrap();
        assert_eq!(&body[..], &wire[..600]);
        assert_eq!(
            rd,
            &wire[600..],
            "the next frame's bytes stay in the socket"
        );
    }

    #[tokio::test]
    async fn given_a_stream_that_ends_mid_frame_when_reading_the_body_then_it_fails() {
        let wire = [7u8; 10];
        let err = read_body(&mut &wire[..], 11).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
