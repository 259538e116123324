//! Recovery at open: torn tails, corruption injection, bad indexes, clean vs unclean.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use common::*;
use storage::{Durability, LogConfig};

fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 8192,
        index_interval_bytes: 512,
        ..LogConfig::default()
    }
}

/// Writes `n` batches of 2 records (offsets 2i, 2i+1) and closes cleanly. Returns the
/// partition dir and the log end.
fn populate(root: &Path, n: i64) -> (PathBuf, i64) {
    run(async {
        let log = open(root, cfg(), 0);
        for i in 0..n {
            log.append(
                batch_n(1000 + 10 * i, 2, 300, i as u8),
                opts(Durability::None),
            )
            .await
            .unwrap();
        }
        let dir = log.dir().to_path_buf();
        let end = log.log_end_offset();
        log.close().await.unwrap();
        (dir, end)
    })
}

fn segment_files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn last_log(dir: &Path) -> PathBuf {
    segment_files(dir, "log").pop().unwrap()
}

fn reopen_and_count(root: &Path, recovery_point: i64) -> (usize, i64) {
    run(async {
        let log = open(root, cfg(), recovery_point);
        let hs = read_all(&log, log.log_start_offset());
        // Offsets must be dense and in order: nothing corrupt or missing in between.
        for w in hs.windows(2) {
            assert_eq!(w[0].last_offset() + 1, w[1].base_offset);
        }
        (hs.len(), log.log_end_offset())
    })
}

#[test]
fn given_torn_tail_when_recovering_then_truncates_to_last_valid_batch() {
    let root = tempfile::tempdir().unwrap();
    let (dir, end) = populate(root.path(), 40);
    let log_file = last_log(&dir);
    let len = std::fs::metadata(&log_file).unwrap().len();
    // Cut the last batch in half, as a crash mid-write would.
    OpenOptions::new()
        .write(true)
        .open(&log_file)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let (n, new_end) = reopen_and_count(root.path(), 0);
    assert_eq!(n, 39);
    assert_eq!(new_end, end - 2);
    assert!(std::fs::metadata(&log_file).unwrap().len() < len - 100);
}

#[test]
fn given_zeroed_tail_when_recovering_then_zeros_are_cut() {
    let root = tempfile::tempdir().unwrap();
    let (dir, end) = populate(root.path(), 10);
    let log_file = last_log(&dir);
    let len = std::fs::metadata(&log_file).unwrap().len();
    let f = OpenOptions::new().write(true).open(&log_file).unwrap();
    f.write_all_at(&vec![0u8; 4096], len).unwrap();
    let (n, new_end) = reopen_and_count(root.path(), 0);
    assert_eq!((n, new_end), (10, end));
    assert_eq!(std::fs::metadata(&log_file).unwrap().len(), len);
}

#[test]
fn given_flipped_byte_in_middle_segment_when_recovering_from_zero_then_log_ends_before_it() {
    let root = tempfile::tempdir().unwrap();
    let (dir, _) = populate(root.path(), 80);
    let logs = segment_files(&dir, "log");
    assert!(logs.len() >= 3);
    let victim = &logs[1];
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(victim)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, 2000).unwrap();
    f.write_all_at(&[b[0] ^ 0x5a], 2000).unwrap();
    let (n, end) = reopen_and_count(root.path(), 0);
    assert!(n < 80);
    // Later segments are gone; the corrupt one ends before the flipped byte.
    assert!(!logs[2].exists());
    assert!(std::fs::metadata(victim).unwrap().len() <= 2000);
    assert_eq!(end, 2 * n as i64);
}

#[test]
fn given_clean_shutdown_when_opening_at_log_end_then_old_segments_are_not_rescanned() {
    let root = tempfile::tempdir().unwrap();
    let (dir, end) = populate(root.path(), 80);
    let logs = segment_files(&dir, "log");
    // Corrupt a trusted (below recovery point) segment's payload: a full scan would
    // notice and truncate, a clean open must not read it at all.
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&logs[0])
        .unwrap();
    f.write_all_at(&[0xff, 0xff], 1000).unwrap();
    let sizes: Vec<u64> = logs
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect();
    run(async {
        let log = open(root.path(), cfg(), end);
        assert_eq!(log.log_end_offset(), end);
    });
    let after: Vec<u64> = logs
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect();
    assert_eq!(sizes, after);
}

