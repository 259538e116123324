//! Log compaction: Kafka's log cleaner for one partition.
//!
//! A pass works like Kafka's `Cleaner.doClean`:
//! 1. **Plan** (on the shard, [`crate::PartitionLog::clean_task`]): the dirty section runs
//!    from the cleaner checkpoint (`cleaner-offset-checkpoint`, kept by the broker) to the
//!    first uncleanable offset: never the active segment, nor a segment holding a record
//!    younger than `min.compaction.lag.ms`. The task takes zero-copy views of the closed
//!    segments, so it can run off the shard.
//! 2. **Map and rewrite** ([`CleanTask::run`], blocking, off the shard): a key -> latest
//!    offset map over the dirty section, then every closed segment up to the end of the
//!    map is rewritten in groups (as many segments as fit in `segment.bytes`) into
//!    `<base>.log.cleaned` plus indexes, keeping per key only the latest record. Batches
//!    keep their base offset and last offset delta, so offsets never change. A tombstone
//!    (null value) is kept until its batch's delete horizon (KIP-534: set to now +
//!    `delete.retention.ms` the first time the batch is cleaned) has passed.
//! 3. **Swap** (on the shard, [`crate::PartitionLog::install_cleaned`]): as Kafka's
//!    `replaceSegments`: `.cleaned` files become `.swap` (the `.log` rename last: the
//!    commit point), the directory is synced, the old segments are deleted, the `.swap`
//!    files get their final names. `open` completes a committed swap and discards
//!    uncommitted `.cleaned` files ([`swap::recover`]).
//!
//! Transactions ([`txn`], as Kafka's cleaner): a pass never goes past the last stable
//! offset. Records of aborted transactions (known from the `.txnindex`) are neither
//! mapped nor kept; committed transactional records are mapped and compacted like any
//! other; control records are never mapped. A marker is kept while the pass sees data of
//! its transaction, then gets a delete horizon (now + `delete.retention.ms`) and goes at
//! the first pass after it. A cleaned segment's `.txnindex` keeps only the aborted
//! transactions whose marker and data it still holds.
//!
//! Holes and producer state: the batch holding an active producer's last record (its
//! last data batch, or its last marker when it has written no data since its epoch)
//! is kept, emptied of records if none survive, as Kafka does so that producer state
//! rebuilt from the log keeps sequence numbers and epochs. The last batch of each group
//! is kept the same way, so a cleaned segment ends exactly where the next one starts and
//! recovery's check for lost writes between segments never mistakes cleaning for a crash.

pub mod offset_map;
pub mod records;
pub mod swap;
pub mod txn;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::batch::{self, BatchHeader, HEADER_SIZE};
use crate::config::LogConfig;
use crate::error::StorageError;
use crate::segment::Segment;
use crate::txn_index::AbortedTxn;
use offset_map::OffsetMap;
use records::{delete_horizon, encode_batch, parse_records, with_codec, write_record};
use txn::{aborted_in, control_kind, TxnMeta};
pub use txn::{LastRecord, ProducerState};

/// Kafka's per-data-dir file of (topic, partition) -> offset where the dirty section starts.
pub const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

/// Per-topic compaction settings (Kafka names and defaults).
#[derive(Clone, Debug)]
pub struct CleanerConfig {
    /// delete.retention.ms: how long a tombstone outlives its first cleaning. Default 1 day.
    pub delete_retention_ms: i64,
    /// min.compaction.lag.ms: records younger than this are not cleaned. Default 0.
    pub min_compaction_lag_ms: i64,
    /// max.compaction.lag.ms: a log with dirty data older than this is cleaned whatever
    /// its dirty ratio. Default i64::MAX.
    pub max_compaction_lag_ms: i64,
    /// min.cleanable.dirty.ratio: clean once dirty / (clean + dirty) reaches it. Default 0.5.
    pub min_cleanable_dirty_ratio: f64,
    /// log.cleaner.dedupe.buffer.size: memory for the key map. The map stops growing at
    /// the first segment boundary past it (the rest is cleaned by a later pass).
    pub dedupe_buffer_bytes: usize,
    /// Strom's per-record expiry: records expired by the time of the pass are removed too,
    /// whether or not a later record has their key (crate::expiry).
    pub expiry: Option<crate::expiry::RecordExpiry>,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            dedupe_buffer_bytes: 128 * 1024 * 1024,
            expiry: None,
        }
    }
}

