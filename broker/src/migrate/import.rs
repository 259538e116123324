//! `strom migrate import`: adopts the partitions of a stopped Kafka broker's log dir.
//!
//! Nothing Kafka wrote is used unchecked: every batch of every segment is verified first
//! (framing, CRC, offsets increasing) and only then appended to Strom's log at its own
//! offset, so Strom writes its own offset and time indexes and rebuilds the
//! aborted-transaction index from the markers (what the mirror does with fetched batches).
//! A corrupt segment refuses the whole import before Strom's data dir is opened. Producer
//! snapshots are carried over after their CRC is checked; committed group offsets are read
//! from Kafka's `__consumer_offsets` and re-keyed into Strom's own partition of each group.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Record, RecordBatchDecoder};
use storage::batch::{self, BatchHeader};
use storage::producer_snapshot;

use super::client::{Committed, SourceClient};
use super::metrics::ImportMetrics;
use super::state::{copied_topic, pattern};
use super::target::Target;
use super::{ImportArgs, MigrateError};
use crate::group::records::GroupRecord;
use crate::group::OFFSETS_TOPIC;

/// Verified batches are appended in chunks of about this size: with one batch being read,
/// this bounds the importer's memory whatever the segment size.
const CHUNK_BYTES: usize = 4 << 20;
/// A batch length above this in a segment is corruption (Kafka's message.max.bytes is far
/// below it), not an allocation to attempt.
const MAX_BATCH_BYTES: i32 = 1 << 30;
/// Bytes of a v2 batch header after the 12-byte offset and length prefix.
const MIN_BATCH_LENGTH: i32 = 49;

/// One `topic-partition` directory of the Kafka log dir.
#[derive(Debug, Clone)]
pub struct SourcePartition {
    pub topic: String,
    pub partition: i32,
    pub dir: PathBuf,
}

/// What the import carried over, and what it did not (and why).
#[derive(Debug, Default)]
pub struct Report {
    /// topic -> (partitions, batches, bytes, where the configs came from)
    pub topics: BTreeMap<String, (i32, usize, u64, String)>,
    pub groups: usize,
    pub offsets: usize,
    pub snapshots: usize,
    pub not_carried: Vec<String>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (mut parts, mut batches, mut bytes) = (0, 0, 0);
        writeln!(f, "imported topics:")?;
        for (name, (n, b, s, configs)) in &self.topics {
            writeln!(
                f,
                "  {name}: {n} partitions, {b} batches, {s} bytes, configs {configs}"
            )?;
            parts += n;
            batches += b;
            bytes += s;
        }
        writeln!(
            f,
            "total: {} topics, {parts} partitions, {batches} batches, {bytes} bytes, \
             {} producer snapshots, {} committed offsets of {} groups",
            self.topics.len(),
            self.snapshots,
            self.offsets,
            self.groups
        )?;
        for n in &self.not_carried {
            writeln!(f, "not carried over: {n}")?;
        }
        Ok(())
    }
}

