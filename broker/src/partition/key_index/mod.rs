//! Session reads by key (issue 21, the requirements document's chapter 3.1): for topics with
//! `strom.key.index=true`, each partition keeps key → its most recent offsets in memory, so
//! "the last N turns of session S" is N point reads instead of a scan of the partition.
//!
//! Bounded: `PER_KEY` offsets per key and `MAX_KEYS` keys per partition, the key written
//! longest ago evicted first. Built on the home shard from the log when first needed (the
//! first append or read after the broker started or the config was turned on), then kept up
//! to date by every append, a follower's of the leader's batches included (any replica
//! answers key reads). Lazily, so a start costs nothing for partitions nobody reads by
//! key; never persisted, so the index cannot disagree with the log after a crash; from the
//! whole partition, so a session idle for long reads the same records after a restart as
//! before (docs/ai-features.md, "Session reads by key").
//!
//! The build is a task of the shard that reads `BUILD_STEP` bytes of log per step and
//! yields between steps: a shard runs every partition it owns on one thread, and a 10M-record
//! build in one go (16.7 s) stalled every produce and fetch of that shard for as long. Key
//! reads of the partition wait for the build to end. The scan stops at the written end of
//! when it started (`target`), so a partition produced to faster than it scans still
//! finishes; each append completed since lies at or past it and is indexed as it completes,
//! during the build too, and one below it is left to the scan: each record once. (An append
//! during the build counts as written before the scanned records for the `MAX_KEYS`
//! eviction, which matters only past that many keys.) A truncation drops the index, and a
//! build under way with it (`KeySlot::reset`); a moved log start moves the scan with it.
//!
//! The index covers the whole written log, not only the committed part below the high
//! watermark: records a restarted leader holds past its checkpointed high watermark, or a
//! follower past the leader's, become readable when the high watermark passes them, and no
//! append will bring them to the index then. A read serves only offsets below the high
//! watermark, as Fetch does.
//!
//! Retention and compaction need no hook: a read drops offsets below the log start, and an
//! offset whose record the cleaner removed (or a later one under the same offset, never) is
//! checked against the key at read time and skipped.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::watch;

use super::record_view;
use super::Partition;

/// Offsets kept per key (the most a `?last=` read returns).
pub const PER_KEY: usize = 256;
/// Keys kept per partition.
pub const MAX_KEYS: usize = 100_000;
/// Log bytes read per step of a build (whole batches: the first one even if larger): ~600
/// uncompressed records of ~100 bytes, or a few thousand lz4-compressed ones (~2 ms of the
/// shard at 1 µs a record, benches/README.md "Session reads by key") between yields. At
/// 256 KiB a step took ~9 ms, and a produce to another partition, which waits for a step
/// at each of its hops between tasks, took 20 ms at its median.
const BUILD_STEP: usize = 64 << 10;

struct Entry {
    offsets: VecDeque<i64>,
    /// The write sequence number of the key's last update (for eviction).
    seq: u64,
}

/// The index of one partition.
#[derive(Default)]
pub struct KeyIndex {
    keys: HashMap<Bytes, Entry>,
    /// (key, seq) in write order; stale pairs (the key written again since) are skipped.
    order: VecDeque<(Bytes, u64)>,
    seq: u64,
    max_keys: usize,
    /// The build scans the log below this offset; appended batches from it on are indexed as
    /// they complete.
    scanned_to: i64,
    /// Records indexed (each record once: the tests hold the index to it).
    records: u64,
}

impl KeyIndex {
    pub fn new(max_keys: usize) -> KeyIndex {
        KeyIndex {
            max_keys: max_keys.max(1),
            ..Default::default()
        }
    }

