//! PartitionLog behaviour through its public API, on the backend chosen by
//! `STROM_IO_BACKEND`.

mod common;

use std::rc::Rc;

use bytes::BytesMut;
use common::*;
use storage::{AppendOptions, Durability, LogConfig, StorageError};

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

#[test]
fn given_appends_when_reading_then_batches_come_back_with_assigned_offsets() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), LogConfig::default(), 0);
        let a = log
            .append(batch_n(10, 3, 10, b'a'), opts(Durability::None))
            .await
            .unwrap();
        let b = log
            .append(batch_n(20, 2, 10, b'b'), opts(Durability::Fsync))
            .await
            .unwrap();
        assert_eq!((a.base_offset, a.last_offset), (0, 2));
        assert_eq!((b.base_offset, b.last_offset), (3, 4));
        assert_eq!(log.log_end_offset(), 5);
        assert_eq!(log.written_end_offset(), 5);
        assert_eq!(log.durable_end_offset(), 5);
        let hs = read_all(&log, 0);
        assert_eq!(
            hs.iter().map(|h| h.base_offset).collect::<Vec<_>>(),
            vec![0, 3]
        );
        // Reading from inside a batch returns that whole batch.
        assert_eq!(read_all(&log, 4)[0].base_offset, 3);
        assert!(log.read(5, 1000, i64::MAX).unwrap().chunks.is_empty());
        assert!(matches!(
            log.read(6, 1000, i64::MAX),
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        // max_offset (high watermark) excludes batches reaching it.
        let r = log.read(0, usize::MAX, 3).unwrap();
        assert_eq!(
            storage::batch::validate_batches(&r.chunks[0])
                .unwrap()
                .len(),
            1
        );
    });
}

#[test]
fn given_calls_not_yet_polled_when_appending_then_offsets_follow_call_order() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), LogConfig::default(), 0);
        let f1 = log.append(batch_n(1, 2, 5, 1), opts(Durability::Fsync));
        let f2 = log.append(batch_n(1, 2, 5, 2), opts(Durability::Fsync));
        assert_eq!(log.log_end_offset(), 4);
        assert_eq!(f2.await.unwrap().base_offset, 2);
        assert_eq!(f1.await.unwrap().base_offset, 0);
    });
}

#[test]
fn given_max_bytes_smaller_than_first_batch_when_reading_then_first_batch_returned_whole() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), LogConfig::default(), 0);
        for _ in 0..3 {
            log.append(batch_n(1, 1, 500, b'x'), opts(Durability::None))
                .await
                .unwrap();
        }
        let r = log.read(0, 10, i64::MAX).unwrap();
        assert_eq!(r.chunks.len(), 1);
        assert_eq!(
            storage::batch::validate_batches(&r.chunks[0])
                .unwrap()
                .len(),
            1
        );
        let size = r.total_bytes;
        let r = log.read(0, size * 2, i64::MAX).unwrap();
        assert_eq!(r.total_bytes, size * 2);
    });
}

#[test]
fn given_many_durable_appends_in_flight_when_awaited_then_they_share_fdatasyncs() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = Rc::new(open(dir.path(), LogConfig::default(), 0));
        let before = log.io_backend().sync_count();
        let mut tasks = Vec::new();
        for i in 0..64u8 {
            let fut = log.append(batch_n(1, 1, 100, i), opts(Durability::Fsync));
            tasks.push(tokio::task::spawn_local(fut));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        let syncs = log.io_backend().sync_count() - before;
        assert!(syncs >= 1);
        assert!(
            syncs < 32,
            "64 concurrent durable appends used {syncs} fdatasyncs"
        );
        assert_eq!(log.durable_end_offset(), 64);
    });
}

#[test]
fn given_small_segment_bytes_when_appending_then_rolls_and_reads_span_segments() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), small_segments(), 0);
        for i in 0..40 {
            log.append(batch_n(i, 2, 200, i as u8), opts(Durability::None))
                .await
                .unwrap();
        }
        let segs = log.segment_base_offsets();
        assert!(segs.len() > 3, "{segs:?}");
        let hs = read_all(&log, 0);
        assert_eq!(hs.len(), 40);
        for (i, h) in hs.iter().enumerate() {
            assert_eq!(h.base_offset, 2 * i as i64);
        }
        // Every segment file is named by its base offset and starts with it.
        for base in segs {
            let name = format!("{base:020}.log");
            assert!(log.dir().join(&name).exists(), "{name}");
            assert_eq!(read_all(&log, base)[0].base_offset, base);
        }
    });
}

