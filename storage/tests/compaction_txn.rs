//! Transaction-aware log compaction against a model: plain keyed writes interleaved with
//! transactional producers that commit and abort, cleaned at random points in (virtual)
//! time. Checked after every pass: offsets never change, the read_committed view (latest
//! committed value per key, as a consumer filtering with the aborted-transaction list
//! sees it) is unchanged, no record of an aborted transaction survives in the cleaned
//! range, markers stay while their transaction has data and go once it has none and
//! their delete horizon has passed, and a reopened log answers the same.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::AtomicBool;

use common::*;
use storage::batch::BatchIter;
use storage::cleaner::records::{delete_horizon, parse_records};
use storage::cleaner::{CleanerConfig, ProducerState, Throttle};
use storage::txn_index::AbortedTxn;
use storage::{Durability, LogConfig, PartitionLog};

const ATTR_TXN: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 1500,
        index_interval_bytes: 200,
        ..Default::default()
    }
}

type Rec = (Vec<u8>, Option<Vec<u8>>);

/// `b` with producer fields and attributes set (CRC recomputed).
fn with_producer(mut b: bytes::BytesMut, pid: i64, attrs: i16) -> bytes::BytesMut {
    b[21..23].copy_from_slice(&attrs.to_be_bytes());
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&0i32.to_be_bytes());
    let crc = storage::batch::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Open,
    Committed,
    Aborted,
}

/// (key, value, transaction id if transactional)
type ModelRec = (Vec<u8>, Option<Vec<u8>>, Option<usize>);

/// (offset, key, value, producer id, transactional)
type SeenRec = (i64, Vec<u8>, Option<Vec<u8>>, i64, bool);

#[derive(Default)]
struct Model {
    /// offset -> (key, value, transaction id if transactional)
    data: BTreeMap<i64, ModelRec>,
    /// marker offset -> transaction id
    markers: BTreeMap<i64, usize>,
    /// transaction id -> (producer id, first offset, outcome)
    txns: Vec<(i64, i64, Outcome)>,
    /// producer id -> its open transaction
    open: HashMap<i64, usize>,
}

impl Model {
    fn lso(&self, log_end: i64) -> i64 {
        self.open
            .values()
            .map(|&t| self.txns[t].1)
            .min()
            .unwrap_or(log_end)
    }

    /// The read_committed view: latest value per key of data that is not aborted and
    /// below the LSO (a tombstone: no value).
    fn committed_view(&self, lso: i64) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut view = BTreeMap::new();
        for (k, v, t) in self.data.range(..lso).map(|(_, r)| r) {
            if t.is_some_and(|t| self.txns[t].2 != Outcome::Committed) {
                continue;
            }
            match v {
                Some(v) => view.insert(k.clone(), v.clone()),
                None => view.remove(k),
            };
        }
        view
    }
}

async fn append(log: &PartitionLog, ts: i64, recs: &[Rec], pid: i64, attrs: i16) -> i64 {
    let refs: Vec<(&[u8], Option<&[u8]>)> = recs
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_deref()))
        .collect();
    let mut b = keyed_batch(ts, &refs);
    if pid >= 0 {
        b = with_producer(b, pid, attrs);
    }
    log.append(b, opts(Durability::None))
        .await
        .unwrap()
        .base_offset
}

async fn end_txn(log: &PartitionLog, m: &mut Model, ts: i64, pid: i64, commit: bool) {
    let t = m.open.remove(&pid).unwrap();
    let key = vec![0, 0, 0, commit as u8];
    let value = vec![0u8; 6];
    let o = append(log, ts, &[(key, Some(value))], pid, ATTR_TXN | ATTR_CONTROL).await;
    m.markers.insert(o, t);
    m.txns[t].2 = if commit {
        Outcome::Committed
    } else {
        Outcome::Aborted
    };
    if !commit {
        let lso = m.lso(log.log_end_offset());
        log.append_aborted_txn(AbortedTxn {
            producer_id: pid,
            first_offset: m.txns[t].1,
            last_offset: o,
            last_stable_offset: lso,
        })
        .unwrap();
    }
}

/// What the log holds: data records (offset, key, value, producer id, transactional),
/// and markers (offset -> (producer id, delete horizon, commit)).
#[derive(Debug, Default, PartialEq)]
struct Seen {
    data: Vec<SeenRec>,
    markers: BTreeMap<i64, (i64, Option<i64>, bool)>,
}

