//! `strom migrate import`: adopts the partitions of a stopped Kafka broker's log dirs.
//!
//! Nothing Kafka wrote is used unchecked: every batch of every segment is verified first
//! (framing, CRC, offsets increasing) and only then appended to Strom's log at its own
//! offset, so Strom writes its own offset and time indexes and rebuilds the
//! aborted-transaction index from the markers (what the mirror does with fetched batches).
//! With `--link`, closed segments are hard-linked instead of appended (see `plan_links`).
//! A corrupt segment refuses the whole import before Strom's data dir is opened. Producer
//! snapshots are carried over after their CRC is checked; committed group offsets are read
//! from Kafka's `__consumer_offsets` and re-keyed into Strom's own partition of each group;
//! topic configs come from `--configs-from` or Kafka's KRaft metadata log (`kraft`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Record, RecordBatchDecoder};
use storage::producer_snapshot;

use super::client::{Committed, SourceClient};
use super::import_configs::{carry_broker_configs, metadata_topic_configs, read_metadata};
use super::import_progress::{segment_bytes, ImportProgress};
pub use super::import_report::Report;
use super::metrics::ImportMetrics;
use super::source::{self, BatchReader, SourcePartition};
use super::state::{copied_topic, pattern};
use super::target::Target;
use super::{ImportArgs, MigrateError};
use crate::coordinator::group::records::GroupRecord;
use crate::coordinator::group::OFFSETS_TOPIC;

/// Verified batches are appended in chunks of about this size: with one batch being read,
/// this bounds the importer's memory whatever the segment size.
const CHUNK_BYTES: usize = 4 << 20;

/// With `--link`: the closed segments of a partition that are hard-linked, and the
/// segments whose batches are appended after them.
#[derive(Debug, Default)]
struct LinkPlan {
    linked: Vec<(i64, PathBuf)>,
    /// Offset after the last linked batch.
    end: i64,
    batches: usize,
    bytes: u64,
    rest: Vec<(i64, PathBuf)>,
}

