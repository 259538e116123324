//! Prometheus metrics of `strom migrate mirror` and `strom migrate import`, served on `/metrics`
//! (and `/health`) of the admin address while the migrator runs: the address `strom serve`
//! would use on this data dir, free because the migrator holds the data-dir lock, so the
//! scrape job that will watch the broker watches the migration first.
//!
//! The HTTP listener runs on its own thread with its own runtime: the import verifies
//! segments with blocking reads on the migrator's thread, and a scrape must be answered
//! meanwhile. The counters are the `prometheus` crate's atomics, shared with that thread.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use prometheus::core::Collector;
use prometheus::{Encoder, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};
use tokio::sync::watch;

use super::{AdminArgs, MigrateError};
use crate::server::admin;

const PART: &[&str] = &["topic", "partition"];

fn register<C: Collector + Clone + 'static>(r: &Registry, c: C) -> C {
    r.register(Box::new(c.clone())).expect("unique metric");
    c
}

fn counter(r: &Registry, name: &str, help: &str) -> IntCounter {
    register(r, IntCounter::new(name, help).expect("valid metric"))
}

fn gauge(r: &Registry, name: &str, help: &str) -> IntGauge {
    register(r, IntGauge::new(name, help).expect("valid metric"))
}

fn counter_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    register(
        r,
        IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"),
    )
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    register(
        r,
        IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric"),
    )
}

/// What `strom migrate mirror` counts, per source partition and group.
#[derive(Clone)]
pub struct MirrorMetrics {
    source_end: IntGaugeVec,
    copied_end: IntGaugeVec,
    lag: IntGaugeVec,
    bytes: IntCounterVec,
    batches: IntCounterVec,
    group_offset: IntGaugeVec,
    group_offsets_copied: IntCounter,
    source_errors: IntCounterVec,
    pub source_retries: IntCounter,
    caught_up: IntGauge,
}

impl MirrorMetrics {
    pub fn new(r: &Registry) -> MirrorMetrics {
        MirrorMetrics {
            source_end: gauge_vec(
                r,
                "strom_migrate_source_end_offset",
                "The source partition's high watermark as last fetched.",
                PART,
            ),
            copied_end: gauge_vec(
                r,
                "strom_migrate_copied_end_offset",
                "Strom's log end for the partition: every source offset below it is copied \
                 (fdatasync'd within a second, before it is recorded as progress).",
                PART,
            ),
            lag: gauge_vec(
                r,
                "strom_migrate_lag",
                "Records (offsets) the source partition holds beyond what is copied.",
                PART,
            ),
            bytes: counter_vec(
                r,
                "strom_migrate_bytes_copied_total",
                "Record batch bytes copied from the source partition (rate() is the throughput).",
                PART,
            ),
            batches: counter_vec(
                r,
                "strom_migrate_batches_copied_total",
                "Record batches copied from the source partition.",
                PART,
            ),
            group_offset: gauge_vec(
                r,
                "strom_migrate_group_offset_copied",
                "The committed offset copied to Strom, per group and partition.",
                &["group", "topic", "partition"],
            ),
            group_offsets_copied: counter(
                r,
                "strom_migrate_group_offsets_copied_total",
                "Committed offsets written to Strom's __consumer_offsets (changed ones only).",
            ),
            source_errors: counter_vec(
                r,
                "strom_migrate_source_errors_total",
                "Errors from the source: `request` (connection, timeout, unexpected answer; \
                 the round is retried) or a partition error code (handled by re-reading \
                 metadata or offsets).",
                &["error"],
            ),
            source_retries: counter(
                r,
                "strom_migrate_source_retries_total",
                "Copy rounds retried after a failed source request.",
            ),
            caught_up: gauge(
                r,
                "strom_migrate_caught_up",
                "1 when every partition is copied up to the source's high watermark as last fetched.",
            ),
        }
    }

    /// The partition's copied end and, once known (>= 0), the source's end and the lag.
    pub fn partition(&self, topic: &str, p: i32, source_end: i64, copied_end: i64) {
        let ps = p.to_string();
        let labels = [topic, ps.as_str()];
        self.copied_end.with_label_values(&labels).set(copied_end);
        if source_end >= 0 {
            self.source_end.with_label_values(&labels).set(source_end);
            self.lag
                .with_label_values(&labels)
                .set((source_end - copied_end).max(0));
        }
    }

    pub fn copied(&self, topic: &str, p: i32, batches: usize, bytes: usize) {
        let ps = p.to_string();
        let labels = [topic, ps.as_str()];
        self.batches
            .with_label_values(&labels)
            .inc_by(batches as u64);
        self.bytes.with_label_values(&labels).inc_by(bytes as u64);
    }

    /// A committed offset now on Strom; `written`: it was copied by this run just now.
    pub fn group_offset(&self, group: &str, topic: &str, p: i32, offset: i64, written: bool) {
        let ps = p.to_string();
        self.group_offset
            .with_label_values(&[group, topic, ps.as_str()])
            .set(offset);
        if written {
            self.group_offsets_copied.inc();
        }
    }

