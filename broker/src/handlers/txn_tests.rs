//! In-process tests of the partition side of transactions through the wire codec:
//! transactional produce (KIP-890 verification), WriteTxnMarkers, read_committed Fetch
//! (LSO, aborted_transactions), ListOffsets isolation, DescribeProducers, and state rebuilt
//! from the log at open.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::testing::*;
use crate::handlers::testing::{batch, create, produce_req, txn_batch};
use crate::shard::frontend;

const PID: i64 = 4242;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn produce(h: &Harness, records: Bytes) -> (i16, i64) {
    let req = produce_req("t", 0, -1, records)
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))));
    let r: ProduceResponse = h.call(ApiKey::Produce, 11, req);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn begin(h: &Harness, pid: i64, epoch: i16) {
    let ctx = h.state.ctx.clone();
    h.block_on(async move { frontend::begin_txn_on_partition(&ctx, "t", 0, pid, epoch).await })
        .expect("begin");
}

fn marker(h: &Harness, pid: i64, epoch: i16, coordinator_epoch: i32, commit: bool) -> i16 {
    let req = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_coordinator_epoch(coordinator_epoch)
        .with_transaction_result(commit)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(name("t"))
            .with_partition_indexes(vec![0])])]);
    let r: WriteTxnMarkersResponse = h.call(ApiKey::WriteTxnMarkers, 1, req);
    assert_eq!(r.markers[0].producer_id.0, pid);
    r.markers[0].topics[0].partitions[0].error_code
}

fn fetch_req(offset: i64, isolation: i8, max_wait: i32) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(max_wait)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(isolation)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![FetchPartition::default()
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

/// (hw, lso, offsets of data records, control record offsets, aborted (pid, first offset)).
type Fetched = (i64, i64, Vec<i64>, Vec<i64>, Option<Vec<(i64, i64)>>);

fn fetch(h: &Harness, offset: i64, isolation: i8) -> Fetched {
    let r: FetchResponse = h.call(ApiKey::Fetch, 12, fetch_req(offset, isolation, 0));
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let (data, control) = records(p.records.clone().unwrap_or_default());
    let aborted = p.aborted_transactions.as_ref().map(|a| {
        a.iter()
            .map(|t| (t.producer_id.0, t.first_offset))
            .collect::<Vec<_>>()
    });
    (
        p.high_watermark,
        p.last_stable_offset,
        data,
        control,
        aborted,
    )
}

fn records(mut b: Bytes) -> (Vec<i64>, Vec<i64>) {
    let (mut data, mut control) = (Vec::new(), Vec::new());
    if b.is_empty() {
        return (data, control);
    }
    for set in RecordBatchDecoder::decode_all(&mut b).expect("decodes") {
        for r in set.records {
            if r.control {
                control.push(r.offset);
            } else {
                data.push(r.offset);
            }
        }
    }
    (data, control)
}

fn latest(h: &Harness, isolation: i8) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("t"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let r: ListOffsetsResponse = h.call(ApiKey::ListOffsets, 9, req);
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

fn describe(h: &Harness) -> Vec<(i64, i32, i32, i64)> {
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(name("t"))
        .with_partition_indexes(vec![0])]);
    let r: DescribeProducersResponse = h.call(ApiKey::DescribeProducers, 0, req);
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.active_producers
        .iter()
        .map(|s| {
            (
                s.producer_id.0,
                s.producer_epoch,
                s.coordinator_epoch,
                s.current_txn_start_offset,
            )
        })
        .collect()
}

#[test]
fn given_transactional_records_without_id_or_of_two_producers_when_producing_then_whole_request_refused(
) {
    let h = Harness::new();
    create(&h, "t", 1);
    begin(&h, PID, 0);
    let r: ProduceResponse = h.call(
        ApiKey::Produce,
        11,
        produce_req("t", 0, -1, txn_batch(1, PID, 0, 0)),
    );
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (53, -1));
    assert_eq!(fetch(&h, 0, 0).0, 0);

    // Two transactional producers in one request: every partition refused, nothing written.
    create(&h, "u", 1);
    begin(&h, PID + 1, 0);
    let mut req = produce_req("t", 0, -1, txn_batch(1, PID, 0, 0))
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))));
    let other = produce_req("u", 0, -1, txn_batch(1, PID + 1, 0, 0));
    req.topic_data.extend(other.topic_data);
    let r: ProduceResponse = h.call(ApiKey::Produce, 11, req);
    let codes: Vec<i16> = r
        .responses
        .iter()
        .map(|t| t.partition_responses[0].error_code)
        .collect();
    assert_eq!(codes, vec![49, 49]);
    assert_eq!(fetch(&h, 0, 0).0, 0);
}

