//! In-process tests of the transaction APIs through the wire codec: a transaction committed
//! and aborted end to end (markers in the partitions, offsets applied only on commit),
//! fencing, timeouts, and reload of `__transaction_state` by a new shard.

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;

use super::group_tests::{fetch_v8, s};
use super::testing::Harness;
use crate::config::BrokerConfig;
use crate::coordinator::txn::txn_stm::TxnState;
use crate::handlers::testing::create;

pub fn harness() -> Harness {
    Harness::with_config(BrokerConfig {
        group_initial_rebalance_delay_ms: 0,
        transaction_abort_timed_out_transaction_cleanup_interval_ms: 50,
        ..BrokerConfig::default()
    })
}

fn tid(v: &str) -> TransactionalId {
    TransactionalId(s(v))
}

/// InitProducerId for `id`: (producer id, epoch).
pub fn init(h: &Harness, id: &str, timeout_ms: i32) -> (i64, i16) {
    let r: InitProducerIdResponse = h.call(
        ApiKey::InitProducerId,
        5,
        InitProducerIdRequest::default()
            .with_transactional_id(Some(tid(id)))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    assert_eq!(r.error_code, 0, "init {id}");
    (r.producer_id.0, r.producer_epoch)
}

fn topics(topic: &str, parts: &[i32]) -> Vec<AddPartitionsToTxnTopic> {
    vec![AddPartitionsToTxnTopic::default()
        .with_name(TopicName(s(topic)))
        .with_partitions(parts.to_vec())]
}

/// AddPartitionsToTxn v3: the per-partition codes.
pub fn add(h: &Harness, id: &str, ids: (i64, i16), topic: &str, parts: &[i32]) -> Vec<i16> {
    let r: AddPartitionsToTxnResponse = h.call(
        ApiKey::AddPartitionsToTxn,
        3,
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(tid(id))
            .with_v3_and_below_producer_id(ProducerId(ids.0))
            .with_v3_and_below_producer_epoch(ids.1)
            .with_v3_and_below_topics(topics(topic, parts)),
    );
    r.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
        })
        .collect()
}

pub fn add_offsets(h: &Harness, v: i16, id: &str, ids: (i64, i16), group: &str) -> i16 {
    let r: AddOffsetsToTxnResponse = h.call(
        ApiKey::AddOffsetsToTxn,
        v,
        AddOffsetsToTxnRequest::default()
            .with_transactional_id(tid(id))
            .with_producer_id(ProducerId(ids.0))
            .with_producer_epoch(ids.1)
            .with_group_id(GroupId(s(group))),
    );
    r.error_code
}

pub fn txn_commit(
    h: &Harness,
    v: i16,
    id: &str,
    ids: (i64, i16),
    group: &str,
    topic: &str,
    offset: i64,
) -> i16 {
    let r: TxnOffsetCommitResponse = h.call(
        ApiKey::TxnOffsetCommit,
        v,
        TxnOffsetCommitRequest::default()
            .with_transactional_id(tid(id))
            .with_group_id(GroupId(s(group)))
            .with_producer_id(ProducerId(ids.0))
            .with_producer_epoch(ids.1)
            .with_generation_id(-1)
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(offset)])]),
    );
    r.topics[0].partitions[0].error_code
}

pub fn end(h: &Harness, v: i16, id: &str, ids: (i64, i16), commit: bool) -> EndTxnResponse {
    h.call(
        ApiKey::EndTxn,
        v,
        EndTxnRequest::default()
            .with_transactional_id(tid(id))
            .with_producer_id(ProducerId(ids.0))
            .with_producer_epoch(ids.1)
            .with_committed(commit),
    )
}

pub fn describe(h: &Harness, id: &str) -> describe_transactions_response::TransactionState {
    let r: DescribeTransactionsResponse = h.call(
        ApiKey::DescribeTransactions,
        0,
        DescribeTransactionsRequest::default().with_transactional_ids(vec![tid(id)]),
    );
    r.transaction_states[0].clone()
}

