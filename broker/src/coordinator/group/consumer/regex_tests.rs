//! Unit tests of regex subscriptions (`regex`): resolution filtered by the heartbeat's
//! principal, Kafka's refresh timing, and the resolution kept across a load.

use super::regex::{LOADED_VERSION, MIN_REGEX_REFRESH_INTERVAL_MS};
use super::*;
use crate::coordinator::group::records::GroupRecord;

const REFRESH_MS: i64 = 60_000;

fn cfg() -> ConsumerConfig {
    ConsumerConfig {
        session_timeout_ms: 45_000,
        heartbeat_interval_ms: 5_000,
        max_size: 100,
        regex_refresh_interval_ms: REFRESH_MS,
    }
}

fn topics(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
    list.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

/// A principal that may DESCRIBE the topics starting with one of `prefixes`.
fn rights(prefixes: &'static [&'static str]) -> impl Fn(&str) -> bool {
    move |t: &str| prefixes.iter().any(|p| t.starts_with(p))
}

/// A heartbeat of `id` (joining when `epoch` is 0, with `regex`), owning what it was given.
fn beat(
    g: &mut ConsumerGroup,
    id: &str,
    epoch: i32,
    regex: Option<&str>,
    topics: &BTreeMap<String, i32>,
    now: i64,
    resolver: &RegexResolver<'_>,
) -> Result<HeartbeatResult, GroupError> {
    let owned = g.members.get(id).map(|m| m.assigned.clone());
    g.heartbeat(
        HeartbeatParams {
            member_id: id.into(),
            member_epoch: epoch,
            rebalance_timeout_ms: 30_000,
            regex: regex.map(String::from),
            owned: Some(owned.unwrap_or_default()),
            ..Default::default()
        },
        topics,
        now,
        &cfg(),
        resolver,
    )
}

/// Resolutions with the rights of `may`, in a catalog at `topics_version`.
fn as_of(may: &dyn Fn(&str) -> bool, topics_version: i64) -> RegexResolver<'_> {
    RegexResolver {
        may_describe: may,
        topics_version,
    }
}

fn names(a: &Assignment) -> Vec<&str> {
    a.keys().map(String::as_str).collect()
}

fn resolved(g: &ConsumerGroup, regex: &str) -> Vec<String> {
    g.regexes[regex].topics.iter().cloned().collect()
}

#[test]
fn given_principal_without_describe_on_some_matches_when_joining_by_regex_then_only_describable_topics_assigned(
) {
    let all = topics(&[("rx-a1", 2), ("rx-a2", 1), ("rx-b1", 1), ("other", 1)]);
    let mut g = ConsumerGroup::default();
    let may = rights(&["rx-a"]);
    let only_a = as_of(&may, 0);
    let r = beat(&mut g, "m", 0, Some("rx-.*"), &all, 0, &only_a).unwrap();
    assert_eq!(names(&r.assignment.unwrap()), ["rx-a1", "rx-a2"]);
    assert_eq!(resolved(&g, "rx-.*"), ["rx-a1", "rx-a2"]);
    // No authorizer: every match.
    let mut open = ConsumerGroup::default();
    let r = beat(
        &mut open,
        "m",
        0,
        Some("rx-.*"),
        &all,
        0,
        &RegexResolver::everything(),
    );
    assert_eq!(
        names(&r.unwrap().assignment.unwrap()),
        ["rx-a1", "rx-a2", "rx-b1"]
    );
}

#[test]
fn given_resolution_when_acls_change_then_shown_once_the_refresh_interval_passed() {
    let all = topics(&[("rx-a1", 1), ("rx-b1", 1), ("rx-b2", 1)]);
    let mut g = ConsumerGroup::default();
    let (before, after) = (rights(&["rx-a"]), rights(&["rx-a", "rx-b1"]));
    let (before, after) = (&as_of(&before, 0), &as_of(&after, 0));
    let r = beat(&mut g, "m", 0, Some("rx-.*"), &all, 0, before).unwrap();
    assert_eq!(names(&r.assignment.unwrap()), ["rx-a1"]);
    // Granted rx-b1: the resolution stands until it is older than the refresh interval.
    let r = beat(&mut g, "m", 1, None, &all, REFRESH_MS, after).unwrap();
    assert_eq!((r.member_epoch, r.assignment), (1, None));
    let r = beat(&mut g, "m", 1, None, &all, REFRESH_MS + 1, after).unwrap();
    assert_eq!(r.member_epoch, 2);
    assert_eq!(names(&r.assignment.unwrap()), ["rx-a1", "rx-b1"]);
    // Revoked again: rx-b1 is taken back at the next refresh.
    let r = beat(&mut g, "m", 2, None, &all, 2 * REFRESH_MS + 2, before).unwrap();
    assert_eq!(names(&r.assignment.unwrap()), ["rx-a1"]);
    assert_eq!(resolved(&g, "rx-.*"), ["rx-a1"]);
}

