//! The streams group state machine against Kafka's behaviour (`GroupMetadataManager`'s
//! streams paths): epochs, the initial delay, revocation before assignment, topology
//! configuration, fencing and the offset commit checks.

use std::collections::BTreeMap;

use super::topology::{Subtopology, TopicInfo, Topology};
use super::*;

fn cfg() -> StreamsConfig {
    StreamsConfig {
        session_timeout_ms: 45_000,
        heartbeat_interval_ms: 5_000,
        max_size: 100,
        num_standby_replicas: 0,
        initial_rebalance_delay_ms: 0,
        assignment_interval_ms: 0,
        task_offset_interval_ms: 60_000,
        acceptable_recovery_lag: 10_000,
    }
}

/// Word count's shape: subtopology 0 reads `in` and writes the repartition topic; 1 reads it
/// and keeps a store.
fn word_count() -> Topology {
    Topology {
        epoch: 0,
        subtopologies: vec![
            Subtopology {
                id: "0".into(),
                source_topics: vec!["in".into()],
                repartition_sinks: vec!["app-rep".into()],
                ..Default::default()
            },
            Subtopology {
                id: "1".into(),
                source_topics: vec!["app-rep".into()],
                repartition_sources: vec![TopicInfo {
                    name: "app-rep".into(),
                    ..Default::default()
                }],
                changelogs: vec![TopicInfo {
                    name: "app-store-changelog".into(),
                    configs: vec![("cleanup.policy".into(), "compact".into())],
                    ..Default::default()
                }],
                ..Default::default()
            },
        ],
    }
}

fn topics(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
    list.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

fn join(id: &str, process: &str) -> HeartbeatParams {
    HeartbeatParams {
        member_id: id.into(),
        member_epoch: 0,
        endpoint_epoch: -1,
        rebalance_timeout_ms: 30_000,
        topology: Some(word_count()),
        owned: Some(Tasks::default()),
        process_id: Some(process.into()),
        ..Default::default()
    }
}

fn beat(id: &str, epoch: i32, owned: Option<Tasks>) -> HeartbeatParams {
    HeartbeatParams {
        member_id: id.into(),
        member_epoch: epoch,
        endpoint_epoch: -1,
        rebalance_timeout_ms: -1,
        owned,
        ..Default::default()
    }
}

fn active(list: &[(&str, &[i32])]) -> Tasks {
    Tasks {
        active: list
            .iter()
            .map(|(s, ps)| (s.to_string(), ps.iter().copied().collect()))
            .collect(),
        ..Default::default()
    }
}

fn all_topics() -> BTreeMap<String, i32> {
    topics(&[("in", 2), ("app-rep", 2), ("app-store-changelog", 2)])
}

#[test]
fn given_missing_internal_topics_when_joining_then_status_and_topics_to_create() {
    let mut g = StreamsGroup::default();
    let r = g
        .heartbeat(join("a", "p1"), &topics(&[("in", 3)]), 0, &cfg())
        .unwrap();
    assert_eq!(
        r.member_epoch, 2,
        "a new group starts at 1, the join bumps it"
    );
    assert_eq!(r.tasks, Some(Tasks::default()));
    assert_eq!(r.statuses.len(), 1);
    assert_eq!(r.statuses[0].0, status::MISSING_INTERNAL_TOPICS);
    let mut names: Vec<(String, i32)> = r
        .to_create
        .iter()
        .map(|t| (t.name.clone(), t.partitions))
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![("app-rep".into(), 3), ("app-store-changelog".into(), 3)],
        "the repartition topic takes its writer's count, the changelog the task count"
    );
    assert_eq!(r.to_create[0].replication_factor, -1);
    assert_eq!(g.state_name(), "NotReady");
}

#[test]
fn given_missing_source_topic_when_joining_then_missing_source_topics() {
    let mut g = StreamsGroup::default();
    let r = g
        .heartbeat(join("a", "p1"), &BTreeMap::new(), 0, &cfg())
        .unwrap();
    assert_eq!(
        r.statuses,
        vec![(
            status::MISSING_SOURCE_TOPICS,
            "Source topics in are missing.".into()
        )]
    );
    assert!(r.to_create.is_empty());
}

