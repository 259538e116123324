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

use storage::cleaner::records::put_varint;

/// xorshift64: deterministic randomness for workload generators (seed must be non-zero).
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

/// An uncompressed batch of keyed records as a producer sends it: record i has
/// timestamp `base_ts + i`; a `None` value is a tombstone.
pub fn keyed_batch(base_ts: i64, records: &[(&[u8], Option<&[u8]>)]) -> BytesMut {
    let plain: Vec<_> = records.iter().map(|&(k, v)| (k, v, &[][..])).collect();
    keyed_batch_with_headers(base_ts, &plain)
}

/// A record header: (key, value).
pub type Header<'a> = (&'a [u8], &'a [u8]);
/// A record for [`keyed_batch_with_headers`]: key, value (None: a tombstone), headers.
pub type HeaderedRecord<'a> = (&'a [u8], Option<&'a [u8]>, &'a [Header<'a>]);

/// [`keyed_batch`] with headers on each record.
pub fn keyed_batch_with_headers(base_ts: i64, records: &[HeaderedRecord<'_>]) -> BytesMut {
    let mut body_all = Vec::new();
    for (i, (k, v, headers)) in records.iter().enumerate() {
        let mut body = vec![0u8];
        put_varint(&mut body, i as i64);
        put_varint(&mut body, i as i64);
        put_varint(&mut body, k.len() as i64);
        body.extend_from_slice(k);
        match v {
            Some(v) => {
                put_varint(&mut body, v.len() as i64);
                body.extend_from_slice(v);
            }
            None => put_varint(&mut body, -1),
        }
        put_varint(&mut body, headers.len() as i64);
        for (hk, hv) in headers.iter() {
            put_varint(&mut body, hk.len() as i64);
            body.extend_from_slice(hk);
            put_varint(&mut body, hv.len() as i64);
            body.extend_from_slice(hv);
        }
        put_varint(&mut body_all, body.len() as i64);
        body_all.extend_from_slice(&body);
    }
    let n = records.len() as i32;
    let mut b = batch(base_ts, &[b"x"]);
    b.truncate(61);
    b[8..12].copy_from_slice(&((49 + body_all.len()) as i32).to_be_bytes());
    b[23..27].copy_from_slice(&(n - 1).to_be_bytes());
    b[35..43].copy_from_slice(&(base_ts + n as i64 - 1).to_be_bytes());
    b[57..61].copy_from_slice(&n.to_be_bytes());
    b.extend_from_slice(&body_all);
    let crc = storage::batch::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    BytesMut::from(&b[..])
}

/// Every record readable from the log: (offset, timestamp, key, value), batches' CRCs
/// checked on the way.
pub type KeyedRecord = (i64, i64, Vec<u8>, Option<Vec<u8>>);

pub fn read_records(log: &PartitionLog) -> Vec<KeyedRecord> {
    let r = log
        .read(log.log_start_offset(), usize::MAX, i64::MAX)
        .unwrap();
    let mut out = Vec::new();
    for c in &r.chunks {
        out.extend(records_of_chunk(c));
    }
    out
}

pub fn records_of_chunk(c: &[u8]) -> Vec<KeyedRecord> {
    let mut out = Vec::new();
    for item in storage::batch::BatchIter::validating(c) {
        let (h, b) = item.unwrap();
        let recs = storage::cleaner::records::parse_records(&b[61..], h.records_count)
            .expect("well-formed records");
        for r in recs {
            let offset = h.base_offset + r.offset_delta;
            assert!(
                offset <= h.last_offset(),
                "record past its batch's last offset"
            );
            out.push((
                offset,
                h.base_timestamp + r.timestamp_delta,
                r.key.map(|k| k.to_vec()).unwrap_or_default(),
                r.value.map(|v| v.to_vec()),
            ));
        }
    }
    out
}
