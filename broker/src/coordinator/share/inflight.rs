//! The in-flight records of one share partition (Kafka's `SharePartition`): the start offset
//! (SPSO), the end offset (SPEO) and, for every offset in between, its delivery state, count
//! and acquisition lock. Pure: time comes in as an argument, so every transition is unit
//! and property tested without a runtime; `store` runs it on the data partition's shard and
//! persists what `snapshot` returns.

use std::collections::BTreeMap;

/// Kafka's `RecordState` (the persisted codes of `ShareSnapshotValue.DeliveryState`:
/// 0 available, 2 acknowledged, 4 archived; 1 acquired is never persisted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    Available,
    Acquired,
    Acknowledged,
    Archived,
}

impl RecordState {
    pub fn code(self) -> i8 {
        match self {
            RecordState::Available => 0,
            RecordState::Acquired => 1,
            RecordState::Acknowledged => 2,
            RecordState::Archived => 4,
        }
    }

    fn done(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// Kafka's `AcknowledgeType`; 0 is a gap (an offset the client saw no record at), 4 a renewal
/// of the lock (KIP-1222: the record stays acquired, the lock starts again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckType {
    Gap,
    Accept,
    Release,
    Reject,
    Renew,
}

impl AckType {
    pub fn from_code(code: i8) -> Option<AckType> {
        match code {
            0 => Some(AckType::Gap),
            1 => Some(AckType::Accept),
            2 => Some(AckType::Release),
            3 => Some(AckType::Reject),
            4 => Some(AckType::Renew),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct InFlight {
    state: RecordState,
    delivery_count: i16,
    /// Holder and lock deadline (ms) while ACQUIRED.
    member: Option<String>,
    deadline_ms: i64,
}

/// What bounds a share partition (group configs, Kafka's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub lock_ms: i64,
    pub delivery_limit: i16,
    pub max_locks: i64,
    /// `share.renew.acknowledge.enable`: RENEW is accepted.
    pub renew: bool,
    /// A dead-letter topic is configured (KIP-1191, `share.version` 2): archived records
    /// that were rejected or ran out of deliveries are kept in `take_dead` for it.
    pub dlq: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            lock_ms: 30_000,
            delivery_limit: 5,
            max_locks: 2_000,
            renew: true,
            dlq: false,
        }
    }
}

/// An acknowledgement the partition refused; the handler answers its Kafka code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// Kafka's INVALID_RECORD_STATE: an offset not acquired by this member (or its lock ran out).
    #[error("offsets {0}..={1} are not acquired by this member")]
    InvalidRecordState(i64, i64),
    /// Kafka's INVALID_REQUEST: a malformed batch.
    #[error("{0}")]
    InvalidRequest(String),
    /// Kafka's INVALID_RECORD_STATE too, with Kafka's message: the group turned RENEW off.
    #[error("Renewing acquisition locks is not enabled for the group.")]
    RenewDisabled,
}

/// One persisted batch: first offset, last offset, state code, delivery count.
pub type StateBatch = (i64, i64, i8, i16);

/// A record archived for the dead-letter topic: Kafka's two causes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dead {
    pub offset: i64,
    pub delivery_count: i16,
    /// REJECTed by a member (else its delivery count reached the limit).
    pub rejected: bool,
}

#[derive(Debug, Clone, Default)]
pub struct SharePartitionState {
    /// SPSO: everything below is done.
    pub start: i64,
    /// SPEO: the first offset never acquired.
    pub end: i64,
    records: BTreeMap<i64, InFlight>,
    /// Archived since the last `take_dead`, with `Limits::dlq` on (at most the window).
    dead: Vec<Dead>,
}

impl SharePartitionState {
    pub fn new(start: i64) -> SharePartitionState {
        SharePartitionState {
            start,
            end: start,
            records: BTreeMap::new(),
            dead: Vec::new(),
        }
    }

