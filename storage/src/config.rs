//! The per-topic log config storage understands (Kafka's topic config names).

use crate::error::StorageError;

/// Per-topic log config (Kafka names in comments). Changes need a reopen of the log.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// segment.bytes: roll when the active segment would exceed this. Default 1 GiB.
    pub segment_bytes: u64,
    /// segment.ms: roll when the active segment's first batch is older. Default 7 days.
    pub segment_ms: u64,
    /// segment.index.bytes: index file size; roll when full. Default 10 MiB.
    pub segment_index_bytes: u64,
    /// index.interval.bytes: bytes between offset index entries. Default 4096.
    pub index_interval_bytes: u64,
    /// flush.messages: fdatasync after this many unflushed messages (offsets).
    /// Default i64::MAX (never; rely on durable appends and the OS).
    pub flush_messages: u64,
    /// flush.ms: fdatasync when the last one is older than this. Default i64::MAX.
    pub flush_ms: u64,
    /// file.delete.delay.ms: how long files of deleted segments stay (renamed `.deleted`)
    /// before they are unlinked. Default 60000. Readers' mmaps would survive an unlink too;
    /// the delay is kept for tools and operators that expect Kafka's behaviour.
    pub file_delete_delay_ms: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            flush_messages: i64::MAX as u64,
            flush_ms: i64::MAX as u64,
            file_delete_delay_ms: 60_000,
        }
    }
}

impl LogConfig {
    /// Bounds that keep the on-disk format readable by Kafka: file positions are 32-bit
    /// signed in Kafka's readers, so neither a segment nor an index may exceed i32::MAX
    /// bytes. Checked by `PartitionLog::open`.
    pub fn validate(&self) -> Result<(), StorageError> {
        let bad = |reason: String| {
            Err(StorageError::Invalid {
                what: "log config",
                reason,
            })
        };
        // 14: Kafka's own lower bound (LegacyRecord.RECORD_OVERHEAD_V0).
        if !(14..=i32::MAX as u64).contains(&self.segment_bytes) {
            return bad(format!(
                "segment.bytes {} not in [14, {}]",
                self.segment_bytes,
                i32::MAX
            ));
        }
        if self.segment_index_bytes > i32::MAX as u64 {
            return bad(format!(
                "segment.index.bytes {} above {}",
                self.segment_index_bytes,
                i32::MAX
            ));
        }
        Ok(())
    }
}
