//! Durable append latency on one log while the log cleaner compacts another log of the
//! same shard, against the same load without the cleaner.
//!
//! `cargo bench -p storage --bench compaction` (STROM_BENCH_SECONDS per scenario, default
//! 4). A shard-like current-thread runtime runs: a producer doing back-to-back durable
//! (fdatasync) appends of 1 KiB to log A, timing each; a second producer appending keyed
//! records (64 keys, so mostly redundant) to log B at a steady rate; and, in the cleaner
//! scenarios, passes of the cleaner over log B as the broker runs them (plan and swap on the
//! runtime, rewrite on the blocking pool, throttled to the given rate).

#[path = "../tests/common/mod.rs"]
mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use storage::cleaner::{CleanerConfig, ProducerState, Throttle};
use storage::{Durability, LogConfig, PartitionLog};

struct Row {
    name: &'static str,
    appends: usize,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    passes: u64,
    cleaned_mb: f64,
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn keyed_load(round: u64) -> bytes::BytesMut {
    let value = vec![b'v'; 1000];
    let keys: Vec<Vec<u8>> = (0..60)
        .map(|i| format!("key-{}", (round * 7 + i) % 64).into_bytes())
        .collect();
    let recs: Vec<(&[u8], Option<&[u8]>)> = keys
        .iter()
        .map(|k| (k.as_slice(), Some(value.as_slice())))
        .collect();
    common::keyed_batch(1, &recs)
}

fn scenario(name: &'static str, cleaner: Option<f64>, seconds: u64) -> Row {
    let dir = tempfile::tempdir().unwrap();
    common::run(async {
        let a = PartitionLog::open(
            dir.path(),
            "a",
            0,
            LogConfig::default(),
            common::backend(),
            0,
        )
        .unwrap();
        let b_cfg = LogConfig {
            segment_bytes: 4 << 20,
            ..Default::default()
        };
        let b =
            Rc::new(PartitionLog::open(dir.path(), "b", 0, b_cfg, common::backend(), 0).unwrap());
        // Prefill B with 24 MiB of redundant keyed data: the first pass has work to do.
        for r in 0..400 {
            b.append(keyed_load(r), common::opts(Durability::None))
                .await
                .unwrap();
        }
        b.flush().await.unwrap();
        let done = Rc::new(Cell::new(false));
        // Steady keyed load on B: 60 KiB every 20 ms (3 MB/s).
        let load = {
            let (b, done) = (b.clone(), done.clone());
            tokio::task::spawn_local(async move {
                let mut r = 400;
                while !done.get() {
                    b.append(keyed_load(r), common::opts(Durability::None))
                        .await
                        .unwrap();
                    r += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        let passes = Rc::new(Cell::new(0u64));
        let cleaned = Rc::new(Cell::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let clean = cleaner.map(|rate| {
            let (b, done, passes, cleaned, stop) = (
                b.clone(),
                done.clone(),
                passes.clone(),
                cleaned.clone(),
                stop.clone(),
            );
            tokio::task::spawn_local(async move {
                let cfg = CleanerConfig {
                    min_cleanable_dirty_ratio: 0.0,
                    ..Default::default()
                };
                let mut checkpoint = 0;
                while !done.get() {
                    let Some(task) = b
                        .clean_task(checkpoint, &cfg, i64::MAX / 2, ProducerState::default())
                        .unwrap()
                    else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let stop = stop.clone();
                    let out = tokio::task::spawn_blocking(move || {
                        task.run(None, &mut Throttle::new(rate, &stop))
                    })
                    .await
                    .unwrap();
                    let Ok(out) = out else { break };
                    checkpoint = out.clean_end;
                    cleaned.set(cleaned.get() + out.stats.bytes_read);
                    b.install_cleaned(out).await.unwrap();
                    passes.set(passes.get() + 1);
                }
            })
        });
        let mut lat = Vec::new();
        let payload = common::batch_n(1, 1, 1000, 7);
        let end = Instant::now() + Duration::from_secs(seconds);
        while Instant::now() < end {
            let t = Instant::now();
            a.append(payload.clone(), common::opts(Durability::Fsync))
                .await
                .unwrap();
            lat.push(t.elapsed());
        }
        done.set(true);
        stop.store(true, Ordering::Relaxed);
        load.await.unwrap();
        if let Some(c) = clean {
            c.await.unwrap();
        }
        lat.sort();
        Row {
            name,
            appends: lat.len(),
            p50_us: percentile(&lat, 0.5),
            p99_us: percentile(&lat, 0.99),
            max_us: lat.last().unwrap().as_secs_f64() * 1e6,
            passes: passes.get(),
            cleaned_mb: cleaned.get() as f64 / 1e6,
        }
    })
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this once, briefly.
    let quick = !std::env::args().any(|a| a == "--bench");
    let seconds: u64 = std::env::var("STROM_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 1 } else { 4 });
    let rows = [
        scenario("no cleaner", None, seconds),
        scenario("cleaner unthrottled", Some(f64::MAX), seconds),
        scenario("cleaner 40 MB/s", Some(40e6), seconds),
    ];
    println!(
        "durable 1 KiB appends on log A while log B takes 3 MB/s of keyed data ({seconds} s each)"
    );
    println!(
        "| scenario | appends | p50 us | p99 us | max us | cleaner passes | cleaner MB read |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {} | {:.1} |",
            r.name, r.appends, r.p50_us, r.p99_us, r.max_us, r.passes, r.cleaned_mb
        );
    }
}
