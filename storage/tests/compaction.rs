//! Log compaction against a model: random keyed workloads with tombstones, cleaned at
//! random points in (virtual) time, with readers running during the cleaning.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::AtomicBool;

use common::*;
use storage::cleaner::{CleanerConfig, ProducerState, Throttle};
use storage::expiry::RecordExpiry;
use storage::{Durability, LogConfig, PartitionLog};

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 1500,
        index_interval_bytes: 200,
        ..Default::default()
    }
}

fn cleaner_config(retention: i64) -> CleanerConfig {
    CleanerConfig {
        delete_retention_ms: retention,
        min_cleanable_dirty_ratio: 0.0,
        ..Default::default()
    }
}

/// What was appended: offset -> (key, value).
type Model = BTreeMap<i64, (Vec<u8>, Option<Vec<u8>>)>;

async fn append(
    log: &PartitionLog,
    model: &mut Model,
    ts: i64,
    recs: &[(Vec<u8>, Option<Vec<u8>>)],
) {
    let refs: Vec<(&[u8], Option<&[u8]>)> = recs
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_deref()))
        .collect();
    let r = log
        .append(keyed_batch(ts, &refs), opts(Durability::None))
        .await
        .unwrap();
    for (i, rec) in recs.iter().enumerate() {
        model.insert(r.base_offset + i as i64, rec.clone());
    }
}

/// Offsets never change and nothing is invented: every record read is the one appended
/// at that offset, in offset order.
fn check_against_model(read: &[KeyedRecord], model: &Model) {
    let mut prev = -1;
    for (o, _, k, v) in read {
        assert!(*o > prev, "offsets go backwards at {o}");
        prev = *o;
        let (mk, mv) = model
            .get(o)
            .unwrap_or_else(|| panic!("offset {o} never appended"));
        assert_eq!((mk, mv), (k, v), "record at {o} changed");
    }
}

/// One cleaning pass as the broker runs it: plan on the shard, rewrite off it (while
/// `readers` read on the shard), swap on the shard.
async fn clean(
    log: &PartitionLog,
    checkpoint: i64,
    cfg: &CleanerConfig,
    now: i64,
    model: &Model,
) -> Pass {
    let task = log
        .clean_task(checkpoint, cfg, now, ProducerState::default())
        .unwrap()
        .expect("closed segments to clean");
    let before = log
        .read(log.log_start_offset(), usize::MAX, i64::MAX)
        .unwrap();
    let handle = tokio::task::spawn_blocking(move || {
        let stop = AtomicBool::new(false);
        task.run(None, &mut Throttle::new(f64::INFINITY, &stop))
    });
    // Reads while the rewrite runs see the log as it was.
    while !handle.is_finished() {
        check_against_model(&read_records(log), model);
        tokio::task::yield_now().await;
    }
    let outcome = handle.await.unwrap().unwrap();
    // A read taken before the swap stays readable and unchanged after it.
    let held: Vec<_> = before
        .chunks
        .iter()
        .flat_map(|c| records_of_chunk(c))
        .collect();
    let log_end = log.log_end_offset();
    let pass = Pass {
        clean_end: outcome.clean_end,
        stats: outcome.stats.clone(),
    };
    log.install_cleaned(outcome).await.unwrap();
    let held_after: Vec<_> = before
        .chunks
        .iter()
        .flat_map(|c| records_of_chunk(c))
        .collect();
    assert_eq!(held, held_after);
    assert_eq!(log.log_end_offset(), log_end, "cleaning moved the log end");
    pass
}

/// What a test keeps of a pass (the outcome itself is consumed by the swap).
struct Pass {
    clean_end: i64,
    stats: storage::cleaner::CleanStats,
}

/// Appends one batch of (key, value, ttl-ms header) records at `ts`, into the model too.
async fn append_with_ttl(
    log: &PartitionLog,
    model: &mut Model,
    ts: i64,
    recs: &[(&str, Option<&str>)],
) {
    let headers: Vec<Vec<Header<'_>>> = recs
        .iter()
        .map(|(_, ttl)| {
            ttl.map(|t| vec![(&b"ttl-ms"[..], t.as_bytes())])
                .unwrap_or_default()
        })
        .collect();
    let with: Vec<HeaderedRecord<'_>> = recs
        .iter()
        .zip(&headers)
        .map(|((k, _), h)| (k.as_bytes(), Some(&b"v"[..]), h.as_slice()))
        .collect();
    let r = log
        .append(keyed_batch_with_headers(ts, &with), opts(Durability::None))
        .await
        .unwrap();
    for (i, (k, _)) in recs.iter().enumerate() {
        model.insert(
            r.base_offset + i as i64,
            (k.as_bytes().to_vec(), Some(b"v".to_vec())),
        );
    }
}

