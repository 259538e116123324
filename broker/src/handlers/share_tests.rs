//! In-process tests of the share group APIs through the wire codec: join, a share session's
//! fetches with piggy-backed acknowledgements, ShareAcknowledge, the session and record
//! state errors, and the admin views (ShareGroupDescribe, DescribeShareGroupOffsets,
//! ListGroups).

use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use kafka_protocol::messages::*;

use super::group_tests::s;
use super::testing::{create, produce_req, Harness};

/// Joins `member` to consumer group `group` (KIP-848) subscribed to topic `t`.
pub(super) fn consumer_group_member(
    h: &Harness,
    group: &str,
    member: &str,
) -> ConsumerGroupHeartbeatResponse {
    h.call(
        ApiKey::ConsumerGroupHeartbeat,
        0,
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_member_id(s(member))
            .with_rebalance_timeout_ms(10_000)
            .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
            .with_topic_partitions(Some(vec![])),
    )
}

pub(super) fn heartbeat(h: &Harness, member: &str, epoch: i32) -> ShareGroupHeartbeatResponse {
    let req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names((epoch == 0).then(|| vec![TopicName(s("t"))]));
    h.call(ApiKey::ShareGroupHeartbeat, 1, req)
}

fn fetch(h: &Harness, epoch: i32, acks: Vec<(i64, i64, i8)>) -> ShareFetchResponse {
    fetch_as(h, "m1", epoch, acks)
}

/// A ShareFetch of t-0 by `member` of group `sg`, acknowledging `acks` (first, last, type).
pub(super) fn fetch_as(
    h: &Harness,
    member: &str,
    epoch: i32,
    acks: Vec<(i64, i64, i8)>,
) -> ShareFetchResponse {
    h.call(ApiKey::ShareFetch, 1, fetch_request(h, member, epoch, acks))
}

fn fetch_request(
    h: &Harness,
    member: &str,
    epoch: i32,
    acks: Vec<(i64, i64, i8)>,
) -> ShareFetchRequest {
    let id = h.state.ctx.catalog.snapshot().get("t").unwrap().id;
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s("sg"))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_max_records(100)
        .with_batch_size(100)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(
                    acks.into_iter()
                        .map(|(f, l, t)| {
                            AcknowledgementBatch::default()
                                .with_first_offset(f)
                                .with_last_offset(l)
                                .with_acknowledge_types(vec![t])
                        })
                        .collect(),
                )])])
}

fn acknowledge(
    h: &Harness,
    epoch: i32,
    first: i64,
    last: i64,
    kind: i8,
) -> ShareAcknowledgeResponse {
    h.call(
        ApiKey::ShareAcknowledge,
        1,
        ack_request(h, epoch, (first, last, kind)),
    )
}

/// A ShareAcknowledge of t-0 by m1 of group `sg`: one batch `first..=last` of `kind`.
fn ack_request(
    h: &Harness,
    epoch: i32,
    (first, last, kind): (i64, i64, i8),
) -> ShareAcknowledgeRequest {
    let id = h.state.ctx.catalog.snapshot().get("t").unwrap().id;
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s("sg"))))
        .with_member_id(Some(s("m1")))
        .with_share_session_epoch(epoch)
        .with_topics(vec![AcknowledgeTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![AcknowledgePartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(vec![AckBatch::default()
                    .with_first_offset(first)
                    .with_last_offset(last)
                    .with_acknowledge_types(vec![kind])])])])
}

/// The share-partition start offset of `sg` on t-0 (DescribeShareGroupOffsets).
pub(super) fn start_offset(h: &Harness) -> i64 {
    start_and_lag(h).0
}

/// The start offset and lag (v1, KIP-1226) of `sg` on t-0.
pub(super) fn start_and_lag(h: &Harness) -> (i64, i64) {
    let req = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(s("sg")))
            .with_topics(Some(vec![DescribeShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(s("t")))
                .with_partitions(vec![0])])),
    ]);
    let r: crate::codec::describe_share_group_offsets::DescribeShareGroupOffsetsResponse = h.call(
        ApiKey::DescribeShareGroupOffsets,
        1,
        crate::codec::Capped(req),
    );
    let p = &r.groups[0].topics[0].partitions[0];
    (p.start_offset, p.lag)
}

