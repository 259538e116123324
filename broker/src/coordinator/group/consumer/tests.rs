//! Unit tests of the KIP-848 consumer group state machine, with injected time.

use super::reconcile::intersect;
use super::*;

fn cfg() -> ConsumerConfig {
    ConsumerConfig {
        session_timeout_ms: 45_000,
        heartbeat_interval_ms: 5_000,
        max_size: 100,
        regex_refresh_interval_ms: 600_000,
    }
}

fn topics() -> BTreeMap<String, i32> {
    BTreeMap::from([("t".to_string(), 6)])
}

fn join(g: &mut ConsumerGroup, id: &str, now: i64) -> HeartbeatResult {
    g.heartbeat(
        HeartbeatParams {
            member_id: id.into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed: Some(BTreeSet::from(["t".to_string()])),
            owned: Some(Assignment::new()),
            ..Default::default()
        },
        &topics(),
        now,
        &cfg(),
        &RegexResolver::everything(),
    )
    .unwrap()
}

fn beat(
    g: &mut ConsumerGroup,
    id: &str,
    epoch: i32,
    owned: &Assignment,
    now: i64,
) -> Result<HeartbeatResult, GroupError> {
    g.heartbeat(
        HeartbeatParams {
            member_id: id.into(),
            member_epoch: epoch,
            owned: Some(owned.clone()),
            ..Default::default()
        },
        &topics(),
        now,
        &cfg(),
        &RegexResolver::everything(),
    )
}

fn count(a: &Assignment) -> usize {
    a.values().map(|s| s.len()).sum()
}

#[test]
fn given_first_member_when_joining_then_epoch_one_and_all_partitions() {
    let mut g = ConsumerGroup::default();
    let r = join(&mut g, "a", 0);
    assert_eq!(r.member_epoch, 1);
    assert_eq!(count(&r.assignment.unwrap()), 6);
    assert_eq!(g.state_name(), "Stable");
}

#[test]
fn given_second_member_when_joining_then_first_revokes_before_second_gets_partitions() {
    let mut g = ConsumerGroup::default();
    let a = join(&mut g, "a", 0);
    let a_owned = a.assignment.unwrap();
    let b = join(&mut g, "b", 10);
    assert_eq!(b.member_epoch, 2);
    assert_eq!(count(&b.assignment.unwrap()), 0, "a still owns everything");
    assert_eq!(g.state_name(), "Reconciling");
    // a is told to give up three partitions, keeping epoch 1.
    let r = beat(&mut g, "a", 1, &a_owned, 20).unwrap();
    assert_eq!(r.member_epoch, 1);
    let kept = r.assignment.unwrap();
    assert_eq!(count(&kept), 3);
    // a reports the revocation done: it moves to epoch 2.
    let r = beat(&mut g, "a", 1, &kept, 30).unwrap();
    assert_eq!(r.member_epoch, 2);
    // b now receives the released partitions.
    let r = beat(&mut g, "b", 2, &Assignment::new(), 40).unwrap();
    let got = r.assignment.unwrap();
    assert_eq!(count(&got), 3);
    assert!(intersect(&got, &kept).is_empty());
    assert_eq!(g.state_name(), "Stable");
}

#[test]
fn given_member_when_epoch_wrong_or_unknown_then_fenced_or_unknown() {
    let mut g = ConsumerGroup::default();
    join(&mut g, "a", 0);
    let none = Assignment::new();
    assert_eq!(
        beat(&mut g, "a", 7, &none, 1),
        Err(GroupError::FencedMemberEpoch)
    );
    assert_eq!(
        beat(&mut g, "x", 1, &none, 1),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        g.validate_member_epoch("a", 0),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(g.validate_member_epoch("a", 1), Ok(()));
}

#[test]
fn given_member_leaves_when_heartbeat_minus_one_then_others_get_its_partitions() {
    let mut g = ConsumerGroup::default();
    let a = join(&mut g, "a", 0).assignment.unwrap();
    join(&mut g, "b", 1);
    let kept = beat(&mut g, "a", 1, &a, 2).unwrap().assignment.unwrap();
    beat(&mut g, "a", 1, &kept, 3).unwrap();
    let b = beat(&mut g, "b", 2, &Assignment::new(), 4)
        .unwrap()
        .assignment
        .unwrap();
    let r = beat(&mut g, "b", LEAVE_EPOCH, &b, 5).unwrap();
    assert_eq!(r.member_epoch, LEAVE_EPOCH);
    let r = beat(&mut g, "a", 2, &kept, 6).unwrap();
    assert_eq!(r.member_epoch, 3);
    assert_eq!(count(&r.assignment.unwrap()), 6);
}

#[test]
fn given_silent_member_when_session_expires_then_removed() {
    let mut g = ConsumerGroup::default();
    join(&mut g, "a", 0);
    g.tick(45_000, &topics());
    assert!(g.members.is_empty());
    assert_eq!(g.state_name(), "Empty");
}

#[test]
fn given_unknown_assignor_when_joining_then_unsupported_assignor() {
    let mut g = ConsumerGroup::default();
    let r = g.heartbeat(
        HeartbeatParams {
            member_id: "a".into(),
            subscribed: Some(BTreeSet::new()),
            assignor: Some("sticky-ish".into()),
            ..Default::default()
        },
        &topics(),
        0,
        &cfg(),
        &RegexResolver::everything(),
    );
    assert_eq!(r, Err(GroupError::UnsupportedAssignor));
}

#[test]
fn given_static_member_when_it_leaves_temporarily_and_returns_then_same_assignment() {
    let mut g = ConsumerGroup::default();
    let p = HeartbeatParams {
        member_id: "a1".into(),
        member_epoch: 0,
        instance_id: Some("i".into()),
        subscribed: Some(BTreeSet::from(["t".to_string()])),
        ..Default::default()
    };
    let first = g
        .heartbeat(
            p.clone(),
            &topics(),
            0,
            &cfg(),
            &RegexResolver::everything(),
        )
        .unwrap();
    let mut leave = p.clone();
    leave.member_epoch = STATIC_LEAVE_EPOCH;
    g.heartbeat(leave, &topics(), 1, &cfg(), &RegexResolver::everything())
        .unwrap();
    let mut back = p;
    back.member_id = "a2".into();
    let epoch_before = g.group_epoch;
    let r = g
        .heartbeat(back, &topics(), 2, &cfg(), &RegexResolver::everything())
        .unwrap();
    assert_eq!(r.assignment, first.assignment);
    assert_eq!(r.member_epoch, first.member_epoch);
    assert_eq!(g.group_epoch, epoch_before, "no rebalance");
}
