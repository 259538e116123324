//! A disk that fills mid-append: the append that hit it is never acknowledged, the log
//! refuses further work and says why to the backend's failure listener, and reopening the
//! files (what a restart does once space is freed) keeps every acknowledged batch, valid,
//! and nothing of the torn one.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use bytes::BytesMut;

use crate::batch::tests::build_batch;
use crate::batch::validate_batches;
use crate::test_support::{fsync, run};
use crate::{IoBackend, IoBackendKind, LogConfig, PartitionLog, StorageError};

fn batch(i: usize) -> BytesMut {
    let value = vec![b'a' + (i % 26) as u8; 300];
    BytesMut::from(&build_batch(1000 + i as i64, &[&value, &value])[..])
}

/// (disk_full, log_failed) of every failure the listener heard.
type Heard = Rc<RefCell<Vec<(bool, bool)>>>;

fn backend() -> (Rc<IoBackend>, Heard) {
    let io = IoBackend::new(IoBackendKind::Sync).unwrap();
    let heard: Heard = Rc::default();
    let h = heard.clone();
    io.on_failure(move |f| h.borrow_mut().push((f.disk_full, f.log_failed)));
    (io, heard)
}

/// Appends `n` batches durably, then lets the disk take only half of the next one.
async fn fill_mid_batch(dir: &Path, n: usize) -> (PartitionLog, Heard) {
    let (io, heard) = backend();
    let log = PartitionLog::open(dir, "t", 0, LogConfig::default(), io.clone(), 0).unwrap();
    for i in 0..n {
        log.append(batch(i), fsync()).await.unwrap();
    }
    io.space_left.set(Some(batch(n).len() as u64 / 2));
    (log, heard)
}

fn read_all(log: &PartitionLog) -> Vec<u8> {
    let r = log.read(0, 1 << 24, i64::MAX).unwrap();
    r.chunks.iter().flat_map(|c| c.iter().copied()).collect()
}

#[test]
fn given_disk_fills_mid_batch_when_appending_then_not_acknowledged_and_log_refuses_work() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (log, heard) = fill_mid_batch(dir.path(), 5).await;
        let r = log.append(batch(5), fsync()).await;
        assert!(matches!(r, Err(StorageError::LogFailed { .. })), "{r:?}");
        assert_eq!(
            *heard.borrow(),
            vec![(true, true)],
            "one report, a full disk"
        );
        // Offline until reopened: nothing is written or served from an unknown state.
        let again = log.append(batch(6), fsync()).await;
        assert!(
            matches!(again, Err(StorageError::LogFailed { .. })),
            "{again:?}"
        );
        let read = log.read(0, 1 << 20, i64::MAX);
        assert!(
            matches!(read, Err(StorageError::LogFailed { .. })),
            "{read:?}"
        );
        assert_eq!(heard.borrow().len(), 1, "refusals are not new failures");
    });
}

#[test]
fn given_torn_batch_from_a_full_disk_when_reopening_then_acknowledged_batches_stay_and_torn_one_goes(
) {
    for recovery_point in [0, 5 * 2] {
        let dir = tempfile::tempdir().unwrap();
        run(async {
            let (log, _) = fill_mid_batch(dir.path(), 5).await;
            let acked_bytes = read_all(&log);
            assert!(log.append(batch(5), fsync()).await.is_err());
            drop(log);
            let seg = dir.path().join("t-0").join(format!("{:020}.log", 0));
            let on_disk = std::fs::metadata(&seg).unwrap().len() as usize;
            assert!(on_disk > acked_bytes.len(), "half a batch landed");

            // Space freed, the broker restarted.
            let (io, heard) = backend();
            let log =
                PartitionLog::open(dir.path(), "t", 0, LogConfig::default(), io, recovery_point)
                    .unwrap();
            assert_eq!(log.log_end_offset(), 10, "recovery point {recovery_point}");
            let served = read_all(&log);
            assert_eq!(served, acked_bytes, "recovery point {recovery_point}");
            let headers = validate_batches(&served).expect("every served batch is whole and valid");
            assert_eq!(headers.len(), 5);
            let r = log.append(batch(7), fsync()).await.unwrap();
            assert_eq!(
                r.base_offset, 10,
                "appends go on after the last acknowledged batch"
            );
            assert!(heard.borrow().is_empty());
        });
    }
}

#[test]
fn given_fdatasync_fails_with_enospc_when_appending_durably_then_not_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (io, heard) = backend();
        let log =
            PartitionLog::open(dir.path(), "t", 0, LogConfig::default(), io.clone(), 0).unwrap();
        log.append(batch(0), fsync()).await.unwrap();
        io.inject_sync_errno.set(libc::ENOSPC);
        let r = log.append(batch(1), fsync()).await;
        assert!(matches!(r, Err(StorageError::LogFailed { .. })), "{r:?}");
        assert_eq!(
            log.durable_end_offset(),
            2,
            "the failed sync made nothing durable"
        );
        assert_eq!(*heard.borrow(), vec![(true, true)]);
    });
}

#[test]
fn given_an_io_error_that_is_not_enospc_when_reported_then_not_called_disk_full() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let (io, heard) = backend();
        let log =
            PartitionLog::open(dir.path(), "t", 0, LogConfig::default(), io.clone(), 0).unwrap();
        io.inject_sync_errno.set(libc::EIO);
        assert!(log.append(batch(0), fsync()).await.is_err());
        assert_eq!(*heard.borrow(), vec![(false, true)]);
    });
}