pub(super) fn acquired(r: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    let p = &r.responses[0].partitions[0];
    assert_eq!((p.error_code, p.acknowledge_error_code), (0, 0), "{p:?}");
    p.acquired_records
        .iter()
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

#[test]
fn given_a_share_member_when_fetching_and_acknowledging_then_kafka_share_semantics() {
    let h = Harness::new();
    create(&h, "t", 1);
    let hb = heartbeat(&h, "m1", 0);
    assert_eq!((hb.error_code, hb.member_epoch), (0, 1));
    assert_eq!(
        hb.assignment.unwrap().topic_partitions[0].partitions,
        vec![0]
    );
    // share.auto.offset.reset=latest (the default): the first fetch starts the share
    // partition at the log end, so only what is produced afterwards is delivered.
    let batch = crate::test_support::TestBatch::new(3).encode();
    let _: ProduceResponse = h.call(ApiKey::Produce, 9, produce_req("t", 0, -1, batch));
    assert!(acquired(&fetch(&h, 0, vec![])).is_empty());
    let batch = crate::test_support::TestBatch::new(10).encode();
    let _: ProduceResponse = h.call(ApiKey::Produce, 9, produce_req("t", 0, -1, batch));
    let r = fetch(&h, 1, vec![]);
    assert_eq!(acquired(&r), vec![(3, 12, 1)]);
    // Lag (KIP-1226): the high watermark less the start offset; nothing is done yet.
    assert_eq!(start_and_lag(&h), (3, 10));
    assert!(!r.responses[0].partitions[0]
        .records
        .as_ref()
        .unwrap()
        .is_empty());
    assert_eq!(r.acquisition_lock_timeout_ms, 30_000);
    // Accept 3..=7, release 8..=12: those come straight back, second delivery.
    let r = fetch(&h, 2, vec![(3, 7, 1), (8, 12, 2)]);
    assert_eq!(acquired(&r), vec![(8, 12, 2)]);
    // Reject them: the share partition is done up to the log end.
    let a = acknowledge(&h, 3, 8, 12, 3);
    assert_eq!(a.error_code, 0);
    assert_eq!(a.responses[0].partitions[0].error_code, 0);
    // Acknowledging what is done already: INVALID_RECORD_STATE; a stale epoch: 123.
    assert_eq!(
        acknowledge(&h, 4, 3, 3, 1).responses[0].partitions[0].error_code,
        121
    );
    assert_eq!(fetch(&h, 9, vec![]).error_code, 123);
    assert!(acquired(&fetch(&h, 5, vec![])).is_empty());

    assert_eq!(start_and_lag(&h), (13, 0));
    // The lag leaves out records done in flight: 13..=16 acquired, 15..=16 accepted.
    let batch = crate::test_support::TestBatch::new(4).encode();
    let _: ProduceResponse = h.call(ApiKey::Produce, 9, produce_req("t", 0, -1, batch));
    assert_eq!(acquired(&fetch(&h, 6, vec![])), vec![(13, 16, 1)]);
    assert_eq!(acknowledge(&h, 7, 15, 16, 1).error_code, 0);
    assert_eq!(start_and_lag(&h), (13, 2));

    let d: ShareGroupDescribeResponse = h.call(
        ApiKey::ShareGroupDescribe,
        1,
        ShareGroupDescribeRequest::default()
            .with_group_ids(vec![GroupId(s("sg")), GroupId(s("nope"))]),
    );
    assert_eq!(d.groups[0].group_state.as_str(), "Stable");
    assert_eq!(d.groups[0].members[0].member_id.as_str(), "m1");
    assert_eq!(d.groups[1].error_code, 69);
    let l: ListGroupsResponse = h.call(ApiKey::ListGroups, 5, ListGroupsRequest::default());
    assert!(l
        .groups
        .iter()
        .any(|g| g.group_id.as_str() == "sg" && g.group_type.as_str() == "share"));

    // A consumer group's id is not a share group's (Kafka: GROUP_ID_NOT_FOUND).
    assert_eq!(consumer_group_member(&h, "cg", "c1").error_code, 0);
    let req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("cg")))
        .with_member_id(s("m9"))
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]));
    let r: ShareGroupHeartbeatResponse = h.call(ApiKey::ShareGroupHeartbeat, 1, req);
    assert_eq!(r.error_code, 69);

    // Leaving the group; a member the group does not know cannot heartbeat.
    assert_eq!(heartbeat(&h, "m1", -1).member_epoch, -1);
    assert_eq!(heartbeat(&h, "m1", 1).error_code, 25);
}

/// A ShareAcknowledge v2 of t-0 by m1: one batch `first..=last` of `kind`.
fn acknowledge_v2(
    h: &Harness,
    epoch: i32,
    batch: (i64, i64, i8),
    is_renew_ack: bool,
) -> crate::codec::share_acknowledge::ShareAcknowledgeResponse {
    let body = ack_request(h, epoch, batch);
    let req = crate::codec::share_acknowledge::ShareAcknowledgeRequest { body, is_renew_ack };
    h.call(ApiKey::ShareAcknowledge, 2, req)
}

/// A renewing ShareFetch v2 of t-0 by m1 (`IsRenewAck`, every fetch limit 0 unless
/// `max_records` says otherwise).
fn renewing_fetch(
    h: &Harness,
    epoch: i32,
    renew: (i64, i64),
    max_records: i32,
) -> crate::codec::Capped<ShareFetchResponse> {
    let mut body = fetch_request(h, "m1", epoch, vec![(renew.0, renew.1, 4)]);
    body.max_bytes = 0;
    body.max_records = max_records;
    let req = crate::codec::share_fetch::ShareFetchRequest {
        body,
        share_acquire_mode: 1,
        is_renew_ack: true,
    };
    h.call(ApiKey::ShareFetch, 2, req)
}

