//! The log of an internal coordinator topic (`__consumer_offsets`, `__transaction_state`):
//! appending key/value records as one batch, written acks=all (fdatasync before the caller
//! answers its client), and replaying a partition at load. Shared by the group and the
//! transaction coordinators, which differ only in their record schemas.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::partition::Partition;

/// Bytes read per step while replaying a coordinator partition.
const LOAD_CHUNK: usize = 1 << 20;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum CoordinatorLogError {
    #[error("encoding a coordinator batch failed: {0}")]
    Encode(String),
    #[error("reading the coordinator log failed: {0}")]
    Read(String),
    #[error("appending to the coordinator log failed: {0}")]
    Append(String),
    #[error("the coordinator topic is not available: {0}")]
    Unavailable(String),
    /// The partition is led by another node now: its coordinator is elsewhere.
    #[error("this node no longer leads the coordinator partition")]
    NotLeader,
    #[error("the coordinator write was not replicated to the ISR: {0}")]
    NotReplicated(String),
}

/// How long a coordinator write waits for the ISR (Kafka bounds it by the request timeout,
/// `offsets.commit.timeout.ms` = 5 s for offsets).
const REPLICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The producer a transactional batch belongs to (TxnOffsetCommit writes offsets as part of
/// the producer's transaction; its commit or abort marker decides them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// Appends `records` (key, value; a `None` value is a tombstone) as one batch and waits until
/// it is fsync'd — and, on a replicated partition, until every in-sync replica has it
/// (acks=all, so a committed offset or transaction state survives the leader's loss). A
/// partition this node follows refuses: only its leader writes it.
pub async fn append(
    part: &std::rc::Rc<Partition>,
    records: &[(Bytes, Option<Bytes>)],
    txn: Option<TxnProducer>,
) -> Result<(), CoordinatorLogError> {
    if records.is_empty() {
        return Ok(());
    }
    let now = crate::now_ms();
    append_batch(part, encode_batch(records, txn, now)?, now).await
}

/// Appends one encoded v2 batch written at `now` as `append` does (acks=all on the leader).
/// The share groups' dead-letter writes use it for their records with headers.
pub async fn append_batch(
    part: &std::rc::Rc<Partition>,
    bytes: Bytes,
    now: i64,
) -> Result<(), CoordinatorLogError> {
    let headers = storage::batch::validate_batches(&bytes)
        .map_err(|e| CoordinatorLogError::Encode(e.to_string()))?;
    let [header] = headers.as_slice() else {
        return Err(CoordinatorLogError::Encode("expected one batch".into()));
    };
    use crate::partition::replica::Role;
    match part.role() {
        Role::Follower { .. } => return Err(CoordinatorLogError::NotLeader),
        // As Kafka's appendRecordsToLeader: too small an ISR refuses before the append.
        Role::Leader { .. } => {
            if let Err(isr) = part.check_min_isr(part.settings().min_insync_replicas) {
                return Err(CoordinatorLogError::NotReplicated(format!(
                    "the ISR has {isr} replica(s), fewer than min.insync.replicas"
                )));
            }
        }
        Role::Single => {}
    }
    let append = |e: crate::partition::PartitionError| CoordinatorLogError::Append(e.to_string());
    let last_delta = header.last_offset_delta as i64;
    let outcome = part
        .append(*header, bytes, -1, now)
        .map_err(append)?
        .await
        .map_err(append)?;
    if matches!(part.role(), Role::Leader { .. }) {
        let end = outcome.base_offset + last_delta + 1;
        let min_isr = part.settings().min_insync_replicas;
        part.wait_replicated(end, min_isr, REPLICATION_TIMEOUT)
            .await
            .map_err(|e| match e {
                crate::partition::PartitionError::NotLeader => CoordinatorLogError::NotLeader,
                other => CoordinatorLogError::NotReplicated(other.to_string()),
            })?;
    }
    Ok(())
}

/// `records` as one uncompressed v2 batch (offsets from 0, no sequence), as the coordinators
/// append them; `strom migrate` writes copied group offsets with it too.
pub fn encode_batch(
    records: &[(Bytes, Option<Bytes>)],
    txn: Option<TxnProducer>,
    now: i64,
) -> Result<Bytes, CoordinatorLogError> {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| broker_record(i, now, Some(key.clone()), value.clone(), txn))
        .collect();
    encode_records(&records)
}

/// Record `i` of a batch the broker writes itself: CreateTime `now`, no headers, and no
/// producer unless `txn` names one.
pub fn broker_record(
    i: usize,
    now: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
    txn: Option<TxnProducer>,
) -> Record {
    Record {
        transactional: txn.is_some(),
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: txn.map_or(-1, |t| t.producer_id),
        producer_epoch: txn.map_or(-1, |t| t.producer_epoch),
        timestamp_type: TimestampType::Creation,
        offset: i as i64,
        // No sequence (-1 for the first record): broker writes are not idempotent producer
        // batches. The encoder splits batches when offset - sequence changes, so it stays
        // fixed.
        sequence: (i as i32).wrapping_sub(1),
        timestamp: now,
        key,
        value,
        headers: Default::default(),
    }
}

