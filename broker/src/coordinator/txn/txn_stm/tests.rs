//! The transaction state machine's transitions, one Kafka decision per test.

use super::*;
use TxnState::*;

const PID: i64 = 1000;

fn entry(state: TxnState, epoch: i16) -> TxnEntry {
    let mut m = TxnMetadata::new("tx", PID, 60_000, 0);
    m.state = state;
    m.producer_epoch = epoch;
    if matches!(state, Ongoing | PrepareCommit | PrepareAbort) {
        m.partitions.insert(("t".into(), 0));
        m.start_ms = 1;
    }
    TxnEntry::new(m)
}

fn no_pid() -> impl FnMut() -> Result<i64, TxnError> {
    || panic!("no new producer id expected")
}

fn tp(p: i32) -> (String, i32) {
    ("t".into(), p)
}

#[test]
fn given_transition_table_when_checking_then_matches_kafka_valid_previous_states() {
    let legal: &[(TxnState, TxnState)] = &[
        (Empty, Empty),
        (CompleteCommit, Empty),
        (CompleteAbort, Empty),
        (Empty, Ongoing),
        (Ongoing, Ongoing),
        (CompleteCommit, Ongoing),
        (CompleteAbort, Ongoing),
        (Ongoing, PrepareCommit),
        (Ongoing, PrepareAbort),
        (PrepareEpochFence, PrepareAbort),
        (Empty, PrepareAbort),
        // TV2's abort of an empty transaction (Kafka 4.4's VALID_PREVIOUS_STATES).
        (CompleteCommit, PrepareAbort),
        (CompleteAbort, PrepareAbort),
        (PrepareCommit, CompleteCommit),
        (PrepareAbort, CompleteAbort),
        (Empty, Dead),
        (CompleteCommit, Dead),
        (CompleteAbort, Dead),
        (Ongoing, PrepareEpochFence),
    ];
    for from in TxnState::ALL {
        for to in TxnState::ALL {
            assert_eq!(
                to.can_follow(from),
                legal.contains(&(from, to)),
                "{from:?} -> {to:?}"
            );
        }
    }
    for s in TxnState::ALL {
        assert_eq!(TxnState::from_id(s as i8), Some(s));
        assert_eq!(TxnState::from_name(s.name()), Some(s));
    }
    assert_eq!(TxnState::from_id(8), None);
}

#[test]
fn given_new_or_completed_txn_when_init_then_epoch_bumped_and_state_empty() {
    for state in [Empty, CompleteCommit, CompleteAbort] {
        let e = entry(state, 4);
        let InitPlan::Write(t) = e
            .init_producer_id(None, 5000, 9, false, &mut no_pid())
            .unwrap()
        else {
            panic!("expected a write")
        };
        assert_eq!((t.producer_id, t.producer_epoch, t.state), (PID, 5, Empty));
        assert_eq!((t.timeout_ms, t.last_update_ms), (5000, 9));
        assert!(TxnState::Empty.can_follow(state));
    }
    // A brand new id (epoch -1) gets epoch 0.
    let e = entry(Empty, -1);
    let InitPlan::Write(t) = e
        .init_producer_id(None, 1, 1, false, &mut no_pid())
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(t.producer_epoch, 0);
}

#[test]
fn given_ongoing_txn_when_init_then_fenced_abort_with_bumped_epoch() {
    let e = entry(Ongoing, 2);
    let plan = e
        .init_producer_id(None, 1000, 5, false, &mut no_pid())
        .unwrap();
    let InitPlan::FenceAndAbort(t) = plan else {
        panic!("{plan:?}")
    };
    assert_eq!((t.state, t.producer_epoch), (PrepareAbort, 3));
    assert_eq!(t.partitions, e.meta.partitions);
}

#[test]
fn given_prepare_or_pending_when_init_then_concurrent_transactions() {
    for state in [PrepareCommit, PrepareAbort, Dead, PrepareEpochFence] {
        let e = entry(state, 1);
        assert_eq!(
            e.init_producer_id(None, 1, 1, false, &mut no_pid()),
            Err(TxnError::ConcurrentTransactions),
            "{state:?}"
        );
    }
    let mut e = entry(Empty, 1);
    e.pending = Some(Ongoing);
    assert_eq!(
        e.init_producer_id(None, 1, 1, false, &mut no_pid()),
        Err(TxnError::ConcurrentTransactions)
    );
}