/// Drives the shard (markers are written in the background) until `id` is in `state`.
pub fn wait_state(h: &Harness, id: &str, state: TxnState) {
    for _ in 0..200 {
        if describe(h, id).transaction_state.as_str() == state.name() {
            return;
        }
        h.block_on(async { tokio::time::sleep(std::time::Duration::from_millis(10)).await });
    }
    panic!("{id} never reached {state:?}: {:?}", describe(h, id));
}

/// Control records in a partition: (producer id, commit?).
fn markers(h: &Harness, topic: &str, p: i32) -> Vec<(i64, bool)> {
    let part = h.state.partition(topic, p).expect("partition");
    let mut out = Vec::new();
    h.block_on(async {
        crate::coordinator::log::replay(&part, |r| {
            if let Some(commit) = crate::coordinator::log::control_commit(r) {
                out.push((r.producer_id, commit));
            }
        })
        .unwrap()
    });
    out
}

#[test]
fn given_transaction_when_committed_then_markers_written_and_offsets_applied() {
    let h = harness();
    create(&h, "t", 2);
    let ids = init(&h, "tx", 60_000);
    assert_eq!(add(&h, "tx", ids, "t", &[0, 1]), vec![0, 0]);
    assert_eq!(describe(&h, "tx").transaction_state.as_str(), "Ongoing");
    assert_eq!(add_offsets(&h, 3, "tx", ids, "g"), 0);
    assert_eq!(txn_commit(&h, 3, "tx", ids, "g", "t", 42), 0);
    // Pending: not visible, and unstable for a require_stable fetch.
    assert_eq!(
        fetch_v8(&h, "g", "t").groups[0].topics[0].partitions[0].committed_offset,
        -1
    );
    let stable: OffsetFetchResponse = h.call(
        ApiKey::OffsetFetch,
        7,
        OffsetFetchRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_require_stable(true)
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partition_indexes(vec![0]),
            ])),
    );
    assert_eq!(stable.topics[0].partitions[0].error_code, 88);
    let r = end(&h, 3, "tx", ids, true);
    assert_eq!(r.error_code, 0);
    wait_state(&h, "tx", TxnState::CompleteCommit);
    assert_eq!(markers(&h, "t", 0), vec![(ids.0, true)]);
    assert_eq!(markers(&h, "t", 1), vec![(ids.0, true)]);
    assert_eq!(
        fetch_v8(&h, "g", "t").groups[0].topics[0].partitions[0].committed_offset,
        42
    );
    // A retried EndTxn of the same outcome succeeds; the other outcome is invalid.
    assert_eq!(end(&h, 3, "tx", ids, true).error_code, 0);
    assert_eq!(end(&h, 3, "tx", ids, false).error_code, 48);
}

#[test]
fn given_transaction_when_aborted_then_abort_markers_and_offsets_discarded() {
    let h = harness();
    create(&h, "t", 1);
    let ids = init(&h, "tx", 60_000);
    assert_eq!(add(&h, "tx", ids, "t", &[0]), vec![0]);
    assert_eq!(add_offsets(&h, 3, "tx", ids, "g"), 0);
    assert_eq!(txn_commit(&h, 3, "tx", ids, "g", "t", 7), 0);
    assert_eq!(end(&h, 3, "tx", ids, false).error_code, 0);
    wait_state(&h, "tx", TxnState::CompleteAbort);
    assert_eq!(markers(&h, "t", 0), vec![(ids.0, false)]);
    assert_eq!(
        fetch_v8(&h, "g", "t").groups[0].topics[0].partitions[0].committed_offset,
        -1
    );
}