pub async fn run(args: ImportArgs, metrics: &ImportMetrics) -> anyhow::Result<Report> {
    let (config, origins) = super::broker_config(&args.target)?;
    let topics_re = pattern(&args.topics)?;
    let groups_re = pattern(&args.groups)?;
    let mut report = Report::default();
    let mut topics: BTreeMap<String, ([u8; 16], Vec<SourcePartition>)> = BTreeMap::new();
    let mut offsets_parts = Vec::new();
    for p in scan(&args.from)? {
        if p.topic == OFFSETS_TOPIC {
            offsets_parts.push(p);
        } else if copied_topic(&p.topic, &topics_re) {
            let id = storage::logdir::read_partition_metadata(&p.dir).ok_or_else(|| {
                MigrateError::Refused(format!(
                    "{}: no readable partition.metadata (topic id)",
                    p.dir.display()
                ))
            })?;
            let t = topics.entry(p.topic.clone()).or_insert((id, Vec::new()));
            if t.0 != id {
                return Err(MigrateError::Refused(format!(
                    "{}: topic id differs from the topic's other partitions",
                    p.dir.display()
                ))
                .into());
            }
            t.1.push(p);
        } else if p.partition == 0 {
            let why = match p.topic.as_str() {
                "__transaction_state" => {
                    "transactional ids are not carried: a transactional producer calls \
                     InitProducerId again on Strom"
                }
                t if t.starts_with("__") => "internal topic",
                _ => "does not match --topics",
            };
            report.not_carried.push(format!("topic {}: {why}", p.topic));
        }
    }
    for (name, (_, parts)) in &topics {
        // list_partitions sorts, so partitions 0..n in order means none is missing.
        if parts
            .iter()
            .enumerate()
            .any(|(i, p)| p.partition != i as i32)
        {
            return Err(MigrateError::Refused(format!(
                "topic {name}: partition directories are not 0..{} (a partition is missing)",
                parts.len()
            ))
            .into());
        }
    }
    metrics
        .partitions
        .set(topics.values().map(|(_, ps)| ps.len() as i64).sum());
    // First pass: verify everything before Strom's data dir is touched.
    for (name, (_, parts)) in &topics {
        for p in parts {
            let mut r = BatchReader::open(&p.dir)?;
            while let Some((_, b)) = r.next_batch()? {
                metrics.verified(name, 1, b.len());
            }
            metrics.partition_verified(name);
        }
    }
    let groups = read_group_offsets(&offsets_parts, &groups_re)?;
    let mut configs: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    if let Some(bs) = &args.configs_from {
        let mut client = SourceClient::connect(bs, Duration::from_secs(args.timeout_secs)).await?;
        for name in topics.keys() {
            let c = super::mirror::source_configs(&mut client, name).await?;
            configs.insert(name.clone(), c);
        }
    }

    // Kafka's log start offsets (DeleteRecords, or retention inside a batch): a start inside
    // the first batch cannot be kept, Strom's log starts at that batch (reported).
    let log_starts =
        storage::logdir::read_checkpoint(&args.from.join("log-start-offset-checkpoint"))
            .unwrap_or_default();
    let mut target = Target::open(config, origins)?;
    for (name, (_, parts)) in &topics {
        let Some(meta) = target.topic(name) else {
            continue;
        };
        if meta.partitions != parts.len() as i32 {
            return Err(MigrateError::Refused(format!(
                "topic {name} exists on Strom with {} partitions, the Kafka log dir has {}",
                meta.partitions,
                parts.len()
            ))
            .into());
        }
        for p in 0..meta.partitions {
            let end = target.open_partition(name, p)?.log.log_end_offset();
            if end > 0 {
                return Err(MigrateError::Refused(format!(
                    "topic {name} exists on Strom with data ({name}-{p} ends at offset {end}); \
                     delete it on Strom first"
                ))
                .into());
            }
        }
    }
    for (name, (id, parts)) in &topics {
        let from = match configs.remove(name) {
            Some(c) => {
                let n = c.len();
                if target.topic(name).is_none() {
                    target.create_topic_with_id(name, *id, parts.len() as i32, c)?;
                }
                format!("from the source ({n} set)")
            }
            None => {
                if target.topic(name).is_none() {
                    target.create_topic_with_id(name, *id, parts.len() as i32, BTreeMap::new())?;
                }
                "Strom's defaults (no --configs-from)".to_string()
            }
        };
        let (mut batches, mut bytes) = (0usize, 0u64);
        for p in parts {
            let (b, s) = adopt_partition(&mut target, p, metrics).await?;
            batches += b;
            bytes += s;
            let ours = target.logs[&(p.topic.clone(), p.partition)]
                .log
                .log_start_offset();
            if let Some(&start) = log_starts.get(&(p.topic.clone(), p.partition)) {
                if start > ours {
                    report.not_carried.push(format!(
                        "{}-{}: Kafka's log start offset {start}; Strom's log starts at {ours}",
                        p.topic, p.partition
                    ));
                }
            }
            for (pid, first) in target.logs[&(p.topic.clone(), p.partition)].open_transactions() {
                report.not_carried.push(format!(
                    "{}-{}: the transaction of producer {pid} open since offset {first} \
                     (Kafka stopped before its marker): read_committed consumers stop there",
                    p.topic, p.partition
                ));
            }
            match carry_snapshot(&target, p)? {
                Ok(()) => {
                    report.snapshots += 1;
                    metrics.producer_snapshots.inc();
                }
                Err(why) => report
                    .not_carried
                    .push(format!("{}-{}: {why}", p.topic, p.partition)),
            }
        }
        report
            .topics
            .insert(name.clone(), (parts.len() as i32, batches, bytes, from));
    }
    target.flush().await?;
    for (group, offsets) in groups {
        let (kept, dropped): (Vec<_>, Vec<_>) = offsets
            .into_iter()
            .partition(|((t, _), _)| topics.contains_key(t));
        for ((t, p), _) in dropped {
            report.not_carried.push(format!(
                "group {group}: offset of {t}-{p} (topic not imported)"
            ));
        }
        if kept.is_empty() {
            continue;
        }
        target.commit_offsets(&group, &kept).await?;
        report.groups += 1;
        report.offsets += kept.len();
        metrics.groups.inc();
        metrics.group_offsets.inc_by(kept.len() as u64);
    }
    report.not_carried.push(
        "leader-epoch-checkpoint: Strom's copy starts at leader epoch 0, as the mirror's".into(),
    );
    Ok(report)
}

