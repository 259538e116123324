//! Per-record expiry (issue 20; JetStream's per-message TTL): a record expires at its
//! timestamp plus its TTL — the `strom.ttl.header` value (ms, ASCII digits) where the topic
//! names a header and the record carries it, else `strom.record.ttl.ms`. Fetch does not
//! deliver an expired record: the batch holding it goes out rebuilt without it, keeping its
//! offsets, so consumers see an offset gap as on a compacted topic (a batch left with no
//! records goes out empty, which every client steps over as it does after compaction).
//!
//! Zero copy is kept for every batch with nothing expired: each batch's earliest expiry is
//! computed once — at append (the records are at hand), or the first time a fetch meets it
//! after a restart — and kept in a bounded per-partition map. A batch whose earliest expiry
//! is still ahead goes to the socket as a slice of the mapped segment, untouched; only a batch
//! that holds an expired record is read (decompressed if need be) and re-encoded.

use std::collections::BTreeMap;

use bytes::Bytes;
use storage::batch::{BatchHeader, BatchIter};

use super::records;
use crate::config::ai_flow::{ExpirySettings, FlowSettings};

/// Batches whose earliest expiry is remembered per partition; beyond it the lowest offsets
/// (the oldest batches, fetched least often) are forgotten and computed again if fetched.
const CACHE_BATCHES: usize = 100_000;

/// "Nothing in this batch ever expires."
const NEVER: i64 = i64::MAX;

/// Base offset → earliest expiry (ms) of the batches seen so far.
#[derive(Debug, Default)]
pub struct ExpiryCache {
    earliest: BTreeMap<i64, i64>,
}

/// A record's expiry time, or None when it never expires.
fn record_expiry(
    e: &ExpirySettings,
    r: &records::RecordFields<'_>,
    h: &BatchHeader,
) -> Option<i64> {
    e.expires_at(h, r.timestamp_delta, |name| r.header(name))
}

/// The earliest expiry of a batch's records (`NEVER` when none expires, or the batch cannot
/// be read: then it is sent as stored, as the cleaner keeps what it cannot read).
pub fn earliest_expiry(e: &ExpirySettings, batch: &[u8], max_decompressed: usize) -> i64 {
    let Ok(h) = BatchHeader::parse(batch) else {
        return NEVER;
    };
    if h.is_control() || h.records_count == 0 {
        return NEVER;
    }
    let mut earliest = NEVER;
    let walked = records::for_each_record(batch, max_decompressed, |r| {
        if let Some(at) = record_expiry(e, r, &h) {
            earliest = earliest.min(at);
        }
    });
    if walked.is_err() {
        return NEVER;
    }
    earliest
}

/// `batch` without its records expired at `now_ms`, and how many were dropped.
fn without_expired(
    e: &ExpirySettings,
    batch: &[u8],
    now_ms: i64,
    max_decompressed: usize,
) -> Option<(Bytes, u64)> {
    let h = BatchHeader::parse(batch).ok()?;
    let mut kept = Vec::new();
    let (mut count, mut dropped, mut max_ts) = (0i32, 0u64, -1i64);
    records::for_each_record(batch, max_decompressed, |r| {
        if record_expiry(e, r, &h).is_some_and(|at| at <= now_ms) {
            dropped += 1;
        } else {
            kept.extend_from_slice(r.raw);
            count += 1;
            max_ts = max_ts.max(h.base_timestamp.saturating_add(r.timestamp_delta));
        }
    })
    .ok()?;
    let max_ts = if count == 0 { h.max_timestamp } else { max_ts };
    let rebuilt = records::rebuild(batch, &kept, count, max_ts).ok()?;
    Some((rebuilt, dropped))
}

impl ExpiryCache {
    /// Forgets everything (the topic's expiry settings changed).
    pub fn clear(&mut self) {
        self.earliest.clear();
    }

    fn insert(&mut self, base_offset: i64, earliest: i64) {
        self.earliest.insert(base_offset, earliest);
        while self.earliest.len() > CACHE_BATCHES {
            self.earliest.pop_first();
        }
    }

    /// Called by `append` for a batch about to get `base_offset`: remembers its earliest
    /// expiry when the topic has expiry on.
    pub fn note_append(
        &mut self,
        flow: &FlowSettings,
        header: &BatchHeader,
        batch: &[u8],
        base_offset: i64,
        max_decompressed: usize,
    ) {
        if let Some(e) = &flow.expiry {
            if !header.is_control() {
                self.insert(base_offset, earliest_expiry(e, batch, max_decompressed));
            }
        }
    }

    /// Forgets the batches at or above `offset` (a failed append, a truncation).
    pub fn truncate_from(&mut self, offset: i64) {
        self.earliest.split_off(&offset);
    }

