//! Unit tests of the classic group state machine: every transition, with injected time.

use bytes::Bytes;

use super::*;
use crate::coordinator::group::GroupError;

fn cfg(delay: i64) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: delay,
        min_session_timeout_ms: 6000,
        max_session_timeout_ms: 1_800_000,
        max_size: 10,
    }
}

fn params(member: &str, protocols: &[&str]) -> JoinParams {
    JoinParams {
        member_id: member.into(),
        client_id: "c".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 20_000,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(format!("md-{p}"))))
            .collect(),
        ..Default::default()
    }
}

fn ready<T: std::fmt::Debug>(r: Reply<T>) -> Result<T, GroupError> {
    match r {
        Reply::Now(r) => r,
        Reply::Later(mut rx) => rx.try_recv().expect("answered"),
    }
}

fn pending<T>(r: Reply<T>) -> tokio::sync::oneshot::Receiver<Result<T, GroupError>> {
    match r {
        Reply::Later(rx) => rx,
        Reply::Now(_) => panic!("expected to wait"),
    }
}

/// A Stable group with members `a` and `b` (join order), leader `a`: returns their ids.
fn stable_pair(g: &mut Group, c: &GroupConfig) -> (String, String) {
    // Both join within the initial delay, so they share generation 1.
    let joining = GroupConfig {
        initial_rebalance_delay_ms: 10,
        ..c.clone()
    };
    let mut ra = pending(g.join(params("", &["range"]), 0, &joining));
    let mut rb = pending(g.join(params("", &["range"]), 0, &joining));
    g.tick(10, c);
    let a = ra.try_recv().unwrap().unwrap();
    let b = rb.try_recv().unwrap().unwrap();
    let (a, b) = (a.member_id, b.member_id);
    let mut sb = pending(g.sync(&b, None, 1, None, None, vec![], 10));
    let assignments = vec![
        (a.clone(), Bytes::from_static(b"A")),
        (b.clone(), Bytes::from_static(b"B")),
    ];
    ready(g.sync(&a, None, 1, None, None, assignments, 10)).unwrap();
    assert_eq!(&sb.try_recv().unwrap().unwrap().assignment[..], b"B");
    assert_eq!(g.state, GroupState::Stable);
    (a, b)
}

#[test]
fn given_empty_group_when_first_member_joins_then_waits_initial_delay_then_completing() {
    let c = cfg(3000);
    let mut g = Group::new("g", 0);
    let mut rx = pending(g.join(params("", &["range"]), 0, &c));
    assert_eq!(g.state, GroupState::PreparingRebalance);
    g.tick(2999, &c);
    assert!(rx.try_recv().is_err(), "still in the initial delay");
    g.tick(3000, &c);
    let j = rx.try_recv().unwrap().unwrap();
    assert_eq!(g.state, GroupState::CompletingRebalance);
    assert_eq!((j.generation, j.leader.clone()), (1, j.member_id.clone()));
    assert_eq!(j.members.len(), 1);
    assert_eq!(j.protocol_name.as_deref(), Some("range"));
}

#[test]
fn given_member_joining_during_initial_delay_when_delay_ends_then_both_in_generation() {
    let c = cfg(3000);
    let mut g = Group::new("g", 0);
    let mut r1 = pending(g.join(params("", &["range"]), 0, &c));
    let mut r2 = pending(g.join(params("", &["range"]), 2000, &c));
    g.tick(3000, &c);
    assert!(r1.try_recv().is_err(), "the newcomer extended the delay");
    g.tick(5000, &c);
    let j1 = r1.try_recv().unwrap().unwrap();
    let j2 = r2.try_recv().unwrap().unwrap();
    assert_eq!(j1.generation, 1);
    assert_eq!(j1.members.len(), 2, "leader sees both");
    assert!(j2.members.is_empty(), "followers see none");
}

#[test]
fn given_v4_first_join_when_joining_then_member_id_required_and_rejoin_accepted() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let mut p = params("", &["range"]);
    p.require_known_member_id = true;
    let Err(GroupError::MemberIdRequired(id)) = ready(g.join(p.clone(), 0, &c)) else {
        panic!("member id required");
    };
    assert_eq!(g.state, GroupState::Empty);
    p.member_id = id.clone();
    let j = ready(g.join(p, 1, &c)).unwrap();
    assert_eq!((j.member_id, j.generation), (id, 1));
}

