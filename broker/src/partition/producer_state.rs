//! Idempotent-producer state of one partition: Kafka's `ProducerStateManager` semantics,
//! written once here and used by the produce path on the partition's home shard.
//!
//! For each producer id we keep its epoch and the metadata of its last five batches (Kafka's
//! `NUM_BATCHES_TO_RETAIN`), which is what lets a retried batch be answered with its original
//! offset instead of being written twice.
//!
//! Transactional producers add Kafka's `currentTxnFirstOffset` (the first offset of the
//! transaction open on this partition, which holds the last stable offset back) and the
//! coordinator epoch of the last marker (which fences zombie coordinators). The transaction
//! rules themselves (verification, markers, LSO) are in `partition::txn`.

use std::collections::{HashMap, VecDeque};

/// Kafka keeps this many batches per producer for duplicate detection; clients keep at most
/// 5 requests in flight per connection for exactly this reason.
pub const BATCHES_TO_RETAIN: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<BatchMeta>,
    pub last_timestamp: i64,
    /// Coordinator epoch of the last transaction marker, -1 before any.
    pub coordinator_epoch: i32,
    /// First offset of the transaction this producer has open on the partition.
    pub current_txn_first_offset: Option<i64>,
}

impl Default for ProducerEntry {
    fn default() -> Self {
        ProducerEntry {
            epoch: 0,
            batches: VecDeque::new(),
            last_timestamp: 0,
            coordinator_epoch: -1,
            current_txn_first_offset: None,
        }
    }
}

impl ProducerEntry {
    fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }
}

/// What the produce path should do with a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceVerdict {
    /// New data in sequence: append it.
    Append,
    /// A retry of a batch already in the log: answer with its original offsets, write nothing.
    Duplicate(BatchMeta),
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SequenceError {
    #[error("Epoch of producer {producer_id} at offset {offset} is {epoch}, which is smaller than the last seen epoch {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current: i16,
        offset: i64,
    },
    #[error("Out of order sequence number for producer {producer_id} at offset {offset}: {first_seq} (incoming seq. number), {last_seq} (current end sequence number)")]
    OutOfOrder {
        producer_id: i64,
        first_seq: i32,
        last_seq: i32,
        offset: i64,
    },
    #[error("Invalid sequence number for new epoch of producer {producer_id} at offset {offset}: {epoch} (request epoch), {first_seq} (seq. number), {current} (current producer epoch)")]
    NewEpochNotZero {
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        current: i16,
        offset: i64,
    },
}

