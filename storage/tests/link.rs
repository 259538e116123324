//! `logdir::link_segments`: segments of another Kafka log adopted by hard link keep their
//! inode with the other names, the log serves them with its own indexes, and nothing the
//! log does afterwards (appends, truncation, retention) changes the other names' bytes.

mod common;

use std::os::unix::fs::MetadataExt;

use common::*;
use storage::{Durability, LogConfig};

#[test]
fn given_linked_segments_when_appending_and_truncating_then_the_other_names_keep_their_bytes() {
    let kafka = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    };
    // A "Kafka" log with several closed segments.
    let (bases, end) = run(async {
        let log = open(kafka.path(), cfg.clone(), 0);
        for i in 0..40 {
            log.append(batch_n(i, 3, 200, i as u8), opts(Durability::None))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        (log.segment_base_offsets(), log.log_end_offset())
    });
    assert!(bases.len() >= 3, "{bases:?}");
    let src = kafka.path().join("t-0");
    let closed: Vec<(i64, std::path::PathBuf)> = bases[..bases.len() - 1]
        .iter()
        .map(|b| (*b, src.join(format!("{b:020}.log"))))
        .collect();
    let linked_end = bases[bases.len() - 1];
    let before: Vec<Vec<u8>> = closed
        .iter()
        .map(|(_, p)| std::fs::read(p).unwrap())
        .collect();
    storage::logdir::link_segments(data.path(), "t", 0, &closed, linked_end).unwrap();
    // A second adoption into the same partition is refused.
    assert!(storage::logdir::link_segments(data.path(), "t", 0, &closed, linked_end).is_err());
    let dst = data.path().join("t-0");
    for (b, p) in &closed {
        let (a, l) = (
            std::fs::metadata(p).unwrap(),
            std::fs::metadata(dst.join(format!("{b:020}.log"))).unwrap(),
        );
        assert_eq!((a.ino(), a.dev()), (l.ino(), l.dev()));
        assert_eq!(a.nlink(), 2);
    }
    run(async {
        let log = open(data.path(), cfg.clone(), linked_end);
        assert_eq!(log.log_start_offset(), 0);
        assert_eq!(log.log_end_offset(), linked_end);
        let hs = read_all(&log, 0);
        assert_eq!(hs.last().unwrap().last_offset() + 1, linked_end);
        // Lookups in the middle go through indexes the log built itself.
        assert_eq!(read_all(&log, 31)[0].base_offset, 30);
        for i in 0..30 {
            log.append(batch_n(100 + i, 2, 200, 7), opts(Durability::None))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        assert!(log.log_end_offset() > end);
        // Cutting into the first linked segment: our name gets a private copy.
        log.truncate_to(4).unwrap();
        assert_eq!(log.log_end_offset(), 3);
        log.append(batch_n(500, 2, 200, 9), opts(Durability::Fsync))
            .await
            .unwrap();
    });
    for ((_, p), want) in closed.iter().zip(&before) {
        assert_eq!(&std::fs::read(p).unwrap(), want, "{} changed", p.display());
    }
    assert_eq!(std::fs::metadata(&closed[0].1).unwrap().nlink(), 1);
}