#[test]
fn given_pending_member_id_when_session_passes_then_forgotten() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let mut p = params("", &["range"]);
    p.require_known_member_id = true;
    let Err(GroupError::MemberIdRequired(id)) = ready(g.join(p.clone(), 0, &c)) else {
        panic!()
    };
    g.tick(20_000, &c);
    p.member_id = id;
    assert_eq!(
        ready(g.join(p, 20_001, &c)),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn given_completing_when_leader_syncs_then_stable_and_persist_requested() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let (a, b) = stable_pair(&mut g, &c);
    assert!(g.take_dirty());
    assert_eq!(&g.members[&a].assignment[..], b"A");
    // In Stable a sync answers the current assignment at once.
    assert_eq!(
        &ready(g.sync(&b, None, 1, None, None, vec![], 20))
            .unwrap()
            .assignment[..],
        b"B"
    );
}

#[test]
fn given_preparing_when_syncing_then_rebalance_in_progress() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let (a, b) = stable_pair(&mut g, &c);
    let _rx = pending(g.join(params(&a, &["range", "roundrobin"]), 20, &c));
    assert_eq!(g.state, GroupState::PreparingRebalance);
    let r = ready(g.sync(&b, None, 1, None, None, vec![], 20));
    assert_eq!(r, Err(GroupError::RebalanceInProgress));
}

#[test]
fn given_member_sync_errors_when_syncing_then_kafka_order() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let (a, _) = stable_pair(&mut g, &c);
    assert_eq!(
        ready(g.sync("ghost", None, 1, None, None, vec![], 20)),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        ready(g.sync(&a, None, 7, None, None, vec![], 20)),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        ready(g.sync(&a, None, 1, Some("connect"), None, vec![], 20)),
        Err(GroupError::InconsistentGroupProtocol)
    );
}

#[test]
fn given_stable_when_heartbeating_then_ok_and_errors_per_kafka() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let (a, b) = stable_pair(&mut g, &c);
    assert_eq!(g.heartbeat(&a, None, 1, 20), Ok(()));
    assert_eq!(
        g.heartbeat(&a, None, 0, 20),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        g.heartbeat("x", None, 1, 20),
        Err(GroupError::UnknownMemberId)
    );
    let _rx = pending(g.join(params(&a, &["range", "rr"]), 30, &c));
    assert_eq!(
        g.heartbeat(&b, None, 1, 30),
        Err(GroupError::RebalanceInProgress)
    );
}

#[test]
fn given_stable_when_member_leaves_then_rebalance_and_rejoin_completes_new_generation() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let (a, b) = stable_pair(&mut g, &c);
    g.leave(&b, None, 20, &c).unwrap();
    assert_eq!(g.state, GroupState::PreparingRebalance);
    let j = ready(g.join(params(&a, &["range"]), 30, &c)).unwrap();
    assert_eq!((j.generation, j.members.len()), (2, 1));
    assert_eq!(g.state, GroupState::CompletingRebalance);
    assert_eq!(
        g.leave("nobody", None, 40, &c),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn given_last_member_leaves_when_stable_then_empty_with_new_generation() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let (a, b) = stable_pair(&mut g, &c);
    g.leave(&a, None, 20, &c).unwrap();
    g.leave(&b, None, 20, &c).unwrap();
    assert_eq!(g.state, GroupState::Empty);
    assert_eq!(g.generation, 2);
    assert!(g.leader.is_none());
}

#[test]
fn given_silent_member_when_session_times_out_then_removed_and_other_rebalances() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let (a, b) = stable_pair(&mut g, &c);
    assert_eq!(g.heartbeat(&a, None, 1, 9_000), Ok(()));
    g.tick(10_011, &c);
    assert!(!g.members.contains_key(&b), "b expired");
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(
        g.heartbeat(&a, None, 1, 10_020),
        Err(GroupError::RebalanceInProgress)
    );
    let j = ready(g.join(params(&a, &["range"]), 10_030, &c)).unwrap();
    assert_eq!(j.generation, 2);
}