    /// The state read back from a snapshot (ACQUIRED never is: it was written as AVAILABLE).
    pub fn restore(start: i64, batches: &[StateBatch]) -> SharePartitionState {
        let mut s = SharePartitionState::new(start);
        for &(first, last, code, count) in batches {
            let state = match code {
                2 => RecordState::Acknowledged,
                4 => RecordState::Archived,
                _ => RecordState::Available,
            };
            for o in first.max(start)..=last {
                s.records.insert(
                    o,
                    InFlight {
                        state,
                        delivery_count: count,
                        member: None,
                        deadline_ms: 0,
                    },
                );
            }
            s.end = s.end.max(last + 1);
        }
        s.advance();
        s
    }

    /// The persisted form: runs of equal (state, count), ACQUIRED written as AVAILABLE.
    pub fn snapshot(&self) -> Vec<StateBatch> {
        let mut out: Vec<StateBatch> = Vec::new();
        for (&o, r) in &self.records {
            let code = match r.state {
                RecordState::Acquired => RecordState::Available.code(),
                s => s.code(),
            };
            match out.last_mut() {
                Some(last) if last.1 + 1 == o && last.2 == code && last.3 == r.delivery_count => {
                    last.1 = o
                }
                _ => out.push((o, o, code, r.delivery_count)),
            }
        }
        out
    }

    /// Records that left the log (retention, DeleteRecords) are done too.
    pub fn skip_below(&mut self, log_start: i64) {
        if log_start > self.start {
            self.records = self.records.split_off(&log_start);
            self.start = log_start;
            self.end = self.end.max(log_start);
            self.advance();
        }
    }

    /// Locks that ran out: the record is offered again, or archived at the delivery limit.
    /// Returns whether anything changed.
    pub fn expire(&mut self, now_ms: i64, limits: &Limits) -> bool {
        let mut changed = false;
        for (&o, r) in self.records.iter_mut() {
            if r.state == RecordState::Acquired && r.deadline_ms <= now_ms {
                Self::give_back(o, r, limits, &mut self.dead);
                changed = true;
            }
        }
        if changed {
            self.advance();
        }
        changed
    }

    /// The earliest lock deadline, for the fetch long poll to wake at.
    pub fn next_deadline(&self) -> Option<i64> {
        self.records
            .values()
            .filter(|r| r.state == RecordState::Acquired)
            .map(|r| r.deadline_ms)
            .min()
    }

    /// Where acquisition reads the log from: the first AVAILABLE offset, else the SPEO when
    /// the window has room; `None` when nothing can be acquired.
    pub fn fetch_offset(&self, limits: &Limits) -> Option<i64> {
        self.records
            .iter()
            .find(|(_, r)| r.state == RecordState::Available)
            .map(|(o, _)| *o)
            .or_else(|| (self.end - self.start < limits.max_locks).then_some(self.end))
    }

    /// The log batch `base..=last` is never to be delivered (an aborted transaction's, under
    /// `share.isolation.level=read_committed`): its new or available offsets are archived
    /// with no delivery, as Kafka archives them; the window bound still holds.
    pub fn skip(&mut self, base: i64, last: i64, limits: &Limits) {
        for o in base.max(self.start)..=last {
            match self.records.get_mut(&o) {
                Some(r) if r.state == RecordState::Available => {
                    Self::finish(r, RecordState::Archived)
                }
                Some(_) => {}
                None if o >= self.end => {
                    if o - self.start >= limits.max_locks {
                        break;
                    }
                    self.records.insert(
                        o,
                        InFlight {
                            state: RecordState::Archived,
                            delivery_count: 0,
                            member: None,
                            deadline_ms: 0,
                        },
                    );
                    self.end = o + 1;
                }
                None => {}
            }
        }
        self.advance();
    }

