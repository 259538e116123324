//! A partition as its home shard sees it: the storage log plus the Kafka semantics layered on
//! it (producer state for idempotence, the high watermark that fetches wait on).
//!
//! Only the home shard touches a `Partition`; other shards reach it through
//! `shard::frontend`. Batch validation that needs no partition state (length, CRC, magic,
//! size) runs on the shard that received the request, so the home shard only does the
//! stateful part.

pub mod dedup;
pub mod expiry;
mod flow;
pub mod key_index;
pub mod producer_state;
pub mod read_committed;
pub mod record_view;
pub mod records;
pub mod redact;
pub mod replica;
pub mod schema_ids;
pub mod txn;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use storage::batch::{BatchError, BatchHeader};
use storage::producer_snapshot::{self, ProducerSnapshotEntry};
use storage::{AppendOptions, Durability, PartitionLog, ReadResult, StorageError};
use tokio::sync::watch;

use crate::config::effective::TopicSettings;
use flow::Deduped;
use producer_state::{BatchMeta, ProducerStateTable, SequenceError, SequenceVerdict};
use txn::{OpenTxns, TxnDataError};

/// Why a produce to one partition failed; mapped to a Kafka error code by the produce handler.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error("corrupt record batch: {0}")]
    Corrupt(#[source] BatchError),
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    #[error(transparent)]
    Records(records::RecordsError),
    /// Records refused one by one (KIP-467): the batch is not appended, and the answer names
    /// each record (Kafka's `RecordValidationException`).
    #[error("{}", rejected_message(.0))]
    Rejected(Vec<records::RecordError>),
    #[error("record batch of {size} bytes is larger than max.message.bytes {max}")]
    TooLarge { size: usize, max: i32 },
    #[error(transparent)]
    Sequence(#[from] SequenceError),
    #[error(transparent)]
    Txn(#[from] TxnDataError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("this replica no longer leads the partition")]
    NotLeader,
    #[error("the in-sync replicas fell below min.insync.replicas after the append")]
    NotEnoughReplicasAfterAppend,
    #[error("the in-sync replicas did not confirm the batch in time")]
    ReplicationTimeout,
}

/// Checks what can be checked without partition state, on the shard that received the
/// request. Kafka (since produce v3) requires exactly one magic v2 batch per partition.
/// Returns the batch to append: the request's own bytes, or — when the topic's
/// `compression.type` is not the batch's codec — the batch re-encoded with the topic's.
///
/// `schemas` is the schema registry's view, for topics that validate schema ids.
pub fn validate_produce_records(
    topic: &str,
    records: &Bytes,
    settings: &TopicSettings,
    schemas: Option<&dyn schema_ids::SchemaView>,
    now_ms: i64,
) -> Result<(BatchHeader, Bytes), PartitionError> {
    if records.len() > settings.max_message_bytes.max(0) as usize {
        return Err(PartitionError::TooLarge {
            size: records.len(),
            max: settings.max_message_bytes,
        });
    }
    // Magic is checked first, as Kafka does, so an old-format batch gets INVALID_RECORD and not
    // CORRUPT_MESSAGE because its layout does not parse as v2.
    if records.len() > 16 && records[16] != 2 {
        return Err(PartitionError::InvalidRecord(format!(
            "Produce requests are only allowed to contain record batches with magic version 2, got {}",
            records[16] as i8
        )));
    }
    let headers = storage::batch::validate_batches(records).map_err(PartitionError::Corrupt)?;
    let [header] = headers.as_slice() else {
        return Err(PartitionError::InvalidRecord(format!(
            "Produce requests with version 3 and above are only allowed to contain exactly one record batch, got {}",
            headers.len()
        )));
    };
    if header.is_control() {
        return Err(PartitionError::InvalidRecord(
            "Control records are not allowed from clients".into(),
        ));
    }
    // Kafka's LogValidator: a producer's batch carries its sequence; a transactional one
    // needs a producer.
    if header.producer_id >= 0 && header.base_sequence < 0 {
        return Err(PartitionError::InvalidRecord(format!(
            "Invalid sequence number {} in record batch with producerId {}",
            header.base_sequence, header.producer_id
        )));
    }
    if header.is_transactional() && header.producer_id < 0 {
        return Err(PartitionError::InvalidRecord(
            "Transactional record batch without a producer id".into(),
        ));
    }
    // Timestamps (CreateTime): the batch's first and largest timestamps decide in the common
    // case; only a batch that fails them has its records read one by one, to name them.
    let bounds = (!settings.log_append_time).then(|| records::TimestampBounds {
        base: header.base_timestamp,
        lo: now_ms.saturating_sub(settings.timestamp_before_max_ms),
        hi: now_ms.saturating_add(settings.timestamp_after_max_ms),
    });
    let suspect = bounds.is_some_and(|b| {
        [header.base_timestamp, header.max_timestamp]
            .iter()
            .any(|&ts| ts >= 0 && (ts < b.lo || ts > b.hi))
    });
    // Schema ids (Confluent Server's validation): without a registry nothing is registered,
    // so every record of a validating topic is refused.
    let validation = &settings.schema_validation;
    let no_registry = schema_ids::NoRegistry;
    let view: &dyn schema_ids::SchemaView = schemas.unwrap_or(&no_registry);
    let check_ids = |r: &records::RecordFields<'_>| {
        schema_ids::check_record(topic, validation, r.key, r.value, view)
    };
    // Storage walks uncompressed records already; compressed ones, keys on compacted topics,
    // suspect timestamps, schema ids and the flow checks (issue 20) need the broker's
    // record reader.
    let flow = &settings.flow;
    let ttl_header = flow.expiry.as_ref().and_then(|e| e.header.as_deref());
    if header.compression() != 0
        || settings.compact
        || suspect
        || validation.enabled()
        || flow.embedding.is_some()
        || ttl_header.is_some()
    {
        let checks = records::RecordChecks {
            require_keys: settings.compact,
            timestamps: bounds.filter(|_| suspect),
            each: validation.enabled().then_some(&check_ids as _),
            embedding: flow.embedding.as_ref(),
            ttl_header,
        };
        let rejected = records::validate(
            records,
            header.compression(),
            header.records_count,
            checks,
            settings.max_decompressed_bytes,
        )
        .map_err(PartitionError::Records)?;
        if !rejected.is_empty() {
            return Err(PartitionError::Rejected(rejected));
        }
    }
    match settings.compression {
        Some(c) if c.codec != header.compression() => {
            let batch =
                records::recompress(records, c.codec, c.level, settings.max_decompressed_bytes)
                    .map_err(PartitionError::Records)?;
            let header = BatchHeader::parse(&batch).map_err(PartitionError::Corrupt)?;
            Ok((header, batch))
        }
        _ => Ok((*header, records.clone())),
    }
}

/// Kafka's top-level message for records refused one by one (`LogValidator`).
fn rejected_message(errors: &[records::RecordError]) -> String {
    if errors.iter().any(|e| e.timestamp) {
        return "One or more records have been rejected due to invalid timestamp".into();
    }
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|e| {
            format!(
                "RecordError(batchIndex={}, message='{}')",
                e.index, e.message
            )
        })
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProduceOutcome {
    pub base_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// Records dropped as duplicates by message id, and ids evicted from the full window.
    pub dedup_duplicates: u64,
    pub dedup_evicted: u64,
}

/// Why a DeleteRecords on one partition failed; mapped to Kafka codes by its handler.
#[derive(Debug, thiserror::Error)]
pub enum DeleteRecordsError {
    #[error("records of {0} can not be deleted due to the configured policy (cleanup.policy without delete)")]
    Policy(String),
    #[error("offset {offset} is beyond the high watermark {high_watermark}")]
    OffsetOutOfRange { offset: i64, high_watermark: i64 },
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A replicated leader moved its start, but its in-sync followers' did not reach the
    /// offset within the request's timeout (Kafka's expired `DelayedDeleteRecords`).
    #[error("the followers' log start offsets did not reach {offset} in time (low watermark {low_watermark})")]
    ReplicasTimedOut { offset: i64, low_watermark: i64 },
}

/// The second phase of an append: the write (and fdatasync for acks=all).
pub type AppendPending =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<ProduceOutcome, PartitionError>>>>;

pub struct FetchOutcome {
    pub data: ReadResult,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// read_committed only: aborted transactions overlapping the data returned.
    pub aborted: Option<Vec<storage::txn_index::AbortedTxn>>,
    /// Expired records left out of the data (`expiry`).
    pub expired: u64,
}

pub struct Partition {
    pub topic: Arc<str>,
    pub index: i32,
    pub log: PartitionLog,
    producers: RefCell<ProducerStateTable>,
    txns: RefCell<OpenTxns>,
    high_watermark: watch::Sender<i64>,
    last_stable: watch::Sender<i64>,
    settings: RefCell<Arc<TopicSettings>>,
    /// When unflushed data was last made durable by the `flush.ms` timer (or found clean).
    last_flush: Cell<Instant>,
    /// The active segment's base offset when the producer state was last snapshotted: a
    /// different one means the log rolled and a new snapshot is due (Kafka snapshots at
    /// every roll, so recovery after a crash replays one segment's batch headers, not all).
    snapshot_segment: Cell<i64>,
    /// Dedup by message id (`dedup`): built from the log tail when first needed.
    dedup: RefCell<Option<dedup::DedupWindow>>,
    /// Per-batch earliest expiry, for Fetch (`expiry`).
    expiry: RefCell<expiry::ExpiryCache>,
    /// `strom.key.index` topics: key → recent offsets (`key_index`), built when first needed.
    key_index: RefCell<key_index::KeySlot>,
    /// Role and followers' progress when replicated (`replica`).
    replica: replica::Replica,
}

impl Partition {
    /// Wraps an opened log and rebuilds producer state: from the newest usable producer
    /// snapshot (Kafka's `.snapshot` format, written at clean shutdown and at segment rolls)
    /// plus the batches after it, or from the whole log when there is none. `recovery_point`
    /// is the one the log was opened from (see `load_snapshot`).
    pub fn new(
        topic: Arc<str>,
        index: i32,
        log: PartitionLog,
        settings: Arc<TopicSettings>,
        recovery_point: i64,
    ) -> Result<Partition, StorageError> {
        let mut producers = ProducerStateTable::default();
        let mut txns = OpenTxns::default();
        let replay_from = load_snapshot(&log, recovery_point, &mut producers, &mut txns)?;
        for h in log.batch_headers_from(replay_from)? {
            if h.producer_id >= 0 && !h.is_control() {
                producers.record(
                    h.producer_id,
                    h.producer_epoch,
                    batch_meta(&h, h.base_offset),
                );
            }
            txn::replay(&log, &mut producers, &mut txns, &h)?;
        }
        let hw = log.written_end_offset();
        let snapshot_segment = Cell::new(log.active_segment_base());
        let (high_watermark, _) = watch::channel(hw);
        let (last_stable, _) = watch::channel(txns.last_stable_offset(hw));
        Ok(Partition {
            topic,
            index,
            log,
            producers: RefCell::new(producers),
            txns: RefCell::new(txns),
            high_watermark,
            last_stable,
            settings: RefCell::new(settings),
            last_flush: Cell::new(Instant::now()),
            snapshot_segment,
            dedup: RefCell::new(None),
            expiry: RefCell::new(expiry::ExpiryCache::default()),
            key_index: RefCell::default(),
            replica: replica::Replica::new(hw),
        })
    }

    /// What the log cleaner must respect (Kafka's `lastRecordsOfActiveProducers` and
    /// the LSO): the batch holding each known producer's last record is kept (emptied if
    /// need be) so producer state survives a reload, and nothing past the LSO is cleaned.
    pub fn cleaner_producer_state(&self) -> storage::cleaner::ProducerState {
        let last_records = self
            .producers
            .borrow()
            .iter()
            .map(|(pid, e)| {
                let last = storage::cleaner::LastRecord {
                    last_data_offset: e.batches.back().map(|b| b.last_offset),
                    producer_epoch: e.epoch,
                };
                (*pid, last)
            })
            .collect();
        storage::cleaner::ProducerState {
            last_records,
            last_stable_offset: self.last_stable_offset(),
        }
    }

    pub fn settings(&self) -> Arc<TopicSettings> {
        self.settings.borrow().clone()
    }

    pub fn set_settings(&self, settings: Arc<TopicSettings>) {
        let old = self.settings.replace(settings.clone());
        // Flow configs apply at once: expiry is computed again under the new TTLs, and a
        // dedup window goes when dedup is turned off (rebuilt from the log when turned on).
        if old.flow.expiry != settings.flow.expiry {
            self.expiry.borrow_mut().clear();
        }
        if settings.flow.dedup.is_none() {
            self.dedup.borrow_mut().take();
        }
    }

    /// Kafka's `flush.ms`: data written without acks=all is fdatasync'd at the latest this
    /// long after the last flush. Returns whether it flushed. Called by the shard's timer.
    pub async fn flush_if_due(&self, now: Instant) -> Result<bool, StorageError> {
        let flush_ms = self.settings().log.flush_ms;
        if flush_ms >= i64::MAX as u64 {
            return Ok(false);
        }
        if self.log.durable_end_offset() >= self.log.written_end_offset() {
            self.last_flush.set(now);
            return Ok(false);
        }
        if now.saturating_duration_since(self.last_flush.get()) < Duration::from_millis(flush_ms) {
            return Ok(false);
        }
        self.log.flush().await?;
        self.last_flush.set(now);
        Ok(true)
    }

    pub fn high_watermark(&self) -> i64 {
        *self.high_watermark.borrow()
    }

    /// Kafka's `deleteRecordsOnLeader`: `offset` -1 means the high watermark; an offset below
    /// the current log start changes nothing. Returns the low watermark (the log start on a
    /// single node). The segments wholly below go at once; the rest waits for retention.
    pub fn delete_records(&self, offset: i64) -> Result<i64, DeleteRecordsError> {
        let offset = self.delete_records_target(offset)?;
        self.log.advance_log_start(offset)?;
        Ok(self.log.log_start_offset())
    }

    /// The offset a DeleteRecords asks the log start to move to (-1: the high watermark),
    /// checked as Kafka checks it: the policy must delete, the offset be within [0, HW].
    pub fn delete_records_target(&self, offset: i64) -> Result<i64, DeleteRecordsError> {
        if !self.settings().retention.delete {
            return Err(DeleteRecordsError::Policy(format!(
                "{}-{}",
                self.topic, self.index
            )));
        }
        let hw = self.high_watermark();
        let offset = if offset == -1 { hw } else { offset };
        if offset < 0 || offset > hw {
            return Err(DeleteRecordsError::OffsetOutOfRange {
                offset,
                high_watermark: hw,
            });
        }
        Ok(offset)
    }

    /// One retention pass with the topic's current settings (Kafka's `deleteOldSegments`).
    pub fn delete_old_segments(
        &self,
        now_ms: i64,
    ) -> Result<storage::RetentionOutcome, StorageError> {
        let settings = self.settings();
        let mut policy = settings.retention;
        // A topic TTL without a TTL header bounds every record's life: a segment whose newest
        // record expired holds nothing Fetch would deliver. (With a header, a record may
        // outlive the default; such segments go by retention.ms.)
        if let Some(ttl) = settings
            .flow
            .expiry
            .as_ref()
            .filter(|e| e.header.is_none())
            .and_then(|e| e.default_ttl_ms)
        {
            if policy.delete && policy.retention_ms >= 0 {
                policy.retention_ms = policy.retention_ms.min(ttl);
            } else {
                policy.retention_ms = ttl;
            }
            if !policy.delete {
                policy.retention_bytes = -1;
                policy.delete = true;
            }
        }
        self.log
            .delete_old_segments(&policy, self.high_watermark(), now_ms)
    }

    /// OffsetForLeaderEpoch on the leader: (epoch, end offset) as Kafka's
    /// `endOffsetForEpoch`, the end of the latest epoch being the high watermark (what a
    /// single node's log end is once appends complete).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.log.end_offset_for_epoch(epoch, self.epoch_end())
    }

    /// A receiver that changes whenever the high watermark moves: fetch long polls wait on it
    /// from any shard (the channel is `Send`).
    pub fn watch_high_watermark(&self) -> watch::Receiver<i64> {
        self.high_watermark.subscribe()
    }

    /// Appends one validated batch: the first phase runs now, at the call — sequence and
    /// transaction checks, producer state, the offset assignment and the hand-off to the log,
    /// all in call order with no await — so batches are applied in the order their calls
    /// arrive; the returned future is the second phase (the write, and for `acks == -1` the
    /// fdatasync). A refusal is known at once: `Err` before any state changed.
    pub fn append(
        self: &Rc<Self>,
        header: BatchHeader,
        records: Bytes,
        acks: i16,
        now_ms: i64,
    ) -> Result<AppendPending, PartitionError> {
        let settings = self.settings();
        // Coordinator writes (transactional offset commits, markers) carry a producer but no
        // sequence: Kafka's AppendOrigin.COORDINATOR, which skips the sequence checks.
        let idempotent = header.producer_id >= 0 && header.base_sequence >= 0;
        let next_offset = self.log.log_end_offset();
        if idempotent {
            let verdict = self.producers.borrow().check(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                producer_state::increment_sequence(header.base_sequence, header.last_offset_delta),
                next_offset,
            )?;
            if let SequenceVerdict::Duplicate(original) = verdict {
                let me = self.clone();
                return Ok(Box::pin(async move {
                    me.answer_duplicate(original, acks).await
                }));
            }
            self.check_txn_data(&header, next_offset)?;
        }
        // Dedup by message id, after the sequence check: a producer's retry of a batch is
        // answered by its sequence numbers, not refused as its own duplicate.
        let (header, records, new_ids, duplicates, answer_offset) =
            match self.dedup_batch(&settings, header, records, next_offset, now_ms)? {
                Deduped::Append(header, records, ids, duplicates, answer) => {
                    (header, records, ids, duplicates, answer)
                }
                Deduped::Answered(first_original, duplicates) => {
                    let me = self.clone();
                    return Ok(Box::pin(async move {
                        me.answer_dedup(first_original, duplicates, acks).await
                    }));
                }
            };
        if idempotent {
            // Recorded before the append's first await: the log assigns offsets in call order,
            // so a pipelined next batch of this producer, checked while this one is being
            // written, sees this batch's sequence.
            self.producers.borrow_mut().record(
                header.producer_id,
                header.producer_epoch,
                batch_meta(&header, next_offset),
            );
        }
        if header.producer_id >= 0 {
            // A coordinator's transactional write (TxnOffsetCommit) has no sequence but opens
            // the producer's transaction here all the same, as Kafka's COORDINATOR origin does
            // and as the replay at open and on followers (`txn::replay`) does from the same
            // batch: without it the abort marker found no open transaction, so this leader
            // wrote no `.txnindex` entry where its followers did, and a restart's replay then
            // met the missing entry below later ones and took the partition offline.
            self.record_txn_data(&header, next_offset);
        }
        let opts = AppendOptions {
            durability: if acks == -1 {
                Durability::Fsync
            } else {
                Durability::None
            },
            log_append_time_ms: settings.log_append_time.then_some(now_ms),
            leader_epoch: self.append_epoch(),
        };
        // The received bytes are the bytes written: storage rewrites only each batch's
        // 16-byte prefix (base offset, leader epoch), from a buffer of its own.
        self.expiry.borrow_mut().note_append(
            &settings.flow,
            &header,
            &records,
            next_offset,
            settings.max_decompressed_bytes,
        );
        // The bytes written, for the key index once the write completed.
        let keyed = settings.key_index.then(|| records.clone());
        let append = self.log.append(records, opts);
        // This batch's end, known now: the offsets were assigned in the call above.
        let end = self.log.log_end_offset();
        let overlap = acks == -1 && self.is_replicated_leader();
        let evicted = match (new_ids, settings.flow.dedup.as_ref()) {
            (Some(ids), Some(ds)) if !ids.is_empty() => match self.dedup.borrow_mut().as_mut() {
                Some(w) => w.remember(ids, next_offset, now_ms, ds),
                None => 0,
            },
            _ => 0,
        };
        self.snapshot_if_rolled();
        let me = self.clone();
        Ok(Box::pin(async move {
            let result = if overlap {
                // The followers may fetch the batch once it is written: their fetch, write
                // and fdatasync overlap this node's fdatasync (the acknowledgement still
                // waits for both, `wait_replicated`). Only the written end is published
                // early; the high watermark moves as before.
                let early = async {
                    if me.log.wait_written(end).await.is_ok() {
                        me.publish_log_end();
                    }
                };
                futures::future::join(append, early).await.0
            } else {
                append.await
            };
            if let (Ok(r), Some(batch)) = (&result, &keyed) {
                // Before the high watermark can pass it, and whether or not the followers
                // get it in time: a record the index lacks would never be read by key.
                me.index_appended(r.base_offset, batch);
            }
            me.publish_offsets();
            match result {
                Ok(r) => {
                    debug_assert!(!idempotent || r.base_offset == next_offset);
                    Ok(ProduceOutcome {
                        base_offset: answer_offset.unwrap_or(r.base_offset),
                        log_append_time_ms: r.log_append_time_ms,
                        log_start_offset: r.log_start_offset,
                        dedup_duplicates: duplicates,
                        dedup_evicted: evicted,
                    })
                }
                Err(e) => {
                    if idempotent {
                        me.producers.borrow_mut().truncate_from(next_offset);
                        me.txns.borrow_mut().truncate_from(next_offset);
                    }
                    if let Some(w) = me.dedup.borrow_mut().as_mut() {
                        w.truncate_from(next_offset);
                    }
                    me.expiry.borrow_mut().truncate_from(next_offset);
                    Err(e.into())
                }
            }
        }))
    }

    /// A retried batch is answered with the original offsets, once those are as durable as
    /// the retry asks for.
    async fn answer_duplicate(
        &self,
        original: BatchMeta,
        acks: i16,
    ) -> Result<ProduceOutcome, PartitionError> {
        if acks == -1 && self.log.durable_end_offset() <= original.last_offset {
            self.log.flush().await?;
        }
        Ok(ProduceOutcome {
            base_offset: original.first_offset,
            log_append_time_ms: -1,
            log_start_offset: self.log.log_start_offset(),
            ..Default::default()
        })
    }

    /// Reads from `offset`: up to the high watermark, or for read_committed up to the LSO,
    /// with the aborted transactions overlapping what was read (Kafka bounds that search by
    /// the end of the fetched data).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        read_committed: bool,
    ) -> Result<FetchOutcome, StorageError> {
        let hw = self.high_watermark();
        let lso = self.last_stable_offset();
        let mut data = self
            .log
            .read(offset, max_bytes, if read_committed { lso } else { hw })?;
        let mut expired = 0;
        let settings = self.settings();
        if let Some(e) = &settings.flow.expiry {
            let chunks = std::mem::take(&mut data.chunks);
            let (chunks, n) = self.expiry.borrow_mut().filter(
                e,
                chunks,
                crate::now_ms(),
                settings.max_decompressed_bytes,
            );
            data.total_bytes = chunks.iter().map(Bytes::len).sum();
            data.chunks = chunks;
            expired = n;
        }
        let aborted = read_committed.then(|| {
            let end = data
                .chunks
                .last()
                .and_then(|c| {
                    storage::batch::BatchIter::new(c)
                        .filter_map(Result::ok)
                        .last()
                })
                .map(|(h, _)| h.last_offset() + 1);
            match end {
                Some(end) => self.log.collect_aborted_txns(offset, end),
                None => Vec::new(),
            }
        });
        Ok(FetchOutcome {
            data,
            high_watermark: hw,
            last_stable_offset: lso,
            log_start_offset: self.log.log_start_offset(),
            aborted,
            expired,
        })
    }
}

