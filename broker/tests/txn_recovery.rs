//! Transactions survive kill -9: a broker process with aborted, committed and one open
//! transaction (and plain data after it) is SIGKILLed; the restarted broker rebuilds the
//! open transaction, the last stable offset and the aborted-transaction index from the log,
//! and the open transaction can still be completed. A clean restart after that takes the
//! open transaction from the producer snapshot instead.
//!
//! The broker to kill runs in a child process: this test binary re-executed with
//! `STROM_TXN_KILL_CHILD` set, so the child can reach the coordinator-side interface
//! (`frontend::begin_txn_on_partition`) that no wire API exposes before AddPartitionsToTxn.

mod common;

use bytes::Bytes;
use common::{
    batch, child_ready, kill_child_when_ready, start, topic_name, transactional_batch, Client,
};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

const TOPIC: &str = "tx";
const CHILD_ENV: &str = "STROM_TXN_KILL_CHILD";
const TEST_NAME: &str =
    "given_broker_killed_mid_transaction_when_restarted_then_lso_and_aborted_index_rebuilt";
/// Producers: A aborts, B commits, C is open when the broker dies.
const A: i64 = 1000;
const B: i64 = 2000;
const C: i64 = 3000;

fn produce(c: &mut Client, records: Bytes) -> (i16, i64) {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("it"))))
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(TOPIC))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let r: ProduceResponse = c.call(ApiKey::Produce, 11, &req);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn marker(c: &mut Client, pid: i64, commit: bool) -> i16 {
    let req = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(0)
        .with_coordinator_epoch(1)
        .with_transaction_result(commit)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(topic_name(TOPIC))
            .with_partition_indexes(vec![0])])]);
    let r: WriteTxnMarkersResponse = c.call(ApiKey::WriteTxnMarkers, 1, &req);
    r.markers[0].topics[0].partitions[0].error_code
}

struct Committed {
    hw: i64,
    lso: i64,
    data: Vec<i64>,
    control: Vec<i64>,
    aborted: Vec<(i64, i64)>,
}

fn fetch_committed(c: &mut Client) -> Committed {
    let req = FetchRequest::default()
        .with_max_bytes(10 << 20)
        .with_isolation_level(1)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(TOPIC))
            .with_partitions(vec![FetchPartition::default()
                .with_fetch_offset(0)
                .with_partition_max_bytes(10 << 20)])]);
    let r: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let mut records = p.records.clone().unwrap_or_default();
    let (mut data, mut control) = (Vec::new(), Vec::new());
    for set in RecordBatchDecoder::decode_all(&mut records).unwrap() {
        for r in set.records {
            if r.control {
                control.push(r.offset)
            } else {
                data.push(r.offset)
            }
        }
    }
    let aborted = p
        .aborted_transactions
        .as_ref()
        .expect("read_committed always lists aborted transactions")
        .iter()
        .map(|t| (t.producer_id.0, t.first_offset))
        .collect();
    Committed {
        hw: p.high_watermark,
        lso: p.last_stable_offset,
        data,
        control,
        aborted,
    }
}

fn latest(c: &mut Client, isolation: i8) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(TOPIC))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let r: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 9, &req);
    r.topics[0].partitions[0].offset
}

/// (producer id, current transaction start offset) of every producer on the partition.
fn open_txns(c: &mut Client) -> Vec<(i64, i64)> {
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(topic_name(TOPIC))
        .with_partition_indexes(vec![0])]);
    let r: DescribeProducersResponse = c.call(ApiKey::DescribeProducers, 0, &req);
    let mut v: Vec<(i64, i64)> = r.topics[0].partitions[0]
        .active_producers
        .iter()
        .map(|s| (s.producer_id.0, s.current_txn_start_offset))
        .collect();
    v.sort();
    v
}

/// The child: builds the log, says READY, and waits to be killed.
fn child(dir: &str) -> ! {
    let server = start(std::path::Path::new(dir), 2);
    let mut c = Client::connect(server.kafka_addr);
    let req = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name(TOPIC))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(r.topics[0].error_code, 0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let begin = |pid: i64| {
        rt.block_on(strom::shard::frontend::begin_txn_on_partition(
            &server.ctx,
            TOPIC,
            0,
            pid,
            0,
        ))
        .expect("partition added to the transaction");
    };
    begin(A);
    assert_eq!(
        produce(&mut c, transactional_batch(3, "a", A, 0, 0)),
        (0, 0)
    );
    assert_eq!(produce(&mut c, batch(1, "plain")), (0, 3));
    assert_eq!(marker(&mut c, A, false), 0); // abort at 4
    begin(B);
    assert_eq!(
        produce(&mut c, transactional_batch(2, "b", B, 0, 0)),
        (0, 5)
    );
    assert_eq!(marker(&mut c, B, true), 0); // commit at 7
    begin(C);
    assert_eq!(
        produce(&mut c, transactional_batch(2, "c", C, 0, 0)),
        (0, 8)
    );
    assert_eq!(produce(&mut c, batch(1, "after")), (0, 10));
    let before = fetch_committed(&mut c);
    assert_eq!((before.hw, before.lso), (11, 8));
    child_ready()
}

#[test]
fn given_broker_killed_mid_transaction_when_restarted_then_lso_and_aborted_index_rebuilt() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
    }
    let dir = tempfile::tempdir().unwrap();
    kill_child_when_ready(TEST_NAME, CHILD_ENV, dir.path());

    let server = start(dir.path(), 2);
    let mut c = Client::connect(server.kafka_addr);
    let got = fetch_committed(&mut c);
    assert_eq!(
        (got.hw, got.lso),
        (11, 8),
        "open transaction of C holds the LSO"
    );
    // Everything below the LSO, aborted data included (the client drops it by the list).
    assert_eq!(got.data, vec![0, 1, 2, 3, 5, 6]);
    assert_eq!(got.control, vec![4, 7]);
    assert_eq!(got.aborted, vec![(A, 0)]);
    assert_eq!((latest(&mut c, 1), latest(&mut c, 0)), (8, 11));
    assert_eq!(open_txns(&mut c), vec![(A, -1), (B, -1), (C, 8)]);
    // The replay did not index the abort a second time.
    // (Segments may roll on the plain batches' old timestamps: count every .txnindex.)
    let indexed: u64 = std::fs::read_dir(dir.path().join("tx-0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txnindex"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert_eq!(indexed, 34, "one aborted transaction, indexed once");

    // A clean restart: the open transaction now comes from the producer snapshot.
    server.shutdown().unwrap();
    let server = start(dir.path(), 2);
    let mut c = Client::connect(server.kafka_addr);
    let got = fetch_committed(&mut c);
    assert_eq!((got.hw, got.lso, got.aborted), (11, 8, vec![(A, 0)]));
    assert_eq!(open_txns(&mut c), vec![(A, -1), (B, -1), (C, 8)]);
    // The transaction opened before the crash completes after it.
    assert_eq!(marker(&mut c, C, true), 0);
    let got = fetch_committed(&mut c);
    assert_eq!((got.hw, got.lso), (12, 12));
    assert_eq!(got.data, vec![0, 1, 2, 3, 5, 6, 8, 9, 10]);
    assert_eq!(open_txns(&mut c), vec![(A, -1), (B, -1), (C, -1)]);
    server.shutdown().unwrap();
}