    pub fn source_error(&self, error: &str) {
        self.source_errors.with_label_values(&[error]).inc();
    }

    pub fn set_caught_up(&self, caught_up: bool) {
        self.caught_up.set(caught_up as i64);
    }
}

/// What `strom migrate import` counts, per topic.
#[derive(Clone)]
pub struct ImportMetrics {
    pub partitions: IntGauge,
    partitions_verified: IntCounterVec,
    batches_verified: IntCounterVec,
    bytes_verified: IntCounterVec,
    partitions_appended: IntCounterVec,
    batches_appended: IntCounterVec,
    bytes_appended: IntCounterVec,
    pub producer_snapshots: IntCounter,
    pub groups: IntCounter,
    pub group_offsets: IntCounter,
    /// Bytes verified and appended over all topics, for the progress display.
    verified_total: Arc<AtomicU64>,
    appended_total: Arc<AtomicU64>,
}

impl ImportMetrics {
    pub fn new(r: &Registry) -> ImportMetrics {
        let topic = &["topic"];
        ImportMetrics {
            partitions: gauge(
                r,
                "strom_migrate_import_partitions",
                "Partitions of the Kafka log dir to import (those matching --topics).",
            ),
            partitions_verified: counter_vec(
                r,
                "strom_migrate_import_partitions_verified_total",
                "Partitions whose every segment was read and verified (first pass).",
                topic,
            ),
            batches_verified: counter_vec(
                r,
                "strom_migrate_import_batches_verified_total",
                "Record batches verified (framing, CRC-32C, offsets).",
                topic,
            ),
            bytes_verified: counter_vec(
                r,
                "strom_migrate_import_bytes_verified_total",
                "Record batch bytes verified.",
                topic,
            ),
            partitions_appended: counter_vec(
                r,
                "strom_migrate_import_partitions_appended_total",
                "Partitions appended to Strom's log in full.",
                topic,
            ),
            batches_appended: counter_vec(
                r,
                "strom_migrate_import_batches_appended_total",
                "Record batches appended to Strom's log at their offsets.",
                topic,
            ),
            bytes_appended: counter_vec(
                r,
                "strom_migrate_import_bytes_appended_total",
                "Record batch bytes appended to Strom's log.",
                topic,
            ),
            producer_snapshots: counter(
                r,
                "strom_migrate_import_producer_snapshots_total",
                "Kafka producer snapshots carried into Strom's partitions.",
            ),
            groups: counter(
                r,
                "strom_migrate_import_groups_total",
                "Consumer groups whose committed offsets were carried over.",
            ),
            group_offsets: counter(
                r,
                "strom_migrate_import_group_offsets_total",
                "Committed offsets carried into Strom's __consumer_offsets.",
            ),
            verified_total: Default::default(),
            appended_total: Default::default(),
        }
    }

    /// (bytes verified, bytes appended) over all topics, updated as the passes go.
    pub fn byte_totals(&self) -> (Arc<AtomicU64>, Arc<AtomicU64>) {
        (self.verified_total.clone(), self.appended_total.clone())
    }

