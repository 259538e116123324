//! Transactions on one partition, as Kafka's `ProducerStateManager`, `ProducerAppendInfo` and
//! `UnifiedLog` handle them on the partition leader:
//!
//! - A transactional batch opens its producer's transaction on the partition (its first
//!   offset is kept in the producer entry and in `OpenTxns::ongoing`), but only if the
//!   coordinator added the partition to the transaction first (KIP-890 verification:
//!   `begin_verified`, called through `frontend::begin_txn_on_partition`). Otherwise the
//!   batch gets INVALID_TXN_STATE, as Kafka answers "Partition was not added to the
//!   transaction".
//! - A COMMIT/ABORT marker (a control batch, written by `write_txn_marker`) ends it. Until the
//!   marker is durable the transaction still holds the last stable offset back
//!   (`OpenTxns::completing`, Kafka's `unreplicatedTxns`), so a read_committed fetch never
//!   sees aborted data before it can see the abort. An abort is recorded in `.txnindex`
//!   with the LSO it leaves behind.
//! - LSO = the smallest first offset of an open or completing transaction, else the high
//!   watermark (never above it).
//! - At open the same rules are replayed over the batches after the producer snapshot
//!   (`replay`), which also re-adds `.txnindex` entries a crash lost (they are not fsynced).

use std::collections::{BTreeMap, HashMap};

use bytes::{BufMut, BytesMut};
use storage::batch::BatchHeader;
use storage::txn_index::AbortedTxn;
use storage::{AppendOptions, Durability, PartitionLog, StorageError};
use tokio::sync::watch;

use super::producer_state::{ProducerEntry, ProducerStateTable};
use super::{Partition, PartitionError};

/// Kafka's `ControlRecordType` ids (the record key's second field).
const CONTROL_ABORT: i16 = 0;
const CONTROL_COMMIT: i16 = 1;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlType {
    Abort,
    Commit,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum TxnDataError {
    #[error("Invalid coordinator epoch for producerId {producer_id} at offset {offset}: {epoch} (zombie), {current} (current)")]
    CoordinatorFenced {
        producer_id: i64,
        epoch: i32,
        current: i32,
        offset: i64,
    },
    #[error("Epoch of producer {producer_id} at offset {offset} is {epoch}, which is smaller than the last seen epoch {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current: i16,
        offset: i64,
    },
    #[error("Partition was not added to the transaction (producer {producer_id}, epoch {epoch})")]
    NotAddedToTxn { producer_id: i64, epoch: i16 },
    #[error("Expected transactional write from producer {producer_id} at offset {offset}")]
    ExpectedTransactional { producer_id: i64, offset: i64 },
}

/// The transactions of one partition that are not finished yet, and the coordinator's
/// verification guards. Producer-level facts (epoch, open transaction's first offset,
/// coordinator epoch) live in the `ProducerStateTable`.
#[derive(Debug, Default)]
pub struct OpenTxns {
    /// Open transactions: first offset -> producer id.
    ongoing: BTreeMap<i64, i64>,
    /// Ended transactions whose marker is not durable yet: first offset -> marker offset.
    completing: BTreeMap<i64, i64>,
    /// KIP-890: producer id -> epoch the coordinator added this partition for.
    verified: HashMap<i64, i16>,
}

impl OpenTxns {
    /// Kafka's `firstUnstableOffset`.
    pub fn first_unstable(&self) -> Option<i64> {
        let a = self.ongoing.keys().next().copied();
        let b = self.completing.keys().next().copied();
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The last stable offset given the high watermark.
    pub fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        self.first_unstable()
            .map_or(high_watermark, |f| f.min(high_watermark))
    }

    pub fn ongoing_count(&self) -> usize {
        self.ongoing.len()
    }

    /// Records that the coordinator added this partition to (producer id, epoch)'s
    /// transaction. A guard of a newer epoch is never replaced by an older one.
    pub fn begin_verified(&mut self, producer_id: i64, epoch: i16) {
        let e = self.verified.entry(producer_id).or_insert(epoch);
        if epoch > *e {
            *e = epoch;
        }
    }