#[test]
fn given_partition_not_added_when_transactional_produce_then_invalid_txn_state() {
    let h = Harness::new();
    create(&h, "t", 1);
    // No guard, and the coordinator never heard of "tx": the partition's verification asks
    // it, and Kafka's coordinator answers INVALID_PRODUCER_ID_MAPPING for an unknown id
    // (`handleVerifyPartitionsInTransaction`), which the produce answer carries as it is.
    assert_eq!(produce(&h, txn_batch(2, PID, 0, 0)), (49, -1));
    begin(&h, PID, 0);
    assert_eq!(produce(&h, txn_batch(2, PID, 0, 0)), (0, 0));
    // The transaction continues without a new guard; a plain batch of the same producer may
    // not interleave with it.
    assert_eq!(produce(&h, txn_batch(1, PID, 0, 2)), (0, 2));
    assert_eq!(produce(&h, batch(1, PID, 0, 3)).0, 48);
    // An older epoch than the coordinator's guard is a zombie.
    begin(&h, PID + 1, 3);
    assert_eq!(produce(&h, txn_batch(1, PID + 1, 2, 0)).0, 47);
}

#[test]
fn given_open_then_aborted_txn_when_fetching_read_committed_then_lso_and_aborted_list() {
    let h = Harness::new();
    create(&h, "t", 1);
    assert_eq!(produce(&h, batch(2, -1, -1, -1)), (0, 0));
    begin(&h, PID, 0);
    assert_eq!(produce(&h, txn_batch(3, PID, 0, 0)), (0, 2));
    assert_eq!(describe(&h), vec![(PID, 0, -1, 2)]);

    // Open transaction: read_committed stops at its first offset, read_uncommitted does not.
    let (hw, lso, data, _, aborted) = fetch(&h, 0, 1);
    assert_eq!((hw, lso, data, aborted), (5, 2, vec![0, 1], Some(vec![])));
    let (_, lso, data, _, aborted) = fetch(&h, 0, 0);
    assert_eq!((lso, data, aborted), (2, vec![0, 1, 2, 3, 4], None));
    assert_eq!((latest(&h, 1), latest(&h, 0)), (2, 5));
    // Nothing stable to read at the LSO yet.
    let (_, _, data, _, aborted) = fetch(&h, 2, 1);
    assert_eq!((data, aborted), (vec![], Some(vec![])));

    assert_eq!(marker(&h, PID, 0, 7, false), 0);
    let (hw, lso, data, control, aborted) = fetch(&h, 0, 1);
    assert_eq!((hw, lso), (6, 6));
    assert_eq!((data, control), (vec![0, 1, 2, 3, 4], vec![5]));
    assert_eq!(aborted, Some(vec![(PID, 2)]));
    // A fetch past the aborted range gets no entry; one inside it does.
    assert_eq!(fetch(&h, 3, 1).4, Some(vec![(PID, 2)]));
    assert_eq!(latest(&h, 1), 6);
    assert_eq!(describe(&h), vec![(PID, 0, 7, -1)]);

    // The next transaction: committed data has no aborted entry.
    begin(&h, PID, 0);
    assert_eq!(produce(&h, txn_batch(2, PID, 0, 3)), (0, 6));
    assert_eq!(marker(&h, PID, 0, 7, true), 0);
    let (hw, lso, data, control, aborted) = fetch(&h, 6, 1);
    assert_eq!((hw, lso, data, control), (9, 9, vec![6, 7], vec![8]));
    assert_eq!(aborted, Some(vec![]));
}

