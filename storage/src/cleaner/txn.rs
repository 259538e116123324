//! Transactions in compaction: Kafka's `CleanedTransactionMetadata` and the producer
//! state a cleaning pass must not lose (`lastRecordsOfActiveProducers`).
//!
//! The cleaner walks the log in offset order. Aborted transactions are known from the
//! `.txnindex` entries (their abort markers are already in the log); a transaction whose
//! first offset has been reached is "ongoing" for the walk until its marker is read:
//! - a transactional data batch of an ongoing aborted transaction is discarded (and not
//!   entered in the offset map); any other transactional batch belongs to a committed
//!   transaction (the pass never goes past the LSO, so nothing undecided is read) and is
//!   compacted like a plain batch;
//! - an ABORT marker stays while this pass saw data of its transaction (its `.txnindex`
//!   entry is then written to the cleaned segment, since readers of that data still need
//!   it); a COMMIT marker stays while this pass saw data of its transaction. Otherwise the
//!   marker may go: it first gets a delete horizon (KIP-534, `delete.retention.ms`) and is
//!   removed by the first pass after it, so a consumer that read the data has that long
//!   to read the marker too. An empty control batch was cleaned before: it may go at once.
//!
//! One difference from Kafka: a data batch already emptied by an earlier pass (kept only
//! for producer state or as a group's last batch) does not count as data of its
//! transaction. Kafka's `onBatchRead` counts it, which is harmless there because its
//! empty batches last only until the next round; here a group's last batch can stay for
//! good, and would pin its transaction's marker and `.txnindex` entry with it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::batch::BatchHeader;
use crate::txn_index::AbortedTxn;

use super::records::Record;

/// Control record key: version (i16) then type (i16); Kafka's `ControlRecordType`.
const CONTROL_ABORT: i16 = 0;
const CONTROL_COMMIT: i16 = 1;

/// Kafka's `LastRecord` of an active producer: what of it the cleaner must keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastRecord {
    /// Last offset of the producer's last data batch (it holds the last sequence number).
    /// None when the producer has no data batch of its current epoch (its last write was
    /// a marker): its last control batch of that epoch is kept instead, for fencing.
    pub last_data_offset: Option<i64>,
    pub producer_epoch: i16,
}

/// What the partition's producer and transaction state tells a cleaning pass.
#[derive(Clone, Debug)]
pub struct ProducerState {
    /// Active producers by id (Kafka's `lastRecordsOfActiveProducers`): the batch holding
    /// each one's last record is kept, emptied if nothing else of it survives.
    pub last_records: HashMap<i64, LastRecord>,
    /// The partition's last stable offset: as in Kafka, cleaning never goes past it, so
    /// every transactional batch it reads belongs to a decided transaction.
    pub last_stable_offset: i64,
}

impl Default for ProducerState {
    /// No producers and no open transaction: nothing limits the pass.
    fn default() -> Self {
        ProducerState {
            last_records: HashMap::new(),
            last_stable_offset: i64::MAX,
        }
    }
}

impl ProducerState {
    /// Whether `h` holds the last record of an active producer (Kafka's
    /// `isBatchLastRecordOfProducer`, for batches with a producer id).
    pub fn is_last_of_producer(&self, h: &BatchHeader) -> bool {
        if h.producer_id < 0 {
            return false;
        }
        self.last_records
            .get(&h.producer_id)
            .is_some_and(|l| match l.last_data_offset {
                Some(o) => h.last_offset() == o,
                None => h.is_control() && h.producer_epoch == l.producer_epoch,
            })
    }
}

/// What a control batch says, from its first record's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlKind {
    /// No record: a marker emptied by an earlier pass.
    Empty,
    Abort,
    Commit,
    /// Unreadable or of an unknown type: kept, as Kafka does.
    Unknown,
}

/// The kind of a control batch, given its parsed records (None: unreadable).
pub fn control_kind(recs: Option<&[Record<'_>]>) -> ControlKind {
    let Some(recs) = recs else {
        return ControlKind::Unknown;
    };
    let Some(first) = recs.first() else {
        return ControlKind::Empty;
    };
    match first.key {
        Some(k) if k.len() >= 4 => match i16::from_be_bytes([k[2], k[3]]) {
            CONTROL_ABORT => ControlKind::Abort,
            CONTROL_COMMIT => ControlKind::Commit,
            _ => ControlKind::Unknown,
        },
        _ => ControlKind::Unknown,
    }
}

/// Aborted transactions of `all` overlapping `[start, upper)` (Kafka's
/// `collectAbortedTransactions` for one segment's range).
pub fn aborted_in(
    all: &[AbortedTxn],
    start: i64,
    upper: i64,
) -> impl Iterator<Item = AbortedTxn> + '_ {
    all.iter()
        .filter(move |t| t.last_offset >= start && t.first_offset < upper)
        .copied()
}

/// Kafka's `CleanedTransactionMetadata` (module doc).
#[derive(Default)]
pub(crate) struct TxnMeta {
    /// Aborted transactions not reached yet, smallest first offset first.
    pending: BinaryHeap<Reverse<(i64, i64, i64, i64)>>,
    ongoing_committed: HashSet<i64>,
    /// Producer id -> (its aborted transaction, whether this pass saw data of it).
    ongoing_aborted: HashMap<i64, (AbortedTxn, bool)>,
    /// Entries for the `.txnindex` of the segment being written.
    pub cleaned_index: Vec<AbortedTxn>,
}

