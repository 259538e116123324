//! A replicated partition's part in Kafka's ISR model (docs/design.md "Partition
//! replication"): its role as the metadata image sets it, the followers' progress on the
//! leader (the high watermark is the minimum over the ISR), the follower's appends at the
//! leader's offsets and epochs, and truncation to the leader's epoch boundary.
//!
//! A partition of a single node, or of replication factor 1, has the role `Single` and
//! none of this changes what it does: its high watermark is its written end, as before.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use storage::batch::BatchHeader;
use storage::{Durability, StorageError};
use tokio::sync::watch;

use super::{txn, FetchOutcome, Partition, PartitionError};

#[cfg(test)]
#[path = "replica_tests.rs"]
mod tests;

/// An ISR change for the image (Kafka's AlterPartition request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    /// The leader epoch it is made at.
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    /// The ISR it was decided on: the image takes it only while its ISR is still this.
    pub from: Vec<i32>,
}

/// The ISR change this leader has in flight.
struct Proposal {
    isr: Vec<i32>,
    /// The image has taken it (it may have moved on since).
    made: bool,
}

/// What this node is for the partition, as its metadata image says.
#[derive(Debug, Clone, Default)]
pub enum Role {
    /// Not replicated (single node, or one replica).
    #[default]
    Single,
    Leader {
        me: i32,
        epoch: i32,
        isr: Vec<i32>,
        replicas: Vec<i32>,
        /// False while this node has lost the metadata quorum: no acks=all then.
        quorum: Arc<AtomicBool>,
    },
    Follower {
        leader: i32,
        epoch: i32,
    },
}

/// How the ISR moved when a leader's role changed: Kafka's `IsrShrinksPerSec` and
/// `IsrExpandsPerSec` count one per change, not per replica.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IsrMoves {
    pub shrank: bool,
    pub expanded: bool,
}

impl IsrMoves {
    /// Between two roles of this node: only while it stays the leader (a node that becomes
    /// leader takes over an ISR it did not shrink or grow; one that stops leading reports
    /// nothing more, as Kafka's metrics are the leader's).
    pub fn between(old: &Role, new: &Role) -> IsrMoves {
        let (Role::Leader { isr: a, .. }, Role::Leader { isr: b, .. }) = (old, new) else {
            return IsrMoves::default();
        };
        IsrMoves {
            shrank: a.iter().any(|r| !b.contains(r)),
            expanded: b.iter().any(|r| !a.contains(r)),
        }
    }
}

/// A follower as its leader sees it, for metrics: offsets behind the leader's written end
/// since its last fetch (`None` before its first fetch to this leader), and how long since
/// it last had everything the leader had (`None`: out of the ISR this leader took over, and
/// not fetched since).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FollowerLag {
    pub replica: i32,
    pub lag: Option<i64>,
    pub caught_up_ago: Option<Duration>,
}

/// A follower as its leader sees it (Kafka's `Replica` state).
#[derive(Debug, Clone, Copy)]
struct Progress {
    /// The last fetch offset: the follower's durable log end.
    offset: i64,
    /// When the follower last had everything the leader had (Kafka's
    /// `lastCaughtUpTimeMs`: a fetch at or past the log end of its previous fetch proves it
    /// was caught up at the time of that previous fetch).
    caught_up: Instant,
    /// The previous fetch: when, and the leader's written end then.
    last_fetch: Instant,
    end_at_last_fetch: i64,
    /// The follower's own log start as its last fetch said (-1: not known yet).
    log_start: i64,
}

/// The replication state a `Partition` carries.
pub struct Replica {
    role: RefCell<Role>,
    /// On the leader: each follower's progress.
    followers: RefCell<BTreeMap<i32, Progress>>,
    /// The written end, for followers' long polls (sent only while replicated).
    log_end: watch::Sender<i64>,
    /// A follower at a new epoch truncates to the leader's boundary before it fetches.
    truncate_pending: Cell<bool>,
    /// The ISR change this leader proposed last, until its role shows the image past it (one
    /// change in flight).
    isr_pending: RefCell<Option<Proposal>>,
    /// On a follower: the leader's high watermark as last fetched.
    leader_hw: Cell<i64>,
    /// Held while a follower appends fetched batches or truncates: both await fsyncs, and a
    /// fetch answer from a deposed leader, checked and then appended across an await, could
    /// otherwise land after the truncation that a new epoch asked for (and the follower's
    /// log would keep the old leader's records below the new leader's).
    io: tokio::sync::Mutex<()>,
}