    /// Kafka's checks of a data batch of a producer (after the duplicate and sequence checks):
    /// a transactional batch that does not continue an open transaction of the same epoch
    /// needs the coordinator's guard; a plain batch may not interleave with an open one.
    pub fn check_data(
        &self,
        entry: Option<&ProducerEntry>,
        header: &BatchHeader,
        offset: i64,
    ) -> Result<(), TxnDataError> {
        let (producer_id, epoch) = (header.producer_id, header.producer_epoch);
        let open = entry.and_then(|e| e.current_txn_first_offset.map(|_| e.epoch));
        if header.is_transactional() {
            if open == Some(epoch) {
                return Ok(());
            }
            return match self.verified.get(&producer_id) {
                Some(&v) if v == epoch => Ok(()),
                // The coordinator already moved the producer on: this one is a zombie.
                Some(&v) if v > epoch => Err(TxnDataError::InvalidProducerEpoch {
                    producer_id,
                    epoch,
                    current: v,
                    offset,
                }),
                _ => Err(TxnDataError::NotAddedToTxn { producer_id, epoch }),
            };
        }
        if open.is_some() {
            return Err(TxnDataError::ExpectedTransactional {
                producer_id,
                offset,
            });
        }
        Ok(())
    }

    /// A transactional batch at `first_offset` opened a transaction.
    pub fn begin(&mut self, producer_id: i64, first_offset: i64) {
        self.ongoing.insert(first_offset, producer_id);
        self.verified.remove(&producer_id);
    }

    /// Kafka's marker checks: the producer epoch may not go back, nor the coordinator epoch.
    pub fn check_marker(
        entry: Option<&ProducerEntry>,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        offset: i64,
    ) -> Result<(), TxnDataError> {
        let Some(e) = entry else { return Ok(()) };
        if epoch < e.epoch {
            return Err(TxnDataError::InvalidProducerEpoch {
                producer_id,
                epoch,
                current: e.epoch,
                offset,
            });
        }
        if e.coordinator_epoch > coordinator_epoch {
            return Err(TxnDataError::CoordinatorFenced {
                producer_id,
                epoch: coordinator_epoch,
                current: e.coordinator_epoch,
                offset,
            });
        }
        Ok(())
    }

    /// A marker at `marker_offset` ended the transaction that started at `first_offset` (if
    /// the producer had one open); it stays unstable until `finish`. Returns the LSO once it
    /// is finished, which Kafka records with an abort (`lastStableOffset(completedTxn)`).
    pub fn end(&mut self, producer_id: i64, first_offset: Option<i64>, marker_offset: i64) -> i64 {
        self.verified.remove(&producer_id);
        let Some(first) = first_offset else {
            return marker_offset + 1;
        };
        self.ongoing.remove(&first);
        let next_open = self.first_unstable();
        self.completing.insert(first, marker_offset);
        next_open.unwrap_or(marker_offset + 1)
    }

    /// The marker of the transaction that started at `first_offset` is durable.
    pub fn finish(&mut self, first_offset: i64) {
        self.completing.remove(&first_offset);
    }

    /// Forgets transactions that started at or after `offset` (their batches were cut).
    pub fn truncate_from(&mut self, offset: i64) {
        self.ongoing.retain(|&f, _| f < offset);
        self.completing.retain(|&f, _| f < offset);
    }
}

/// Kafka's end-transaction marker as one control batch: attributes transactional + control,
/// base sequence -1, one record whose key is (version 0, type) and whose value is
/// (version 0, coordinator epoch). Base offset 0: the log assigns it.
pub fn marker_batch(
    producer_id: i64,
    epoch: i16,
    coordinator_epoch: i32,
    kind: ControlType,
    timestamp: i64,
) -> BytesMut {
    let kind = match kind {
        ControlType::Abort => CONTROL_ABORT,
        ControlType::Commit => CONTROL_COMMIT,
    };
    // The record body: attributes, timestamp delta, offset delta, key, value, no headers
    // (all varints are zig-zag; every value here fits in one byte).
    let mut record = BytesMut::new();
    record.put_i8(0);
    record.put_u8(0); // timestamp delta 0
    record.put_u8(0); // offset delta 0
    record.put_u8(4 << 1); // key length 4
    record.put_i16(0);
    record.put_i16(kind);
    record.put_u8(6 << 1); // value length 6
    record.put_i16(0);
    record.put_i32(coordinator_epoch);
    record.put_u8(0); // no headers
    let mut b = BytesMut::with_capacity(61 + 1 + record.len());
    b.put_i64(0);
    b.put_i32(0); // batch length, set below
    b.put_i32(-1); // partition leader epoch, set by the log
    b.put_i8(2);
    b.put_u32(0); // crc, set below
    b.put_i16(ATTR_TRANSACTIONAL | ATTR_CONTROL);
    b.put_i32(0); // last offset delta
    b.put_i64(timestamp);
    b.put_i64(timestamp);
    b.put_i64(producer_id);
    b.put_i16(epoch);
    b.put_i32(-1);
    b.put_i32(1);
    b.put_u8((record.len() as u8) << 1);
    b.extend_from_slice(&record);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = storage::batch::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The control type of a stored control batch (`EndTransactionMarker.deserialize` of its
/// first record's key). None when the batch has no record (compacted away), is compressed,
/// or its key is not a known marker: Kafka ignores such batches for transaction state.
pub fn control_type(batch: &[u8]) -> Option<ControlType> {
    let h = BatchHeader::parse(batch).ok()?;
    if !h.is_control() || h.records_count < 1 || h.compression() != 0 {
        return None;
    }
    let mut r = batch.get(61..)?;
    let _len = read_varint(&mut r)?;
    let _attributes = take(&mut r, 1)?;
    let _ts_delta = read_varint(&mut r)?;
    let _offset_delta = read_varint(&mut r)?;
    let key_len = read_varint(&mut r)?;
    if key_len < 4 {
        return None;
    }
    let key = take(&mut r, key_len as usize)?;
    match i16::from_be_bytes([key[2], key[3]]) {
        CONTROL_ABORT => Some(ControlType::Abort),
        CONTROL_COMMIT => Some(ControlType::Commit),
        _ => None,
    }
}

fn take<'a>(r: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if r.len() < n {
        return None;
    }
    let (head, rest) = r.split_at(n);
    *r = rest;
    Some(head)
}