#[test]
fn given_preparing_when_rebalance_timeout_passes_then_stragglers_removed() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let (a, b) = stable_pair(&mut g, &c);
    let mut ra = pending(g.join(params(&a, &["range", "rr"]), 100, &c));
    // b keeps heartbeating but never rejoins.
    assert_eq!(
        g.heartbeat(&b, None, 1, 10_000),
        Err(GroupError::RebalanceInProgress)
    );
    g.tick(19_000, &c);
    assert!(ra.try_recv().is_err());
    g.tick(20_100, &c);
    let j = ra.try_recv().unwrap().unwrap();
    assert_eq!((j.generation, j.members.len()), (2, 1));
    assert!(!g.members.contains_key(&b));
}

#[test]
fn given_completing_when_leader_never_syncs_then_rebalance_restarts() {
    let c = cfg(10);
    let mut g = Group::new("g", 0);
    let mut ra = pending(g.join(params("", &["range"]), 0, &c));
    let mut rb = pending(g.join(params("", &["range"]), 0, &c));
    g.tick(10, &c);
    let _a = ra.try_recv().unwrap().unwrap();
    let b = rb.try_recv().unwrap().unwrap().member_id;
    let mut sb = pending(g.sync(&b, None, 1, None, None, vec![], 10));
    g.tick(20_011, &c);
    assert_eq!(sb.try_recv().unwrap(), Err(GroupError::RebalanceInProgress));
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(g.members.len(), 1, "the leader that never synced is gone");
}

#[test]
fn given_static_member_when_restarting_in_stable_group_then_no_rebalance_and_old_id_fenced() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let mut p = params("", &["range"]);
    p.instance_id = Some("i1".into());
    let old = ready(g.join(p.clone(), 0, &c)).unwrap();
    ready(g.sync(
        &old.member_id,
        Some("i1"),
        1,
        None,
        None,
        vec![(old.member_id.clone(), Bytes::from_static(b"A"))],
        0,
    ))
    .unwrap();
    g.take_dirty();
    let new = ready(g.join(p, 100, &c)).unwrap();
    assert_ne!(new.member_id, old.member_id);
    assert_eq!(new.generation, 1, "no new generation");
    assert_eq!(g.state, GroupState::Stable);
    assert!(new.skip_assignment, "the leader must not reassign");
    assert!(g.take_dirty(), "the new member id is persisted");
    assert_eq!(
        g.heartbeat(&old.member_id, Some("i1"), 1, 200),
        Err(GroupError::FencedInstanceId)
    );
    assert_eq!(g.heartbeat(&new.member_id, Some("i1"), 1, 200), Ok(()));
    assert_eq!(
        &ready(g.sync(&new.member_id, Some("i1"), 1, None, None, vec![], 200))
            .unwrap()
            .assignment[..],
        b"A",
        "assignment kept"
    );
    assert_eq!(
        g.leave(&old.member_id, Some("i1"), 300, &c),
        Err(GroupError::FencedInstanceId)
    );
    g.leave("", Some("i1"), 300, &c).unwrap();
    assert_eq!(g.state, GroupState::Empty);
}

#[test]
fn given_full_group_when_another_joins_then_group_max_size_reached() {
    let mut c = cfg(0);
    c.max_size = 1;
    let mut g = Group::new("g", 0);
    ready(g.join(params("", &["range"]), 0, &c)).unwrap();
    assert_eq!(
        ready(g.join(params("", &["range"]), 0, &c)),
        Err(GroupError::GroupMaxSizeReached)
    );
}