/// The partitions of a Kafka log dir (refused when `from` is not one).
pub fn scan(from: &Path) -> Result<Vec<SourcePartition>, MigrateError> {
    let meta = std::fs::read_to_string(from.join("meta.properties")).map_err(|e| {
        MigrateError::Refused(format!(
            "{} is not a Kafka log dir (meta.properties: {e})",
            from.display()
        ))
    })?;
    if !meta
        .lines()
        .any(|l| l.starts_with("cluster.id=") || l.starts_with("broker.id="))
    {
        return Err(MigrateError::Refused(format!(
            "{} is not a Kafka log dir (meta.properties has no cluster.id)",
            from.display()
        )));
    }
    if lock_held(&from.join(".lock")) {
        return Err(MigrateError::Refused(format!(
            "{} is locked: stop the Kafka broker first",
            from.display()
        )));
    }
    Ok(storage::logdir::list_partitions(from)?
        .into_iter()
        .map(|(topic, partition)| SourcePartition {
            dir: from.join(format!("{topic}-{partition}")),
            topic,
            partition,
        })
        .collect())
}

/// Whether another process holds a POSIX lock on `path` (Kafka locks its log dir's `.lock`
/// with `FileChannel.tryLock`, an fcntl lock, which flock does not see).
fn lock_held(path: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    else {
        return false;
    };
    // SAFETY: a zeroed flock is a valid argument; F_GETLK only writes into it.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: fcntl on a descriptor we own with a pointer to a live struct.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut fl) };
    rc == 0 && fl.l_type != libc::F_UNLCK as libc::c_short
}

/// Appends a verified partition to Strom at its offsets. Returns (batches, bytes).
async fn adopt_partition(
    target: &mut Target,
    p: &SourcePartition,
    metrics: &ImportMetrics,
) -> Result<(usize, u64), MigrateError> {
    target.open_partition(&p.topic, p.partition)?;
    let mut r = BatchReader::open(&p.dir)?;
    let (mut batches, mut bytes) = (0usize, 0u64);
    let mut chunk = BytesMut::new();
    loop {
        let next = r.next_batch()?;
        if let Some((_, b)) = &next {
            chunk.extend_from_slice(b);
        }
        if !chunk.is_empty() && (next.is_none() || chunk.len() >= CHUNK_BYTES) {
            let done = target
                .append(&p.topic, p.partition, &chunk.split().freeze())
                .await?;
            batches += done.batches;
            bytes += done.bytes as u64;
            metrics.appended(&p.topic, done.batches, done.bytes);
        }
        if next.is_none() {
            break;
        }
    }
    if batches != r.batches {
        return Err(MigrateError::Target(format!(
            "{}-{}: {} batches read, {batches} appended (did the Kafka dir change?)",
            p.topic, p.partition, r.batches
        )));
    }
    metrics.partition_appended(&p.topic);
    Ok((batches, bytes))
}

/// Copies the newest Kafka producer snapshot at or below the log end (re-encoded from its
/// CRC-checked entries). Without one Strom rebuilds producer state from the batches.
fn carry_snapshot(
    target: &Target,
    p: &SourcePartition,
) -> Result<Result<(), String>, MigrateError> {
    let log = &target.logs[&(p.topic.clone(), p.partition)].log;
    let end = log.log_end_offset();
    let Some(offset) = producer_snapshot::list(&p.dir)?
        .into_iter()
        .filter(|&o| o <= end)
        .max()
    else {
        return Ok(Err(
            "no producer snapshot; producer state is rebuilt from the batches".into(),
        ));
    };
    let path = producer_snapshot::snapshot_path(&p.dir, offset);
    match producer_snapshot::read(&path) {
        Ok(entries) => {
            producer_snapshot::write(log.dir(), offset, &entries)?;
            Ok(Ok(()))
        }
        Err(e) => Ok(Err(format!(
            "{} unreadable ({e}); producer state is rebuilt from the batches",
            path.display()
        ))),
    }
}

