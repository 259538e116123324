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

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use bytes::Bytes;
use storage::batch::BatchHeader;

use super::records::{self, RecordsError};
use crate::config::ai_flow::DedupSettings;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    offset: i64,
    at_ms: i64,
}

/// An id as the window keeps it: one allocation shared by the map and the order queue.
pub type Id = Rc<[u8]>;

/// The ids come from clients, so the map's hasher is seeded per map (foldhash's quality
/// variant: several times faster than std's SipHash on short ids, which was a third of the
/// dedup cost per record, and still randomised).
type IdMap<V> = HashMap<Id, V, foldhash::quality::RandomState>;

/// The ids of one partition's dedup window.
#[derive(Debug, Default)]
pub struct DedupWindow {
    /// The header name the window was built for: another one starts a new window.
    header: String,
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
        DedupWindow {
            header: header.to_string(),
            ..Default::default()
        }
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
        self.ids
            .get(id)
            .filter(|s| s.at_ms.saturating_add(window_ms) > now_ms)
            .map(|s| s.offset)
    }

    /// Forgets the ids whose window ended.
    pub fn expire(&mut self, now_ms: i64, window_ms: i64) {
        while let Some((id, seen)) = self.order.front() {
            if seen.at_ms.saturating_add(window_ms) > now_ms {
                break;
            }
            if self.ids.get(id) == Some(seen) {
                self.ids.remove(id);
            }
            self.order.pop_front();
        }
    }

    /// Remembers `id` at `offset`; returns how many ids were evicted to stay within
    /// `max_ids`.
    pub fn insert(&mut self, id: Id, offset: i64, at_ms: i64, max_ids: usize) -> u64 {
        let seen = Seen { offset, at_ms };
        self.ids.insert(id.clone(), seen);
        self.order.push_back((id, seen));
        let mut evicted = 0;
        while self.ids.len() > max_ids {
            let Some((old, s)) = self.order.pop_front() else {
                break;
            };
            if self.ids.get(&old) == Some(&s) {
                self.ids.remove(&old);
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
            if self.ids.get(id) == Some(seen) {
                self.ids.remove(id);
            }
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
        let mut new_ids: NewIds = Vec::new();
        // Per record, whether it is kept: the records are copied into a rebuilt batch only
        // when a duplicate was found (a second pass), not for every batch.
        let mut keep = Vec::with_capacity(header.records_count.max(0) as usize);
        let mut kept_count = 0i32;
        let mut max_ts = -1i64;
        let mut duplicates = 0u32;
        let mut first_original = None;
        let mut first = true;
        // Records are visited from a buffer that may be a decompressed copy: ids are copied
        // out as owned keys; `in_batch` maps this batch's new ids to their offset deltas.
        let mut in_batch: IdMap<i64> = IdMap::default();
        records::for_each_record(batch, max_decompressed, |r| {
            let id = r.header(&settings.header).flatten();
            let original = id.and_then(|id| {
                self.lookup(id, now_ms, settings.window_ms)
                    .or_else(|| in_batch.get(id).map(|delta| next_offset + delta))
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
                        let id = Id::from(id);
                        in_batch.insert(id.clone(), r.offset_delta);
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
            .map(|(id, delta)| self.insert(id, base_offset + delta, now_ms, settings.max_ids))
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
                found.push((Id::from(id), h.base_offset + r.offset_delta, ts));
            }
        })?;
        for (id, offset, ts) in found {
            // Evictions while rebuilding are not counted: they are the ids a full window
            // had already evicted before the restart.
            self.insert(id, offset, ts, settings.max_ids);
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
            w.insert("a".as_bytes().into(), 7, 0, 100);
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
        w.insert("a".as_bytes().into(), 3, 0, 100);
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
            evicted += w.insert(vec![i].into(), i as i64, 0, 4);
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
                w.insert(format!("id{k}").into_bytes().into(), 1, 0, 100);
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