#[test]
fn given_clean_close_when_reopening_at_log_end_then_everything_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let end = run(async {
        let log = open(dir.path(), small_segments(), 0);
        for i in 0..30 {
            log.append(batch_n(1000 + i, 3, 100, 7), opts(Durability::None))
                .await
                .unwrap();
        }
        let end = log.log_end_offset();
        log.close().await.unwrap();
        end
    });
    run(async {
        let log = open(dir.path(), small_segments(), end);
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(read_all(&log, 0).len(), 30);
        // Batch 8 holds timestamps 1008..=1010 at offsets 24..=26.
        assert_eq!(log.offset_for_timestamp(1010).unwrap(), Some((26, 1010)));
        let r = log
            .append(batch_n(5000, 1, 1, 1), opts(Durability::Fsync))
            .await
            .unwrap();
        assert_eq!(r.base_offset, end);
    });
}

#[test]
fn given_timestamps_when_looking_up_then_first_record_at_or_after_is_found() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), small_segments(), 0);
        // Batch i holds records with timestamps 100*i .. 100*i+4.
        for i in 0..20 {
            log.append(batch_n(100 * i, 5, 50, 0), opts(Durability::None))
                .await
                .unwrap();
        }
        assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((0, 0)));
        assert_eq!(log.offset_for_timestamp(502).unwrap(), Some((27, 502)));
        assert_eq!(log.offset_for_timestamp(505).unwrap(), Some((30, 600)));
        assert_eq!(log.offset_for_timestamp(1904).unwrap(), Some((99, 1904)));
        assert_eq!(log.offset_for_timestamp(1905).unwrap(), None);
        assert_eq!(log.max_timestamp(), Some((99, 1904)));
    });
}

#[test]
fn given_log_append_time_when_appending_then_max_timestamp_rewritten_and_crc_valid() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), LogConfig::default(), 0);
        let o = AppendOptions {
            durability: Durability::None,
            log_append_time_ms: Some(777),
            leader_epoch: 5,
        };
        let r = log.append(batch_n(1, 2, 3, 0), o).await.unwrap();
        assert_eq!(r.log_append_time_ms, 777);
        let h = read_all(&log, 0)[0];
        assert!(h.timestamp_type_log_append());
        assert_eq!((h.max_timestamp, h.partition_leader_epoch), (777, 5));
    });
}

#[test]
fn given_truncate_to_when_reading_then_later_offsets_gone_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), small_segments(), 0);
        for i in 0..30 {
            log.append(batch_n(i, 2, 200, 0), opts(Durability::None))
                .await
                .unwrap();
        }
        log.truncate_to(21).unwrap(); // inside batch [20, 21]: the whole batch goes
        assert_eq!(log.log_end_offset(), 20);
        assert_eq!(read_all(&log, 0).len(), 10);
        let r = log
            .append(batch_n(1, 1, 10, 9), opts(Durability::Fsync))
            .await
            .unwrap();
        assert_eq!(r.base_offset, 20);
        assert_eq!(read_all(&log, 0).len(), 11);
        log.truncate_to(0).unwrap();
        assert_eq!(log.log_end_offset(), 0);
        assert!(read_all(&log, 0).is_empty());
    });
}

#[test]
fn given_log_behind_a_new_start_when_truncating_fully_then_it_restarts_empty_there_and_reopens_so()
{
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), small_segments(), 0);
        for i in 0..30 {
            log.append(batch_n(i, 2, 200, 0), opts(Durability::Fsync))
                .await
                .unwrap();
        }
        assert!(log.segment_base_offsets().len() > 1);
        log.truncate_fully_and_start_at(100).unwrap();
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 100));
        assert_eq!(log.segment_base_offsets(), vec![100]);
        assert!(read_all(&log, 100).is_empty());
        assert!(matches!(
            log.read(40, 1000, i64::MAX),
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        let r = log
            .append(batch_n(1, 3, 10, 9), opts(Durability::Fsync))
            .await
            .unwrap();
        assert_eq!(r.base_offset, 100);
        // Again at the base of the one segment there is: it is emptied in place.
        log.truncate_fully_and_start_at(100).unwrap();
        assert_eq!(log.log_end_offset(), 100);
        drop(log);
        let log = open(dir.path(), small_segments(), 0);
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 100));
    });
}

