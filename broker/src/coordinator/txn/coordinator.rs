//! One shard's transaction coordinator: the transactional ids whose `__transaction_state`
//! partition this shard is home to, loading them from the log, persisting every transition
//! before installing it, writing the markers of finished transactions and aborting the ones
//! that outlive their timeout, and removing transactional ids idle longer than
//! `transactional.id.expiration.ms`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::time::Duration;

use super::markers::{self, TxnMarker};
use super::records::{self, TxnRecord};
use super::txn_stm::{epoch_exhausted, EndPlan, InitPlan, TxnEntry, TxnMetadata, TxnState};
use super::{txn_partition, TxnError, TXN_TOPIC};
use crate::coordinator::group::topic_regex::TopicRegex;
use crate::coordinator::log;
use crate::shard::ShardState;

/// The coordinator epoch of markers on a single node (no leader epochs there). In a cluster
/// markers carry the `__transaction_state` partition's leader epoch the coordinator loaded
/// it at, as Kafka's do, so a partition that has seen a newer coordinator's marker fences an
/// older one that still believes it leads (TRANSACTION_COORDINATOR_FENCED).
const SINGLE_NODE_EPOCH: i32 = 0;
/// Backoff between attempts to write a marker that failed (a shard restarting, a full disk):
/// Kafka retries markers until they succeed, because the transaction cannot complete without.
const MARKER_RETRY: Duration = Duration::from_millis(500);

pub struct TxnShard {
    shard: Weak<ShardState>,
    pub txns: RefCell<HashMap<String, TxnEntry>>,
    /// Loaded partitions, with the leader epoch they were loaded at (`None`: single node).
    loaded: crate::coordinator::log::LoadedPartitions,
}

thread_local! {
    static TXNS: RefCell<Option<(Weak<ShardState>, Rc<TxnShard>)>> = const { RefCell::new(None) };
}

/// One row of ListTransactions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnListing {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: TxnState,
}

impl TxnShard {
    /// This shard's coordinator (created with its timeout task on first use).
    pub fn of(state: &Rc<ShardState>) -> Rc<TxnShard> {
        TXNS.with(|t| {
            let mut t = t.borrow_mut();
            if let Some((owner, txns)) = t.as_ref() {
                if owner.upgrade().is_some_and(|o| Rc::ptr_eq(&o, state)) {
                    return txns.clone();
                }
            }
            let txns = Rc::new(TxnShard {
                shard: Rc::downgrade(state),
                txns: RefCell::new(HashMap::new()),
                loaded: Default::default(),
            });
            let config = &state.ctx.config;
            let every = |ms: i64| Duration::from_millis(ms.max(1) as u64);
            tokio::task::spawn_local(timeout_loop(
                Rc::downgrade(&txns),
                every(config.transaction_abort_timed_out_transaction_cleanup_interval_ms),
            ));
            tokio::task::spawn_local(expiration_loop(
                Rc::downgrade(&txns),
                every(config.transaction_remove_expired_transaction_cleanup_interval_ms),
                config.transactional_id_expiration_ms,
            ));
            *t = Some((Rc::downgrade(state), txns.clone()));
            txns
        })
    }

    fn shard(&self) -> Result<Rc<ShardState>, TxnError> {
        self.shard
            .upgrade()
            .ok_or(TxnError::CoordinatorNotAvailable)
    }

    /// The cluster's finalized `transaction.version`: Kafka fences and aborts timed-out
    /// transactions with it (not with a client's), and writes `__transaction_state` values
    /// at v1 from level 1.
    fn txn_version(&self) -> i16 {
        self.shard.upgrade().map_or(0, |s| {
            s.ctx
                .features
                .level(crate::metadata::features::TRANSACTION_VERSION)
        })
    }

    /// A producer id for a rotation (`TxnEntry::init_producer_id`, `end_txn`), once this
    /// node's producer-id block is ready.
    async fn producer_ids_ready(&self) -> Result<Rc<ShardState>, TxnError> {
        let shard = self.shard()?;
        let ctx = &shard.ctx;
        ctx.producer_ids
            .ready(ctx.cluster.get().map(|c| c.as_ref()), ctx.config.node_id)
            .await
            .map_err(|e| TxnError::ProducerIds(e.to_string()))?;
        Ok(shard)
    }

    fn partition_of(&self, transactional_id: &str) -> i32 {
        txn_partition(transactional_id, self.partition_count())
    }