#[test]
fn given_open_transaction_when_new_producer_inits_then_old_fenced_and_txn_aborted() {
    let h = harness();
    create(&h, "t", 1);
    let old = init(&h, "tx", 60_000);
    assert_eq!(add(&h, "tx", old, "t", &[0]), vec![0]);
    // The new producer is told to retry while the old transaction is aborted.
    let r: InitProducerIdResponse = h.call(
        ApiKey::InitProducerId,
        4,
        InitProducerIdRequest::default()
            .with_transactional_id(Some(tid("tx")))
            .with_transaction_timeout_ms(60_000),
    );
    assert_eq!(r.error_code, 51);
    wait_state(&h, "tx", TxnState::CompleteAbort);
    assert_eq!(markers(&h, "t", 0), vec![(old.0, false)]);
    let new = init(&h, "tx", 60_000);
    assert_eq!((new.0, new.1), (old.0, old.1 + 2));
    // The zombie is fenced everywhere.
    assert_eq!(add(&h, "tx", old, "t", &[0]), vec![90]);
    assert_eq!(end(&h, 3, "tx", old, true).error_code, 90);
    assert_eq!(end(&h, 1, "tx", old, true).error_code, 47);
    assert_eq!(add_offsets(&h, 3, "tx", old, "g"), 90);
    assert_eq!(add(&h, "tx", (old.0 + 1, new.1), "t", &[0]), vec![49]);
}

#[test]
fn given_transaction_past_its_timeout_when_ticking_then_aborted_and_producer_fenced() {
    let h = harness();
    create(&h, "t", 1);
    let ids = init(&h, "tx", 100);
    assert_eq!(add(&h, "tx", ids, "t", &[0]), vec![0]);
    wait_state(&h, "tx", TxnState::CompleteAbort);
    assert_eq!(markers(&h, "t", 0), vec![(ids.0, false)]);
    assert_eq!(describe(&h, "tx").producer_epoch, ids.1 + 1);
    assert_eq!(end(&h, 3, "tx", ids, true).error_code, 90);
}

#[test]
fn given_unknown_partition_or_state_when_adding_then_kafka_errors() {
    let h = harness();
    create(&h, "t", 1);
    let ids = init(&h, "tx", 60_000);
    // One unknown partition: it fails, the others are not attempted.
    let r: AddPartitionsToTxnResponse = h.call(
        ApiKey::AddPartitionsToTxn,
        3,
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(tid("tx"))
            .with_v3_and_below_producer_id(ProducerId(ids.0))
            .with_v3_and_below_producer_epoch(ids.1)
            .with_v3_and_below_topics(topics("t", &[0, 5])),
    );
    let codes: Vec<i16> = r.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect();
    assert_eq!(codes, vec![55, 3]);
    // Unknown transactional id; committing offsets outside the transaction.
    assert_eq!(add(&h, "nope", ids, "t", &[0]), vec![49]);
    assert_eq!(txn_commit(&h, 3, "tx", ids, "g", "t", 1), 48);
    // Ending a transaction that never started.
    assert_eq!(end(&h, 3, "tx", ids, true).error_code, 48);
    assert_eq!(describe(&h, "nope").error_code, 105);
}

#[test]
fn given_batched_v4_request_when_verifying_then_membership_per_partition() {
    let h = harness();
    create(&h, "t", 2);
    let ids = init(&h, "tx", 60_000);
    assert_eq!(add(&h, "tx", ids, "t", &[0]), vec![0]);
    let txn = |verify: bool| {
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(tid("tx"))
            .with_producer_id(ProducerId(ids.0))
            .with_producer_epoch(ids.1)
            .with_verify_only(verify)
            .with_topics(topics("t", &[0, 1]))
    };
    let codes = |r: AddPartitionsToTxnResponse| -> Vec<i16> {
        r.results_by_transaction[0].topic_results[0]
            .results_by_partition
            .iter()
            .map(|p| p.partition_error_code)
            .collect()
    };
    let r = h.call(
        ApiKey::AddPartitionsToTxn,
        4,
        AddPartitionsToTxnRequest::default().with_transactions(vec![txn(true)]),
    );
    assert_eq!(codes(r), vec![0, 48]);
    let r = h.call(
        ApiKey::AddPartitionsToTxn,
        5,
        AddPartitionsToTxnRequest::default().with_transactions(vec![txn(false)]),
    );
    assert_eq!(codes(r), vec![0, 0]);
    let r = h.call(
        ApiKey::AddPartitionsToTxn,
        4,
        AddPartitionsToTxnRequest::default().with_transactions(vec![txn(true)]),
    );
    assert_eq!(codes(r), vec![0, 0]);
}

