//! The admin HTTP listener (default 127.0.0.1:9644): `/health` (the process is up), `/ready`
//! (recovery is done and shards serve) and `/metrics` (Prometheus text, see `crate::metrics`).
//! It starts before recovery, so `/health` answers and `/ready` says 503 while logs recover.
//! This is off the hot path, on its own small thread, so a slow scraper never delays a shard:
//! a scrape costs each shard one cross-shard message.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::shard::BrokerContext;

/// Scrapes and probes in flight at once: each holds a socket and, for /metrics, a rendering.
const MAX_CONCURRENT: usize = 16;

pub async fn serve(
    listener: TcpListener,
    ready: Arc<AtomicBool>,
    ctx: Arc<BrokerContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT));
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => {
                let Ok((mut stream, _)) = accepted else { continue };
                let Ok(permit) = permits.clone().try_acquire_owned() else { continue };
                let ready = ready.clone();
                let ctx = ctx.clone();
                // Local: a scrape's cross-shard calls are not `Send` (`invoke_on` holds an `Rc` on shards).
                tokio::task::spawn_local(async move {
                    let _permit = permit;
                    let mut buf = [0u8; 2048];
                    let n = match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
                        Ok(Ok(n)) => n,
                        _ => return,
                    };
                    let request = String::from_utf8_lossy(&buf[..n]);
                    let path = request.split_whitespace().nth(1).unwrap_or("/");
                    let is_ready = ready.load(Ordering::Acquire);
                    let (status, content_type, body) = match path {
                        "/health" => ("200 OK", "text/plain", "ok\n".to_string()),
                        "/ready" if is_ready => ("200 OK", "text/plain", "ready\n".to_string()),
                        "/ready" => ("503 Service Unavailable", "text/plain", "recovering\n".to_string()),
                        "/metrics" => (
                            "200 OK",
                            "text/plain; version=0.0.4",
                            crate::metrics::scrape::render(&ctx, is_ready).await,
                        ),
                        _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
                    };
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = tokio::time::timeout(Duration::from_secs(10), async {
                        stream.write_all(head.as_bytes()).await?;
                        stream.write_all(body.as_bytes()).await
                    })
                    .await;
                });
            }
        }
    }
}