#[test]
fn given_stale_epochs_when_writing_markers_then_fenced_and_nothing_written() {
    let h = Harness::new();
    create(&h, "t", 1);
    begin(&h, PID, 1);
    assert_eq!(produce(&h, txn_batch(1, PID, 1, 0)), (0, 0));
    assert_eq!(marker(&h, PID, 1, 5, true), 0);
    // A zombie coordinator (older coordinator epoch) and an older producer epoch.
    assert_eq!(marker(&h, PID, 1, 4, false), 52);
    assert_eq!(marker(&h, PID, 0, 5, false), 47);
    assert_eq!(fetch(&h, 0, 0).0, 2);
    // A marker for a producer with nothing open here is still written (Kafka does too),
    // and a bumped epoch fences the old one's data.
    assert_eq!(marker(&h, PID, 2, 5, false), 0);
    assert_eq!(fetch(&h, 0, 0).0, 3);
    assert_eq!(fetch(&h, 0, 1).4, Some(vec![]));
    begin(&h, PID, 1);
    assert_eq!(produce(&h, txn_batch(1, PID, 1, 1)).0, 47);
    // Unknown partitions are reported per partition.
    let req = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(PID))
        .with_producer_epoch(2)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(name("nope"))
            .with_partition_indexes(vec![0])])]);
    let r: WriteTxnMarkersResponse = h.call(ApiKey::WriteTxnMarkers, 1, req);
    assert_eq!(r.markers[0].topics[0].partitions[0].error_code, 3);
}

#[test]
fn given_read_committed_long_poll_when_marker_commits_then_wakes_with_data() {
    let h = Harness::new();
    create(&h, "t", 1);
    begin(&h, PID, 0);
    assert_eq!(produce(&h, txn_batch(2, PID, 0, 0)), (0, 0));
    let state = h.state.clone();
    let (resp, waited) = h.block_on(async move {
        let s = state.clone();
        let poll = tokio::task::spawn_local(async move {
            let started = tokio::time::Instant::now();
            let r: FetchResponse =
                crate::handlers::testing::roundtrip(s, ApiKey::Fetch, 12, fetch_req(0, 1, 10_000))
                    .await;
            (r, started.elapsed())
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let m = frontend::TxnMarker {
            producer_id: PID,
            producer_epoch: 0,
            coordinator_epoch: 0,
            commit: true,
        };
        frontend::write_txn_marker(&state.ctx, "t", 0, m)
            .await
            .expect("marker");
        poll.await.unwrap()
    });
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.last_stable_offset, 3);
    assert_eq!(records(p.records.clone().unwrap()).0, vec![0, 1]);
    // Woken by the marker, not by the 10 s deadline.
    assert!(waited < Duration::from_secs(8), "{waited:?}");
}

#[test]
fn given_txns_in_log_when_partition_reopens_then_open_txn_lso_and_lost_txnindex_rebuilt() {
    let h = Harness::new();
    create(&h, "t", 1);
    begin(&h, PID, 0);
    assert_eq!(produce(&h, txn_batch(2, PID, 0, 0)), (0, 0));
    assert_eq!(marker(&h, PID, 0, 3, false), 0); // abort at 2
    begin(&h, PID + 1, 0);
    assert_eq!(produce(&h, txn_batch(1, PID + 1, 0, 0)), (0, 3)); // left open
    assert_eq!(produce(&h, batch(1, -1, -1, -1)), (0, 4));
    let before = fetch(&h, 0, 1);
    assert_eq!((before.0, before.1), (5, 3));

    // Reopen from the log alone: no snapshot, and the .txnindex lost.
    let old = h
        .state
        .partitions
        .borrow_mut()
        .remove(&(std::sync::Arc::from("t"), 0))
        .unwrap();
    let dir = old.log.dir().to_path_buf();
    drop(old);
    for f in std::fs::read_dir(&dir).unwrap() {
        let path = f.unwrap().path();
        if path
            .extension()
            .is_some_and(|e| e == "txnindex" || e == "snapshot")
        {
            std::fs::remove_file(path).unwrap();
        }
    }
    let meta = h.state.ctx.catalog.snapshot().get("t").cloned().unwrap();
    crate::shard::open_partition(&h.state, &meta, 0, Some(0)).expect("reopen");
    let after = fetch(&h, 0, 1);
    assert_eq!((after.0, after.1), (5, 3));
    assert_eq!(after.2, vec![0, 1]);
    assert_eq!(after.4, Some(vec![(PID, 0)]));
    let mut d = describe(&h);
    d.sort();
    assert_eq!(d, vec![(PID, 0, 3, -1), (PID + 1, 0, -1, 3)]);
    // The open transaction goes on and completes after the restart.
    assert_eq!(produce(&h, txn_batch(1, PID + 1, 0, 1)), (0, 5));
    assert_eq!(marker(&h, PID + 1, 0, 0, true), 0);
    assert_eq!(fetch(&h, 0, 1).1, 7);
}