/// `DefaultRecordBatch.incrementSequence`: sequences wrap from i32::MAX to 0.
pub fn increment_sequence(seq: i32, by: i32) -> i32 {
    if seq > i32::MAX - by {
        by - (i32::MAX - seq) - 1
    } else {
        seq + by
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq as i64 == last_seq as i64 + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

#[derive(Debug, Default)]
pub struct ProducerStateTable {
    producers: HashMap<i64, ProducerEntry>,
}

impl ProducerStateTable {
    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Kafka's duplicate check, then `checkProducerEpoch` and `checkSequence`, for a batch of
    /// a client producer that would be written at `next_offset`.
    pub fn check(
        &self,
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
        next_offset: i64,
    ) -> Result<SequenceVerdict, SequenceError> {
        let Some(entry) = self.producers.get(&producer_id) else {
            // No state (new producer, or its data was deleted): Kafka accepts any sequence.
            return Ok(SequenceVerdict::Append);
        };
        if epoch == entry.epoch {
            if let Some(dup) = entry
                .batches
                .iter()
                .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
            {
                return Ok(SequenceVerdict::Duplicate(*dup));
            }
        }
        if epoch < entry.epoch {
            return Err(SequenceError::InvalidProducerEpoch {
                producer_id,
                epoch,
                current: entry.epoch,
                offset: next_offset,
            });
        }
        if epoch != entry.epoch {
            if first_seq != 0 {
                return Err(SequenceError::NewEpochNotZero {
                    producer_id,
                    epoch,
                    first_seq,
                    current: entry.epoch,
                    offset: next_offset,
                });
            }
            return Ok(SequenceVerdict::Append);
        }
        // An entry without batches was made by a transaction marker (which may bump the
        // epoch): Kafka's last sequence is then -1, so the next batch must start at 0.
        let last = entry.last_seq().unwrap_or(-1);
        if in_sequence(last, first_seq) {
            Ok(SequenceVerdict::Append)
        } else {
            Err(SequenceError::OutOfOrder {
                producer_id,
                first_seq,
                last_seq: last,
                offset: next_offset,
            })
        }
    }

    /// Records an appended batch (also used to rebuild state from the log at open).
    pub fn record(&mut self, producer_id: i64, epoch: i16, batch: BatchMeta) {
        let entry = self.producers.entry(producer_id).or_default();
        if epoch != entry.epoch {
            // A new epoch starts a new sequence space: old batches can no longer be duplicates.
            entry.batches.clear();
            entry.epoch = epoch;
        }
        entry.batches.push_back(batch);
        while entry.batches.len() > BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
        entry.last_timestamp = batch.timestamp;
    }

    /// Opens a transaction of `producer_id` at `first_offset` unless one is open already;
    /// returns whether it opened one (Kafka's "began a new transaction").
    pub fn begin_txn(&mut self, producer_id: i64, first_offset: i64) -> bool {
        let entry = self.producers.entry(producer_id).or_default();
        if entry.current_txn_first_offset.is_some() {
            return false;
        }
        entry.current_txn_first_offset = Some(first_offset);
        true
    }

    /// Applies a transaction marker (Kafka's `ProducerStateEntry.update`): the epoch becomes
    /// the marker's (a new epoch starts a new sequence space), the coordinator epoch is
    /// remembered, and the open transaction, if any, ends. Returns its first offset.
    pub fn end_txn(
        &mut self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        timestamp: i64,
    ) -> Option<i64> {
        let entry = self.producers.entry(producer_id).or_default();
        if epoch != entry.epoch {
            entry.batches.clear();
            entry.epoch = epoch;
        }
        entry.coordinator_epoch = coordinator_epoch;
        entry.last_timestamp = timestamp;
        entry.current_txn_first_offset.take()
    }

    /// Sets the transaction facts of a producer read from a snapshot.
    pub fn restore_txn(
        &mut self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        current_txn_first_offset: Option<i64>,
        timestamp: i64,
    ) {
        let entry = self.producers.entry(producer_id).or_default();
        if entry.batches.is_empty() {
            entry.epoch = epoch;
        }
        entry.coordinator_epoch = coordinator_epoch;
        entry.current_txn_first_offset = current_txn_first_offset;
        entry.last_timestamp = timestamp;
    }

    /// Forgets producers whose last write is older than `producer.id.expiration.ms`; never
    /// one with a transaction open (Kafka's `isProducerExpired`).
    /// Returns how many were forgotten.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(e.last_timestamp) < expiration_ms
        });
        before - self.producers.len()
    }

    /// Drops state of batches at or past `offset` (after a truncation), and transactions
    /// that started there.
    pub fn truncate_from(&mut self, offset: i64) {
        for e in self.producers.values_mut() {
            e.batches.retain(|b| b.last_offset < offset);
            if e.current_txn_first_offset.is_some_and(|f| f >= offset) {
                e.current_txn_first_offset = None;
            }
        }
        self.producers
            .retain(|_, e| !e.batches.is_empty() || e.coordinator_epoch >= 0);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&i64, &ProducerEntry)> {
        self.producers.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn meta(first_seq: i32, count: i32, first_offset: i64) -> BatchMeta {
        BatchMeta {
            first_seq,
            last_seq: increment_sequence(first_seq, count - 1),
            first_offset,
            last_offset: first_offset + count as i64 - 1,
            timestamp: 0,
        }
    }

    #[test]
    fn given_unknown_producer_when_checking_any_sequence_then_append() {
        let t = ProducerStateTable::default();
        assert_eq!(t.check(7, 0, 42, 50, 0), Ok(SequenceVerdict::Append));
    }

    #[test]
    fn given_in_sequence_batches_when_checking_then_append_and_gap_is_out_of_order() {
        let mut t = ProducerStateTable::default();
        t.record(1, 0, meta(0, 10, 0));
        assert_eq!(t.check(1, 0, 10, 19, 10), Ok(SequenceVerdict::Append));
        assert!(matches!(
            t.check(1, 0, 11, 19, 10),
            Err(SequenceError::OutOfOrder { last_seq: 9, .. })
        ));
    }

    #[test]
    fn given_retry_of_one_of_last_five_when_checking_then_duplicate_with_original_offset() {
        let mut t = ProducerStateTable::default();
        for i in 0..7 {
            t.record(1, 0, meta(i * 2, 2, 100 + i as i64 * 2));
        }
        // Batches 2..=6 are retained, 0 and 1 are gone.
        let v = t.check(1, 0, 4, 5, 200).unwrap();
        assert_eq!(v, SequenceVerdict::Duplicate(meta(4, 2, 104)));
        assert!(matches!(
            t.check(1, 0, 0, 1, 200),
            Err(SequenceError::OutOfOrder { .. })
        ));
    }

    #[test]
    fn given_older_epoch_when_checking_then_invalid_producer_epoch() {
        let mut t = ProducerStateTable::default();
        t.record(1, 3, meta(0, 1, 0));
        assert!(matches!(
            t.check(1, 2, 1, 1, 1),
            Err(SequenceError::InvalidProducerEpoch { current: 3, .. })
        ));
    }

    #[test]
    fn given_new_epoch_when_sequence_not_zero_then_out_of_order_else_append() {
        let mut t = ProducerStateTable::default();
        t.record(1, 0, meta(0, 5, 0));
        assert!(matches!(
            t.check(1, 1, 5, 5, 5),
            Err(SequenceError::NewEpochNotZero { .. })
        ));
        assert_eq!(t.check(1, 1, 0, 0, 5), Ok(SequenceVerdict::Append));
        t.record(1, 1, meta(0, 1, 5));
        // The old epoch's batch is not a duplicate any more.
        assert_eq!(t.get(1).unwrap().batches.len(), 1);
    }

    #[test]
    fn given_sequence_at_max_when_next_is_zero_then_in_sequence() {
        let mut t = ProducerStateTable::default();
        t.record(1, 0, meta(i32::MAX - 1, 2, 0));
        assert_eq!(t.get(1).unwrap().batches[0].last_seq, i32::MAX);
        assert_eq!(t.check(1, 0, 0, 3, 2), Ok(SequenceVerdict::Append));
        // A batch that itself wraps.
        let m = meta(i32::MAX - 1, 4, 2);
        assert_eq!(m.last_seq, 1);
    }

    #[test]
    fn given_truncation_when_truncating_then_later_batches_forgotten() {
        let mut t = ProducerStateTable::default();
        t.record(1, 0, meta(0, 2, 0));
        t.record(1, 0, meta(2, 2, 2));
        t.truncate_from(2);
        assert_eq!(t.check(1, 0, 2, 3, 2), Ok(SequenceVerdict::Append));
        t.truncate_from(0);
        assert!(t.is_empty());
    }

    proptest! {
        #[test]
        fn prop_increment_wraps_like_kafka(seq in 0..=i32::MAX, by in 0..1000i32) {
            let r = increment_sequence(seq, by);
            prop_assert!(r >= 0);
            let expect = ((seq as i64 + by as i64) % (i32::MAX as i64 + 1)) as i32;
            prop_assert_eq!(r, expect);
        }
    }
}
