//! The transaction state machine of one transactional id: Kafka's `TransactionMetadata` and
//! the decisions of `TransactionCoordinator` (which transition a request causes, or which error
//! it gets), pure functions of the current state so every transition is unit tested without a
//! runtime. The coordinator (`coordinator.rs`) persists a target state, then installs it.

use std::collections::BTreeSet;

use super::TxnError;

/// Kafka's `TransactionState`, with its ids as written in `TransactionLogValue.TransactionStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum TxnState {
    Empty = 0,
    Ongoing = 1,
    PrepareCommit = 2,
    PrepareAbort = 3,
    CompleteCommit = 4,
    CompleteAbort = 5,
    Dead = 6,
    PrepareEpochFence = 7,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    pub fn from_id(id: i8) -> Option<TxnState> {
        TxnState::ALL.get(usize::try_from(id).ok()?).copied()
    }

    /// The name DescribeTransactions and ListTransactions report (Kafka's `stateName`).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Kafka's `validPreviousStates`: the states a transaction may enter this one from.
    /// (PrepareAbort from Empty and the Complete states is KIP-890's abort of an empty
    /// transaction by a TV2 client.)
    fn valid_previous(self) -> &'static [TxnState] {
        use TxnState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteCommit, CompleteAbort],
            PrepareEpochFence => &[Ongoing],
        }
    }

    pub fn can_follow(self, previous: TxnState) -> bool {
        self.valid_previous().contains(&previous)
    }
}

/// Kafka: an epoch this close to `Short.MAX_VALUE` cannot be bumped; a new producer id is due.
pub fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// What the transaction log holds for one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    /// The producer id before the last rotation (KIP-360 retries), -1 when none.
    pub prev_producer_id: i64,
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump, so a retried InitProducerId gets the same answer; not
    /// persisted (as in Kafka, whose log value has no such field).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    pub start_ms: i64,
    pub last_update_ms: i64,
    pub client_txn_version: i16,
}

impl TxnMetadata {
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now: i64) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id,
            prev_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: -1,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now,
            client_txn_version: 0,
        }
    }

    fn to(&self, state: TxnState, now: i64) -> TxnMetadata {
        let mut t = self.clone();
        t.state = state;
        t.last_update_ms = now;
        t
    }
}

/// What InitProducerId must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitPlan {
    /// Persist this (state Empty) and answer with its producer id and epoch.
    Write(TxnMetadata),
    /// An open transaction is in the way: persist this PrepareAbort with a bumped epoch (which
    /// fences the old producer), complete the abort, and answer CONCURRENT_TRANSACTIONS so the
    /// client retries and gets the epoch after it.
    FenceAndAbort(TxnMetadata),
}

/// What EndTxn must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndPlan {
    /// A retry of an EndTxn that already completed: answer success.
    Done,
    /// Persist this Prepare state, answer, then write the markers and complete.
    Prepare(TxnMetadata),
}

/// A transactional id's state plus the transition being persisted, if any (Kafka's
/// `pendingState`): while one is in flight other requests get CONCURRENT_TRANSACTIONS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnEntry {
    pub meta: TxnMetadata,
    pub pending: Option<TxnState>,
}

impl TxnEntry {
    pub fn new(meta: TxnMetadata) -> Self {
        TxnEntry {
            meta,
            pending: None,
        }
    }