fn scan(log: &PartitionLog) -> Seen {
    let r = log
        .read(log.log_start_offset(), usize::MAX, i64::MAX)
        .unwrap();
    let mut seen = Seen::default();
    let mut prev = -1;
    for c in &r.chunks {
        for item in BatchIter::validating(c) {
            let (h, b) = item.unwrap();
            assert!(h.base_offset > prev, "batches out of order");
            prev = h.last_offset();
            let recs = parse_records(&b[61..], h.records_count).unwrap();
            if h.is_control() {
                if !recs.is_empty() {
                    let commit = recs[0].key.unwrap()[3] == 1;
                    seen.markers
                        .insert(h.base_offset, (h.producer_id, delete_horizon(&h), commit));
                }
                continue;
            }
            for r in recs {
                seen.data.push((
                    h.base_offset + r.offset_delta,
                    r.key.unwrap().to_vec(),
                    r.value.map(|v| v.to_vec()),
                    h.producer_id,
                    h.is_transactional(),
                ));
            }
        }
    }
    seen
}

/// A read_committed consumer's view of `seen`, filtered as Kafka's fetcher does: at
/// each batch with a producer id, the aborted transactions starting at or before it
/// mark their producer as aborted; an abort marker clears it; a transactional batch of
/// a marked producer is skipped.
fn consumer_view(log: &PartitionLog, seen: &Seen, lso: i64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut aborted = log.collect_aborted_txns(log.log_start_offset(), lso);
    aborted.sort_by_key(|t| t.first_offset);
    let mut aborted = aborted.into_iter().peekable();
    let mut skipping: HashSet<i64> = HashSet::new();
    // Offset order: markers and data records (None for a marker).
    let mut events: Vec<(i64, i64, Option<usize>)> = seen
        .markers
        .iter()
        .map(|(&o, &(pid, _, _))| (o, pid, None))
        .collect();
    events.extend(
        seen.data
            .iter()
            .enumerate()
            .map(|(i, d)| (d.0, d.3, Some(i))),
    );
    events.sort_by_key(|e| e.0);
    let mut view = BTreeMap::new();
    for (o, pid, i) in events.into_iter().filter(|e| e.0 < lso) {
        if pid >= 0 {
            while aborted.peek().is_some_and(|t| t.first_offset <= o) {
                skipping.insert(aborted.next().unwrap().producer_id);
            }
        }
        let Some(i) = i else {
            if !seen.markers[&o].2 {
                skipping.remove(&pid);
            }
            continue;
        };
        let (_, k, v, _, txn) = &seen.data[i];
        if *txn && skipping.contains(&pid) {
            continue;
        }
        match v {
            Some(v) => view.insert(k.clone(), v.clone()),
            None => view.remove(k),
        };
    }
    view
}

/// One cleaning pass with no active producer and the given LSO; the new checkpoint.
async fn clean(
    log: &PartitionLog,
    checkpoint: i64,
    cfg: &CleanerConfig,
    now: i64,
    lso: i64,
) -> Option<i64> {
    let producers = ProducerState {
        last_stable_offset: lso,
        ..Default::default()
    };
    clean_with(log, checkpoint, cfg, now, producers).await
}

async fn clean_with(
    log: &PartitionLog,
    checkpoint: i64,
    cfg: &CleanerConfig,
    now: i64,
    producers: ProducerState,
) -> Option<i64> {
    let lso = producers.last_stable_offset;
    let task = log.clean_task(checkpoint, cfg, now, producers).unwrap()?;
    let stop = AtomicBool::new(false);
    let out = tokio::task::spawn_blocking(move || {
        task.run(None, &mut Throttle::new(f64::INFINITY, &stop))
    })
    .await
    .unwrap()
    .unwrap();
    let end = out.clean_end;
    assert!(end <= lso, "cleaned past the LSO");
    log.install_cleaned(out).await.unwrap();
    Some(end)
}

/// Every check that holds after any pass. `had_data`: markers whose transaction still
/// had data in the log before this pass (they may still lack a horizon).
fn check(log: &PartitionLog, m: &Model, clean_end: i64, now: i64, had_data: &HashSet<i64>) -> Seen {
    let seen = scan(log);
    for (o, k, v, pid, txn) in &seen.data {
        let (mk, mv, t) = m.data.get(o).expect("record never appended");
        assert_eq!((mk, mv), (k, v), "record at {o} changed");
        assert_eq!(t.is_some(), *txn);
        if let Some(t) = t {
            assert_eq!(m.txns[*t].0, *pid);
            assert!(
                !(m.txns[*t].2 == Outcome::Aborted && *o < clean_end),
                "aborted record at {o} survived cleaning"
            );
        }
    }
    let present: HashSet<i64> = seen.data.iter().map(|d| d.0).collect();
    // Open transactions are never touched; nor is anything above the checkpoint.
    for (o, (_, _, t)) in &m.data {
        let open = t.is_some_and(|t| m.txns[t].2 == Outcome::Open);
        if open || *o >= clean_end {
            assert!(present.contains(o), "record {o} removed");
        }
    }
    for o in m.markers.keys().filter(|&&o| o >= clean_end) {
        assert!(
            seen.markers.contains_key(o),
            "marker {o} above the checkpoint gone"
        );
    }
    let lso = m.lso(log.log_end_offset());
    assert_eq!(
        consumer_view(log, &seen, lso),
        m.committed_view(lso),
        "read_committed view changed"
    );
    // A surviving marker has data of its transaction, or a horizon in the future, or
    // lost its data only in this pass (Kafka sets the horizon at the next one).
    for (&o, &(_, horizon, _)) in &seen.markers {
        let t = m.markers[&o];
        let has_data = m
            .data
            .iter()
            .any(|(d, (_, _, dt))| *dt == Some(t) && present.contains(d));
        let ok = has_data || horizon.is_some_and(|h| h > now) || had_data.contains(&o);
        assert!(ok, "marker {o} outlived its data and its delete horizon");
    }
    seen
}