#[test]
fn given_renew_acknowledgements_when_sent_at_v2_then_records_stay_with_their_holder() {
    let h = Harness::new();
    create(&h, "t", 1);
    assert_eq!(heartbeat(&h, "m1", 0).error_code, 0);
    assert_eq!(heartbeat(&h, "m2", 0).error_code, 0);
    assert!(acquired(&fetch(&h, 0, vec![])).is_empty());
    let batch = crate::test_support::TestBatch::new(10).encode();
    let _: ProduceResponse = h.call(ApiKey::Produce, 9, produce_req("t", 0, -1, batch));
    assert_eq!(acquired(&fetch(&h, 1, vec![])), vec![(0, 9, 1)]);

    // RENEW needs v2 and IsRenewAck: otherwise the partition's acks are refused whole.
    let v1 = acknowledge(&h, 2, 0, 4, 4);
    assert_eq!(v1.responses[0].partitions[0].error_code, 42);
    let unflagged = acknowledge_v2(&h, 3, (0, 4, 4), false);
    assert_eq!(unflagged.responses[0].partitions[0].error_code, 42);

    let renewed = acknowledge_v2(&h, 4, (0, 4, 4), true);
    assert_eq!(renewed.error_code, 0);
    assert_eq!(renewed.responses[0].partitions[0].error_code, 0);
    assert_eq!(renewed.acquisition_lock_timeout_ms, 30_000);
    // Still m1's: another member gets nothing, m1 accepts them.
    assert!(acquired(&fetch_as(&h, "m2", 0, vec![])).is_empty());
    let accepted = acknowledge_v2(&h, 5, (0, 4, 1), false);
    assert_eq!(accepted.responses[0].partitions[0].error_code, 0);

    // A renewing ShareFetch must not fetch: any limit set is Kafka's INVALID_REQUEST.
    let r = renewing_fetch(&h, 6, (5, 9), 100);
    assert_eq!(r.error_code, 42);
    assert_eq!(
        r.error_message.as_deref(),
        Some("maxRecords must be set to 0, if isRenewAck is true.")
    );
    let r = renewing_fetch(&h, 6, (5, 9), 0);
    assert_eq!(r.error_code, 0);
    let p = &r.responses[0].partitions[0];
    assert_eq!((p.error_code, p.acknowledge_error_code), (0, 0), "{p:?}");
    assert!(p.acquired_records.is_empty());
    assert_eq!(
        acknowledge(&h, 7, 5, 9, 1).responses[0].partitions[0].error_code,
        0
    );
    assert_eq!(start_offset(&h), 10);
}

/// A ShareFetch v2 of t-0 by `member` at `epoch` in `mode` (0 batch-optimized, 1 record
/// limit), for at most `max_records`.
fn fetch_v2(
    h: &Harness,
    member: &str,
    epoch: i32,
    mode: i8,
    max_records: i32,
) -> ShareFetchResponse {
    let mut body = fetch_request(h, member, epoch, vec![]);
    body.max_records = max_records;
    let req = crate::codec::share_fetch::ShareFetchRequest {
        body,
        share_acquire_mode: mode,
        is_renew_ack: false,
    };
    let r: crate::codec::Capped<ShareFetchResponse> = h.call(ApiKey::ShareFetch, 2, req);
    r.0
}

#[test]
fn given_batches_larger_than_max_records_when_fetching_then_whole_batches_unless_record_limit() {
    let h = Harness::new();
    create(&h, "t", 1);
    assert_eq!(heartbeat(&h, "m1", 0).error_code, 0);
    assert_eq!(heartbeat(&h, "m2", 0).error_code, 0);
    assert!(
        acquired(&fetch_as(&h, "m1", 0, vec![])).is_empty(),
        "starts at the log end"
    );
    for _ in 0..2 {
        let batch = crate::test_support::TestBatch::new(10).encode();
        let _: ProduceResponse = h.call(ApiKey::Produce, 9, produce_req("t", 0, -1, batch));
    }
    // Batch-optimized (v1's only mode, v2's 0): the batch holding the 3rd record is taken
    // whole, and no further batch is started.
    assert_eq!(acquired(&fetch_v2(&h, "m1", 1, 0, 3)), vec![(0, 9, 1)]);
    // Record limit: exactly MaxRecords, the batch split.
    assert_eq!(acquired(&fetch_v2(&h, "m2", 0, 1, 3)), vec![(10, 12, 1)]);
    assert_eq!(acquired(&fetch_v2(&h, "m2", 1, 1, 3)), vec![(13, 15, 1)]);
    // Batch-optimized again: what is left of the batch, whole.
    assert_eq!(acquired(&fetch_v2(&h, "m2", 2, 0, 1)), vec![(16, 19, 1)]);
}
