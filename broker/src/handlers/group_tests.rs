//! In-process tests of the group APIs through the wire codec: join/sync/heartbeat/leave,
//! offsets, admin, and reload of `__consumer_offsets` by a new shard.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::testing::Harness;
use crate::config::BrokerConfig;
use crate::handlers::testing::create;

pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub fn harness() -> Harness {
    Harness::with_config(BrokerConfig {
        group_initial_rebalance_delay_ms: 0,
        ..BrokerConfig::default()
    })
}

pub fn join_req(group: &str, member: &str, instance: Option<&str>) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(member))
        .with_group_instance_id(instance.map(s))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(b"meta"))])
}

/// Joins a one-member group and syncs it: (member id, generation).
pub fn join_stable(h: &Harness, group: &str, version: i16) -> (String, i32) {
    let mut r: JoinGroupResponse = h.call(ApiKey::JoinGroup, version, join_req(group, "", None));
    if r.error_code == 79 {
        let id = r.member_id.to_string();
        r = h.call(ApiKey::JoinGroup, version, join_req(group, &id, None));
    }
    assert_eq!(r.error_code, 0, "join v{version}");
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(r.generation_id)
        .with_member_id(r.member_id.clone())
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(r.member_id.clone())
            .with_assignment(Bytes::from_static(b"assigned"))]);
    let sr: SyncGroupResponse = h.call(ApiKey::SyncGroup, 3, sync);
    assert_eq!(sr.error_code, 0);
    assert_eq!(&sr.assignment[..], b"assigned");
    (r.member_id.to_string(), r.generation_id)
}

pub fn commit_req(
    group: &str,
    member: &str,
    gen: i32,
    topic: &str,
    offset: i64,
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(gen)
        .with_member_id(s(member))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_metadata(Some(s("md")))])])
}

pub fn fetch_v8(h: &Harness, group: &str, topic: &str) -> OffsetFetchResponse {
    let req = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
            .with_name(TopicName(s(topic)))
            .with_partition_indexes(vec![0, 1])]))]);
    h.call(ApiKey::OffsetFetch, 8, req)
}

#[test]
fn given_first_join_v4_when_joining_then_member_id_required_then_joined_as_leader() {
    let h = harness();
    let r: JoinGroupResponse = h.call(ApiKey::JoinGroup, 9, join_req("g", "", None));
    assert_eq!(r.error_code, 79);
    assert!(!r.member_id.is_empty());
    let id = r.member_id.to_string();
    let r: JoinGroupResponse = h.call(ApiKey::JoinGroup, 9, join_req("g", &id, None));
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, 1);
    assert_eq!(r.leader.as_str(), id);
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(r.members.len(), 1);
}

#[test]
fn given_stable_member_when_heartbeating_with_wrong_generation_or_member_then_errors() {
    let h = harness();
    let (id, gen) = join_stable(&h, "g", 9);
    let hb = |member: &str, gen: i32| -> i16 {
        let r: HeartbeatResponse = h.call(
            ApiKey::Heartbeat,
            4,
            HeartbeatRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_generation_id(gen)
                .with_member_id(s(member)),
        );
        r.error_code
    };
    assert_eq!(hb(&id, gen), 0);
    assert_eq!(hb(&id, gen + 1), 22);
    assert_eq!(hb("nobody", gen), 25);
}