/// A zig-zag varint (as in records), at most 10 bytes.
fn read_varint(r: &mut &[u8]) -> Option<i64> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let b = *take(r, 1)?.first()?;
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Some(((v >> 1) as i64) ^ -((v & 1) as i64));
        }
    }
    None
}

/// Rebuilds transaction state from one batch read back at open (no checks: the batch was
/// accepted when written, as Kafka replays with origin REPLICATION). Abort markers whose
/// `.txnindex` entry was lost are indexed again.
pub fn replay(
    log: &PartitionLog,
    producers: &mut ProducerStateTable,
    txns: &mut OpenTxns,
    h: &BatchHeader,
) -> Result<(), StorageError> {
    if h.producer_id < 0 {
        return Ok(());
    }
    if !h.is_control() {
        if h.is_transactional() && producers.begin_txn(h.producer_id, h.base_offset) {
            txns.begin(h.producer_id, h.base_offset);
        }
        return Ok(());
    }
    // One control batch holds one record: a read just past it returns exactly it.
    let read = log.read(h.base_offset, 1, h.last_offset() + 1)?;
    let Some(kind) = read.chunks.first().and_then(|c| control_type(c)) else {
        return Ok(());
    };
    let coordinator_epoch = read
        .chunks
        .first()
        .and_then(|c| marker_coordinator_epoch(c))
        .unwrap_or(-1);
    let first = producers.end_txn(
        h.producer_id,
        h.producer_epoch,
        coordinator_epoch,
        h.max_timestamp,
    );
    let lso = txns.end(h.producer_id, first, h.base_offset);
    if let Some(first) = first {
        txns.finish(first);
        if kind == ControlType::Abort {
            let marker = h.base_offset;
            let known = log.collect_aborted_txns(marker, marker + 1);
            if !known.iter().any(|t| t.last_offset >= marker) {
                log.append_aborted_txn(AbortedTxn {
                    producer_id: h.producer_id,
                    first_offset: first,
                    last_offset: marker,
                    last_stable_offset: lso,
                })?;
            }
        }
    }
    Ok(())
}

/// The coordinator epoch in a marker's value (version 0: i16 version, i32 epoch).
fn marker_coordinator_epoch(batch: &[u8]) -> Option<i32> {
    let mut r = batch.get(61..)?;
    read_varint(&mut r)?;
    take(&mut r, 1)?;
    read_varint(&mut r)?;
    read_varint(&mut r)?;
    let key_len = read_varint(&mut r)?;
    take(&mut r, key_len.max(0) as usize)?;
    let value_len = read_varint(&mut r)?;
    if value_len < 6 {
        return None;
    }
    let v = take(&mut r, 6)?;
    Some(i32::from_be_bytes([v[2], v[3], v[4], v[5]]))
}

/// One producer as DescribeProducers reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerInfo {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
    pub coordinator_epoch: i32,
    pub current_txn_start_offset: i64,
}

impl Partition {
    /// The last stable offset: what read_committed fetches may read up to.
    pub fn last_stable_offset(&self) -> i64 {
        *self.last_stable.borrow()
    }