/// Decompression and compression of record sections, provided by the broker (storage
/// has no codecs). A batch the codec cannot read is kept whole and not mapped.
pub trait Codec: Send + Sync {
    fn decompress(&self, codec: u8, data: &[u8]) -> Option<Vec<u8>>;
    /// None: write the retained records uncompressed instead.
    fn compress(&self, codec: u8, data: &[u8]) -> Option<Vec<u8>>;
}

/// How much of a log is dirty (Kafka's `LogToClean`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cleanable {
    pub first_dirty: i64,
    pub first_uncleanable: i64,
    pub clean_bytes: u64,
    pub dirty_bytes: u64,
    /// Dirty data older than max.compaction.lag.ms: clean now whatever the ratio.
    pub overdue: bool,
}

impl Cleanable {
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.dirty_bytes;
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / total as f64
        }
    }
}

/// A closed segment as the task sees it.
pub(crate) struct SourceSegment {
    pub base: i64,
    /// Where the next segment starts.
    pub next: i64,
    pub data: Bytes,
}

/// One cleaning pass, ready to run off the shard (`Send`).
pub struct CleanTask {
    pub(crate) dir: PathBuf,
    pub(crate) log_config: LogConfig,
    pub(crate) config: CleanerConfig,
    pub(crate) now_ms: i64,
    pub(crate) sources: Vec<SourceSegment>,
    pub(crate) cleanable: Cleanable,
    /// Active producers (their last batches are kept even when emptied) and the LSO.
    pub(crate) producers: ProducerState,
    /// Every `.txnindex` entry of the log whose transaction starts below the first
    /// uncleanable offset, in marker order.
    pub(crate) aborted: Vec<AbortedTxn>,
}

/// A rewritten group of segments, in `.cleaned` files, waiting for the swap.
#[derive(Debug)]
pub struct CleanedGroup {
    /// (base offset, size in bytes) of the segments it replaces.
    pub(crate) old: Vec<(i64, u64)>,
    pub(crate) base: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub records_kept: u64,
    pub tombstones_removed: u64,
    /// Records removed because they had expired (CleanerConfig::expiry).
    pub records_expired: u64,
    pub map_entries: u64,
    pub segments_cleaned: u64,
}

/// What `run` produced; handed to `install_cleaned` on the shard.
#[derive(Debug)]
pub struct CleanOutcome {
    pub(crate) groups: Vec<CleanedGroup>,
    pub(crate) dir: PathBuf,
    /// The new cleaner checkpoint: everything below is clean.
    pub clean_end: i64,
    /// Earliest delete horizon of a kept tombstone: cleaning again after it removes it.
    pub next_delete_horizon: Option<i64>,
    pub stats: CleanStats,
}

impl CleanOutcome {
    /// Base offsets of the cleaned segments, one per group.
    pub fn group_bases(&self) -> Vec<i64> {
        self.groups.iter().map(|g| g.base).collect()
    }

    /// Base offsets of the segments the groups replace.
    pub fn replaced_bases(&self) -> Vec<i64> {
        self.groups
            .iter()
            .flat_map(|g| g.old.iter().map(|(b, _)| *b))
            .collect()
    }

    /// Deletes the `.cleaned` files (a pass abandoned before its swap).
    pub fn discard(self) {
        for g in &self.groups {
            swap::discard(&self.dir, g.base);
        }
    }
}

/// Limits the cleaner's I/O to `bytes_per_sec` (log.cleaner.io.max.bytes.per.second) by
/// sleeping the (blocking) cleaner thread, and lets a pass be abandoned.
pub struct Throttle<'a> {
    bytes_per_sec: f64,
    start: Instant,
    bytes: f64,
    stop: &'a AtomicBool,
}

impl<'a> Throttle<'a> {
    pub fn new(bytes_per_sec: f64, stop: &'a AtomicBool) -> Self {
        Throttle {
            bytes_per_sec,
            start: Instant::now(),
            bytes: 0.0,
            stop,
        }
    }

    fn charge(&mut self, n: usize) -> Result<(), StorageError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(StorageError::Invalid {
                what: "log cleaning",
                reason: "stopped".into(),
            });
        }
        self.bytes += n as f64;
        if self.bytes_per_sec.is_finite() && self.bytes_per_sec > 0.0 {
            let due = Duration::from_secs_f64(self.bytes / self.bytes_per_sec);
            let spent = self.start.elapsed();
            if due > spent {
                std::thread::sleep(due - spent);
            }
        }
        Ok(())
    }
}