#[test]
fn given_committed_offset_when_fetching_then_offset_and_metadata_come_back() {
    let h = harness();
    create(&h, "t", 2);
    let (id, gen) = join_stable(&h, "g", 9);
    let r: OffsetCommitResponse =
        h.call(ApiKey::OffsetCommit, 9, commit_req("g", &id, gen, "t", 42));
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    let f = fetch_v8(&h, "g", "t");
    let p = &f.groups[0].topics[0].partitions;
    assert_eq!(
        (p[0].committed_offset, p[0].metadata.as_deref()),
        (42, Some("md"))
    );
    assert_eq!(p[1].committed_offset, -1);
    // Wrong generation and unknown topic.
    let r: OffsetCommitResponse = h.call(
        ApiKey::OffsetCommit,
        9,
        commit_req("g", &id, gen + 5, "t", 1),
    );
    assert_eq!(r.topics[0].partitions[0].error_code, 22);
    let r: OffsetCommitResponse = h.call(
        ApiKey::OffsetCommit,
        9,
        commit_req("g", &id, gen, "nope", 1),
    );
    assert_eq!(r.topics[0].partitions[0].error_code, 3);
    // Simple (standalone) commit to a group that does not exist yet.
    let r: OffsetCommitResponse =
        h.call(ApiKey::OffsetCommit, 8, commit_req("solo", "", -1, "t", 7));
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    // v9 to a missing group with a generation: GROUP_ID_NOT_FOUND; v8: ILLEGAL_GENERATION.
    let r: OffsetCommitResponse = h.call(
        ApiKey::OffsetCommit,
        9,
        commit_req("missing", "m", 3, "t", 7),
    );
    assert_eq!(r.topics[0].partitions[0].error_code, 69);
    let r: OffsetCommitResponse = h.call(
        ApiKey::OffsetCommit,
        8,
        commit_req("missing", "m", 3, "t", 7),
    );
    assert_eq!(r.topics[0].partitions[0].error_code, 22);
}

#[test]
fn given_oversized_metadata_when_committing_then_offset_metadata_too_large() {
    let h = harness();
    create(&h, "t", 1);
    let mut req = commit_req("g", "", -1, "t", 1);
    req.topics[0].partitions[0].committed_metadata = Some(s(&"x".repeat(5000)));
    let r: OffsetCommitResponse = h.call(ApiKey::OffsetCommit, 9, req);
    assert_eq!(r.topics[0].partitions[0].error_code, 12);
}

#[test]
fn given_members_when_leaving_describing_listing_and_deleting_then_kafka_answers() {
    let h = harness();
    create(&h, "t", 1);
    let (id, gen) = join_stable(&h, "g", 9);
    let _: OffsetCommitResponse =
        h.call(ApiKey::OffsetCommit, 9, commit_req("g", &id, gen, "t", 5));
    let d: DescribeGroupsResponse = h.call(
        ApiKey::DescribeGroups,
        5,
        DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]),
    );
    assert_eq!(d.groups[0].group_state.as_str(), "Stable");
    assert_eq!(&d.groups[0].members[0].member_assignment[..], b"assigned");
    assert_eq!(d.groups[0].members[0].client_host.as_str(), "/127.0.0.1");
    let del: DeleteGroupsResponse = h.call(
        ApiKey::DeleteGroups,
        2,
        DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g"))]),
    );
    assert_eq!(del.results[0].error_code, 68, "non-empty group");
    let l: LeaveGroupResponse = h.call(
        ApiKey::LeaveGroup,
        5,
        LeaveGroupRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_members(vec![
                MemberIdentity::default().with_member_id(s(&id)),
                MemberIdentity::default().with_member_id(s("ghost")),
            ]),
    );
    assert_eq!(l.members[0].error_code, 0);
    assert_eq!(l.members[1].error_code, 25);
    let lg: ListGroupsResponse = h.call(
        ApiKey::ListGroups,
        5,
        ListGroupsRequest::default().with_states_filter(vec![s("empty")]),
    );
    assert_eq!(lg.groups.len(), 1);
    assert_eq!(lg.groups[0].group_state.as_str(), "Empty");
    let od: OffsetDeleteResponse = h.call(
        ApiKey::OffsetDelete,
        0,
        OffsetDeleteRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_topics(vec![
                offset_delete_request::OffsetDeleteRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![
                        offset_delete_request::OffsetDeleteRequestPartition::default()
                            .with_partition_index(0),
                    ]),
            ]),
    );
    assert_eq!(od.error_code, 0);
    assert_eq!(
        fetch_v8(&h, "g", "t").groups[0].topics[0].partitions[0].committed_offset,
        -1
    );
    let del: DeleteGroupsResponse = h.call(
        ApiKey::DeleteGroups,
        2,
        DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g")), GroupId(s("nope"))]),
    );
    assert_eq!(del.results[0].error_code, 0);
    assert_eq!(del.results[1].error_code, 69);
    let d: DescribeGroupsResponse = h.call(
        ApiKey::DescribeGroups,
        6,
        DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]),
    );
    assert_eq!(d.groups[0].error_code, 69);
}