/// Committed offsets of Kafka's `__consumer_offsets` partitions, per group.
fn read_group_offsets(
    parts: &[SourcePartition],
    groups_re: &crate::group::topic_regex::TopicRegex,
) -> Result<BTreeMap<String, GroupOffsets>, MigrateError> {
    let mut fold = OffsetsFold::default();
    for p in parts {
        let mut r = BatchReader::open(&p.dir)?;
        while let Some((h, b)) = r.next_batch()? {
            let mut buf = Bytes::from(b);
            let sets = RecordBatchDecoder::decode_all(&mut buf).map_err(|e| {
                MigrateError::Source(format!(
                    "{}: batch at offset {}: {e:#}",
                    p.dir.display(),
                    h.base_offset
                ))
            })?;
            for set in sets {
                for rec in &set.records {
                    fold.apply(rec);
                }
            }
        }
    }
    let mut out = fold.committed;
    out.retain(|g, _| groups_re.matches(g));
    Ok(out)
}

/// One group's committed offsets by (topic, partition).
type GroupOffsets = BTreeMap<(String, i32), Committed>;
type PendingCommit = (String, (String, i32), Option<Committed>);

/// Kafka's offset-commit replay: the last value per (group, topic, partition) wins, a
/// tombstone deletes, transactional commits count only once their commit marker is seen.
#[derive(Default)]
struct OffsetsFold {
    committed: BTreeMap<String, GroupOffsets>,
    /// Per producer id: (group, topic-partition, commit or tombstone) awaiting the marker.
    pending: BTreeMap<i64, Vec<PendingCommit>>,
    unknown: BTreeSet<i16>,
}

impl OffsetsFold {
    fn apply(&mut self, r: &Record) {
        if let Some(commit) = crate::coordinator_log::control_commit(r) {
            for (g, tp, v) in self.pending.remove(&r.producer_id).unwrap_or_default() {
                if commit {
                    self.set(g, tp, v);
                }
            }
            return;
        }
        let Some(key) = &r.key else { return };
        match GroupRecord::decode(key, r.value.as_deref()) {
            Ok(Some(GroupRecord::Offset {
                group,
                topic,
                partition,
                value,
            })) => {
                let v = value.map(|c| (c.offset, c.leader_epoch, c.metadata));
                if r.transactional {
                    let pending = self.pending.entry(r.producer_id).or_default();
                    pending.push((group, (topic, partition), v));
                } else {
                    self.set(group, (topic, partition), v);
                }
            }
            Ok(_) => {}
            Err(e) => {
                let version = key
                    .get(..2)
                    .map_or(-1, |k| i16::from_be_bytes([k[0], k[1]]));
                if self.unknown.insert(version) {
                    tracing::warn!(version, error = %e, "__consumer_offsets record not understood; skipped");
                }
            }
        }
    }

    fn set(&mut self, group: String, tp: (String, i32), v: Option<Committed>) {
        let offsets = self.committed.entry(group.clone()).or_default();
        match v {
            Some(v) => {
                offsets.insert(tp, v);
            }
            None => {
                offsets.remove(&tp);
                if offsets.is_empty() {
                    self.committed.remove(&group);
                }
            }
        }
    }
}

/// The batches of a partition dir's `.log` segments in offset order, each checked as Kafka's
/// own recovery checks it (framing, CRC, offset range) plus: offsets strictly increasing
/// across batches and segments, no batch below its segment's base offset, no torn tail.
struct BatchReader {
    segments: Vec<(i64, PathBuf)>,
    next_segment: usize,
    current: Option<(BufReader<File>, u64)>,
    last_offset: i64,
    batches: usize,
}