/// Loads the newest usable snapshot into `producers` and returns the offset to replay batch
/// headers from. Usable: at or above the log start, and at or below both the log end and
/// the recovery point the log was opened from. Snapshots past the log end (recovery cut the
/// log below them) describe data that is gone: they are deleted. One past the recovery point
/// is kept but not used: the replay must cover every abort marker above the recovery point,
/// because their `.txnindex` entries were not yet synced and a power loss may have taken
/// them (the replay writes missing ones again). After a clean shutdown the recovery point is
/// the log end, so the shutdown's snapshot is used and nothing is replayed. A snapshot that
/// fails its CRC (one written at a roll is not fsynced) gives way to the one before it.
fn load_snapshot(
    log: &PartitionLog,
    recovery_point: i64,
    producers: &mut ProducerStateTable,
    txns: &mut OpenTxns,
) -> Result<i64, StorageError> {
    let dir = log.dir();
    let start = log.log_start_offset();
    let end = log.log_end_offset();
    let mut usable = Vec::new();
    for offset in producer_snapshot::list(dir)? {
        if offset > end {
            let path = producer_snapshot::snapshot_path(dir, offset);
            tracing::warn!(path = %path.display(), log_end = end, "dropping producer snapshot past the log end");
            let _ = std::fs::remove_file(path);
        } else if offset >= start && offset <= recovery_point {
            usable.push(offset);
        }
    }
    for &offset in usable.iter().rev() {
        let path = producer_snapshot::snapshot_path(dir, offset);
        let entries = match producer_snapshot::read(&path) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "unreadable producer snapshot; trying an older one");
                continue;
            }
        };
        for e in entries {
            // An entry made by a marker alone has no batch (Kafka writes last offset -1).
            if e.last_offset >= 0 {
                load_snapshot_batch(producers, &e);
            }
            let open = (e.current_txn_first_offset >= 0).then_some(e.current_txn_first_offset);
            producers.restore_txn(
                e.producer_id,
                e.producer_epoch,
                e.coordinator_epoch,
                open,
                e.timestamp,
            );
            if let Some(first) = open {
                txns.begin(e.producer_id, first);
            }
        }
        tracing::debug!(path = %path.display(), replay = end - offset, "producer state from snapshot");
        return Ok(offset);
    }
    Ok(start)
}