#[test]
fn given_garbage_or_missing_indexes_when_opening_then_rebuilt_and_lookups_correct() {
    let root = tempfile::tempdir().unwrap();
    let (dir, end) = populate(root.path(), 60);
    let idx = segment_files(&dir, "index");
    let tidx = segment_files(&dir, "timeindex");
    let want: Vec<Vec<u8>> = idx.iter().map(|p| std::fs::read(p).unwrap()).collect();
    std::fs::write(&idx[0], b"garbage!garbage!garbage").unwrap();
    std::fs::remove_file(&idx[1]).unwrap();
    std::fs::write(&tidx[0], vec![0xffu8; 36]).unwrap();
    // Recovery point 0: everything is rescanned and every index rebuilt.
    let (n, new_end) = reopen_and_count(root.path(), 0);
    assert_eq!((n, new_end), (60, end));
    for (p, w) in idx.iter().zip(&want).take(2) {
        assert_eq!(&std::fs::read(p).unwrap(), w, "{}", p.display());
    }
    run(async {
        let log = open(root.path(), cfg(), end);
        assert_eq!(
            log.offset_for_timestamp(1000 + 10 * 30).unwrap(),
            Some((60, 1300))
        );
        for o in [0, 1, 17, 64, 99, end - 1] {
            let h = read_all(&log, o)[0];
            assert!(h.base_offset <= o && o <= h.last_offset());
        }
    });
}

#[test]
fn given_index_pointing_past_the_log_when_opening_clean_then_segment_recovered() {
    let root = tempfile::tempdir().unwrap();
    let (dir, end) = populate(root.path(), 60);
    let idx = segment_files(&dir, "index");
    let last = idx.last().unwrap();
    let mut raw = std::fs::read(last).unwrap();
    raw.extend_from_slice(&1000u32.to_be_bytes());
    raw.extend_from_slice(&10_000_000u32.to_be_bytes());
    std::fs::write(last, raw).unwrap();
    let (n, new_end) = reopen_and_count(root.path(), end);
    assert_eq!((n, new_end), (60, end));
}

#[test]
fn given_unclean_shutdown_with_appends_after_recovery_point_when_opening_then_all_valid_kept() {
    let root = tempfile::tempdir().unwrap();
    let end = run(async {
        let log = open(root.path(), cfg(), 0);
        for i in 0..50 {
            log.append(batch_n(i, 2, 300, 0), opts(Durability::Fsync))
                .await
                .unwrap();
        }
        // No close: preallocated indexes stay untrimmed, like after a crash.
        log.log_end_offset()
    });
    let (n, new_end) = reopen_and_count(root.path(), 20);
    assert_eq!((n, new_end), (50, end));
    // And again from zero.
    assert_eq!(reopen_and_count(root.path(), 0), (50, end));
}

#[test]
fn given_leftover_files_when_opening_then_cleaned_and_orphan_indexes_removed() {
    let root = tempfile::tempdir().unwrap();
    let (dir, end) = populate(root.path(), 5);
    std::fs::write(dir.join("00000000000000000003.log.deleted"), b"x").unwrap();
    std::fs::write(dir.join("00000000000000000000.log.cleaned"), b"x").unwrap();
    std::fs::write(dir.join("00000000000000099999.index"), b"x").unwrap();
    assert_eq!(reopen_and_count(root.path(), end), (5, end));
    assert!(!dir.join("00000000000000000003.log.deleted").exists());
    assert!(!dir.join("00000000000000000000.log.cleaned").exists());
    assert!(!dir.join("00000000000000099999.index").exists());
}

#[test]
fn given_truncated_index_file_when_opening_then_partial_entry_ignored() {
    let root = tempfile::tempdir().unwrap();
    let (dir, end) = populate(root.path(), 30);
    for p in segment_files(&dir, "index") {
        let len = std::fs::metadata(&p).unwrap().len();
        if len >= 8 {
            OpenOptions::new()
                .write(true)
                .open(&p)
                .unwrap()
                .set_len(len - 3)
                .unwrap();
        }
    }
    assert_eq!(reopen_and_count(root.path(), end), (30, end));
}

