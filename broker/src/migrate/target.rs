//! The Strom side of a migration: the migrator owns the data dir (holds its lock, so no
//! `strom serve` runs on it meanwhile) and writes the logs, the topic catalog, the
//! checkpoints and `__consumer_offsets` the way the broker reads them at start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;
use storage::batch::{self, BatchHeader, BatchIter};
use storage::txn_index::AbortedTxn;
use storage::{Durability, IoBackend, PartitionLog};

use super::MigrateError;
use crate::config::{BrokerConfig, Origin};
use crate::coordinator::group::records::CommittedOffset;
use crate::coordinator::group::records::GroupRecord;
use crate::coordinator::group::{offsets_partition, OFFSETS_SEGMENT_BYTES, OFFSETS_TOPIC};
use crate::metadata::catalog::{CatalogHandle, TopicMeta};
use crate::partition::txn::{control_type, ControlType};

const RECOVERY_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
const PRODUCER_IDS: &str = "strom-producer-ids";

/// One partition being written, with the transaction state its abort markers need.
pub struct PartitionTarget {
    /// Shared with a background fdatasync (`Target::sync_logs`) while the copy goes on.
    pub log: Rc<PartitionLog>,
    /// First offset of each producer's open transaction (Kafka's `currentTxnFirstOffset`).
    ongoing: BTreeMap<i64, i64>,
}

pub struct Target {
    pub data_dir: PathBuf,
    /// Strom's node id (the key of its per-broker dynamic configs).
    pub node_id: i32,
    _lock: storage::logdir::DirLock,
    catalog: CatalogHandle,
    io: Rc<IoBackend>,
    offsets_partitions: i32,
    pub logs: BTreeMap<(String, i32), PartitionTarget>,
    /// Largest producer id seen in copied batches: Strom's own allocator must start above it.
    max_producer_id: i64,
}

/// What one append of fetched bytes did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Appended {
    pub batches: usize,
    pub bytes: usize,
}

impl Target {
    /// Takes the data dir (must be called inside the tokio runtime the logs will use).
    pub fn open(
        config: BrokerConfig,
        origins: BTreeMap<String, Origin>,
    ) -> Result<Target, MigrateError> {
        let data_dir = config.data_dir.clone();
        std::fs::create_dir_all(&data_dir)
            .map_err(|e| MigrateError::Target(format!("creating {}: {e}", data_dir.display())))?;
        let lock = storage::logdir::lock(&data_dir).map_err(|e| {
            MigrateError::Target(format!(
                "{e} (stop `strom serve` on this data dir while mirroring)"
            ))
        })?;
        storage::logdir::ensure_meta_properties(&data_dir, config.node_id)?;
        // The logs change under the marker's feet: the broker must not take them as cleanly
        // shut down.
        let marker = storage::logdir::clean_shutdown_marker(&data_dir);
        if marker.exists() {
            std::fs::remove_file(&marker)
                .map_err(|e| MigrateError::Target(format!("{}: {e}", marker.display())))?;
        }
        let offsets_partitions = config.offsets_topic_num_partitions;
        let node_id = config.node_id;
        let io_kind = match config.io_backend.as_str() {
            "sync" => storage::IoBackendKind::Sync,
            "uring" => storage::IoBackendKind::Uring,
            _ => storage::IoBackendKind::Auto,
        };
        let io = IoBackend::new(io_kind)
            .map_err(|e| MigrateError::Target(format!("io backend: {e}")))?;
        let catalog = CatalogHandle::open(&data_dir, config, origins)
            .map_err(|e| MigrateError::Target(e.to_string()))?;
        let max_producer_id = read_producer_ids(&data_dir)? - 1;
        Ok(Target {
            data_dir,
            node_id,
            _lock: lock,
            catalog,
            io,
            offsets_partitions,
            logs: BTreeMap::new(),
            max_producer_id,
        })
    }

    pub fn topic(&self, name: &str) -> Option<std::sync::Arc<TopicMeta>> {
        self.catalog.snapshot().get(name).cloned()
    }

    /// Creates the topic as on the source, or checks that the existing one matches.
    pub fn ensure_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<(), MigrateError> {
        if let Some(t) = self.topic(name) {
            if t.partitions != partitions {
                return Err(MigrateError::Refused(format!(
                    "topic {name} exists on Strom with {} partitions, the source has {partitions}",
                    t.partitions
                )));
            }
            return Ok(());
        }
        crate::metadata::catalog::validate_topic_name(name).map_err(MigrateError::Target)?;
        self.catalog
            .create(name, partitions, configs, name.starts_with("__"))
            .map_err(|e| MigrateError::Target(e.to_string()))?;
        Ok(())
    }

