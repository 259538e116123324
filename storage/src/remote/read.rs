//! Serving a fetch from a remote segment (Kafka's `RemoteLogManager.read`): the indexed
//! position of the fetch offset from the segment's `.index` object, a byte range of its
//! `.log` object from there, and the whole batches of that range that hold the offset and
//! what follows it, bounded by the fetch's bytes (at least one batch, as Kafka). Batches go
//! out as they are stored: Kafka's format end to end.
//!
//! [`RemoteReader`] does the GETs: `.log` objects in aligned chunks of [`CHUNK_BYTES`], and
//! the index objects whole, both kept in one in-memory LRU cache bounded by bytes; at most `reader_threads` GETs in flight (Kafka's
//! `remote.log.reader.threads`). It runs on the broker's remote runtime, never on a shard.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use object_store::ObjectStore;

use super::keys::FileKind;
use super::manifest::RemoteSegment;
use super::transfer::{self, TransferError};
use crate::batch::{BatchHeader, HEADER_SIZE, MAGIC_V2};
use crate::index::{IndexEntry, OffsetEntry};
use crate::txn_index::{AbortedTxn, ENTRY_SIZE as TXN_ENTRY_SIZE};

/// `.log` objects are read and cached in aligned ranges of this size: a consumer reading a
/// segment from its start gets most of its fetches from one GET each MiB.
pub const CHUNK_BYTES: u64 = 1 << 20;

/// The byte position in the segment's `.log` to scan from for `target`: the start of the
/// last indexed batch that ends at or before it (0 without such an entry). Entries are
/// Kafka's `.index` (relative last offset, position); a remote index is a sealed, trimmed
/// one, but a garbled tail still ends the search rather than sending it elsewhere.
pub fn index_position(index: &[u8], base_offset: i64, target: i64) -> u64 {
    let rel = target.saturating_sub(base_offset);
    if rel <= 0 {
        return 0;
    }
    let mut pos = 0u64;
    let mut prev: Option<OffsetEntry> = None;
    for raw in index.chunks_exact(OffsetEntry::SIZE) {
        let e = OffsetEntry::decode(raw);
        if prev.is_some_and(|p| !e.follows(&p)) || e.rel as i64 > rel {
            break;
        }
        pos = e.pos as u64;
        prev = Some(e);
    }
    pos
}

/// The chunk indexes covering bytes `[from, from + want)` of an object of `size` bytes.
pub fn chunks_for(from: u64, want: u64, size: u64) -> Range<u64> {
    let end = from.saturating_add(want.max(1)).min(size);
    if from >= end {
        return 0..0;
    }
    from / CHUNK_BYTES..(end - 1) / CHUNK_BYTES + 1
}

/// The byte range of chunk `i` of an object of `size` bytes.
pub fn chunk_range(i: u64, size: u64) -> Range<u64> {
    i * CHUNK_BYTES..((i + 1) * CHUNK_BYTES).min(size)
}

/// What [`select_batches`] found in a buffer read from a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selected {
    /// The batches to return (a slice of the buffer; empty when the buffer ended the
    /// segment before `target`).
    Batches(Bytes),
    /// The buffer ends inside what must be returned: it must be this long (from its start).
    NeedBytes(usize),
    /// Not a batch at this position: the object is not what the manifest says.
    Corrupt(usize),
}

/// From `buf` (bytes of a segment from a batch boundary on): the batches from the one
/// holding `target` on, whole, at most `max_bytes` of them but never less than one batch.
/// `at_end`: `buf` reaches the end of the segment.
pub fn select_batches(buf: &Bytes, target: i64, max_bytes: usize, at_end: bool) -> Selected {
    let mut at = 0usize;
    // Skip the batches that end before the target.
    let start = loop {
        if at + HEADER_SIZE > buf.len() {
            return if at_end && buf.len() == at {
                Selected::Batches(Bytes::new())
            } else if at_end {
                Selected::Corrupt(at)
            } else {
                Selected::NeedBytes(at + HEADER_SIZE)
            };
        }
        let Ok(h) = BatchHeader::parse(&buf[at..]) else {
            return Selected::Corrupt(at);
        };
        if h.magic != MAGIC_V2 || h.total_size() < HEADER_SIZE {
            return Selected::Corrupt(at);
        }
        if h.last_offset() >= target {
            break at;
        }
        at += h.total_size();
    };
    let mut end = start;
    while buf.len() - end >= HEADER_SIZE {
        let Ok(h) = BatchHeader::parse(&buf[end..]) else {
            break;
        };
        let next = end + h.total_size();
        if h.magic != MAGIC_V2
            || h.total_size() < HEADER_SIZE
            || (end > start && next - start > max_bytes)
        {
            break;
        }
        if next > buf.len() {
            if end == start && !at_end {
                // The first batch goes whole, whatever the limit (KIP-74).
                return Selected::NeedBytes(next);
            }
            break;
        }
        end = next;
    }
    if end == start {
        return if at_end {
            Selected::Corrupt(start)
        } else {
            Selected::NeedBytes(start + HEADER_SIZE)
        };
    }
    Selected::Batches(buf.slice(start..end))
}