    /// InitProducerId for an existing transactional id (`handleInitProducerId` and
    /// `prepareInitProducerIdTransit`). `expected` is KIP-360's (producer id, epoch) from a
    /// producer recovering after an error; `new_pid` allocates a producer id.
    pub fn init_producer_id(
        &self,
        expected: Option<(i64, i16)>,
        timeout_ms: i32,
        now: i64,
        new_pid: &mut dyn FnMut() -> Result<i64, TxnError>,
    ) -> Result<InitPlan, TxnError> {
        let m = &self.meta;
        if let Some((pid, epoch)) = expected {
            let valid = m.producer_epoch == -1
                || pid == m.producer_id
                || (pid == m.prev_producer_id && epoch_exhausted(epoch));
            if !valid {
                return Err(TxnError::ProducerFenced);
            }
        }
        if self.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        match m.state {
            TxnState::PrepareAbort | TxnState::PrepareCommit => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Empty | TxnState::CompleteAbort | TxnState::CompleteCommit => {
                let mut t = m.to(TxnState::Empty, now);
                t.timeout_ms = timeout_ms;
                t.partitions.clear();
                t.start_ms = -1;
                if epoch_exhausted(m.producer_epoch)
                    && expected.is_none_or(|(_, e)| e == m.producer_epoch)
                {
                    // Kafka's prepareProducerIdRotation.
                    t.prev_producer_id = m.producer_id;
                    t.producer_id = new_pid()?;
                    t.producer_epoch = 0;
                    t.last_producer_epoch = if expected.is_some() {
                        m.producer_epoch
                    } else {
                        -1
                    };
                    return Ok(InitPlan::Write(t));
                }
                // Kafka's prepareIncrementProducerEpoch.
                let bumped = m.producer_epoch + 1;
                let (epoch, last) = match expected {
                    None => (bumped, -1),
                    Some((_, e)) if m.producer_epoch == -1 || e == m.producer_epoch => {
                        (bumped, m.producer_epoch)
                    }
                    // A retry of a bump whose answer was lost: the same answer again.
                    Some((_, e)) if e == m.last_producer_epoch => {
                        (m.producer_epoch, m.last_producer_epoch)
                    }
                    Some(_) => return Err(TxnError::ProducerFenced),
                };
                t.producer_epoch = epoch;
                t.last_producer_epoch = last;
                Ok(InitPlan::Write(t))
            }
            TxnState::Ongoing => self.fence_and_abort(now).map(InitPlan::FenceAndAbort),
            TxnState::Dead | TxnState::PrepareEpochFence => Err(TxnError::ConcurrentTransactions),
        }
    }

    /// Kafka's `prepareFenceProducerEpoch` followed by the abort: the open transaction is
    /// aborted under a bumped epoch, so its producer is fenced from then on.
    pub fn fence_and_abort(&self, now: i64) -> Result<TxnMetadata, TxnError> {
        let m = &self.meta;
        if m.state != TxnState::Ongoing {
            return Err(TxnError::InvalidTxnState(format!(
                "cannot fence a transaction in state {}",
                m.state.name()
            )));
        }
        if m.producer_epoch == i16::MAX {
            return Err(TxnError::InvalidTxnState(
                "the producer epoch cannot be bumped".into(),
            ));
        }
        let mut t = m.to(TxnState::PrepareAbort, now);
        t.producer_epoch = m.producer_epoch + 1;
        t.last_producer_epoch = -1;
        Ok(t)
    }

    fn check_producer(&self, producer_id: i64, epoch: i16) -> Result<(), TxnError> {
        if self.meta.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if self.meta.producer_epoch != epoch {
            return Err(TxnError::ProducerFenced);
        }
        if self.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(())
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn (`handleAddPartitionsToTransaction`). `Ok(None)`:
    /// every partition is in the transaction already, nothing to persist.
    pub fn add_partitions(
        &self,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
        now: i64,
    ) -> Result<Option<TxnMetadata>, TxnError> {
        self.check_producer(producer_id, epoch)?;
        let m = &self.meta;
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Ongoing if partitions.iter().all(|p| m.partitions.contains(p)) => Ok(None),
            TxnState::Ongoing
            | TxnState::Empty
            | TxnState::CompleteCommit
            | TxnState::CompleteAbort => {
                let mut t = m.to(TxnState::Ongoing, now);
                if m.state != TxnState::Ongoing {
                    t.start_ms = now;
                }
                t.partitions.extend(partitions.iter().cloned());
                Ok(Some(t))
            }
            TxnState::Dead | TxnState::PrepareEpochFence => Err(TxnError::InvalidTxnState(
                format!("cannot add partitions in state {}", m.state.name()),
            )),
        }
    }

