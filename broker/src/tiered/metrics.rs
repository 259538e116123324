//! Tiered storage's metrics. Written from the remote runtime's threads and the shards, so
//! these are shared atomics in a registry of their own, gathered at scrape time
//! (`metrics::scrape::render`).

use prometheus::{Histogram, HistogramOpts, IntCounter, IntGaugeVec, Opts, Registry};

/// Remote fetch latency buckets (seconds): object stores answer in milliseconds to seconds.
const REMOTE_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

pub struct RemoteMetrics {
    pub registry: Registry,
    pub copy_bytes: IntCounter,
    pub copy_segments: IntCounter,
    pub copy_errors: IntCounter,
    pub delete_segments: IntCounter,
    pub log_size_bytes: IntGaugeVec,
    pub copy_lag_bytes: IntGaugeVec,
    pub copy_lag_segments: IntGaugeVec,
    pub fetch_seconds: Histogram,
    pub fetch_cache_hits: IntCounter,
    pub fetch_cache_misses: IntCounter,
    pub fetch_errors: IntCounter,
}

impl Default for RemoteMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl RemoteMetrics {
    pub fn new() -> RemoteMetrics {
        let registry = Registry::new();
        let counter = |name: &str, help: &str| {
            let c = IntCounter::new(name, help).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let gauge = |name: &str, help: &str| {
            let g = IntGaugeVec::new(Opts::new(name, help), &["topic", "partition"])
                .expect("valid metric");
            registry
                .register(Box::new(g.clone()))
                .expect("unique metric");
            g
        };
        let fetch_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "strom_remote_fetch_seconds",
                "time to serve one partition of a fetch from the object store (cache included)",
            )
            .buckets(REMOTE_BUCKETS.to_vec()),
        )
        .expect("valid metric");
        registry
            .register(Box::new(fetch_seconds.clone()))
            .expect("unique metric");
        RemoteMetrics {
            copy_bytes: counter(
                "strom_remote_copy_bytes_total",
                "bytes of segments copied to the object store",
            ),
            copy_segments: counter(
                "strom_remote_copy_segments_total",
                "segments copied to the object store (COPY_SEGMENT_FINISHED)",
            ),
            copy_errors: counter(
                "strom_remote_copy_errors_total",
                "segment copies that failed (retried later)",
            ),
            delete_segments: counter(
                "strom_remote_delete_segments_total",
                "remote segments deleted (retention, orphan cleanup)",
            ),
            log_size_bytes: gauge(
                "strom_remote_log_size_bytes",
                "bytes of a partition's segments in the object store (Kafka's RemoteLogSizeBytes)",
            ),
            copy_lag_bytes: gauge(
                "strom_remote_copy_lag_bytes",
                "bytes of closed segments not yet copied (Kafka's RemoteCopyLagBytes)",
            ),
            copy_lag_segments: gauge(
                "strom_remote_copy_lag_segments",
                "closed segments not yet copied (Kafka's RemoteCopyLagSegments)",
            ),
            fetch_cache_hits: counter(
                "strom_remote_fetch_cache_hits_total",
                "remote reads answered from the read-ahead cache",
            ),
            fetch_cache_misses: counter(
                "strom_remote_fetch_cache_misses_total",
                "remote reads that went to the object store",
            ),
            fetch_errors: counter(
                "strom_remote_fetch_errors_total",
                "remote reads that failed (Kafka's RemoteFetchErrorsPerSec)",
            ),
            fetch_seconds,
            registry,
        }
    }

    pub fn set_partition(
        &self,
        topic: &str,
        partition: i32,
        size: u64,
        lag_bytes: u64,
        lag_segments: usize,
    ) {
        let p = partition.to_string();
        let l = [topic, p.as_str()];
        self.log_size_bytes.with_label_values(&l).set(size as i64);
        self.copy_lag_bytes
            .with_label_values(&l)
            .set(lag_bytes as i64);
        self.copy_lag_segments
            .with_label_values(&l)
            .set(lag_segments as i64);
    }
}