    pub fn verified(&self, topic: &str, batches: usize, bytes: usize) {
        self.batches_verified
            .with_label_values(&[topic])
            .inc_by(batches as u64);
        self.bytes_verified
            .with_label_values(&[topic])
            .inc_by(bytes as u64);
        self.verified_total
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn partition_verified(&self, topic: &str) {
        self.partitions_verified.with_label_values(&[topic]).inc();
    }

    pub fn appended(&self, topic: &str, batches: usize, bytes: usize) {
        self.batches_appended
            .with_label_values(&[topic])
            .inc_by(batches as u64);
        self.bytes_appended
            .with_label_values(&[topic])
            .inc_by(bytes as u64);
        self.appended_total
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn partition_appended(&self, topic: &str) {
        self.partitions_appended.with_label_values(&[topic]).inc();
    }
}

/// Every metric name the migrator serves (for the test that keeps deploy/ in sync): one
/// series of each family, since families without series are left out of a scrape.
pub fn names() -> Vec<String> {
    let r = Registry::new();
    let m = MirrorMetrics::new(&r);
    m.partition("t", 0, 1, 0);
    m.copied("t", 0, 1, 1);
    m.group_offset("g", "t", 0, 1, true);
    m.source_error("request");
    let i = ImportMetrics::new(&r);
    i.verified("t", 1, 1);
    i.partition_verified("t");
    i.appended("t", 1, 1);
    i.partition_appended("t");
    r.gather().iter().map(|f| f.name().to_string()).collect()
}

fn render(r: &Registry) -> String {
    let mut out = Vec::new();
    // Encoding into a Vec cannot fail for well-formed metrics.
    let _ = prometheus::TextEncoder::new().encode(&r.gather(), &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// The migrator's `/metrics` and `/health` listener; stops when dropped.
pub struct AdminServer {
    pub addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves `registry` on `--admin-listen`, else on the config's admin address (`default`).
/// A default address that cannot be bound is a warning and no metrics: the migration
/// matters more than its metrics. An explicit one is an error.
pub fn serve(
    args: &AdminArgs,
    default: SocketAddr,
    registry: Registry,
) -> Result<Option<AdminServer>, MigrateError> {
    let addr = args.admin_listen.unwrap_or(default);
    let listener = match std::net::TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) if args.admin_listen.is_some() => {
            return Err(MigrateError::Usage(format!(
                "--admin-listen {addr}: cannot bind: {e}"
            )))
        }
        Err(e) => {
            tracing::warn!(%addr, error = %e,
                "cannot bind the admin address; migrating without /metrics (set --admin-listen)");
            return Ok(None);
        }
    };
    let io = |e: std::io::Error| MigrateError::Usage(format!("admin listener {addr}: {e}"));
    let addr = listener.local_addr().map_err(io)?;
    let (shutdown, rx) = watch::channel(false);
    let router = axum::Router::new()
        .route("/health", axum::routing::get(|| async { "ok\n" }))
        .route(
            "/metrics",
            axum::routing::get(move || {
                let text = render(&registry);
                async move { admin::prometheus_text(text) }
            }),
        );
    let thread = admin::spawn_thread("migrate-admin", listener, router, rx).map_err(io)?;
    tracing::info!(%addr, "migration metrics on http://{addr}/metrics");
    Ok(Some(AdminServer {
        addr,
        shutdown,
        thread: Some(thread),
    }))
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// The value of the series of `name` carrying all of `labels`, if there is one.
    pub fn sample(r: &Registry, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let families = r.gather();
        let f = families.iter().find(|f| f.name() == name)?;
        let m = f.get_metric().iter().find(|m| {
            labels.iter().all(|(k, v)| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == *k && l.value() == *v)
            })
        })?;
        // A family holds counters or gauges; the other's value reads as 0.
        Some(m.get_counter().get_value() + m.get_gauge().get_value())
    }

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn given_partition_ends_when_set_then_lag_is_the_difference_and_unknown_source_has_none() {
        let r = Registry::new();
        let m = MirrorMetrics::new(&r);
        let p0 = [("topic", "t"), ("partition", "0")];
        m.partition("t", 0, -1, 5);
        assert_eq!(
            sample(&r, "strom_migrate_copied_end_offset", &p0),
            Some(5.0)
        );
        assert_eq!(sample(&r, "strom_migrate_lag", &p0), None);
        m.partition("t", 0, 12, 5);
        assert_eq!(
            sample(&r, "strom_migrate_source_end_offset", &p0),
            Some(12.0)
        );
        assert_eq!(sample(&r, "strom_migrate_lag", &p0), Some(7.0));
        m.partition("t", 0, 12, 12);
        assert_eq!(sample(&r, "strom_migrate_lag", &p0), Some(0.0));
        m.copied("t", 0, 2, 300);
        m.copied("t", 0, 1, 100);
        assert_eq!(
            sample(&r, "strom_migrate_bytes_copied_total", &p0),
            Some(400.0)
        );
        assert_eq!(
            sample(&r, "strom_migrate_batches_copied_total", &p0),
            Some(3.0)
        );
        m.group_offset("g", "t", 0, 9, false);
        assert_eq!(
            sample(&r, "strom_migrate_group_offset_copied", &[("group", "g")]),
            Some(9.0)
        );
        assert_eq!(
            sample(&r, "strom_migrate_group_offsets_copied_total", &[]),
            Some(0.0)
        );
    }

    #[test]
    fn given_admin_listen_when_scraped_over_tcp_then_metrics_and_health_answer() {
        let r = Registry::new();
        let m = MirrorMetrics::new(&r);
        m.copied("orders", 3, 1, 42);
        let args = AdminArgs {
            admin_listen: Some("127.0.0.1:0".parse().unwrap()),
        };
        let unused = "127.0.0.1:1".parse().unwrap();
        let server = serve(&args, unused, r)
            .unwrap()
            .expect("explicit address binds");
        let body = get(server.addr, "/metrics");
        assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
        assert!(
            body.contains("strom_migrate_bytes_copied_total{partition=\"3\",topic=\"orders\"} 42"),
            "{body}"
        );
        assert!(get(server.addr, "/health").ends_with("\r\n\r\nok\n"));
        assert!(get(server.addr, "/nope").starts_with("HTTP/1.1 404"));
        let addr = server.addr;
        drop(server);
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "the listener stops with the server"
        );
    }

    #[test]
    fn given_busy_address_when_serving_then_explicit_fails_and_default_goes_on_without() {
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = busy.local_addr().unwrap();
        let explicit = AdminArgs {
            admin_listen: Some(addr),
        };
        let err = serve(&explicit, addr, Registry::new())
            .err()
            .expect("an explicit address that cannot be bound is an error")
            .to_string();
        assert!(err.contains(&format!("--admin-listen {addr}")), "{err}");
        let default = serve(&AdminArgs::default(), addr, Registry::new()).unwrap();
        assert!(default.is_none(), "the default address is busy: no metrics");
    }
}