#[test]
fn given_initial_delay_when_first_member_joins_then_delayed_until_the_tick() {
    let mut c = cfg();
    c.initial_rebalance_delay_ms = 3_000;
    let mut g = StreamsGroup::default();
    let r = g.heartbeat(join("a", "p1"), &all_topics(), 0, &c).unwrap();
    assert_eq!(r.member_epoch, 1);
    assert_eq!(r.statuses[0].0, status::ASSIGNMENT_DELAYED);
    assert_eq!(g.state_name(), "Assigning");
    g.tick(3_000, &c);
    let r = g
        .heartbeat(beat("a", 1, None), &all_topics(), 3_100, &c)
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.tasks, Some(active(&[("0", &[0, 1]), ("1", &[0, 1])])));
    assert!(r.statuses.is_empty());
    assert_eq!(g.state_name(), "Stable");
}

#[test]
fn given_second_member_when_it_joins_then_tasks_move_only_after_revocation() {
    let mut g = StreamsGroup::default();
    let t = all_topics();
    let r = g.heartbeat(join("a", "p1"), &t, 0, &cfg()).unwrap();
    assert_eq!(r.tasks, Some(active(&[("0", &[0, 1]), ("1", &[0, 1])])));
    let a_epoch = r.member_epoch;
    let r = g.heartbeat(join("b", "p2"), &t, 10, &cfg()).unwrap();
    let b_epoch = r.member_epoch;
    assert_eq!(r.tasks, Some(Tasks::default()), "b waits for a to release");
    assert_eq!(b_epoch, a_epoch + 1);
    assert_eq!(g.state_name(), "Reconciling");
    // a is asked to give up half of its tasks, at its old epoch.
    let r = g
        .heartbeat(
            beat(
                "a",
                a_epoch,
                Some(active(&[("0", &[0, 1]), ("1", &[0, 1])])),
            ),
            &t,
            20,
            &cfg(),
        )
        .unwrap();
    assert_eq!(r.member_epoch, a_epoch);
    let kept = r.tasks.clone().unwrap();
    assert_eq!(kept.active.values().map(|p| p.len()).sum::<usize>(), 2);
    // Still owning the revoked ones: b gets nothing yet.
    let r = g
        .heartbeat(beat("b", b_epoch, Some(Tasks::default())), &t, 30, &cfg())
        .unwrap();
    assert_eq!(r.tasks, None);
    // a reports it released them: it moves on, and b gets them.
    let r = g
        .heartbeat(beat("a", a_epoch, Some(kept.clone())), &t, 40, &cfg())
        .unwrap();
    assert_eq!(r.member_epoch, b_epoch);
    let r = g
        .heartbeat(beat("b", b_epoch, Some(Tasks::default())), &t, 50, &cfg())
        .unwrap();
    let got = r.tasks.unwrap();
    assert_eq!(got.active.values().map(|p| p.len()).sum::<usize>(), 2);
    for (s, ps) in &got.active {
        assert!(
            kept.active.get(s).is_none_or(|k| k.is_disjoint(ps)),
            "no task twice"
        );
    }
    assert_eq!(g.state_name(), "Stable");
}

#[test]
fn given_wrong_epochs_when_heartbeating_then_fenced_or_unknown() {
    let mut g = StreamsGroup::default();
    let t = all_topics();
    let e = g
        .heartbeat(join("a", "p1"), &t, 0, &cfg())
        .unwrap()
        .member_epoch;
    assert_eq!(
        g.heartbeat(beat("a", e + 1, None), &t, 1, &cfg())
            .unwrap_err(),
        GroupError::FencedMemberEpoch
    );
    assert_eq!(
        g.heartbeat(beat("zz", 3, None), &t, 1, &cfg()).unwrap_err(),
        GroupError::UnknownMemberId
    );
}

