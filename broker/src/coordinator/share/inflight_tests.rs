use super::*;
use proptest::prelude::*;

const L: Limits = Limits {
    lock_ms: 1_000,
    delivery_limit: 3,
    max_locks: 10,
    renew: true,
    dlq: false,
};

#[test]
fn given_new_records_when_acquired_then_locked_and_accept_moves_the_start() {
    let mut s = SharePartitionState::new(0);
    assert_eq!(s.fetch_offset(&L), Some(0));
    assert_eq!(s.acquire(0, 4, "a", 0, 100, &L), vec![(0, 4, 1)]);
    assert_eq!(s.end, 5);
    // Another member gets nothing of what "a" holds.
    assert!(s.acquire(0, 4, "b", 0, 100, &L).is_empty());
    assert_eq!(
        s.acknowledge("b", 0, 0, &[1], &L, 0),
        Err(AckError::InvalidRecordState(0, 0))
    );
    s.acknowledge("a", 0, 1, &[1], &L, 0).unwrap();
    assert_eq!(s.start, 2);
    // Per-offset types: accept, reject, release.
    s.acknowledge("a", 2, 4, &[1, 3, 2], &L, 0).unwrap();
    assert_eq!(s.start, 4);
    assert_eq!(s.count(RecordState::Available), 1);
    assert_eq!(s.fetch_offset(&L), Some(4));
    assert_eq!(s.acquire(0, 9, "b", 0, 100, &L), vec![(4, 4, 2), (5, 9, 1)]);
}

#[test]
fn given_lock_timeout_when_expired_then_redelivered_until_the_delivery_limit() {
    let mut s = SharePartitionState::new(0);
    for round in 1..=3i16 {
        let now = i64::from(round) * 10_000;
        assert_eq!(s.acquire(0, 0, "a", now, 10, &L), vec![(0, 0, round)]);
        assert!(!s.expire(now + 999, &L));
        assert_eq!(s.next_deadline(), Some(now + 1_000));
        assert!(s.expire(now + 1_000, &L));
    }
    // The third delivery was the last: archived, and the start moved past it.
    assert_eq!(s.start, 1);
    assert!(s.acquire(0, 0, "a", 99_000, 10, &L).is_empty());
}

#[test]
fn given_a_full_window_when_acquiring_then_stops_at_max_record_locks() {
    let mut s = SharePartitionState::new(100);
    assert_eq!(s.acquire(100, 150, "a", 0, 1000, &L), vec![(100, 109, 1)]);
    assert_eq!(s.fetch_offset(&L), None);
    s.acknowledge("a", 100, 100, &[1], &L, 0).unwrap();
    assert_eq!(s.fetch_offset(&L), Some(110));
    assert_eq!(s.acquire(110, 150, "a", 0, 1000, &L), vec![(110, 110, 1)]);
}

#[test]
fn given_a_batch_across_the_window_bound_when_acquired_whole_then_never_split() {
    let mut s = SharePartitionState::new(100);
    // Started below the bound, the batch is taken to its end (Kafka's batch-optimized
    // acquisition); the next batch starts past the bound and gets nothing.
    assert_eq!(s.acquire_batch(100, 105, "a", 0, &L), vec![(100, 105, 1)]);
    assert_eq!(s.acquire_batch(106, 130, "a", 0, &L), vec![(106, 130, 1)]);
    assert_eq!(s.fetch_offset(&L), None);
    assert!(s.acquire_batch(131, 140, "a", 0, &L).is_empty());
    // Released records are taken again whole too.
    s.acknowledge("a", 100, 130, &[2], &L, 0).unwrap();
    assert_eq!(s.acquire_batch(100, 130, "b", 0, &L), vec![(100, 130, 2)]);
}

#[test]
fn given_a_snapshot_when_restored_then_acquired_become_available_with_their_counts() {
    let mut s = SharePartitionState::new(0);
    s.acquire(0, 5, "a", 0, 100, &L);
    s.acknowledge("a", 1, 1, &[1], &L, 0).unwrap();
    s.acknowledge("a", 2, 2, &[3], &L, 0).unwrap();
    let snap = s.snapshot();
    assert_eq!(
        snap,
        vec![(0, 0, 0, 1), (1, 1, 2, 1), (2, 2, 4, 1), (3, 5, 0, 1)]
    );
    let mut r = SharePartitionState::restore(s.start, &snap);
    assert_eq!((r.start, r.end), (0, 6));
    assert_eq!(
        r.acquire(0, 9, "b", 0, 100, &L),
        vec![(0, 0, 2), (3, 5, 2), (6, 9, 1)]
    );
    assert!(r.release_member("b", &L));
    assert_eq!(r.count(RecordState::Available), 8);
}

