//! Zero-copy append: the log writes the caller's `Bytes` as received, with only the
//! rewritten header bytes from a buffer of its own. What lands in the segment file must be
//! byte for byte what the old path wrote (a copy of the batches, patched in place), on both
//! I/O backends, and the copy counters must say what was copied.

mod common;

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use storage::batch;
use storage::io::CopyStatsSnapshot;
use storage::{AppendOptions, Durability, IoBackend, IoBackendKind, LogConfig, PartitionLog};

const BACKENDS: [IoBackendKind; 2] = [IoBackendKind::Sync, IoBackendKind::Uring];

/// The backend of `kind`, made inside the runtime that drives it; None (with a line on
/// stderr) where the kernel has no io_uring.
fn backend(kind: IoBackendKind) -> Option<Rc<IoBackend>> {
    match IoBackend::new(kind) {
        Ok(io) => Some(io),
        Err(e) => {
            eprintln!("{kind:?} backend unavailable here ({e}); not tested");
            None
        }
    }
}

/// One call to `append` (or `append_at_offsets` when `preserve`).
#[derive(Clone, Debug)]
struct Call {
    /// (timestamp, record count, value length) per batch.
    batches: Vec<(i64, usize, usize)>,
    epoch: i32,
    log_append_time: Option<i64>,
    durability: Durability,
}

fn encode(call: &Call, tag: u8) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, &(ts, n, len)) in call.batches.iter().enumerate() {
        let b = common::batch_n(ts, n, len, tag.wrapping_add(i as u8));
        out.extend_from_slice(&b);
    }
    out
}

/// The old path: a copy of the batches, every field the log sets patched in place.
fn patched_copy(bytes: &[u8], mut next: i64, epoch: i32, lat: Option<i64>) -> (Vec<u8>, i64) {
    let mut copy = bytes.to_vec();
    let mut at = 0;
    while at < copy.len() {
        let h = batch::frame(&copy[at..]).unwrap();
        let b = &mut copy[at..at + h.total_size()];
        batch::set_base_offset(b, next);
        batch::set_partition_leader_epoch(b, epoch);
        if let Some(t) = lat {
            batch::set_log_append_time(b, t);
        }
        next += h.last_offset_delta as i64 + 1;
        at += h.total_size();
    }
    (copy, next)
}