    /// Creates a topic keeping the source's topic id (offline import).
    pub fn create_topic_with_id(
        &self,
        name: &str,
        id: [u8; 16],
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<(), MigrateError> {
        crate::metadata::catalog::validate_topic_name(name).map_err(MigrateError::Target)?;
        self.catalog
            .create_with_id(name, uuid::Uuid::from_bytes(id), partitions, configs, false)
            .map_err(|e| MigrateError::Target(e.to_string()))?;
        Ok(())
    }

    /// Partitions added on the source while mirroring are added on Strom too.
    pub fn grow_topic(&self, name: &str, partitions: i32) -> Result<(), MigrateError> {
        self.catalog
            .set_partitions(name, partitions)
            .map_err(|e| MigrateError::Target(e.to_string()))
    }

    /// Opens a partition's log (recovering it from the last recorded checkpoint) and
    /// rebuilds the transaction state and aborted-transaction index entries from its batches.
    pub fn open_partition(
        &mut self,
        topic: &str,
        p: i32,
    ) -> Result<&PartitionTarget, MigrateError> {
        let key = (topic.to_string(), p);
        if !self.logs.contains_key(&key) {
            let meta = self
                .topic(topic)
                .ok_or_else(|| MigrateError::Target(format!("topic {topic} is not on Strom")))?;
            let points = storage::logdir::read_checkpoint(&self.data_dir.join(RECOVERY_CHECKPOINT))
                .unwrap_or_default();
            let point = points.get(&key).copied().unwrap_or(0);
            let log = PartitionLog::open(
                &self.data_dir,
                topic,
                p,
                meta.settings.log.clone(),
                self.io.clone(),
                point,
            )?;
            storage::logdir::write_partition_metadata(log.dir(), *meta.id.as_bytes())?;
            let mut t = PartitionTarget {
                log: Rc::new(log),
                ongoing: BTreeMap::new(),
            };
            let max_pid = t.rebuild_txn_state()?;
            self.max_producer_id = self.max_producer_id.max(max_pid);
            self.logs.insert(key.clone(), t);
        }
        Ok(&self.logs[&key])
    }

    /// Hard-links verified Kafka segments as the first segments of a partition that has
    /// none yet (see `storage::logdir::link_segments`), records `end` as its recovery point
    /// so that the open validates every linked batch and builds Strom's own indexes without
    /// cutting anything, and opens it.
    pub fn link_segments(
        &mut self,
        topic: &str,
        p: i32,
        segments: &[(i64, PathBuf)],
        end: i64,
    ) -> Result<(), MigrateError> {
        storage::logdir::link_segments(&self.data_dir, topic, p, segments, end)?;
        self.write_recovery_points([((topic.to_string(), p), end)])?;
        self.open_partition(topic, p)?;
        Ok(())
    }

    fn write_recovery_points(
        &self,
        updates: impl IntoIterator<Item = ((String, i32), i64)>,
    ) -> Result<(), MigrateError> {
        let path = self.data_dir.join(RECOVERY_CHECKPOINT);
        let mut points = storage::logdir::read_checkpoint(&path).unwrap_or_default();
        points.extend(updates);
        let entries: Vec<(String, i32, i64)> =
            points.into_iter().map(|((t, p), o)| (t, p, o)).collect();
        storage::logdir::write_checkpoint(&path, &entries)?;
        Ok(())
    }

    /// Appends the complete batches of a fetch answer at their own offsets (a trailing
    /// partial batch, as Fetch may return, is left for the next fetch). Batches the log
    /// holds already are skipped; one overlapping the log end means the logs differ.
    pub async fn append(
        &mut self,
        topic: &str,
        p: i32,
        records: &Bytes,
    ) -> Result<Appended, MigrateError> {
        let key = (topic.to_string(), p);
        let t = self
            .logs
            .get_mut(&key)
            .ok_or_else(|| MigrateError::Target(format!("{topic}-{p} is not open")))?;
        let mut done = Appended::default();
        for item in BatchIter::new(records) {
            let (h, bytes) = match item {
                Ok(b) => b,
                Err(batch::BatchError::Truncated) => break,
                Err(e) => {
                    return Err(MigrateError::Source(format!(
                        "{topic}-{p}: bad batch from the source: {e}"
                    )))
                }
            };
            batch::validate_stored(bytes).map_err(|e| {
                MigrateError::Source(format!(
                    "{topic}-{p}: batch at offset {} fails verification: {e}",
                    h.base_offset
                ))
            })?;
            let end = t.log.log_end_offset();
            if h.last_offset() < end {
                continue;
            }
            if h.base_offset < end {
                return Err(MigrateError::Refused(format!(
                    "{topic}-{p}: source batch {}..={} overlaps Strom's log end {end}: the logs differ",
                    h.base_offset,
                    h.last_offset()
                )));
            }
            // Offsets are assigned when this is called; the flush that records progress
            // waits for the write, so the future is only awaited to learn why it failed.
            let started = t
                .log
                .append_at_offsets(records.slice_ref(bytes), Durability::None, 0);
            if t.log.log_end_offset() != h.last_offset() + 1 {
                started.await?;
                return Err(MigrateError::Target(format!(
                    "{topic}-{p}: append at offset {} did not take",
                    h.base_offset
                )));
            }
            drop(started);
            let max_pid = t.track(&h, bytes)?;
            self.max_producer_id = self.max_producer_id.max(max_pid);
            done.batches += 1;
            done.bytes += bytes.len();
        }
        Ok(done)
    }

    /// fdatasyncs every open log, then records the durable ends as the broker's recovery
    /// points and raises Strom's producer id allocator above every copied producer id.
    pub async fn flush(&self) -> Result<(), MigrateError> {
        self.sync_logs().await?;
        self.record_durable()
    }

    /// fdatasyncs everything appended to the open logs so far (all logs at once, so their
    /// syncs overlap), owning what it needs: the mirror runs it as a task of its own and
    /// keeps fetching and appending meanwhile, instead of stalling the copy for each
    /// checkpoint's whole fdatasync. `record_durable` once it is done.
    pub fn sync_logs(&self) -> impl std::future::Future<Output = Result<(), MigrateError>> {
        let logs: Vec<(String, Rc<PartitionLog>)> = self
            .logs
            .iter()
            .map(|((topic, p), t)| (format!("{topic}-{p}"), t.log.clone()))
            .collect();
        async move {
            let syncs = logs.iter().map(|(name, log)| async move {
                log.flush()
                    .await
                    .map_err(|e| MigrateError::Target(format!("flushing {name}: {e}")))
            });
            futures::future::try_join_all(syncs).await?;
            Ok(())
        }
    }

    /// Records the logs' durable ends as the broker's recovery points and raises Strom's
    /// producer id allocator above every copied producer id.
    pub fn record_durable(&self) -> Result<(), MigrateError> {
        self.write_recovery_points(
            self.logs
                .iter()
                .map(|(k, t)| (k.clone(), t.log.durable_end_offset())),
        )?;
        let next = self.max_producer_id + 1;
        if next > read_producer_ids(&self.data_dir)? {
            storage::logdir::write_atomic(
                &self.data_dir.join(PRODUCER_IDS),
                next.to_string().as_bytes(),
            )
            .map_err(|e| MigrateError::Target(format!("{PRODUCER_IDS}: {e}")))?;
        }
        Ok(())
    }

    /// Writes a group's committed offsets into `__consumer_offsets` (fdatasync'd), as an
    /// OffsetCommit on Strom would.
    pub async fn commit_offsets(
        &mut self,
        group: &str,
        offsets: &[((String, i32), super::client::Committed)],
    ) -> Result<(), MigrateError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let n = match self.topic(OFFSETS_TOPIC) {
            Some(t) => t.partitions,
            None => {
                let configs = BTreeMap::from([
                    ("cleanup.policy".to_string(), "compact".to_string()),
                    (
                        "segment.bytes".to_string(),
                        OFFSETS_SEGMENT_BYTES.to_string(),
                    ),
                ]);
                self.ensure_topic(OFFSETS_TOPIC, self.offsets_partitions, configs)?;
                self.offsets_partitions
            }
        };
        let p = offsets_partition(group, n);
        self.open_partition(OFFSETS_TOPIC, p)?;
        let now = crate::now_ms();
        let recs: Vec<GroupRecord> = offsets
            .iter()
            .map(
                |((topic, partition), (offset, epoch, metadata))| GroupRecord::Offset {
                    group: group.to_string(),
                    topic: topic.clone(),
                    partition: *partition,
                    value: Some(CommittedOffset {
                        offset: *offset,
                        leader_epoch: *epoch,
                        metadata: metadata.clone(),
                        commit_timestamp: now,
                    }),
                },
            )
            .collect();
        let kvs: Vec<_> = recs.iter().map(|r| r.encode()).collect();
        let bytes = crate::coordinator::log::encode_batch(&kvs, None, now)
            .map_err(|e| MigrateError::Target(e.to_string()))?;
        let log = &self.logs[&(OFFSETS_TOPIC.to_string(), p)].log;
        let opts = storage::AppendOptions {
            durability: Durability::Fsync,
            log_append_time_ms: None,
            leader_epoch: 0,
        };
        log.append(bytes, opts)
            .await
            .map_err(|e| MigrateError::Target(format!("writing offsets of group {group}: {e}")))?;
        Ok(())
    }