fn markers_with_data(m: &Model, seen: &Seen) -> HashSet<i64> {
    let present: HashSet<i64> = seen.data.iter().map(|d| d.0).collect();
    seen.markers
        .keys()
        .filter(|o| {
            let t = m.markers[o];
            m.data
                .iter()
                .any(|(d, (_, _, dt))| *dt == Some(t) && present.contains(d))
        })
        .copied()
        .collect()
}

#[test]
fn given_transactions_that_commit_and_abort_when_cleaning_then_committed_view_holds_and_markers_go_once_safe(
) {
    for seed in 1..=3u64 {
        run_model(seed);
    }
}

fn run_model(seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let retention = 10_000;
        let cfg = CleanerConfig {
            delete_retention_ms: retention,
            min_cleanable_dirty_ratio: 0.0,
            ..Default::default()
        };
        let log = open(dir.path(), small(), 0);
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut m = Model::default();
        let mut now = 1_000_000i64;
        let mut checkpoint = 0;
        let mut counter = 0u64;
        let mut rec = |rng: &mut Rng| {
            counter += 1;
            let key = format!("k{}", rng.below(16)).into_bytes();
            let value = (rng.below(6) != 0).then(|| format!("v{counter}").into_bytes());
            (key, value)
        };
        for step in 0..500 {
            now += rng.below(200) as i64;
            let pid = rng.below(4) as i64;
            if pid == 0 {
                let recs: Vec<Rec> = (0..1 + rng.below(3)).map(|_| rec(&mut rng)).collect();
                let o = append(&log, now, &recs, -1, 0).await;
                for (i, (k, v)) in recs.into_iter().enumerate() {
                    m.data.insert(o + i as i64, (k, v, None));
                }
            } else if m.open.contains_key(&pid) && rng.below(3) == 0 {
                end_txn(&log, &mut m, now, pid, rng.below(2) == 0).await;
            } else {
                let recs: Vec<Rec> = (0..1 + rng.below(3)).map(|_| rec(&mut rng)).collect();
                let o = append(&log, now, &recs, pid, ATTR_TXN).await;
                let t = *m.open.entry(pid).or_insert_with(|| {
                    m.txns.push((pid, o, Outcome::Open));
                    m.txns.len() - 1
                });
                for (i, (k, v)) in recs.into_iter().enumerate() {
                    m.data.insert(o + i as i64, (k, v, Some(t)));
                }
            }
            if step % 41 == 40 {
                let had = markers_with_data(&m, &scan(&log));
                let lso = m.lso(log.log_end_offset());
                if let Some(end) = clean(&log, checkpoint, &cfg, now, lso).await {
                    checkpoint = end;
                }
                check(&log, &m, checkpoint, now, &had);
            }
        }
        // Close every transaction, roll the active segment away, then clean: once to
        // drop aborted data, once to give markers without data their horizon, once
        // past it. Every marker whose transaction has no data left is then gone.
        for pid in 1..=3 {
            if m.open.contains_key(&pid) {
                end_txn(&log, &mut m, now, pid, pid != 2).await;
            }
        }
        for i in 0..40 {
            let recs = vec![(format!("filler{i}").into_bytes(), Some(vec![b'f'; 60]))];
            let o = append(&log, now, &recs, -1, 0).await;
            m.data
                .insert(o, (recs[0].0.clone(), recs[0].1.clone(), None));
        }
        // Tombstones of committed transactions go at the third pass (past their horizon),
        // which leaves their markers without data: two more passes, the second past the
        // markers' horizon, remove those too.
        for advance in [0, 0, retention + 1, 0, retention + 1] {
            now += advance;
            let had = markers_with_data(&m, &scan(&log));
            let lso = m.lso(log.log_end_offset());
            checkpoint = clean(&log, checkpoint, &cfg, now, lso).await.unwrap();
            check(&log, &m, checkpoint, now, &had);
        }
        let seen = scan(&log);
        let with_data = markers_with_data(&m, &seen);
        let stale: Vec<_> = seen
            .markers
            .keys()
            .filter(|&&o| o < checkpoint && !with_data.contains(&o))
            .collect();
        assert!(
            stale.is_empty(),
            "seed {seed}: markers without data outlived their horizon: {stale:?}"
        );
        assert!(m.txns.iter().any(|t| t.2 == Outcome::Aborted));
        assert!(m.txns.iter().any(|t| t.2 == Outcome::Committed));
        assert!(
            m.markers.keys().any(|o| !seen.markers.contains_key(o)),
            "seed {seed}: no marker was ever removed"
        );
        // The cleaned log reopens (trusted or fully recovered) with the same records,
        // markers and aborted-transaction answers.
        let end = log.log_end_offset();
        let aborted = log.collect_aborted_txns(log.log_start_offset(), end);
        log.close().await.unwrap();
        for point in [end, 0] {
            let log = open(dir.path(), small(), point);
            assert_eq!(log.log_end_offset(), end);
            assert_eq!(scan(&log), seen, "seed {seed}: reopened at {point}");
            assert_eq!(
                log.collect_aborted_txns(log.log_start_offset(), end),
                aborted
            );
            assert_eq!(
                consumer_view(&log, &seen, end),
                m.committed_view(end),
                "seed {seed}: read_committed view after reopen at {point}"
            );
            log.close().await.unwrap();
        }
    });
}

