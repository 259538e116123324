//! In-process tests of share group administration through the wire codec:
//! Alter/DeleteShareGroupOffsets (only on an empty group, the new start offset is where
//! the next member starts, deleted offsets start over from `share.auto.offset.reset`),
//! DeleteGroups of a share group, and the other group APIs' view of a share group.

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::*;

use super::group_tests::s;
use super::share_tests::{acquired, consumer_group_member, fetch_as, heartbeat, start_offset};
use super::testing::{create, produce_req, Harness};

/// One fetch of a fresh share session of `member` (epoch 0): what it acquired of t-0.
fn acquire(h: &Harness, member: &str) -> Vec<(i64, i64, i16)> {
    let r = fetch_as(h, member, 0, vec![]);
    assert_eq!(r.error_code, 0, "{r:?}");
    acquired(&r)
}

fn produce(h: &Harness, n: usize) {
    let batch = crate::test_support::TestBatch::new(n).encode();
    let r: ProduceResponse = h.call(ApiKey::Produce, 9, produce_req("t", 0, -1, batch));
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
}

fn alter(h: &Harness, group: &str, topic: &str, p: i32, o: i64) -> AlterShareGroupOffsetsResponse {
    let req = AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
            .with_topic_name(TopicName(s(topic)))
            .with_partitions(vec![
                AlterShareGroupOffsetsRequestPartition::default()
                    .with_partition_index(p)
                    .with_start_offset(o),
            ])]);
    h.call(ApiKey::AlterShareGroupOffsets, 0, req)
}

fn delete_offsets(h: &Harness, topic: &str) -> DeleteShareGroupOffsetsResponse {
    delete_offsets_of(h, "sg", topic)
}

fn delete_offsets_of(h: &Harness, group: &str, topic: &str) -> DeleteShareGroupOffsetsResponse {
    let req = DeleteShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(vec![
            DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(TopicName(s(topic)))
        ]);
    h.call(ApiKey::DeleteShareGroupOffsets, 0, req)
}

fn delete_group(h: &Harness, group: &str) -> i16 {
    let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(group))]);
    let r: DeleteGroupsResponse = h.call(ApiKey::DeleteGroups, 2, req);
    r.results[0].error_code
}

#[test]
fn given_a_share_group_when_altering_and_deleting_offsets_then_kafka_admin_semantics() {
    let h = Harness::new();
    create(&h, "t", 1);
    produce(&h, 10);
    assert_eq!(heartbeat(&h, "m1", 0).error_code, 0);
    // share.auto.offset.reset=latest: the share partition starts at 10.
    assert!(acquire(&h, "m1").is_empty());
    produce(&h, 5);
    assert_eq!(acquire(&h, "m1"), vec![(10, 14, 1)]);

    // A group with a member: NON_EMPTY_GROUP for every change; no such group: 69.
    assert_eq!(alter(&h, "sg", "t", 0, 0).error_code, 68);
    assert_eq!(delete_offsets(&h, "t").error_code, 68);
    assert_eq!(delete_group(&h, "sg"), 68);
    assert_eq!(delete_offsets_of(&h, "nope", "t").error_code, 69);
    assert_eq!(delete_group(&h, "nope"), 69);
    // Kafka's alter makes an empty share group of an id no group has, not of a consumer
    // group's.
    assert_eq!(alter(&h, "nope", "t", 0, 0).error_code, 0);
    assert_eq!(delete_group(&h, "nope"), 0);
    assert_eq!(consumer_group_member(&h, "cg", "c1").error_code, 0);
    assert_eq!(alter(&h, "cg", "t", 0, 0).error_code, 69);

    // The other group APIs do not describe a share group (Kafka: GROUP_ID_NOT_FOUND).
    let d: DescribeGroupsResponse = h.call(
        ApiKey::DescribeGroups,
        6,
        DescribeGroupsRequest::default().with_groups(vec![GroupId(s("sg"))]),
    );
    assert_eq!(d.groups[0].error_code, 69);
    let c: ConsumerGroupDescribeResponse = h.call(
        ApiKey::ConsumerGroupDescribe,
        1,
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("sg"))]),
    );
    assert_eq!(c.groups[0].error_code, 69);
    assert_eq!(
        c.groups[0].error_message.as_deref(),
        Some("Group sg is not a consumer group.")
    );

    // Empty now: the start offset moves back to 2, and records 2.. (the 10..14 ones the
    // member held too) are delivered afresh to the next member.
    assert_eq!(heartbeat(&h, "m1", -1).member_epoch, -1);
    let r = alter(&h, "sg", "t", 0, 2);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    assert_eq!(start_offset(&h), 2);
    // No topics named: the partitions the group has state for.
    let r: crate::codec::describe_share_group_offsets::DescribeShareGroupOffsetsResponse = h.call(
        ApiKey::DescribeShareGroupOffsets,
        0,
        DescribeShareGroupOffsetsRequest::default().with_groups(vec![
            DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(GroupId(s("sg")))
                .with_topics(None),
        ]),
    );
    let t = &r.groups[0].topics;
    assert_eq!((t.len(), t[0].partitions.len()), (1, 1), "{r:?}");
    assert_eq!(t[0].partitions[0].start_offset, 2);
    // Unknown partitions and topics fail only themselves.
    let r = alter(&h, "sg", "t", 7, 0);
    assert_eq!(
        (r.error_code, r.responses[0].partitions[0].error_code),
        (0, 3)
    );
    let r = alter(&h, "sg", "zz", 0, 0);
    assert_eq!(
        (r.error_code, r.responses[0].partitions[0].error_code),
        (0, 3)
    );
    assert_eq!(heartbeat(&h, "m2", 0).error_code, 0);
    assert_eq!(acquire(&h, "m2"), vec![(2, 9, 1), (10, 14, 1)]);
    assert_eq!(heartbeat(&h, "m2", -1).member_epoch, -1);

    // Deleting the offsets: no state, and the next member starts at the log end again.
    let r = delete_offsets(&h, "t");
    assert_eq!((r.error_code, r.responses[0].error_code), (0, 0), "{r:?}");
    assert_eq!(start_offset(&h), -1);
    assert_eq!(delete_offsets(&h, "zz").responses[0].error_code, 3);
    assert_eq!(heartbeat(&h, "m3", 0).error_code, 0);
    assert!(acquire(&h, "m3").is_empty());
    assert_eq!(start_offset(&h), 15);
    assert_eq!(heartbeat(&h, "m3", -1).member_epoch, -1);

    // DeleteGroups of the empty share group: gone from ListGroups, its state deleted.
    assert_eq!(delete_group(&h, "sg"), 0);
    let l: ListGroupsResponse = h.call(ApiKey::ListGroups, 5, ListGroupsRequest::default());
    assert!(!l.groups.iter().any(|g| g.group_id.as_str() == "sg"));
    assert_eq!(start_offset(&h), -1);
    assert_eq!(delete_group(&h, "sg"), 69);
}

