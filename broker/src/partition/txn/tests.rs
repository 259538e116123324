//! State-transition tests of partition transactions, with the Kafka error each illegal
//! transition gets (the produce and WriteTxnMarkers handlers map them to codes).

use super::*;
use crate::partition::producer_state::{BatchMeta, ProducerStateTable};

fn header(producer_id: i64, epoch: i16, transactional: bool) -> BatchHeader {
    BatchHeader {
        base_offset: 0,
        batch_length: 49,
        partition_leader_epoch: -1,
        magic: 2,
        crc: 0,
        attributes: if transactional { ATTR_TRANSACTIONAL } else { 0 },
        last_offset_delta: 0,
        base_timestamp: 0,
        max_timestamp: 0,
        producer_id,
        producer_epoch: epoch,
        base_sequence: 0,
        records_count: 1,
    }
}

fn batch_at(offset: i64) -> BatchMeta {
    BatchMeta {
        first_seq: 0,
        last_seq: 0,
        first_offset: offset,
        last_offset: offset,
        timestamp: 0,
    }
}

#[test]
fn given_marker_batch_when_decoding_with_kafka_codec_then_control_record_of_its_type() {
    for (kind, type_id) in [(ControlType::Commit, 1i16), (ControlType::Abort, 0)] {
        let b = marker_batch(7, 3, 11, kind, 1_700_000_000_000);
        let headers = storage::batch::validate_batches(&b).expect("a valid v2 batch");
        assert_eq!(headers.len(), 1);
        let h = headers[0];
        assert!(h.is_control() && h.is_transactional());
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (7, 3, -1)
        );
        assert_eq!(control_type(&b), Some(kind));
        assert_eq!(marker_coordinator_epoch(&b), Some(11));
        // The independent codec (kafka-protocol) reads the same record.
        let mut bytes = b.clone().freeze();
        let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut bytes).unwrap();
        let r = &sets[0].records[0];
        assert!(r.control && r.transactional);
        let key = r.key.as_deref().unwrap();
        assert_eq!(key, &[0, 0, (type_id >> 8) as u8, type_id as u8]);
        let value = r.value.as_deref().unwrap();
        assert_eq!(value, &[0, 0, 0, 0, 0, 11]);
    }
}

#[test]
fn given_not_a_marker_when_reading_control_type_then_none() {
    let mut b = marker_batch(7, 3, 11, ControlType::Commit, 0);
    // An unknown control type id.
    let at = b.len() - 10;
    b[at] = 9;
    assert_eq!(control_type(&b), None);
    assert_eq!(control_type(&b[..40]), None);
}

#[test]
fn given_no_verification_when_transactional_batch_then_invalid_txn_state() {
    let t = OpenTxns::default();
    assert_eq!(
        t.check_data(None, &header(1, 0, true), 0),
        Err(TxnDataError::NotAddedToTxn {
            producer_id: 1,
            epoch: 0
        })
    );
    // Plain idempotent data needs nothing.
    assert_eq!(t.check_data(None, &header(1, 0, false), 0), Ok(()));
}

#[test]
fn given_verification_when_transactional_batch_then_opens_and_later_batches_continue() {
    let mut t = OpenTxns::default();
    let mut p = ProducerStateTable::default();
    t.begin_verified(1, 0);
    assert_eq!(t.check_data(None, &header(1, 0, true), 5), Ok(()));
    p.record(1, 0, batch_at(5));
    assert!(p.begin_txn(1, 5));
    t.begin(1, 5);
    // The guard is used up; the open transaction carries the next batch.
    assert_eq!(t.check_data(p.get(1), &header(1, 0, true), 6), Ok(()));
    assert!(!p.begin_txn(1, 6));
    assert_eq!(t.last_stable_offset(10), 5);
    assert_eq!(t.ongoing_count(), 1);
}