impl Replica {
    pub fn new(log_end: i64) -> Replica {
        Replica {
            role: RefCell::new(Role::Single),
            followers: RefCell::new(BTreeMap::new()),
            log_end: watch::channel(log_end).0,
            truncate_pending: Cell::new(false),
            isr_pending: RefCell::new(None),
            // What this replica had when opened, until a leader tells it more.
            leader_hw: Cell::new(log_end),
            io: tokio::sync::Mutex::new(()),
        }
    }
}

impl Partition {
    pub fn role(&self) -> Role {
        self.replica.role.borrow().clone()
    }

    /// Takes the role the image gives this node. A new leader epoch starts at the log end
    /// (and forgets the followers' progress); a new follower epoch asks for truncation.
    /// Returns how the ISR moved, for the shard's metrics.
    pub fn set_role(&self, role: Role) -> Result<IsrMoves, StorageError> {
        let old = self.replica.role.replace(role.clone());
        let moves = IsrMoves::between(&old, &role);
        match (&old, &role) {
            (Role::Leader { epoch: a, .. }, Role::Leader { epoch: b, isr, .. }) if a == b => {
                // The image shows the change this leader proposed, or took it before this role
                // was read from it (`isr_change_made`; it may have moved on since, a fence at
                // the same epoch taking the added member out again): another may follow. Not
                // while the proposal is in flight: it may yet apply, and until the role shows
                // it the high watermark must count the member it adds.
                self.replica
                    .isr_pending
                    .borrow_mut()
                    .take_if(|p| p.isr == *isr || p.made);
            }
            (_, Role::Leader { epoch, isr, .. }) => {
                self.log.assign_leader_epoch(*epoch)?;
                // A new leader gives its ISR a full lag time from now (Kafka resets the
                // followers' state on becoming leader).
                let now = Instant::now();
                let mut followers = self.replica.followers.borrow_mut();
                followers.clear();
                for r in isr {
                    followers.insert(
                        *r,
                        Progress {
                            offset: i64::MIN,
                            caught_up: now,
                            last_fetch: now,
                            end_at_last_fetch: i64::MAX,
                            log_start: -1,
                        },
                    );
                }
                drop(followers);
                self.replica.isr_pending.replace(None);
            }
            (Role::Follower { epoch: a, .. }, Role::Follower { epoch: b, .. }) if a == b => {}
            (_, Role::Follower { .. }) => self.replica.truncate_pending.set(true),
            _ => {}
        }
        self.publish_offsets();
        Ok(moves)
    }

    /// KIP-392 on a leader (Kafka's `findPreferredReadReplica` with the
    /// `RackAwareReplicaSelector`): of `candidates` — the replicas in the consumer's rack, the
    /// caller's pick — the in-sync follower that holds `fetch_offset` (its log starts at or
    /// before it and its last fetch reached it) and is the most caught up: highest log end,
    /// then the most recently caught up. `None`: the consumer reads from this leader.
    pub fn preferred_read_replica(&self, fetch_offset: i64, candidates: &[i32]) -> Option<i32> {
        let Role::Leader { me, isr, .. } = &*self.replica.role.borrow() else {
            return None;
        };
        let followers = self.replica.followers.borrow();
        candidates
            .iter()
            .filter(|r| *r != me && isr.contains(r))
            .filter_map(|r| followers.get(r).map(|f| (*r, f)))
            .filter(|(_, f)| f.offset >= fetch_offset && (0..=fetch_offset).contains(&f.log_start))
            .max_by(|(_, a), (_, b)| {
                a.offset
                    .cmp(&b.offset)
                    .then_with(|| b.caught_up.elapsed().cmp(&a.caught_up.elapsed()))
            })
            .map(|(r, _)| r)
    }

