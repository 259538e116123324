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

    /// Kafka's `prepareTransitionTo`: every transition records the producer id it leaves as
    /// the previous one, so the previous id differs from the current one only right after a
    /// rotation, which is how a retry across the rotation is recognised.
    fn to(&self, state: TxnState, now: i64) -> TxnMetadata {
        let mut t = self.clone();
        t.state = state;
        t.last_update_ms = now;
        t.prev_producer_id = self.producer_id;
        t
    }

    /// The producer id and epoch once this transaction completes, which is what EndTxn v5+
    /// answers: a transaction whose bump exhausted the epochs hands over to its next producer
    /// id at epoch 0 (Kafka's `prepareComplete`).
    pub fn ids_after_completion(&self) -> (i64, i16) {
        if self.client_txn_version >= 2 && self.next_producer_id != -1 {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
        }
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
    /// producer recovering after an error; `new_pid` allocates a producer id; `tv2` is whether
    /// the cluster finalized transaction.version 2, which decides how an open transaction in
    /// the way is aborted (`fence_and_abort`).
    pub fn init_producer_id(
        &self,
        expected: Option<(i64, i16)>,
        timeout_ms: i32,
        now: i64,
        tv2: bool,
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
            TxnState::Ongoing => self
                .fence_and_abort(now, tv2, new_pid)
                .map(InitPlan::FenceAndAbort),
            TxnState::Dead | TxnState::PrepareEpochFence => Err(TxnError::ConcurrentTransactions),
        }
    }

    /// Kafka's `prepareFenceProducerEpoch` followed by the abort: the open transaction is
    /// aborted under a bumped epoch, so its producer is fenced from then on. Kafka aborts it
    /// with the server's transaction version: with `tv2` that is a TV2 abort (one bump, the
    /// producer id rotated when the epoch was exhausted), else the classic fence.
    pub fn fence_and_abort(
        &self,
        now: i64,
        tv2: bool,
        new_pid: &mut dyn FnMut() -> Result<i64, TxnError>,
    ) -> Result<TxnMetadata, TxnError> {
        let m = &self.meta;
        if m.state != TxnState::Ongoing {
            return Err(TxnError::InvalidTxnState(format!(
                "cannot fence a transaction in state {}",
                m.state.name()
            )));
        }
        if tv2 {
            return self.tv2_prepare(TxnState::PrepareAbort, now, new_pid);
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

    /// The producer id a TV2 bump past the last epoch rotated to, at its epoch 0, while the
    /// markers of the transaction that rotated it are still written: the producer's next
    /// transaction, retriable as the same window is after an ordinary bump (`end_txn`).
    fn awaits_rotation(&self, producer_id: i64, epoch: i16) -> bool {
        let m = &self.meta;
        m.next_producer_id != -1
            && producer_id == m.next_producer_id
            && epoch == 0
            && matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// The producer checks of AddPartitionsToTxn / AddOffsetsToTxn in Kafka 4.4's order: a
    /// transition being written answers CONCURRENT_TRANSACTIONS before the id and epoch are
    /// looked at.
    fn check_producer(&self, producer_id: i64, epoch: i16) -> Result<(), TxnError> {
        if self.pending.is_some() || self.awaits_rotation(producer_id, epoch) {
            return Err(TxnError::ConcurrentTransactions);
        }
        if self.meta.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if self.meta.producer_epoch != epoch {
            return Err(TxnError::ProducerFenced);
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

    /// KIP-890 verify-only AddPartitionsToTxn (`handleVerifyPartitionsInTransaction`): whether
    /// each partition is in the transaction. Kafka 4.4 checks no pending transition here, and
    /// a transaction whose markers are being written is retriable.
    pub fn verify(
        &self,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<bool>, TxnError> {
        let m = &self.meta;
        if self.awaits_rotation(producer_id, epoch) {
            return Err(TxnError::ConcurrentTransactions);
        }
        if m.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if m.producer_epoch != epoch {
            return Err(TxnError::ProducerFenced);
        }
        if matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(partitions
            .iter()
            .map(|p| self.meta.state == TxnState::Ongoing && self.meta.partitions.contains(p))
            .collect())
    }

    /// KIP-890's Prepare state (Kafka's `prepareAbortOrCommit` with TV2): the epoch is bumped
    /// with every transaction; when the current one is exhausted the bump reaches
    /// `Short.MAX_VALUE` and a new producer id is allocated, which the producer continues with
    /// at epoch 0 once the transaction completes (`complete`). Kafka lets an abort at
    /// `Short.MAX_VALUE` through without a bump.
    fn tv2_prepare(
        &self,
        state: TxnState,
        now: i64,
        new_pid: &mut dyn FnMut() -> Result<i64, TxnError>,
    ) -> Result<TxnMetadata, TxnError> {
        let m = &self.meta;
        let mut t = m.to(state, now);
        if m.producer_epoch < i16::MAX {
            t.producer_epoch = m.producer_epoch + 1;
        } else if state != TxnState::PrepareAbort {
            return Err(TxnError::InvalidTxnState(
                "the producer epoch cannot be bumped".into(),
            ));
        }
        t.last_producer_epoch = m.producer_epoch;
        t.client_txn_version = 2;
        if epoch_exhausted(m.producer_epoch) {
            t.next_producer_id = new_pid()?;
        }
        Ok(t)
    }

    /// EndTxn (`handleEndTransaction`). `bump` is KIP-890 part 2 (EndTxn v5+): the epoch is
    /// bumped with every transaction, and a retry carries the epoch before the bump; `new_pid`
    /// allocates the producer id a bump past the last epoch rotates to.
    pub fn end_txn(
        &self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        bump: bool,
        now: i64,
        new_pid: &mut dyn FnMut() -> Result<i64, TxnError>,
    ) -> Result<EndPlan, TxnError> {
        let m = &self.meta;
        let (prepare, complete) = if commit {
            (TxnState::PrepareCommit, TxnState::CompleteCommit)
        } else {
            (TxnState::PrepareAbort, TxnState::CompleteAbort)
        };
        let wrong = || {
            Err(TxnError::InvalidTxnState(format!(
                "cannot {} a transaction in state {}",
                if commit { "commit" } else { "abort" },
                m.state.name()
            )))
        };
        // TV2: the retry of an EndTxn whose bump rotated the producer id, from a producer that
        // never heard the answer: it carries the old id and its last epoch (Kafka's
        // `retryOnOverflow`). Only the Complete state the rotation left accepts it.
        let retry_on_overflow = bump
            && producer_id == m.prev_producer_id
            && epoch == i16::MAX - 1
            && m.producer_epoch == 0;
        if retry_on_overflow {
            if !matches!(m.state, TxnState::CompleteCommit | TxnState::CompleteAbort) {
                return Err(TxnError::ProducerFenced);
            }
            if self.pending.is_some() {
                return Err(TxnError::ConcurrentTransactions);
            }
            return if m.state == complete {
                Ok(EndPlan::Done)
            } else {
                wrong()
            };
        }
        if bump && self.awaits_rotation(producer_id, epoch) {
            return Err(TxnError::ConcurrentTransactions);
        }
        if m.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
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
        match m.state {
            // A client never holds `Short.MAX_VALUE` (the bump to it rotates the id).
            TxnState::Ongoing if bump && m.producer_epoch == i16::MAX => wrong(),
            TxnState::Ongoing if bump => self
                .tv2_prepare(prepare, now, new_pid)
                .map(EndPlan::Prepare),
            TxnState::Ongoing => Ok(EndPlan::Prepare(m.to(prepare, now))),
            // A retry of the EndTxn that completed it (a TV2 retry carries the old epoch).
            s if s == complete && (!bump || retry_after_bump) => Ok(EndPlan::Done),
            // KIP-890: a TV2 client may abort a transaction that added nothing, also right
            // after the last one completed (Kafka's CompleteCommit/CompleteAbort arms).
            // With nothing added its start is now (Kafka's `noPartitionAdded`).
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                if bump && !commit && !retry_after_bump && m.producer_epoch < i16::MAX =>
            {
                let mut t = self.tv2_prepare(prepare, now, new_pid)?;
                t.start_ms = now;
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
        // The rotation a TV2 bump past the last epoch prepared: the new id, epoch 0. The last
        // epoch stays the one the client last held (Kafka keeps `lastProducerEpoch`).
        (t.producer_id, t.producer_epoch) = m.ids_after_completion();
        t.next_producer_id = -1;
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
mod tests;