/// Reads every batch from `from`, checking each as recovery does (not as a producer's).
fn read_stored(log: &storage::PartitionLog, from: i64) -> Vec<storage::batch::BatchHeader> {
    let r = log.read(from, usize::MAX, i64::MAX).unwrap();
    let mut out = Vec::new();
    for c in &r.chunks {
        for item in storage::batch::BatchIter::validating(c) {
            out.push(item.unwrap().0);
        }
    }
    out
}

#[test]
fn given_compacted_kafka_batches_when_recovering_from_zero_then_all_kept() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    std::fs::create_dir_all(&dir).unwrap();
    // Offsets 0-4 of which the cleaner kept 1 and 3; offsets 5-6 with nothing kept (an
    // idempotent producer's last batch); then an ordinary batch at 7-8.
    let mut a = compacted_batch(100, &[(1, b"one"), (3, b"three")], 4);
    let mut b = compacted_batch(200, &[], 1);
    let mut c = batch(300, &[b"x", b"y"]);
    storage::batch::set_base_offset(&mut b, 5);
    storage::batch::set_base_offset(&mut c, 7);
    a.extend_from_slice(&b);
    a.extend_from_slice(&c);
    let log_file = dir.join("00000000000000000000.log");
    std::fs::write(&log_file, &a).unwrap();
    for rp in [0, 9] {
        run(async {
            let log = open(root.path(), cfg(), rp);
            assert_eq!(log.log_end_offset(), 9, "recovery point {rp}");
            let hs = read_stored(&log, 0);
            let bases: Vec<i64> = hs.iter().map(|h| h.base_offset).collect();
            assert_eq!(bases, vec![0, 5, 7]);
            assert_eq!(read_stored(&log, 3)[0].base_offset, 0);
            assert_eq!(read_stored(&log, 6)[0].base_offset, 5);
        });
        assert_eq!(std::fs::metadata(&log_file).unwrap().len(), a.len() as u64);
    }
}

#[test]
fn given_corrupt_batch_below_recovery_point_when_opening_then_refuses_and_deletes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let (dir, end) = populate(root.path(), 80);
    let logs = segment_files(&dir, "log");
    assert!(logs.len() >= 3);
    // A flipped payload bit in an old segment, and its index gone so that the open has
    // to scan it.
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&logs[0])
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, 1000).unwrap();
    f.write_all_at(&[b[0] ^ 0x5a], 1000).unwrap();
    std::fs::remove_file(logs[0].with_extension("index")).unwrap();
    let sizes: Vec<u64> = logs
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect();
    let r = run(async {
        storage::PartitionLog::open(root.path(), "t", 0, cfg(), backend(), end).map(|_| ())
    });
    assert!(
        matches!(r, Err(storage::StorageError::Corrupt { .. })),
        "{r:?}"
    );
    let after: Vec<u64> = logs
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect();
    assert_eq!(sizes, after, "no durable segment may be cut or deleted");
}

#[test]
fn given_bad_index_of_segment_below_recovery_point_when_opening_then_rebuilt_without_full_recovery()
{
    let root = tempfile::tempdir().unwrap();
    let (dir, end) = populate(root.path(), 80);
    let idx = segment_files(&dir, "index");
    std::fs::write(&idx[0], b"garbage!garbage!garbage").unwrap();
    assert_eq!(reopen_and_count(root.path(), end), (80, end));
}

/// Closed log whose largest timestamp is in the very first batch of the first segment.
fn populate_max_ts_first(root: &Path) -> (PathBuf, i64) {
    run(async {
        let log = open(root, cfg(), 0);
        log.append(batch_n(50_000, 2, 300, 0), opts(Durability::None))
            .await
            .unwrap();
        for i in 1..40 {
            log.append(batch_n(1000 + 10 * i, 2, 300, 0), opts(Durability::None))
                .await
                .unwrap();
        }
        let dir = log.dir().to_path_buf();
        let end = log.log_end_offset();
        log.close().await.unwrap();
        (dir, end)
    })
}