#[test]
fn given_commits_when_a_new_shard_loads_the_partition_then_offsets_and_group_restored() {
    let h = harness();
    create(&h, "t", 1);
    let (id, gen) = join_stable(&h, "g", 9);
    let _: OffsetCommitResponse =
        h.call(ApiKey::OffsetCommit, 9, commit_req("g", &id, gen, "t", 99));
    // Forget everything in memory, as a restarted shard would.
    let gs = crate::coordinator::group::GroupShard::of(&h.state);
    gs.groups.borrow_mut().clear();
    gs.forget_loaded();
    let f = fetch_v8(&h, "g", "t");
    assert_eq!(f.groups[0].topics[0].partitions[0].committed_offset, 99);
    assert_eq!(
        f.groups[0].topics[0].partitions[0].metadata.as_deref(),
        Some("md")
    );
    let d: DescribeGroupsResponse = h.call(
        ApiKey::DescribeGroups,
        5,
        DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]),
    );
    assert_eq!(d.groups[0].group_state.as_str(), "Stable");
    assert_eq!(d.groups[0].members[0].member_id.as_str(), id);
}

#[test]
fn given_loaded_partition_when_unloaded_and_loaded_at_a_new_epoch_then_only_its_groups_go_and_come_back(
) {
    // What a node does when it resigns a `__consumer_offsets` partition and is elected for
    // it again later (coordinator::leadership): the groups of that partition go from memory,
    // and the next load at another epoch replays them from the log.
    let h = harness();
    create(&h, "t", 1);
    let (id, gen) = join_stable(&h, "g", 9);
    let _: OffsetCommitResponse =
        h.call(ApiKey::OffsetCommit, 9, commit_req("g", &id, gen, "t", 42));
    let gs = crate::coordinator::group::GroupShard::of(&h.state);
    let p = gs.partition_of("g");
    assert_eq!(gs.loaded_partitions(), vec![(p, None)]);
    gs.unload(p);
    assert!(gs.groups.borrow().is_empty());
    assert!(gs.loaded_partitions().is_empty());
    gs.ensure_loaded_at(p, Some(3)).unwrap();
    assert_eq!(gs.loaded_partitions(), vec![(p, Some(3))]);
    assert_eq!(gs.groups.borrow()["g"].offsets.len(), 1);
    // Loaded again at the same epoch: nothing is replayed twice (the group stays the object
    // it is); at another epoch it is replaced by the log's.
    gs.groups.borrow_mut().get_mut("g").unwrap().offsets.clear();
    gs.ensure_loaded_at(p, Some(3)).unwrap();
    assert!(gs.groups.borrow()["g"].offsets.is_empty());
    gs.ensure_loaded_at(p, Some(4)).unwrap();
    assert_eq!(gs.groups.borrow()["g"].offsets.len(), 1);
}

pub fn is_group_api(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::FindCoordinator
            | ApiKey::JoinGroup
            | ApiKey::SyncGroup
            | ApiKey::Heartbeat
            | ApiKey::LeaveGroup
            | ApiKey::OffsetCommit
            | ApiKey::OffsetFetch
            | ApiKey::OffsetDelete
            | ApiKey::ListGroups
            | ApiKey::DescribeGroups
            | ApiKey::DeleteGroups
            | ApiKey::ConsumerGroupHeartbeat
            | ApiKey::ConsumerGroupDescribe
    )
}

