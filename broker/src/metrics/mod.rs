//! Metrics, thread-per-core style: every shard owns its own `prometheus::Registry` and its
//! counters (`ShardMetrics`), written only by that shard's thread, so counting a request costs
//! an uncontended relaxed add and no shared lock. Nothing is aggregated on the hot path.
//!
//! On a scrape the admin thread (`scrape`) asks every shard, through the same cross-shard
//! `invoke_on` the handlers use, for its registry's families plus a snapshot of what only the
//! shard may read (partition sizes and offsets, fdatasync stats, busy time, consumer groups),
//! labels each series with `shard`, merges the families and renders Prometheus text.

pub mod cluster;
pub mod families;
pub mod flow;
pub mod scrape;
pub mod snapshot;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};

/// Request latency buckets (seconds): 100 µs to 10 s. A long-poll Fetch sits at its
/// `max_wait_ms`, an acks=all Produce at an fdatasync, metadata calls far below.
const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Version labels without formatting a string per request.
const VERSION_LABELS: [&str; 24] = [
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
    "17", "18", "19", "20", "21", "22", "23",
];

/// Counters of one partition, looked up once per partition and then reused.
#[derive(Clone)]
pub struct PartitionCounters {
    pub bytes: IntCounter,
    pub records: IntCounter,
}

/// Produced and fetched counters of one partition.
type PartitionPair = (PartitionCounters, PartitionCounters);

/// One shard's metrics. Lives in `ShardState` (`Rc`, this thread only).
pub struct ShardMetrics {
    pub registry: Registry,
    pub connections_open: IntGauge,
    pub connections_accepted: IntCounter,
    pub connections_closed: IntCounter,
    produced_bytes: IntCounterVec,
    produced_records: IntCounterVec,
    fetched_bytes: IntCounterVec,
    fetched_records: IntCounterVec,
    request_duration: HistogramVec,
    pub cross_shard_sent: IntCounter,
    pub cross_shard_received: IntCounter,
    /// Log cleaner passes completed on the shard, and the bytes they wrote.
    pub log_cleaner_passes: IntCounter,
    pub log_cleaner_bytes_written: IntCounter,
    /// Record bytes Fetch responses carried, and how many of them the broker copied on the
    /// way from the page cache to the socket (0: they go as slices of the mapped segments).
    pub fetch_record_bytes: IntCounter,
    pub fetch_record_bytes_copied: IntCounter,
    /// TLS handshakes that failed or whose certificate mapped to no principal, by listener.
    pub tls_handshake_failures: IntCounterVec,
    /// SASL authentications by listener, mechanism and result (success, failure).
    pub authentications: IntCounterVec,
    /// PII redaction (`crate::redact`): matches masked, by topic and rule.
    pub redactions: IntCounterVec,
    /// Share group dead-letter writes (KIP-1191), by group: records written, and writes that
    /// failed (Kafka's DeadLetterQueueRecordCount and DeadLetterQueueFailedProduceRequests).
    pub share_dlq_records: IntCounterVec,
    pub share_dlq_failures: IntCounterVec,
    /// ISR changes of the partitions this shard leads (Kafka's `IsrShrinksPerSec`,
    /// `IsrExpandsPerSec`), counted by `count_isr_moves`.
    isr_shrinks: IntCounter,
    isr_expands: IntCounter,
    /// Per (topic, partition): produced and fetched counters, so the hot path hashes one small
    /// key instead of the label strings.
    partitions: RefCell<HashMap<(Arc<str>, i32), PartitionPair>>,
    /// Per (api key, version): the latency histogram.
    requests: RefCell<HashMap<(i16, i16), Histogram>>,
    /// Dedup, expiry and embedding counters (issue 20).
    pub flow: flow::FlowMetrics,
}

impl Default for ShardMetrics {
    fn default() -> Self {
        Self::new()
    }
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("unique metric");
    c
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("unique metric");
    c
}