#[test]
fn given_new_matching_topic_when_within_the_minimum_interval_then_it_joins_after_it() {
    let two = topics(&[("logs-a", 1), ("other", 1)]);
    let three = topics(&[("logs-a", 1), ("logs-b", 2), ("other", 1)]);
    let created = as_of(&|_| true, 1);
    let mut g = ConsumerGroup::default();
    let r = beat(
        &mut g,
        "m",
        0,
        Some("logs-.*"),
        &two,
        0,
        &RegexResolver::everything(),
    );
    assert_eq!(names(&r.unwrap().assignment.unwrap()), ["logs-a"]);
    // Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: no resolution within 10 s of the last.
    let r = beat(&mut g, "m", 1, None, &three, 1, &created).unwrap();
    assert_eq!((r.member_epoch, r.assignment), (1, None));
    let r = beat(
        &mut g,
        "m",
        1,
        None,
        &three,
        MIN_REGEX_REFRESH_INTERVAL_MS + 1,
        &created,
    );
    let r = r.unwrap();
    assert_eq!(r.member_epoch, 2, "a new matching topic moves the epoch");
    assert_eq!(names(&r.assignment.unwrap()), ["logs-a", "logs-b"]);
    // Nothing created since: no resolution before the refresh interval.
    let before = g.regexes["logs-.*"].timestamp;
    beat(
        &mut g,
        "m",
        2,
        None,
        &three,
        2 * MIN_REGEX_REFRESH_INTERVAL_MS + 2,
        &created,
    )
    .unwrap();
    assert_eq!(g.regexes["logs-.*"].timestamp, before);
    let mut bad = ConsumerGroup::default();
    assert!(matches!(
        beat(
            &mut bad,
            "m",
            0,
            Some("logs-("),
            &two,
            0,
            &RegexResolver::everything()
        ),
        Err(GroupError::InvalidRegularExpression(_))
    ));
}

#[test]
fn given_members_sharing_a_regex_when_one_resolves_it_then_its_rights_decide_for_all() {
    let all = topics(&[("rx-a", 2), ("rx-b", 2)]);
    let mut g = ConsumerGroup::default();
    beat(
        &mut g,
        "rich",
        0,
        Some("rx-.*"),
        &all,
        0,
        &RegexResolver::everything(),
    )
    .unwrap();
    let may = rights(&["rx-a"]);
    // Kafka's rule: the group has the regex resolved, so a new subscriber shares it.
    beat(&mut g, "poor", 0, Some("rx-.*"), &all, 1, &as_of(&may, 0)).unwrap();
    assert_eq!(resolved(&g, "rx-.*"), ["rx-a", "rx-b"]);
    // The next resolution is made by whoever heartbeats when it is due.
    let epoch = g.members["poor"].epoch;
    let later = MIN_REGEX_REFRESH_INTERVAL_MS + 2;
    beat(&mut g, "poor", epoch, None, &all, later, &as_of(&may, 1)).unwrap();
    assert_eq!(resolved(&g, "rx-.*"), ["rx-a"]);
    assert!(g.target.values().all(|t| !t.contains_key("rx-b")));
}