/// Every `.log` file of the partition, concatenated in offset order.
fn file_bytes(dir: &std::path::Path) -> Vec<u8> {
    let mut names: Vec<_> = std::fs::read_dir(dir.join("t-0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    names.sort();
    names
        .iter()
        .flat_map(|p| std::fs::read(p).unwrap())
        .collect()
}

/// What one run wrote: the segment files, the old path's bytes, the copy counters.
struct Outcome {
    file: Vec<u8>,
    expected: Vec<u8>,
    copies: CopyStatsSnapshot,
    segments: usize,
}

/// Runs `calls` against a fresh log on a backend of `kind` (None: not available).
fn run_calls(kind: IoBackendKind, cfg: LogConfig, calls: &[Call]) -> Option<Outcome> {
    let dir = tempfile::tempdir().unwrap();
    common::run(async {
        let io = backend(kind)?;
        let log = PartitionLog::open(dir.path(), "t", 0, cfg, io.clone(), 0).unwrap();
        let mut expected = Vec::new();
        let mut next = 0;
        let mut pending = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            let sent = Bytes::from(encode(call, i as u8));
            let (want, end) = patched_copy(&sent, next, call.epoch, call.log_append_time);
            expected.extend_from_slice(&want);
            next = end;
            let opts = AppendOptions {
                durability: call.durability,
                log_append_time_ms: call.log_append_time,
                leader_epoch: call.epoch,
            };
            pending.push(log.append(sent.clone(), opts));
            // The caller's buffer is the producer's: the log never writes into it.
            assert_eq!(&sent[..], &encode(call, i as u8)[..]);
        }
        for p in pending {
            p.await.unwrap();
        }
        // What a reader gets is what the file holds.
        let read = log.read(0, usize::MAX, i64::MAX).unwrap();
        let got: Vec<u8> = read.chunks.iter().flat_map(|c| c.iter().copied()).collect();
        assert_eq!(
            got, expected,
            "{kind:?}: read bytes differ from the patched copy"
        );
        Some(Outcome {
            file: file_bytes(dir.path()),
            expected,
            copies: io.copy_stats(),
            segments: log.segment_base_offsets().len(),
        })
    })
}

fn call(batches: Vec<(i64, usize, usize)>, epoch: i32, lat: Option<i64>) -> Call {
    Call {
        batches,
        epoch,
        log_append_time: lat,
        durability: Durability::None,
    }
}

#[test]
fn given_uncompressed_appends_when_written_then_file_matches_patched_copy_and_nothing_copied() {
    for kind in BACKENDS {
        let calls = vec![
            call(vec![(1_000, 3, 100)], 0, None),
            call(vec![(2_000, 1, 5), (2_001, 7, 300), (2_002, 2, 0)], 4, None),
            Call {
                durability: Durability::Fsync,
                ..call(vec![(3_000, 50, 1_000)], 4, None)
            },
        ];
        let Some(Outcome {
            file,
            expected,
            copies,
            ..
        }) = run_calls(kind, LogConfig::default(), &calls)
        else {
            continue;
        };
        assert_eq!(file, expected, "{kind:?} backend");
        assert_eq!(copies.appended_bytes, expected.len() as u64);
        assert_eq!(copies.append_copied_bytes, 0, "no record byte copied");
        assert_eq!(
            copies.append_header_bytes,
            5 * 16,
            "16 header bytes per batch"
        );
        assert_eq!(copies.read_bytes, expected.len() as u64);
    }
}

#[test]
fn given_log_append_time_when_written_then_batches_copied_with_new_crc() {
    for kind in BACKENDS {
        let calls = vec![
            call(vec![(1_000, 3, 100), (1_001, 2, 10)], 0, Some(77_000)),
            call(vec![(1_500, 1, 1)], 0, None),
        ];
        let Some(Outcome {
            file,
            expected,
            copies,
            ..
        }) = run_calls(kind, LogConfig::default(), &calls)
        else {
            continue;
        };
        assert_eq!(file, expected, "{kind:?} backend");
        let lat_bytes = encode(&calls[0], 0).len() as u64;
        assert_eq!(copies.append_copied_bytes, lat_bytes);
        assert_eq!(copies.append_header_bytes, 16);
        for h in batch::validate_batches(&file).unwrap().iter().take(2) {
            assert_eq!(h.max_timestamp, 77_000);
            assert!(h.timestamp_type_log_append());
        }
    }
}

#[test]
fn given_more_batches_than_one_vectored_write_takes_when_appended_then_all_written_in_order() {
    // 700 batches make 1400 chunks: more than the 1024 iovecs one call accepts, so the
    // write goes out in pieces (as a short write would).
    for kind in BACKENDS {
        let batches: Vec<_> = (0..700).map(|i| (i as i64, 1, i % 40)).collect();
        let calls = vec![call(batches, 2, None), call(vec![(9, 2, 2)], 2, None)];
        if let Some(o) = run_calls(kind, LogConfig::default(), &calls) {
            assert_eq!(o.file, o.expected, "{kind:?} backend");
        }
    }
}

#[test]
fn given_small_segments_when_appends_roll_then_files_still_match_patched_copy() {
    let cfg = LogConfig {
        segment_bytes: 2_000,
        index_interval_bytes: 300,
        ..LogConfig::default()
    };
    for kind in BACKENDS {
        let calls: Vec<_> = (0..30)
            .map(|i| {
                call(
                    vec![(i * 10, 1 + i as usize % 4, 50 + i as usize * 7)],
                    1,
                    None,
                )
            })
            .collect();
        if let Some(o) = run_calls(kind, cfg.clone(), &calls) {
            assert_eq!(o.file, o.expected, "{kind:?} backend");
            assert!(
                o.segments > 3,
                "the appends rolled: {} segments",
                o.segments
            );
        }
    }
}

#[test]
fn given_offset_preserving_append_at_same_epoch_when_written_then_no_header_rewritten() {
    for kind in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        common::run(async {
            let Some(io) = backend(kind) else { return };
            let before = io.copy_stats();
            let log = PartitionLog::open(dir.path(), "t", 0, LogConfig::default(), io.clone(), 0)
                .unwrap();
            // Two batches at 10 and 20 with leader epoch 3, as another log stored them.
            let mut src = Vec::new();
            for (base, tag) in [(10i64, 1u8), (20, 2)] {
                let mut b = common::batch_n(5, 3, 20, tag);
                batch::set_base_offset(&mut b, base);
                batch::set_partition_leader_epoch(&mut b, 3);
                src.extend_from_slice(&b);
            }
            let src = Bytes::from(src);
            log.append_at_offsets(src.clone(), Durability::Fsync, 3)
                .await
                .unwrap();
            let after = io.copy_stats();
            assert_eq!(after.append_header_bytes - before.append_header_bytes, 0);
            assert_eq!(after.append_copied_bytes - before.append_copied_bytes, 0);
            // A different epoch rewrites only the epoch, in the 16-byte prefix.
            let mut next = common::batch_n(6, 1, 4, 9);
            batch::set_base_offset(&mut next, 30);
            let next = next.freeze();
            log.append_at_offsets(next.clone(), Durability::Fsync, 4)
                .await
                .unwrap();
            let mut want = BytesMut::from(&next[..]);
            batch::set_partition_leader_epoch(&mut want, 4);
            let file = file_bytes(dir.path());
            assert_eq!(&file[..src.len()], &src[..]);
            assert_eq!(&file[src.len()..], &want[..]);
            let after = io.copy_stats();
            assert_eq!(after.append_header_bytes - before.append_header_bytes, 16);
        });
    }
}

fn arb_call() -> impl Strategy<Value = Call> {
    (
        proptest::collection::vec((0i64..10_000, 1usize..6, 0usize..400), 1..5),
        0i32..3,
        proptest::option::weighted(0.2, 1i64..1 << 40),
        any::<bool>(),
    )
        .prop_map(|(batches, epoch, lat, fsync)| Call {
            batches,
            epoch,
            log_append_time: lat,
            durability: if fsync {
                Durability::Fsync
            } else {
                Durability::None
            },
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn given_random_appends_when_written_then_every_backend_matches_the_patched_copy(
        calls in proptest::collection::vec(arb_call(), 1..12),
        segment_bytes in 1_000u64..20_000,
    ) {
        let cfg = LogConfig { segment_bytes, index_interval_bytes: 500, ..LogConfig::default() };
        for kind in BACKENDS {
            let Some(o) = run_calls(kind, cfg.clone(), &calls) else { continue };
            prop_assert_eq!(&o.file, &o.expected);
            let lat: u64 = calls
                .iter()
                .enumerate()
                .filter(|(_, c)| c.log_append_time.is_some())
                .map(|(i, c)| encode(c, i as u8).len() as u64)
                .sum();
            prop_assert_eq!(o.copies.append_copied_bytes, lat);
        }
    }
}