#[test]
fn given_bad_join_when_joining_then_session_timeout_and_protocol_errors() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let mut p = params("", &["range"]);
    p.session_timeout_ms = 100;
    assert_eq!(
        ready(g.join(p, 0, &c)),
        Err(GroupError::InvalidSessionTimeout(100))
    );
    ready(g.join(params("", &["range"]), 0, &c)).unwrap();
    assert_eq!(
        ready(g.join(params("", &["roundrobin"]), 0, &c)),
        Err(GroupError::InconsistentGroupProtocol)
    );
    let mut other = params("", &["range"]);
    other.protocol_type = "connect".into();
    assert_eq!(
        ready(g.join(other, 0, &c)),
        Err(GroupError::InconsistentGroupProtocol)
    );
    assert_eq!(
        ready(g.join(params("ghost", &["range"]), 0, &c)),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn given_members_preferring_protocols_when_selecting_then_common_protocol_by_vote() {
    let c = cfg(1000);
    let mut g = Group::new("g", 0);
    let mut r1 = pending(g.join(params("", &["rr", "range"]), 0, &c));
    let _r2 = pending(g.join(params("", &["range", "rr"]), 0, &c));
    let _r3 = pending(g.join(params("", &["range", "sticky"]), 0, &c));
    g.tick(1000, &c);
    let j = r1.try_recv().unwrap().unwrap();
    assert_eq!(j.protocol_name.as_deref(), Some("range"));
    assert!(j
        .members
        .iter()
        .all(|m| m.metadata == Bytes::from_static(b"md-range")));
}

#[test]
fn given_group_states_when_validating_commits_then_kafka_rules() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    assert_eq!(
        g.validate_commit("", None, -1),
        Ok(()),
        "simple commit on an empty group"
    );
    let mut ra = pending(g.join(params("", &["range"]), 0, &c));
    let a = ra.try_recv().unwrap().unwrap().member_id;
    assert_eq!(
        g.validate_commit(&a, None, 1),
        Err(GroupError::RebalanceInProgress)
    );
    assert_eq!(
        g.validate_commit("", None, -1),
        Err(GroupError::UnknownMemberId)
    );
    ready(g.sync(&a, None, 1, None, None, vec![], 0)).unwrap();
    assert_eq!(g.validate_commit(&a, None, 1), Ok(()));
    assert_eq!(
        g.validate_commit(&a, None, 0),
        Err(GroupError::IllegalGeneration)
    );
}

#[test]
fn given_stable_group_when_known_follower_rejoins_unchanged_then_current_generation_answered() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    let (_, b) = stable_pair(&mut g, &c);
    let j = ready(g.join(params(&b, &["range"]), 20, &c)).unwrap();
    assert_eq!(j.generation, 1);
    assert_eq!(g.state, GroupState::Stable);
}

#[test]
fn given_dead_group_when_any_request_then_coordinator_not_available() {
    let c = cfg(0);
    let mut g = Group::new("g", 0);
    g.mark_dead(0);
    assert_eq!(
        ready(g.join(params("", &["range"]), 0, &c)),
        Err(GroupError::CoordinatorNotAvailable)
    );
    assert_eq!(
        g.heartbeat("a", None, 0, 0),
        Err(GroupError::CoordinatorNotAvailable)
    );
    assert_eq!(g.can_delete(), Err(GroupError::GroupIdNotFound));
}

#[test]
fn given_offsets_when_retention_passes_then_expired_by_kafka_rules() {
    let c = cfg(0);
    let offset = |ts| CommittedOffset {
        offset: 1,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp: ts,
    };
    // A simple group (commits only): each offset expires from its own commit time.
    let mut simple = Group::new("s", 0);
    simple.offsets.insert(("t".into(), 0), offset(0));
    simple.offsets.insert(("t".into(), 1), offset(500));
    assert_eq!(
        simple.expired_offsets(1000, 1000),
        vec![("t".to_string(), 0)]
    );
    // A group that had members: nothing expires until it has been empty long enough.
    let mut g = Group::new("g", 0);
    let (a, b) = stable_pair(&mut g, &c);
    g.offsets.insert(("t".into(), 0), offset(0));
    assert!(
        g.expired_offsets(10_000, 1000).is_empty(),
        "members present"
    );
    g.leave(&a, None, 20, &c).unwrap();
    g.leave(&b, None, 20, &c).unwrap();
    assert_eq!(g.state, GroupState::Empty);
    assert!(
        g.expired_offsets(1019, 1000).is_empty(),
        "empty for less than retention"
    );
    assert_eq!(g.expired_offsets(1020, 1000).len(), 1);
}
