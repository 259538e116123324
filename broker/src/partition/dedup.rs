//! Dedup by message id (issue 20; NATS JetStream's `Nats-Msg-Id` semantics): a record whose
//! `strom.dedup.header` value was appended to the partition within `strom.dedup.window.ms`
//! is not appended again, and the produce is answered with the original record's offset.
//!
//! The window is an id → (offset, time) map in insertion order, bounded by
//! `strom.dedup.max.ids`: beyond it the oldest ids are evicted (and counted) before their
//! window ends. It lives on the partition's home shard, next to the producer state, and like
//! it is changed only in the append's synchronous first phase, so pipelined batches see each
//! other's ids. It is not persisted: at open (or when dedup is turned on) it is rebuilt
//! from the log tail that the window covers (records' timestamps from `now - window` on), so
//! it survives restarts and kill -9 exactly as far as the log does.
//!
//! A batch mixing new and duplicate records is rebuilt without the duplicates, keeping its
//! base offset, last offset delta and the producer's base sequence (`records::rebuild`): the
//! batch still spans all of its offsets and sequence numbers, the duplicates leaving an
//! offset gap as compaction does. So an idempotent producer's next sequence number is what
//! it expects, the response's base offset still maps record i to base + i for the records
//! kept, and producer state rebuilt from the log is unchanged. A batch of duplicates only is
//! not appended at all from a plain producer; from an idempotent one it is appended empty
//! (its sequence range must be consumed, or the producer's next batch would be out of
//! order), as Kafka's cleaner keeps empty batches for the same reason.
//!
//! Transactional batches are neither checked nor remembered: an aborted transaction's ids
//! would otherwise refuse the retry of its records, and transactions already give exactly
//! once.

use std::collections::hash_map::{Entry, RandomState};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use bytes::Bytes;
use siphasher::sip128::{Hasher128, SipHasher13};
use storage::batch::BatchHeader;

use super::records::{self, RecordsError};
use crate::config::ai_flow::DedupSettings;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    offset: i64,
    at_ms: i64,
}

/// An id as the window keeps it: its 128-bit SipHash-1-3 under the window's secret random
/// key, not its bytes. Dedup runs on every record of the topic, and a window of 1M ids as
/// owned byte strings was one allocation (and one free at eviction) per record, a pointer
/// chased at every key comparison, and 50+ bytes per id.
///
/// Two different ids are taken for one (a new record dropped as a duplicate) only if their
/// hashes collide. SipHash is a PRF: to a client that does not know the key (random per
/// window, never sent anywhere) the hashes of distinct ids are independent uniform 128-bit
/// values, so a window of n ids holds a colliding pair with probability below n²/2¹²⁹ —
/// for the 1M-id default 1.5·10⁻²⁷, and over 10¹⁵ records checked against full windows
/// about 10⁻¹⁸: far below the odds of an undetected memory or disk error corrupting the
/// id instead. A chosen-id attack needs the key.
pub type Id = u128;

/// The map's hasher: an `Id` is already a uniform keyed hash, so its low 64 bits are the
/// bucket hash as they are.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u128` is used (an Id's `Hash`); folded in for completeness.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u128(&mut self, v: u128) {
        self.0 = v as u64;
    }
}

type IdMap<V> = HashMap<Id, V, BuildHasherDefault<IdHasher>>;

/// The ids of one partition's dedup window.
#[derive(Debug)]
pub struct DedupWindow {
    /// The header name the window was built for: another one starts a new window.
    header: String,
    /// The SipHash key of the window's ids (`Id`): random, in memory only (a window rebuilt
    /// from the log after a restart hashes the ids again under a new key).
    key: (u64, u64),
    ids: IdMap<Seen>,
    /// Insertion (= offset) order, for expiry, eviction and truncation.
    order: VecDeque<(Id, Seen)>,
}

/// What the window decided about one batch.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// No duplicate: append the batch as it is.
    Keep,
    /// Append this batch instead (duplicates dropped; possibly no records left).
    Rebuilt {
        batch: Bytes,
        header: BatchHeader,
        duplicates: u32,
        /// The original offset of the batch's first record, when it is a duplicate.
        first_original: Option<i64>,
    },
    /// Every record is a duplicate; nothing to append. The first record's original offset.
    AllDuplicates {
        first_original: i64,
        duplicates: u32,
    },
}