    /// The batch of `log` holding `offset`, bytes from the magic byte on (what the CRC and
    /// the records cover; base offset, length and leader epoch are left out).
    pub fn batch_at(
        &self,
        topic: &str,
        p: i32,
        offset: i64,
    ) -> Result<Option<(BatchHeader, Bytes)>, MigrateError> {
        let t = &self.logs[&(topic.to_string(), p)];
        batch_at(&t.log, offset)
    }
}

pub fn batch_at(
    log: &PartitionLog,
    offset: i64,
) -> Result<Option<(BatchHeader, Bytes)>, MigrateError> {
    if offset < log.log_start_offset() || offset >= log.log_end_offset() {
        return Ok(None);
    }
    let read = log.read(offset, 1, i64::MAX)?;
    let Some(chunk) = read.chunks.first() else {
        return Ok(None);
    };
    let h = BatchHeader::parse(chunk).map_err(storage::StorageError::from)?;
    Ok(Some((h, chunk.slice(16..h.total_size()))))
}

impl PartitionTarget {
    /// (producer id, first offset) of every transaction the copied log leaves open.
    pub fn open_transactions(&self) -> Vec<(i64, i64)> {
        self.ongoing.iter().map(|(&p, &o)| (p, o)).collect()
    }

    /// Replays the log's batch headers: open transactions, and the aborted-transaction index
    /// entries of abort markers that the index lacks (entries are not fsynced, so a crash
    /// may lose the newest ones). Returns the largest producer id seen.
    fn rebuild_txn_state(&mut self) -> Result<i64, MigrateError> {
        let start = self.log.log_start_offset();
        let end = self.log.log_end_offset();
        let indexed = self.log.collect_aborted_txns(start, end);
        let last_indexed = indexed.iter().map(|t| t.last_offset).max().unwrap_or(-1);
        let mut max_pid = -1;
        for h in self.log.batch_headers_from(start)? {
            max_pid = max_pid.max(h.producer_id);
            if h.is_control() {
                let read = self.log.read(h.base_offset, 1, h.last_offset() + 1)?;
                let abort = read.chunks.first().and_then(|c| control_type(c));
                let first = self.ongoing.remove(&h.producer_id);
                if abort == Some(ControlType::Abort) && h.base_offset > last_indexed {
                    let txn = self.aborted(h.producer_id, first, h.base_offset);
                    self.log.append_aborted_txn(txn)?;
                }
            } else if h.is_transactional() {
                self.ongoing.entry(h.producer_id).or_insert(h.base_offset);
            }
        }
        Ok(max_pid)
    }

