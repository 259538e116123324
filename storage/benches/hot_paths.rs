//! Micro-benchmarks of storage's per-request hot paths: producer batch validation (framing,
//! CRC-32C, record walk), the CRC alone at the sizes clients send, the framing-only batch
//! walk a fetch does, and an offset index lookup in a full-size index.
//!
//! `cargo bench -p storage --bench hot_paths`. Throughput rows are in bytes, so the CRC
//! rows compare directly with the memcpy limit `benches/run.sh` measures.

#[path = "../tests/common/mod.rs"]
mod common;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use storage::batch::{compute_crc, validate_batches, validate_one, BatchIter};
use storage::index::OffsetIndex;

/// (label, records per batch, value bytes): a librdkafka-sized batch of small records, a
/// 1 KiB-record batch and one large record.
const BATCHES: [(&str, usize, usize); 3] = [
    ("100x100B", 100, 100),
    ("16x1KiB", 16, 1024),
    ("1x16KiB", 1, 16 << 10),
];

fn validation(c: &mut Criterion) {
    let mut g = c.benchmark_group("validate_one");
    for (label, n, len) in BATCHES {
        let b = common::batch_n(0, n, len, 7);
        g.throughput(Throughput::Bytes(b.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(label), &b, |bench, b| {
            bench.iter(|| validate_one(black_box(b)).unwrap())
        });
    }
    g.finish();

    // A produce request's partition data: 16 batches back to back.
    let mut many = Vec::new();
    for i in 0..16 {
        many.extend_from_slice(&common::batch_n(i, 100, 100, i as u8));
    }
    let mut g = c.benchmark_group("validate_batches");
    g.throughput(Throughput::Bytes(many.len() as u64));
    g.bench_function("16x(100x100B)", |bench| {
        bench.iter(|| validate_batches(black_box(&many)).unwrap().len())
    });
    g.finish();

    // What a fetch or recovery walk does without the CRC: framing only.
    let mut g = c.benchmark_group("batch_iter_framing");
    g.throughput(Throughput::Bytes(many.len() as u64));
    g.bench_function("16x(100x100B)", |bench| {
        bench.iter(|| BatchIter::new(black_box(&many)).count())
    });
    g.finish();
}

fn crc(c: &mut Criterion) {
    let mut g = c.benchmark_group("crc32c");
    for size in [1usize << 10, 16 << 10, 1 << 20] {
        let buf = vec![0x5au8; size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(BenchmarkId::from_parameter(size), &buf, |bench, buf| {
            bench.iter(|| compute_crc(black_box(buf)))
        });
    }
    g.finish();
}

fn index_lookup(c: &mut Criterion) {
    // A full 10 MiB index (Kafka's default segment.index.bytes): 1.3 M entries, one per
    // 800 bytes of log, as a 1 GiB segment of 100 B records appended one small batch at a time
    // would have (positions must stay below 4 GiB).
    let dir = tempfile::tempdir().unwrap();
    let max_bytes = 10 << 20;
    let mut idx = OffsetIndex::open(&dir.path().join("0.index"), 0, max_bytes).unwrap();
    let mut i = 0i64;
    while !idx.is_full() {
        i += 1;
        idx.append(i * 8, (i * 800) as u32).unwrap();
    }
    let entries = idx.len() as i64;
    assert!(entries > 1_000_000, "{entries} entries");
    let last = entries * 8;
    let mut g = c.benchmark_group("offset_index_lookup");
    g.bench_function("1.3M entries, spread targets", |bench| {
        let mut target = 0i64;
        bench.iter(|| {
            // A stride co-prime with the range, so lookups do not hit the same cache lines.
            target = (target + 7_919_993) % last;
            idx.lookup(black_box(target))
        })
    });
    g.bench_function("1.3M entries, tail (consumer at the end)", |bench| {
        bench.iter(|| idx.lookup(black_box(last - 5)))
    });
    g.finish();
}

criterion_group!(benches, validation, crc, index_lookup);
criterion_main!(benches);