#[test]
fn given_reader_holding_bytes_when_segment_truncated_or_deleted_then_bytes_stay_valid() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), small_segments(), 0);
        for i in 0..30 {
            log.append(batch_n(i, 2, 200, i as u8), opts(Durability::None))
                .await
                .unwrap();
        }
        let held = log.read(0, usize::MAX, i64::MAX).unwrap();
        let copy: Vec<Vec<u8>> = held.chunks.iter().map(|c| c.to_vec()).collect();
        log.truncate_to(41).unwrap();
        log.advance_log_start(20).unwrap();
        // Touch every byte: on a shrunk mapping this would SIGBUS.
        for (c, want) in held.chunks.iter().zip(&copy) {
            assert_eq!(&c[..], &want[..]);
        }
        let after = read_all(&log, 20);
        assert_eq!(after.first().unwrap().base_offset, 20);
        assert_eq!(after.last().unwrap().last_offset(), 39);
    });
}

#[test]
fn given_advance_log_start_when_reading_below_then_out_of_range_and_old_segments_deleted() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), small_segments(), 0);
        for i in 0..40 {
            log.append(batch_n(i, 2, 200, 0), opts(Durability::None))
                .await
                .unwrap();
        }
        let before = log.segment_base_offsets();
        log.advance_log_start(50).unwrap();
        assert_eq!(log.log_start_offset(), 50);
        let after = log.segment_base_offsets();
        assert!(after.len() < before.len());
        assert!(after[0] <= 50);
        assert!(matches!(
            log.read(49, 100, i64::MAX),
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        assert_eq!(read_all(&log, 50)[0].base_offset, 50);
        // Up to the end: only an empty active segment remains.
        log.advance_log_start(80).unwrap();
        assert_eq!(log.segment_base_offsets(), vec![80]);
        assert!(log.read(80, 100, i64::MAX).unwrap().chunks.is_empty());
        assert!(log.advance_log_start(81).is_err());
    });
}

#[test]
fn given_headers_requested_when_reading_from_offset_then_all_later_batches_listed() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), small_segments(), 0);
        for i in 0..10 {
            log.append(batch_n(i, 2, 300, 0), opts(Durability::None))
                .await
                .unwrap();
        }
        let hs = log.batch_headers_from(5).unwrap();
        assert_eq!(hs.first().unwrap().base_offset, 4);
        assert_eq!(hs.len(), 8);
        assert!(log.size_bytes() > 3000);
    });
}

#[test]
fn given_log_when_deleted_then_dir_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), LogConfig::default(), 0);
        log.append(batch_n(1, 1, 1, 0), opts(Durability::Fsync))
            .await
            .unwrap();
        let d = log.dir().to_path_buf();
        log.delete().unwrap();
        // Gone for the broker at once (renamed); its files are removed off the caller's
        // thread, shortly after.
        assert!(!d.exists());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::fs::read_dir(dir.path()).unwrap().next().is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "the renamed dir stayed"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    });
}

#[test]
fn given_delete_dirs_left_by_a_crash_when_sweeping_then_only_they_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    for d in ["t-0.00ff-delete", "t-1.abcd-delete", "t-2"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
        std::fs::write(dir.path().join(d).join("00000000000000000000.log"), b"x").unwrap();
    }
    assert_eq!(storage::logdir::sweep_deleted_dirs(dir.path()), 2);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        if left == ["t-2"] {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "left: {left:?}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn given_unvalidatable_buffer_when_appending_then_rejected_without_assigning_offsets() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), LogConfig::default(), 0);
        let mut b = batch_n(1, 1, 1, 0);
        b.truncate(30);
        assert!(log.append(b, opts(Durability::None)).await.is_err());
        assert!(log
            .append(BytesMut::new(), opts(Durability::None))
            .await
            .is_err());
        assert_eq!(log.log_end_offset(), 0);
    });
}

#[test]
fn given_roll_when_durable_append_lands_in_new_segment_then_dir_fsynced_before_ack() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), small_segments(), 0);
        log.append(batch_n(1, 4, 900, b'a'), opts(Durability::Fsync))
            .await
            .unwrap();
        let io = log.io_backend().clone();
        let before = io.dir_sync_count();
        let segs = log.segment_base_offsets().len();
        // Too big for the first segment: rolls, then must not be acked before the new
        // segment's directory entry is durable.
        log.append(batch_n(2, 4, 900, b'b'), opts(Durability::Fsync))
            .await
            .unwrap();
        assert_eq!(log.segment_base_offsets().len(), segs + 1);
        assert!(io.dir_sync_count() > before);
        // A durable append into an existing segment needs no dir fsync.
        let before = io.dir_sync_count();
        log.append(batch_n(3, 1, 10, b'c'), opts(Durability::Fsync))
            .await
            .unwrap();
        assert_eq!(io.dir_sync_count(), before);
    });
}