#[test]
fn given_kip890_end_txn_v5_when_committing_then_epoch_bumped_each_transaction() {
    let h = harness();
    create(&h, "t", 1);
    let ids = init(&h, "tx", 60_000);
    assert_eq!(add(&h, "tx", ids, "t", &[0]), vec![0]);
    let r = end(&h, 5, "tx", ids, true);
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, ids.0, ids.1 + 1)
    );
    wait_state(&h, "tx", TxnState::CompleteCommit);
    // The marker carries the bumped epoch; a retry with the old epoch still succeeds.
    assert_eq!(end(&h, 5, "tx", ids, true).error_code, 0);
    assert_eq!(add(&h, "tx", (ids.0, ids.1 + 1), "t", &[0]), vec![0]);
}

/// Puts `id`'s in-memory epoch at `epoch`, as 32k transactions would have (only tests reach
/// the end of the epochs without them).
fn age_epoch(h: &Harness, id: &str, epoch: i16) -> (i64, i16) {
    let txns = crate::coordinator::txn::TxnShard::of(&h.state);
    let mut all = txns.txns.borrow_mut();
    let e = all.get_mut(id).expect("transactional id");
    e.meta.producer_epoch = epoch;
    (e.meta.producer_id, epoch)
}

#[test]
fn given_exhausted_epoch_when_tv2_end_txn_then_new_producer_id_at_epoch_zero() {
    let h = harness();
    create(&h, "t", 1);
    init(&h, "tx", 60_000);
    let old = age_epoch(&h, "tx", i16::MAX - 1);
    assert_eq!(add(&h, "tx", old, "t", &[0]), vec![0]);
    let r = end(&h, 5, "tx", old, true);
    assert_eq!(r.error_code, 0);
    let new = (r.producer_id.0, r.producer_epoch);
    assert!(new.0 != old.0 && new.0 >= 0 && new.1 == 0, "{new:?}");
    wait_state(&h, "tx", TxnState::CompleteCommit);
    // The markers close the old id's transaction at Short.MAX_VALUE; the coordinator holds
    // the new id.
    assert_eq!(markers(&h, "t", 0), vec![(old.0, true)]);
    let d = describe(&h, "tx");
    assert_eq!((d.producer_id.0, d.producer_epoch), new);
    // A retry with the old id is answered with the new one (Kafka's retryOnOverflow).
    let r = end(&h, 5, "tx", old, true);
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, new.0, 0)
    );
    assert_eq!(end(&h, 5, "tx", old, false).error_code, 48);
    // The new id carries on, bumping from 0.
    assert_eq!(add(&h, "tx", new, "t", &[0]), vec![0]);
    let r = end(&h, 5, "tx", new, false);
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, new.0, 1)
    );
    wait_state(&h, "tx", TxnState::CompleteAbort);
    assert_eq!(markers(&h, "t", 0), vec![(old.0, true), (new.0, false)]);
    // The old id is no longer this transactional id's.
    assert_eq!(add(&h, "tx", old, "t", &[0]), vec![49]);
}

#[test]
fn given_prepared_rotation_when_a_new_shard_loads_then_completed_with_the_new_id() {
    let h = harness();
    create(&h, "t", 1);
    init(&h, "tx", 60_000);
    let old = age_epoch(&h, "tx", i16::MAX - 1);
    assert_eq!(add(&h, "tx", old, "t", &[0]), vec![0]);
    let txns = crate::coordinator::txn::TxnShard::of(&h.state);
    // A crash right after the PrepareCommit: the next producer id is in the log (value v1),
    // so the reloaded coordinator completes the commit into it.
    let new = h.block_on(async {
        let r = txns.end_txn("tx", old.0, old.1, true, true).await.unwrap();
        txns.forget_loaded();
        r
    });
    assert_eq!(new.1, 0);
    wait_state(&h, "tx", TxnState::CompleteCommit);
    let d = describe(&h, "tx");
    assert_eq!((d.producer_id.0, d.producer_epoch), new);
    // The old id's commit markers (the task from before the "crash" may write one too, as a
    // coordinator that lost its partition can: a repeated marker changes nothing).
    let m = markers(&h, "t", 0);
    assert!(
        !m.is_empty() && m.iter().all(|x| *x == (old.0, true)),
        "{m:?}"
    );
}