#[test]
fn given_loaded_group_when_a_member_expires_before_any_heartbeat_then_target_keeps_the_resolution()
{
    let all = topics(&[("rx-a", 2), ("rx-b", 2)]);
    let ids: BTreeMap<String, uuid::Uuid> = all
        .keys()
        .enumerate()
        .map(|(i, t)| (t.clone(), uuid::Uuid::from_u128(i as u128 + 1)))
        .collect();
    let id_of = |t: &str| ids.get(t).copied();
    let name_of = |id: &uuid::Uuid| ids.iter().find(|(_, v)| *v == id).map(|(k, _)| k.clone());
    let may = rights(&["rx-a"]);
    let only_a = as_of(&may, 0);
    let mut g = ConsumerGroup::default();
    beat(&mut g, "a", 0, Some("rx-.*"), &all, 0, &only_a).unwrap();
    beat(&mut g, "b", 0, Some("rx-.*"), &all, 1, &only_a).unwrap();
    let records = g.take_records("g", &id_of);
    assert!(records.iter().any(|r| matches!(r,
        GroupRecord::ConsumerRegex { regex, value: Some(v), .. }
            if regex == "rx-.*" && v.topics == BTreeSet::from(["rx-a".to_string()]))));

    // A new coordinator replays the log; b's session ends before anyone heartbeats.
    let mut loaded = ConsumerGroup::default();
    for r in records {
        loaded.restore(r, &name_of);
    }
    loaded.finish_restore(2, &cfg());
    assert_eq!(loaded.regexes["rx-.*"].version, LOADED_VERSION);
    loaded.members.get_mut("b").unwrap().session_deadline = 0;
    loaded.tick(3, &all);
    assert_eq!(
        loaded.target["a"],
        Assignment::from([("rx-a".to_string(), BTreeSet::from([0, 1]))]),
        "the replayed resolution, not every topic the regex matches"
    );

    // The first heartbeat past the minimum interval resolves again, with its own rights.
    let epoch = loaded.members["a"].epoch;
    let everything = RegexResolver::everything();
    beat(&mut loaded, "a", epoch, None, &all, 4, &everything).unwrap();
    assert_eq!(resolved(&loaded, "rx-.*"), ["rx-a"]);
    let later = MIN_REGEX_REFRESH_INTERVAL_MS + 1;
    beat(&mut loaded, "a", epoch, None, &all, later, &everything).unwrap();
    assert_eq!(resolved(&loaded, "rx-.*"), ["rx-a", "rx-b"]);
}

#[test]
fn given_last_subscriber_of_a_regex_when_leaving_then_its_resolution_is_tombstoned() {
    let all = topics(&[("rx-a", 1)]);
    let id_of = |_: &str| Some(uuid::Uuid::from_u128(1));
    let regex_records = |recs: Vec<GroupRecord>| -> Vec<Option<ResolvedRegex>> {
        recs.into_iter()
            .filter_map(|r| match r {
                GroupRecord::ConsumerRegex { value, .. } => Some(value),
                _ => None,
            })
            .collect()
    };
    let mut g = ConsumerGroup::default();
    beat(
        &mut g,
        "m",
        0,
        Some("rx-.*"),
        &all,
        0,
        &RegexResolver::everything(),
    )
    .unwrap();
    let written = regex_records(g.take_records("g", &id_of));
    assert_eq!(written.len(), 1);
    assert!(written[0].is_some());
    beat(
        &mut g,
        "m",
        LEAVE_EPOCH,
        None,
        &all,
        1,
        &RegexResolver::everything(),
    )
    .unwrap();
    assert!(g.regexes.is_empty());
    assert_eq!(regex_records(g.take_records("g", &id_of)), vec![None]);
}

#[test]
fn given_group_logged_without_regex_records_when_loaded_then_targets_seed_the_regex_until_a_heartbeat(
) {
    let all = topics(&[("rx-a", 2), ("rx-b", 2), ("other", 1)]);
    let ids: BTreeMap<String, uuid::Uuid> = all
        .keys()
        .enumerate()
        .map(|(i, t)| (t.clone(), uuid::Uuid::from_u128(i as u128 + 1)))
        .collect();
    let id_of = |t: &str| ids.get(t).copied();
    let name_of = |id: &uuid::Uuid| ids.iter().find(|(_, v)| *v == id).map(|(k, _)| k.clone());
    let mut g = ConsumerGroup::default();
    let everything = RegexResolver::everything();
    beat(&mut g, "a", 0, Some("rx-.*"), &all, 0, &everything).unwrap();
    beat(&mut g, "b", 0, Some("rx-.*"), &all, 1, &everything).unwrap();
    // What a Strom that did not write record 16 left in the log.
    let records: Vec<GroupRecord> = g
        .take_records("g", &id_of)
        .into_iter()
        .filter(|r| !matches!(r, GroupRecord::ConsumerRegex { .. }))
        .collect();
    let mut loaded = ConsumerGroup::default();
    for r in records {
        loaded.restore(r, &name_of);
    }
    loaded.finish_restore(2, &cfg());
    loaded.members.get_mut("b").unwrap().session_deadline = 0;
    loaded.tick(3, &all);
    let a: Vec<&str> = loaded.target["a"].keys().map(String::as_str).collect();
    assert_eq!(a, ["rx-a", "rx-b"], "the regex's topics stay assigned");
    // The first heartbeat resolves it, whatever the time.
    let may = rights(&["rx-a"]);
    let epoch = loaded.members["a"].epoch;
    beat(&mut loaded, "a", epoch, None, &all, 4, &as_of(&may, 0)).unwrap();
    assert_eq!(resolved(&loaded, "rx-.*"), ["rx-a"]);
}
