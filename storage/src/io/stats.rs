//! Statistics of one shard's backend, for the broker's metrics: how long fdatasyncs take and
//! how many offsets each one made durable (the group-commit batch), and how many bytes the
//! logs copied on append and read. Plain `Cell`s: the backend lives on one shard thread, so
//! recording costs no atomic and no lock; the broker copies a snapshot out when scraped.
//! Storage stays free of any metrics library.

use std::cell::{Cell, RefCell};

/// Upper bounds (microseconds) of the fsync latency buckets: 50 µs (NVMe with a write cache)
/// to 1 s (a struggling disk); slower syncs land in +Inf.
pub const SYNC_LATENCY_BOUNDS_US: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000,
];

/// Upper bounds (offsets made durable by one fdatasync): powers of two up to 64 Ki.
pub const GROUP_COMMIT_BOUNDS: &[u64] = &[
    1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536,
];

/// Upper bounds of the io_uring queue depth buckets (operations in flight on the ring, the
/// new one included, at each submission): powers of two up to the ring's 256 entries.
pub const QUEUE_DEPTH_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256];

/// A fixed-bucket histogram: per-bucket (not cumulative) counts, the last one is +Inf.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buckets {
    pub bounds: &'static [u64],
    pub counts: Vec<u64>,
    pub sum: u64,
    pub count: u64,
}

impl Buckets {
    pub(crate) fn new(bounds: &'static [u64]) -> Buckets {
        Buckets {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0,
            count: 0,
        }
    }

    pub(crate) fn record(&mut self, v: u64) {
        let i = self.bounds.partition_point(|&b| b < v);
        self.counts[i] += 1;
        self.sum = self.sum.saturating_add(v);
        self.count += 1;
    }
}

/// What the broker reads when scraped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncStatsSnapshot {
    /// fdatasync latency in microseconds.
    pub latency_us: Buckets,
    /// Offsets made durable per leading fdatasync of a log (group commit).
    pub batch_offsets: Buckets,
}

/// The io_uring's queue, for the broker's metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingStatsSnapshot {
    /// Operations submitted (or queued to submit) and not completed yet.
    pub in_flight: u64,
    /// Operations in flight seen by each submission, the new one included.
    pub depth: Buckets,
}

pub(crate) struct SyncStats {
    latency_us: RefCell<Buckets>,
    batch_offsets: RefCell<Buckets>,
    in_flight: Cell<u64>,
}

impl SyncStats {
    pub(crate) fn new() -> SyncStats {
        SyncStats {
            latency_us: RefCell::new(Buckets::new(SYNC_LATENCY_BOUNDS_US)),
            batch_offsets: RefCell::new(Buckets::new(GROUP_COMMIT_BOUNDS)),
            in_flight: Cell::new(0),
        }
    }

    pub(crate) fn record_batch(&self, offsets: u64) {
        self.batch_offsets.borrow_mut().record(offsets);
    }

    pub(crate) fn snapshot(&self) -> SyncStatsSnapshot {
        SyncStatsSnapshot {
            latency_us: self.latency_us.borrow().clone(),
            batch_offsets: self.batch_offsets.borrow().clone(),
        }
    }

    /// Counts a sync in flight until the guard drops, then records its latency.
    pub(crate) fn start_sync(&self) -> SyncTimer<'_> {
        self.in_flight.set(self.in_flight.get() + 1);
        SyncTimer {
            stats: self,
            started: std::time::Instant::now(),
        }
    }

    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight.get()
    }
}

/// Bytes through the logs of one backend, and the copies storage made of them: what the
/// broker reports as bytes copied per byte written or served. Counted when an append is
/// called (accepted or not by the disk later) and when a read returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyStatsSnapshot {
    /// Batch bytes handed to `append` / `append_at_offsets` and queued for writing.
    pub appended_bytes: u64,
    /// Of those, bytes copied into a buffer of storage's own before the write: whole
    /// LogAppendTime batches, whose timestamp and attributes are under the CRC. Every
    /// other batch is written from the caller's buffer.
    pub append_copied_bytes: u64,
    /// Header bytes written from a buffer of storage's own instead of the caller's: the
    /// first 16 of each batch not copied whole (base offset, batch length, partition
    /// leader epoch; outside the CRC). Not record data; 0 when the header was already
    /// right (an offset-preserving append at the same epoch).
    pub append_header_bytes: u64,
    /// Batch bytes returned by `read`. Reads never copy: each chunk is a slice of a
    /// segment's mmap, so there is no copied-bytes counterpart.
    pub read_bytes: u64,
}

#[derive(Default)]
pub(crate) struct CopyStats {
    s: Cell<CopyStatsSnapshot>,
}

impl CopyStats {
    pub(crate) fn record_append(&self, appended: u64, copied: u64, header: u64) {
        let mut s = self.s.get();
        s.appended_bytes += appended;
        s.append_copied_bytes += copied;
        s.append_header_bytes += header;
        self.s.set(s);
    }

    pub(crate) fn record_read(&self, bytes: u64) {
        let mut s = self.s.get();
        s.read_bytes += bytes;
        self.s.set(s);
    }

    pub(crate) fn snapshot(&self) -> CopyStatsSnapshot {
        self.s.get()
    }
}

pub(crate) struct SyncTimer<'a> {
    stats: &'a SyncStats,
    started: std::time::Instant,
}

impl Drop for SyncTimer<'_> {
    fn drop(&mut self) {
        let s = self.stats;
        s.in_flight.set(s.in_flight.get().saturating_sub(1));
        s.latency_us
            .borrow_mut()
            .record(self.started.elapsed().as_micros() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_values_when_recorded_then_land_in_first_bucket_at_or_above() {
        let mut b = Buckets::new(&[1, 2, 4]);
        for v in [0, 1, 2, 3, 4, 5, 100] {
            b.record(v);
        }
        assert_eq!(b.counts, vec![2, 1, 2, 2]);
        assert_eq!(b.count, 7);
        assert_eq!(b.sum, 115);
    }
}