    fn partition_count(&self) -> i32 {
        self.shard
            .upgrade()
            .and_then(|s| {
                s.ctx
                    .catalog
                    .snapshot()
                    .get(TXN_TOPIC)
                    .map(|t| t.partitions)
            })
            .unwrap_or(1)
    }

    /// Tests: drop what was loaded, as a restarted shard starts.
    #[cfg(test)]
    pub fn forget_loaded(&self) {
        self.loaded.clear();
        self.txns.borrow_mut().clear();
    }

    /// Loads every `__transaction_state` partition homed here (at shard start), so prepared
    /// transactions complete and open ones time out without waiting for a client.
    pub fn load_all(self: &Rc<Self>) {
        let Ok(shard) = self.shard() else { return };
        if shard.ctx.cluster.get().is_some() {
            return; // a cluster loads what it leads (`coordinator::leadership`)
        }
        let Some(topic) = shard.ctx.catalog.snapshot().get(TXN_TOPIC).cloned() else {
            return;
        };
        for p in 0..topic.partitions {
            if crate::shard::home_shard(TXN_TOPIC, p, shard.ctx.shard_count()) == shard.id {
                if let Err(e) = self.ensure_loaded(p) {
                    tracing::warn!(partition = p, error = %e, "loading transaction state failed");
                }
            }
        }
    }

    /// Replays `__transaction_state` partition `p` into memory, once per shard life, and
    /// resumes the transactions it left prepared.
    pub fn ensure_loaded(self: &Rc<Self>, p: i32) -> Result<(), TxnError> {
        self.ensure_loaded_at(p, None)
    }

    /// The partitions loaded here, with their epochs.
    pub fn loaded_partitions(&self) -> Vec<(i32, Option<i32>)> {
        self.loaded.list()
    }

    /// Forgets the transactional ids of partition `p` (this node stopped leading it).
    /// Completions in flight for them fail at their next append: the partition is no
    /// longer led here, and the new coordinator completes them from the log.
    pub fn unload(&self, p: i32) {
        if !self.loaded.remove(p) {
            return;
        }
        let n = self.partition_count();
        self.txns
            .borrow_mut()
            .retain(|id, _| txn_partition(id, n) != p);
    }

    /// `ensure_loaded` at leader epoch `epoch`: loaded at another epoch, it is loaded again.
    pub fn ensure_loaded_at(self: &Rc<Self>, p: i32, epoch: Option<i32>) -> Result<(), TxnError> {
        if self.loaded.is_loaded_at(p, epoch) {
            return Ok(());
        }
        self.unload(p);
        let shard = self.shard()?;
        let part = log::partition_on_shard(&shard, TXN_TOPIC, p)
            .ok_or(TxnError::CoordinatorNotAvailable)?;
        let mut loaded: HashMap<String, Option<TxnMetadata>> = HashMap::new();
        log::replay(&part, |r| {
            let Some(key) = r.key.as_deref().filter(|_| !r.control) else {
                return;
            };
            match TxnRecord::decode(key, r.value.as_deref()) {
                Ok(Some(rec)) => {
                    loaded.insert(rec.transactional_id, rec.value);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(partition = p, error = %e, "skipping record"),
            }
        })?;
        let mut resume = Vec::new();
        {
            let mut txns = self.txns.borrow_mut();
            for (id, meta) in loaded {
                match meta {
                    Some(m) => {
                        if matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
                            resume.push(id.clone());
                        }
                        txns.insert(id, TxnEntry::new(m));
                    }
                    None => {
                        txns.remove(&id);
                    }
                }
            }
        }
        tracing::debug!(
            partition = p,
            resumed = resume.len(),
            "loaded transaction coordinator partition"
        );
        self.loaded.insert(p, epoch);
        for id in resume {
            self.spawn_completion(id);
        }
        Ok(())
    }