#[test]
fn given_transactions_when_listing_then_filters_apply() {
    let h = harness();
    create(&h, "t", 1);
    let a = init(&h, "a", 60_000);
    let _b = init(&h, "b", 60_000);
    assert_eq!(add(&h, "a", a, "t", &[0]), vec![0]);
    let list = |req: ListTransactionsRequest, v: i16| -> (Vec<String>, Vec<String>) {
        let r: ListTransactionsResponse = h.call(ApiKey::ListTransactions, v, req);
        assert_eq!(r.error_code, 0);
        let mut ids: Vec<String> = r
            .transaction_states
            .iter()
            .map(|t| {
                format!(
                    "{}:{}",
                    t.transactional_id.as_str(),
                    t.transaction_state.as_str()
                )
            })
            .collect();
        ids.sort();
        (
            ids,
            r.unknown_state_filters
                .iter()
                .map(|s| s.to_string())
                .collect(),
        )
    };
    assert_eq!(
        list(ListTransactionsRequest::default(), 0).0,
        vec!["a:Ongoing", "b:Empty"]
    );
    let ongoing =
        ListTransactionsRequest::default().with_state_filters(vec![s("Ongoing"), s("Bogus")]);
    assert_eq!(
        list(ongoing, 0),
        (vec!["a:Ongoing".to_string()], vec!["Bogus".to_string()])
    );
    let by_pid = ListTransactionsRequest::default().with_producer_id_filters(vec![ProducerId(a.0)]);
    assert_eq!(list(by_pid, 0).0, vec!["a:Ongoing"]);
    let pattern = ListTransactionsRequest::default().with_transactional_id_pattern(Some(s("b.*")));
    assert_eq!(list(pattern, 2).0, vec!["b:Empty"]);
    // Open for an hour: none (the Empty one has no start time, which Kafka counts as long).
    let long = ListTransactionsRequest::default()
        .with_state_filters(vec![s("Ongoing")])
        .with_duration_filter(3_600_000);
    assert!(list(long, 1).0.is_empty());
}

#[test]
fn given_prepared_commit_when_a_new_shard_loads_then_state_restored_and_completed() {
    let h = harness();
    create(&h, "t", 1);
    let ids = init(&h, "tx", 60_000);
    assert_eq!(add(&h, "tx", ids, "t", &[0]), vec![0]);
    assert_eq!(add_offsets(&h, 3, "tx", ids, "g"), 0);
    assert_eq!(txn_commit(&h, 3, "tx", ids, "g", "t", 5), 0);
    // Forget everything in memory before the background markers run, as a crash after
    // PrepareCommit would; the reload resumes the commit.
    let txns = crate::coordinator::txn::TxnShard::of(&h.state);
    let before = txns.describe("tx").unwrap();
    assert_eq!(before.state, TxnState::Ongoing);
    h.block_on(async {
        let r = txns.end_txn("tx", ids.0, ids.1, true, false).await;
        assert!(r.is_ok());
        txns.forget_loaded();
        crate::coordinator::group::GroupShard::of(&h.state).forget_loaded();
        crate::coordinator::group::GroupShard::of(&h.state)
            .groups
            .borrow_mut()
            .clear();
    });
    wait_state(&h, "tx", TxnState::CompleteCommit);
    let d = describe(&h, "tx");
    assert_eq!((d.producer_id.0, d.producer_epoch), ids);
    assert_eq!(
        fetch_v8(&h, "g", "t").groups[0].topics[0].partitions[0].committed_offset,
        5
    );
}

