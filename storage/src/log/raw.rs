//! Appends that keep the batches' own offsets: `strom migrate` copies another Kafka log
//! offset for offset, so consumers' committed offsets stay valid on Strom.

use bytes::Bytes;
use std::future::Future;

use super::{AppendOptions, AppendResult, Durability, PartitionLog};
use crate::batch;
use crate::error::StorageError;

impl PartitionLog {
    /// Appends v2 batches at their own base offsets (not rewritten; the partition leader
    /// epoch, outside the CRC, is set to `leader_epoch`). Every base offset must be at or
    /// above the log end; gaps between batches (as compaction leaves them, Kafka allows
    /// them) are kept. An empty log whose end is below the first base offset starts afresh
    /// there (Kafka's `truncateFullyAndStartAt`), so its log start is the source's.
    /// The caller validates the batches (`batch::validate_stored`) first.
    pub fn append_at_offsets(
        &self,
        batches: impl Into<Bytes>,
        durability: Durability,
        leader_epoch: i32,
    ) -> impl Future<Output = Result<AppendResult, StorageError>> + 'static {
        let batches: Bytes = batches.into();
        let started = (|| {
            let first = batch::frame(&batches)?.base_offset;
            if first > self.inner.log_end.get() && self.size_bytes() == 0 {
                self.truncate_fully_and_start_at(first)?;
            }
            let opts = AppendOptions {
                durability,
                log_append_time_ms: None,
                leader_epoch,
            };
            self.inner.start_append(batches, &opts, true)
        })();
        let epoch = self.inner.truncations.get();
        self.finish_append(started, durability, epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Durability, PartitionLog};
    use crate::batch::BatchHeader;
    use crate::config::LogConfig;
    use crate::io::{IoBackend, IoBackendKind};
    use crate::test_support::run;
    use bytes::BytesMut;

    /// A minimal valid uncompressed batch of `n` empty records at `base`.
    fn batch_at(base: i64, n: i32) -> BytesMut {
        let mut records = Vec::new();
        for i in 0..n {
            // length, attributes, timestamp delta, offset delta, key -1, value -1, 0 headers
            let body = [0u8, 0, (i as u8) << 1, 1, 1, 0];
            records.push(body.len() as u8 * 2);
            records.extend_from_slice(&body);
        }
        let mut b = Vec::new();
        b.extend_from_slice(&base.to_be_bytes());
        b.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
        b.extend_from_slice(&7i32.to_be_bytes()); // leader epoch
        b.push(2);
        b.extend_from_slice(&0u32.to_be_bytes()); // crc, set below
        b.extend_from_slice(&0i16.to_be_bytes());
        b.extend_from_slice(&(n - 1).to_be_bytes());
        b.extend_from_slice(&1_000i64.to_be_bytes());
        b.extend_from_slice(&1_000i64.to_be_bytes());
        b.extend_from_slice(&(-1i64).to_be_bytes());
        b.extend_from_slice(&(-1i16).to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&n.to_be_bytes());
        b.extend_from_slice(&records);
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        BytesMut::from(&b[..])
    }

    #[test]
    fn given_gaps_and_late_start_when_appending_at_offsets_then_offsets_kept_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        run(async {
            let io = IoBackend::new(IoBackendKind::from_env()).unwrap();
            let open = || {
                PartitionLog::open(dir.path(), "t", 0, LogConfig::default(), io.clone(), 0).unwrap()
            };
            let log = open();
            let r = log
                .append_at_offsets(batch_at(100, 3), Durability::Fsync, 0)
                .await
                .unwrap();
            assert_eq!((r.base_offset, r.last_offset), (100, 102));
            assert_eq!(log.log_start_offset(), 100);
            // A gap (103..110 compacted away on the source) is kept.
            log.append_at_offsets(batch_at(110, 2), Durability::Fsync, 0)
                .await
                .unwrap();
            assert_eq!(log.log_end_offset(), 112);
            let err = log
                .append_at_offsets(batch_at(111, 1), Durability::Fsync, 0)
                .await
                .unwrap_err();
            assert!(err.to_string().contains("below the log end"), "{err}");
            assert_eq!(log.log_end_offset(), 112);
            // A read from inside the gap starts at the next batch.
            let read = log.read(105, 1 << 20, i64::MAX).unwrap();
            let first = BatchHeader::parse(&read.chunks[0]).unwrap();
            assert_eq!(first.base_offset, 110);
            assert_eq!(first.partition_leader_epoch, 0);
            drop(log);
            let log = open();
            assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 112));
            let heads: Vec<i64> = log
                .batch_headers_from(100)
                .unwrap()
                .iter()
                .map(|h| h.base_offset)
                .collect();
            assert_eq!(heads, vec![100, 110]);
        });
    }
}