    /// Persists `target` for its id (acks=all), then installs it. Other requests for the id
    /// get CONCURRENT_TRANSACTIONS meanwhile.
    async fn transition(&self, target: TxnMetadata) -> Result<(), TxnError> {
        let id = target.transactional_id.clone();
        {
            let mut txns = self.txns.borrow_mut();
            if let Some(e) = txns.get_mut(&id) {
                if e.pending.is_some() {
                    return Err(TxnError::ConcurrentTransactions);
                }
                if !target.state.can_follow(e.meta.state) {
                    return Err(TxnError::InvalidTxnState(format!(
                        "{} cannot follow {}",
                        target.state.name(),
                        e.meta.state.name()
                    )));
                }
                e.pending = Some(target.state);
            }
        }
        let rec = TxnRecord {
            transactional_id: id.clone(),
            value: Some(target.clone()),
        };
        let version = records::value_version(self.txn_version(), &target);
        let r = self.append(self.partition_of(&id), rec, version).await;
        let mut txns = self.txns.borrow_mut();
        match r {
            Ok(()) => {
                txns.insert(id, TxnEntry::new(target));
                Ok(())
            }
            Err(e) => {
                if let Some(entry) = txns.get_mut(&id) {
                    entry.pending = None;
                }
                Err(e)
            }
        }
    }

    async fn append(&self, p: i32, rec: TxnRecord, version: i16) -> Result<(), TxnError> {
        let shard = self.shard()?;
        let part = log::partition_on_shard(&shard, TXN_TOPIC, p)
            .ok_or(TxnError::CoordinatorNotAvailable)?;
        let (k, v) = rec.encode(version);
        log::append(&part, &[(k, v)], None).await?;
        Ok(())
    }

    fn entry(&self, id: &str) -> Option<TxnEntry> {
        self.txns.borrow().get(id).cloned()
    }

    /// InitProducerId with a transactional id: (producer id, epoch) to hand out.
    pub async fn init_producer_id(
        self: &Rc<Self>,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), TxnError> {
        let max = self.shard()?.ctx.config.transaction_max_timeout_ms;
        if timeout_ms <= 0 || timeout_ms > max {
            return Err(TxnError::InvalidTransactionTimeout(timeout_ms));
        }
        let shard = self.producer_ids_ready().await?;
        let now = crate::now_ms();
        let mut new_pid = pid_source(Some(&shard));
        let entry = match self.entry(id) {
            Some(e) => e,
            None => {
                let fresh = TxnEntry::new(TxnMetadata::new(id, new_pid()?, timeout_ms, now));
                self.txns
                    .borrow_mut()
                    .entry(id.to_string())
                    .or_insert(fresh)
                    .clone()
            }
        };
        let tv2 = self.txn_version() >= 2;
        match entry.init_producer_id(expected, timeout_ms, now, tv2, &mut new_pid)? {
            InitPlan::Write(t) => {
                let answer = (t.producer_id, t.producer_epoch);
                self.transition(t).await?;
                Ok(answer)
            }
            InitPlan::FenceAndAbort(t) => {
                tracing::info!(
                    transactional_id = id,
                    epoch = t.producer_epoch,
                    "fencing the open transaction of a previous producer"
                );
                self.transition(t).await?;
                self.spawn_completion(id.to_string());
                Err(TxnError::ConcurrentTransactions)
            }
        }
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn. The partitions are told to expect the producer's
    /// transactional data (KIP-890 verification) after the transaction is durable.
    pub async fn add_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: Vec<(String, i32)>,
    ) -> Result<(), TxnError> {
        let entry = self.entry(id).ok_or(TxnError::InvalidProducerIdMapping)?;
        if let Some(t) = entry.add_partitions(producer_id, epoch, &partitions, crate::now_ms())? {
            self.transition(t).await?;
        }
        let ctx = self.shard()?.ctx.clone();
        let begins = partitions
            .iter()
            .map(|(t, p)| markers::begin_txn_on_partition(&ctx, t, *p, producer_id, epoch));
        for r in futures::future::join_all(begins).await {
            r.map_err(|e| {
                tracing::warn!(transactional_id = id, error = %e, "partition did not accept the transaction");
                TxnError::CoordinatorNotAvailable
            })?;
        }
        Ok(())
    }