    /// On a leader: every other replica's lag behind the written end (Kafka reports a
    /// follower's lag on the follower, `FetcherLagManager`; the leader's view is the one that
    /// decides the ISR, and it covers a follower that is down and reports nothing). A
    /// follower's offset is its last fetch, so a follower that stopped fetching lags more
    /// with every append. Empty when not a replicated leader.
    pub fn follower_lags(&self) -> Vec<FollowerLag> {
        let Role::Leader { me, replicas, .. } = &*self.replica.role.borrow() else {
            return Vec::new();
        };
        let written = self.log.written_end_offset();
        let followers = self.replica.followers.borrow();
        replicas
            .iter()
            .filter(|r| *r != me)
            .map(|r| {
                let f = followers.get(r);
                FollowerLag {
                    replica: *r,
                    // `i64::MIN`: in the ISR this leader took over, not fetched from it yet.
                    lag: f
                        .filter(|f| f.offset != i64::MIN)
                        .map(|f| (written - f.offset).max(0)),
                    caught_up_ago: f.map(|f| f.caught_up.elapsed()),
                }
            })
            .collect()
    }

    /// The high watermark this replica had before a restart (`replication-offset-checkpoint`),
    /// at open, before anything reads it: its log may hold records past it that the ISR
    /// never had, which a new leader would not have; they become visible again only when
    /// the ISR has them (leader) or the leader says so (follower).
    pub fn restore_high_watermark(&self, checkpointed: i64) {
        let hw = checkpointed
            .max(self.log.log_start_offset())
            .min(self.log.written_end_offset());
        self.high_watermark.send_modify(|v| *v = hw);
        self.replica.leader_hw.set(hw);
        let lso = self.txns.borrow().last_stable_offset(hw);
        self.last_stable.send_modify(|v| *v = lso);
    }

    /// What `replication-offset-checkpoint` keeps of this partition: its high watermark
    /// when replicated (a single node's is its log end, nothing to keep).
    pub fn checkpointed_high_watermark(&self) -> Option<i64> {
        match &*self.replica.role.borrow() {
            Role::Single => None,
            Role::Leader { .. } | Role::Follower { .. } => Some(self.high_watermark()),
        }
    }

    /// The epoch a leader writes into its batches (0 when not replicated, as before).
    pub(super) fn append_epoch(&self) -> i32 {
        match &*self.replica.role.borrow() {
            Role::Leader { epoch, .. } => *epoch,
            _ => 0,
        }
    }

    /// The high watermark `publish_offsets` sets: the written end when not replicated; on a
    /// leader the minimum of its written end and its in-sync followers' fetch offsets, never
    /// moving back; on a follower the leader's, bounded by what it has.
    pub(super) fn replicated_hw(&self) -> i64 {
        let written = self.log.written_end_offset();
        match &*self.replica.role.borrow() {
            Role::Single => written,
            Role::Leader { me, isr, .. } => {
                self.set_log_end(written);
                let followers = self.replica.followers.borrow();
                // Kafka's "maximal ISR": the ISR and the one proposed. A follower this leader
                // asked to add may already be in the committed ISR the controller elects from,
                // so nothing counts as replicated until it has it too (without it, a deposed
                // leader had served and acknowledged records its successor lacked:
                // test_faults.py, seed 4 of the flaky schedule). A proposed shrink keeps the
                // committed members until it commits.
                let pending = self.replica.isr_pending.borrow();
                let caught_up = isr
                    .iter()
                    .chain(pending.iter().flat_map(|p| p.isr.iter()))
                    .filter(|r| *r != me)
                    .map(|r| followers.get(r).map_or(i64::MIN, |f| f.offset))
                    .fold(written, i64::min);
                caught_up.max(self.high_watermark()).min(written)
            }
            Role::Follower { .. } => self.replica.leader_hw.get().min(written),
        }
    }

    /// The end OffsetForLeaderEpoch reports for the latest epoch: the log end on a
    /// replicated leader (followers truncate to it), the high watermark otherwise.
    pub(super) fn epoch_end(&self) -> i64 {
        match &*self.replica.role.borrow() {
            Role::Leader { .. } => self.log.written_end_offset(),
            _ => self.high_watermark(),
        }
    }

    /// Whether this replica leads a replicated partition.
    pub(super) fn is_replicated_leader(&self) -> bool {
        matches!(&*self.replica.role.borrow(), Role::Leader { .. })
    }