    /// The chunks of a read with the expired records left out; returns them and how many
    /// records were dropped. Runs of batches with nothing expired stay slices of `chunks`.
    pub fn filter(
        &mut self,
        e: &ExpirySettings,
        chunks: Vec<Bytes>,
        now_ms: i64,
        max_decompressed: usize,
    ) -> (Vec<Bytes>, u64) {
        let mut out = Vec::with_capacity(chunks.len());
        let mut dropped = 0u64;
        for chunk in chunks {
            // The byte range of `chunk` still to send as a slice.
            let mut run_start = 0usize;
            let mut pos = 0usize;
            let mut iter = BatchIter::new(&chunk);
            while let Some(Ok((h, batch))) = iter.next() {
                let size = batch.len();
                let earliest = match self.earliest.get(&h.base_offset) {
                    Some(&at) => at,
                    None => {
                        let at = if h.is_control() {
                            NEVER
                        } else {
                            earliest_expiry(e, batch, max_decompressed)
                        };
                        self.insert(h.base_offset, at);
                        at
                    }
                };
                if earliest <= now_ms {
                    if let Some((rebuilt, n)) = without_expired(e, batch, now_ms, max_decompressed)
                    {
                        if pos > run_start {
                            out.push(chunk.slice(run_start..pos));
                        }
                        out.push(rebuilt);
                        dropped += n;
                        run_start = pos + size;
                    }
                }
                pos += size;
            }
            // What follows (a partial batch at the end, KIP-74) goes as it is.
            if run_start < chunk.len() {
                out.push(chunk.slice(run_start..));
            }
        }
        (out, dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::TestBatch;
    use kafka_protocol::records::Compression;

    fn settings(header: bool, default_ttl: Option<i64>) -> ExpirySettings {
        ExpirySettings {
            header: header.then(|| "ttl-ms".to_string()),
            default_ttl_ms: default_ttl,
        }
    }

    /// Records at 10000, 10001, …; `ttls[i]` is record i's ttl-ms header.
    fn batch(ttls: &[Option<&str>], compression: Compression, base_offset: i64) -> Bytes {
        let b = TestBatch::new(ttls.len())
            .compression(compression)
            .at(10_000)
            .encode_with(|records| {
                for (r, t) in records.iter_mut().zip(ttls) {
                    if let Some(t) = t {
                        r.headers.insert(
                            kafka_protocol::protocol::StrBytes::from_static_str("ttl-ms"),
                            Some(Bytes::copy_from_slice(t.as_bytes())),
                        );
                    }
                }
            });
        let mut b = b.to_vec();
        storage::batch::set_base_offset(&mut b, base_offset);
        Bytes::from(b)
    }

    fn offsets(chunks: &[Bytes]) -> Vec<i64> {
        let mut out = Vec::new();
        for c in chunks {
            for (h, b) in BatchIter::new(c).filter_map(Result::ok) {
                records::for_each_record(b, 1 << 20, |r| out.push(h.base_offset + r.offset_delta))
                    .unwrap();
            }
        }
        out
    }

    #[test]
    fn given_header_ttls_when_fetching_then_expired_records_leave_an_offset_gap() {
        for c in [Compression::None, Compression::Gzip, Compression::Lz4] {
            let e = settings(true, None);
            let a = batch(&[Some("5"), None, Some("100")], c, 0);
            let b = batch(&[None, None], c, 3);
            let mut chunk = a.to_vec();
            chunk.extend_from_slice(&b);
            let mut cache = ExpiryCache::default();
            // At 10006: record 0 (10000+5) expired; record 2 (10002+100) not.
            let (out, dropped) =
                cache.filter(&e, vec![Bytes::from(chunk.clone())], 10_006, 1 << 20);
            assert_eq!(dropped, 1, "{c:?}");
            assert_eq!(offsets(&out), vec![1, 2, 3, 4], "{c:?}");
            // The batch with nothing expired went as a slice of the read, byte for byte.
            assert_eq!(out.last().unwrap().as_ref(), b.as_ref(), "{c:?}");
            for chunk in &out {
                for r in BatchIter::validating(chunk) {
                    r.unwrap();
                }
            }
            // Before anything expires, the read comes back as it was.
            let (out, dropped) = cache.filter(&e, vec![Bytes::from(chunk)], 10_004, 1 << 20);
            assert_eq!((out.len(), dropped), (1, 0));
        }
    }

    #[test]
    fn given_topic_ttl_when_all_expired_then_empty_batch_spanning_the_offsets() {
        let e = settings(false, Some(1_000));
        let a = batch(&[None, None, None], Compression::Zstd, 40);
        let mut cache = ExpiryCache::default();
        let (out, dropped) = cache.filter(&e, vec![a.clone()], 20_000, 1 << 20);
        assert_eq!(dropped, 3);
        let h = BatchHeader::parse(&out[0]).unwrap();
        assert_eq!(
            (h.base_offset, h.last_offset(), h.records_count),
            (40, 42, 0)
        );
        storage::batch::validate_stored(&out[0]).unwrap();
        // Earliest expiry computed at append time is the same as a fetch computes.
        assert_eq!(earliest_expiry(&e, &a, 1 << 20), 11_000);
        assert_eq!(earliest_expiry(&settings(true, None), &a, 1 << 20), NEVER);
    }

    #[test]
    fn given_cached_never_expiring_batch_when_fetched_then_not_read_again() {
        let e = settings(true, None);
        let a = batch(&[Some("1")], Compression::None, 0);
        let mut cache = ExpiryCache::default();
        // A cached "never" is trusted: the batch goes untouched even though it has a TTL
        // (the cache is cleared when the topic's expiry settings change).
        cache.insert(0, NEVER);
        let (out, dropped) = cache.filter(&e, vec![a.clone()], 1 << 40, 1 << 20);
        assert_eq!((out, dropped), (vec![a], 0));
        cache.truncate_from(0);
        assert!(cache.earliest.is_empty());
    }
}