/// One successful call of a group API at `v` (for the every-API-every-version test; topic
/// "t" exists).
pub fn call_at_version(h: &Harness, key: ApiKey, v: i16) {
    let ctx = format!("{key:?} v{v}");
    let group = format!("{key:?}-{v}");
    match key {
        ApiKey::FindCoordinator => {
            let req = if v >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![s(&group)])
            } else {
                FindCoordinatorRequest::default().with_key(s(&group))
            };
            let r: FindCoordinatorResponse = h.call(key, v, req);
            let code = r
                .coordinators
                .first()
                .map(|c| c.error_code)
                .unwrap_or(r.error_code);
            assert_eq!(code, 0, "{ctx}");
        }
        ApiKey::JoinGroup => {
            join_stable(h, &group, v);
        }
        ApiKey::SyncGroup => {
            let (id, gen) = join_stable(h, &group, 9);
            let mut req = SyncGroupRequest::default()
                .with_group_id(GroupId(s(&group)))
                .with_generation_id(gen)
                .with_member_id(s(&id));
            if v >= 5 {
                req = req
                    .with_protocol_type(Some(s("consumer")))
                    .with_protocol_name(Some(s("range")));
            }
            let r: SyncGroupResponse = h.call(key, v, req);
            assert_eq!(r.error_code, 0, "{ctx}");
            assert_eq!(&r.assignment[..], b"assigned", "{ctx}");
        }
        ApiKey::Heartbeat => {
            let (id, gen) = join_stable(h, &group, 9);
            let r: HeartbeatResponse = h.call(
                key,
                v,
                HeartbeatRequest::default()
                    .with_group_id(GroupId(s(&group)))
                    .with_generation_id(gen)
                    .with_member_id(s(&id)),
            );
            assert_eq!(r.error_code, 0, "{ctx}");
        }
        ApiKey::LeaveGroup => {
            let (id, _) = join_stable(h, &group, 9);
            let req = if v >= 3 {
                LeaveGroupRequest::default()
                    .with_group_id(GroupId(s(&group)))
                    .with_members(vec![MemberIdentity::default().with_member_id(s(&id))])
            } else {
                LeaveGroupRequest::default()
                    .with_group_id(GroupId(s(&group)))
                    .with_member_id(s(&id))
            };
            let r: LeaveGroupResponse = h.call(key, v, req);
            assert_eq!(r.error_code, 0, "{ctx}");
            assert!(r.members.iter().all(|m| m.error_code == 0), "{ctx}");
        }
        ApiKey::OffsetCommit => {
            let (id, gen) = join_stable(h, &group, 9);
            let mut req = commit_req(&group, &id, gen, "t", 3);
            let topic_id = h.state.ctx.catalog.snapshot().get("t").unwrap().id;
            if v >= crate::codec::TOPIC_IDS_VERSION {
                req.topics[0].name = TopicName::default();
                req.topics[0].topic_id = topic_id;
            }
            let r: OffsetCommitResponse = h.call(key, v, crate::codec::ById(req));
            assert_eq!(r.topics[0].partitions[0].error_code, 0, "{ctx}");
            if v >= crate::codec::TOPIC_IDS_VERSION {
                assert_eq!(r.topics[0].topic_id, topic_id, "{ctx}");
            }
        }
        ApiKey::OffsetFetch => {
            let r: OffsetCommitResponse =
                h.call(ApiKey::OffsetCommit, 9, commit_req(&group, "", -1, "t", 3));
            assert_eq!(r.topics[0].partitions[0].error_code, 0, "{ctx}");
            if v >= 8 {
                let topic_id = h.state.ctx.catalog.snapshot().get("t").unwrap().id;
                let by_id = v >= crate::codec::TOPIC_IDS_VERSION;
                let topic = OffsetFetchRequestTopics::default().with_partition_indexes(vec![0]);
                let topic = if by_id {
                    topic.with_topic_id(topic_id)
                } else {
                    topic.with_name(TopicName(s("t")))
                };
                let req = OffsetFetchRequest::default().with_groups(vec![
                    OffsetFetchRequestGroup::default()
                        .with_group_id(GroupId(s(&group)))
                        .with_topics(Some(vec![topic])),
                ]);
                let f: OffsetFetchResponse = h.call(key, v, crate::codec::ById(req));
                let t = &f.groups[0].topics[0];
                assert_eq!(t.partitions[0].committed_offset, 3, "{ctx}");
                if by_id {
                    assert_eq!(t.topic_id, topic_id, "{ctx}");
                }
            } else {
                let req = OffsetFetchRequest::default()
                    .with_group_id(GroupId(s(&group)))
                    .with_topics(Some(vec![
                        offset_fetch_request::OffsetFetchRequestTopic::default()
                            .with_name(TopicName(s("t")))
                            .with_partition_indexes(vec![0]),
                    ]));
                let f: OffsetFetchResponse = h.call(key, v, req);
                assert_eq!(f.error_code, 0, "{ctx}");
                assert_eq!(f.topics[0].partitions[0].committed_offset, 3, "{ctx}");
            }
        }
        ApiKey::OffsetDelete => {
            let _: OffsetCommitResponse =
                h.call(ApiKey::OffsetCommit, 9, commit_req(&group, "", -1, "t", 3));
            let r: OffsetDeleteResponse = h.call(
                key,
                v,
                OffsetDeleteRequest::default().with_group_id(GroupId(s(&group))),
            );
            assert_eq!(r.error_code, 0, "{ctx}");
        }
        ApiKey::ListGroups => {
            let (_, _) = join_stable(h, &group, 9);
            let r: ListGroupsResponse = h.call(key, v, ListGroupsRequest::default());
            assert_eq!(r.error_code, 0, "{ctx}");
            assert!(
                r.groups.iter().any(|g| g.group_id.as_str() == group),
                "{ctx}"
            );
        }
        ApiKey::DescribeGroups => {
            let (id, _) = join_stable(h, &group, 9);
            let r: DescribeGroupsResponse = h.call(
                key,
                v,
                DescribeGroupsRequest::default().with_groups(vec![GroupId(s(&group))]),
            );
            assert_eq!(r.groups[0].error_code, 0, "{ctx}");
            assert_eq!(r.groups[0].members[0].member_id.as_str(), id, "{ctx}");
        }
        ApiKey::DeleteGroups => {
            let _: OffsetCommitResponse =
                h.call(ApiKey::OffsetCommit, 9, commit_req(&group, "", -1, "t", 3));
            let r: crate::codec::delete_groups::DeleteGroupsResponse = h.call(
                key,
                v,
                crate::codec::Capped(
                    DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(&group))]),
                ),
            );
            assert_eq!(r.results[0].error_code, 0, "{ctx}");
            assert_eq!(r.results[0].error_message, None, "{ctx}");
        }
        ApiKey::ConsumerGroupHeartbeat => {
            let r = consumer_join(h, &group, v);
            assert_eq!(r.error_code, 0, "{ctx}");
            assert_eq!(r.member_epoch, 1, "{ctx}");
        }
        ApiKey::ConsumerGroupDescribe => {
            consumer_join(h, &group, 1);
            let r: ConsumerGroupDescribeResponse = h.call(
                key,
                v,
                ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(&group))]),
            );
            assert_eq!(r.groups[0].error_code, 0, "{ctx}");
            assert_eq!(r.groups[0].members.len(), 1, "{ctx}");
        }
        other => panic!("{other:?} is not a group API"),
    }
}

