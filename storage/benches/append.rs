//! Durable append vs the disk's own limit (a plain pwrite + fdatasync loop on the same
//! disk, same run), non-durable append vs buffered writes, mmap read vs memcpy.
//!
//! `cargo bench -p storage --bench append` (STROM_IO_BACKEND=sync|uring picks the
//! backend). Compare the strom/* rows with the baseline/* rows of the same size: the
//! ratio is the figure that matters. With 8 writers, the bench also prints
//! appends per fdatasync (> 1 means group commit is batching).

#[path = "../tests/common/mod.rs"]
mod common;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use storage::{Durability, LogConfig, PartitionLog};

const SIZES: [usize; 3] = [16 << 10, 64 << 10, 1 << 20];

fn rt() -> (tokio::runtime::Runtime, tokio::task::LocalSet) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    (rt, tokio::task::LocalSet::new())
}

fn payload(size: usize) -> Bytes {
    // One record whose value makes the batch about `size` bytes. Frozen, as a request's
    // bytes reach the log: each append below clones a reference, not the bytes.
    common::batch_n(1, 1, size - 80, 7).freeze()
}

fn new_log(dir: &std::path::Path) -> PartitionLog {
    PartitionLog::open(dir, "bench", 0, LogConfig::default(), common::backend(), 0).unwrap()
}

fn durable(c: &mut Criterion) {
    let mut g = c.benchmark_group("durable_append");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    for size in SIZES {
        g.throughput(Throughput::Bytes(size as u64));
        let data = payload(size);
        g.bench_with_input(
            BenchmarkId::new("baseline_pwrite_fdatasync", size),
            &size,
            |b, _| {
                let dir = tempfile::tempdir().unwrap();
                let f = File::create(dir.path().join("plain")).unwrap();
                let mut pos = 0u64;
                b.iter(|| {
                    f.write_all_at(&data, pos).unwrap();
                    f.sync_data().unwrap();
                    pos += data.len() as u64;
                });
            },
        );
        for writers in [1usize, 8] {
            let id = BenchmarkId::new(format!("strom_{writers}_writers"), size);
            g.bench_with_input(id, &size, |b, _| {
                b.iter_custom(|iters| {
                    let dir = tempfile::tempdir().unwrap();
                    let (rt, local) = rt();
                    local.block_on(&rt, async {
                        let log = Rc::new(new_log(dir.path()));
                        let syncs0 = log.io_backend().sync_count();
                        let start = Instant::now();
                        let mut tasks = Vec::new();
                        for w in 0..writers as u64 {
                            let (log, data) = (log.clone(), data.clone());
                            let n = iters / writers as u64 + u64::from(w < iters % writers as u64);
                            tasks.push(tokio::task::spawn_local(async move {
                                for _ in 0..n {
                                    let o = common::opts(Durability::Fsync);
                                    log.append(data.clone(), o).await.unwrap();
                                }
                            }));
                        }
                        for t in tasks {
                            t.await.unwrap();
                        }
                        let took = start.elapsed();
                        let syncs = log.io_backend().sync_count() - syncs0;
                        if writers > 1 && iters >= 50 {
                            eprintln!(
                                "  {writers} writers, {size} B: {iters} appends, {syncs} fdatasyncs ({:.1} appends/sync)",
                                iters as f64 / syncs.max(1) as f64
                            );
                        }
                        took
                    })
                });
            });
        }
    }
    g.finish();
}

fn buffered(c: &mut Criterion) {
    let mut g = c.benchmark_group("buffered_append");
    g.sample_size(10).measurement_time(Duration::from_secs(2));
    let size = 64 << 10;
    let data = payload(size);
    g.throughput(Throughput::Bytes(size as u64));
    g.bench_function("baseline_pwrite", |b| {
        let dir = tempfile::tempdir().unwrap();
        let f = File::create(dir.path().join("plain")).unwrap();
        let mut pos = 0u64;
        b.iter(|| {
            f.write_all_at(&data, pos).unwrap();
            pos += data.len() as u64;
        });
    });
    g.bench_function("strom_none", |b| {
        b.iter_custom(|iters| {
            let dir = tempfile::tempdir().unwrap();
            let (rt, local) = rt();
            local.block_on(&rt, async {
                let log = new_log(dir.path());
                let start = Instant::now();
                for _ in 0..iters {
                    let o = common::opts(Durability::None);
                    log.append(data.clone(), o).await.unwrap();
                }
                start.elapsed()
            })
        });
    });
    g.finish();
}

fn read(c: &mut Criterion) {
    let mut g = c.benchmark_group("read_1mib");
    g.sample_size(20).measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Bytes(1 << 20));
    let dir = tempfile::tempdir().unwrap();
    let (rt, local) = rt();
    let log = local.block_on(&rt, async {
        let log = new_log(dir.path());
        for _ in 0..16 {
            log.append(payload(64 << 10), common::opts(Durability::None))
                .await
                .unwrap();
        }
        log
    });
    let src = log.read(0, 1 << 20, i64::MAX).unwrap();
    let flat: Vec<u8> = src.chunks.iter().flat_map(|c| c.iter().copied()).collect();
    g.bench_function("baseline_memcpy", |b| {
        let mut dst = vec![0u8; flat.len()];
        b.iter(|| {
            dst.copy_from_slice(&flat);
            std::hint::black_box(&dst);
        });
    });
    g.bench_function("strom_mmap_read_and_touch", |b| {
        b.iter(|| {
            let r = log.read(0, 1 << 20, i64::MAX).unwrap();
            // Touch one byte per page, as a socket write would read them.
            let mut sum = 0u64;
            for c in &r.chunks {
                sum += c.iter().step_by(4096).map(|&x| x as u64).sum::<u64>();
            }
            std::hint::black_box(sum)
        });
    });
    g.finish();
}

criterion_group!(benches, durable, buffered, read);
criterion_main!(benches);
