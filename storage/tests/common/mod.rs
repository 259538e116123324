//! Shared helpers for the storage integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::path::Path;
use std::rc::Rc;

use bytes::BytesMut;
use storage::{AppendOptions, Durability, IoBackend, IoBackendKind, LogConfig, PartitionLog};

/// Runs `f` on a current-thread runtime inside a LocalSet, like a shard does.
pub fn run<F: Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, f)
}

/// The backend under test: `STROM_IO_BACKEND=sync|uring` (default: auto).
pub fn backend() -> Rc<IoBackend> {
    IoBackend::new(IoBackendKind::from_env()).unwrap()
}

pub fn open(dir: &Path, cfg: LogConfig, recovery_point: i64) -> PartitionLog {
    PartitionLog::open(dir, "t", 0, cfg, backend(), recovery_point).unwrap()
}

pub fn opts(d: Durability) -> AppendOptions {
    AppendOptions {
        durability: d,
        log_append_time_ms: None,
        leader_epoch: 0,
    }
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
}

/// An uncompressed magic-v2 batch as a producer sends it: base offset 0, record i has
/// timestamp `base_ts + i` and the given value.
pub fn batch(base_ts: i64, values: &[&[u8]]) -> Vec<u8> {
    let mut records = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let mut body = vec![0u8];
        put_varint(&mut body, i as i64);
        put_varint(&mut body, i as i64);
        put_varint(&mut body, -1);
        put_varint(&mut body, v.len() as i64);
        body.extend_from_slice(v);
        put_varint(&mut body, 0);
        put_varint(&mut records, body.len() as i64);
        records.extend_from_slice(&body);
    }
    let n = values.len() as i32;
    let mut b = Vec::new();
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&0i16.to_be_bytes());
    b.extend_from_slice(&(n - 1).to_be_bytes());
    b.extend_from_slice(&base_ts.to_be_bytes());
    b.extend_from_slice(&(base_ts + n as i64 - 1).to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&n.to_be_bytes());
    b.extend_from_slice(&records);
    let crc = storage::batch::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// A batch of `n` records whose values are `tag` repeated to `value_len` bytes.
pub fn batch_n(base_ts: i64, n: usize, value_len: usize, tag: u8) -> BytesMut {
    let v = vec![tag; value_len];
    let vals: Vec<&[u8]> = (0..n).map(|_| v.as_slice()).collect();
    BytesMut::from(&batch(base_ts, &vals)[..])
}

/// Every batch header readable from `offset`, validated (CRC) on the way.
pub fn read_all(log: &PartitionLog, from: i64) -> Vec<storage::batch::BatchHeader> {
    let r = log.read(from, usize::MAX, i64::MAX).unwrap();
    let mut out = Vec::new();
    for c in &r.chunks {
        out.extend(storage::batch::validate_batches(c).unwrap());
    }
    out
}

/// A batch as Kafka's log cleaner leaves it: `records` (offset delta, value) kept out of
/// a batch that spanned `last_offset_delta + 1` offsets. records_count is the number
/// kept, so `records_count - 1 != last_offset_delta` when some were removed.
pub fn compacted_batch(base_ts: i64, records: &[(i64, &[u8])], last_offset_delta: i32) -> Vec<u8> {
    let mut body_all = Vec::new();
    for &(delta, v) in records {
        let mut body = vec![0u8];
        put_varint(&mut body, delta);
        put_varint(&mut body, delta);
        put_varint(&mut body, -1);
        put_varint(&mut body, v.len() as i64);
        body.extend_from_slice(v);
        put_varint(&mut body, 0);
        put_varint(&mut body_all, body.len() as i64);
        body_all.extend_from_slice(&body);
    }
    let mut b = batch(base_ts, &[b"x"]);
    b.truncate(61);
    b[8..12].copy_from_slice(&((49 + body_all.len()) as i32).to_be_bytes());
    b[23..27].copy_from_slice(&last_offset_delta.to_be_bytes());
    b[35..43].copy_from_slice(&(base_ts + last_offset_delta as i64).to_be_bytes());
    b[57..61].copy_from_slice(&(records.len() as i32).to_be_bytes());
    b.extend_from_slice(&body_all);
    let crc = storage::batch::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// xorshift64: a seeded, replayable generator for randomized tests (seed must be non-zero).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