#[test]
fn given_record_expiry_when_cleaning_then_expired_records_go_even_as_latest_of_their_key() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), small(), 0);
        let mut model = Model::new();
        // At t=1000: `short` expires at 1500 by its header; `long` (header) at 101000; `plain`
        // has no header, and `bad`'s header is no number: the topic default (5000) applies.
        append_with_ttl(
            &log,
            &mut model,
            1000,
            &[
                ("short", Some("500")),
                ("long", Some("100000")),
                ("plain", None),
                ("bad", Some("x")),
            ],
        )
        .await;
        // Filler (no header, keys of its own) until the first segments close.
        for i in 0..40 {
            let key = format!("filler-{i}");
            append_with_ttl(
                &log,
                &mut model,
                9000 + i,
                &[(key.as_str(), Some("999999"))],
            )
            .await;
        }
        let mut cfg = cleaner_config(10_000);
        cfg.expiry = Some(RecordExpiry {
            header: Some("ttl-ms".into()),
            default_ttl_ms: Some(5000),
        });
        let keys_at = |log: &PartitionLog| -> Vec<String> {
            read_records(log)
                .into_iter()
                .map(|(_, _, k, _)| String::from_utf8(k).unwrap())
                .filter(|k| !k.starts_with("filler"))
                .collect()
        };
        // At 2000 only `short` has expired.
        let pass = clean(&log, 0, &cfg, 2000, &model).await;
        assert_eq!(pass.stats.records_expired, 1);
        assert_eq!(keys_at(&log), ["long", "plain", "bad"]);
        // At 7000 the default TTL has passed too: only the header's 100 s remain.
        let pass = clean(&log, 0, &cfg, 7000, &model).await;
        assert_eq!(pass.stats.records_expired, 2);
        assert_eq!(keys_at(&log), ["long"]);
        // Without expiry nothing more goes.
        let pass = clean(&log, 0, &cleaner_config(10_000), 200_000, &model).await;
        assert_eq!(pass.stats.records_expired, 0);
        assert_eq!(keys_at(&log), ["long"]);
    });
}

#[test]
fn given_random_keyed_workloads_when_cleaning_then_latest_per_key_survives_and_offsets_hold() {
    let seeds: u64 = std::env::var("STROM_COMPACTION_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    for seed in 1..=seeds {
        run_model(seed);
    }
}

fn run_model(seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let retention = 10_000;
        let cfg = cleaner_config(retention);
        let log = open(dir.path(), small(), 0);
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut model = Model::new();
        let mut now = 1_000_000i64;
        let mut checkpoint = 0;
        // offset of a tombstone -> virtual time of the first pass that covered it
        let mut first_covered: HashMap<i64, i64> = HashMap::new();
        let mut passes: Vec<i64> = Vec::new();
        let mut counter = 0u64;
        for step in 0..400 {
            now += rng.below(200) as i64;
            let n = 1 + rng.below(4) as usize;
            let recs: Vec<_> = (0..n)
                .map(|_| {
                    counter += 1;
                    let key = format!("k{}", rng.below(24)).into_bytes();
                    let value = (rng.below(5) != 0).then(|| format!("v{counter}").into_bytes());
                    (key, value)
                })
                .collect();
            append(&log, &mut model, now, &recs).await;
            if step % 37 == 36 {
                let out = clean(&log, checkpoint, &cfg, now, &model).await;
                checkpoint = out.clean_end;
                passes.push(now);
                for (o, (_, v)) in model.range(..checkpoint) {
                    if v.is_none() {
                        first_covered.entry(*o).or_insert(now);
                    }
                }
                check(&log, &model, checkpoint, &first_covered, now, retention);
            }
        }
        // Roll the active segment away, then clean twice: once to set delete horizons,
        // once past them. Every tombstone below the checkpoint must then be gone.
        for i in 0..40 {
            append(
                &log,
                &mut model,
                now,
                &[(format!("filler{i}").into_bytes(), Some(vec![b'f'; 60]))],
            )
            .await;
        }
        let out = clean(&log, checkpoint, &cfg, now, &model).await;
        checkpoint = out.clean_end;
        for (o, (_, v)) in model.range(..checkpoint) {
            if v.is_none() {
                first_covered.entry(*o).or_insert(now);
            }
        }
        check(&log, &model, checkpoint, &first_covered, now, retention);
        now += retention + 1;
        let out = clean(&log, checkpoint, &cfg, now, &model).await;
        check(&log, &model, out.clean_end, &first_covered, now, retention);
        let read = read_records(&log);
        let tombstones: Vec<_> = read
            .iter()
            .filter(|r| r.3.is_none() && r.0 < checkpoint)
            .collect();
        assert!(
            tombstones.is_empty(),
            "seed {seed}: tombstones outlived delete.retention.ms: {tombstones:?}"
        );
        assert!(out.stats.tombstones_removed > 0 || first_covered.is_empty());
        // 24 keys, hundreds of records: the cleaned section shrank to about one per key.
        let below = read.iter().filter(|r| r.0 < checkpoint).count();
        assert!(
            below <= 24 + 40,
            "seed {seed}: {below} records below {checkpoint} after cleaning"
        );
        assert!(model.len() > 500);
        // The cleaned log survives a reopen, trusted or fully recovered.
        let end = log.log_end_offset();
        log.close().await.unwrap();
        for point in [end, 0] {
            let log = open(dir.path(), small(), point);
            assert_eq!(log.log_end_offset(), end);
            assert_eq!(read_records(&log), read, "seed {seed}: reopened at {point}");
            log.close().await.unwrap();
        }
    });
}