impl ShardMetrics {
    pub fn new() -> ShardMetrics {
        let r = Registry::new();
        let connections_open = IntGauge::new(
            "strom_connections_open",
            "Client connections currently open on the shard.",
        )
        .expect("valid metric");
        r.register(Box::new(connections_open.clone()))
            .expect("unique metric");
        let part = ["topic", "partition"];
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "strom_request_duration_seconds",
                "Time from a request frame read to its response ready, by API and version.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["api", "version"],
        )
        .expect("valid metric");
        r.register(Box::new(request_duration.clone()))
            .expect("unique metric");
        ShardMetrics {
            isr_shrinks: counter(
                &r,
                "strom_isr_shrinks_total",
                "ISR shrinks of the partitions this node leads (a follower fell behind or its broker was fenced); Kafka's IsrShrinksPerSec.",
            ),
            isr_expands: counter(
                &r,
                "strom_isr_expands_total",
                "ISR expansions of the partitions this node leads (a follower caught up again); Kafka's IsrExpandsPerSec.",
            ),
            redactions: counter_vec(
                &r,
                "strom_redactions_total",
                "PII matches masked on produce (strom.redact.rules), by topic and rule; counted on the partition's home shard.",
                &["topic", "rule"],
            ),
            share_dlq_records: counter_vec(
                &r,
                "strom_share_group_dlq_records_total",
                "Records a share group wrote to its dead-letter topic (errors.deadletterqueue.topic.name).",
                &["group"],
            ),
            share_dlq_failures: counter_vec(
                &r,
                "strom_share_group_dlq_failures_total",
                "Dead-letter writes of a share group that failed; their records were archived regardless, as Kafka does.",
                &["group"],
            ),
            authentications: counter_vec(
                &r,
                "strom_authentications_total",
                "SASL authentications (and re-authentications), by listener, mechanism and result.",
                &["listener", "mechanism", "result"],
            ),
            tls_handshake_failures: counter_vec(
                &r,
                "strom_tls_handshake_failures_total",
                "TLS handshakes that failed (or whose client certificate no principal mapping rule applies to), by listener.",
                &["listener"],
            ),
            fetch_record_bytes: counter(
                &r,
                "strom_fetch_record_bytes_total",
                "Record bytes the shard's Fetch responses carried.",
            ),
            fetch_record_bytes_copied: counter(
                &r,
                "strom_fetch_record_bytes_copied_total",
                "Of those, bytes the broker copied between the page cache and the socket.",
            ),
            log_cleaner_passes: counter(
                &r,
                "strom_log_cleaner_passes_total",
                "Log cleaning passes completed on the shard (compacted topics).",
            ),
            log_cleaner_bytes_written: counter(
                &r,
                "strom_log_cleaner_bytes_written_total",
                "Bytes of cleaned segments the shard's log cleaner wrote.",
            ),
            connections_open,
            connections_accepted: counter(
                &r,
                "strom_connections_accepted_total",
                "Client connections accepted by the shard.",
            ),
            connections_closed: counter(
                &r,
                "strom_connections_closed_total",
                "Client connections closed on the shard.",
            ),
            produced_bytes: counter_vec(
                &r,
                "strom_produced_bytes_total",
                "Record batch bytes appended to the partition (counted on its home shard).",
                &part,
            ),
            produced_records: counter_vec(
                &r,
                "strom_produced_records_total",
                "Records appended to the partition (counted on its home shard).",
                &part,
            ),
            fetched_bytes: counter_vec(
                &r,
                "strom_fetched_bytes_total",
                "Record batch bytes sent in Fetch responses (counted on the connection's shard).",
                &part,
            ),
            fetched_records: counter_vec(
                &r,
                "strom_fetched_records_total",
                "Records in batches sent in Fetch responses (counted on the connection's shard).",
                &part,
            ),
            request_duration,
            cross_shard_sent: counter(
                &r,
                "strom_cross_shard_sent_total",
                "Messages this shard sent to other shards (invoke_on to a remote home).",
            ),
            cross_shard_received: counter(
                &r,
                "strom_cross_shard_received_total",
                "Messages this shard received from other shards or the admin thread.",
            ),
            flow: flow::FlowMetrics::new(&r),
            registry: r,
            partitions: RefCell::new(HashMap::new()),
            requests: RefCell::new(HashMap::new()),
        }
    }

    fn partition(
        &self,
        topic: &Arc<str>,
        partition: i32,
    ) -> (PartitionCounters, PartitionCounters) {
        if let Some(c) = self.partitions.borrow().get(&(topic.clone(), partition)) {
            return c.clone();
        }
        let p = partition.to_string();
        let labels = [topic.as_ref(), p.as_str()];
        let c = (
            PartitionCounters {
                bytes: self.produced_bytes.with_label_values(&labels),
                records: self.produced_records.with_label_values(&labels),
            },
            PartitionCounters {
                bytes: self.fetched_bytes.with_label_values(&labels),
                records: self.fetched_records.with_label_values(&labels),
            },
        );
        self.partitions
            .borrow_mut()
            .insert((topic.clone(), partition), c.clone());
        c
    }

    pub fn count_produced(&self, topic: &Arc<str>, partition: i32, bytes: u64, records: u64) {
        let (p, _) = self.partition(topic, partition);
        p.bytes.inc_by(bytes);
        p.records.inc_by(records);
    }

    pub fn count_fetched(&self, topic: &Arc<str>, partition: i32, bytes: u64, records: u64) {
        if bytes == 0 {
            return;
        }
        let (_, f) = self.partition(topic, partition);
        f.bytes.inc_by(bytes);
        f.records.inc_by(records);
    }

    /// Drops the series of a deleted topic's partitions, so a scrape no longer shows them (and
    /// a topic re-created under the same name starts its counters at zero, as a new series).
    pub fn forget_topic(&self, topic: &str) {
        self.flow.forget_topic(topic);
        self.partitions
            .borrow_mut()
            .retain(|(t, p), _| t.as_ref() != topic || !self.remove_partition(topic, *p));
    }

    /// Removes one partition's series from the four families; always true (for `retain`).
    fn remove_partition(&self, topic: &str, partition: i32) -> bool {
        let p = partition.to_string();
        let labels = [topic, p.as_str()];
        for family in [
            &self.produced_bytes,
            &self.produced_records,
            &self.fetched_bytes,
            &self.fetched_records,
        ] {
            // Err only when the series was never created (e.g. never fetched): nothing to do.
            let _ = family.remove_label_values(&labels);
        }
        true
    }

    /// An ISR change seen by its leader, whoever made it: the leader's own lag check
    /// (`AlterIsr`) or the controller fencing a follower, as Kafka's `IsrShrinksPerSec` counts
    /// a broker going down.
    pub fn count_isr_moves(&self, moves: crate::partition::replica::IsrMoves) {
        if moves.shrank {
            self.isr_shrinks.inc();
        }
        if moves.expanded {
            self.isr_expands.inc();
        }
    }

    pub fn observe_request(&self, api: impl Into<crate::codec::Api>, version: i16, secs: f64) {
        let api = api.into();
        let key = (api.0, version);
        if let Some(h) = self.requests.borrow().get(&key) {
            h.observe(secs);
            return;
        }
        let v = VERSION_LABELS
            .get(version as usize)
            .map(|s| s.to_string())
            .unwrap_or_else(|| version.to_string());
        let h = self
            .request_duration
            .with_label_values(&[format!("{api:?}").as_str(), v.as_str()]);
        h.observe(secs);
        self.requests.borrow_mut().insert(key, h);
    }
}