    /// KIP-890 verify-only AddPartitionsToTxn.
    pub fn verify(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<bool>, TxnError> {
        self.entry(id)
            .ok_or(TxnError::InvalidProducerIdMapping)?
            .verify(producer_id, epoch, partitions)
    }

    /// EndTxn: durable Prepare state, then the markers and completion in the background (the
    /// client hears back once the outcome is decided, as with Kafka). Returns the producer id
    /// and epoch the client continues with (bumped for KIP-890 clients, a new producer id at
    /// epoch 0 once the bump exhausted the epochs).
    pub async fn end_txn(
        self: &Rc<Self>,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        bump: bool,
    ) -> Result<(i64, i16), TxnError> {
        let mut entry = self.entry(id).ok_or(TxnError::InvalidProducerIdMapping)?;
        // Only a bump past the last epoch needs a producer id; waiting for a block is rare.
        let shard = if bump && epoch_exhausted(entry.meta.producer_epoch) {
            let shard = self.producer_ids_ready().await?;
            entry = self.entry(id).ok_or(TxnError::InvalidProducerIdMapping)?;
            Some(shard)
        } else {
            None
        };
        let mut new_pid = pid_source(shard.as_ref());
        match entry.end_txn(
            producer_id,
            epoch,
            commit,
            bump,
            crate::now_ms(),
            &mut new_pid,
        )? {
            EndPlan::Done => Ok((entry.meta.producer_id, entry.meta.producer_epoch)),
            EndPlan::Prepare(t) => {
                let answer = t.ids_after_completion();
                if t.next_producer_id != -1 {
                    tracing::info!(
                        transactional_id = id,
                        producer_id = t.producer_id,
                        next_producer_id = t.next_producer_id,
                        "the producer epoch is exhausted; the producer continues with a new producer id"
                    );
                }
                self.transition(t).await?;
                self.spawn_completion(id.to_string());
                Ok(answer)
            }
        }
    }

    fn spawn_completion(self: &Rc<Self>, id: String) {
        let me = self.clone();
        tokio::task::spawn_local(async move { me.complete(&id).await });
    }

    /// Writes the markers of a prepared transaction to all its partitions concurrently, each
    /// retried until it succeeds (or its topic is gone), then persists the Complete state.
    async fn complete(&self, id: &str) {
        let Some(entry) = self.entry(id) else { return };
        let m = &entry.meta;
        let commit = match m.state {
            TxnState::PrepareCommit => true,
            TxnState::PrepareAbort => false,
            _ => return,
        };
        let Ok(shard) = self.shard() else { return };
        let ctx = shard.ctx.clone();
        let marker = TxnMarker {
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            coordinator_epoch: self
                .loaded
                .epoch_of(txn_partition(id, self.partition_count()))
                .flatten()
                .unwrap_or(SINGLE_NODE_EPOCH),
            commit,
        };
        let writes = m.partitions.iter().map(|(topic, p)| {
            let ctx = ctx.clone();
            async move {
                loop {
                    match markers::write(&ctx, topic, *p, marker).await {
                        Ok(()) => return,
                        Err(e) => {
                            if ctx.catalog.snapshot().get(topic).is_none() {
                                // Kafka drops markers for deleted topics.
                                return;
                            }
                            if self.entry(id).is_none() {
                                // Unloaded: another node coordinates it now and completes it.
                                return;
                            }
                            tracing::warn!(transactional_id = id, topic = %topic, partition = p, error = %e, "writing a transaction marker failed; retrying");
                            tokio::time::sleep(MARKER_RETRY).await;
                        }
                    }
                }
            }
        });
        futures::future::join_all(writes).await;
        loop {
            let Some(entry) = self.entry(id) else { return };
            let target = match entry.complete(crate::now_ms()) {
                Ok(t) => t,
                Err(_) => return,
            };
            match self.transition(target).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(transactional_id = id, error = %e, "completing a transaction failed; retrying");
                    tokio::time::sleep(MARKER_RETRY).await;
                }
            }
        }
    }

    /// Aborts transactions open longer than their timeout, fencing their producers.
    pub async fn abort_timed_out(self: &Rc<Self>, now: i64) {
        let expired: Vec<TxnEntry> = self
            .txns
            .borrow()
            .values()
            .filter(|e| e.timed_out(now))
            .cloned()
            .collect();
        let tv2 = self.txn_version() >= 2;
        for e in expired {
            let id = e.meta.transactional_id.clone();
            // An exhausted epoch's TV2 abort rotates the producer id, which needs a block.
            let (e, shard) = if tv2 && epoch_exhausted(e.meta.producer_epoch) {
                let shard = match self.producer_ids_ready().await {
                    Ok(s) => s,
                    Err(err) => {
                        tracing::warn!(transactional_id = %id, error = %err, "aborting a timed-out transaction failed");
                        continue;
                    }
                };
                match self.entry(&id) {
                    Some(e) if e.timed_out(now) => (e, Some(shard)),
                    _ => continue,
                }
            } else {
                (e, None)
            };
            let Ok(t) = e.fence_and_abort(now, tv2, &mut pid_source(shard.as_ref())) else {
                continue;
            };
            tracing::info!(transactional_id = %id, producer_id = e.meta.producer_id, "aborting a transaction past its timeout");
            match self.transition(t).await {
                Ok(()) => self.spawn_completion(id),
                Err(err) => {
                    tracing::warn!(transactional_id = %id, error = %err, "aborting a timed-out transaction failed")
                }
            }
        }
    }

    /// Removes the transactional ids with no transaction open (Empty, CompleteCommit,
    /// CompleteAbort) whose last update is at least `expiration_ms` old, as Kafka's
    /// `removeExpiredTransactionalIds`: each gets a tombstone in `__transaction_state` (so a
    /// reload forgets it too, and compaction drops its history), and only once that is
    /// durable leaves memory. Meanwhile the id is pending Dead: requests for it get
    /// CONCURRENT_TRANSACTIONS, and one that changed it first keeps it. Returns how many
    /// were removed.
    pub async fn remove_expired(&self, now: i64, expiration_ms: i64) -> usize {
        let expired: Vec<String> = {
            let mut txns = self.txns.borrow_mut();
            txns.values_mut()
                .filter(|e| {
                    e.pending.is_none()
                        && matches!(
                            e.meta.state,
                            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                        )
                        && e.meta.last_update_ms <= now - expiration_ms
                })
                .map(|e| {
                    e.pending = Some(TxnState::Dead);
                    e.meta.transactional_id.clone()
                })
                .collect()
        };
        let mut removed = 0;
        for id in expired {
            let tombstone = TxnRecord {
                transactional_id: id.clone(),
                value: None,
            };
            let r = self.append(self.partition_of(&id), tombstone, 0).await;
            let mut txns = self.txns.borrow_mut();
            match r {
                Ok(()) => {
                    txns.remove(&id);
                    removed += 1;
                    tracing::info!(transactional_id = %id, "removed an expired transactional id");
                }
                Err(e) => {
                    if let Some(entry) = txns.get_mut(&id) {
                        entry.pending = None;
                    }
                    tracing::warn!(transactional_id = %id, error = %e, "removing an expired transactional id failed; kept until the next pass");
                }
            }
        }
        removed
    }

    pub fn describe(&self, id: &str) -> Option<TxnMetadata> {
        self.entry(id).map(|e| e.meta)
    }

    /// ListTransactions rows matching the filters (Kafka's `listTransactionStates`): empty
    /// state or producer filters match all; `min_duration_ms` >= 0 keeps transactions started
    /// longer ago than that.
    pub fn list(
        &self,
        states: &[TxnState],
        producer_ids: &[i64],
        min_duration_ms: i64,
        pattern: Option<&TopicRegex>,
    ) -> Vec<TxnListing> {
        let now = crate::now_ms();
        self.txns
            .borrow()
            .values()
            .map(|e| &e.meta)
            .filter(|m| m.state != TxnState::Dead)
            .filter(|m| states.is_empty() || states.contains(&m.state))
            .filter(|m| producer_ids.is_empty() || producer_ids.contains(&m.producer_id))
            .filter(|m| min_duration_ms < 0 || now - m.start_ms > min_duration_ms)
            .filter(|m| pattern.is_none_or(|r| r.matches(&m.transactional_id)))
            .map(|m| TxnListing {
                transactional_id: m.transactional_id.clone(),
                producer_id: m.producer_id,
                state: m.state,
            })
            .collect()
    }
}

/// Producer ids from the block `shard` made ready (`producer_ids_ready`); `None` when none
/// was, because none was expected to be needed.
fn pid_source(shard: Option<&Rc<ShardState>>) -> impl FnMut() -> Result<i64, TxnError> + '_ {
    move || {
        let s = shard
            .ok_or_else(|| TxnError::ProducerIds("no producer id block was made ready".into()))?;
        s.ctx
            .producer_ids
            .next()
            .map_err(|e| TxnError::ProducerIds(e.to_string()))
    }
}

async fn timeout_loop(txns: Weak<TxnShard>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(t) = txns.upgrade() else { return };
        t.abort_timed_out(crate::now_ms()).await;
    }
}

async fn expiration_loop(txns: Weak<TxnShard>, interval: Duration, expiration_ms: i64) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(t) = txns.upgrade() else { return };
        t.remove_expired(crate::now_ms(), expiration_ms).await;
    }
}