pub fn consumer_join(h: &Harness, group: &str, v: i16) -> ConsumerGroupHeartbeatResponse {
    let member = if v >= 1 {
        uuid::Uuid::new_v4().to_string()
    } else {
        String::new()
    };
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(&member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(vec![]));
    h.call(ApiKey::ConsumerGroupHeartbeat, v, req)
}

#[test]
fn given_kip848_members_when_heartbeating_then_partitions_split_and_offsets_need_current_epoch() {
    let h = harness();
    create(&h, "t", 2);
    let a = consumer_join(&h, "cg", 1);
    assert_eq!(a.error_code, 0);
    let a_parts = &a.assignment.as_ref().unwrap().topic_partitions[0].partitions;
    assert_eq!(a_parts.len(), 2);
    let b = consumer_join(&h, "cg", 1);
    assert_eq!(b.member_epoch, 2);
    // Commits need the member's current epoch.
    let a_id = a.member_id.clone().unwrap().to_string();
    let r: OffsetCommitResponse =
        h.call(ApiKey::OffsetCommit, 9, commit_req("cg", &a_id, 1, "t", 4));
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    let r: OffsetCommitResponse =
        h.call(ApiKey::OffsetCommit, 9, commit_req("cg", &a_id, 0, "t", 4));
    assert_eq!(r.topics[0].partitions[0].error_code, 113);
    // A classic join on a consumer group is refused.
    let j: JoinGroupResponse = h.call(ApiKey::JoinGroup, 9, join_req("cg", "", None));
    assert_eq!(j.error_code, 23);
    let l: ListGroupsResponse = h.call(
        ApiKey::ListGroups,
        5,
        ListGroupsRequest::default().with_types_filter(vec![s("consumer")]),
    );
    assert_eq!(l.groups.len(), 1);
    assert_eq!(l.groups[0].group_type.as_str(), "consumer");
    // An unknown member id with a positive epoch.
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("cg")))
        .with_member_id(s("ghost"))
        .with_member_epoch(3);
    let r: ConsumerGroupHeartbeatResponse = h.call(ApiKey::ConsumerGroupHeartbeat, 1, req);
    assert_eq!(r.error_code, 25);
}

