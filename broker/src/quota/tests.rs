use std::sync::Arc;

use super::*;
use crate::metadata::quotas::{entity, CLIENT_ID, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, USER};

fn manager(dir: &std::path::Path) -> QuotaManager {
    let store = Arc::new(QuotaStore::open(dir).unwrap());
    QuotaManager::new(store, WindowConfig::new(11, 1))
}

#[test]
fn given_no_quota_when_recording_then_never_throttled_and_no_sensor() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    assert_eq!(m.record(QuotaKind::Produce, "alice", "app", 1e12, 0), 0);
    assert!(m.views(0).is_empty());
}

#[test]
fn given_a_client_quota_when_over_then_throttle_follows_kafkas_formula_and_applies_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.store()
        .alter(&[(
            entity(&[(CLIENT_ID, Some("app"))]),
            [(PRODUCER_BYTE_RATE.to_string(), Some(1000.0))].into(),
        )])
        .unwrap();
    // 10 KB at t=0 is 1000 B/s over the 10 s floor: exactly the bound, not over it.
    assert_eq!(m.record(QuotaKind::Produce, "alice", "app", 10_000.0, 0), 0);
    // 10 KB more: 2000 B/s, twice the bound, so held back one whole window (10 s).
    assert_eq!(
        m.record(QuotaKind::Produce, "alice", "app", 10_000.0, 0),
        10_000
    );
    // Another client id is not limited at all.
    assert_eq!(m.record(QuotaKind::Produce, "alice", "other", 1e9, 0), 0);
    // Fetch has its own quota key: none set.
    assert_eq!(m.record(QuotaKind::Fetch, "alice", "app", 1e9, 0), 0);
    let v = m.views(0);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].throttled, 1);
    assert_eq!(v[0].throttle_ms_total, 10_000);
    // Raising the quota applies to the next request.
    m.store()
        .alter(&[(
            entity(&[(CLIENT_ID, Some("app"))]),
            [(PRODUCER_BYTE_RATE.to_string(), Some(1e9))].into(),
        )])
        .unwrap();
    assert_eq!(m.record(QuotaKind::Produce, "alice", "app", 1.0, 1), 0);
}

#[test]
fn given_a_user_quota_when_two_clients_produce_then_they_share_one_budget() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.store()
        .alter(&[(
            entity(&[(USER, Some("alice"))]),
            [(PRODUCER_BYTE_RATE.to_string(), Some(1000.0))].into(),
        )])
        .unwrap();
    assert_eq!(m.record(QuotaKind::Produce, "alice", "a", 10_000.0, 0), 0);
    assert!(m.record(QuotaKind::Produce, "alice", "b", 10_000.0, 0) > 0);
    // Bob has no quota.
    assert_eq!(m.record(QuotaKind::Produce, "bob", "a", 1e9, 0), 0);
}

#[test]
fn given_a_request_quota_when_far_over_then_throttle_is_capped_at_one_window() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.store()
        .alter(&[(
            entity(&[(CLIENT_ID, None)]),
            [(REQUEST_PERCENTAGE.to_string(), Some(1.0))].into(),
        )])
        .unwrap();
    assert_eq!(m.record(QuotaKind::Request, "u", "c", 1e6, 0), 1000);
}

#[test]
fn given_a_throttled_fetch_when_unrecorded_then_its_bytes_no_longer_count() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.store()
        .alter(&[(
            entity(&[(CLIENT_ID, Some("c"))]),
            [("consumer_byte_rate".to_string(), Some(1000.0))].into(),
        )])
        .unwrap();
    assert_eq!(
        m.max_value_in_window(QuotaKind::Fetch, "u", "c"),
        Some(10_000.0)
    );
    assert!(m.record(QuotaKind::Fetch, "u", "c", 20_000.0, 0) > 0);
    m.unrecord(QuotaKind::Fetch, "u", "c", 20_000.0, 0);
    assert_eq!(m.record(QuotaKind::Fetch, "u", "c", 5_000.0, 0), 0);
}

#[test]
fn given_many_shards_when_recording_from_threads_then_one_shared_rate() {
    let dir = tempfile::tempdir().unwrap();
    let m = Arc::new(manager(dir.path()));
    m.store()
        .alter(&[(
            entity(&[(CLIENT_ID, Some("app"))]),
            [(PRODUCER_BYTE_RATE.to_string(), Some(1000.0))].into(),
        )])
        .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..100 {
                    m.record(QuotaKind::Produce, "u", "app", 100.0, 0);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // 40 KB in all at t=0 over the 10 s floor: 4000 B/s, measured by one sensor.
    let v = m.views(0);
    assert_eq!(v.len(), 1);
    assert!((v[0].rate - 4000.0).abs() < 1e-6, "{}", v[0].rate);
}

#[test]
fn given_more_sensors_than_the_cap_when_viewing_then_the_rest_is_summed() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.store()
        .alter(&[(
            entity(&[(CLIENT_ID, None)]),
            [(PRODUCER_BYTE_RATE.to_string(), Some(1e9))].into(),
        )])
        .unwrap();
    for i in 0..(MAX_METRIC_SENSORS + 50) {
        m.record(QuotaKind::Produce, "u", &format!("c{i:04}"), 10.0, 0);
    }
    let v = m.views(0);
    assert_eq!(v.len(), MAX_METRIC_SENSORS + 1);
    let other = v.last().unwrap();
    assert_eq!(other.key.user, "__other__");
    assert!((other.rate - 50.0).abs() < 1e-6, "{}", other.rate);
    // An hour without traffic and the sensors are gone.
    assert!(m.views(3_600_000).is_empty());
}
