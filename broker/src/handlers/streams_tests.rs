//! The streams group APIs (KIP-1071) through real frames at every version they advertise:
//! Kafka's request checks and messages, the internal topics a heartbeat creates, and what
//! StreamsGroupDescribe and StreamsGroupTopologyDescriptionUpdate answer.

use crate::codec::generated::streams_group_describe_request::StreamsGroupDescribeRequest;
use crate::codec::generated::streams_group_describe_response::StreamsGroupDescribeResponse;
use crate::codec::generated::streams_group_heartbeat_request::{
    StreamsGroupHeartbeatRequest, Subtopology, TopicInfo, Topology,
};
use crate::codec::generated::streams_group_heartbeat_response::StreamsGroupHeartbeatResponse;
use crate::codec::generated::streams_group_topology_description_update_request::StreamsGroupTopologyDescriptionUpdateRequest;
use crate::codec::generated::streams_group_topology_description_update_response::StreamsGroupTopologyDescriptionUpdateResponse;
use crate::handlers::testing::create;

fn topology() -> Topology {
    Topology {
        epoch: 0,
        subtopologies: vec![Subtopology {
            subtopology_id: "0".into(),
            source_topics: vec!["in".into()],
            state_changelog_topics: vec![TopicInfo {
                name: "app-store-changelog".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn join(member: &str) -> StreamsGroupHeartbeatRequest {
    StreamsGroupHeartbeatRequest {
        group_id: "app".into(),
        member_id: member.into(),
        member_epoch: 0,
        endpoint_information_epoch: -1,
        rebalance_timeout_ms: 30_000,
        topology: Some(topology()),
        active_tasks: Some(vec![]),
        standby_tasks: Some(vec![]),
        warmup_tasks: Some(vec![]),
        process_id: Some("p-1".into()),
        ..Default::default()
    }
}

#[test]
fn given_a_join_when_heartbeating_then_internal_topics_created_and_group_described() {
    for v in 0..=1 {
        let h = super::group_tests::harness();
        create(&h, "in", 2);
        let r: StreamsGroupHeartbeatResponse = h.call_ext(88, v, join("m-1"));
        assert_eq!(r.error_code, 0, "v{v}: {:?}", r.error_message);
        assert_eq!(
            r.member_epoch, 1,
            "v{v}: the initial delay holds the assignment"
        );
        let codes: Vec<i8> = r.status.iter().flatten().map(|s| s.status_code).collect();
        assert_eq!(
            codes,
            vec![5, 3],
            "v{v}: ASSIGNMENT_DELAYED, MISSING_INTERNAL_TOPICS"
        );
        assert_eq!(
            r.active_tasks,
            Some(vec![]),
            "v{v}: a join gets the (empty) lists"
        );
        assert_eq!(r.heartbeat_interval_ms, 5_000);
        assert_eq!(r.acceptable_recovery_lag, if v >= 1 { 10_000 } else { -1 });
        let changelog = h
            .state
            .ctx
            .catalog
            .snapshot()
            .get("app-store-changelog")
            .map(|t| t.partitions);
        assert_eq!(changelog, Some(2), "v{v}: one changelog partition per task");

        let d: StreamsGroupDescribeResponse = h.call_ext(
            89,
            v,
            StreamsGroupDescribeRequest {
                group_ids: vec!["app".into(), "nope".into()],
                include_topology_description: true,
                ..Default::default()
            },
        );
        let g = &d.groups[0];
        assert_eq!(g.error_code, 0, "v{v}");
        assert_eq!(g.members.len(), 1);
        assert_eq!(g.members[0].process_id, "p-1");
        assert_eq!(g.topology.as_ref().map(|t| t.epoch), Some(0));
        assert_eq!(g.assignor_name.as_deref(), (v >= 1).then_some("sticky"));
        assert_eq!(g.topology_description_status, if v >= 1 { 1 } else { 0 });
        assert_eq!(d.groups[1].error_code, 69, "v{v}: unknown group");
        assert_eq!(
            d.groups[1].error_message.as_deref(),
            Some("Group nope not found.")
        );
    }
}

#[test]
fn given_bad_heartbeats_when_sent_then_kafkas_errors_and_messages() {
    let h = super::group_tests::harness();
    create(&h, "in", 1);
    let cases: Vec<(StreamsGroupHeartbeatRequest, i16, &str)> = vec![
        (
            StreamsGroupHeartbeatRequest {
                topology: None,
                ..join("m")
            },
            42,
            "Topology must be non-null when (re-)joining.",
        ),
        (
            StreamsGroupHeartbeatRequest {
                active_tasks: None,
                ..join("m")
            },
            42,
            "ActiveTasks must be empty when (re-)joining.",
        ),
        (
            StreamsGroupHeartbeatRequest {
                member_id: " ".into(),
                ..join("m")
            },
            42,
            "MemberId can't be empty.",
        ),
        (
            StreamsGroupHeartbeatRequest {
                member_epoch: 3,
                topology: None,
                active_tasks: None,
                standby_tasks: None,
                warmup_tasks: None,
                ..join("m")
            },
            69,
            "Streams group app not found.",
        ),
        (
            {
                let mut r = join("m");
                r.topology.as_mut().unwrap().subtopologies[0].source_topics =
                    vec!["__consumer_offsets".into()];
                r
            },
            130,
            "Use of Kafka internal topics __consumer_offsets in a Kafka Streams topology is prohibited.",
        ),
    ];
    for (req, code, message) in cases {
        let r: StreamsGroupHeartbeatResponse = h.call_ext(88, 1, req);
        assert_eq!(
            (r.error_code, r.error_message.as_deref()),
            (code, Some(message))
        );
    }
}

#[test]
fn given_a_topology_description_when_pushed_then_no_plugin_answer() {
    let h = super::group_tests::harness();
    let r: StreamsGroupTopologyDescriptionUpdateResponse = h.call_ext(
        93,
        0,
        StreamsGroupTopologyDescriptionUpdateRequest {
            group_id: "app".into(),
            member_id: "m".into(),
            ..Default::default()
        },
    );
    assert_eq!(r.error_code, 35);
    assert_eq!(
        r.error_message.as_deref(),
        Some("The broker has no streams group topology description plugin configured.")
    );
}

#[test]
fn given_a_member_when_the_coordinator_reloads_then_it_heartbeats_on_at_its_epoch() {
    let h = super::group_tests::harness();
    create(&h, "in", 2);
    let r: StreamsGroupHeartbeatResponse = h.call_ext(88, 1, join("m-1"));
    assert_eq!(r.error_code, 0);
    let epoch = r.member_epoch;
    // Forget the groups, as a restarted broker starts: the next request loads them from
    // __consumer_offsets.
    let groups = crate::coordinator::group::GroupShard::of(&h.state);
    groups.forget_loaded();
    groups.groups.borrow_mut().clear();
    let beat = StreamsGroupHeartbeatRequest {
        group_id: "app".into(),
        member_id: "m-1".into(),
        member_epoch: epoch,
        endpoint_information_epoch: -1,
        rebalance_timeout_ms: -1,
        ..Default::default()
    };
    let r: StreamsGroupHeartbeatResponse = h.call_ext(88, 1, beat);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert!(r.member_epoch >= epoch);
    let d: StreamsGroupDescribeResponse = h.call_ext(
        89,
        1,
        StreamsGroupDescribeRequest {
            group_ids: vec!["app".into()],
            ..Default::default()
        },
    );
    assert_eq!(d.groups[0].members.len(), 1);
    assert_eq!(d.groups[0].members[0].process_id, "p-1");
    assert_eq!(d.groups[0].topology.as_ref().map(|t| t.epoch), Some(0));
}

#[test]
fn given_generated_api_keys_when_named_then_as_kafka_names_them() {
    use crate::codec::Api;
    assert_eq!(format!("{:?}", Api(88)), "StreamsGroupHeartbeat");
    assert_eq!(format!("{:?}", Api(89)), "StreamsGroupDescribe");
    assert_eq!(
        format!("{:?}", Api(93)),
        "StreamsGroupTopologyDescriptionUpdate"
    );
    assert_eq!(format!("{:?}", Api(0)), "Produce");
    assert_eq!(format!("{:?}", Api(999)), "ApiKey(999)");
}