fn describe(h: &Harness) -> share_group_describe_response::DescribedGroup {
    let req = ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("sg"))]);
    let r: ShareGroupDescribeResponse = h.call(ApiKey::ShareGroupDescribe, 1, req);
    r.groups[0].clone()
}

/// Forgets the groups as a restarted broker starts: the next request loads them again from
/// `__consumer_offsets`.
fn reload(h: &Harness) {
    let groups = crate::coordinator::group::GroupShard::of(&h.state);
    groups.forget_loaded();
    groups.groups.borrow_mut().clear();
    crate::coordinator::share::group::ShareGroups::here()
        .groups
        .borrow_mut()
        .clear();
}

#[test]
fn given_a_share_group_when_the_coordinator_reloads_then_members_and_epochs_are_kept() {
    let h = Harness::new();
    create(&h, "t", 1);
    let m1 = heartbeat(&h, "m1", 0);
    let m2 = heartbeat(&h, "m2", 0);
    assert_eq!((m1.error_code, m2.error_code), (0, 0));
    let before = describe(&h);
    assert_eq!(before.members.len(), 2);
    reload(&h);
    let after = describe(&h);
    assert_eq!(after.error_code, 0, "{:?}", after.error_message);
    assert_eq!(
        (
            after.group_epoch,
            after.assignment_epoch,
            after.members.len()
        ),
        (before.group_epoch, before.assignment_epoch, 2)
    );
    // The members carry on at their epochs: no UNKNOWN_MEMBER_ID, no rejoin.
    let m1 = heartbeat(&h, "m1", m1.member_epoch);
    assert_eq!(m1.error_code, 0, "{:?}", m1.error_message);
    assert_eq!(m1.member_epoch, before.group_epoch);
    // A leave is durable too, and so is a delete: the group is gone after the next load.
    assert_eq!(heartbeat(&h, "m2", -1).error_code, 0);
    reload(&h);
    assert_eq!(describe(&h).members.len(), 1);
    assert_eq!(heartbeat(&h, "m1", -1).error_code, 0);
    assert_eq!(delete_group(&h, "sg"), 0);
    reload(&h);
    assert_eq!(
        describe(&h).error_code,
        kafka_protocol::error::ResponseError::GroupIdNotFound.code()
    );
}