    /// Acquires what it may of the log batch `base..=last` for `member`, at most `max`
    /// records; returns the acquired runs `(first, last, delivery_count)`.
    pub fn acquire(
        &mut self,
        base: i64,
        last: i64,
        member: &str,
        now_ms: i64,
        max: usize,
        limits: &Limits,
    ) -> Vec<(i64, i64, i16)> {
        self.acquire_in(base, last, member, now_ms, max, limits, false)
    }

    /// Kafka's batch-optimized acquisition (KIP-1206's default mode): everything acquirable
    /// in the batch, the in-flight bound checked only where the batch's new records begin
    /// (Kafka's `canAcquireRecords` before a fetch), so a batch is never split by the bound.
    /// The window may pass `max_locks` by less than one batch.
    pub fn acquire_batch(
        &mut self,
        base: i64,
        last: i64,
        member: &str,
        now_ms: i64,
        limits: &Limits,
    ) -> Vec<(i64, i64, i16)> {
        self.acquire_in(base, last, member, now_ms, usize::MAX, limits, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn acquire_in(
        &mut self,
        base: i64,
        last: i64,
        member: &str,
        now_ms: i64,
        max: usize,
        limits: &Limits,
        whole: bool,
    ) -> Vec<(i64, i64, i16)> {
        let mut out: Vec<(i64, i64, i16)> = Vec::new();
        let mut taken = 0usize;
        let mut grew = false;
        for o in base.max(self.start)..=last {
            if taken >= max {
                break;
            }
            let count = match self.records.get_mut(&o) {
                // Restored at the limit (it was acquired when the state was written):
                // delivered often enough.
                Some(r)
                    if r.state == RecordState::Available
                        && r.delivery_count >= limits.delivery_limit =>
                {
                    Self::finish(r, RecordState::Archived);
                    if limits.dlq {
                        self.dead.push(Dead {
                            offset: o,
                            delivery_count: r.delivery_count,
                            rejected: false,
                        });
                    }
                    continue;
                }
                Some(r) if r.state == RecordState::Available => {
                    r.delivery_count += 1;
                    r.state = RecordState::Acquired;
                    r.member = Some(member.to_string());
                    r.deadline_ms = now_ms + limits.lock_ms;
                    r.delivery_count
                }
                Some(_) => continue,
                None if o >= self.end => {
                    if o - self.start >= limits.max_locks && !(whole && grew) {
                        break;
                    }
                    grew = true;
                    self.records.insert(
                        o,
                        InFlight {
                            state: RecordState::Acquired,
                            delivery_count: 1,
                            member: Some(member.to_string()),
                            deadline_ms: now_ms + limits.lock_ms,
                        },
                    );
                    self.end = o + 1;
                    1
                }
                None => continue, // a gap inside the window: nothing there
            };
            taken += 1;
            match out.last_mut() {
                Some(run) if run.1 + 1 == o && run.2 == count => run.1 = o,
                _ => out.push((o, o, count)),
            }
        }
        self.advance();
        out
    }

    /// One acknowledgement batch of `member` at `now_ms`: one type for the whole range, or one
    /// per offset. All-or-nothing: a batch naming an offset the member does not hold changes
    /// nothing and answers INVALID_RECORD_STATE, as Kafka's does. A RENEW keeps the record
    /// acquired and starts its lock again, delivery count unchanged (Kafka's `SharePartition`).
    pub fn acknowledge(
        &mut self,
        member: &str,
        first: i64,
        last: i64,
        types: &[i8],
        limits: &Limits,
        now_ms: i64,
    ) -> Result<(), AckError> {
        if last < first || types.is_empty() {
            return Err(AckError::InvalidRequest(format!(
                "invalid acknowledgement batch {first}..={last}"
            )));
        }
        let span = (last - first + 1) as usize;
        if types.len() != 1 && types.len() != span {
            return Err(AckError::InvalidRequest(format!(
                "{} acknowledge types for {span} offsets",
                types.len()
            )));
        }
        let mut plan = Vec::with_capacity(span.min(4096));
        for (i, o) in (first..=last).enumerate() {
            let code = types[if types.len() == 1 { 0 } else { i }];
            let kind = AckType::from_code(code).ok_or_else(|| {
                AckError::InvalidRequest(format!("unknown acknowledge type {code}"))
            })?;
            if kind == AckType::Renew && !limits.renew {
                return Err(AckError::RenewDisabled);
            }
            match self.records.get(&o) {
                Some(r)
                    if r.state == RecordState::Acquired && r.member.as_deref() == Some(member) =>
                {
                    plan.push((o, kind))
                }
                // A gap may name an offset with no record, or one already done.
                None if kind == AckType::Gap => {}
                Some(r) if kind == AckType::Gap && r.state != RecordState::Acquired => {}
                _ => return Err(AckError::InvalidRecordState(first, last)),
            }
        }
        for (o, kind) in plan {
            let r = self.records.get_mut(&o).expect("planned offsets exist");
            match kind {
                AckType::Accept => Self::finish(r, RecordState::Acknowledged),
                AckType::Gap => Self::finish(r, RecordState::Archived),
                AckType::Reject => {
                    Self::finish(r, RecordState::Archived);
                    if limits.dlq {
                        self.dead.push(Dead {
                            offset: o,
                            delivery_count: r.delivery_count,
                            rejected: true,
                        });
                    }
                }
                AckType::Release => Self::give_back(o, r, limits, &mut self.dead),
                AckType::Renew => r.deadline_ms = now_ms + limits.lock_ms,
            }
        }
        self.advance();
        Ok(())
    }

    /// Everything `member` holds goes back (its share session closed or it left the group).
    pub fn release_member(&mut self, member: &str, limits: &Limits) -> bool {
        let mut changed = false;
        for (&o, r) in self.records.iter_mut() {
            if r.state == RecordState::Acquired && r.member.as_deref() == Some(member) {
                Self::give_back(o, r, limits, &mut self.dead);
                changed = true;
            }
        }
        if changed {
            self.advance();
        }
        changed
    }

    /// How many in-flight records are done (acknowledged or archived): Kafka's
    /// `deliveryCompleteCount`, which the lag leaves out (KIP-1226).
    pub fn delivery_complete(&self) -> i64 {
        self.records.values().filter(|r| r.state.done()).count() as i64
    }

    /// How many in-flight records are in `state` (ShareGroupDescribe, tests).
    pub fn count(&self, state: RecordState) -> usize {
        self.records.values().filter(|r| r.state == state).count()
    }

    fn finish(r: &mut InFlight, state: RecordState) {
        r.state = state;
        r.member = None;
    }

    /// The records archived for the dead-letter topic since the last call.
    pub fn take_dead(&mut self) -> Vec<Dead> {
        std::mem::take(&mut self.dead)
    }

    /// Back to AVAILABLE, or ARCHIVED (and dead, with a DLQ) at the delivery limit.
    fn give_back(offset: i64, r: &mut InFlight, limits: &Limits, dead: &mut Vec<Dead>) {
        r.member = None;
        if r.delivery_count < limits.delivery_limit {
            r.state = RecordState::Available;
            return;
        }
        r.state = RecordState::Archived;
        if limits.dlq {
            dead.push(Dead {
                offset,
                delivery_count: r.delivery_count,
                rejected: false,
            });
        }
    }

    /// Moves the SPSO past the done prefix (offsets with no entry are gaps) and drops it.
    fn advance(&mut self) {
        loop {
            match self.records.first_key_value() {
                Some((&o, r)) if o <= self.start && r.state.done() => {
                    self.records.remove(&o);
                    self.start = o + 1;
                }
                Some((&o, r)) if o > self.start && r.state.done() => {
                    self.records.remove(&o);
                    self.start = o + 1;
                }
                Some((&o, _)) => {
                    self.start = self.start.max(o);
                    break;
                }
                None => {
                    self.start = self.end;
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "inflight_tests.rs"]
mod tests;
