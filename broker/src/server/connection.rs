//! One client connection: framing, pipelining, ordering and backpressure.
//!
//! The reader takes frames off the socket and starts a task per request right away, so a
//! client that pipelines (librdkafka keeps several requests in flight) has them processed
//! concurrently. The task handles go through a bounded queue to the writer, which awaits them
//! in arrival order: responses leave in request order, as Kafka requires, however the work
//! fanned out. Memory is bounded three ways: the queue caps requests in flight per connection,
//! a per-connection semaphore caps its request bytes in flight at one maximum frame
//! (`socket_request_max_bytes`), and a per-shard semaphore caps the shard's
//! (`queued_max_request_bytes`) — when any is full the reader stops reading, and TCP pushes
//! back on the client.

use std::rc::Rc;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinHandle;

use crate::handlers::{self, FrameError};
use crate::shard::ShardState;

type Pending = JoinHandle<Result<Option<BytesMut>, FrameError>>;

pub async fn serve(stream: TcpStream, shard: Rc<ShardState>, mut shutdown: watch::Receiver<bool>) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    // Kafka's form (Java's InetAddress.toString): a slash, then the address.
    let client_host: Rc<str> = stream
        .peer_addr()
        .map(|a| format!("/{}", a.ip()))
        .unwrap_or_default()
        .into();
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let config = &shard.ctx.config;
    let max_frame = config.socket_request_max_bytes as usize;
    let max_permits = config.queued_max_request_bytes.min(u32::MAX as u64) as usize;
    let (tx, mut rx) = mpsc::channel::<Pending>(config.max_in_flight_per_connection);
    let conn_bytes = Arc::new(Semaphore::new(max_frame));

    let writer_peer = peer.clone();
    let writer = tokio::task::spawn_local(async move {
        while let Some(pending) = rx.recv().await {
            match pending.await {
                Ok(Ok(Some(response))) => {
                    if let Err(e) = wr.write_all(&response).await {
                        tracing::debug!(peer = %writer_peer, error = %e, "write failed; closing");
                        break;
                    }
                }
                Ok(Ok(None)) => {} // acks=0 produce: Kafka sends nothing back
                Ok(Err(e)) => {
                    tracing::warn!(peer = %writer_peer, error = %e, "closing connection");
                    break;
                }
                Err(e) => {
                    tracing::error!(peer = %writer_peer, error = %e, "request task failed; closing connection");
                    break;
                }
            }
        }
        let _ = wr.shutdown().await;
    });

    loop {
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
        if len < 8 || len as usize > max_frame {
            tracing::warn!(peer = %peer, len, max_frame,
                "request frame size out of range (socket.request.max.bytes); closing connection");
            break;
        }
        let len = len as usize;
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
        let mut body = BytesMut::zeroed(len);
        let read = tokio::select! {
            _ = shutdown.changed() => break,
            r = rd.read_exact(&mut body) => r,
        };
        if read.is_err() {
            tracing::debug!(peer = %peer, "connection closed mid-frame");
            break;
        }
        let frame: Bytes = body.freeze();
        let shard = shard.clone();
        let host = client_host.clone();
        let task = tokio::task::spawn_local(async move {
            let r = handlers::handle_frame(shard, host, frame).await;
            drop(permits);
            drop(conn_permits);
            r
        });
        if tx.send(task).await.is_err() {
            break;
        }
    }
    // Finish what was read (clean shutdown answers in-flight requests), then close.
    drop(tx);
    let _ = writer.await;
}
