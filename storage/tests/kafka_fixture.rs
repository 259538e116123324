//! Segments written by a real Apache Kafka 4.4 broker (`tests/fixtures/kafka-4.4`, made by
//! its `generate.py`): compacted and compressed batches and transactional data with
//! control batches, as Kafka leaves them after a clean shutdown.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use storage::batch::{BatchHeader, BatchIter};
use storage::{LogConfig, PartitionLog};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kafka-4.4")
}

/// `log_end` and batch count per partition, as recorded by the generator.
fn manifest(topic: &str) -> (i64, usize) {
    let text = std::fs::read_to_string(fixture().join("manifest.txt")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{topic} ")))
        .unwrap();
    let field = |k: &str| -> i64 {
        line.split(' ')
            .find_map(|f| f.strip_prefix(k))
            .unwrap()
            .parse()
            .unwrap()
    };
    (field("log_end="), field("batches=") as usize)
}

/// Copies the fixture partition into a fresh data dir; returns (data dir guard, part dir).
fn copy_partition(topic: &str) -> (tempfile::TempDir, PathBuf) {
    let data = tempfile::tempdir().unwrap();
    let src = fixture().join(format!("{topic}-0"));
    let dst = data.path().join(format!("{topic}-0"));
    std::fs::create_dir(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    (data, dst)
}

fn log_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    v
}

fn read_stored(log: &PartitionLog, from: i64) -> Vec<BatchHeader> {
    let r = log.read(from, usize::MAX, i64::MAX).unwrap();
    let mut out = Vec::new();
    for c in &r.chunks {
        for item in BatchIter::validating(c) {
            out.push(item.unwrap().0);
        }
    }
    out
}

fn open_topic(root: &Path, topic: &str, recovery_point: i64) -> PartitionLog {
    PartitionLog::open(
        root,
        topic,
        0,
        LogConfig::default(),
        backend(),
        recovery_point,
    )
    .unwrap()
}

#[test]
fn given_real_kafka_compacted_segments_when_recovering_from_zero_then_nothing_truncated() {
    let (end, batches) = manifest("compacted");
    let (data, dir) = copy_partition("compacted");
    let before = log_files(&dir);
    for rp in [0, end] {
        run(async {
            let log = open_topic(data.path(), "compacted", rp);
            assert_eq!(log.log_end_offset(), end, "recovery point {rp}");
            let hs = read_stored(&log, 0);
            assert_eq!(hs.len(), batches);
            // The fixture is only worth something if it has what broke recovery before:
            // cleaned batches whose record count no longer matches their offset span,
            // and a compressed one.
            assert!(hs
                .iter()
                .any(|h| h.records_count - 1 != h.last_offset_delta));
            assert!(hs.iter().any(|h| h.compression() != 0));
            for w in hs.windows(2) {
                assert_eq!(w[0].last_offset() + 1, w[1].base_offset);
            }
            // An offset the cleaner removed is served by the batch that spanned it.
            let first = hs[0];
            assert_eq!(read_stored(&log, first.last_offset())[0], first);
        });
    }
    assert_eq!(
        log_files(&dir),
        before,
        "recovery must not rewrite Kafka's data"
    );
}

#[test]
fn given_real_kafka_transactional_segment_when_recovering_then_control_batches_kept() {
    let (end, batches) = manifest("txn");
    let (data, dir) = copy_partition("txn");
    let before = log_files(&dir);
    run(async {
        let log = open_topic(data.path(), "txn", 0);
        assert_eq!(log.log_end_offset(), end);
        let hs = read_stored(&log, 0);
        assert_eq!(hs.len(), batches);
        assert_eq!(hs.iter().filter(|h| h.is_control()).count(), 3);
        assert!(hs.iter().all(|h| h.is_transactional()));
    });
    assert_eq!(log_files(&dir), before);
}

#[test]
fn given_real_kafka_txnindex_when_opening_then_aborted_transaction_collected() {
    let (end, _) = manifest("txn");
    let (data, _dir) = copy_partition("txn");
    run(async {
        let log = open_topic(data.path(), "txn", end);
        let hs = read_stored(&log, 0);
        // The aborted transaction: its data batch and its abort marker.
        let data_batch = hs.iter().find(|h| h.records_count == 2).unwrap();
        let marker = hs
            .iter()
            .find(|h| h.is_control() && h.base_offset > data_batch.base_offset)
            .unwrap();
        let aborted = log.collect_aborted_txns(0, end);
        assert_eq!(aborted.len(), 1, "{aborted:?}");
        let t = aborted[0];
        assert_eq!(t.producer_id, data_batch.producer_id);
        assert_eq!(t.first_offset, data_batch.base_offset);
        assert_eq!(t.last_offset, marker.base_offset);
        assert!(t.last_stable_offset > t.last_offset);
        // A fetch that ends before the transaction starts needs nothing.
        assert!(log.collect_aborted_txns(0, t.first_offset).is_empty());
        assert!(log.collect_aborted_txns(t.last_offset + 1, end).is_empty());
    });
}