#[test]
fn given_segments_unlinked_when_truncating_or_advancing_start_then_dir_fsynced() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), small_segments(), 0);
        for i in 0..12 {
            log.append(batch_n(i, 2, 500, b'x'), opts(Durability::None))
                .await
                .unwrap();
        }
        assert!(log.segment_base_offsets().len() >= 4);
        let io = log.io_backend().clone();
        let before = io.dir_sync_count();
        log.truncate_to(log.segment_base_offsets()[2]).unwrap();
        assert!(io.dir_sync_count() > before);
        let before = io.dir_sync_count();
        log.advance_log_start(log.segment_base_offsets()[1])
            .unwrap();
        assert!(io.dir_sync_count() > before);
    });
}

#[test]
fn given_truncation_while_durable_append_syncs_when_sync_completes_then_durable_end_not_raised_past_cut(
) {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = Rc::new(open(dir.path(), LogConfig::default(), 0));
        log.append(batch_n(1, 10, 10, b'a'), opts(Durability::None))
            .await
            .unwrap();
        // Offset 10, durable: its sync starts when the task is first polled.
        let f = log.append(batch_n(2, 1, 10, b'b'), opts(Durability::Fsync));
        let task = tokio::task::spawn_local(f);
        // Bounded by time, not tries: on a loaded machine io_uring may take a while.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut done_before_cut = false;
        loop {
            tokio::task::yield_now().await;
            done_before_cut = done_before_cut || task.is_finished();
            match log.truncate_to(5) {
                Ok(()) => break,
                Err(StorageError::WritesInFlight { .. }) => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "write never completed"
                    )
                }
                Err(e) => panic!("{e}"),
            }
        }
        // Offsets 5.. again, now other bytes, not durable.
        log.append(batch_n(3, 2, 10, b'c'), opts(Durability::None))
            .await
            .unwrap();
        let r = tokio::time::timeout(std::time::Duration::from_secs(10), task)
            .await
            .expect("the truncated durable append must not hang")
            .unwrap();
        // An append still waiting for its fdatasync when its offset was cut is not
        // durable; only one that had completed before the cut may have succeeded.
        assert!(
            matches!(r, Err(StorageError::Truncated { .. })) || (r.is_ok() && done_before_cut),
            "{r:?}"
        );
        assert!(
            log.durable_end_offset() <= 5,
            "{}",
            log.durable_end_offset()
        );
        // A durable append covering the new bytes really syncs them.
        let before = log.io_backend().sync_count();
        log.append(batch_n(4, 1, 10, b'd'), opts(Durability::Fsync))
            .await
            .unwrap();
        assert!(log.io_backend().sync_count() > before);
        assert_eq!(log.durable_end_offset(), log.log_end_offset());
    });
}

#[test]
fn given_reader_holding_bytes_across_a_remap_when_truncated_then_bytes_stay_readable() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        index_interval_bytes: 256,
        ..LogConfig::default()
    };
    let end = run(async {
        let log = open(dir.path(), cfg.clone(), 0);
        for i in 0..12 {
            log.append(batch_n(i, 1, 1000, b'a'), opts(Durability::None))
                .await
                .unwrap();
        }
        let end = log.log_end_offset();
        log.close().await.unwrap();
        end
    });
    run(async {
        // Open maps the segment at its size; this read holds that first mapping.
        let log = open(dir.path(), cfg, end);
        let held = log.read(0, usize::MAX, i64::MAX).unwrap();
        // Growing past it remaps; the new mapping is dropped again at once.
        log.append(batch_n(99, 1, 1000, b'b'), opts(Durability::None))
            .await
            .unwrap();
        drop(log.read(end, usize::MAX, i64::MAX).unwrap());
        log.truncate_to(1).unwrap();
        // Touching every page of the held bytes must not SIGBUS.
        let sum: u64 = held
            .chunks
            .iter()
            .flat_map(|c| c.iter())
            .map(|&b| b as u64)
            .sum();
        assert!(sum > 0);
        assert_eq!(log.log_end_offset(), 1);
    });
}

#[test]
fn given_segment_bytes_past_i32_max_when_opening_then_invalid_config() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 1 << 32,
        ..LogConfig::default()
    };
    let r = run(async {
        storage::PartitionLog::open(dir.path(), "t", 0, cfg, backend(), 0).map(|_| ())
    });
    assert!(matches!(r, Err(StorageError::Invalid { .. })), "{r:?}");
}