impl BatchReader {
    fn open(dir: &Path) -> Result<BatchReader, MigrateError> {
        let io = |e: std::io::Error| MigrateError::Source(format!("{}: {e}", dir.display()));
        let mut segments = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let name = entry
                .map_err(io)?
                .file_name()
                .to_string_lossy()
                .into_owned();
            if let Some(base) = name
                .strip_suffix(".log")
                .and_then(|s| s.parse::<i64>().ok())
            {
                segments.push((base, dir.join(name)));
            }
        }
        segments.sort();
        Ok(BatchReader {
            segments,
            next_segment: 0,
            current: None,
            last_offset: -1,
            batches: 0,
        })
    }

    fn next_batch(&mut self) -> Result<Option<(BatchHeader, Vec<u8>)>, MigrateError> {
        loop {
            let Some((file, pos)) = &mut self.current else {
                let Some((_, path)) = self.segments.get(self.next_segment) else {
                    return Ok(None);
                };
                let f = File::open(path)
                    .map_err(|e| MigrateError::Source(format!("{}: {e}", path.display())))?;
                self.current = Some((BufReader::with_capacity(1 << 20, f), 0));
                continue;
            };
            let (base, path) = &self.segments[self.next_segment];
            let corrupt = |pos: u64, why: String| {
                MigrateError::Refused(format!(
                    "corrupt segment {} at file position {pos}: {why}",
                    path.display()
                ))
            };
            let mut prefix = [0u8; 12];
            let got = read_full(file, &mut prefix).map_err(|e| corrupt(*pos, e.to_string()))?;
            if got == 0 {
                self.current = None;
                self.next_segment += 1;
                continue;
            }
            if got < prefix.len() {
                return Err(corrupt(*pos, "torn batch header at the end".into()));
            }
            let length = i32::from_be_bytes(prefix[8..12].try_into().expect("4 bytes"));
            if !(MIN_BATCH_LENGTH..=MAX_BATCH_BYTES).contains(&length) {
                return Err(corrupt(*pos, format!("batch length {length}")));
            }
            let mut buf = vec![0u8; 12 + length as usize];
            buf[..12].copy_from_slice(&prefix);
            let got = read_full(file, &mut buf[12..]).map_err(|e| corrupt(*pos, e.to_string()))?;
            if got < length as usize {
                return Err(corrupt(*pos, "torn batch at the end".into()));
            }
            let h = batch::validate_stored(&buf).map_err(|e| {
                let at = i64::from_be_bytes(prefix[..8].try_into().expect("8 bytes"));
                corrupt(*pos, format!("batch at offset {at}: {e}"))
            })?;
            if h.base_offset < *base || h.base_offset <= self.last_offset {
                return Err(corrupt(
                    *pos,
                    format!(
                        "batch at offset {} does not follow offset {} (segment base {base})",
                        h.base_offset, self.last_offset
                    ),
                ));
            }
            *pos += buf.len() as u64;
            self.last_offset = h.last_offset();
            self.batches += 1;
            return Ok(Some((h, buf)));
        }
    }
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::super::target::tests::batch;
    use super::super::TargetArgs;
    use super::*;
    use crate::group::classic::CommittedOffset;
    use crate::group::offsets_partition;

    fn kafka_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("meta.properties"),
            "version=1\ncluster.id=abc\nnode.id=1\n",
        )
        .unwrap();
        d
    }

    fn partition(root: &Path, name: &str, id: [u8; 16], segments: &[(i64, Vec<u8>)]) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        storage::logdir::write_partition_metadata(&dir, id).unwrap();
        for (base, bytes) in segments {
            std::fs::write(dir.join(format!("{base:020}.log")), bytes).unwrap();
        }
        dir
    }

    fn concat(parts: &[BytesMut]) -> Vec<u8> {
        parts.iter().flat_map(|b| b.iter().copied()).collect()
    }

    fn read_all(dir: &Path) -> Result<Vec<i64>, MigrateError> {
        let mut r = BatchReader::open(dir)?;
        let mut out = Vec::new();
        while let Some((h, _)) = r.next_batch()? {
            out.push(h.base_offset);
        }
        Ok(out)
    }

    fn offset_record(group: &str, p: i32, offset: Option<i64>, pid: i64) -> Record {
        let (key, value) = GroupRecord::Offset {
            group: group.into(),
            topic: "t".into(),
            partition: p,
            value: offset.map(|offset| CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: 1,
            }),
        }
        .encode();
        Record {
            transactional: pid >= 0,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: pid,
            producer_epoch: 0,
            timestamp_type: kafka_protocol::records::TimestampType::Creation,
            offset: 0,
            sequence: -1,
            timestamp: 1,
            key: Some(key),
            value,
            headers: Default::default(),
        }
    }

    fn marker(pid: i64, commit: bool) -> Record {
        let mut r = offset_record("x", 0, None, pid);
        r.control = true;
        r.key = Some(Bytes::from(vec![0, 0, 0, commit as u8]));
        r.value = Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0]));
        r
    }

    #[test]
    fn given_dir_without_kafka_meta_properties_when_scanning_then_refused() {
        let d = tempfile::tempdir().unwrap();
        let err = scan(d.path()).unwrap_err().to_string();
        assert!(err.contains("is not a Kafka log dir"), "{err}");
        std::fs::write(d.path().join("meta.properties"), "foo=bar\n").unwrap();
        let err = scan(d.path()).unwrap_err().to_string();
        assert!(err.contains("no cluster.id"), "{err}");
    }

    #[test]
    fn given_flipped_byte_or_backwards_offsets_when_reading_then_refused_naming_file_and_position()
    {
        let d = kafka_dir();
        let first = batch(0, 3, -1, false, None);
        let good = concat(&[first.clone(), batch(3, 2, -1, false, None)]);
        let dir = partition(d.path(), "t-0", [1; 16], &[(0, good.clone())]);
        assert_eq!(read_all(&dir).unwrap(), vec![0, 3]);

        let mut bad = good.clone();
        let at = first.len() + 70; // inside the second batch's records
        bad[at] ^= 0x01;
        std::fs::write(dir.join(format!("{:020}.log", 0)), &bad).unwrap();
        let err = read_all(&dir).unwrap_err().to_string();
        assert!(err.contains("00000000000000000000.log"), "{err}");
        assert!(
            err.contains(&format!("file position {}", first.len())),
            "{err}"
        );
        assert!(err.contains("offset 3") && err.contains("CRC"), "{err}");

        let backwards = concat(&[first.clone(), batch(2, 1, -1, false, None)]);
        std::fs::write(dir.join(format!("{:020}.log", 0)), &backwards).unwrap();
        let err = read_all(&dir).unwrap_err().to_string();
        assert!(err.contains("does not follow offset 2"), "{err}");

        let torn = &good[..good.len() - 3];
        std::fs::write(dir.join(format!("{:020}.log", 0)), torn).unwrap();
        let err = read_all(&dir).unwrap_err().to_string();
        assert!(err.contains("torn batch"), "{err}");
    }

    #[test]
    fn given_offset_commits_tombstones_and_transactions_when_folded_then_last_committed_wins() {
        let mut f = OffsetsFold::default();
        f.apply(&offset_record("g", 0, Some(5), -1));
        f.apply(&offset_record("g", 0, Some(7), -1));
        f.apply(&offset_record("g", 1, Some(3), -1));
        f.apply(&offset_record("g", 1, None, -1)); // deleted
        f.apply(&offset_record("h", 0, Some(1), -1));
        f.apply(&offset_record("h", 0, None, -1)); // group h has nothing left
        f.apply(&offset_record("g", 2, Some(9), 42));
        f.apply(&offset_record("g", 0, Some(100), 43));
        f.apply(&marker(42, true));
        f.apply(&marker(43, false)); // aborted: offset 7 stays
        let g: Vec<_> = f.committed["g"]
            .iter()
            .map(|((_, p), c)| (*p, c.0))
            .collect();
        assert_eq!(g, vec![(0, 7), (2, 9)]);
        assert!(!f.committed.contains_key("h"));
    }

    #[test]
    fn given_kafka_dir_when_imported_then_topic_id_batches_and_rekeyed_offsets_on_strom() {
        let src = kafka_dir();
        let id = [7u8; 16];
        let p0 = concat(&[batch(0, 3, 5, false, None), batch(3, 2, 5, false, None)]);
        partition(src.path(), "t-0", id, &[(0, p0)]);
        // Partition 1: a second segment starting at offset 10.
        let seg2 = concat(&[batch(10, 1, -1, false, None)]);
        partition(
            src.path(),
            "t-1",
            id,
            &[(0, concat(&[batch(0, 4, -1, false, None)])), (10, seg2)],
        );
        // Kafka stopped in the middle of a transaction of producer 9.
        partition(
            src.path(),
            "u-0",
            [8; 16],
            &[(0, batch(0, 2, 9, true, None).to_vec())],
        );
        // Kafka has 3 offsets partitions; the group's commit is in whichever, Strom re-keys.
        let rec = offset_record("grp", 1, Some(4), -1);
        let kv = [(rec.key.clone().unwrap(), rec.value.clone())];
        let b = crate::coordinator_log::encode_batch(&kv, None, 1).unwrap();
        partition(
            src.path(),
            "__consumer_offsets-2",
            [9; 16],
            &[(0, b.to_vec())],
        );
        let data = tempfile::tempdir().unwrap();
        let args = ImportArgs {
            from: src.path().to_path_buf(),
            topics: ".*".into(),
            groups: ".*".into(),
            configs_from: None,
            target: TargetArgs {
                data_dir: Some(data.path().to_string_lossy().into_owned()),
                config: None,
            },
            admin: Default::default(),
            timeout_secs: 5,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        let registry = prometheus::Registry::new();
        let metrics = ImportMetrics::new(&registry);
        let report = local.block_on(&rt, run(args.clone(), &metrics)).unwrap();
        assert_eq!(report.topics["t"].0, 2);
        assert_eq!(report.topics["t"].1, 4);
        let text = report.to_string();
        assert!(
            text.contains("configs Strom's defaults (no --configs-from)"),
            "{text}"
        );
        assert!(
            text.contains("u-0: the transaction of producer 9 open since offset 0"),
            "{text}"
        );
        assert_eq!((report.groups, report.offsets), (1, 1));
        let sample = |name: &str, labels: &[(&str, &str)]| {
            super::super::metrics::tests::sample(&registry, name, labels)
        };
        let t = [("topic", "t")];
        assert_eq!(sample("strom_migrate_import_partitions", &[]), Some(3.0));
        for (what, n) in [("partitions", 2.0), ("batches", 4.0)] {
            for step in ["verified", "appended"] {
                let name = format!("strom_migrate_import_{what}_{step}_total");
                assert_eq!(sample(&name, &t), Some(n), "{name}");
            }
        }
        let bytes = report.topics["t"].2 as f64;
        assert!(bytes > 0.0);
        assert_eq!(
            sample("strom_migrate_import_bytes_verified_total", &t),
            Some(bytes)
        );
        assert_eq!(
            sample("strom_migrate_import_bytes_appended_total", &t),
            Some(bytes)
        );
        assert_eq!(sample("strom_migrate_import_groups_total", &[]), Some(1.0));
        assert_eq!(
            sample("strom_migrate_import_group_offsets_total", &[]),
            Some(1.0)
        );
        // A second import refuses: the topic has data on Strom now.
        let err = local
            .block_on(
                &rt,
                run(args, &ImportMetrics::new(&prometheus::Registry::new())),
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("exists on Strom with data"), "{err}");
        local.block_on(&rt, async {
            let (config, origins) = crate::migrate::broker_config(&TargetArgs {
                data_dir: Some(data.path().to_string_lossy().into_owned()),
                config: None,
            })
            .unwrap();
            let n = config.offsets_topic_num_partitions;
            let mut t = Target::open(config, origins).unwrap();
            assert_eq!(*t.topic("t").unwrap().id.as_bytes(), id);
            assert_eq!(t.open_partition("t", 0).unwrap().log.log_end_offset(), 5);
            assert_eq!(t.open_partition("t", 1).unwrap().log.log_end_offset(), 11);
            let gp = offsets_partition("grp", n);
            t.open_partition(OFFSETS_TOPIC, gp).unwrap();
            let (_, bytes) = t.batch_at(OFFSETS_TOPIC, gp, 0).unwrap().unwrap();
            // batch_at leaves out base offset, length and epoch: put a header back to decode.
            let mut whole = BytesMut::from(&[0u8; 12][..]);
            whole[8..12].copy_from_slice(&((bytes.len() + 4) as i32).to_be_bytes());
            whole.extend_from_slice(&[0, 0, 0, 0]);
            whole.extend_from_slice(&bytes);
            let mut f = OffsetsFold::default();
            let mut buf = whole.freeze();
            for set in RecordBatchDecoder::decode_all(&mut buf).unwrap() {
                for r in &set.records {
                    f.apply(r);
                }
            }
            assert_eq!(f.committed["grp"][&("t".to_string(), 1)].0, 4);
        });
    }
}