#[test]
fn given_other_topology_when_joining_then_updates_not_supported() {
    let mut g = StreamsGroup::default();
    let t = all_topics();
    g.heartbeat(join("a", "p1"), &t, 0, &cfg()).unwrap();
    let mut p = join("b", "p2");
    let mut other = word_count();
    other.subtopologies.pop();
    p.topology = Some(other);
    assert_eq!(
        g.heartbeat(p, &t, 1, &cfg()).unwrap_err(),
        GroupError::InvalidRequest("Topology updates are not supported yet.".into())
    );
}

#[test]
fn given_leave_and_expiry_when_members_go_then_epoch_moves() {
    let mut g = StreamsGroup::default();
    let t = all_topics();
    g.heartbeat(join("a", "p1"), &t, 0, &cfg()).unwrap();
    g.heartbeat(join("b", "p2"), &t, 0, &cfg()).unwrap();
    let before = g.group_epoch;
    let r = g
        .heartbeat(beat("b", LEAVE_EPOCH, None), &t, 1, &cfg())
        .unwrap();
    assert_eq!(r.member_epoch, LEAVE_EPOCH);
    assert_eq!(g.group_epoch, before + 1);
    g.tick(46_000, &cfg());
    assert!(g.members.is_empty(), "a's session expired");
    assert_eq!(g.state_name(), "Empty");
}