/// `records` as one uncompressed v2 batch.
pub fn encode_records(records: &[Record]) -> Result<Bytes, CoordinatorLogError> {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| CoordinatorLogError::Encode(format!("{e:#}")))?;
    Ok(buf.freeze())
}

/// Calls `visit` with every record of the partition from its log start, in offset order
/// (control records included: the group coordinator needs the transaction markers). Returns
/// how many records were visited.
pub fn replay(
    part: &Partition,
    mut visit: impl FnMut(&Record),
) -> Result<usize, CoordinatorLogError> {
    let mut offset = part.log.log_start_offset();
    let mut visited = 0usize;
    // Up to the log end, not the high watermark (Kafka's coordinators load with
    // FetchIsolation.LOG_END): a newly elected leader learns the watermark only from its
    // followers' next fetches, and its log already holds every write the old leader
    // acknowledged.
    let end = part.log.written_end_offset();
    loop {
        let data = part
            .log
            .read(offset, LOAD_CHUNK, end)
            .map_err(|e| CoordinatorLogError::Read(e.to_string()))?;
        if data.chunks.is_empty() {
            break;
        }
        let before = offset;
        for chunk in data.chunks {
            let headers = storage::batch::validate_batches(&chunk)
                .map_err(|e| CoordinatorLogError::Read(e.to_string()))?;
            if let Some(last) = headers.last() {
                offset = offset.max(last.base_offset + last.last_offset_delta as i64 + 1);
            }
            let mut buf = chunk.clone();
            let sets = RecordBatchDecoder::decode_all(&mut buf)
                .map_err(|e| CoordinatorLogError::Read(format!("{e:#}")))?;
            for set in sets {
                for r in &set.records {
                    visit(r);
                    visited += 1;
                }
            }
        }
        if offset <= before {
            break;
        }
    }
    Ok(visited)
}

/// A control record's type: `Some(true)` commit, `Some(false)` abort (Kafka's
/// `ControlRecordType`: key = int16 version, int16 type; 0 abort, 1 commit).
pub fn control_commit(r: &Record) -> Option<bool> {
    if !r.control {
        return None;
    }
    let key = r.key.as_deref()?;
    match key.get(2..4)? {
        [0, 0] => Some(false),
        [0, 1] => Some(true),
        _ => None,
    }
}

/// Partition `p` of coordinator topic `topic` on this (its home) shard, opened here when the
/// catalog has the topic but its creator has not opened this partition yet: creation opens
/// the partitions one after the other, and a coordinator request for a later one can arrive
/// in between. Answering that request COORDINATOR_NOT_AVAILABLE would be wrong (librdkafka
/// does not retry an OffsetFetch on it, and its assigned partitions then never start).
pub fn partition_on_shard(
    state: &crate::shard::ShardState,
    topic: &str,
    p: i32,
) -> Option<std::rc::Rc<Partition>> {
    if let Some(part) = state.partition(topic, p) {
        return Some(part);
    }
    let meta = state.ctx.catalog.snapshot().get(topic).cloned()?;
    if !(0..meta.partitions).contains(&p) {
        return None;
    }
    match crate::shard::open_partition(state, &meta, p, None) {
        Ok(part) => Some(part),
        Err(e) => {
            tracing::warn!(topic, partition = p, error = %e, "opening a coordinator partition failed");
            None
        }
    }
}

/// Creates an internal coordinator topic on first use (compacted, as Kafka's) and returns its
/// partition count (the existing topic's, when it exists already). On a cluster it is created
/// through the metadata image with `replication_factor` replicas and `min_isr`; as in Kafka,
/// that fails (COORDINATOR_NOT_AVAILABLE, the client retries) until enough brokers are
/// registered. A single node has one replica whatever the factor says.
pub async fn ensure_topic(
    broker: &crate::shard::BrokerContext,
    name: &str,
    partitions: i32,
    segment_bytes: &str,
    replication_factor: i16,
    min_isr: Option<i32>,
) -> Result<i32, CoordinatorLogError> {
    if let Some(t) = broker.catalog.snapshot().get(name) {
        return Ok(t.partitions);
    }
    let mut configs = std::collections::BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("segment.bytes".to_string(), segment_bytes.to_string()),
    ]);
    let created = if broker.cluster.get().is_some() {
        if let Some(m) = min_isr {
            configs.insert("min.insync.replicas".into(), m.to_string());
        }
        let rf = i32::from(replication_factor);
        crate::metadata::topics::create_replicated(broker, name, partitions, rf, configs).await
    } else {
        crate::metadata::topics::create_topic(broker, name, partitions, configs).await
    };
    match created {
        Ok(meta) => Ok(meta.partitions),
        Err(crate::metadata::topics::CreateError::InvalidReplicationFactor(why)) => {
            tracing::info!(topic = name, %why, "internal topic waits for brokers");
            Err(CoordinatorLogError::Unavailable(why))
        }
        Err(_) => {
            // Lost a race with another shard creating it: make sure its logs are open.
            let meta = broker
                .catalog
                .snapshot()
                .get(name)
                .cloned()
                .ok_or_else(|| CoordinatorLogError::Unavailable(format!("{name} is missing")))?;
            crate::shard::frontend::open_partitions(broker, &meta, 0..meta.partitions)
                .await
                .map_err(|e| CoordinatorLogError::Append(e.to_string()))?;
            Ok(meta.partitions)
        }
    }
}