    /// On a replicated leader: wakes the followers' long polls with the written end, before
    /// this node's fdatasync (`append`); the high watermark is not touched.
    pub(super) fn publish_log_end(&self) {
        if !self.is_replicated_leader() {
            return;
        }
        self.set_log_end(self.log.written_end_offset());
    }

    fn set_log_end(&self, written: i64) {
        self.replica.log_end.send_if_modified(|v| {
            let changed = *v != written;
            *v = written;
            changed
        });
    }

    /// A receiver of the written end (followers' long polls on the leader).
    pub fn watch_log_end(&self) -> watch::Receiver<i64> {
        self.replica.log_end.subscribe()
    }

    /// Whether acks=all may be taken now: |ISR| ≥ `min.insync.replicas` and, replicated,
    /// the node is in the metadata quorum. `Err` names the ISR size for the message.
    pub fn check_min_isr(&self, min_isr: i32) -> Result<(), usize> {
        match &*self.replica.role.borrow() {
            Role::Leader { isr, quorum, .. } => {
                if !quorum.load(Ordering::Relaxed) {
                    Err(1)
                } else if (isr.len() as i32) < min_isr {
                    Err(isr.len())
                } else {
                    Ok(())
                }
            }
            _ if min_isr > 1 => Err(1),
            _ => Ok(()),
        }
    }