#[test]
fn given_open_transaction_when_plain_batch_then_invalid_txn_state() {
    let mut t = OpenTxns::default();
    let mut p = ProducerStateTable::default();
    p.record(1, 0, batch_at(0));
    p.begin_txn(1, 0);
    t.begin(1, 0);
    assert_eq!(
        t.check_data(p.get(1), &header(1, 0, false), 1),
        Err(TxnDataError::ExpectedTransactional {
            producer_id: 1,
            offset: 1
        })
    );
}

#[test]
fn given_guard_of_newer_epoch_when_older_epoch_writes_then_invalid_producer_epoch() {
    let mut t = OpenTxns::default();
    t.begin_verified(1, 4);
    t.begin_verified(1, 3); // an older guard never replaces a newer one
    assert!(matches!(
        t.check_data(None, &header(1, 3, true), 0),
        Err(TxnDataError::InvalidProducerEpoch { current: 4, .. })
    ));
    assert_eq!(t.check_data(None, &header(1, 4, true), 0), Ok(()));
}

#[test]
fn given_markers_when_checking_then_older_epochs_are_fenced() {
    let mut p = ProducerStateTable::default();
    // No state at all: Kafka writes the marker anyway.
    assert_eq!(OpenTxns::check_marker(None, 1, 0, 0, 0), Ok(()));
    p.end_txn(1, 2, 5, 0);
    assert!(matches!(
        OpenTxns::check_marker(p.get(1), 1, 1, 5, 0),
        Err(TxnDataError::InvalidProducerEpoch { current: 2, .. })
    ));
    assert!(matches!(
        OpenTxns::check_marker(p.get(1), 1, 2, 4, 0),
        Err(TxnDataError::CoordinatorFenced { current: 5, .. })
    ));
    assert_eq!(OpenTxns::check_marker(p.get(1), 1, 2, 5, 0), Ok(()));
    assert_eq!(OpenTxns::check_marker(p.get(1), 1, 3, 6, 0), Ok(()));
}

#[test]
fn given_two_open_transactions_when_one_ends_then_lso_waits_for_marker_then_moves_to_other() {
    let mut t = OpenTxns::default();
    t.begin(1, 10);
    t.begin(2, 12);
    assert_eq!(t.last_stable_offset(20), 10);
    // Producer 1 ends at marker 20: LSO after it is producer 2's first offset.
    let lso_after = t.end(1, Some(10), 20);
    assert_eq!(lso_after, 12);
    // Until the marker is durable the transaction still holds the LSO.
    assert_eq!(t.last_stable_offset(21), 10);
    t.finish(10);
    assert_eq!(t.last_stable_offset(21), 12);
    assert_eq!(t.end(2, Some(12), 21), 22);
    t.finish(12);
    assert_eq!(t.last_stable_offset(22), 22);
    // Never above the high watermark.
    t.begin(3, 30);
    assert_eq!(t.last_stable_offset(25), 25);
}

#[test]
fn given_marker_with_bumped_epoch_when_producing_then_new_epoch_starts_at_sequence_zero() {
    let mut p = ProducerStateTable::default();
    p.record(1, 0, batch_at(0));
    p.begin_txn(1, 0);
    assert_eq!(p.end_txn(1, 1, 0, 0), Some(0));
    let e = p.get(1).unwrap();
    assert_eq!(
        (e.epoch, e.batches.len(), e.current_txn_first_offset),
        (1, 0, None)
    );
    assert!(p.check(1, 1, 3, 3, 2).is_err());
    assert!(p.check(1, 1, 0, 0, 2).is_ok());
    // Truncation keeps a marker-made entry (it fences older epochs).
    p.truncate_from(0);
    assert!(p.get(1).is_some());
}

#[test]
fn given_truncation_when_transaction_started_after_it_then_forgotten() {
    let mut t = OpenTxns::default();
    t.begin(1, 5);
    t.begin(2, 9);
    t.truncate_from(9);
    assert_eq!(t.first_unstable(), Some(5));
    t.truncate_from(0);
    assert_eq!(t.first_unstable(), None);
}