fn load_snapshot_batch(producers: &mut ProducerStateTable, e: &ProducerSnapshotEntry) {
    {
        debug_assert!(e.last_offset >= 0);
        // Kafka's snapshot keeps each producer's last batch: enough to answer a retry of it.
        let delta = e.offset_delta.max(0);
        let first_seq = if e.last_sequence >= delta {
            e.last_sequence - delta
        } else {
            // The batch wrapped past i32::MAX.
            (i32::MAX - (delta - e.last_sequence)) + 1
        };
        producers.record(
            e.producer_id,
            e.producer_epoch,
            BatchMeta {
                first_seq,
                last_seq: e.last_sequence,
                first_offset: e.last_offset - delta as i64,
                last_offset: e.last_offset,
                timestamp: e.timestamp,
            },
        );
    }
}

impl Partition {
    /// Forgets the state of producers idle for `expiration_ms` (none with a transaction
    /// open); returns how many.
    pub fn expire_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producers.borrow_mut().expire(now_ms, expiration_ms)
    }

    /// Writes the producer state as of the log end in Kafka's snapshot format and removes
    /// older snapshots; called at clean shutdown so the next open replays nothing.
    pub fn write_producer_snapshot(&self) -> Result<(), StorageError> {
        let end = self.log.log_end_offset();
        producer_snapshot::write(self.log.dir(), end, &self.snapshot_entries())?;
        self.remove_snapshots_below(end)
    }

    /// Called right after an append was handed to the log (its offset assigned) and before
    /// its first await: if that append rolled the log, snapshots the producer state as of
    /// the log end. The snapshot is consistent at exactly this point because every state
    /// change (batches' sequences, transaction starts and ends) is made synchronously with
    /// its offset assignment, before any await. It may cover batches still being written: a
    /// crash that loses them leaves the log end below the snapshot's offset, and the next
    /// open drops it for an older one or replays the log. Written without fsync: a torn one
    /// fails its CRC and an older one serves (see `load_snapshot`).
    pub(super) fn snapshot_if_rolled(&self) {
        let base = self.log.active_segment_base();
        if base == self.snapshot_segment.replace(base) {
            return;
        }
        let end = self.log.log_end_offset();
        let written =
            producer_snapshot::write_unsynced(self.log.dir(), end, &self.snapshot_entries())
                .and_then(|_| self.remove_snapshots_below(self.log.log_start_offset()));
        if let Err(e) = written {
            // Only recovery time depends on it: the next open replays more of the log.
            tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "producer snapshot at segment roll failed");
        }
    }

    /// Removes the snapshots below `offset`. Rolls keep one per segment above the log start,
    /// as Kafka does: after a crash the newest at or below the checkpointed recovery point
    /// is the one used, and that may be several rolls back.
    fn remove_snapshots_below(&self, offset: i64) -> Result<(), StorageError> {
        let dir = self.log.dir();
        for o in producer_snapshot::list(dir)? {
            if o < offset {
                let _ = std::fs::remove_file(producer_snapshot::snapshot_path(dir, o));
            }
        }
        Ok(())
    }

    fn snapshot_entries(&self) -> Vec<ProducerSnapshotEntry> {
        self.producers
            .borrow()
            .iter()
            .map(|(&producer_id, e)| {
                let last = e.batches.back();
                ProducerSnapshotEntry {
                    producer_id,
                    producer_epoch: e.epoch,
                    last_sequence: last.map_or(-1, |b| b.last_seq),
                    last_offset: last.map_or(-1, |b| b.last_offset),
                    offset_delta: last.map_or(0, |b| (b.last_offset - b.first_offset) as i32),
                    timestamp: last.map_or(e.last_timestamp, |b| b.timestamp),
                    coordinator_epoch: e.coordinator_epoch,
                    current_txn_first_offset: e.current_txn_first_offset.unwrap_or(-1),
                }
            })
            .collect()
    }
}

fn batch_meta(h: &BatchHeader, first_offset: i64) -> BatchMeta {
    BatchMeta {
        first_seq: h.base_sequence,
        last_seq: producer_state::increment_sequence(h.base_sequence, h.last_offset_delta),
        first_offset,
        last_offset: first_offset + h.last_offset_delta as i64,
        timestamp: h.max_timestamp,
    }
}
