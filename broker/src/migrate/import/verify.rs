//! The first pass of an import: every batch of every segment verified (framing, CRC, offsets
//! increasing) before Strom's data dir is opened, and with `--link` the plan of which closed
//! segments are hard-linked.

use std::path::PathBuf;

use crate::migrate::metrics::ImportMetrics;
use crate::migrate::source::{BatchReader, SourcePartition};
use crate::migrate::MigrateError;

/// With `--link`: the closed segments of a partition that are hard-linked, and the
/// segments whose batches are appended after them.
#[derive(Debug, Default)]
pub(super) struct LinkPlan {
    pub(super) linked: Vec<(i64, PathBuf)>,
    /// Offset after the last linked batch.
    pub(super) end: i64,
    pub(super) batches: usize,
    pub(super) bytes: u64,
    pub(super) rest: Vec<(i64, PathBuf)>,
}

/// Reads and verifies every batch of a partition; with `link`, plans which segments are
/// hard-linked: the closed ones from the start whose batches all carry leader epoch 0
/// (what Strom's own copy writes: Strom is leader at epoch 0, and a batch of a later epoch
/// would make clients' epoch validation see the epoch go back). The last segment is never
/// linked, it is Kafka's active one: Strom appends its batches into its own file.
pub(super) fn verify_partition(
    p: &SourcePartition,
    link: bool,
    metrics: &ImportMetrics,
) -> Result<LinkPlan, MigrateError> {
    let mut r = BatchReader::open(&p.dir)?;
    // Per segment: (batches, bytes, offset after the last batch, all at epoch 0).
    let mut segs = vec![(0usize, 0u64, 0i64, true); r.segments().len()];
    while let Some((h, b)) = r.next_batch()? {
        let s = &mut segs[r.segment_index()];
        s.0 += 1;
        s.1 += b.len() as u64;
        s.2 = h.last_offset() + 1;
        s.3 &= h.partition_leader_epoch == 0;
        metrics.verified(&p.topic, 1, b.len());
    }
    metrics.partition_verified(&p.topic);
    let mut plan = LinkPlan::default();
    let n = r.segments().len();
    for (i, seg) in r.segments().iter().enumerate() {
        let (batches, bytes, end, epoch0) = segs[i];
        if link && plan.rest.is_empty() && i + 1 < n && batches > 0 && epoch0 {
            plan.linked.push(seg.clone());
            plan.end = end;
            plan.batches += batches;
            plan.bytes += bytes;
        } else {
            plan.rest.push(seg.clone());
        }
    }
    Ok(plan)
}