    /// A receiver that changes whenever the LSO moves (a marker, or the high watermark):
    /// read_committed long polls wait on it.
    pub fn watch_last_stable_offset(&self) -> watch::Receiver<i64> {
        self.last_stable.subscribe()
    }

    /// Publishes the high watermark (all written data) and the LSO derived from it.
    pub(super) fn publish_offsets(&self) {
        let hw = self.replicated_hw();
        self.high_watermark.send_if_modified(|v| {
            let changed = *v != hw;
            *v = hw;
            changed
        });
        let lso = self.txns.borrow().last_stable_offset(hw);
        self.last_stable.send_if_modified(|v| {
            let changed = *v != lso;
            *v = lso;
            changed
        });
    }

    /// Transactions open here (metrics).
    pub fn open_transactions(&self) -> usize {
        self.txns.borrow().ongoing_count()
    }

    /// KIP-890 verification: the coordinator added this partition to the transaction of
    /// (producer id, epoch), so its transactional batches may open one here.
    pub fn begin_txn(&self, producer_id: i64, epoch: i16) {
        self.txns.borrow_mut().begin_verified(producer_id, epoch);
    }

    /// Checks a data batch of a producer against the transaction rules (`OpenTxns::check_data`).
    pub(super) fn check_txn_data(
        &self,
        header: &BatchHeader,
        offset: i64,
    ) -> Result<(), TxnDataError> {
        let producers = self.producers.borrow();
        self.txns
            .borrow()
            .check_data(producers.get(header.producer_id), header, offset)
    }

    /// Records that a transactional batch at `offset` was accepted (it may open a transaction).
    pub(super) fn record_txn_data(&self, header: &BatchHeader, offset: i64) {
        if header.is_transactional()
            && self
                .producers
                .borrow_mut()
                .begin_txn(header.producer_id, offset)
        {
            self.txns.borrow_mut().begin(header.producer_id, offset);
        }
    }

    /// Writes a COMMIT or ABORT marker for `producer_id`, fdatasync'd before it returns the
    /// marker's offset. Ends the producer's open transaction here (a producer without one
    /// still gets its marker, as in Kafka); an abort is recorded in `.txnindex`.
    pub async fn write_txn_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        kind: ControlType,
        now_ms: i64,
    ) -> Result<i64, PartitionError> {
        let offset = self.log.log_end_offset();
        OpenTxns::check_marker(
            self.producers.borrow().get(producer_id),
            producer_id,
            epoch,
            coordinator_epoch,
            offset,
        )?;
        let batch = marker_batch(producer_id, epoch, coordinator_epoch, kind, now_ms);
        // All state changes happen before the append's first await, at the offset the log
        // assigns right here, so concurrent markers and batches see them in offset order.
        let first =
            self.producers
                .borrow_mut()
                .end_txn(producer_id, epoch, coordinator_epoch, now_ms);
        let lso_after = self.txns.borrow_mut().end(producer_id, first, offset);
        let append = self.log.append(
            batch,
            AppendOptions {
                durability: Durability::Fsync,
                log_append_time_ms: None,
                leader_epoch: self.append_epoch(),
            },
        );
        self.snapshot_if_rolled();
        if let (Some(first), ControlType::Abort) = (first, kind) {
            // Appended in marker order (offsets are assigned at the call above).
            self.log.append_aborted_txn(AbortedTxn {
                producer_id,
                first_offset: first,
                last_offset: offset,
                last_stable_offset: lso_after,
            })?;
        }
        let result = append.await;
        if result.is_ok() {
            if let Some(first) = first {
                self.txns.borrow_mut().finish(first);
            }
        }
        // On failure the log refuses further work until reopened, and reopening rebuilds the
        // state from what is on disk; the transaction keeps holding the LSO until then.
        self.publish_offsets();
        let r = result?;
        debug_assert_eq!(r.base_offset, offset);
        Ok(r.base_offset)
    }

    /// Active producers of this partition (DescribeProducers).
    pub fn producers_info(&self) -> Vec<ProducerInfo> {
        let mut out: Vec<ProducerInfo> = self
            .producers
            .borrow()
            .iter()
            .map(|(&producer_id, e)| ProducerInfo {
                producer_id,
                epoch: e.epoch,
                last_sequence: e.batches.back().map_or(-1, |b| b.last_seq),
                last_timestamp: e.last_timestamp,
                coordinator_epoch: e.coordinator_epoch,
                current_txn_start_offset: e.current_txn_first_offset.unwrap_or(-1),
            })
            .collect();
        out.sort_by_key(|p| p.producer_id);
        out
    }
}

#[cfg(test)]
mod tests;
