//! Counters of the AI-native flow features (issue 20), per topic, on the shard that does the
//! work: duplicates and evicted ids on the partition's home shard (where the dedup window
//! lives), refused vectors on the shard that validated the produce, expired records on the
//! home shard that filtered the fetch.

use prometheus::{IntCounterVec, Registry};

pub struct FlowMetrics {
    dedup_duplicates: IntCounterVec,
    dedup_evicted: IntCounterVec,
    embedding_rejected: IntCounterVec,
    expired_skipped: IntCounterVec,
}

impl FlowMetrics {
    pub fn new(r: &Registry) -> FlowMetrics {
        let topic = ["topic"];
        FlowMetrics {
            dedup_duplicates: super::counter_vec(
                r,
                "strom_dedup_duplicates_total",
                "Records not appended because their message id was seen in the dedup window (strom.dedup.header).",
                &topic,
            ),
            dedup_evicted: super::counter_vec(
                r,
                "strom_dedup_ids_evicted_total",
                "Message ids forgotten before their window ended because a partition held strom.dedup.max.ids.",
                &topic,
            ),
            embedding_rejected: super::counter_vec(
                r,
                "strom_embedding_rejected_total",
                "Records refused at produce for an invalid embedding (strom.embedding.*).",
                &topic,
            ),
            expired_skipped: super::counter_vec(
                r,
                "strom_records_expired_total",
                "Expired records Fetch left out of a batch (strom.ttl.header, strom.record.ttl.ms).",
                &topic,
            ),
        }
    }

    fn add(c: &IntCounterVec, topic: &str, n: u64) {
        if n > 0 {
            c.with_label_values(&[topic]).inc_by(n);
        }
    }

    pub fn count_dedup(&self, topic: &str, duplicates: u64, evicted: u64) {
        Self::add(&self.dedup_duplicates, topic, duplicates);
        Self::add(&self.dedup_evicted, topic, evicted);
    }

    pub fn count_embedding_rejected(&self, topic: &str, n: u64) {
        Self::add(&self.embedding_rejected, topic, n);
    }

    pub fn count_expired(&self, topic: &str, n: u64) {
        Self::add(&self.expired_skipped, topic, n);
    }

    /// Drops a deleted topic's series.
    pub fn forget_topic(&self, topic: &str) {
        for c in [
            &self.dedup_duplicates,
            &self.dedup_evicted,
            &self.embedding_rejected,
            &self.expired_skipped,
        ] {
            let _ = c.remove_label_values(&[topic]);
        }
    }
}