/// The aborted transactions of a `.txnindex` object overlapping `[from, to)` (Kafka's
/// `TransactionIndex.collectAbortedTxns`).
pub fn aborted_in(txn_index: &[u8], from: i64, to: i64) -> Vec<AbortedTxn> {
    txn_index
        .chunks_exact(TXN_ENTRY_SIZE)
        .filter_map(AbortedTxn::decode)
        .filter(|t| t.last_offset >= from && t.first_offset < to)
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum RemoteReadError {
    #[error(transparent)]
    Transfer(#[from] TransferError),
    #[error("remote segment {segment} is corrupt at byte {position}")]
    Corrupt { segment: String, position: u64 },
}

/// What one remote read returns.
#[derive(Debug, Clone, Default)]
pub struct RemoteData {
    pub batches: Bytes,
    /// Only when asked for (read_committed).
    pub aborted: Option<Vec<AbortedTxn>>,
    /// Objects and chunks this read found in the cache, and those it had to GET.
    pub cache_hits: u64,
    pub cache_misses: u64,
}

/// Hits and misses of one read (its chunk GETs run at once, hence atomics).
#[derive(Default)]
struct Counts {
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    segment: Arc<str>,
    kind: FileKind,
    chunk: u64,
}

/// Least recently used first out, bounded by the bytes held (the `lru` crate orders; this
/// counts the bytes).
struct ByteLru {
    map: lru::LruCache<CacheKey, Bytes>,
    bytes: u64,
    bound: u64,
}

impl ByteLru {
    fn get(&mut self, k: &CacheKey) -> Option<Bytes> {
        self.map.get(k).cloned()
    }

    fn insert(&mut self, k: CacheKey, v: Bytes) {
        if v.len() as u64 > self.bound {
            return; // would evict everything and still not fit
        }
        self.bytes += v.len() as u64;
        if let Some(old) = self.map.put(k, v) {
            self.bytes -= old.len() as u64;
        }
        while self.bytes > self.bound {
            match self.map.pop_lru() {
                Some((_, old)) => self.bytes -= old.len() as u64,
                None => break,
            }
        }
    }
}

/// Remote reads of one broker: the cache, the GET bound, and hit/miss counts.
pub struct RemoteReader {
    store: Arc<dyn ObjectStore>,
    cache: std::sync::Mutex<ByteLru>,
    gets: tokio::sync::Semaphore,
}

impl RemoteReader {
    /// `cache_bytes`: the bound of the in-memory cache; `reader_threads`: GETs in flight.
    pub fn new(store: Arc<dyn ObjectStore>, cache_bytes: u64, reader_threads: usize) -> Self {
        RemoteReader {
            store,
            cache: std::sync::Mutex::new(ByteLru {
                map: lru::LruCache::unbounded(),
                bytes: 0,
                bound: cache_bytes,
            }),
            gets: tokio::sync::Semaphore::new(reader_threads.max(1)),
        }
    }

    /// Bytes the cache holds now.
    pub fn cached_bytes(&self) -> u64 {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ByteLru> {
        // A panic while holding it cannot leave the map inconsistent with what it holds.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn cached(
        &self,
        counts: &Counts,
        key: CacheKey,
        get: impl std::future::Future<Output = Result<Bytes, TransferError>>,
    ) -> Result<Bytes, TransferError> {
        let hit = self.lock().get(&key);
        if let Some(b) = hit {
            counts.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(b);
        }
        counts.misses.fetch_add(1, Ordering::Relaxed);
        let _permit = self.gets.acquire().await.expect("never closed");
        // Only a complete object or chunk is cached: a failed GET leaves nothing behind.
        let b = get.await?;
        self.lock().insert(key, b.clone());
        Ok(b)
    }

    async fn object(
        &self,
        counts: &Counts,
        prefix: &str,
        seg: &RemoteSegment,
        kind: FileKind,
    ) -> Result<Bytes, TransferError> {
        let key = CacheKey {
            segment: seg.id.as_str().into(),
            kind,
            chunk: 0,
        };
        self.cached(
            counts,
            key,
            transfer::read_object(&self.store, prefix, seg.base_offset, &seg.id, kind),
        )
        .await
    }

    /// Bytes `[from, to)` of the segment's `.log`, from cached chunks.
    async fn log_bytes(
        &self,
        counts: &Counts,
        prefix: &str,
        seg: &RemoteSegment,
        from: u64,
        to: u64,
    ) -> Result<Bytes, TransferError> {
        let size = seg.size_bytes;
        let chunks = chunks_for(from, to - from, size);
        let fetched = futures::future::try_join_all(chunks.clone().map(|i| {
            let key = CacheKey {
                segment: seg.id.as_str().into(),
                kind: FileKind::Log,
                chunk: i,
            };
            let range = chunk_range(i, size);
            self.cached(
                counts,
                key,
                transfer::read_range(
                    &self.store,
                    prefix,
                    seg.base_offset,
                    &seg.id,
                    FileKind::Log,
                    range,
                ),
            )
        }))
        .await?;
        let first = chunks.start * CHUNK_BYTES;
        let (lo, hi) = ((from - first) as usize, (to.min(size) - first) as usize);
        if fetched.len() == 1 {
            return Ok(fetched[0].slice(lo..hi.min(fetched[0].len())));
        }
        let mut out = BytesMut::with_capacity(fetched.iter().map(Bytes::len).sum());
        for b in &fetched {
            out.extend_from_slice(b);
        }
        let out = out.freeze();
        Ok(out.slice(lo..hi.min(out.len())))
    }

    /// The batches of `seg` from the one holding `offset` on, at most `max_bytes` (at least
    /// one batch); with `aborted`, the aborted transactions overlapping them.
    pub async fn read(
        &self,
        prefix: &str,
        seg: &RemoteSegment,
        offset: i64,
        max_bytes: usize,
        aborted: bool,
    ) -> Result<RemoteData, RemoteReadError> {
        let counts = Counts::default();
        let index = self
            .object(&counts, prefix, seg, FileKind::OffsetIndex)
            .await?;
        let from = index_position(&index, seg.base_offset, offset).min(seg.size_bytes);
        let mut to = from
            .saturating_add(max_bytes.max(HEADER_SIZE) as u64)
            .min(seg.size_bytes);
        let batches = loop {
            let buf = self.log_bytes(&counts, prefix, seg, from, to).await?;
            let at_end = to >= seg.size_bytes;
            match select_batches(&buf, offset, max_bytes, at_end) {
                Selected::Batches(b) => break b,
                Selected::NeedBytes(n) if !at_end => {
                    // Past the skipped batches there must still be room for the limit.
                    to = (from + n as u64 + max_bytes as u64)
                        .max(to + 1)
                        .min(seg.size_bytes);
                }
                Selected::NeedBytes(at) | Selected::Corrupt(at) => {
                    return Err(RemoteReadError::Corrupt {
                        segment: seg.id.clone(),
                        position: from + at as u64,
                    })
                }
            }
        };
        let aborted = if aborted {
            let end = last_offset(&batches).map_or(offset, |l| l + 1);
            let txn = self
                .object(&counts, prefix, seg, FileKind::TxnIndex)
                .await?;
            Some(aborted_in(&txn, offset, end))
        } else {
            None
        };
        Ok(RemoteData {
            batches,
            aborted,
            cache_hits: counts.hits.into_inner(),
            cache_misses: counts.misses.into_inner(),
        })
    }
}

fn last_offset(batches: &[u8]) -> Option<i64> {
    let mut at = 0;
    let mut last = None;
    while let Ok(h) = BatchHeader::parse(&batches[at..]) {
        last = Some(h.last_offset());
        at += h.total_size();
        if at >= batches.len() {
            break;
        }
    }
    last
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