/// Records in the v2 record batches laid end to end in `data` (a fetch response's records):
/// each batch header holds its length at byte 8 and its record count at byte 57. A partial
/// batch at the end (Kafka may send one) counts no records.
pub fn records_in_batches(data: &[u8]) -> u64 {
    const LENGTH_AT: usize = 8;
    const COUNT_AT: usize = 57;
    let mut n = 0u64;
    let mut at = 0usize;
    while data.len() >= at + COUNT_AT + 4 {
        let len = i32::from_be_bytes(
            data[at + LENGTH_AT..at + LENGTH_AT + 4]
                .try_into()
                .expect("4"),
        );
        let end = at + 12 + len.max(0) as usize;
        if len < 49 || end > data.len() {
            break;
        }
        let count = i32::from_be_bytes(
            data[at + COUNT_AT..at + COUNT_AT + 4]
                .try_into()
                .expect("4"),
        );
        n += count.max(0) as u64;
        at = end;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_two_batches_and_a_torn_third_when_counting_then_counts_whole_batches_only() {
        fn batch(records: i32, body: usize) -> Vec<u8> {
            let mut b = vec![0u8; 61 + body];
            let len = (b.len() - 12) as i32;
            b[8..12].copy_from_slice(&len.to_be_bytes());
            b[57..61].copy_from_slice(&records.to_be_bytes());
            b
        }
        let mut data = batch(3, 10);
        data.extend(batch(5, 0));
        let torn = batch(7, 20);
        data.extend(&torn[..40]);
        assert_eq!(records_in_batches(&data), 8);
        assert_eq!(records_in_batches(&[]), 0);
    }

    #[test]
    fn given_a_deleted_topic_when_forgotten_then_only_its_series_are_gone() {
        let m = ShardMetrics::new();
        let gone: Arc<str> = "gone".into();
        let kept: Arc<str> = "kept".into();
        m.count_produced(&gone, 0, 10, 1);
        m.count_produced(&gone, 1, 10, 1);
        m.count_fetched(&gone, 1, 10, 1);
        m.count_produced(&kept, 0, 10, 1);
        m.forget_topic("gone");
        let topics: Vec<String> = m
            .registry
            .gather()
            .iter()
            .flat_map(|f| f.get_metric().to_vec())
            .flat_map(|m| m.get_label().to_vec())
            .filter(|l| l.name() == "topic")
            .map(|l| l.value().to_string())
            .collect();
        // kept's partition 0 has its four series (produced and fetched bytes and records).
        assert_eq!(topics, vec!["kept".to_string(); 4], "only kept's series");
        // Counting again after a re-create starts a fresh series at zero.
        m.count_produced(&gone, 0, 5, 1);
        let (p, _) = m.partition(&gone, 0);
        assert_eq!(p.bytes.get(), 5);
    }

    #[test]
    fn given_requests_when_observed_then_one_series_per_api_and_version() {
        use kafka_protocol::messages::ApiKey;
        let m = ShardMetrics::new();
        m.observe_request(ApiKey::Produce, 11, 0.001);
        m.observe_request(ApiKey::Produce, 11, 0.002);
        m.observe_request(ApiKey::Fetch, 99, 0.002);
        let families = m.registry.gather();
        let h = families
            .iter()
            .find(|f| f.name() == "strom_request_duration_seconds")
            .expect("family");
        assert_eq!(h.get_metric().len(), 2);
        let counts: u64 = h
            .get_metric()
            .iter()
            .map(|m| m.get_histogram().get_sample_count())
            .sum();
        assert_eq!(counts, 3);
    }
}