#[test]
fn given_simple_commit_when_retention_passes_then_offset_and_group_gone_even_after_reload() {
    let h = harness();
    create(&h, "t", 1);
    let r: OffsetCommitResponse =
        h.call(ApiKey::OffsetCommit, 9, commit_req("old", "", -1, "t", 8));
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    let gs = crate::coordinator::group::GroupShard::of(&h.state);
    let eight_days = 8 * 24 * 3600 * 1000;
    h.block_on(gs.expire_offsets(crate::now_ms() + eight_days));
    assert_eq!(
        fetch_v8(&h, "old", "t").groups[0].topics[0].partitions[0].committed_offset,
        -1
    );
    gs.groups.borrow_mut().clear();
    gs.forget_loaded();
    assert_eq!(
        fetch_v8(&h, "old", "t").groups[0].topics[0].partitions[0].committed_offset,
        -1
    );
    let l: ListGroupsResponse = h.call(ApiKey::ListGroups, 5, ListGroupsRequest::default());
    assert!(l.groups.iter().all(|g| g.group_id.as_str() != "old"));
}

#[test]
fn given_kip848_group_when_a_new_shard_loads_it_then_members_epochs_and_assignments_restored() {
    let h = harness();
    create(&h, "t", 2);
    let a = consumer_join(&h, "cg", 1);
    let id = a.member_id.clone().unwrap();
    let owned = a.assignment.clone().unwrap().topic_partitions;
    let gs = crate::coordinator::group::GroupShard::of(&h.state);
    gs.groups.borrow_mut().clear();
    gs.forget_loaded();
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("cg")))
        .with_member_id(id.clone())
        .with_member_epoch(1)
        .with_topic_partitions(Some(
            owned
                .iter()
                .map(|tp| {
                    consumer_group_heartbeat_request::TopicPartitions::default()
                        .with_topic_id(tp.topic_id)
                        .with_partitions(tp.partitions.clone())
                })
                .collect(),
        ));
    let r: ConsumerGroupHeartbeatResponse = h.call(ApiKey::ConsumerGroupHeartbeat, 1, req);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert_eq!(r.member_epoch, 1, "no rebalance after the reload");
    let d: ConsumerGroupDescribeResponse = h.call(
        ApiKey::ConsumerGroupDescribe,
        1,
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("cg"))]),
    );
    let g = &d.groups[0];
    assert_eq!(
        (g.group_epoch, g.assignment_epoch, g.group_state.as_str()),
        (1, 1, "Stable")
    );
    assert_eq!(
        g.members[0].assignment.topic_partitions[0].partitions,
        vec![0, 1]
    );
    // Deleting after the member left leaves nothing behind for the next load.
    let leave = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("cg")))
        .with_member_id(id)
        .with_member_epoch(-1);
    let r: ConsumerGroupHeartbeatResponse = h.call(ApiKey::ConsumerGroupHeartbeat, 1, leave);
    assert_eq!(r.error_code, 0);
    let del: DeleteGroupsResponse = h.call(
        ApiKey::DeleteGroups,
        2,
        DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("cg"))]),
    );
    assert_eq!(del.results[0].error_code, 0);
    gs.groups.borrow_mut().clear();
    gs.forget_loaded();
    let d: ConsumerGroupDescribeResponse = h.call(
        ApiKey::ConsumerGroupDescribe,
        1,
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("cg"))]),
    );
    assert_eq!(d.groups[0].error_code, 69);
}