/// The compaction guarantees, given the model and the cleaner checkpoint.
fn check(
    log: &PartitionLog,
    model: &Model,
    clean_end: i64,
    first_covered: &HashMap<i64, i64>,
    now: i64,
    retention: i64,
) {
    let read = read_records(log);
    check_against_model(&read, model);
    let present: HashMap<i64, &KeyedRecord> = read.iter().map(|r| (r.0, r)).collect();
    // Latest record per key in the model.
    let mut latest: HashMap<&[u8], i64> = HashMap::new();
    for (o, (k, _)) in model {
        latest.insert(k, *o);
    }
    for (k, &o) in &latest {
        let (_, v) = &model[&o];
        if present.contains_key(&o) {
            continue;
        }
        assert!(
            v.is_none(),
            "latest value of {:?} at {o} is gone",
            String::from_utf8_lossy(k)
        );
        let covered = first_covered
            .get(&o)
            .copied()
            .expect("removed before any pass covered it");
        assert!(
            covered + retention <= now,
            "tombstone at {o} removed before its delete horizon"
        );
        assert!(
            !read.iter().any(|r| r.2 == *k),
            "an older record of deleted key {:?} survived its tombstone",
            String::from_utf8_lossy(k)
        );
    }
    // The cleaned section holds one record per key; the rest is untouched.
    let mut seen = HashSet::new();
    for r in read.iter().filter(|r| r.0 < clean_end) {
        assert!(
            seen.insert(r.2.clone()),
            "key {:?} twice below the checkpoint",
            String::from_utf8_lossy(&r.2)
        );
    }
    for o in model.range(clean_end..).map(|(o, _)| *o) {
        assert!(
            present.contains_key(&o),
            "record {o} above the checkpoint was removed"
        );
    }
}

/// Where a cleaning pass stops in the crash test.
#[derive(Clone, Copy, Debug)]
enum CrashAt {
    /// `.cleaned` files written, nothing renamed.
    Cleaned,
    /// Index files renamed to `.swap`, the log not yet (commit not reached).
    HalfCommitted,
    /// `<base>.log.swap` exists: committed; old segments all still there.
    Committed,
    /// Committed, and the first old segment's log deleted but not its indexes.
    OldPartlyDeleted,
    /// Old segments deleted, indexes renamed to their final names, the log still `.swap`.
    HalfFinished,
}

fn name(base: i64, ext: &str) -> String {
    format!("{base:020}.{ext}")
}

#[test]
fn given_a_crash_at_each_step_of_a_swap_when_reopening_then_log_is_valid_and_nothing_needed_is_lost(
) {
    for at in [
        CrashAt::Cleaned,
        CrashAt::HalfCommitted,
        CrashAt::Committed,
        CrashAt::OldPartlyDeleted,
        CrashAt::HalfFinished,
    ] {
        for reopen_point in [None, Some(0)] {
            crash_case(at, reopen_point);
        }
    }
}

