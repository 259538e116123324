//! Tests of `strom migrate import` over hand-made Kafka log dirs.

use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Record, RecordBatchDecoder};

use super::super::target::tests::batch;
use super::super::TargetArgs;
use super::offsets::OffsetsFold;
use super::*;
use crate::coordinator::group::offsets_partition;
use crate::coordinator::group::records::CommittedOffset;
use crate::coordinator::group::records::GroupRecord;
use crate::coordinator::group::OFFSETS_TOPIC;
use crate::migrate::source::BatchReader;

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
        text.contains("broker config carried: log.retention.ms=86400000 (cluster-wide default)"),
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
fn given_flipped_byte_or_backwards_offsets_when_reading_then_refused_naming_file_and_position() {
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
