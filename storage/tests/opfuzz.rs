//! Randomized operation sequences (append / read / truncate / advance start / reopen /
//! crash-reopen) checked against a plain in-memory model, in the spirit of Redpanda's
//! storage opfuzz. `STROM_OPFUZZ_SEED` replays a run.

mod common;

use std::rc::Rc;

use bytes::BytesMut;
use common::*;
use storage::{Durability, LogConfig, PartitionLog, StorageError};

/// What the log must contain: batches as (base offset, bytes from the magic on).
#[derive(Default)]
struct Model {
    batches: Vec<(i64, i64, Vec<u8>)>,
    start: i64,
    end: i64,
}

impl Model {
    fn containing(&self, offset: i64) -> Option<usize> {
        self.batches.iter().position(|b| b.1 >= offset)
    }
}

fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 3000,
        index_interval_bytes: 300,
        segment_index_bytes: 64, // a few entries: exercises roll-on-full-index too
        ..LogConfig::default()
    }
}

fn check_read(log: &PartitionLog, m: &Model, offset: i64, max_bytes: usize) {
    let r = log.read(offset, max_bytes, i64::MAX);
    if offset < m.start || offset > m.end {
        assert!(
            matches!(r, Err(StorageError::OffsetOutOfRange { .. })),
            "read {offset}"
        );
        return;
    }
    let r = r.unwrap();
    let mut got = Vec::new();
    for c in &r.chunks {
        let mut at = 0;
        for h in storage::batch::validate_batches(c).unwrap() {
            got.push((h.base_offset, c[at + 16..at + h.total_size()].to_vec()));
            at += h.total_size();
        }
    }
    let mut want = Vec::new();
    if let Some(i) = m.containing(offset) {
        let mut total = 0;
        for (base, _, bytes) in &m.batches[i..] {
            let size = bytes.len() + 16;
            if !want.is_empty() && total + size > max_bytes {
                break;
            }
            total += size;
            want.push((*base, bytes.clone()));
        }
    }
    assert_eq!(
        got.len(),
        want.len(),
        "read({offset}, {max_bytes}) batch count"
    );
    assert!(got == want, "read({offset}, {max_bytes}) content");
}

fn reopen(root: &std::path::Path, m: &Model, recovery_point: i64) -> PartitionLog {
    let log = open(root, cfg(), recovery_point);
    assert_eq!(log.log_end_offset(), m.end);
    // The broker re-applies its log-start checkpoint after open.
    log.advance_log_start(m.start).unwrap();
    log
}

#[test]
fn given_random_operation_sequences_when_checked_against_model_then_log_agrees() {
    let seed = std::env::var("STROM_OPFUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
        | 1;
    eprintln!("opfuzz seed {seed}");
    let mut rng = Rng(seed);
    for _round in 0..8 {
        let root = tempfile::tempdir().unwrap();
        run(async {
            let mut m = Model::default();
            let mut log = Rc::new(open(root.path(), cfg(), 0));
            for step in 0..250 {
                match rng.below(100) {
                    0..=49 => {
                        // A burst of appends issued together, awaited together.
                        let n = 1 + rng.below(4);
                        let mut futs = Vec::new();
                        for _ in 0..n {
                            let recs = 1 + rng.below(5) as usize;
                            let len = rng.below(400) as usize;
                            let tag = rng.next() as u8;
                            let b = batch_n(step, recs, len, tag);
                            let d = if rng.below(3) == 0 {
                                Durability::Fsync
                            } else {
                                Durability::None
                            };
                            let bytes = b[16..].to_vec();
                            futs.push((log.append(BytesMut::from(&b[..]), opts(d)), recs, bytes));
                        }
                        for (f, recs, bytes) in futs {
                            let r = f.await.unwrap();
                            assert_eq!(r.base_offset, m.end);
                            m.batches.push((m.end, m.end + recs as i64 - 1, bytes));
                            m.end += recs as i64;
                        }
                    }
                    50..=74 => {
                        let span = (m.end - m.start + 3) as u64;
                        let off = m.start - 1 + rng.below(span) as i64;
                        let max = [1, 100, 1000, 5000, usize::MAX][rng.below(5) as usize];
                        check_read(&log, &m, off, max);
                    }
                    75..=81 => {
                        let off = m.start + rng.below((m.end - m.start + 1) as u64) as i64;
                        log.truncate_to(off).unwrap();
                        if let Some(i) = m.containing(off) {
                            m.end = m.batches[i].0;
                            m.batches.truncate(i);
                        }
                        if m.batches.is_empty() && m.end > off {
                            m.end = off;
                        }
                        m.start = m.start.min(m.end);
                        assert_eq!(log.log_end_offset(), m.end, "truncate_to({off})");
                    }
                    82..=87 => {
                        let off = m.start + rng.below((m.end - m.start + 1) as u64) as i64;
                        log.advance_log_start(off).unwrap();
                        m.start = off;
                        m.batches.retain(|b| b.1 >= off);
                    }
                    88..=93 => {
                        // Clean restart: close, reopen at the log end (no scan).
                        let l = Rc::try_unwrap(log).ok().unwrap();
                        l.close().await.unwrap();
                        log = Rc::new(reopen(root.path(), &m, m.end));
                    }
                    _ => {
                        // Crash-like restart: no close, recovery from a random earlier
                        // durable point (a full scan of what follows it).
                        log.flush().await.unwrap();
                        let rp = rng.below(m.end as u64 + 1) as i64;
                        drop(log);
                        log = Rc::new(reopen(root.path(), &m, rp));
                    }
                }
                assert_eq!(log.log_end_offset(), m.end);
                assert_eq!(log.log_start_offset(), m.start);
            }
            check_read(&log, &m, m.start, usize::MAX);
        });
    }
}