#[test]
fn given_regex_only_join_when_heartbeating_then_matching_topics_assigned() {
    let h = harness();
    create(&h, "rxq-a", 2);
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("grx")))
        .with_member_id(s("m1"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s("(^rxq-.*)")))
        .with_topic_partitions(Some(vec![]));
    let r: ConsumerGroupHeartbeatResponse = h.call(ApiKey::ConsumerGroupHeartbeat, 1, req);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert_eq!(
        r.assignment.unwrap().topic_partitions[0].partitions,
        vec![0, 1]
    );
}

/// OffsetCommit and OffsetFetch v10 (KIP-848) name topics by id: a known id commits and reads
/// as its name does at v9, an unknown one is UNKNOWN_TOPIC_ID, and fetching all offsets by id
/// names each topic by its id. A deleted topic's offsets are deleted with it (Kafka's
/// `onPartitionsDeleted`).
#[test]
fn given_v10_when_committing_and_fetching_by_topic_id_then_ids_resolve_and_deleted_topics_lose_offsets(
) {
    let h = harness();
    create(&h, "t", 1);
    create(&h, "gone", 1);
    let id = h.state.ctx.catalog.snapshot().get("t").unwrap().id;
    let unknown = uuid::Uuid::from_u128(0xfeed);
    let mut req = commit_req("g10", "", -1, "t", 7);
    let mut stranger = req.topics[0].clone();
    req.topics[0].name = TopicName::default();
    req.topics[0].topic_id = id;
    stranger.name = TopicName::default();
    stranger.topic_id = unknown;
    req.topics.push(stranger);
    let r: OffsetCommitResponse = h.call(ApiKey::OffsetCommit, 10, crate::codec::ById(req));
    let codes: Vec<_> = r
        .topics
        .iter()
        .map(|t| (t.topic_id, t.partitions[0].error_code))
        .collect();
    assert_eq!(
        codes,
        vec![(id, 0), (unknown, ResponseError::UnknownTopicId.code())]
    );
    // A commit to "gone" by name, then "gone" is deleted.
    let r: OffsetCommitResponse = h.call(
        ApiKey::OffsetCommit,
        9,
        commit_req("g10", "", -1, "gone", 2),
    );
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    let del = DeleteTopicsRequest::default()
        .with_topic_names(vec![TopicName(s("gone"))])
        .with_timeout_ms(5000);
    let d: DeleteTopicsResponse = h.call(ApiKey::DeleteTopics, 5, del);
    assert_eq!(d.responses[0].error_code, 0);

    let group = |topics| {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("g10")))
            .with_topics(topics)])
    };
    let named = vec![
        OffsetFetchRequestTopics::default()
            .with_topic_id(id)
            .with_partition_indexes(vec![0]),
        OffsetFetchRequestTopics::default()
            .with_topic_id(unknown)
            .with_partition_indexes(vec![0, 1]),
    ];
    let f: OffsetFetchResponse = h.call(
        ApiKey::OffsetFetch,
        10,
        crate::codec::ById(group(Some(named))),
    );
    let got: Vec<_> = f.groups[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.topic_id,
                    p.partition_index,
                    p.error_code,
                    p.committed_offset,
                )
            })
        })
        .collect();
    let code = ResponseError::UnknownTopicId.code();
    assert_eq!(
        got,
        vec![
            (id, 0, 0, 7),
            (unknown, 0, code, -1),
            (unknown, 1, code, -1)
        ]
    );

    // All offsets, by id: each topic named by its id; the deleted topic's offsets went with it.
    let all: OffsetFetchResponse = h.call(ApiKey::OffsetFetch, 10, crate::codec::ById(group(None)));
    let ids: Vec<_> = all.groups[0].topics.iter().map(|t| t.topic_id).collect();
    assert_eq!(ids, vec![id]);
    let all9: OffsetFetchResponse = h.call(ApiKey::OffsetFetch, 9, crate::codec::ById(group(None)));
    let names: Vec<_> = all9.groups[0]
        .topics
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, vec!["t"], "by name too");
    // Created again under the same name, the topic starts with no committed offset.
    create(&h, "gone", 1);
    let f = fetch_v8(&h, "g10", "gone");
    assert_eq!(f.groups[0].topics[0].partitions[0].committed_offset, -1);
}
