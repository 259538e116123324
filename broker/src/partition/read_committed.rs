//! Which fetched batches a read_committed consumer hands to its application. The broker sends
//! a read_committed fetch everything up to the last stable offset, aborted data included,
//! with the list of aborted transactions (producer id, first offset) that overlap it; the
//! client drops the aborted batches itself. Whatever the broker says about delivery (the
//! fetch's trace spans) must follow the client's rule, so this is that rule, as Kafka's
//! `CompletedFetch.nextFetchedRecord` and librdkafka's `rd_kafka_msgset_reader` apply it:
//!
//! - before a batch of producer P, every aborted transaction whose first offset is at or
//!   below the batch's last offset makes its producer "aborted";
//! - a transactional batch of an aborted producer is dropped;
//! - P's ABORT marker ends that (P's next transaction may commit);
//! - control batches are never delivered.

use std::collections::HashSet;

use storage::batch::BatchHeader;

use super::txn::{control_type, ControlType};

/// The client's state while it walks one partition's fetched batches (module overview).
pub struct AbortedFilter {
    /// (first offset, producer id), latest first, so the next to open is at the end.
    pending: Vec<(i64, i64)>,
    aborted: HashSet<i64>,
}

impl AbortedFilter {
    /// From the fetch response's aborted transactions, `(producer id, first offset)`.
    pub fn new(list: impl IntoIterator<Item = (i64, i64)>) -> AbortedFilter {
        let mut pending: Vec<(i64, i64)> = list.into_iter().map(|(p, f)| (f, p)).collect();
        pending.sort_unstable_by(|a, b| b.cmp(a));
        AbortedFilter {
            pending,
            aborted: HashSet::new(),
        }
    }

    /// Whether the client delivers the records of `batch` (`h` its header); call it for
    /// every batch in log order, control batches included (an ABORT marker changes state).
    pub fn delivers(&mut self, h: &BatchHeader, batch: &[u8]) -> bool {
        if h.producer_id >= 0 {
            while self
                .pending
                .last()
                .is_some_and(|&(first, _)| first <= h.last_offset())
            {
                let (_, producer) = self.pending.pop().expect("checked above");
                self.aborted.insert(producer);
            }
        }
        if h.is_control() {
            if control_type(batch) == Some(ControlType::Abort) {
                self.aborted.remove(&h.producer_id);
            }
            return false;
        }
        !(h.is_transactional() && self.aborted.contains(&h.producer_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::txn::marker_batch;
    use crate::test_support::TestBatch;
    use bytes::Bytes;

    fn at(offset: i64, b: impl AsRef<[u8]>) -> Bytes {
        let mut v = b.as_ref().to_vec();
        storage::batch::set_base_offset(&mut v, offset);
        Bytes::from(v)
    }

    /// The base offsets of the batches of `log` that `filter` delivers.
    fn delivered(filter: &mut AbortedFilter, log: &[Bytes]) -> Vec<i64> {
        log.iter()
            .filter_map(|b| {
                let h = BatchHeader::parse(b).unwrap();
                filter.delivers(&h, b).then_some(h.base_offset)
            })
            .collect()
    }

    #[test]
    fn given_an_aborted_and_a_committed_transaction_when_filtering_then_only_committed_and_plain_data_delivered(
    ) {
        // Producer 7 aborts its transaction at 0..=1, producer 8 commits 3..=4 interleaved
        // with it, then 7's next transaction (6) commits; a plain batch at 9.
        let log = [
            at(0, TestBatch::new(2).transactional(7, 0, 0).encode()),
            at(2, TestBatch::new(1).transactional(8, 0, 0).encode()),
            at(3, marker_batch(7, 0, 0, ControlType::Abort, 0)),
            at(4, TestBatch::new(1).transactional(8, 0, 1).encode()),
            at(5, marker_batch(8, 0, 0, ControlType::Commit, 0)),
            at(6, TestBatch::new(2).transactional(7, 0, 2).encode()),
            at(8, marker_batch(7, 0, 0, ControlType::Commit, 0)),
            at(9, TestBatch::new(1).encode()),
        ];
        let mut f = AbortedFilter::new([(7, 0)]);
        assert_eq!(delivered(&mut f, &log), vec![2, 4, 6, 9]);
        // Without the list (read_uncommitted's view) only the markers are left out.
        let mut all = AbortedFilter::new([]);
        assert_eq!(delivered(&mut all, &log), vec![0, 2, 4, 6, 9]);
    }

    #[test]
    fn given_an_abort_listed_after_the_fetch_start_when_filtering_then_earlier_batches_of_the_producer_delivered(
    ) {
        // 7 commits at 0, then aborts a transaction starting at 2: only that one is dropped.
        let log = [
            at(0, TestBatch::new(1).transactional(7, 0, 0).encode()),
            at(1, marker_batch(7, 0, 0, ControlType::Commit, 0)),
            at(2, TestBatch::new(1).transactional(7, 0, 1).encode()),
            at(3, marker_batch(7, 0, 0, ControlType::Abort, 0)),
        ];
        let mut f = AbortedFilter::new([(7, 2)]);
        assert_eq!(delivered(&mut f, &log), vec![0]);
    }
}