#[test]
fn given_aborted_txns_when_truncating_below_marker_then_entry_gone_after_reopen() {
    use storage::txn_index::AbortedTxn;
    let dir = tempfile::tempdir().unwrap();
    let txn = |first, last| AbortedTxn {
        producer_id: 7,
        first_offset: first,
        last_offset: last,
        last_stable_offset: last + 1,
    };
    let end = run(async {
        let log = open(dir.path(), small_segments(), 0);
        for i in 0..12 {
            log.append(batch_n(i, 2, 500, b'x'), opts(Durability::None))
                .await
                .unwrap();
        }
        assert!(log.segment_base_offsets().len() >= 3);
        log.append_aborted_txn(txn(0, 3)).unwrap();
        log.append_aborted_txn(txn(10, 13)).unwrap();
        log.append_aborted_txn(txn(18, 21)).unwrap();
        assert!(log.append_aborted_txn(txn(1, 2)).is_err(), "out of order");
        assert!(log.append_aborted_txn(txn(30, 99)).is_err(), "past the end");
        assert_eq!(
            log.collect_aborted_txns(4, 20),
            vec![txn(10, 13), txn(18, 21)]
        );
        log.truncate_to(20).unwrap();
        assert_eq!(
            log.collect_aborted_txns(0, 100),
            vec![txn(0, 3), txn(10, 13)]
        );
        let end = log.log_end_offset();
        log.close().await.unwrap();
        end
    });
    run(async {
        let log = open(dir.path(), small_segments(), end);
        assert_eq!(
            log.collect_aborted_txns(0, 100),
            vec![txn(0, 3), txn(10, 13)]
        );
    });
}

/// A transaction that started below the LSO may have its abort marker in a segment past
/// it (another producer's open transaction holds the LSO back): a read_committed fetch
/// up to the LSO still needs it, as Kafka's `collectAbortedTransactions` finds it.
#[test]
fn given_abort_marker_in_a_segment_past_the_upper_bound_when_collecting_then_found() {
    use storage::txn_index::AbortedTxn;
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), small_segments(), 0);
        for i in 0..12 {
            log.append(batch_n(i, 2, 500, b'x'), opts(Durability::None))
                .await
                .unwrap();
        }
        let txn = AbortedTxn {
            producer_id: 7,
            first_offset: 1,
            last_offset: 21,
            last_stable_offset: 4,
        };
        log.append_aborted_txn(txn).unwrap();
        let upper = 4;
        assert!(
            log.segment_base_offsets()
                .iter()
                .any(|&b| b > upper && b <= 21),
            "the marker's segment starts past the upper bound"
        );
        assert_eq!(log.collect_aborted_txns(0, upper), vec![txn]);
        assert_eq!(log.collect_aborted_txns(22, 30), vec![]);
    });
}

#[test]
fn given_new_segment_cannot_be_created_when_truncating_below_first_segment_then_log_keeps_a_segment_and_fails(
) {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), small_segments(), 0);
        for i in 0..40 {
            log.append(batch_n(i, 2, 200, 0), opts(Durability::None))
                .await
                .unwrap();
        }
        log.advance_log_start(50).unwrap();
        let first = log.segment_base_offsets()[0];
        assert!(first > 10);
        // A directory where the fresh segment's file must go: creating it fails.
        std::fs::create_dir(log.dir().join(format!("{:020}.log", 10))).unwrap();
        assert!(log.truncate_to(10).is_err());
        assert!(!log.segment_base_offsets().is_empty());
        // The log is failed, not broken: operations answer LogFailed, none panics.
        let r = log
            .append(batch_n(0, 1, 10, 0), opts(Durability::None))
            .await;
        assert!(matches!(r, Err(StorageError::LogFailed { .. })), "{r:?}");
        assert!(matches!(
            log.read(log.log_start_offset(), 100, i64::MAX),
            Err(StorageError::LogFailed { .. })
        ));
    });
}

#[test]
fn given_timestamp_match_below_log_start_when_looking_up_then_moves_to_next_batch() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = open(dir.path(), LogConfig::default(), 0);
        // Offsets 0..3 with timestamps 1050, 1001, 1002: only the record below the log
        // start (after advancing it to 1) reaches 1040.
        let mut b = batch(1000, &[b"a", b"b", b"c"]);
        assert_eq!(b[63], 0, "first record's timestamp delta");
        b[63] = 100; // zigzag varint of 50, same length
        b[35..43].copy_from_slice(&1050i64.to_be_bytes());
        let crc = storage::batch::compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        log.append(BytesMut::from(&b[..]), opts(Durability::None))
            .await
            .unwrap();
        log.append(
            BytesMut::from(&batch(2000, &[b"d"])[..]),
            opts(Durability::None),
        )
        .await
        .unwrap();
        log.advance_log_start(1).unwrap();
        assert_eq!(log.offset_for_timestamp(1040).unwrap(), Some((3, 2000)));
        assert_eq!(log.offset_for_timestamp(1002).unwrap(), Some((2, 1002)));
    });
}