#[test]
fn given_offset_commits_when_validated_then_kafka_epoch_rules() {
    let mut g = StreamsGroup::default();
    let t = all_topics();
    let e = g
        .heartbeat(join("a", "p1"), &t, 0, &cfg())
        .unwrap()
        .member_epoch;
    let parts = vec![("in".to_string(), 0)];
    assert_eq!(g.validate_offset_commit("a", e, false, 9, &parts), Ok(()));
    assert_eq!(
        g.validate_offset_commit("a", e + 1, false, 9, &parts),
        Err(GroupError::StaleMemberEpoch)
    );
    assert!(matches!(
        g.validate_offset_commit("a", e, false, 8, &parts),
        Err(GroupError::UnsupportedVersion(_))
    ));
    assert_eq!(
        g.validate_offset_commit("x", e, true, 4, &parts),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(g.validate_offset_fetch("a", e), Ok(()));
    assert_eq!(
        g.validate_offset_fetch("a", e - 1),
        Err(GroupError::StaleMemberEpoch)
    );
}

#[test]
fn given_copartitioned_sources_with_other_counts_when_configured_then_incorrectly_partitioned() {
    let t = Topology {
        epoch: 0,
        subtopologies: vec![Subtopology {
            id: "0".into(),
            source_topics: vec!["a".into(), "b".into()],
            copartition_groups: vec![topology::CopartitionGroup {
                source_topics: vec![0, 1],
                repartition_source_topics: vec![],
            }],
            ..Default::default()
        }],
    };
    let c = topology::configure(&t, &topics(&[("a", 2), ("b", 3)])).unwrap();
    assert_eq!(
        c.status,
        Some((
            status::INCORRECTLY_PARTITIONED_TOPICS,
            "Following topics do not have the same number of partitions: [{a=2, b=3}]".into()
        ))
    );
    assert!(!c.is_ready());
}

#[test]
fn given_standby_replicas_when_assigning_then_copies_on_the_other_process_only() {
    let a = Tasks::default();
    let b = Tasks::default();
    let members = [
        assignor::MemberSpec {
            member_id: "a",
            process_id: "p1",
            current: &a,
        },
        assignor::MemberSpec {
            member_id: "b",
            process_id: "p2",
            current: &b,
        },
    ];
    let tasks: BTreeMap<String, i32> = [("0".to_string(), 2)].into();
    let stateful = ["0".to_string()].into();
    let out = assignor::assign(&members, &tasks, &stateful, 1);
    for (m, other) in [("a", "b"), ("b", "a")] {
        assert_eq!(out[m].active["0"].len(), 1, "{m}: one active task each");
        assert_eq!(
            out[m].standby["0"], out[other].active["0"],
            "{m}: the other's task as standby"
        );
    }
    // One process: no standby can go anywhere.
    let one = assignor::assign(&members[..1], &tasks, &stateful, 1);
    assert!(one["a"].standby.is_empty());
    assert_eq!(one["a"].active["0"].len(), 2);
}

#[test]
fn given_previous_owners_when_a_member_joins_then_each_keeps_what_it_can() {
    let a = active(&[("0", &[0, 1, 2, 3])]);
    let b = Tasks::default();
    let members = [
        assignor::MemberSpec {
            member_id: "a",
            process_id: "p1",
            current: &a,
        },
        assignor::MemberSpec {
            member_id: "b",
            process_id: "p2",
            current: &b,
        },
    ];
    let tasks: BTreeMap<String, i32> = [("0".to_string(), 4)].into();
    let out = assignor::assign(&members, &tasks, &Default::default(), 0);
    assert_eq!(
        out["a"].active["0"],
        [0, 1].into(),
        "a keeps its lowest partitions"
    );
    assert_eq!(out["b"].active["0"], [2, 3].into());
}

/// The group's records through their wire form into a fresh group, as a load replays them.
fn reloaded(recs: &[records::StreamsRecord]) -> StreamsGroup {
    let mut g = StreamsGroup::default();
    for r in recs {
        let (key, value) = r.encode();
        let t = i16::from_be_bytes([key[0], key[1]]);
        assert!(records::is_streams_type(t));
        let back = records::StreamsRecord::decode(t, &key[2..], value.as_deref()).unwrap();
        assert_eq!(&back, r);
        g.restore(back);
    }
    g.finish_restore(0, 45_000);
    g
}

#[test]
fn given_a_reconciled_group_when_replayed_from_its_records_then_members_carry_on_without_a_rebalance(
) {
    let mut g = StreamsGroup::default();
    let t = all_topics();
    let mut recs = Vec::new();
    let a = g.heartbeat(join("a", "p1"), &t, 0, &cfg()).unwrap();
    recs.extend(g.take_records("app"));
    let b = g.heartbeat(join("b", "p2"), &t, 10, &cfg()).unwrap();
    recs.extend(g.take_records("app"));
    let a_owned = g.members["a"].assigned.clone();
    g.heartbeat(
        beat("a", a.member_epoch, Some(a_owned.clone())),
        &t,
        20,
        &cfg(),
    )
    .unwrap();
    recs.extend(g.take_records("app"));
    assert!(g.take_records("app").is_empty(), "nothing left to write");
    let mut r = reloaded(&recs);
    assert_eq!(
        (r.group_epoch, r.assignment_epoch),
        (g.group_epoch, g.assignment_epoch)
    );
    assert_eq!(r.topology, g.topology);
    for id in ["a", "b"] {
        let (was, now) = (&g.members[id], &r.members[id]);
        assert_eq!(
            (
                now.epoch,
                &now.assigned,
                &now.pending_revocation,
                &now.process_id
            ),
            (
                was.epoch,
                &was.assigned,
                &was.pending_revocation,
                &was.process_id
            ),
            "{id}"
        );
        assert_eq!(r.target.get(id), g.target.get(id), "{id}");
    }
    // b's next heartbeat after the restart: same epoch, no new target, no records but its own.
    let epoch = r.group_epoch;
    let after = r
        .heartbeat(
            beat("b", b.member_epoch, Some(Tasks::default())),
            &t,
            30,
            &cfg(),
        )
        .unwrap();
    assert_eq!(r.group_epoch, epoch, "the restart moved no epoch");
    assert!(after.member_epoch >= b.member_epoch);
    // Deleting writes the group's tombstones, and a replay of them leaves no group.
    let mut all = recs.clone();
    all.extend(r.take_records("app"));
    all.extend(r.tombstones("app"));
    let mut gone = StreamsGroup::default();
    for rec in all {
        if matches!(rec, records::StreamsRecord::Metadata(_, None)) {
            gone = StreamsGroup::default();
            continue;
        }
        gone.restore(rec);
    }
    assert!(gone.members.is_empty());
}