    pub fn insert(&mut self, key: &[u8], offset: i64) {
        self.records += 1;
        self.seq += 1;
        let seq = self.seq;
        let key = match self.keys.get_key_value(key) {
            Some((k, _)) => k.clone(),
            None => Bytes::copy_from_slice(key),
        };
        let entry = self.keys.entry(key.clone()).or_insert_with(|| Entry {
            offsets: VecDeque::new(),
            seq,
        });
        entry.seq = seq;
        // Appends complete in offset order; an out-of-order one is placed where it belongs.
        match entry.offsets.back() {
            Some(&last) if last >= offset => {
                if let Err(at) = entry.offsets.binary_search(&offset) {
                    entry.offsets.insert(at, offset);
                }
            }
            _ => entry.offsets.push_back(offset),
        }
        while entry.offsets.len() > PER_KEY {
            entry.offsets.pop_front();
        }
        self.order.push_back((key, seq));
        while self.keys.len() > self.max_keys {
            let Some((k, s)) = self.order.pop_front() else {
                break;
            };
            if self.keys.get(&k).is_some_and(|e| e.seq == s) {
                self.keys.remove(&k);
            }
        }
        // Stale pairs pile up for keys written often: drop them once they dominate.
        if self.order.len() > 4 * self.keys.len() + 1024 {
            let keys = &self.keys;
            self.order
                .retain(|(k, s)| keys.get(k).is_some_and(|e| e.seq == *s));
        }
    }

    /// The key's last `n` offsets in `[log_start, end)`, oldest first: `end` the high
    /// watermark, so offsets not yet committed do not take the place of older ones.
    pub fn last(&self, key: &[u8], n: usize, log_start: i64, end: i64) -> Vec<i64> {
        let Some(e) = self.keys.get(key) else {
            return Vec::new();
        };
        let live: Vec<i64> = e
            .offsets
            .iter()
            .copied()
            .filter(|o| (log_start..end).contains(o))
            .collect();
        live[live.len().saturating_sub(n)..].to_vec()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Records indexed so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// A batch appended since the build began (the scan reads those below its target):
    /// indexed unless the scan takes it, so each record is indexed once.
    fn index_appended_batch(&mut self, base_offset: i64, batch: &[u8], max_decompressed: usize) {
        if base_offset >= self.scanned_to {
            self.index_batch(base_offset, batch, max_decompressed);
        }
    }

    /// Every keyed record of `batch` (its base offset given: the log assigned it).
    pub fn index_batch(&mut self, base_offset: i64, batch: &[u8], max_decompressed: usize) {
        // A produced batch still has the client's base offset (0) in its bytes.
        let r =
            record_view::for_each_record(batch, i64::MIN, max_decompressed, |h, offset, _, r| {
                if let Some(k) = r.key {
                    self.insert(k, offset - h.base_offset + base_offset);
                }
            });
        if let Err(e) = r {
            tracing::debug!(error = %e, "key index: batch not indexed");
        }
    }
}

/// A stored record a key read found: its offset and the log data holding it.
pub struct KeyHit {
    pub offset: i64,
    pub chunk: Bytes,
}

/// A build under way: the index so far and where the scan goes on.
pub struct Build {
    /// Its `scanned_to` is the scan's target, the written end when the build started.
    index: KeyIndex,
    next: i64,
    /// Which build this is: a step of one that was dropped finds another id (or none).
    id: u64,
    started: Instant,
    /// Dropped when the build ends, finished or dropped: wakes the key reads waiting.
    done: watch::Sender<()>,
}

#[derive(Default)]
pub enum KeyState {
    #[default]
    Absent,
    Building(Build),
    Ready(KeyIndex),
}

/// A partition's index and its build.
#[derive(Default)]
pub struct KeySlot {
    state: KeyState,
    builds: u64,
}

impl KeySlot {
    /// Drops the index and any build under way (its task stops at its next step; reads
    /// waiting on it wake and start another).
    pub fn reset(&mut self) {
        self.state = KeyState::Absent;
    }

    pub fn state(&self) -> &KeyState {
        &self.state
    }