/// The internal-topic partitions a coordinator has loaded on this shard, with the leader
/// epoch each was loaded at (`None`: single node): the bookkeeping the group and transaction
/// coordinators share (`coordinator::leadership` loads and unloads through it).
#[derive(Debug, Default)]
pub struct LoadedPartitions(std::cell::RefCell<std::collections::HashMap<i32, Option<i32>>>);

impl LoadedPartitions {
    /// Loaded at exactly `epoch` (another epoch means it may have been led elsewhere since).
    pub fn is_loaded_at(&self, p: i32, epoch: Option<i32>) -> bool {
        self.0.borrow().get(&p) == Some(&epoch)
    }

    /// The epoch `p` was loaded at (`Some(None)`: loaded on a single node; `None`: not loaded).
    pub fn epoch_of(&self, p: i32) -> Option<Option<i32>> {
        self.0.borrow().get(&p).copied()
    }

    pub fn insert(&self, p: i32, epoch: Option<i32>) {
        self.0.borrow_mut().insert(p, epoch);
    }

    /// Forgets `p`; true when it was loaded.
    pub fn remove(&self, p: i32) -> bool {
        self.0.borrow_mut().remove(&p).is_some()
    }

    pub fn list(&self) -> Vec<(i32, Option<i32>)> {
        self.0.borrow().iter().map(|(p, e)| (*p, *e)).collect()
    }

    pub fn clear(&self) {
        self.0.borrow_mut().clear();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::rc::Rc;
    use std::sync::Arc;

    use storage::batch::BatchHeader;
    use storage::{IoBackend, IoBackendKind, LogConfig, PartitionLog};

    use super::{append, TxnProducer};
    use crate::config::dynamic::BrokerView;
    use crate::config::effective::TopicSettings;
    use crate::partition::txn::ControlType;
    use crate::partition::Partition;
    use crate::test_support::TestBatch;

    fn open(dir: &std::path::Path) -> Result<Partition, storage::StorageError> {
        let io = IoBackend::new(IoBackendKind::from_env()).unwrap();
        let log = PartitionLog::open(dir, "__consumer_offsets", 0, LogConfig::default(), io, 0)?;
        let view = BrokerView::from_static(Default::default(), BTreeMap::new());
        let settings = Arc::new(TopicSettings::resolve(&BTreeMap::new(), &view));
        Partition::new("__consumer_offsets".into(), 0, log, settings, 0)
    }

    /// Found by test_faults.py (seed 2, kill schedule): a leader of `__consumer_offsets`
    /// wrote no `.txnindex` entry for an aborted TxnOffsetCommit, so after a kill -9 the
    /// replay from the recovery point added it below a later entry and the partition stayed
    /// offline ("aborted txn last offset 13 not above the previous 91").
    #[test]
    fn given_aborted_txn_offset_commit_then_indexed_as_on_followers_and_reopens_after_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, async {
            let p = Rc::new(open(dir.path()).unwrap());
            let now = crate::now_ms();
            // A consumer-transform-produce producer's offsets, then its abort marker.
            let txn = TxnProducer {
                producer_id: 7,
                producer_epoch: 0,
            };
            let key = bytes::Bytes::from_static(b"k");
            append(
                &p,
                &[(key.clone(), Some(bytes::Bytes::from_static(b"v")))],
                Some(txn),
            )
            .await
            .unwrap();
            let marker = p
                .write_txn_marker(7, 0, 0, ControlType::Abort, now)
                .await
                .unwrap();
            // Another producer's transaction, written through Produce, aborted after it.
            p.begin_txn(8, 0);
            let bytes = TestBatch::new(1).transactional(8, 0, 0).encode();
            let h = BatchHeader::parse(&bytes).unwrap();
            p.append(h, bytes, -1, now).unwrap().await.unwrap();
            let later = p
                .write_txn_marker(8, 0, 0, ControlType::Abort, now)
                .await
                .unwrap();

            let indexed: Vec<_> = p
                .log
                .collect_aborted_txns(0, later + 1)
                .iter()
                .map(|t| (t.producer_id, t.first_offset, t.last_offset))
                .collect();
            assert_eq!(indexed, vec![(7, 0, marker), (8, marker + 1, later)]);
            assert_eq!(p.last_stable_offset(), later + 1);

            // A crash: reopened from recovery point 0 while the first handle never closed.
            let q = open(dir.path()).expect("reopens: the replay finds every entry in order");
            let again: Vec<_> = q
                .log
                .collect_aborted_txns(0, later + 1)
                .iter()
                .map(|t| (t.producer_id, t.first_offset, t.last_offset))
                .collect();
            assert_eq!(again, indexed);
        });
    }
}
