//! Bytes on disk against Kafka's documented formats, and a hand-built Kafka-style log dir
//! that Strom must open and read.

mod common;

use std::path::Path;

use common::*;
use storage::{logdir, Durability, LogConfig};

fn be32(v: u32) -> [u8; 4] {
    v.to_be_bytes()
}

#[test]
fn given_three_appends_when_closed_then_log_index_and_timeindex_bytes_match_kafka_format() {
    let root = tempfile::tempdir().unwrap();
    let b0 = batch(100, &[b"a", b"b"]); // offsets 0-1, max ts 101
    let b1 = batch(200, &[b"c", b"d", b"e"]); // offsets 2-4, max ts 202
    let b2 = batch(150, &[b"f"]); // offset 5, max ts 150
    let cfg = LogConfig {
        index_interval_bytes: 1, // every batch after the first gets an entry
        ..LogConfig::default()
    };
    let dir = run(async {
        let log = open(root.path(), cfg, 0);
        for b in [&b0, &b1, &b2] {
            log.append(bytes::BytesMut::from(&b[..]), opts(Durability::Fsync))
                .await
                .unwrap();
        }
        let d = log.dir().to_path_buf();
        log.close().await.unwrap();
        d
    });
    assert_eq!(dir.file_name().unwrap(), "t-0");
    let stem = dir.join("00000000000000000000");

    // .log: the producer's batches, byte for byte, except base offset (bytes 0..8) and
    // partition leader epoch (12..16), which the CRC does not cover.
    let mut want = Vec::new();
    for (b, base) in [(&b0, 0i64), (&b1, 2), (&b2, 5)] {
        let mut b = b.clone();
        b[0..8].copy_from_slice(&base.to_be_bytes());
        b[12..16].copy_from_slice(&0i32.to_be_bytes());
        want.extend_from_slice(&b);
    }
    assert_eq!(std::fs::read(stem.with_extension("log")).unwrap(), want);

    // .index: (relative last offset, position) per indexed batch; trimmed at close.
    let (p1, p2) = (b0.len() as u32, (b0.len() + b1.len()) as u32);
    let mut idx = Vec::new();
    for (rel, pos) in [(4u32, p1), (5, p2)] {
        idx.extend_from_slice(&be32(rel));
        idx.extend_from_slice(&be32(pos));
    }
    assert_eq!(std::fs::read(stem.with_extension("index")).unwrap(), idx);

    // .timeindex: (max timestamp so far, relative offset of the batch that has it),
    // only when the timestamp grows: 150 < 202 adds nothing, nor does close.
    let mut tidx = Vec::new();
    tidx.extend_from_slice(&202i64.to_be_bytes());
    tidx.extend_from_slice(&be32(4));
    assert_eq!(
        std::fs::read(stem.with_extension("timeindex")).unwrap(),
        tidx
    );
}

/// A batch as Kafka stores it: given base offset, leader epoch 0.
fn stored(base: i64, ts: i64, n: usize) -> Vec<u8> {
    let vals: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("v{}", base + i as i64).into_bytes())
        .collect();
    let refs: Vec<&[u8]> = vals.iter().map(|v| v.as_slice()).collect();
    let mut b = batch(ts, &refs);
    b[0..8].copy_from_slice(&base.to_be_bytes());
    b[12..16].copy_from_slice(&0i32.to_be_bytes());
    b
}

fn write(p: &Path, bytes: &[u8]) {
    std::fs::write(p, bytes).unwrap();
}

#[test]
fn given_log_dir_laid_out_as_kafka_writes_it_when_opened_then_strom_reads_it() {
    let data = tempfile::tempdir().unwrap();
    let root = data.path();
    let part = root.join("orders-0");
    std::fs::create_dir(&part).unwrap();
    // Two rolled segments and an active one: 5 batches of 2 records each per segment.
    let mut ts = 1_000;
    for seg_base in [0i64, 10, 20] {
        let mut log = Vec::new();
        let mut max = (-1i64, 0u32);
        for k in 0..5 {
            let base = seg_base + 2 * k;
            log.extend_from_slice(&stored(base, ts, 2));
            max = (ts + 1, (base + 1 - seg_base) as u32);
            ts += 10;
        }
        let stem = part.join(format!("{seg_base:020}"));
        write(&stem.with_extension("log"), &log);
        // Small batches, index.interval.bytes 4096: no offset index entries; the time
        // index of a closed segment holds one final entry with its max timestamp.
        write(&stem.with_extension("index"), &[]);
        let mut t = max.0.to_be_bytes().to_vec();
        t.extend_from_slice(&max.1.to_be_bytes());
        write(&stem.with_extension("timeindex"), &t);
    }
    write(&part.join("leader-epoch-checkpoint"), b"0\n1\n0 0\n");
    write(
        &part.join("partition.metadata"),
        b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n",
    );
    write(
        &root.join("recovery-point-offset-checkpoint"),
        b"0\n1\norders 0 30\n",
    );
    write(
        &root.join("log-start-offset-checkpoint"),
        b"0\n1\norders 0 0\n",
    );
    write(
        &root.join("replication-offset-checkpoint"),
        b"0\n1\norders 0 30\n",
    );
    write(
        &root.join("meta.properties"),
        b"#\n#Thu Jan 01 00:00:00 UTC 2026\nnode.id=1\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ\n",
    );
    write(&logdir::clean_shutdown_marker(root), b"");

    let meta = logdir::ensure_meta_properties(root, 1).unwrap();
    assert_eq!(meta.cluster_id, "MkU3OEVBNTcwNTJENDM2Qg");
    assert_eq!(
        logdir::list_partitions(root).unwrap(),
        vec![("orders".to_string(), 0)]
    );
    let mut id = [0u8; 16];
    id[15] = 1;
    assert_eq!(logdir::read_partition_metadata(&part), Some(id));
    assert_eq!(
        logdir::read_leader_epoch_checkpoint(&part).unwrap(),
        vec![(0, 0)]
    );
    let rp = logdir::read_checkpoint(&root.join("recovery-point-offset-checkpoint")).unwrap()
        [&("orders".to_string(), 0)];
    let sizes: Vec<u64> = ["00000000000000000000.log", "00000000000000000020.log"]
        .iter()
        .map(|n| std::fs::metadata(part.join(n)).unwrap().len())
        .collect();

    run(async {
        let log =
            storage::PartitionLog::open(root, "orders", 0, LogConfig::default(), backend(), rp)
                .unwrap();
        assert_eq!(log.log_start_offset(), 0);
        assert_eq!(log.log_end_offset(), 30);
        assert_eq!(log.segment_base_offsets(), vec![0, 10, 20]);
        let hs = read_all(&log, 0);
        assert_eq!(hs.len(), 15);
        assert_eq!(read_all(&log, 13)[0].base_offset, 12);
        assert_eq!(log.offset_for_timestamp(1_071).unwrap(), Some((15, 1_071)));
        assert_eq!(log.max_timestamp(), Some((29, 1_141)));
        let r = log
            .append(batch_n(5_000, 1, 3, 0), opts(Durability::Fsync))
            .await
            .unwrap();
        assert_eq!(r.base_offset, 30);
        log.close().await.unwrap();
    });
    // Nothing was rewritten in the old segments.
    assert_eq!(
        std::fs::metadata(part.join("00000000000000000000.log"))
            .unwrap()
            .len(),
        sizes[0]
    );
    assert!(
        std::fs::metadata(part.join("00000000000000000020.log"))
            .unwrap()
            .len()
            > sizes[1]
    );
}