#[test]
fn given_idle_transactional_ids_when_expiring_then_removed_durably_and_open_ones_kept() {
    let h = harness();
    create(&h, "t", 1);
    let idle = init(&h, "idle", 60_000);
    let done = init(&h, "done", 60_000);
    assert_eq!(add(&h, "done", done, "t", &[0]), vec![0]);
    assert_eq!(end(&h, 3, "done", done, true).error_code, 0);
    wait_state(&h, "done", TxnState::CompleteCommit);
    let open = init(&h, "open", 60_000);
    assert_eq!(add(&h, "open", open, "t", &[0]), vec![0]);

    let txns = crate::coordinator::txn::TxnShard::of(&h.state);
    let later = crate::now_ms() + 10_000;
    // Not idle long enough: nothing goes.
    assert_eq!(h.block_on(txns.remove_expired(later, 3_600_000)), 0);
    // Idle for 10 s with a 5 s expiration: the Empty and the CompleteCommit ids go; the one
    // with a transaction open stays whatever its age.
    assert_eq!(h.block_on(txns.remove_expired(later, 5_000)), 2);
    let present = |txns: &crate::coordinator::txn::TxnShard| {
        ["idle", "done", "open"].map(|id| txns.describe(id).is_some())
    };
    assert_eq!(present(&txns), [false, false, true]);

    // The tombstones are in `__transaction_state`: a reloading shard forgets them too.
    txns.forget_loaded();
    txns.load_all();
    assert_eq!(present(&txns), [false, false, true]);

    // The expired id starts afresh: a new producer id at epoch 0, as Kafka gives.
    let again = init(&h, "idle", 60_000);
    assert_ne!(again.0, idle.0);
    assert_eq!(again.1, 0);
}

pub fn is_txn_api(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::AddPartitionsToTxn
            | ApiKey::AddOffsetsToTxn
            | ApiKey::EndTxn
            | ApiKey::TxnOffsetCommit
            | ApiKey::DescribeTransactions
            | ApiKey::ListTransactions
    )
}

/// One call of a transaction API at version `v`, in a transaction of its own.
pub fn call_at_version(h: &Harness, key: ApiKey, v: i16) {
    let id = format!("av-{key:?}-{v}");
    let ids = init(h, &id, 60_000);
    match key {
        ApiKey::AddPartitionsToTxn if v < 4 => {
            let r: AddPartitionsToTxnResponse = h.call(
                key,
                v,
                AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(tid(&id))
                    .with_v3_and_below_producer_id(ProducerId(ids.0))
                    .with_v3_and_below_producer_epoch(ids.1)
                    .with_v3_and_below_topics(topics("t", &[0])),
            );
            assert_eq!(
                r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code, 0,
                "v{v}"
            );
        }
        ApiKey::AddPartitionsToTxn => {
            let t = AddPartitionsToTxnTransaction::default()
                .with_transactional_id(tid(&id))
                .with_producer_id(ProducerId(ids.0))
                .with_producer_epoch(ids.1)
                .with_topics(topics("t", &[0]));
            let r: AddPartitionsToTxnResponse = h.call(
                key,
                v,
                AddPartitionsToTxnRequest::default().with_transactions(vec![t]),
            );
            assert_eq!(
                r.results_by_transaction[0].topic_results[0].results_by_partition[0]
                    .partition_error_code,
                0,
                "v{v}"
            );
        }
        ApiKey::AddOffsetsToTxn => assert_eq!(add_offsets(h, v, &id, ids, "g"), 0, "v{v}"),
        ApiKey::EndTxn => {
            assert_eq!(add(h, &id, ids, "t", &[0]), vec![0]);
            assert_eq!(end(h, v, &id, ids, true).error_code, 0, "v{v}");
        }
        ApiKey::TxnOffsetCommit => {
            assert_eq!(add_offsets(h, 3, &id, ids, "g"), 0);
            assert_eq!(txn_commit(h, v, &id, ids, "g", "t", 1), 0, "v{v}");
        }
        ApiKey::DescribeTransactions => assert_eq!(describe(h, &id).error_code, 0),
        ApiKey::ListTransactions => {
            let r: ListTransactionsResponse = h.call(key, v, ListTransactionsRequest::default());
            assert_eq!(r.error_code, 0, "v{v}");
            assert!(!r.transaction_states.is_empty());
        }
        other => panic!("{other:?} is not a transaction API"),
    }
}