#[test]
fn given_missing_timeindex_when_opening_clean_then_rebuilt_and_timestamp_lookups_right() {
    let root = tempfile::tempdir().unwrap();
    let (dir, end) = populate_max_ts_first(root.path());
    std::fs::remove_file(&segment_files(&dir, "timeindex")[0]).unwrap();
    run(async {
        let log = open(root.path(), cfg(), end);
        assert_eq!(log.max_timestamp(), Some((1, 50_001)));
        assert_eq!(log.offset_for_timestamp(20_000).unwrap(), Some((0, 50_000)));
    });
}

#[test]
fn given_timeindex_with_negative_relative_offset_when_opening_clean_then_rebuilt() {
    let root = tempfile::tempdir().unwrap();
    let (dir, end) = populate_max_ts_first(root.path());
    let mut raw = 60_000i64.to_be_bytes().to_vec();
    raw.extend_from_slice(&(-16i32).to_be_bytes());
    std::fs::write(&segment_files(&dir, "timeindex")[0], raw).unwrap();
    run(async {
        let log = open(root.path(), cfg(), end);
        assert_eq!(log.max_timestamp(), Some((1, 50_001)));
    });
}

#[test]
fn given_reopened_segment_when_segment_ms_passed_since_its_first_batch_then_rolls() {
    let root = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_ms: 1000,
        index_interval_bytes: 256,
        ..LogConfig::default()
    };
    let end = run(async {
        let log = open(root.path(), cfg.clone(), 0);
        // First batch at t=10_000, later ones up to t=10_900: no roll yet.
        for i in 0..10 {
            log.append(batch_n(10_000 + 100 * i, 1, 300, 0), opts(Durability::None))
                .await
                .unwrap();
        }
        assert_eq!(log.segment_base_offsets().len(), 1);
        let end = log.log_end_offset();
        log.close().await.unwrap();
        end
    });
    run(async {
        let log = open(root.path(), cfg, end);
        // 1_100 ms after the first batch, but only a few hundred after the batch the
        // index's last entry points at.
        log.append(batch_n(11_100, 1, 300, 0), opts(Durability::None))
            .await
            .unwrap();
        assert_eq!(log.segment_base_offsets(), vec![0, end]);
    });
}

#[test]
fn given_hole_before_next_segment_above_recovery_point_when_recovering_then_log_ends_at_hole() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    std::fs::create_dir_all(&dir).unwrap();
    // Offsets 0-1 in the first segment; 2-3 never reached the disk; a second segment
    // at 4 did (writes complete out of order).
    std::fs::write(
        dir.join("00000000000000000000.log"),
        batch(1, &[b"a", b"b"]),
    )
    .unwrap();
    let mut b = batch(2, &[b"c", b"d"]);
    storage::batch::set_base_offset(&mut b, 4);
    std::fs::write(dir.join("00000000000000000004.log"), &b).unwrap();
    run(async {
        let log = open(root.path(), cfg(), 0);
        assert_eq!(log.log_end_offset(), 2);
        assert_eq!(log.segment_base_offsets(), vec![0]);
    });
}

#[test]
fn given_clean_shutdown_with_many_segments_when_opening_then_no_closed_segment_index_or_log_is_read(
) {
    let root = tempfile::tempdir().unwrap();
    let (_dir, end) = populate(root.path(), 400);
    run(async {
        let log = open(root.path(), cfg(), end);
        let probes = log.segment_probes();
        assert!(probes.len() > 20, "{} segments", probes.len());
        let (closed, _active) = probes.split_at(probes.len() - 1);
        for p in closed {
            assert_eq!(
                (p.index_loads, p.time_index_loads, p.log_maps),
                (0, 0, 0),
                "segment {} was read at open",
                p.base_offset
            );
        }
        // Lookups load what they need, and reads of every segment keep only a bounded
        // number of closed segments' indexes in memory.
        for o in (0..end).step_by(7) {
            let h = read_all(&log, o)[0];
            assert!(h.base_offset <= o && o <= h.last_offset());
        }
        assert_eq!(
            log.offset_for_timestamp(1000 + 10 * 200).unwrap(),
            Some((400, 3000))
        );
        let loaded = log
            .segment_probes()
            .iter()
            .filter(|p| p.indexes_loaded)
            .count();
        assert!(loaded <= 17, "{loaded} segments keep their indexes loaded");
    });
}
