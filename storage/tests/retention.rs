//! Retention, delayed file deletion and the leader epoch cache through `PartitionLog`'s
//! public API, plus a randomized workload checked against a model: offsets never change,
//! the log start only advances, and bytes read before a deletion stay intact after it.

mod common;

use std::path::Path;

use common::*;
use storage::{
    Durability, LogConfig, PartitionLog, RetentionPolicy, RetentionReason, StorageError,
};

fn cfg(delay_ms: u64) -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        file_delete_delay_ms: delay_ms,
        ..LogConfig::default()
    }
}

fn policy(ms: i64, bytes: i64) -> RetentionPolicy {
    RetentionPolicy {
        retention_ms: ms,
        retention_bytes: bytes,
        delete: true,
    }
}

fn files_with(dir: &Path, suffix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(suffix)
        })
        .count()
}

/// Appends batch `i` (2 records, 300-byte values) with timestamps `ts`, `ts + 1`.
async fn append(log: &PartitionLog, ts: i64, tag: u8) -> i64 {
    log.append(batch_n(ts, 2, 300, tag), opts(Durability::None))
        .await
        .unwrap()
        .base_offset
}

#[test]
fn given_old_segments_when_time_retention_runs_then_whole_segments_go_and_log_start_moves() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), cfg(1000), 0);
        let now = 10_000_000;
        for i in 0..10 {
            append(&log, now - 100_000 + i, i as u8).await;
        }
        for i in 0..6 {
            append(&log, now - 10 + i, 50 + i as u8).await;
        }
        let before = log.segment_base_offsets();
        assert!(before.len() >= 5, "{before:?}");
        let hw = log.log_end_offset();
        let out = log
            .delete_old_segments(&policy(60_000, -1), hw, now)
            .unwrap();
        assert_eq!(out.reasons, vec![RetentionReason::RetentionTimeBreach]);
        assert!(!out.deleted.is_empty());
        // Only whole segments, all of them old: the start is a segment base <= 20 (the first
        // young record), and every old record from it on is still readable.
        let start = log.log_start_offset();
        assert_eq!(start, out.log_start_offset);
        assert!(start > 0 && start <= 20, "start {start}");
        assert!(log.segment_base_offsets().contains(&start));
        let headers = read_all(&log, start);
        assert_eq!(headers.first().unwrap().base_offset, start);
        assert_eq!(headers.last().unwrap().last_offset(), hw - 1);
        assert!(matches!(
            log.read(start - 1, 100, i64::MAX),
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        // Renamed, not yet unlinked: file.delete.delay.ms.
        let dir = log.dir().to_path_buf();
        assert_eq!(files_with(&dir, ".log.deleted"), out.deleted.len());
        assert!(log.take_due_deletions(now + 999).is_empty());
        let due = log.take_due_deletions(now + 1000);
        assert_eq!(due.len(), log.pending_deletions() + due.len());
        for p in due {
            std::fs::remove_file(p).unwrap();
        }
        assert_eq!(files_with(&dir, ".deleted"), 0);
        // Nothing else is old: a second run deletes nothing.
        let again = log
            .delete_old_segments(&policy(60_000, -1), hw, now)
            .unwrap();
        assert!(again.deleted.is_empty());
        assert_eq!(log.leader_epochs(), vec![(0, start)]);
    });
}

#[test]
fn given_everything_expired_when_retention_runs_then_active_rolls_and_log_is_empty_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), cfg(0), 0);
        for i in 0..3 {
            append(&log, i, 1).await;
        }
        let end = log.log_end_offset();
        // The high watermark below the end keeps the active segment.
        let out = log
            .delete_old_segments(&policy(1, -1), end - 1, 1_000_000)
            .unwrap();
        assert!(out.deleted.is_empty() || log.log_start_offset() < end);
        let out = log
            .delete_old_segments(&policy(1, -1), end, 1_000_000)
            .unwrap();
        assert!(!out.deleted.is_empty());
        assert_eq!(log.log_start_offset(), end);
        assert_eq!(log.segment_base_offsets(), vec![end]);
        assert_eq!(log.log_end_offset(), end);
        // Appends carry on at the same offsets.
        assert_eq!(append(&log, 5, 2).await, end);
        // Delay 0: due at once. Reopening also removes leftovers.
        assert!(!log.take_due_deletions(1_000_000).is_empty());
    });
}

#[test]
fn given_size_limit_when_retention_runs_then_log_shrinks_to_at_least_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), cfg(0), 0);
        for i in 0..30 {
            append(&log, crate_now(), i as u8).await;
        }
        let size = log.size_bytes();
        let limit = (size / 2) as i64;
        let out = log
            .delete_old_segments(&policy(-1, limit), log.log_end_offset(), crate_now())
            .unwrap();
        assert_eq!(out.reasons, vec![RetentionReason::RetentionSizeBreach]);
        assert!(log.size_bytes() >= limit as u64);
        assert!(log.size_bytes() < size);
        assert_eq!(log.size_bytes() + out.bytes, size);
        // Policy without delete (compact only): time and size do nothing.
        let compact = RetentionPolicy {
            delete: false,
            ..policy(0, 0)
        };
        let out = log
            .delete_old_segments(&compact, log.log_end_offset(), crate_now())
            .unwrap();
        assert!(out.deleted.is_empty());
    });
}

