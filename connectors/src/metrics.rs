//! Connector metrics (Prometheus text on the admin port's `/metrics`), labelled by connector.

use std::net::SocketAddr;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    pub records_written: IntCounterVec,
    pub batches_written: IntCounterVec,
    pub errors: IntCounterVec,
    pub dlq_records: IntCounterVec,
    pub sink_latency: HistogramVec,
    pub consumer_lag: IntGaugeVec,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let records_written = counter(
            "strom_connector_records_written_total",
            "Records the sink acknowledged (upserts and deletes).",
            &["connector"],
        );
        let batches_written = counter(
            "strom_connector_batches_written_total",
            "Batches the sink acknowledged.",
            &["connector"],
        );
        let errors = counter(
            "strom_connector_errors_total",
            "Errors by kind: record errors (to the DLQ), sink retries, commit failures.",
            &["connector", "kind"],
        );
        let dlq_records = counter(
            "strom_connector_dlq_records_total",
            "Records written to the dead-letter topic.",
            &["connector"],
        );
        let sink_latency = HistogramVec::new(
            HistogramOpts::new(
                "strom_connector_sink_latency_seconds",
                "Time of one acknowledged sink write, retries included.",
            )
            .buckets(prometheus::exponential_buckets(0.0005, 2.0, 16).expect("static buckets")),
            &["connector"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(sink_latency.clone()))
            .expect("unique metric");
        let consumer_lag = IntGaugeVec::new(
            Opts::new(
                "strom_connector_consumer_lag",
                "High watermark minus the next offset to write, per partition.",
            ),
            &["connector", "topic", "partition"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(consumer_lag.clone()))
            .expect("unique metric");
        Metrics {
            registry,
            records_written,
            batches_written,
            errors,
            dlq_records,
            sink_latency,
            consumer_lag,
        }
    }

    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail for well-formed metrics.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Serves `/metrics` and `/health` on `listener` until the task is dropped. One small
/// request per connection is all Prometheus needs.
pub async fn serve_admin(listener: tokio::net::TcpListener, metrics: Metrics) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let mut n = 0;
            // Read the request head (bounded; the body, if any, is ignored).
            while n < buf.len() {
                match tokio::time::timeout(
                    std::time::Duration::from_secs(5),
                    conn.read(&mut buf[n..]),
                )
                .await
                {
                    Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break,
                    Ok(Ok(k)) => n += k,
                }
                if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            let head = String::from_utf8_lossy(&buf[..n]);
            let path = head.split_whitespace().nth(1).unwrap_or("");
            let (status, ctype, body) = match path {
                "/metrics" => ("200 OK", "text/plain; version=0.0.4", metrics.render()),
                "/health" => ("200 OK", "text/plain", b"ok\n".to_vec()),
                _ => ("404 Not Found", "text/plain", b"not found\n".to_vec()),
            };
            let resp = format!(
                "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(resp.as_bytes()).await;
            let _ = conn.write_all(&body).await;
        });
    }
}

/// Binds the admin listener (so a bad address fails at start).
pub async fn bind_admin(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}