#[test]
fn given_malformed_batches_when_acknowledged_then_invalid_request_and_nothing_changes() {
    let mut s = SharePartitionState::new(0);
    s.acquire(0, 3, "a", 0, 100, &L);
    assert!(matches!(
        s.acknowledge("a", 0, 3, &[1, 1], &L, 0),
        Err(AckError::InvalidRequest(_))
    ));
    assert!(matches!(
        s.acknowledge("a", 0, 0, &[9], &L, 0),
        Err(AckError::InvalidRequest(_))
    ));
    // Offset 4 was never acquired: the whole batch is refused.
    assert_eq!(
        s.acknowledge("a", 0, 4, &[1], &L, 0),
        Err(AckError::InvalidRecordState(0, 4))
    );
    assert_eq!(s.count(RecordState::Acquired), 4);
}

#[test]
fn given_a_renew_when_the_old_lock_would_have_run_out_then_still_acquired_with_the_same_count() {
    let mut s = SharePartitionState::new(0);
    assert_eq!(s.acquire(0, 1, "a", 0, 10, &L), vec![(0, 1, 1)]);
    // Renewed at 900: the lock now runs to 1_900, not 1_000.
    s.acknowledge("a", 0, 0, &[4], &L, 900).unwrap();
    assert_eq!(s.next_deadline(), Some(1_000), "offset 1 was not renewed");
    assert!(s.expire(1_000, &L), "offset 1's lock ran out");
    assert_eq!(s.count(RecordState::Acquired), 1);
    assert_eq!(s.next_deadline(), Some(1_900));
    // Another member cannot take it; its holder still acknowledges it.
    assert!(s.acquire(0, 0, "b", 1_500, 10, &L).is_empty());
    assert_eq!(
        s.acknowledge("b", 0, 0, &[4], &L, 1_500),
        Err(AckError::InvalidRecordState(0, 0))
    );
    s.acknowledge("a", 0, 0, &[1], &L, 1_800).unwrap();
    // Offset 1 comes back at delivery count 2: the renew did not count as a delivery.
    assert_eq!(s.acquire(0, 1, "b", 2_000, 10, &L), vec![(1, 1, 2)]);
}

#[test]
fn given_renew_turned_off_when_renewing_then_refused_and_the_lock_unchanged() {
    let off = Limits { renew: false, ..L };
    let mut s = SharePartitionState::new(0);
    s.acquire(0, 0, "a", 0, 10, &off);
    assert_eq!(
        s.acknowledge("a", 0, 0, &[4], &off, 500),
        Err(AckError::RenewDisabled)
    );
    assert_eq!(s.next_deadline(), Some(1_000));
}

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        member: u8,
        base: i64,
        len: i64,
        max: usize,
    },
    Ack {
        member: u8,
        first: i64,
        len: i64,
        kind: i8,
    },
    Advance(i64),
    Release(u8),
    Restore,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..3, 0i64..30, 1i64..6, 1usize..8).prop_map(|(member, base, len, max)| Op::Acquire {
            member,
            base,
            len,
            max
        }),
        (0u8..3, 0i64..30, 1i64..4, 0i8..5).prop_map(|(member, first, len, kind)| Op::Ack {
            member,
            first,
            len,
            kind
        }),
        (0i64..3_000).prop_map(Op::Advance),
        (0u8..3).prop_map(Op::Release),
        Just(Op::Restore),
    ]
}