#[test]
fn given_leftover_deleted_files_when_reopening_then_removed_and_epochs_survive() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), cfg(3_600_000), 0);
        for i in 0..12 {
            append(&log, i, 1).await;
        }
        let target = log.segment_base_offsets()[2];
        log.advance_log_start(target + 1).unwrap();
        let pdir = log.dir().to_path_buf();
        assert!(files_with(&pdir, ".deleted") > 0);
        let end = log.log_end_offset();
        log.close().await.unwrap();
        let log = open(dir.path(), cfg(3_600_000), end);
        assert_eq!(files_with(&pdir, ".deleted"), 0);
        // Storage starts at the first segment; the broker re-applies its checkpoint.
        assert_eq!(log.log_start_offset(), target);
        // The checkpoint kept the epoch's start where the log start was.
        assert_eq!(log.leader_epochs(), vec![(0, target + 1)]);
        log.advance_log_start(target + 1).unwrap();
        assert_eq!(log.leader_epochs(), vec![(0, target + 1)]);
        assert_eq!(log.end_offset_for_epoch(0, end), (0, end));
        assert_eq!(log.end_offset_for_epoch(1, end), (-1, -1));
    });
}

fn crate_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn given_random_workload_with_retention_when_checked_against_model_then_offsets_stable_and_start_only_advances(
) {
    let seed = std::env::var("STROM_OPFUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| crate_now() as u64)
        | 1;
    eprintln!("retention fuzz seed {seed}");
    let mut rng = Rng(seed);
    for _round in 0..6 {
        let dir = tempfile::tempdir().unwrap();
        run(async {
            let log = open(dir.path(), cfg(rng.below(3) * 50), 0);
            // Model: every batch ever appended, (base, last, ts, payload after the offset).
            let mut model: Vec<(i64, i64, Vec<u8>)> = Vec::new();
            let mut start = 0i64;
            let mut clock = 1_000_000i64;
            // Reads taken before deletions, checked again after them.
            let mut held: Vec<(storage::ReadResult, Vec<Vec<u8>>)> = Vec::new();
            for step in 0..300u64 {
                clock += rng.below(50) as i64;
                match rng.below(10) {
                    0..=4 => {
                        let n = 1 + rng.below(4) as usize;
                        let b = batch_n(clock, n, rng.below(500) as usize, step as u8);
                        let body = b[16..].to_vec();
                        let base = log
                            .append(b, opts(Durability::None))
                            .await
                            .unwrap()
                            .base_offset;
                        let expect = model.last().map_or(0, |m| m.1 + 1);
                        assert_eq!(base, expect, "offsets are assigned contiguously");
                        model.push((base, base + n as i64 - 1, body));
                    }
                    5 => {
                        let r = log.read(start, usize::MAX, i64::MAX).unwrap();
                        let copy = r.chunks.iter().map(|c| c.to_vec()).collect();
                        held.push((r, copy));
                    }
                    6..=7 => {
                        let p = policy(
                            [-1, 0, 200, 2000][rng.below(4) as usize],
                            [-1, 0, 3000, 10_000][rng.below(4) as usize],
                        );
                        let end = log.log_end_offset();
                        let hw = end - rng.below(3) as i64;
                        let out = log.delete_old_segments(&p, hw.max(0), clock).unwrap();
                        assert!(out.log_start_offset >= start, "log start only advances");
                        assert!(out.log_start_offset <= hw.max(start), "never past the hw");
                        start = out.log_start_offset;
                        let now = clock + rng.below(200) as i64;
                        for f in log.take_due_deletions(now) {
                            std::fs::remove_file(f).unwrap();
                        }
                    }
                    8 => {
                        let end = log.log_end_offset();
                        let to = start + rng.below((end - start + 1) as u64) as i64;
                        log.advance_log_start(to).unwrap();
                        start = start.max(to);
                    }
                    _ => {
                        let end = log.log_end_offset();
                        let off = start + rng.below((end - start + 1) as u64) as i64;
                        check_from(&log, &model, off);
                    }
                }
                assert_eq!(log.log_start_offset(), start);
                if start > 0 {
                    assert!(log.read(start - 1, 10, i64::MAX).is_err());
                }
            }
            check_from(&log, &model, start);
            for (r, copy) in &held {
                for (c, want) in r.chunks.iter().zip(copy) {
                    assert_eq!(&c[..], &want[..], "bytes read before a deletion changed");
                }
            }
        });
    }
}

/// Everything readable from `off` matches the model, offset for offset.
fn check_from(log: &PartitionLog, model: &[(i64, i64, Vec<u8>)], off: i64) {
    let got: Vec<(i64, Vec<u8>)> = {
        let r = log.read(off, usize::MAX, i64::MAX).unwrap();
        let mut v = Vec::new();
        for c in &r.chunks {
            let mut at = 0;
            for h in storage::batch::validate_batches(c).unwrap() {
                v.push((h.base_offset, c[at + 16..at + h.total_size()].to_vec()));
                at += h.total_size();
            }
        }
        v
    };
    let want: Vec<(i64, Vec<u8>)> = model
        .iter()
        .filter(|m| m.1 >= off)
        .map(|m| (m.0, m.2.clone()))
        .collect();
    assert_eq!(got.len(), want.len(), "batches from {off}");
    assert!(got == want, "content from {off}");
}