pub async fn run(args: ImportArgs, metrics: &ImportMetrics) -> anyhow::Result<Report> {
    let (config, origins) = super::broker_config(&args.target)?;
    let topics_re = pattern(&args.topics)?;
    let groups_re = pattern(&args.groups)?;
    let mut report = Report::default();
    let scan = source::scan(&args.from)?;
    report.not_carried.extend(scan.not_carried.iter().cloned());
    let metadata = match args.configs_from {
        Some(_) => None,
        None => read_metadata(&args, &scan.metadata, &mut report)?,
    };
    let mut topics: BTreeMap<String, ([u8; 16], Vec<SourcePartition>)> = BTreeMap::new();
    let mut offsets_parts = Vec::new();
    let mut stale = BTreeSet::new();
    for p in scan.partitions {
        if p.topic == OFFSETS_TOPIC {
            offsets_parts.push(p);
        } else if copied_topic(&p.topic, &topics_re) {
            let id = storage::logdir::read_partition_metadata(&p.dir).ok_or_else(|| {
                MigrateError::Refused(format!(
                    "{}: no readable partition.metadata (topic id)",
                    p.dir.display()
                ))
            })?;
            // A partition dir of a topic Kafka's metadata does not have (deleted, or
            // deleted and created again under a new id) is a leftover Kafka would set
            // aside at its next start, not data of a live topic.
            if let Some(m) = &metadata {
                if m.topic_id(&p.topic) != Some(id) {
                    if stale.insert(p.topic.clone()) {
                        report.not_carried.push(format!(
                            "topic {} (id {}): not a live topic in Kafka's metadata (deleted \
                             on Kafka); not imported",
                            p.topic,
                            storage::logdir::uuid_to_base64(&id)
                        ));
                    }
                    continue;
                }
            }
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
        // The scan sorts, so partitions 0..n in order means none is missing.
        if parts
            .iter()
            .enumerate()
            .any(|(i, p)| p.partition != i as i32)
        {
            return Err(MigrateError::Refused(format!(
                "topic {name}: partition directories are not 0..{} (a partition is missing \
                 from every --from dir)",
                parts.len()
            ))
            .into());
        }
    }
    if args.link {
        check_same_filesystem(&args.from, &config.data_dir)?;
    }
    metrics
        .partitions
        .set(topics.values().map(|(_, ps)| ps.len() as i64).sum());
    let total: u64 = topics
        .values()
        .flat_map(|(_, ps)| ps)
        .map(|p| segment_bytes(&p.dir))
        .sum();
    let (verified, imported) = metrics.byte_totals();
    let _progress = ImportProgress::start(total, verified, imported);
    // First pass: verify everything before Strom's data dir is touched.
    let mut links = BTreeMap::new();
    for (_, parts) in topics.values() {
        for p in parts {
            let plan = verify_partition(p, args.link, metrics)?;
            links.insert((p.topic.clone(), p.partition), plan);
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
    let log_starts = scan.log_starts;
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
    if let Some(m) = &metadata {
        carry_broker_configs(&target, m, scan.node_id, &mut report)?;
    }
    for (name, (id, parts)) in &topics {
        let (c, from) = match (configs.remove(name), &metadata) {
            (Some(c), _) => {
                let from = format!("from the source ({} set)", c.len());
                (c, from)
            }
            (None, Some(m)) => {
                let c = metadata_topic_configs(name, m, &mut report);
                let from = format!("from Kafka's metadata log ({} set)", c.len());
                (c, from)
            }
            (None, None) => (BTreeMap::new(), "Strom's defaults".to_string()),
        };
        if target.topic(name).is_none() {
            target.create_topic_with_id(name, *id, parts.len() as i32, c)?;
        }
        let (mut batches, mut bytes) = (0usize, 0u64);
        for p in parts {
            let key = (p.topic.clone(), p.partition);
            let mut plan = links.remove(&key).unwrap_or_default();
            if target.logs.contains_key(&key) {
                // An empty partition Strom had already: appended into, not linked.
                plan = LinkPlan::default();
            }
            let (b, s) = adopt_partition(&mut target, p, plan, &mut report, metrics).await?;
            batches += b;
            bytes += s;
            let ours = target.logs[&key].log.log_start_offset();
            if let Some(&start) = log_starts.get(&key) {
                if start > ours {
                    report.not_carried.push(format!(
                        "{}-{}: Kafka's log start offset {start}; Strom's log starts at {ours}",
                        p.topic, p.partition
                    ));
                }
            }
            for (pid, first) in target.logs[&key].open_transactions() {
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

/// `--link` needs every `--from` dir on the filesystem of Strom's data dir: a hard link
/// cannot cross filesystems. Refused up front rather than silently copying, because
/// whoever asks for links counts on not needing the disk space of a copy.
fn check_same_filesystem(from: &[PathBuf], data_dir: &Path) -> Result<(), MigrateError> {
    use std::os::unix::fs::MetadataExt;
    // The data dir may not exist yet: its nearest existing ancestor is where it will be.
    let target = data_dir
        .ancestors()
        .find_map(|a| {
            std::fs::metadata(if a.as_os_str().is_empty() {
                Path::new(".")
            } else {
                a
            })
            .ok()
        })
        .map(|m| m.dev());
    for f in from {
        let dev = std::fs::metadata(f)
            .map_err(|e| MigrateError::Source(format!("{}: {e}", f.display())))?
            .dev();
        if Some(dev) != target {
            return Err(MigrateError::Refused(format!(
                "--link: {} and Strom's data dir {} are on different filesystems (a hard link \
                 cannot cross them); run without --link to copy the segments",
                f.display(),
                data_dir.display()
            )));
        }
    }
    Ok(())
}

/// Reads and verifies every batch of a partition; with `link`, plans which segments are
/// hard-linked: the closed ones from the start whose batches all carry leader epoch 0
/// (what Strom's own copy writes: Strom is leader at epoch 0, and a batch of a later epoch
/// would make clients' epoch validation see the epoch go back). The last segment is never
/// linked, it is Kafka's active one: Strom appends its batches into its own file.
fn verify_partition(
    p: &SourcePartition,
    link: bool,
    metrics: &ImportMetrics,
) -> Result<LinkPlan, MigrateError> {
    let mut r = BatchReader::open(&p.dir)?;
    // Per segment: (batches, bytes, offset after the last batch, all at epoch 0).
    let mut segs = vec![(0usize, 0u64, 0i64, true); r.segments().len()];
    while let Some((h, b)) = r.next_batch()? {
        let s = &mut segs[r.segment_index()];
        s.0 += 1;
        s.1 += b.len() as u64;
        s.2 = h.last_offset() + 1;
        s.3 &= h.partition_leader_epoch == 0;
        metrics.verified(&p.topic, 1, b.len());
    }
    metrics.partition_verified(&p.topic);
    let mut plan = LinkPlan::default();
    let n = r.segments().len();
    for (i, seg) in r.segments().iter().enumerate() {
        let (batches, bytes, end, epoch0) = segs[i];
        if link && plan.rest.is_empty() && i + 1 < n && batches > 0 && epoch0 {
            plan.linked.push(seg.clone());
            plan.end = end;
            plan.batches += batches;
            plan.bytes += bytes;
        } else {
            plan.rest.push(seg.clone());
        }
    }
    Ok(plan)
}

/// Brings a verified partition to Strom at its offsets: the planned segments hard-linked,
/// the others' batches appended. Returns (batches, bytes).
async fn adopt_partition(
    target: &mut Target,
    p: &SourcePartition,
    plan: LinkPlan,
    report: &mut Report,
    metrics: &ImportMetrics,
) -> Result<(usize, u64), MigrateError> {
    let mut r = if plan.linked.is_empty() {
        target.open_partition(&p.topic, p.partition)?;
        BatchReader::open(&p.dir)?
    } else {
        target.link_segments(&p.topic, p.partition, &plan.linked, plan.end)?;
        report.linked.0 += plan.linked.len();
        report.linked.1 += plan.bytes;
        metrics.appended(&p.topic, plan.batches, plan.bytes as usize);
        BatchReader::files(plan.rest)
    };
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
    Ok((batches + plan.batches, bytes + plan.bytes))
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
    groups_re: &crate::coordinator::group::topic_regex::TopicRegex,
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
        if let Some(commit) = crate::coordinator::log::control_commit(r) {
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

#[cfg(test)]
mod tests {
    use super::super::target::tests::batch;
    use super::super::TargetArgs;
    use super::*;
    use crate::coordinator::group::offsets_partition;
    use crate::coordinator::group::records::CommittedOffset;

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

    fn import_args(from: Vec<PathBuf>, data: &Path) -> ImportArgs {
        ImportArgs {
            from,
            metadata_dir: None,
            link: false,
            topics: ".*".into(),
            groups: ".*".into(),
            configs_from: None,
            target: TargetArgs {
                data_dir: Some(data.to_string_lossy().into_owned()),
                config: None,
            },
            admin: Default::default(),
            timeout_secs: 5,
        }
    }

    fn import(args: ImportArgs) -> anyhow::Result<Report> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let metrics = ImportMetrics::new(&prometheus::Registry::new());
        tokio::task::LocalSet::new().block_on(&rt, run(args, &metrics))
    }

    /// A test batch at leader epoch 0, as a single Kafka broker writes them (the epoch is
    /// outside the CRC).
    fn epoch0(mut b: BytesMut) -> BytesMut {
        b[12..16].copy_from_slice(&0i32.to_be_bytes());
        b
    }

    #[test]
    fn given_two_log_dirs_with_metadata_when_imported_with_link_then_configs_applied_and_segments_shared(
    ) {
        use super::super::kraft::tests::{batch as meta_batch, config};
        use super::super::kraft::{MetadataRecord, RESOURCE_BROKER};
        use std::os::unix::fs::MetadataExt;
        let (a, b) = (kafka_dir(), kafka_dir());
        let (id, stale) = ([7u8; 16], [8u8; 16]);
        // t-0 in the first dir: two closed segments at epoch 0, one at epoch 2, the active.
        let segs = [
            (0, epoch0(batch(0, 3, -1, false, None)).to_vec()),
            (3, epoch0(batch(3, 2, -1, false, None)).to_vec()),
            (5, batch(5, 1, -1, false, None).to_vec()),
            (6, epoch0(batch(6, 1, -1, false, None)).to_vec()),
        ];
        let t0 = partition(a.path(), "t-0", id, &segs);
        partition(
            b.path(),
            "t-1",
            id,
            &[(0, epoch0(batch(0, 4, -1, false, None)).to_vec())],
        );
        // A topic deleted on Kafka whose dir is still there.
        partition(
            b.path(),
            "old-0",
            stale,
            &[(0, batch(0, 1, -1, false, None).to_vec())],
        );
        std::fs::create_dir(b.path().join("t-0.abc-future")).unwrap();
        let meta = a.path().join(super::super::source::METADATA_DIR);
        std::fs::create_dir(&meta).unwrap();
        let recs = [
            MetadataRecord::Topic {
                name: "t".into(),
                id,
            },
            config("t", "cleanup.policy", Some("compact")),
            config("t", "retention.ms", Some("1000")),
            config("t", "retention.ms", Some("2000")),
            config("t", "max.message.bytes", Some("3000")),
            config("t", "max.message.bytes", None),
            config("t", "no.such.config", Some("1")),
            MetadataRecord::Config {
                resource_type: RESOURCE_BROKER,
                resource_name: String::new(),
                name: "log.retention.ms".into(),
                value: Some("86400000".into()),
            },
            MetadataRecord::Config {
                resource_type: RESOURCE_BROKER,
                resource_name: "1".into(),
                name: "num.io.threads".into(),
                value: Some("4".into()),
            },
        ];
        std::fs::write(
            meta.join(format!("{:020}.log", 0)),
            meta_batch(0, &recs, false),
        )
        .unwrap();
        let data = tempfile::tempdir().unwrap();
        let mut args = import_args(vec![a.path().into(), b.path().into()], data.path());
        args.link = true;
        let report = import(args).unwrap();
        let text = report.to_string();
        assert_eq!(report.topics["t"].1, 5, "{text}");
        assert!(
            text.contains("configs from Kafka's metadata log (2 set)"),
            "{text}"
        );
        assert!(text.contains("topic t: config no.such.config=1"), "{text}");
        assert!(text.contains("topic old (id "), "{text}");
        assert!(text.contains("t-0.abc-future: a replica move"), "{text}");
        assert!(
            text.contains(
                "broker config carried: log.retention.ms=86400000 (cluster-wide default)"
            ),
            "{text}"
        );
        assert!(
            text.contains("broker config num.io.threads=4 (this broker)"),
            "{text}"
        );
        assert_eq!(report.linked.0, 2, "{text}");
        let stored = crate::config::dynamic::load(data.path()).unwrap();
        assert_eq!(stored.cluster["log.retention.ms"], "86400000");
        // The two epoch-0 closed segments share Kafka's inode; the others are Strom's own.
        for (base, shared) in [(0, true), (3, true), (5, false), (6, false)] {
            let name = format!("{base:020}.log");
            let k = std::fs::metadata(t0.join(&name)).unwrap();
            let ours = std::fs::metadata(data.path().join("t-0").join(&name));
            assert_eq!(ours.is_ok_and(|m| m.ino() == k.ino()), shared, "{name}");
        }
        let (config, origins) = crate::migrate::broker_config(&TargetArgs {
            data_dir: Some(data.path().to_string_lossy().into_owned()),
            config: None,
        })
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, async {
            let mut t = Target::open(config, origins).unwrap();
            assert!(t.topic("old").is_none());
            let c = &t.topic("t").unwrap().configs;
            assert_eq!(c.get("cleanup.policy").map(String::as_str), Some("compact"));
            assert_eq!(c.get("retention.ms").map(String::as_str), Some("2000"));
            assert!(!c.contains_key("max.message.bytes"));
            let log = &t.open_partition("t", 0).unwrap().log;
            assert_eq!(log.log_end_offset(), 7);
            let all = log.batch_headers_from(0).unwrap();
            let got: Vec<_> = all
                .iter()
                .map(|h| (h.base_offset, h.partition_leader_epoch))
                .collect();
            // Linked batches keep Kafka's bytes; appended ones get Strom's epoch 0.
            assert_eq!(got, vec![(0, 0), (3, 0), (5, 0), (6, 0)]);
        });

        // A --metadata-dir that is not one: refused, nothing written.
        let data3 = tempfile::tempdir().unwrap();
        let mut args = import_args(vec![a.path().into()], &data3.path().join("d"));
        args.metadata_dir = Some(b.path().into());
        let err = import(args).unwrap_err().to_string();
        assert!(err.contains("is not a KRaft metadata log dir"), "{err}");
        assert!(!data3.path().join("d").exists());

        // The same partition in both dirs: refused naming both, nothing written.
        partition(b.path(), "t-0", id, &[]);
        let data2 = tempfile::tempdir().unwrap();
        let err = import(import_args(
            vec![a.path().into(), b.path().into()],
            &data2.path().join("d"),
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("t-0 is in two log dirs"), "{err}");
        assert!(!data2.path().join("d").exists());
    }

    #[test]
    fn given_link_across_filesystems_when_importing_then_refused_before_writing() {
        use std::os::unix::fs::MetadataExt;
        let src = kafka_dir();
        partition(
            src.path(),
            "t-0",
            [1; 16],
            &[(0, batch(0, 1, -1, false, None).to_vec())],
        );
        // /dev/shm is a tmpfs on Linux; the test needs it on another filesystem than /tmp.
        let shm = Path::new("/dev/shm");
        let other = std::fs::metadata(shm).map(|m| m.dev()).ok();
        assert_ne!(
            other,
            Some(std::fs::metadata(src.path()).unwrap().dev()),
            "/dev/shm and the temp dir share a filesystem: this test needs two"
        );
        let data = tempfile::tempdir_in(shm).unwrap();
        let target = data.path().join("strom");
        let mut args = import_args(vec![src.path().into()], &target);
        args.link = true;
        let err = import(args.clone()).unwrap_err().to_string();
        assert!(err.contains("on different filesystems"), "{err}");
        assert!(!target.exists());
        args.link = false;
        assert_eq!(import(args).unwrap().topics["t"].1, 1);
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
        let b = crate::coordinator::log::encode_batch(&kv, None, 1).unwrap();
        partition(
            src.path(),
            "__consumer_offsets-2",
            [9; 16],
            &[(0, b.to_vec())],
        );
        let data = tempfile::tempdir().unwrap();
        let args = import_args(vec![src.path().to_path_buf()], data.path());
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
            text.contains("configs Strom's defaults")
                && text.contains("no KRaft metadata log (__cluster_metadata-0) in the --from"),
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