proptest! {
    /// Against a model of what was accepted: an acknowledged record is never acquired again,
    /// no record is held by two members (renewed ones included), delivery counts stay within the limit, and the
    /// window stays within max.record.locks.
    #[test]
    fn prop_no_acknowledged_record_is_redelivered(ops in proptest::collection::vec(op(), 1..80)) {
        let mut s = SharePartitionState::new(0);
        let mut now = 0i64;
        let mut accepted = std::collections::BTreeSet::new();
        let mut holder: BTreeMap<i64, u8> = BTreeMap::new();
        let mut deliveries: BTreeMap<i64, i16> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Acquire { member, base, len, max } => {
                    s.expire(now, &L);
                    holder.retain(|o, _| s.records.get(o).is_some_and(|r| r.state == RecordState::Acquired));
                    let got = s.acquire(base, base + len - 1, &member.to_string(), now, max, &L);
                    let n: i64 = got.iter().map(|(f, l, _)| l - f + 1).sum();
                    prop_assert!(n as usize <= max);
                    for (f, l, count) in got {
                        for o in f..=l {
                            prop_assert!(!accepted.contains(&o), "offset {o} redelivered after ACCEPT");
                            prop_assert!(holder.insert(o, member).is_none(), "offset {o} held twice");
                            let d = deliveries.entry(o).or_default();
                            *d += 1;
                            prop_assert_eq!(*d, count);
                            prop_assert!(count <= L.delivery_limit);
                        }
                    }
                }
                Op::Ack { member, first, len, kind } => {
                    s.expire(now, &L);
                    holder.retain(|o, _| s.records.get(o).is_some_and(|r| r.state == RecordState::Acquired));
                    let last = first + len - 1;
                    if s.acknowledge(&member.to_string(), first, last, &[kind], &L, now).is_ok() {
                        // A RENEW (4) keeps every record with its holder.
                        for o in (first..=last).filter(|_| kind != 4) {
                            if holder.remove(&o).is_some() && kind == 1 {
                                accepted.insert(o);
                            }
                        }
                    }
                }
                Op::Advance(ms) => now += ms,
                Op::Release(member) => {
                    s.release_member(&member.to_string(), &L);
                    holder.retain(|_, m| *m != member);
                }
                Op::Restore => {
                    s = SharePartitionState::restore(s.start, &s.snapshot());
                    holder.clear();
                }
            }
            prop_assert!(s.end - s.start <= L.max_locks);
            prop_assert!(s.start <= s.end);
            prop_assert!(s.records.keys().all(|o| *o >= s.start && *o < s.end));
        }
    }
}

#[test]
fn given_a_dlq_when_records_are_rejected_or_run_out_then_they_are_dead_with_their_cause() {
    let dlq = Limits { dlq: true, ..L };
    let mut s = SharePartitionState::new(0);
    s.acquire(0, 4, "a", 0, 10, &dlq);
    // Offset 0 rejected, 1 a gap (no record: never a dead letter), 2 released (count 1 < 3).
    s.acknowledge("a", 0, 2, &[3, 0, 2], &dlq, 0).unwrap();
    let dead = |o, count, rejected| Dead {
        offset: o,
        delivery_count: count,
        rejected,
    };
    assert_eq!(s.take_dead(), vec![dead(0, 1, true)]);
    assert!(s.take_dead().is_empty(), "taken once");
    // 2 goes round to the limit: released at 2, its lock runs out at 3.
    assert_eq!(s.acquire(2, 2, "a", 0, 10, &dlq), vec![(2, 2, 2)]);
    s.acknowledge("a", 2, 2, &[2], &dlq, 0).unwrap();
    assert_eq!(s.acquire(2, 2, "a", 0, 10, &dlq), vec![(2, 2, 3)]);
    assert!(s.expire(5_000, &dlq));
    // 3 and 4 ran out too (count 1): available again, not dead.
    assert_eq!(s.take_dead(), vec![dead(2, 3, false)]);
    // A member that leaves holding a record at its limit: dead too.
    for _ in 0..3 {
        s.acquire(3, 3, "b", 10_000, 10, &dlq);
        s.release_member("b", &dlq);
    }
    assert_eq!(s.take_dead(), vec![dead(3, 3, false)]);
    // Without a DLQ nothing is kept.
    s.acquire(4, 4, "a", 20_000, 10, &L);
    s.acknowledge("a", 4, 4, &[3], &L, 20_000).unwrap();
    assert!(s.take_dead().is_empty());
}

#[test]
fn given_an_aborted_batch_when_skipped_then_archived_undelivered_and_the_start_moves() {
    let mut s = SharePartitionState::new(0);
    assert_eq!(s.acquire(0, 1, "a", 0, 10, &L), vec![(0, 1, 1)]);
    s.skip(2, 4, &L);
    assert_eq!((s.end, s.count(RecordState::Archived)), (5, 3));
    assert_eq!(s.acquire(5, 5, "a", 0, 10, &L), vec![(5, 5, 1)]);
    s.acknowledge("a", 0, 1, &[1], &L, 0).unwrap();
    // Done up to 4: the skipped ones never held the start back.
    assert_eq!(s.start, 5);
    // The window bound holds for skipped records too.
    let mut t = SharePartitionState::new(0);
    t.acquire(0, 0, "a", 0, 10, &L);
    t.skip(1, 50, &L);
    assert_eq!(t.end, 10);
}
