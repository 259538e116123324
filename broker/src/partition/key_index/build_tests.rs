//! The build on a real log (`key_index`'s module comment): in steps that leave the shard to
//! its other partitions, with appends during it indexed exactly once, reads waiting for it,
//! and records past the high watermark at a restart found once they are committed.

use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use storage::batch::BatchHeader;
use storage::{IoBackend, IoBackendKind, LogConfig, PartitionLog};

use super::{KeyState, PER_KEY};
use crate::config::dynamic::BrokerView;
use crate::config::effective::TopicSettings;
use crate::partition::replica::Role;
use crate::partition::Partition;
use crate::test_support::TestBatch;

/// Keys cycle over this many: offset `o` has key `k{o % KEYS}`.
const KEYS: i64 = 37;
/// Records per appended batch, ~100-byte values: a build step reads ~5 such batches.
const BATCH: usize = 100;

fn run<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&rt, f)
}

fn partition(dir: &Path, keyed: bool) -> Rc<Partition> {
    let io = IoBackend::new(IoBackendKind::from_env()).unwrap();
    let log = PartitionLog::open(dir, "t", 0, LogConfig::default(), io, 0).unwrap();
    let view = BrokerView::from_static(Default::default(), BTreeMap::new());
    let overrides = if keyed {
        [("strom.key.index".to_string(), "true".to_string())].into()
    } else {
        Default::default()
    };
    let settings = Arc::new(TopicSettings::resolve(&overrides, &view));
    Rc::new(Partition::new("t".into(), 0, log, settings, 0).unwrap())
}

fn key(offset: i64) -> String {
    format!("k{}", offset % KEYS)
}

/// Appends `n` records at the log end, keyed by their offsets, acks=1.
async fn append(p: &Rc<Partition>, n: usize) -> i64 {
    let first = p.log.log_end_offset();
    let bytes = TestBatch::new(n).value_size(100).encode_with(|rs| {
        for (i, r) in rs.iter_mut().enumerate() {
            r.key = Some(key(first + i as i64).into());
        }
    });
    let header = BatchHeader::parse(&bytes).unwrap();
    let base = p
        .append(header, bytes, 1, crate::now_ms())
        .unwrap()
        .await
        .unwrap()
        .base_offset;
    assert_eq!(base, first);
    base
}

/// What a scan of `[0, end)` answers for `key`'s last `n`.
fn scan(k: &str, n: usize, end: i64) -> Vec<i64> {
    scan_from(0, k, n, end)
}

fn scan_from(start: i64, k: &str, n: usize, end: i64) -> Vec<i64> {
    let all: Vec<i64> = (start..end).filter(|o| key(*o) == k).collect();
    all[all.len().saturating_sub(n)..].to_vec()
}

async fn read(p: &Rc<Partition>, k: &str, n: usize) -> Vec<i64> {
    let hits = p.records_by_key(k.as_bytes(), n).await.unwrap();
    hits.iter().map(|h| h.offset).collect()
}

fn building(p: &Partition) -> bool {
    matches!(p.key_index.borrow().state(), KeyState::Building(_))
}

/// A partition of `batches` keyed batches, reopened: its index is built on first need.
async fn restarted(dir: &Path, batches: usize) -> Rc<Partition> {
    {
        let p = partition(dir, true);
        for _ in 0..batches {
            append(&p, BATCH).await;
        }
        p.log.flush().await.unwrap();
    }
    let p = partition(dir, true);
    assert!(matches!(p.key_index.borrow().state(), KeyState::Absent));
    p
}

#[test]
fn given_a_build_when_appends_and_a_read_interleave_then_each_record_is_indexed_once_and_the_read_answers_in_full(
) {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = restarted(dir.path(), 200).await;
        // The read starts the build and waits for it.
        let reader = tokio::task::spawn_local({
            let p = p.clone();
            // With the high watermark it answered at.
            async move { (read(&p, "k3", PER_KEY).await, p.high_watermark()) }
        });
        tokio::task::yield_now().await;
        assert!(building(&p), "the read started a build, in steps");
        let (mut during, mut written_during) = (0, 0);
        while building(&p) {
            written_during = p.log.log_end_offset();
            append(&p, BATCH).await;
            during += 1;
        }
        assert!(during > 1, "appends completed while the index was built");
        // The read waited for the whole build: it has what was appended during it too.
        let (answered, hw) = reader.await.unwrap();
        assert!(hw >= written_during, "answered after the build");
        assert_eq!(answered, scan("k3", PER_KEY, hw));
        // After it: appended batches go in as they complete.
        for _ in 0..5 {
            append(&p, BATCH).await;
        }
        let end = p.log.log_end_offset();
        assert_eq!(p.high_watermark(), end);
        let slot = p.key_index.borrow();
        let ix = slot.ready().expect("built");
        assert_eq!(ix.records(), end as u64, "each record indexed once");
        for k in 0..KEYS {
            let k = format!("k{k}");
            assert_eq!(
                ix.last(k.as_bytes(), PER_KEY, 0, end),
                scan(&k, PER_KEY, end)
            );
        }
    });
}