impl TxnMeta {
    pub fn add_aborted(&mut self, txns: impl Iterator<Item = AbortedTxn>) {
        for t in txns {
            self.pending.push(Reverse((
                t.first_offset,
                t.last_offset,
                t.producer_id,
                t.last_stable_offset,
            )));
        }
    }

    fn consume_up_to(&mut self, offset: i64) {
        while let Some(Reverse((first, last, pid, lso))) = self.pending.peek().copied() {
            if first > offset {
                break;
            }
            self.pending.pop();
            let txn = AbortedTxn {
                producer_id: pid,
                first_offset: first,
                last_offset: last,
                last_stable_offset: lso,
            };
            self.ongoing_aborted.entry(pid).or_insert((txn, false));
        }
    }

    /// A data batch: true when it belongs to an aborted transaction (discard it).
    pub fn on_batch_read(&mut self, h: &BatchHeader) -> bool {
        self.consume_up_to(h.last_offset());
        if !h.is_transactional() {
            return false;
        }
        // A batch emptied by an earlier pass is no data (module doc).
        let data = h.records_count > 0;
        match self.ongoing_aborted.get_mut(&h.producer_id) {
            Some((_, seen)) => {
                *seen |= data;
                true
            }
            None => {
                if data {
                    self.ongoing_committed.insert(h.producer_id);
                }
                false
            }
        }
    }

    /// A control batch: true when no data of its transaction was seen by this pass (the
    /// marker may go once its delete horizon has passed).
    pub fn on_control_batch_read(&mut self, h: &BatchHeader, kind: ControlKind) -> bool {
        self.consume_up_to(h.last_offset());
        match kind {
            ControlKind::Empty => true,
            ControlKind::Abort => match self.ongoing_aborted.remove(&h.producer_id) {
                Some((txn, true)) => {
                    self.cleaned_index.push(txn);
                    false
                }
                _ => true,
            },
            ControlKind::Commit => !self.ongoing_committed.remove(&h.producer_id),
            ControlKind::Unknown => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(base: i64, pid: i64, attributes: i16) -> BatchHeader {
        let mut b = vec![0u8; crate::batch::HEADER_SIZE];
        b[0..8].copy_from_slice(&base.to_be_bytes());
        b[8..12].copy_from_slice(&((crate::batch::HEADER_SIZE - 12) as i32).to_be_bytes());
        b[16] = 2;
        b[21..23].copy_from_slice(&attributes.to_be_bytes());
        b[43..51].copy_from_slice(&pid.to_be_bytes());
        b[57..61].copy_from_slice(&1i32.to_be_bytes());
        BatchHeader::parse(&b).unwrap()
    }

    const TXN: i16 = 0x10;
    const CONTROL: i16 = 0x30;

    #[test]
    fn given_aborted_and_committed_txns_when_walking_then_data_and_markers_classified() {
        let aborted = AbortedTxn {
            producer_id: 7,
            first_offset: 1,
            last_offset: 3,
            last_stable_offset: 4,
        };
        let mut m = TxnMeta::default();
        m.add_aborted(aborted_in(&[aborted], 0, 10));
        assert!(!m.on_batch_read(&header(0, 8, TXN)), "pid 8 commits");
        assert!(m.on_batch_read(&header(1, 7, TXN)), "pid 7 aborted");
        assert!(!m.on_batch_read(&header(2, -1, 0)), "plain batch");
        // Data of both transactions was seen: both markers stay, the abort indexed.
        assert!(!m.on_control_batch_read(&header(3, 7, CONTROL), ControlKind::Abort));
        assert_eq!(m.cleaned_index, vec![aborted]);
        assert!(!m.on_control_batch_read(&header(4, 8, CONTROL), ControlKind::Commit));
        // A later pass that sees no data: the markers may go, no index entry.
        let mut m = TxnMeta::default();
        m.add_aborted(aborted_in(&[aborted], 3, 10));
        assert!(m.on_control_batch_read(&header(3, 7, CONTROL), ControlKind::Abort));
        assert!(m.on_control_batch_read(&header(4, 8, CONTROL), ControlKind::Commit));
        assert!(m.on_control_batch_read(&header(5, 8, CONTROL), ControlKind::Empty));
        assert!(!m.on_control_batch_read(&header(6, 8, CONTROL), ControlKind::Unknown));
        assert!(m.cleaned_index.is_empty());
    }

    #[test]
    fn given_active_producers_when_checking_batches_then_last_data_or_marker_kept() {
        let mut p = ProducerState::default();
        p.last_records.insert(
            7,
            LastRecord {
                last_data_offset: Some(5),
                producer_epoch: 0,
            },
        );
        p.last_records.insert(
            8,
            LastRecord {
                last_data_offset: None,
                producer_epoch: 0,
            },
        );
        assert!(p.is_last_of_producer(&header(5, 7, 0)));
        assert!(!p.is_last_of_producer(&header(4, 7, 0)));
        assert!(p.is_last_of_producer(&header(9, 8, CONTROL)));
        assert!(!p.is_last_of_producer(&header(9, 8, TXN)));
        assert!(!p.is_last_of_producer(&header(9, -1, 0)));
    }
}
