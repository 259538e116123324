//! The admin HTTP listener (default 127.0.0.1:9644): `/health` (the process is up) and
//! `/ready` (recovery is done and shards serve). Metrics (`/metrics`) join it later. This is
//! off the hot path, on its own small thread, so a slow scraper never delays a shard.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub async fn serve(
    listener: TcpListener,
    ready: Arc<AtomicBool>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => {
                let Ok((mut stream, _)) = accepted else { continue };
                let ready = ready.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 2048];
                    let n = match tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buf)).await {
                        Ok(Ok(n)) => n,
                        _ => return,
                    };
                    let request = String::from_utf8_lossy(&buf[..n]);
                    let path = request.split_whitespace().nth(1).unwrap_or("/");
                    let (status, body) = match path {
                        "/health" => ("200 OK", "ok\n"),
                        "/ready" if ready.load(Ordering::Acquire) => ("200 OK", "ready\n"),
                        "/ready" => ("503 Service Unavailable", "recovering\n"),
                        _ => ("404 Not Found", "not found\n"),
                    };
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                });
            }
        }
    }
}