#[test]
fn given_pipelined_appends_when_the_first_to_complete_starts_the_build_then_each_record_is_indexed_once(
) {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = restarted(dir.path(), 50).await;
        // Offsets assigned in call order, written together: the first to complete starts
        // the build, whose scan then holds the others' records already.
        let pending: Vec<_> = (0..8)
            .map(|b| {
                let first = p.log.log_end_offset();
                assert_eq!(first, (50 + b) * BATCH as i64);
                let bytes = TestBatch::new(BATCH).value_size(100).encode_with(|rs| {
                    for (i, r) in rs.iter_mut().enumerate() {
                        r.key = Some(key(first + i as i64).into());
                    }
                });
                let header = BatchHeader::parse(&bytes).unwrap();
                p.append(header, bytes, 1, crate::now_ms()).unwrap()
            })
            .collect();
        for r in futures::future::join_all(pending).await {
            r.unwrap();
        }
        let end = p.log.log_end_offset();
        assert_eq!(read(&p, "k7", PER_KEY).await, scan("k7", PER_KEY, end));
        let slot = p.key_index.borrow();
        assert_eq!(
            slot.ready().unwrap().records(),
            end as u64,
            "each record once"
        );
    });
}

#[test]
fn given_a_build_when_the_log_is_truncated_and_its_start_moved_then_the_read_answers_from_what_is_left(
) {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = restarted(dir.path(), 200).await;
        let reader = tokio::task::spawn_local({
            let p = p.clone();
            async move { read(&p, "k3", PER_KEY).await }
        });
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        assert!(building(&p));
        // A follower's truncation drops the build under way; the read waits for another.
        p.truncate_replica(15_000).await.unwrap();
        assert!(!building(&p), "dropped with the index");
        tokio::task::yield_now().await;
        assert!(building(&p), "the waiting read started another");
        tokio::task::yield_now().await;
        // DeleteRecords during that one: the scan skips to the new log start.
        assert_eq!(p.delete_records(12_345).unwrap(), 12_345);
        let answered = reader.await.unwrap();
        assert_eq!(answered, scan_from(12_345, "k3", PER_KEY, 15_000));
        let slot = p.key_index.borrow();
        let ix = slot.ready().unwrap();
        for k in 0..KEYS {
            let k = format!("k{k}");
            let want = scan_from(12_345, &k, PER_KEY, 15_000);
            assert_eq!(ix.last(k.as_bytes(), PER_KEY, 12_345, i64::MAX), want);
        }
    });
}

#[test]
fn given_a_big_partition_building_its_index_when_producing_to_another_on_the_shard_then_those_produces_complete_meanwhile(
) {
    let (big_dir, other_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(async {
        let big = restarted(big_dir.path(), 600).await;
        let other = partition(other_dir.path(), false);
        let reader = tokio::task::spawn_local({
            let big = big.clone();
            async move { read(&big, "k5", 4).await }
        });
        tokio::task::yield_now().await;
        // One thread runs both partitions, as a shard does: the other's produces complete
        // while the big one's index is built, not after it.
        let mut produced = 0;
        while building(&big) {
            append(&other, 10).await;
            produced += 1;
        }
        assert!(
            produced >= 5,
            "only {produced} produces to the other partition completed during the build"
        );
        let end = big.log.log_end_offset();
        assert_eq!(reader.await.unwrap(), scan("k5", 4, end));
    });
}

fn leader(quorum: &Arc<AtomicBool>) -> Role {
    Role::Leader {
        me: 1,
        epoch: 3,
        isr: vec![1, 2],
        replicas: vec![1, 2],
        quorum: quorum.clone(),
    }
}

#[test]
fn given_a_restarted_leader_with_records_past_its_high_watermark_when_they_commit_then_key_reads_find_them(
) {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let quorum = Arc::new(AtomicBool::new(true));
        {
            let p = partition(dir.path(), true);
            p.set_role(leader(&quorum)).unwrap();
            append(&p, 5).await;
            p.replica_read(2, 5, -1, 1 << 20).unwrap();
            append(&p, 3 * KEYS as usize).await;
            assert_eq!(p.high_watermark(), 5, "the follower has 5");
            p.log.flush().await.unwrap();
        }
        let p = partition(dir.path(), true);
        p.restore_high_watermark(5);
        p.set_role(leader(&quorum)).unwrap();
        let end = p.log.log_end_offset();
        // k2 is at 2, then three more times past the high watermark.
        assert_eq!(read(&p, "k2", 10).await, [2], "only what is committed");
        p.replica_read(2, end, -1, 1 << 20).unwrap();
        assert_eq!(p.high_watermark(), end);
        assert_eq!(read(&p, "k2", 10).await, scan("k2", 10, end));
    });
}

#[test]
fn given_a_follower_with_records_past_the_leaders_high_watermark_when_they_commit_then_key_reads_find_them(
) {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(async {
        let quorum = Arc::new(AtomicBool::new(true));
        let l = partition(ld.path(), true);
        l.set_role(leader(&quorum)).unwrap();
        append(&l, 5).await;
        append(&l, 3 * KEYS as usize).await;
        let end = l.log.log_end_offset();
        let f = partition(fd.path(), true);
        f.set_role(Role::Follower {
            leader: 1,
            epoch: 3,
        })
        .unwrap();
        let (fetched, _) = l.replica_read(2, 0, -1, 1 << 20).unwrap();
        // The leader's high watermark was 0 when the follower fetched it all.
        f.append_replicated(fetched.data.chunks.clone(), 5)
            .await
            .unwrap();
        assert_eq!(f.high_watermark(), 5);
        assert_eq!(
            read(&f, "k2", 10).await,
            [2],
            "built now, by the first read"
        );
        f.append_replicated(Vec::new(), end).await.unwrap();
        assert_eq!(f.high_watermark(), end);
        assert_eq!(read(&f, "k2", 10).await, scan("k2", 10, end));
    });
}
