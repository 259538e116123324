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
//! Retention and compaction need no hook: a read drops offsets below the log start, and an
//! offset whose record the cleaner removed (or a later one under the same offset, never) is
//! checked against the key at read time and skipped.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

use super::record_view;
use super::Partition;

/// Offsets kept per key (the most a `?last=` read returns).
pub const PER_KEY: usize = 256;
/// Keys kept per partition.
pub const MAX_KEYS: usize = 100_000;
/// Log bytes read per step while building the index.
const BUILD_READ: usize = 1 << 20;

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
}

impl KeyIndex {
    pub fn new(max_keys: usize) -> KeyIndex {
        KeyIndex {
            max_keys: max_keys.max(1),
            ..Default::default()
        }
    }

    pub fn insert(&mut self, key: &[u8], offset: i64) {
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

    /// The key's last `n` offsets at or above `log_start`, oldest first.
    pub fn last(&self, key: &[u8], n: usize, log_start: i64) -> Vec<i64> {
        let Some(e) = self.keys.get(key) else {
            return Vec::new();
        };
        let live: Vec<i64> = e
            .offsets
            .iter()
            .copied()
            .filter(|o| *o >= log_start)
            .collect();
        live[live.len().saturating_sub(n)..].to_vec()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
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

impl Partition {
    /// Whether the topic indexes keys (`strom.key.index`).
    fn indexes_keys(&self) -> bool {
        self.settings().key_index
    }

    /// The index, built from the log if it is not yet (or dropped when the config is off).
    fn with_key_index<R>(&self, f: impl FnOnce(&mut KeyIndex) -> R) -> Option<R> {
        if !self.indexes_keys() {
            self.key_index.borrow_mut().take();
            return None;
        }
        let mut slot = self.key_index.borrow_mut();
        if slot.is_none() {
            *slot = Some(self.build_key_index());
        }
        slot.as_mut().map(f)
    }

    fn build_key_index(&self) -> KeyIndex {
        let started = std::time::Instant::now();
        let max = self.settings().max_decompressed_bytes;
        let mut index = KeyIndex::new(MAX_KEYS);
        let hw = self.high_watermark();
        let mut offset = self.log.log_start_offset();
        while offset < hw {
            let Ok(r) = self.log.read(offset, BUILD_READ, hw) else {
                break;
            };
            let mut next = offset;
            for chunk in &r.chunks {
                for (h, batch) in storage::batch::BatchIter::new(chunk).flatten() {
                    if h.last_offset() >= offset {
                        index.index_batch(h.base_offset, batch, max);
                    }
                    next = next.max(h.last_offset() + 1);
                }
            }
            if next <= offset {
                break;
            }
            offset = next;
        }
        tracing::info!(topic = %self.topic, partition = self.index, keys = index.len(), elapsed_ms = started.elapsed().as_millis() as u64, "key index built from the log");
        index
    }

    /// After an append of `batch` at `base_offset`: its keys into the index.
    pub fn index_appended(&self, base_offset: i64, batch: &[u8]) {
        let max = self.settings().max_decompressed_bytes;
        self.with_key_index(|ix| ix.index_batch(base_offset, batch, max));
    }

    /// After a follower appended the leader's `run` (stored batches, at their offsets): an
    /// index already built takes their keys. None is built here, so a replica nobody reads
    /// by key never scans its log.
    pub fn index_replicated(&self, run: &[u8]) {
        if !self.indexes_keys() {
            self.key_index.borrow_mut().take();
            return;
        }
        let max = self.settings().max_decompressed_bytes;
        if let Some(ix) = self.key_index.borrow_mut().as_mut() {
            for (h, batch) in storage::batch::BatchIter::new(run).flatten() {
                ix.index_batch(h.base_offset, batch, max);
            }
        }
    }

    /// The last `n` records of `key`: `None` if the topic does not index keys.
    pub fn records_by_key(&self, key: &[u8], n: usize) -> Option<Vec<KeyHit>> {
        let log_start = self.log.log_start_offset();
        let offsets = self.with_key_index(|ix| ix.last(key, n, log_start))?;
        let hw = self.high_watermark();
        let mut hits = Vec::with_capacity(offsets.len());
        for offset in offsets.into_iter().filter(|o| *o < hw) {
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn given_many_writes_when_reading_then_last_n_oldest_first() {
        let mut ix = KeyIndex::new(10);
        for o in 0..1000 {
            ix.insert(if o % 2 == 0 { b"a" } else { b"b" }, o);
        }
        assert_eq!(ix.last(b"a", 3, 0), vec![994, 996, 998]);
        assert_eq!(ix.last(b"b", 2, 0), vec![997, 999]);
        // Bounded per key; the log start hides what retention removed.
        assert_eq!(ix.last(b"a", 1000, 0).len(), PER_KEY);
        assert_eq!(ix.last(b"a", 1000, 997), vec![998]);
        assert!(ix.last(b"c", 3, 0).is_empty());
    }

    #[test]
    fn given_more_keys_than_the_bound_when_inserting_then_the_oldest_evicted() {
        let mut ix = KeyIndex::new(3);
        for (o, k) in [b"a", b"b", b"c", b"a", b"d"].iter().enumerate() {
            ix.insert(*k, o as i64);
        }
        assert_eq!(ix.len(), 3);
        assert!(ix.last(b"b", 1, 0).is_empty(), "b was written longest ago");
        assert_eq!(ix.last(b"a", 5, 0), vec![0, 3]);
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
                prop_assert_eq!(ix.last(&[k], n, 0), want);
            }
        }
    }
}