fn crash_case(at: CrashAt, reopen_point: Option<i64>) {
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("t-0");
    let cfg = cleaner_config(60_000);
    let (model, end, group, replaced) = run(async {
        let log = open(dir.path(), small(), 0);
        let mut model = Model::new();
        for i in 0..300u32 {
            let key = format!("k{}", i % 17).into_bytes();
            let value = (i % 11 != 0).then(|| format!("v{i}").into_bytes());
            append(&log, &mut model, 1_000 + i as i64, &[(key, value)]).await;
        }
        // A first pass shrinks the segments, so that the second one merges them.
        let first = clean(&log, 0, &cfg, 2_000_000, &model).await;
        for i in 300..400u32 {
            let key = format!("k{}", i % 17).into_bytes();
            append(
                &log,
                &mut model,
                1_000 + i as i64,
                &[(key, Some(format!("v{i}").into_bytes()))],
            )
            .await;
        }
        let _ = first;
        let task = log
            .clean_task(0, &cfg, 2_000_000, ProducerState::default())
            .unwrap()
            .unwrap();
        let stop = AtomicBool::new(false);
        let out = task
            .run(None, &mut Throttle::new(f64::INFINITY, &stop))
            .unwrap();
        let group = out.group_bases()[0];
        // The first group's old segments: those before the second group's base.
        let second = out.group_bases().get(1).copied().unwrap_or(i64::MAX);
        let replaced: Vec<i64> = out
            .replaced_bases()
            .into_iter()
            .filter(|&b| b < second)
            .collect();
        let end = log.log_end_offset();
        log.close().await.unwrap();
        (model, end, group, replaced)
    });
    assert!(replaced.len() > 1, "the first group merges segments");
    let swap = storage::cleaner::swap::commit;
    match at {
        CrashAt::Cleaned => {}
        CrashAt::HalfCommitted => {
            for ext in ["index", "timeindex"] {
                std::fs::rename(
                    pdir.join(format!("{}.cleaned", name(group, ext))),
                    pdir.join(format!("{}.swap", name(group, ext))),
                )
                .unwrap();
            }
        }
        CrashAt::Committed => swap(&pdir, group).unwrap(),
        CrashAt::OldPartlyDeleted => {
            swap(&pdir, group).unwrap();
            std::fs::remove_file(pdir.join(name(replaced[0], "log"))).unwrap();
        }
        CrashAt::HalfFinished => {
            swap(&pdir, group).unwrap();
            for &b in &replaced {
                for ext in ["log", "index", "timeindex", "txnindex"] {
                    let _ = std::fs::remove_file(pdir.join(name(b, ext)));
                }
            }
            for ext in ["index", "timeindex"] {
                std::fs::rename(
                    pdir.join(format!("{}.swap", name(group, ext))),
                    pdir.join(name(group, ext)),
                )
                .unwrap();
            }
        }
    }
    run(async {
        let log = open(dir.path(), small(), reopen_point.unwrap_or(end));
        assert_eq!(log.log_end_offset(), end, "{at:?}: log end moved");
        let read = read_records(&log);
        check_against_model(&read, &model);
        // Every key's latest record is there (tombstones are young: horizon not passed).
        let mut latest: HashMap<&[u8], i64> = HashMap::new();
        for (o, (k, _)) in &model {
            latest.insert(k, *o);
        }
        let present: HashSet<i64> = read.iter().map(|r| r.0).collect();
        for (k, o) in latest {
            assert!(
                present.contains(&o),
                "{at:?}: latest of {:?} lost",
                String::from_utf8_lossy(k)
            );
        }
        let committed = !matches!(at, CrashAt::Cleaned | CrashAt::HalfCommitted);
        let bases = log.segment_base_offsets();
        for &b in &replaced[1..] {
            assert_eq!(
                bases.contains(&b),
                !committed,
                "{at:?}: segment {b} {} after reopen",
                if committed {
                    "survived a committed swap"
                } else {
                    "lost without a commit"
                }
            );
        }
        let leftovers: Vec<_> = std::fs::read_dir(&pdir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".swap") || n.ends_with(".cleaned"))
            .collect();
        assert!(leftovers.is_empty(), "{at:?}: {leftovers:?}");
        // And the log works on: append, clean again, reopen.
        let mut model = model.clone();
        append(
            &log,
            &mut model,
            5_000,
            &[(b"k1".to_vec(), Some(b"after".to_vec()))],
        )
        .await;
        log.close().await.unwrap();
        let log = open(dir.path(), small(), 0);
        check_against_model(&read_records(&log), &model);
    });
}