/// The ids a batch brings, to remember once its offset is known.
pub type NewIds = Vec<(Id, i64)>;

impl DedupWindow {
    pub fn new(header: &str) -> DedupWindow {
        // std's RandomState is seeded from the OS once per thread and then varied per
        // instance: its hashes of two constants are two secret random words.
        let seed = RandomState::new();
        DedupWindow {
            header: header.to_string(),
            key: (seed.hash_one(0u8), seed.hash_one(1u8)),
            ids: IdMap::default(),
            order: VecDeque::new(),
        }
    }

    /// The id of a header value in this window (`Id`).
    pub fn id(&self, bytes: &[u8]) -> Id {
        let mut h = SipHasher13::new_with_keys(self.key.0, self.key.1);
        h.write(bytes);
        h.finish128().as_u128()
    }

    pub fn header(&self) -> &str {
        &self.header
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The offset an id was appended at, if it is still in the window at `now_ms`.
    pub fn lookup(&self, id: &[u8], now_ms: i64, window_ms: i64) -> Option<i64> {
        self.lookup_id(self.id(id), now_ms, window_ms)
    }

    fn lookup_id(&self, id: Id, now_ms: i64, window_ms: i64) -> Option<i64> {
        self.ids
            .get(&id)
            .filter(|s| s.at_ms.saturating_add(window_ms) > now_ms)
            .map(|s| s.offset)
    }

    /// Forgets the ids whose window ended.
    pub fn expire(&mut self, now_ms: i64, window_ms: i64) {
        while let Some((id, seen)) = self.order.front() {
            if seen.at_ms.saturating_add(window_ms) > now_ms {
                break;
            }
            let (id, seen) = (*id, *seen);
            self.forget(id, seen);
            self.order.pop_front();
        }
    }

    /// Drops `id` from the map if `seen` is still its entry (the order queue also holds
    /// entries that a later insert of the same id replaced).
    fn forget(&mut self, id: Id, seen: Seen) -> bool {
        match self.ids.entry(id) {
            Entry::Occupied(e) if *e.get() == seen => {
                e.remove();
                true
            }
            _ => false,
        }
    }

    /// Remembers the header value `id` at `offset`; returns how many ids were evicted to
    /// stay within `max_ids`.
    pub fn insert(&mut self, id: &[u8], offset: i64, at_ms: i64, max_ids: usize) -> u64 {
        self.insert_id(self.id(id), offset, at_ms, max_ids)
    }

    fn insert_id(&mut self, id: Id, offset: i64, at_ms: i64, max_ids: usize) -> u64 {
        let seen = Seen { offset, at_ms };
        self.ids.insert(id, seen);
        self.order.push_back((id, seen));
        let mut evicted = 0;
        while self.ids.len() > max_ids {
            let Some((old, s)) = self.order.pop_front() else {
                break;
            };
            if self.forget(old, s) {
                evicted += 1;
            }
        }
        evicted
    }

    /// Forgets the ids at or above `offset` (an append that failed, a truncated log).
    pub fn truncate_from(&mut self, offset: i64) {
        while let Some((id, seen)) = self.order.back() {
            if seen.offset < offset {
                break;
            }
            let (id, seen) = (*id, *seen);
            self.forget(id, seen);
            self.order.pop_back();
        }
    }

    /// Decides about one produced batch (non-transactional, validated) and lists the ids it
    /// brings with their offset deltas. A duplicate is an id in the window, or one seen
    /// earlier in the same batch; records without the header are always new.
    pub fn check(
        &self,
        batch: &Bytes,
        header: &BatchHeader,
        settings: &DedupSettings,
        next_offset: i64,
        now_ms: i64,
        max_decompressed: usize,
    ) -> Result<(Verdict, NewIds), RecordsError> {
        // Sized from the count the batch claims (validation checked it against its records;
        // bounded by the batch's size all the same, as nothing is allocated from a count read
        // off the wire).
        let count = (header.records_count.max(0) as usize).min(batch.len());
        let mut new_ids: NewIds = Vec::with_capacity(count);
        // Per record, whether it is kept: the records are copied into a rebuilt batch only
        // when a duplicate was found (a second pass), not for every batch.
        let mut keep = Vec::with_capacity(count);
        let mut kept_count = 0i32;
        let mut max_ts = -1i64;
        let mut duplicates = 0u32;
        let mut first_original = None;
        let mut first = true;
        // `in_batch` maps this batch's new ids to their offset deltas. Each id is hashed once.
        let mut in_batch: IdMap<i64> = IdMap::with_capacity_and_hasher(count, Default::default());
        records::for_each_record(batch, max_decompressed, |r| {
            let id = r.header(&settings.header).flatten().map(|id| self.id(id));
            let original = id.and_then(|id| {
                self.lookup_id(id, now_ms, settings.window_ms)
                    .or_else(|| in_batch.get(&id).map(|delta| next_offset + delta))
            });
            match original {
                Some(o) => {
                    duplicates += 1;
                    if first {
                        first_original = Some(o);
                    }
                }
                None => {
                    if let Some(id) = id {
                        in_batch.insert(id, r.offset_delta);
                        new_ids.push((id, r.offset_delta));
                    }
                    kept_count += 1;
                    max_ts = max_ts.max(header.base_timestamp.saturating_add(r.timestamp_delta));
                }
            }
            keep.push(original.is_none());
            first = false;
        })?;
        if duplicates == 0 {
            return Ok((Verdict::Keep, new_ids));
        }
        let idempotent = header.producer_id >= 0 && header.base_sequence >= 0;
        if kept_count == 0 && !idempotent {
            return Ok((
                Verdict::AllDuplicates {
                    first_original: first_original.unwrap_or(next_offset),
                    duplicates,
                },
                new_ids,
            ));
        }
        let max_ts = if kept_count == 0 {
            header.max_timestamp
        } else {
            max_ts
        };
        let mut kept = Vec::new();
        let mut index = 0;
        records::for_each_record(batch, max_decompressed, |r| {
            if keep.get(index).copied().unwrap_or(false) {
                kept.extend_from_slice(r.raw);
            }
            index += 1;
        })?;
        let rebuilt = records::rebuild(batch, &kept, kept_count, max_ts)?;
        let new_header = BatchHeader::parse(&rebuilt).map_err(|_| RecordsError::Malformed {
            index: 0,
            reason: "rebuilt batch does not parse",
        })?;
        Ok((
            Verdict::Rebuilt {
                batch: rebuilt,
                header: new_header,
                duplicates,
                first_original,
            },
            new_ids,
        ))
    }

    /// Remembers the ids of a batch appended at `base_offset` (`NewIds` carry offset
    /// deltas); returns the evictions.
    pub fn remember(
        &mut self,
        ids: NewIds,
        base_offset: i64,
        now_ms: i64,
        settings: &DedupSettings,
    ) -> u64 {
        ids.into_iter()
            .map(|(id, delta)| self.insert_id(id, base_offset + delta, now_ms, settings.max_ids))
            .sum()
    }

    /// Adds the ids of one stored batch (rebuilding the window from the log): each record's
    /// time is its timestamp (the batch's for LogAppendTime), so an id read back is
    /// remembered until its record's timestamp plus the window.
    pub fn replay_batch(
        &mut self,
        batch: &[u8],
        settings: &DedupSettings,
        max_decompressed: usize,
    ) -> Result<(), RecordsError> {
        let Ok(h) = BatchHeader::parse(batch) else {
            return Ok(());
        };
        if h.is_control() || h.is_transactional() || h.records_count == 0 {
            return Ok(());
        }
        let log_append = h.timestamp_type_log_append();
        let mut found = Vec::new();
        records::for_each_record(batch, max_decompressed, |r| {
            if let Some(Some(id)) = r.header(&settings.header) {
                let ts = if log_append {
                    h.max_timestamp
                } else {
                    h.base_timestamp.saturating_add(r.timestamp_delta)
                };
                found.push((self.id(id), h.base_offset + r.offset_delta, ts));
            }
        })?;
        for (id, offset, ts) in found {
            // Evictions while rebuilding are not counted: they are the ids a full window
            // had already evicted before the restart.
            self.insert_id(id, offset, ts, settings.max_ids);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::TestBatch;
    use kafka_protocol::records::Compression;
    use proptest::prelude::*;

    fn settings() -> DedupSettings {
        DedupSettings {
            header: "msg-id".into(),
            window_ms: 1_000,
            max_ids: 100,
        }
    }

    /// A batch of records whose `msg-id` headers are `ids` (None: no header).
    fn batch(
        ids: &[Option<&str>],
        compression: Compression,
        producer: Option<(i64, i32)>,
    ) -> Bytes {
        let mut b = TestBatch::new(ids.len())
            .compression(compression)
            .at(10_000);
        if let Some((pid, seq)) = producer {
            b = b.idempotent(pid, 0, seq);
        }
        b.encode_with(|records| {
            for (r, id) in records.iter_mut().zip(ids) {
                if let Some(id) = id {
                    r.headers.insert(
                        kafka_protocol::protocol::StrBytes::from_static_str("msg-id"),
                        Some(Bytes::copy_from_slice(id.as_bytes())),
                    );
                }
            }
        })
    }

    fn header(b: &Bytes) -> BatchHeader {
        BatchHeader::parse(b).unwrap()
    }

    /// (offset delta, value) of each record of a batch.
    fn records_of(b: &[u8]) -> Vec<(i64, Vec<u8>)> {
        let mut out = Vec::new();
        records::for_each_record(b, 1 << 20, |r| {
            out.push((r.offset_delta, r.value.unwrap_or_default().to_vec()))
        })
        .unwrap();
        out
    }

    #[test]
    fn given_new_ids_when_checked_then_kept_and_remembered_at_their_offsets() {
        let mut w = DedupWindow::new("msg-id");
        let s = settings();
        let b = batch(&[Some("a"), None, Some("b")], Compression::None, None);
        let (v, ids) = w.check(&b, &header(&b), &s, 40, 0, 1 << 20).unwrap();
        assert_eq!(v, Verdict::Keep);
        w.remember(ids, 40, 0, &s);
        assert_eq!(w.lookup(b"a", 10, 1_000), Some(40));
        assert_eq!(w.lookup(b"b", 10, 1_000), Some(42));
        // The window ends 1000 ms after the append.
        assert_eq!(w.lookup(b"a", 1_000, 1_000), None);
        w.expire(1_000, 1_000);
        assert!(w.is_empty());
    }

    #[test]
    fn given_mixed_batch_when_checked_then_rebuilt_keeping_offsets_and_sequences() {
        for c in [
            Compression::None,
            Compression::Gzip,
            Compression::Zstd,
            Compression::Lz4,
            Compression::Snappy,
        ] {
            let mut w = DedupWindow::new("msg-id");
            let s = settings();
            w.insert(b"a", 7, 0, 100);
            // a: duplicate of offset 7; c twice: the second is a duplicate of the first.
            let b = batch(&[Some("a"), Some("c"), None, Some("c")], c, Some((5, 10)));
            let h = header(&b);
            let (v, ids) = w.check(&b, &h, &s, 50, 0, 1 << 20).unwrap();
            let Verdict::Rebuilt {
                batch: nb,
                header: nh,
                duplicates,
                first_original,
            } = v
            else {
                panic!("{c:?}: not rebuilt");
            };
            assert_eq!((duplicates, first_original), (2, Some(7)), "{c:?}");
            // Same offsets span and sequence range, two records, a valid stored batch.
            assert_eq!(nh.last_offset_delta, h.last_offset_delta);
            assert_eq!((nh.producer_id, nh.base_sequence), (5, 10));
            assert_eq!(nh.records_count, 2);
            assert_eq!(nh.compression(), h.compression());
            storage::batch::validate_stored(&nb).unwrap();
            let kept: Vec<i64> = records_of(&nb).iter().map(|r| r.0).collect();
            assert_eq!(kept, vec![1, 2], "{c:?}");
            assert_eq!(ids.iter().map(|(_, d)| *d).collect::<Vec<_>>(), vec![1]);
        }
    }

    #[test]
    fn given_only_duplicates_when_checked_then_plain_producer_appends_nothing_idempotent_an_empty_batch(
    ) {
        let mut w = DedupWindow::new("msg-id");
        let s = settings();
        w.insert(b"a", 3, 0, 100);
        let b = batch(&[Some("a"), Some("a")], Compression::None, None);
        let (v, _) = w.check(&b, &header(&b), &s, 9, 0, 1 << 20).unwrap();
        assert_eq!(
            v,
            Verdict::AllDuplicates {
                first_original: 3,
                duplicates: 2
            }
        );
        let b = batch(&[Some("a")], Compression::Gzip, Some((1, 4)));
        let (v, _) = w.check(&b, &header(&b), &s, 9, 0, 1 << 20).unwrap();
        let Verdict::Rebuilt {
            batch: nb,
            header: nh,
            ..
        } = v
        else {
            panic!()
        };
        assert_eq!(
            (nh.records_count, nh.last_offset_delta, nh.base_sequence),
            (0, 0, 4)
        );
        assert_eq!(nh.compression(), 0);
        storage::batch::validate_stored(&nb).unwrap();
    }

    #[test]
    fn given_full_window_when_inserting_then_oldest_evicted_and_counted() {
        let mut w = DedupWindow::new("msg-id");
        let mut evicted = 0;
        for i in 0..10u8 {
            evicted += w.insert(&[i], i as i64, 0, 4);
        }
        assert_eq!((w.len(), evicted), (4, 6));
        assert_eq!(w.lookup(&[5], 0, 10), None);
        assert_eq!(w.lookup(&[6], 0, 10), Some(6));
        w.truncate_from(8);
        assert_eq!(
            (w.lookup(&[7], 0, 10), w.lookup(&[8], 0, 10)),
            (Some(7), None)
        );
    }

    #[test]
    fn given_stored_batches_when_replayed_then_window_rebuilt_with_record_times() {
        let s = settings();
        let mut w = DedupWindow::new("msg-id");
        let mut b = batch(&[Some("x"), Some("y")], Compression::Zstd, None).to_vec();
        storage::batch::set_base_offset(&mut b, 100);
        w.replay_batch(&b, &s, 1 << 20).unwrap();
        // TestBatch::at(10_000): records at 10000, 10001.
        assert_eq!(w.lookup(b"y", 10_500, 1_000), Some(101));
        assert_eq!(w.lookup(b"x", 11_000, 1_000), None);
    }

    proptest! {
        /// Whatever the mix, the rebuilt batch keeps exactly the first occurrence of each
        /// id not in the window, plus every record without an id, at their own deltas.
        #[test]
        fn prop_rebuilt_batch_keeps_exactly_the_new_records(ids in proptest::collection::vec(proptest::option::of(0u8..6), 1..20), known in proptest::collection::vec(0u8..6, 0..4)) {
            let mut w = DedupWindow::new("msg-id");
            for k in &known {
                w.insert(format!("id{k}").as_bytes(), 1, 0, 100);
            }
            let names: Vec<Option<String>> = ids.iter().map(|i| i.map(|i| format!("id{i}"))).collect();
            let refs: Vec<Option<&str>> = names.iter().map(|n| n.as_deref()).collect();
            let b = batch(&refs, Compression::Gzip, Some((3, 0)));
            let (v, _) = w.check(&b, &header(&b), &settings(), 10, 0, 1 << 20).unwrap();
            let mut seen = std::collections::HashSet::new();
            let expected: Vec<i64> = names.iter().enumerate().filter(|(_, n)| match n {
                None => true,
                Some(n) => !known.iter().any(|k| format!("id{k}") == *n) && seen.insert(n.clone()),
            }).map(|(i, _)| i as i64).collect();
            let kept: Vec<i64> = match v {
                Verdict::Keep => (0..ids.len() as i64).collect(),
                Verdict::Rebuilt { batch, .. } => records_of(&batch).iter().map(|r| r.0).collect(),
                Verdict::AllDuplicates { .. } => unreachable!("idempotent batches are rebuilt"),
            };
            prop_assert_eq!(kept, expected);
        }
    }
}