    /// The index, once built.
    pub fn ready(&self) -> Option<&KeyIndex> {
        match &self.state {
            KeyState::Ready(ix) => Some(ix),
            _ => None,
        }
    }
}

impl Partition {
    /// Whether the topic indexes keys (`strom.key.index`).
    fn indexes_keys(&self) -> bool {
        self.settings().key_index
    }

    /// Starts a build on this shard: a task stepping through the log, yielding in between.
    fn start_key_build(self: &Rc<Self>, slot: &mut KeySlot) -> watch::Receiver<()> {
        slot.builds += 1;
        let id = slot.builds;
        let (done, waiting) = watch::channel(());
        let mut index = KeyIndex::new(MAX_KEYS);
        index.scanned_to = self.log.written_end_offset();
        slot.state = KeyState::Building(Build {
            index,
            next: self.log.log_start_offset(),
            id,
            started: Instant::now(),
            done,
        });
        let me = Rc::downgrade(self);
        tokio::task::spawn_local(async move {
            // The partition is not kept alive for its build: a deleted one ends it.
            while me.upgrade().is_some_and(|p| p.key_build_step(id)) {
                tokio::task::yield_now().await;
            }
        });
        waiting
    }

    /// One step of build `id`: false when it is over (done, dropped or replaced).
    fn key_build_step(&self, id: u64) -> bool {
        if !self.indexes_keys() {
            self.key_index.borrow_mut().reset();
            return false;
        }
        let max = self.settings().max_decompressed_bytes;
        let mut slot = self.key_index.borrow_mut();
        let KeyState::Building(b) = &mut slot.state else {
            return false;
        };
        if b.id != id {
            return false;
        }
        // Retention or DeleteRecords moved the log start past the scan: nothing below it is
        // served, so the scan skips it.
        b.next = b.next.max(self.log.log_start_offset());
        // Up to the written end when it started, past the high watermark: see the module's
        // comment.
        let target = b.index.scanned_to;
        match self.log.read(b.next, BUILD_STEP, target) {
            Ok(r) => {
                let mut next = b.next;
                for chunk in &r.chunks {
                    for (h, batch) in storage::batch::BatchIter::new(chunk).flatten() {
                        if h.last_offset() >= b.next {
                            b.index.index_batch(h.base_offset, batch, max);
                        }
                        next = next.max(h.last_offset() + 1);
                    }
                }
                if next > b.next && next < target {
                    b.next = next;
                    return true;
                }
            }
            // The log went offline: its reads fail too; the index keeps what was read.
            Err(e) => {
                tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "key index build stopped")
            }
        }
        let KeyState::Building(b) = std::mem::take(&mut slot.state) else {
            unreachable!("matched above");
        };
        let index = b.index;
        tracing::info!(topic = %self.topic, partition = self.index, keys = index.len(), records = index.records, elapsed_ms = b.started.elapsed().as_millis() as u64, "key index built from the log");
        slot.state = KeyState::Ready(index);
        false
    }

    /// After this leader appended `batch` at `base_offset` (its write completed): its keys
    /// into the index, or the build started if there is none (then the scan reads it: the
    /// write completed, so it lies below the scan's target).
    pub(super) fn index_appended(self: &Rc<Self>, base_offset: i64, batch: &[u8]) {
        if !self.indexes_keys() {
            self.key_index.borrow_mut().reset();
            return;
        }
        let max = self.settings().max_decompressed_bytes;
        let mut slot = self.key_index.borrow_mut();
        match &mut slot.state {
            KeyState::Absent => {
                self.start_key_build(&mut slot);
            }
            KeyState::Building(Build { index: ix, .. }) | KeyState::Ready(ix) => {
                ix.index_appended_batch(base_offset, batch, max);
            }
        }
    }