    /// acks=all on a replicated leader: waits until the high watermark reaches `end` (every
    /// ISR member has the batch fsynced). Fails when the ISR shrinks below `min_isr` or the
    /// node loses the quorum (NOT_ENOUGH_REPLICAS_AFTER_APPEND), leadership moves
    /// (NOT_LEADER_OR_FOLLOWER) or `timeout` passes (REQUEST_TIMED_OUT). The ISR is checked
    /// before the watermark, as Kafka's `checkEnoughReplicasReachOffset` does: a shrink that
    /// lets the watermark reach `end` (the lagging followers dropped) leaves the batch with
    /// fewer copies than `min.insync.replicas` promised, so it is not acknowledged.
    pub async fn wait_replicated(
        &self,
        end: i64,
        min_isr: i32,
        timeout: Duration,
    ) -> Result<(), PartitionError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = self.high_watermark.subscribe();
        loop {
            match &*self.replica.role.borrow() {
                Role::Single => return Ok(()),
                Role::Follower { .. } => return Err(PartitionError::NotLeader),
                Role::Leader { .. } => {}
            }
            let reached = *rx.borrow_and_update() >= end;
            if self.check_min_isr(min_isr).is_err() {
                return Err(PartitionError::NotEnoughReplicasAfterAppend);
            }
            if reached {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(PartitionError::ReplicationTimeout);
            }
            // Role changes do not always move the watermark: look again now and then.
            let tick = tokio::time::sleep(Duration::from_millis(100));
            tokio::select! {
                _ = rx.changed() => {}
                _ = tick => {}
            }
        }
    }

    /// A follower's fetch on the leader: records `offset` as the follower's durable end,
    /// moves the high watermark, and reads up to the written end. Also returns the ISR to
    /// propose when the follower has caught up while out of it (Kafka's `maybeExpandIsr`:
    /// at the high watermark and past the start of the current epoch).
    pub fn replica_read(
        &self,
        follower: i32,
        offset: i64,
        follower_log_start: i64,
        max_bytes: usize,
    ) -> Result<(FetchOutcome, Option<IsrChange>), StorageError> {
        let mut expand = None;
        if let Role::Leader {
            epoch,
            isr,
            replicas,
            ..
        } = &*self.replica.role.borrow()
        {
            if replicas.contains(&follower) {
                let now = Instant::now();
                let written = self.log.written_end_offset();
                let mut followers = self.replica.followers.borrow_mut();
                let f = followers.entry(follower).or_insert(Progress {
                    offset,
                    caught_up: now,
                    last_fetch: now,
                    end_at_last_fetch: i64::MAX,
                    log_start: -1,
                });
                f.log_start = follower_log_start;
                if offset >= written {
                    f.caught_up = now;
                } else if offset >= f.end_at_last_fetch {
                    f.caught_up = f.caught_up.max(f.last_fetch);
                }
                f.offset = offset;
                f.last_fetch = now;
                f.end_at_last_fetch = written;
                drop(followers);
                let epoch_start = self.log.leader_epochs().last().map_or(0, |e| e.1);
                let caught_up = offset >= self.high_watermark().max(epoch_start);
                if !isr.contains(&follower)
                    && caught_up
                    && self.replica.isr_pending.borrow().is_none()
                {
                    let mut grown = isr.clone();
                    grown.push(follower);
                    grown.sort_unstable();
                    expand = Some(self.propose(*epoch, grown, isr));
                }
            }
        }
        self.publish_offsets();
        let written = self.log.written_end_offset();
        let data = self.log.read(offset, max_bytes, written)?;
        let outcome = FetchOutcome {
            data,
            high_watermark: self.high_watermark(),
            last_stable_offset: self.last_stable_offset(),
            log_start_offset: self.log.log_start_offset(),
            aborted: None,
            expired: 0,
        };
        Ok((outcome, expand))
    }

    /// Kafka's `lowWatermarkIfLeader`: the lowest log start over this leader and its in-sync
    /// followers (those whose log start is known), what DeleteRecords answers once it
    /// reaches the requested offset. A partition that is not a replicated leader: its own
    /// log start.
    pub fn low_watermark(&self) -> i64 {
        let own = self.log.log_start_offset();
        let Role::Leader { me, isr, .. } = &*self.replica.role.borrow() else {
            return own;
        };
        let followers = self.replica.followers.borrow();
        isr.iter()
            .filter(|r| *r != me)
            .filter_map(|r| followers.get(r).map(|f| f.log_start))
            .filter(|s| *s >= 0)
            .fold(own, i64::min)
    }

    /// DeleteRecords on a replicated leader answers once the low watermark has reached
    /// `start` (the followers moved theirs on their next fetches), as Kafka's
    /// `DelayedDeleteRecords`; the low watermark it reached otherwise.
    pub async fn wait_low_watermark(
        &self,
        start: i64,
        timeout: Duration,
    ) -> Result<i64, super::DeleteRecordsError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let low = self.low_watermark();
            if low >= start {
                return Ok(low);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(super::DeleteRecordsError::ReplicasTimedOut {
                    offset: start,
                    low_watermark: low,
                });
            }
            // Followers fetch within their long poll (500 ms) at the latest.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A follower learns the leader's log start from each fetch answer (Kafka's
    /// `maybeIncrementLogStartOffset` on the follower): records the leader deleted go here
    /// too. A leader whose log starts past this replica's end (DeleteRecords or retention
    /// while it was away) makes it start over, empty, there (`truncateFullyAndStartAt`).
    pub async fn follow_log_start(&self, leader_start: i64) -> Result<(), StorageError> {
        let _io = self.replica.io.lock().await;
        if leader_start <= self.log.log_start_offset() {
            return Ok(());
        }
        if leader_start <= self.log.log_end_offset() {
            return self.log.advance_log_start(leader_start);
        }
        self.log.flush().await?;
        tracing::info!(topic = %self.topic, partition = self.index, leader_start, log_end = self.log.log_end_offset(), "the leader's log starts past this replica's end: starting over there");
        self.log.truncate_fully_and_start_at(leader_start)?;
        self.producers.borrow_mut().truncate_from(0);
        self.txns.borrow_mut().truncate_from(0);
        self.dedup.borrow_mut().take();
        self.key_index.borrow_mut().reset();
        self.expiry.borrow_mut().truncate_from(0);
        self.high_watermark.send_modify(|v| *v = leader_start);
        self.replica.leader_hw.set(leader_start);
        self.publish_offsets();
        Ok(())
    }

    /// On a leader: the ISR without the followers not caught up within `lag_max` (Kafka's
    /// `replica.lag.time.max.ms`, `maybeShrinkIsr`), with the epoch, when that is smaller
    /// and no other change is in flight. Marks the change as in flight.
    pub fn isr_to_shrink(&self, lag_max: Duration) -> Option<IsrChange> {
        let Role::Leader { me, epoch, isr, .. } = &*self.replica.role.borrow() else {
            return None;
        };
        if self.replica.isr_pending.borrow().is_some() {
            return None;
        }
        let followers = self.replica.followers.borrow();
        let kept: Vec<i32> = isr
            .iter()
            .copied()
            .filter(|r| {
                r == me
                    || followers
                        .get(r)
                        .is_some_and(|f| f.caught_up.elapsed() < lag_max)
            })
            .collect();
        if kept.len() == isr.len() {
            return None;
        }
        Some(self.propose(*epoch, kept, isr))
    }

    /// Marks `isr` as the change in flight.
    fn propose(&self, leader_epoch: i32, isr: Vec<i32>, from: &[i32]) -> IsrChange {
        self.replica.isr_pending.replace(Some(Proposal {
            isr: isr.clone(),
            made: false,
        }));
        IsrChange {
            leader_epoch,
            isr,
            from: from.to_vec(),
        }
    }

    /// The ISR change in flight was refused or not decided: allow another.
    pub fn isr_change_failed(&self) {
        self.replica.isr_pending.replace(None);
    }

    /// Whether `isr` is still the change this leader has in flight, undecided (a new role
    /// at another epoch drops it).
    pub fn isr_change_in_flight(&self, isr: &[i32]) -> bool {
        self.replica
            .isr_pending
            .borrow()
            .as_ref()
            .is_some_and(|p| !p.made && p.isr == isr)
    }

    /// The image decided the ISR change in flight (took it, or had moved on from the ISR it
    /// was made on), and this node's image holds that: the next role set from that image
    /// (`set_role`) shows the outcome, and another change may follow. The role now may still
    /// be older than the decision.
    pub fn isr_change_made(&self) {
        if let Some(p) = self.replica.isr_pending.borrow_mut().as_mut() {
            p.made = true;
        }
    }

    /// Whether this follower must truncate before it fetches (and clears the flag).
    pub fn take_truncate_pending(&self) -> bool {
        self.replica.truncate_pending.replace(false)
    }

    /// Asks for the truncation again (the last attempt failed).
    pub fn set_truncate_pending(&self) {
        self.replica.truncate_pending.set(true);
    }

    pub fn truncate_is_pending(&self) -> bool {
        self.replica.truncate_pending.get()
    }

    /// A follower's fetch came back without records: the leader's high watermark may have
    /// moved all the same.
    pub fn note_leader_hw(&self, leader_hw: i64) {
        if self.replica.leader_hw.replace(leader_hw) != leader_hw {
            self.publish_offsets();
        }
    }

    /// The latest leader epoch in this replica's log, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.log.leader_epochs().last().map(|e| e.0)
    }

    /// A follower appends what `leader` answered to a fetch made at `epoch`, unless it no
    /// longer follows that leader at that epoch or must truncate first (the image moved on
    /// while the fetch was out, or while this waited for a truncation). Whether it appended.
    pub async fn append_fetched(
        self: &Rc<Self>,
        leader: i32,
        epoch: i32,
        chunks: Vec<Bytes>,
        leader_hw: i64,
    ) -> Result<bool, PartitionError> {
        let _io = self.replica.io.lock().await;
        if !self.takes_fetched_from(leader, epoch) {
            return Ok(false);
        }
        self.append_replicated(chunks, leader_hw).await?;
        Ok(true)
    }

    /// Whether a fetch answer from `leader` to a fetch made at `epoch` may be taken: this
    /// replica still follows that leader at that epoch and has no truncation to do first.
    pub fn takes_fetched_from(&self, leader: i32, epoch: i32) -> bool {
        let following = matches!(
            &*self.replica.role.borrow(),
            Role::Follower { leader: l, epoch: e } if *l == leader && *e == epoch
        );
        following && !self.truncate_is_pending()
    }

    /// A follower appends what it fetched: the leader's batches at their offsets with their
    /// epochs, fsynced, then replayed into producer and transaction state (so this replica,
    /// once leader, answers a retried batch as a duplicate). `leader_hw` is the leader's
    /// high watermark from the same response.
    pub(crate) async fn append_replicated(
        self: &Rc<Self>,
        chunks: Vec<Bytes>,
        leader_hw: i64,
    ) -> Result<(), PartitionError> {
        let mut headers: Vec<BatchHeader> = Vec::new();
        // An empty replica whose start lies inside the leader's first batch (DeleteRecords
        // cut into it; `follow_log_start` started this log there): the batch is taken whole,
        // from its base, and the start put back after it, as Kafka's follower does
        // (`appendRecordsToFollowerOrFutureReplica` on UnexpectedAppendOffsetException).
        let start = self.log.log_start_offset();
        let mut restore_start = None;
        if let Some(first) = chunks
            .first()
            .filter(|_| start == self.log.log_end_offset())
        {
            let h = storage::batch::validate_stored(first).map_err(PartitionError::Corrupt)?;
            if h.base_offset < start && h.last_offset() >= start {
                self.log.flush().await?;
                self.log.truncate_fully_and_start_at(h.base_offset)?;
                restore_start = Some(start);
            }
        }
        // What was appended, for the key index.
        let mut runs: Vec<Bytes> = Vec::new();
        for chunk in chunks {
            // Runs of batches of one epoch: the log stamps one epoch per append.
            let mut at = 0;
            let mut run_start = 0;
            let mut run_epoch = None;
            while at < chunk.len() {
                let h = storage::batch::validate_stored(&chunk[at..])
                    .map_err(PartitionError::Corrupt)?;
                if h.base_offset < self.log.log_end_offset() && run_epoch.is_none() {
                    // Already here (a retried fetch): skip it.
                    at += h.total_size();
                    run_start = at;
                    continue;
                }
                if run_epoch.is_some_and(|e| e != h.partition_leader_epoch) {
                    let run = chunk.slice(run_start..at);
                    self.append_run(run.clone(), run_epoch.expect("checked"))
                        .await?;
                    runs.push(run);
                    run_start = at;
                }
                run_epoch = Some(h.partition_leader_epoch);
                at += h.total_size();
                headers.push(h);
            }
            if let Some(epoch) = run_epoch {
                let run = chunk.slice(run_start..at);
                self.append_run(run.clone(), epoch).await?;
                runs.push(run);
            }
        }
        {
            let mut producers = self.producers.borrow_mut();
            let mut txns = self.txns.borrow_mut();
            for h in &headers {
                if h.producer_id >= 0 && !h.is_control() {
                    producers.record(
                        h.producer_id,
                        h.producer_epoch,
                        super::batch_meta(h, h.base_offset),
                    );
                }
                txn::replay(&self.log, &mut producers, &mut txns, h)?;
            }
        }
        if let Some(start) = restore_start {
            self.log.advance_log_start(start)?;
        }
        if !headers.is_empty() {
            // Rebuilt from the log when next needed (a follower does not deduplicate).
            self.dedup.borrow_mut().take();
            if restore_start.is_some() {
                // The log was emptied and started over: what the index held is gone.
                self.key_index.borrow_mut().reset();
            } else {
                // Followers answer key reads too: dropping the index here made each read
                // after a replicated append scan the whole partition again.
                for run in &runs {
                    self.index_replicated(run);
                }
            }
            self.snapshot_if_rolled();
        }
        self.replica.leader_hw.set(leader_hw);
        self.publish_offsets();
        Ok(())
    }

    async fn append_run(&self, run: Bytes, epoch: i32) -> Result<(), PartitionError> {
        self.log
            .append_at_offsets(run, Durability::Fsync, epoch)
            .await?;
        Ok(())
    }

    /// Truncates this replica to `offset` (the leader's end of this replica's latest epoch):
    /// the log, and what was derived from the batches cut off.
    pub async fn truncate_replica(&self, offset: i64) -> Result<(), StorageError> {
        let _io = self.replica.io.lock().await;
        self.log.flush().await?;
        if offset >= self.log.log_end_offset() {
            return Ok(());
        }
        tracing::info!(topic = %self.topic, partition = self.index, offset, log_end = self.log.log_end_offset(), "truncating to the leader's epoch boundary");
        self.log.truncate_to(offset)?;
        self.producers.borrow_mut().truncate_from(offset);
        self.txns.borrow_mut().truncate_from(offset);
        self.dedup.borrow_mut().take();
        self.key_index.borrow_mut().reset();
        self.expiry.borrow_mut().truncate_from(offset);
        let end = self.log.written_end_offset();
        self.high_watermark.send_modify(|v| *v = (*v).min(end));
        self.replica
            .leader_hw
            .set(self.replica.leader_hw.get().min(end));
        self.publish_offsets();
        Ok(())
    }
}