/// A batch's records decompressed (if need be), or None when they cannot be read.
fn records_of<'a>(
    b: &'a [u8],
    h: &BatchHeader,
    codec: Option<&dyn Codec>,
    owned: &'a mut Vec<u8>,
) -> Option<&'a [u8]> {
    let body = &b[HEADER_SIZE..h.total_size()];
    match h.compression() {
        0 => Some(body),
        c => {
            *owned = codec?.decompress(c, body)?;
            Some(owned)
        }
    }
}

impl CleanTask {
    pub fn cleanable(&self) -> Cleanable {
        self.cleanable
    }

    /// Builds the map and writes the `.cleaned` segments. Blocking: run it off the shard.
    pub fn run(
        self,
        codec: Option<&dyn Codec>,
        throttle: &mut Throttle<'_>,
    ) -> Result<CleanOutcome, StorageError> {
        let mut stats = CleanStats::default();
        let (map, clean_end) = self.build_map(codec, throttle, &mut stats)?;
        stats.map_entries = map.len() as u64;
        let mut out = CleanOutcome {
            groups: Vec::new(),
            dir: self.dir.clone(),
            clean_end,
            next_delete_horizon: None,
            stats,
        };
        let cleanable: Vec<&SourceSegment> = self
            .sources
            .iter()
            .filter(|s| s.next <= clean_end)
            .collect();
        // One transaction walk for the whole pass, as Kafka's `doClean`: a marker in a
        // later group must know about its data in an earlier one.
        let mut txns = TxnMeta::default();
        for group in self.groups(&cleanable) {
            match self.clean_group(&group, &map, codec, throttle, &mut txns, &mut out) {
                Ok(g) => out.groups.push(g),
                Err(e) => {
                    swap::discard(&self.dir, group[0].base);
                    out.discard();
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Kafka's `buildOffsetMap`: whole dirty segments while the map has room.
    fn build_map(
        &self,
        codec: Option<&dyn Codec>,
        throttle: &mut Throttle<'_>,
        stats: &mut CleanStats,
    ) -> Result<(OffsetMap, i64), StorageError> {
        let first_dirty = self.cleanable.first_dirty;
        let mut map = OffsetMap::new();
        let mut end = first_dirty;
        let mut txns = TxnMeta::default();
        txns.add_aborted(aborted_in(
            &self.aborted,
            first_dirty,
            self.cleanable.first_uncleanable,
        ));
        for seg in self.sources.iter().filter(|s| s.next > first_dirty) {
            if map.memory_bytes() >= self.config.dedupe_buffer_bytes {
                break;
            }
            for item in batch::BatchIter::new(&seg.data) {
                let (h, b) = item.map_err(|e| corrupt(&self.dir, seg.base, e))?;
                throttle.charge(h.total_size())?;
                stats.bytes_read += h.total_size() as u64;
                let mut owned = Vec::new();
                // Control records are never mapped, nor are aborted ones.
                if h.is_control() {
                    let recs = records_of(b, &h, codec, &mut owned)
                        .and_then(|r| parse_records(r, h.records_count));
                    txns.on_control_batch_read(&h, control_kind(recs.as_deref()));
                    continue;
                }
                if txns.on_batch_read(&h) || h.last_offset() < first_dirty {
                    continue;
                }
                let Some(recs) = records_of(b, &h, codec, &mut owned)
                    .and_then(|r| parse_records(r, h.records_count))
                else {
                    continue;
                };
                for r in recs {
                    let offset = h.base_offset + r.offset_delta;
                    if let (Some(k), true) = (r.key, offset >= first_dirty) {
                        map.put(k, offset);
                    }
                }
            }
            end = seg.next;
        }
        Ok((map, end))
    }

    /// Kafka's `groupSegmentsBySize`: consecutive segments whose sizes add up to at most
    /// `segment.bytes` and whose offsets fit one segment's 32-bit relative offsets.
    fn groups<'s>(&self, segs: &[&'s SourceSegment]) -> Vec<Vec<&'s SourceSegment>> {
        let mut out: Vec<Vec<&SourceSegment>> = Vec::new();
        let mut size = 0u64;
        for &s in segs {
            let fits = out.last().is_some_and(|g| {
                size + s.data.len() as u64 <= self.log_config.segment_bytes
                    && s.next - 1 - g[0].base <= i32::MAX as i64
            });
            if fits {
                out.last_mut().expect("checked").push(s);
                size += s.data.len() as u64;
            } else {
                out.push(vec![s]);
                size = s.data.len() as u64;
            }
        }
        out
    }

    fn clean_group(
        &self,
        group: &[&SourceSegment],
        map: &OffsetMap,
        codec: Option<&dyn Codec>,
        throttle: &mut Throttle<'_>,
        txns: &mut TxnMeta,
        out: &mut CleanOutcome,
    ) -> Result<CleanedGroup, StorageError> {
        let base = group[0].base;
        let io = |e| StorageError::io(e, swap::cleaned_path(&self.dir, base, "log"));
        let seg = Segment::create_suffixed(
            &self.dir,
            base,
            &self.log_config,
            self.now_ms,
            swap::CLEANED,
        )
        .map_err(io)?;
        // The group's last batch is kept (maybe empty), so the new segment ends where the
        // old ones did (module doc).
        let group_last = group
            .iter()
            .rev()
            .find_map(|s| {
                batch::BatchIter::new(&s.data)
                    .filter_map(|i| i.ok())
                    .last()
                    .map(|(h, _)| h.last_offset())
            })
            .unwrap_or(-1);
        let mut pos = 0u64;
        txns.cleaned_index.clear();
        for s in group {
            // Kafka's `cleanSegments`: the aborted transactions of the segment's whole
            // range, so the cleaned `.txnindex` is complete.
            txns.add_aborted(aborted_in(&self.aborted, s.base, s.next));
            for item in batch::BatchIter::new(&s.data) {
                let (h, b) = item.map_err(|e| corrupt(&self.dir, s.base, e))?;
                throttle.charge(h.total_size())?;
                let keep_empty =
                    h.last_offset() == group_last || self.producers.is_last_of_producer(&h);
                let Some(new) = self.filter_batch(&h, b, map, codec, keep_empty, txns, out) else {
                    continue;
                };
                let bytes: &[u8] = match &new {
                    Some(v) => v,
                    None => b,
                };
                let nh = BatchHeader::parse(bytes)?;
                use std::os::unix::fs::FileExt;
                seg.file.borrow().write_all_at(bytes, pos).map_err(io)?;
                seg.record_batch(&nh, pos).map_err(io)?;
                pos += bytes.len() as u64;
                seg.size.set(pos);
                seg.written_size.set(pos);
                out.stats.bytes_written += bytes.len() as u64;
            }
        }
        if txns.cleaned_index.is_empty() {
            // An empty `.txnindex` all the same: a swap completed at open then replaces
            // the old base segment's entries, which may name markers this pass removed.
            let path = swap::cleaned_path(&self.dir, base, "txnindex");
            std::fs::File::create(&path)
                .and_then(|f| f.sync_all())
                .map_err(|e| StorageError::io(e, path))?;
        }
        {
            let mut index = seg.txn_index.borrow_mut();
            for t in txns.cleaned_index.drain(..) {
                index.append(t).map_err(io)?;
            }
        }
        seg.seal().map_err(io)?;
        seg.sync_all().map_err(io)?;
        out.stats.segments_cleaned += group.len() as u64;
        Ok(CleanedGroup {
            old: group
                .iter()
                .map(|s| (s.base, s.data.len() as u64))
                .collect(),
            base,
        })
    }

    /// What to write for one batch: None drops it, Some(None) keeps its bytes as they
    /// are, Some(Some(v)) writes `v` instead (Kafka's `cleanInto` filter and
    /// `MemoryRecords.filterTo`). `keep_empty`: kept, emptied if no record survives.
    #[allow(clippy::too_many_arguments)]
    fn filter_batch(
        &self,
        h: &BatchHeader,
        b: &[u8],
        map: &OffsetMap,
        codec: Option<&dyn Codec>,
        keep_empty: bool,
        txns: &mut TxnMeta,
        out: &mut CleanOutcome,
    ) -> Option<Option<Vec<u8>>> {
        let control = h.is_control();
        let mut owned = Vec::new();
        // Data of an aborted transaction, or a marker whose transaction has no data left.
        let can_discard = if control {
            let recs =
                records_of(b, h, codec, &mut owned).and_then(|r| parse_records(r, h.records_count));
            txns.on_control_batch_read(h, control_kind(recs.as_deref()))
        } else {
            txns.on_batch_read(h)
        };
        let now = self.now_ms;
        let horizon = delete_horizon(h);
        let deletes_expired = horizon.is_some_and(|t| t <= now);
        // A marker goes only once its delete horizon has passed (KIP-534).
        let discard_records = can_discard && (!control || deletes_expired);
        if discard_records && !keep_empty {
            return None;
        }
        let recs =
            records_of(b, h, codec, &mut owned).and_then(|r| parse_records(r, h.records_count));
        let Some(recs) = recs else {
            // Unreadable: kept whole, unless it is to go anyway (then kept empty).
            return Some(discard_records.then(|| empty_batch(h)));
        };
        out.stats.records_read += recs.len() as u64;
        let mut kept = Vec::with_capacity(recs.len());
        for r in &recs {
            if discard_records {
                break;
            }
            if control {
                kept.push(r);
                continue;
            }
            let Some(key) = r.key else {
                // Kafka drops keyless records from compacted logs (`invalidMessage`).
                continue;
            };
            let offset = h.base_offset + r.offset_delta;
            if offset < map.get(key) {
                continue;
            }
            if !r.has_value && deletes_expired {
                out.stats.tombstones_removed += 1;
                continue;
            }
            let expires =
                self.config.expiry.as_ref().and_then(|e| {
                    e.expires_at(h, r.timestamp_delta, |name| r.header(name.as_bytes()))
                });
            if expires.is_some_and(|at| at <= now) {
                out.stats.records_expired += 1;
                continue;
            }
            kept.push(r);
        }
        out.stats.records_kept += kept.len() as u64;
        if kept.is_empty() {
            return keep_empty.then(|| Some(empty_batch(h)));
        }
        // A kept tombstone, or a marker that may go, needs a delete horizon.
        let needs_horizon_eventually =
            (!control && kept.iter().any(|r| !r.has_value)) || (control && can_discard);
        if needs_horizon_eventually {
            let t = horizon.unwrap_or(now.saturating_add(self.config.delete_retention_ms));
            out.next_delete_horizon = Some(out.next_delete_horizon.map_or(t, |m| m.min(t)));
        }
        let need_horizon = needs_horizon_eventually && horizon.is_none();
        if kept.len() == recs.len() && !need_horizon {
            return Some(None);
        }
        let (base_ts, attrs) = if need_horizon {
            let t = now.saturating_add(self.config.delete_retention_ms);
            (t, h.attributes | records::ATTR_DELETE_HORIZON)
        } else {
            (h.base_timestamp, h.attributes)
        };
        let shift = base_ts - h.base_timestamp;
        let mut body = Vec::with_capacity(b.len());
        let mut max_ts = -1;
        for r in &kept {
            write_record(&mut body, r, shift);
            max_ts = max_ts.max(h.base_timestamp.saturating_add(r.timestamp_delta));
        }
        if h.timestamp_type_log_append() {
            max_ts = h.max_timestamp;
        }
        let (attrs, body) = match h.compression() {
            0 => (attrs, body),
            c => match codec.and_then(|k| k.compress(c, &body)) {
                Some(z) => (attrs, z),
                None => (with_codec(attrs, 0), body),
            },
        };
        Some(Some(encode_batch(
            h,
            attrs,
            base_ts,
            max_ts,
            kept.len() as i32,
            &body,
        )))
    }
}

/// `h` with no records (Kafka's `writeEmptyHeader`): offsets, producer fields and the
/// transactional and control bits stay, timestamps become the max timestamp.
fn empty_batch(h: &BatchHeader) -> Vec<u8> {
    let attrs = with_codec(h.attributes, 0) & !records::ATTR_DELETE_HORIZON;
    encode_batch(h, attrs, h.max_timestamp, h.max_timestamp, 0, &[])
}

fn corrupt(dir: &std::path::Path, base: i64, e: batch::BatchError) -> StorageError {
    StorageError::Corrupt {
        path: dir.join(crate::segment::file_name(base, "log")),
        reason: format!("while cleaning: {e}"),
    }
}