    /// After a follower appended the leader's `run` (stored batches, at their offsets): an
    /// index built or being built takes their keys (past the scan's target, as a leader's
    /// appends). None is built here, so a replica nobody reads by key never scans its log.
    pub fn index_replicated(&self, run: &[u8]) {
        if !self.indexes_keys() {
            self.key_index.borrow_mut().reset();
            return;
        }
        let max = self.settings().max_decompressed_bytes;
        if let KeyState::Building(Build { index: ix, .. }) | KeyState::Ready(ix) =
            &mut self.key_index.borrow_mut().state
        {
            for (h, batch) in storage::batch::BatchIter::new(run).flatten() {
                ix.index_appended_batch(h.base_offset, batch, max);
            }
        }
    }

    /// The last `n` committed records of `key`: `None` if the topic does not index keys.
    /// Waits for the index to be built.
    pub async fn records_by_key(self: &Rc<Self>, key: &[u8], n: usize) -> Option<Vec<KeyHit>> {
        let offsets = loop {
            if !self.indexes_keys() {
                self.key_index.borrow_mut().reset();
                return None;
            }
            let mut waiting = {
                let mut slot = self.key_index.borrow_mut();
                match &slot.state {
                    KeyState::Ready(ix) => {
                        let (start, hw) = (self.log.log_start_offset(), self.high_watermark());
                        break ix.last(key, n, start, hw);
                    }
                    KeyState::Building(b) => b.done.subscribe(),
                    KeyState::Absent => self.start_key_build(&mut slot),
                }
            };
            // Never sent on: `Err` when the build ends, done or dropped (then build again).
            let _ = waiting.changed().await;
        };
        let hw = self.high_watermark();
        let mut hits = Vec::with_capacity(offsets.len());
        for offset in offsets {
            // One batch holds the offset: the smallest read that returns it.
            if let Ok(r) = self.log.read(offset, 1, hw) {
                if let Some(chunk) = r.chunks.into_iter().next() {
                    hits.push(KeyHit { offset, chunk });
                }
            }
        }
        Some(hits)
    }
}

#[cfg(test)]
mod build_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn given_many_writes_when_reading_then_last_n_oldest_first() {
        let mut ix = KeyIndex::new(10);
        for o in 0..1000 {
            ix.insert(if o % 2 == 0 { b"a" } else { b"b" }, o);
        }
        assert_eq!(ix.last(b"a", 3, 0, i64::MAX), vec![994, 996, 998]);
        assert_eq!(ix.last(b"b", 2, 0, i64::MAX), vec![997, 999]);
        // Bounded per key; the log start hides what retention removed.
        assert_eq!(ix.last(b"a", 1000, 0, i64::MAX).len(), PER_KEY);
        assert_eq!(ix.last(b"a", 1000, 997, i64::MAX), vec![998]);
        assert!(ix.last(b"c", 3, 0, i64::MAX).is_empty());
    }

    #[test]
    fn given_more_keys_than_the_bound_when_inserting_then_the_oldest_evicted() {
        let mut ix = KeyIndex::new(3);
        for (o, k) in [b"a", b"b", b"c", b"a", b"d"].iter().enumerate() {
            ix.insert(*k, o as i64);
        }
        assert_eq!(ix.len(), 3);
        assert!(
            ix.last(b"b", 1, 0, i64::MAX).is_empty(),
            "b was written longest ago"
        );
        assert_eq!(ix.last(b"a", 5, 0, i64::MAX), vec![0, 3]);
    }

    proptest! {
        /// Against a model: the index answers what a scan of all writes would (within bounds).
        #[test]
        fn prop_index_matches_a_scan(keys in proptest::collection::vec(0u8..20, 1..600), n in 1usize..40) {
            let mut ix = KeyIndex::new(1000);
            for (o, k) in keys.iter().enumerate() {
                ix.insert(&[*k], o as i64);
            }
            for k in 0u8..20 {
                let all: Vec<i64> = keys.iter().enumerate().filter(|(_, x)| **x == k).map(|(o, _)| o as i64).collect();
                let want = all[all.len().saturating_sub(n.min(PER_KEY))..].to_vec();
                prop_assert_eq!(ix.last(&[k], n, 0, i64::MAX), want);
            }
        }
    }
}