/// Kafka's `lastRecordsOfActiveProducers`: the batch holding an active producer's last
/// data is kept (emptied) when its records are compacted away, and a producer whose last
/// write was a marker keeps that marker's batch (emptied once the marker may go), so
/// producer state rebuilt from the log keeps its sequence and epoch.
#[test]
fn given_active_producers_when_their_last_batches_are_compacted_then_kept_empty() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let cfg = CleanerConfig {
            delete_retention_ms: 100,
            min_cleanable_dirty_ratio: 0.0,
            ..Default::default()
        };
        let log = open(dir.path(), small(), 0);
        let rec = |k: &str, v: &str| vec![(k.as_bytes().to_vec(), Some(v.as_bytes().to_vec()))];
        let marker = |commit: bool| vec![(vec![0, 0, 0, commit as u8], Some(vec![0u8; 6]))];
        // pid 5: idempotent, its last batch overwritten by a later plain write.
        let idem = append(&log, 1, &rec("a", "1"), 5, 0).await;
        // pid 6: a committed transaction whose data is overwritten; its marker is its
        // last write.
        append(&log, 2, &rec("b", "1"), 6, ATTR_TXN).await;
        let commit = append(&log, 3, &marker(true), 6, ATTR_TXN | ATTR_CONTROL).await;
        append(&log, 4, &rec("a", "2"), -1, 0).await;
        append(&log, 5, &rec("b", "2"), -1, 0).await;
        for i in 0..40 {
            append(&log, 6, &rec(&format!("f{i}"), &"x".repeat(60)), -1, 0).await;
        }
        let mut producers = ProducerState::default();
        producers.last_records.insert(
            5,
            storage::cleaner::LastRecord {
                last_data_offset: Some(idem),
                producer_epoch: 0,
            },
        );
        producers.last_records.insert(
            6,
            storage::cleaner::LastRecord {
                last_data_offset: None,
                producer_epoch: 0,
            },
        );
        let batch_at = |log: &PartitionLog, o: i64| {
            let r = log.read(0, usize::MAX, i64::MAX).unwrap();
            r.chunks
                .iter()
                .flat_map(|c| {
                    BatchIter::validating(c)
                        .map(|i| i.unwrap().0)
                        .collect::<Vec<_>>()
                })
                .find(|h| h.base_offset == o)
        };
        let mut checkpoint = 0;
        // Pass 1 drops the overwritten records (the marker still sees its data), pass 2
        // gives the marker its horizon, pass 3 (past it) would remove it.
        for now in [1_000, 1_000, 2_000] {
            checkpoint = clean_with(&log, checkpoint, &cfg, now, producers.clone())
                .await
                .unwrap();
        }
        let h = batch_at(&log, idem).expect("the idempotent producer's last batch is kept");
        assert_eq!((h.records_count, h.producer_id), (0, 5));
        let h = batch_at(&log, commit).expect("the producer's last marker batch is kept");
        assert_eq!((h.records_count, h.producer_id), (0, 6));
        assert!(h.is_control());
        assert!(
            batch_at(&log, commit - 1).is_none(),
            "overwritten data goes"
        );
        // Without those producers the same batches go.
        clean_with(&log, checkpoint, &cfg, 3_000, ProducerState::default())
            .await
            .unwrap();
        assert!(batch_at(&log, idem).is_none());
        assert!(batch_at(&log, commit).is_none());
    });
}