#[test]
fn given_exhausted_epoch_when_init_then_new_producer_id_epoch_zero() {
    let e = entry(CompleteCommit, i16::MAX - 1);
    let InitPlan::Write(t) = e
        .init_producer_id(None, 1, 1, false, &mut || Ok(77))
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.prev_producer_id),
        (77, 0, PID)
    );
}

#[test]
fn given_kip360_expected_epoch_when_init_then_bump_retry_or_fenced() {
    let e = entry(Empty, 4);
    // The producer's own current epoch: bumped.
    let InitPlan::Write(t) = e
        .init_producer_id(Some((PID, 4)), 1, 1, false, &mut no_pid())
        .unwrap()
    else {
        panic!()
    };
    assert_eq!((t.producer_epoch, t.last_producer_epoch), (5, 4));
    // Its retry (answer lost) gets the same epoch again.
    let again = TxnEntry::new(t.clone());
    let InitPlan::Write(t2) = again
        .init_producer_id(Some((PID, 4)), 1, 1, false, &mut no_pid())
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(t2.producer_epoch, 5);
    // An older epoch, or another producer id: fenced.
    assert_eq!(
        again.init_producer_id(Some((PID, 2)), 1, 1, false, &mut no_pid()),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        again.init_producer_id(Some((PID + 1, 5)), 1, 1, false, &mut no_pid()),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn given_add_partitions_when_states_vary_then_kafka_results() {
    let e = entry(Empty, 0);
    let t = e.add_partitions(PID, 0, &[tp(1)], 50).unwrap().unwrap();
    assert_eq!((t.state, t.start_ms), (Ongoing, 50));
    assert!(t.partitions.contains(&tp(1)));
    let ongoing = entry(Ongoing, 0);
    assert_eq!(ongoing.add_partitions(PID, 0, &[tp(0)], 60), Ok(None));
    let more = ongoing
        .add_partitions(PID, 0, &[tp(2)], 60)
        .unwrap()
        .unwrap();
    assert_eq!((more.partitions.len(), more.start_ms), (2, 1));
    for state in [PrepareCommit, PrepareAbort] {
        assert_eq!(
            entry(state, 0).add_partitions(PID, 0, &[tp(1)], 1),
            Err(TxnError::ConcurrentTransactions)
        );
    }
    assert!(matches!(
        entry(Dead, 0).add_partitions(PID, 0, &[tp(1)], 1),
        Err(TxnError::InvalidTxnState(_))
    ));
    assert_eq!(
        e.add_partitions(PID + 1, 0, &[tp(1)], 1),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        e.add_partitions(PID, 1, &[tp(1)], 1),
        Err(TxnError::ProducerFenced)
    );
    let mut pending = entry(Ongoing, 0);
    pending.pending = Some(PrepareCommit);
    assert_eq!(
        pending.add_partitions(PID, 0, &[tp(1)], 1),
        Err(TxnError::ConcurrentTransactions)
    );
    // Kafka 4.4 looks at a pending transition before the producer id and epoch.
    assert_eq!(
        pending.add_partitions(PID + 1, 5, &[tp(1)], 1),
        Err(TxnError::ConcurrentTransactions)
    );
}

#[test]
fn given_verify_only_when_checking_then_per_partition_membership() {
    let e = entry(Ongoing, 3);
    assert_eq!(e.verify(PID, 3, &[tp(0), tp(9)]), Ok(vec![true, false]));
    assert_eq!(e.verify(PID, 2, &[tp(0)]), Err(TxnError::ProducerFenced));
    assert_eq!(
        entry(CompleteCommit, 3).verify(PID, 3, &[tp(0)]),
        Ok(vec![false])
    );
    // Kafka 4.4: markers being written are retriable; a transition being persisted is not
    // looked at (the membership as it stands).
    assert_eq!(
        entry(PrepareCommit, 3).verify(PID, 3, &[tp(0)]),
        Err(TxnError::ConcurrentTransactions)
    );
    let mut pending = entry(Ongoing, 3);
    pending.pending = Some(Ongoing);
    assert_eq!(pending.verify(PID, 3, &[tp(0)]), Ok(vec![true]));
}

#[test]
fn given_end_txn_in_every_state_when_committing_or_aborting_then_kafka_results() {
    use EndPlan::Done;
    let invalid = |r: Result<EndPlan, TxnError>| matches!(r, Err(TxnError::InvalidTxnState(_)));
    for commit in [true, false] {
        let target = if commit { PrepareCommit } else { PrepareAbort };
        let plan = entry(Ongoing, 1)
            .end_txn(PID, 1, commit, false, 7, &mut no_pid())
            .unwrap();
        let EndPlan::Prepare(t) = plan else { panic!() };
        assert_eq!(
            (t.state, t.producer_epoch, t.last_update_ms),
            (target, 1, 7)
        );
        // Retries of a finished EndTxn succeed; the opposite outcome is invalid.
        let (same, other) = if commit {
            (CompleteCommit, CompleteAbort)
        } else {
            (CompleteAbort, CompleteCommit)
        };
        assert_eq!(
            entry(same, 1).end_txn(PID, 1, commit, false, 7, &mut no_pid()),
            Ok(Done)
        );
        assert!(invalid(entry(other, 1).end_txn(
            PID,
            1,
            commit,
            false,
            7,
            &mut no_pid()
        )));
        // While the same outcome's markers are written: retry later.
        assert_eq!(
            entry(target, 1).end_txn(PID, 1, commit, false, 7, &mut no_pid()),
            Err(TxnError::ConcurrentTransactions)
        );
        let opposite = if commit { PrepareAbort } else { PrepareCommit };
        assert!(invalid(entry(opposite, 1).end_txn(
            PID,
            1,
            commit,
            false,
            7,
            &mut no_pid()
        )));
        for s in [Empty, Dead, PrepareEpochFence] {
            assert!(
                invalid(entry(s, 1).end_txn(PID, 1, commit, false, 7, &mut no_pid())),
                "{s:?}"
            );
        }
    }
    assert_eq!(
        entry(Ongoing, 1).end_txn(PID + 1, 1, true, false, 7, &mut no_pid()),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        entry(Ongoing, 1).end_txn(PID, 0, true, false, 7, &mut no_pid()),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        entry(Ongoing, 1).end_txn(PID, 2, true, false, 7, &mut no_pid()),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn given_kip890_end_txn_when_committing_then_epoch_bumped_and_retry_accepted() {
    let EndPlan::Prepare(t) = entry(Ongoing, 1)
        .end_txn(PID, 1, true, true, 7, &mut no_pid())
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (t.state, t.producer_epoch, t.client_txn_version),
        (PrepareCommit, 2, 2)
    );
    // The retry carries the old epoch.
    let done = TxnEntry::new(TxnEntry::new(t.clone()).complete(8).unwrap());
    assert_eq!(
        done.end_txn(PID, 1, true, true, 9, &mut no_pid()),
        Ok(EndPlan::Done)
    );
    assert_eq!(
        TxnEntry::new(t.clone()).end_txn(PID, 1, true, true, 9, &mut no_pid()),
        Err(TxnError::ConcurrentTransactions)
    );
    // The next transaction's abort, at the bumped epoch, while the markers are written:
    // retriable, not an invalid transition.
    assert_eq!(
        TxnEntry::new(t).end_txn(PID, 2, false, true, 9, &mut no_pid()),
        Err(TxnError::ConcurrentTransactions)
    );
    // An empty transaction may be aborted.
    let EndPlan::Prepare(t) = entry(Empty, 3)
        .end_txn(PID, 3, false, true, 7, &mut no_pid())
        .unwrap()
    else {
        panic!()
    };
    assert_eq!((t.state, t.producer_epoch), (PrepareAbort, 4));
    // And right after a completed one, at the epoch its EndTxn gave.
    for done in [CompleteCommit, CompleteAbort] {
        let EndPlan::Prepare(t) = entry(done, 3)
            .end_txn(PID, 3, false, true, 7, &mut no_pid())
            .unwrap()
        else {
            panic!("{done:?}")
        };
        assert_eq!((t.state, t.producer_epoch), (PrepareAbort, 4));
    }
    // Without the bump (TV0/1) a second abort is the first one's retry.
    assert_eq!(
        entry(CompleteAbort, 3).end_txn(PID, 3, false, false, 7, &mut no_pid()),
        Ok(EndPlan::Done)
    );
}

#[test]
fn given_prepare_states_when_completing_then_complete_and_partitions_cleared() {
    let t = entry(PrepareCommit, 1).complete(5).unwrap();
    assert_eq!(t.state, CompleteCommit);
    assert!(t.partitions.is_empty());
    assert_eq!(
        entry(PrepareAbort, 1).complete(5).unwrap().state,
        CompleteAbort
    );
    assert!(entry(Ongoing, 1).complete(5).is_err());
}

#[test]
fn given_open_txn_past_its_timeout_when_ticking_then_timed_out_and_fenced() {
    let e = entry(Ongoing, 1); // started at 1, timeout 60 s
    assert!(!e.timed_out(60_001));
    assert!(e.timed_out(60_002));
    assert!(!entry(PrepareCommit, 1).timed_out(1 << 40));
    let t = e.fence_and_abort(60_002, false, &mut no_pid()).unwrap();
    assert_eq!((t.state, t.producer_epoch), (PrepareAbort, 2));
    assert!(entry(Empty, 1)
        .fence_and_abort(1, false, &mut no_pid())
        .is_err());
}

const MAX: i16 = i16::MAX;

fn prepared(plan: Result<EndPlan, TxnError>) -> TxnMetadata {
    match plan {
        Ok(EndPlan::Prepare(t)) => t,
        other => panic!("expected a Prepare state: {other:?}"),
    }
}

#[test]
fn given_exhausted_epoch_when_tv2_end_txn_then_bump_to_max_and_rotation_at_completion() {
    let t = prepared(entry(Ongoing, MAX - 1).end_txn(PID, MAX - 1, true, true, 7, &mut || Ok(77)));
    // The Prepare state (and its markers) keep the old id at Short.MAX_VALUE...
    assert_eq!(
        (
            t.state,
            t.producer_id,
            t.producer_epoch,
            t.last_producer_epoch
        ),
        (PrepareCommit, PID, MAX, MAX - 1)
    );
    assert_eq!((t.next_producer_id, t.client_txn_version), (77, 2));
    // ...and the client is answered with the new id at epoch 0, as Kafka's EndTxn is.
    assert_eq!(t.ids_after_completion(), (77, 0));
    let done = TxnEntry::new(t.clone()).complete(8).unwrap();
    assert_eq!(
        (done.state, done.producer_id, done.producer_epoch),
        (CompleteCommit, 77, 0)
    );
    assert_eq!(
        (
            done.prev_producer_id,
            done.next_producer_id,
            done.last_producer_epoch
        ),
        (PID, -1, MAX - 1)
    );
    // One below the last epoch bumps without a rotation; TV0/1 never bump.
    let t = prepared(entry(Ongoing, MAX - 2).end_txn(PID, MAX - 2, false, true, 7, &mut no_pid()));
    assert_eq!((t.producer_epoch, t.next_producer_id), (MAX - 1, -1));
    let t = prepared(entry(Ongoing, MAX - 1).end_txn(PID, MAX - 1, true, false, 7, &mut no_pid()));
    assert_eq!((t.producer_epoch, t.next_producer_id), (MAX - 1, -1));
    // No producer id to rotate to: the allocation's error, nothing prepared.
    let mut exhausted =
        || -> Result<i64, TxnError> { Err(TxnError::ProducerIds("none left".into())) };
    assert_eq!(
        entry(Ongoing, MAX - 1).end_txn(PID, MAX - 1, true, true, 7, &mut exhausted),
        Err(TxnError::ProducerIds("none left".into()))
    );
}

#[test]
fn given_rotated_producer_id_when_old_id_retries_end_txn_then_kafkas_answers() {
    let prepare =
        prepared(entry(Ongoing, MAX - 1).end_txn(PID, MAX - 1, true, true, 7, &mut || Ok(77)));
    let during = TxnEntry::new(prepare.clone());
    // While the markers are written the retry waits, and so does the new id's next
    // transaction (as after an ordinary bump).
    assert_eq!(
        during.end_txn(PID, MAX - 1, true, true, 9, &mut no_pid()),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        during.end_txn(77, 0, false, true, 9, &mut no_pid()),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        during.add_partitions(77, 0, &[tp(1)], 9),
        Err(TxnError::ConcurrentTransactions)
    );
    // Completed: the old id's retry is Kafka's `retryOnOverflow` — done for the same
    // outcome (the coordinator answers with the new id), invalid for the other.
    let done = TxnEntry::new(during.complete(10).unwrap());
    assert_eq!(
        done.end_txn(PID, MAX - 1, true, true, 11, &mut no_pid()),
        Ok(EndPlan::Done)
    );
    assert!(matches!(
        done.end_txn(PID, MAX - 1, false, true, 11, &mut no_pid()),
        Err(TxnError::InvalidTxnState(_))
    ));
    // The old id at any other epoch, or without TV2, is no longer this transactional id's.
    for (epoch, bump) in [(MAX - 2, true), (MAX - 1, false)] {
        assert_eq!(
            done.end_txn(PID, epoch, true, bump, 11, &mut no_pid()),
            Err(TxnError::InvalidProducerIdMapping)
        );
    }
    // Once the new id moved on, the old one is forgotten (the previous id is the current
    // one after every other transition, as in Kafka).
    let next = done.add_partitions(77, 0, &[tp(1)], 12).unwrap().unwrap();
    assert_eq!(next.prev_producer_id, 77);
    assert_eq!(
        TxnEntry::new(next).end_txn(PID, MAX - 1, true, true, 13, &mut no_pid()),
        Err(TxnError::InvalidProducerIdMapping)
    );
    // After InitProducerId's rotation (state Empty) the old id's claim is fenced.
    let mut rotated = entry(Empty, 0);
    rotated.meta.producer_id = 77;
    rotated.meta.prev_producer_id = PID;
    assert_eq!(
        rotated.end_txn(PID, MAX - 1, false, true, 13, &mut no_pid()),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn given_exhausted_epoch_when_tv2_aborts_an_empty_transaction_then_rotated_too() {
    let t =
        prepared(
            entry(CompleteCommit, MAX - 1).end_txn(PID, MAX - 1, false, true, 7, &mut || Ok(77)),
        );
    assert_eq!(
        (t.state, t.producer_epoch, t.next_producer_id, t.start_ms),
        (PrepareAbort, MAX, 77, 7)
    );
    assert_eq!(t.ids_after_completion(), (77, 0));
}

#[test]
fn given_tv2_cluster_when_fencing_an_open_transaction_then_one_bump_and_rotation_when_exhausted() {
    // Kafka 4.4 aborts a fenced transaction with the server's transaction version: TV2
    // bumps once, remembers the epoch it fenced, and rotates an exhausted id.
    let t = entry(Ongoing, 5)
        .fence_and_abort(9, true, &mut no_pid())
        .unwrap();
    assert_eq!(
        (
            t.state,
            t.producer_epoch,
            t.last_producer_epoch,
            t.client_txn_version
        ),
        (PrepareAbort, 6, 5, 2)
    );
    let plan = entry(Ongoing, MAX - 1)
        .init_producer_id(None, 1000, 9, true, &mut || Ok(77))
        .unwrap();
    let InitPlan::FenceAndAbort(t) = plan else {
        panic!("{plan:?}")
    };
    assert_eq!((t.producer_epoch, t.next_producer_id), (MAX, 77));
    let done = TxnEntry::new(TxnEntry::new(t).complete(10).unwrap());
    assert_eq!((done.meta.producer_id, done.meta.producer_epoch), (77, 0));
    // The fenced producer's retried InitProducerId then bumps the new id.
    let InitPlan::Write(t) = done
        .init_producer_id(None, 1000, 11, true, &mut no_pid())
        .unwrap()
    else {
        panic!()
    };
    assert_eq!((t.producer_id, t.producer_epoch), (77, 1));
    // The classic fence (TV0/1) at the last epoch keeps the id; InitProducerId rotates it.
    let t = entry(Ongoing, MAX - 1)
        .fence_and_abort(9, false, &mut no_pid())
        .unwrap();
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.next_producer_id),
        (PID, MAX, -1)
    );
}