    /// Updates the transaction state with a just-appended batch; an abort marker gets its
    /// `.txnindex` entry. Returns the batch's producer id.
    fn track(&mut self, h: &BatchHeader, bytes: &[u8]) -> Result<i64, MigrateError> {
        if h.is_control() {
            let first = self.ongoing.remove(&h.producer_id);
            if control_type(bytes) == Some(ControlType::Abort) {
                let txn = self.aborted(h.producer_id, first, h.base_offset);
                self.log.append_aborted_txn(txn)?;
            }
        } else if h.is_transactional() {
            self.ongoing.entry(h.producer_id).or_insert(h.base_offset);
        }
        Ok(h.producer_id)
    }

    /// Kafka's `CompletedTxn` for an abort: the LSO after it is the first offset of the
    /// earliest transaction still open, or the marker's next offset.
    fn aborted(&self, producer_id: i64, first: Option<i64>, marker: i64) -> AbortedTxn {
        let lso = self.ongoing.values().copied().min().unwrap_or(marker + 1);
        AbortedTxn {
            producer_id,
            first_offset: first.unwrap_or(marker),
            last_offset: marker,
            last_stable_offset: lso,
        }
    }
}

fn read_producer_ids(data_dir: &Path) -> Result<i64, MigrateError> {
    let path = data_dir.join(PRODUCER_IDS);
    match std::fs::read_to_string(&path) {
        Ok(s) => s
            .trim()
            .parse::<i64>()
            .map_err(|e| MigrateError::Target(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(MigrateError::Target(format!("{}: {e}", path.display()))),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    pub(crate) fn batch(base: i64, n: i64, pid: i64, txn: bool, control: Option<i16>) -> BytesMut {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: txn,
                control: control.is_some(),
                delete_horizon: false,
                partition_leader_epoch: 3,
                producer_id: pid,
                producer_epoch: 0,
                timestamp_type: TimestampType::Creation,
                offset: base + i,
                // offset - sequence constant: the encoder keeps the records in one batch
                sequence: i as i32,
                timestamp: 1_700_000_000_000 + i,
                key: Some(match control {
                    Some(kind) => Bytes::from([0u8, 0, 0, kind as u8].to_vec()),
                    None => Bytes::from(format!("k{i}")),
                }),
                value: Some(match control {
                    Some(_) => Bytes::from_static(&[0, 0, 0, 0, 0, 5]),
                    None => Bytes::from(format!("v{i}")),
                }),
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        buf
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f)
    }

    #[test]
    fn given_aborted_transaction_when_copied_and_reopened_then_indexed_once_and_ids_raised() {
        let dir = tempfile::tempdir().unwrap();
        let config = BrokerConfig {
            data_dir: dir.path().to_path_buf(),
            ..Default::default()
        };
        run(async {
            let mut t = Target::open(config.clone(), BTreeMap::new()).unwrap();
            t.ensure_topic("t", 1, BTreeMap::new()).unwrap();
            t.open_partition("t", 0).unwrap();
            let mut all = BytesMut::new();
            all.extend_from_slice(&batch(0, 3, 7, true, None)); // txn of 7: 0..=2
            all.extend_from_slice(&batch(3, 2, 8, true, None)); // txn of 8: 3..=4, open
            all.extend_from_slice(&batch(5, 1, 7, true, Some(0))); // abort of 7 at 5
            all.extend_from_slice(&batch(9, 1, -1, false, None)); // after a gap
            all.extend_from_slice(&batch(10, 1, 8, true, Some(1))); // commit of 8
            let all = all.freeze();
            let done = t.append("t", 0, &all.slice(..all.len() - 5)).await.unwrap();
            assert_eq!(
                done.batches, 4,
                "the partial last batch waits for the next fetch"
            );
            let done = t.append("t", 0, &all).await.unwrap();
            assert_eq!(done.batches, 1, "batches Strom holds are skipped");
            t.flush().await.unwrap();
            let aborted = t.logs[&("t".to_string(), 0)]
                .log
                .collect_aborted_txns(0, 11);
            let want = AbortedTxn {
                producer_id: 7,
                first_offset: 0,
                last_offset: 5,
                last_stable_offset: 3,
            };
            assert_eq!(aborted, vec![want]);
            // Overlapping the log end: the logs differ.
            let clash = batch(10, 2, -1, false, None).freeze();
            assert!(matches!(
                t.append("t", 0, &clash).await,
                Err(MigrateError::Refused(_))
            ));
            drop(t);
            let mut t = Target::open(config, BTreeMap::new()).unwrap();
            let log = &t.open_partition("t", 0).unwrap().log;
            assert_eq!(log.log_end_offset(), 11);
            assert_eq!(log.collect_aborted_txns(0, 11), vec![want]);
            let (h, bytes) = t.batch_at("t", 0, 9).unwrap().unwrap();
            assert_eq!((h.base_offset, h.partition_leader_epoch), (9, 0));
            assert_eq!(bytes[..], batch(9, 1, -1, false, None)[16..]);
        });
        let ids = std::fs::read_to_string(dir.path().join(PRODUCER_IDS)).unwrap();
        assert_eq!(ids, "9");
    }
}
