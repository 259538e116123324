//! What the scrape gathers of each partition (`scrape.rs`), apart from the scrape itself so
//! that the cluster figures (`cluster.rs`), which the scrape renders, read it without an
//! import back up.

/// What one partition looks like on its home shard at scrape time.
#[derive(Debug, Clone)]
pub struct PartitionSnapshot {
    pub topic: String,
    pub partition: i32,
    pub size_bytes: u64,
    pub log_start: i64,
    pub log_end: i64,
    pub high_watermark: i64,
    pub last_stable: i64,
    pub open_transactions: usize,
    /// The partition's `min.insync.replicas`.
    pub min_isr: i32,
    /// On a replicated leader: where its followers are.
    pub followers: Vec<crate::partition::replica::FollowerLag>,
}