    /// KIP-890 verify-only AddPartitionsToTxn: whether each partition is in the transaction.
    pub fn verify(
        &self,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<bool>, TxnError> {
        self.check_producer(producer_id, epoch)?;
        Ok(partitions
            .iter()
            .map(|p| self.meta.state == TxnState::Ongoing && self.meta.partitions.contains(p))
            .collect())
    }

    /// EndTxn (`handleEndTransaction`). `bump` is KIP-890 part 2 (EndTxn v5+): the epoch is
    /// bumped with every transaction, and a retry carries the epoch before the bump.
    pub fn end_txn(
        &self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        bump: bool,
        now: i64,
    ) -> Result<EndPlan, TxnError> {
        let m = &self.meta;
        if m.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        let (prepare, complete) = if commit {
            (TxnState::PrepareCommit, TxnState::CompleteCommit)
        } else {
            (TxnState::PrepareAbort, TxnState::CompleteAbort)
        };
        let retry_after_bump = bump
            && m.producer_epoch > 0
            && epoch == m.producer_epoch - 1
            && (m.state == prepare || m.state == complete);
        if epoch != m.producer_epoch && !retry_after_bump {
            return Err(TxnError::ProducerFenced);
        }
        if self.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        let wrong = || {
            Err(TxnError::InvalidTxnState(format!(
                "cannot {} a transaction in state {}",
                if commit { "commit" } else { "abort" },
                m.state.name()
            )))
        };
        match m.state {
            TxnState::Ongoing => {
                let mut t = m.to(prepare, now);
                if bump {
                    if m.producer_epoch == i16::MAX {
                        return wrong();
                    }
                    t.producer_epoch = m.producer_epoch + 1;
                    t.last_producer_epoch = m.producer_epoch;
                    t.client_txn_version = 2;
                }
                Ok(EndPlan::Prepare(t))
            }
            // A retry of the EndTxn that completed it (a TV2 retry carries the old epoch).
            s if s == complete && (!bump || retry_after_bump) => Ok(EndPlan::Done),
            // KIP-890: a TV2 client may abort a transaction that added nothing, also right
            // after the last one completed (Kafka's CompleteCommit/CompleteAbort arms).
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                if bump && !commit && !retry_after_bump && m.producer_epoch < i16::MAX =>
            {
                let mut t = m.to(prepare, now);
                t.producer_epoch = m.producer_epoch + 1;
                t.last_producer_epoch = m.producer_epoch;
                t.client_txn_version = 2;
                Ok(EndPlan::Prepare(t))
            }
            s if s == prepare => Err(TxnError::ConcurrentTransactions),
            // TV2: the last transaction's markers are still being written and this request,
            // at the epoch its EndTxn bumped to, is the next transaction's (an abort of one
            // that has added nothing yet): it can be served once they are, so it is retriable.
            // Kafka answers INVALID_TXN_STATE here, a window its page-cache markers keep
            // short and Strom's fsync'd ones do not.
            TxnState::PrepareCommit | TxnState::PrepareAbort
                if bump && m.client_txn_version >= 2 && epoch == m.producer_epoch =>
            {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => wrong(),
        }
    }

    /// The Complete state after the markers of a Prepare state are written.
    pub fn complete(&self, now: i64) -> Result<TxnMetadata, TxnError> {
        let m = &self.meta;
        let state = match m.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            s => {
                return Err(TxnError::InvalidTxnState(format!(
                    "nothing to complete in state {}",
                    s.name()
                )))
            }
        };
        let mut t = m.to(state, now);
        t.partitions.clear();
        Ok(t)
    }

    /// Open longer than its timeout and not already changing (`timedOutTransactions`).
    pub fn timed_out(&self, now: i64) -> bool {
        self.meta.state == TxnState::Ongoing
            && self.pending.is_none()
            && self
                .meta
                .start_ms
                .saturating_add(self.meta.timeout_ms as i64)
                < now
    }
}

#[cfg(test)]
mod tests {
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
            let InitPlan::Write(t) = e.init_producer_id(None, 5000, 9, &mut no_pid()).unwrap()
            else {
                panic!("expected a write")
            };
            assert_eq!((t.producer_id, t.producer_epoch, t.state), (PID, 5, Empty));
            assert_eq!((t.timeout_ms, t.last_update_ms), (5000, 9));
            assert!(TxnState::Empty.can_follow(state));
        }
        // A brand new id (epoch -1) gets epoch 0.
        let e = entry(Empty, -1);
        let InitPlan::Write(t) = e.init_producer_id(None, 1, 1, &mut no_pid()).unwrap() else {
            panic!()
        };
        assert_eq!(t.producer_epoch, 0);
    }

    #[test]
    fn given_ongoing_txn_when_init_then_fenced_abort_with_bumped_epoch() {
        let e = entry(Ongoing, 2);
        let plan = e.init_producer_id(None, 1000, 5, &mut no_pid()).unwrap();
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
                e.init_producer_id(None, 1, 1, &mut no_pid()),
                Err(TxnError::ConcurrentTransactions),
                "{state:?}"
            );
        }
        let mut e = entry(Empty, 1);
        e.pending = Some(Ongoing);
        assert_eq!(
            e.init_producer_id(None, 1, 1, &mut no_pid()),
            Err(TxnError::ConcurrentTransactions)
        );
    }

    #[test]
    fn given_exhausted_epoch_when_init_then_new_producer_id_epoch_zero() {
        let e = entry(CompleteCommit, i16::MAX - 1);
        let InitPlan::Write(t) = e.init_producer_id(None, 1, 1, &mut || Ok(77)).unwrap() else {
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
            .init_producer_id(Some((PID, 4)), 1, 1, &mut no_pid())
            .unwrap()
        else {
            panic!()
        };
        assert_eq!((t.producer_epoch, t.last_producer_epoch), (5, 4));
        // Its retry (answer lost) gets the same epoch again.
        let again = TxnEntry::new(t.clone());
        let InitPlan::Write(t2) = again
            .init_producer_id(Some((PID, 4)), 1, 1, &mut no_pid())
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(t2.producer_epoch, 5);
        // An older epoch, or another producer id: fenced.
        assert_eq!(
            again.init_producer_id(Some((PID, 2)), 1, 1, &mut no_pid()),
            Err(TxnError::ProducerFenced)
        );
        assert_eq!(
            again.init_producer_id(Some((PID + 1, 5)), 1, 1, &mut no_pid()),
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
    }

    #[test]
    fn given_end_txn_in_every_state_when_committing_or_aborting_then_kafka_results() {
        use EndPlan::Done;
        let invalid = |r: Result<EndPlan, TxnError>| matches!(r, Err(TxnError::InvalidTxnState(_)));
        for commit in [true, false] {
            let target = if commit { PrepareCommit } else { PrepareAbort };
            let plan = entry(Ongoing, 1).end_txn(PID, 1, commit, false, 7).unwrap();
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
            assert_eq!(entry(same, 1).end_txn(PID, 1, commit, false, 7), Ok(Done));
            assert!(invalid(entry(other, 1).end_txn(PID, 1, commit, false, 7)));
            // While the same outcome's markers are written: retry later.
            assert_eq!(
                entry(target, 1).end_txn(PID, 1, commit, false, 7),
                Err(TxnError::ConcurrentTransactions)
            );
            let opposite = if commit { PrepareAbort } else { PrepareCommit };
            assert!(invalid(
                entry(opposite, 1).end_txn(PID, 1, commit, false, 7)
            ));
            for s in [Empty, Dead, PrepareEpochFence] {
                assert!(
                    invalid(entry(s, 1).end_txn(PID, 1, commit, false, 7)),
                    "{s:?}"
                );
            }
        }
        assert_eq!(
            entry(Ongoing, 1).end_txn(PID + 1, 1, true, false, 7),
            Err(TxnError::InvalidProducerIdMapping)
        );
        assert_eq!(
            entry(Ongoing, 1).end_txn(PID, 0, true, false, 7),
            Err(TxnError::ProducerFenced)
        );
        assert_eq!(
            entry(Ongoing, 1).end_txn(PID, 2, true, false, 7),
            Err(TxnError::ProducerFenced)
        );
    }

    #[test]
    fn given_kip890_end_txn_when_committing_then_epoch_bumped_and_retry_accepted() {
        let EndPlan::Prepare(t) = entry(Ongoing, 1).end_txn(PID, 1, true, true, 7).unwrap() else {
            panic!()
        };
        assert_eq!(
            (t.state, t.producer_epoch, t.client_txn_version),
            (PrepareCommit, 2, 2)
        );
        // The retry carries the old epoch.
        let done = TxnEntry::new(TxnEntry::new(t.clone()).complete(8).unwrap());
        assert_eq!(done.end_txn(PID, 1, true, true, 9), Ok(EndPlan::Done));
        assert_eq!(
            TxnEntry::new(t.clone()).end_txn(PID, 1, true, true, 9),
            Err(TxnError::ConcurrentTransactions)
        );
        // The next transaction's abort, at the bumped epoch, while the markers are written:
        // retriable, not an invalid transition.
        assert_eq!(
            TxnEntry::new(t).end_txn(PID, 2, false, true, 9),
            Err(TxnError::ConcurrentTransactions)
        );
        // An empty transaction may be aborted.
        let EndPlan::Prepare(t) = entry(Empty, 3).end_txn(PID, 3, false, true, 7).unwrap() else {
            panic!()
        };
        assert_eq!((t.state, t.producer_epoch), (PrepareAbort, 4));
        // And right after a completed one, at the epoch its EndTxn gave.
        for done in [CompleteCommit, CompleteAbort] {
            let EndPlan::Prepare(t) = entry(done, 3).end_txn(PID, 3, false, true, 7).unwrap()
            else {
                panic!("{done:?}")
            };
            assert_eq!((t.state, t.producer_epoch), (PrepareAbort, 4));
        }
        // Without the bump (TV0/1) a second abort is the first one's retry.
        assert_eq!(
            entry(CompleteAbort, 3).end_txn(PID, 3, false, false, 7),
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
        let t = e.fence_and_abort(60_002).unwrap();
        assert_eq!((t.state, t.producer_epoch), (PrepareAbort, 2));
        assert!(entry(Empty, 1).fence_and_abort(1).is_err());
    }
}
