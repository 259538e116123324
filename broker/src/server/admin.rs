//! The admin HTTP listener (default 127.0.0.1:9644): `/health` (the process is up), `/ready`
//! (recovery is done and shards serve) and `/metrics` (Prometheus text, see `crate::metrics`).
//! It starts before recovery, so `/health` answers and `/ready` says 503 while logs recover.
//! This is off the hot path, on its own small thread, so a slow scraper never delays a shard:
//! a scrape costs each shard one cross-shard message.
//!
//! `serve_routes` is the HTTP part alone; `strom migrate` serves its own metrics with it on
//! the same address while the broker is not running.

use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::shard::BrokerContext;

/// Scrapes and probes in flight at once: each holds a socket and, for /metrics, a rendering.
const MAX_CONCURRENT: usize = 16;

/// One answer: (status line, content type, body).
pub type Answer = (&'static str, &'static str, String);

pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4";

pub fn not_found() -> Answer {
    ("404 Not Found", "text/plain", "not found\n".to_string())
}

pub async fn serve(
    listener: TcpListener,
    ready: Arc<AtomicBool>,
    ctx: Arc<BrokerContext>,
    shutdown: watch::Receiver<bool>,
) {
    serve_routes(listener, shutdown, move |path| {
        let ready = ready.clone();
        let ctx = ctx.clone();
        async move {
            let is_ready = ready.load(Ordering::Acquire);
            match path.as_str() {
                "/health" => ("200 OK", "text/plain", "ok\n".to_string()),
                "/ready" if is_ready => ("200 OK", "text/plain", "ready\n".to_string()),
                "/ready" => (
                    "503 Service Unavailable",
                    "text/plain",
                    "recovering\n".to_string(),
                ),
                "/metrics" => (
                    "200 OK",
                    PROMETHEUS_TEXT,
                    crate::metrics::scrape::render(&ctx, is_ready).await,
                ),
                _ => not_found(),
            }
        }
    })
    .await
}

/// Runs `serve` on `listener` on a thread of its own (a current-thread runtime and a
/// `LocalSet`, because a broker scrape awaits `invoke_on`, whose future is not `Send`), so a
/// slow scraper or a busy caller never delays the other.
pub fn spawn_thread<S, F>(
    name: &str,
    listener: std::net::TcpListener,
    serve: S,
) -> std::io::Result<std::thread::JoinHandle<()>>
where
    S: FnOnce(TcpListener) -> F + Send + 'static,
    F: Future<Output = ()> + 'static,
{
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("admin runtime");
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                match TcpListener::from_std(listener) {
                    Ok(l) => serve(l).await,
                    Err(e) => tracing::error!(error = %e, "admin listener"),
                }
            });
        })
}

/// Accepts until `shutdown` changes; answers each connection's one request with what
/// `route` gives for its path. Runs inside a `LocalSet`.
pub async fn serve_routes<R, F>(
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
    route: R,
) where
    R: Fn(String) -> F + 'static,
    F: Future<Output = Answer> + 'static,
{
    let route = Rc::new(route);
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT));
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => {
                let Ok((mut stream, _)) = accepted else { continue };
                let Ok(permit) = permits.clone().try_acquire_owned() else { continue };
                let route = route.clone();
                // Local: a broker scrape's cross-shard calls are not `Send` (`invoke_on` holds
                // an `Rc` on shards).
                tokio::task::spawn_local(async move {
                    let _permit = permit;
                    let mut buf = [0u8; 2048];
                    // The whole request head before answering: a client may send it in
                    // several writes, and closing with a later part unread would reset the
                    // connection under the client (its next write fails with EPIPE).
                    let head = tokio::time::timeout(Duration::from_secs(5), async {
                        let mut n = 0;
                        while n < buf.len() && !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                            match stream.read(&mut buf[n..]).await {
                                Ok(0) | Err(_) => break,
                                Ok(more) => n += more,
                            }
                        }
                        n
                    })
                    .await;
                    let Ok(n) = head else { return };
                    let request = String::from_utf8_lossy(&buf[..n]);
                    let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let (status, content_type, body) = route(path).await;
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
