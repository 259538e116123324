//! The second pass of an import: a verified partition brought into Strom's log at its own
//! offsets (the planned segments hard-linked, the other batches appended in bounded chunks),
//! and its producer snapshot carried over.

use bytes::BytesMut;
use storage::producer_snapshot;

use super::report::Report;
use super::verify::LinkPlan;
use crate::migrate::metrics::ImportMetrics;
use crate::migrate::source::{BatchReader, SourcePartition};
use crate::migrate::target::Target;
use crate::migrate::MigrateError;

/// Verified batches are appended in chunks of about this size: with one batch being read,
/// this bounds the importer's memory whatever the segment size.
const CHUNK_BYTES: usize = 4 << 20;

/// Brings a verified partition to Strom at its offsets: the planned segments hard-linked,
/// the others' batches appended. Returns (batches, bytes).
pub(super) async fn adopt_partition(
    target: &mut Target,
    p: &SourcePartition,
    plan: LinkPlan,
    report: &mut Report,
    metrics: &ImportMetrics,
) -> Result<(usize, u64), MigrateError> {
    let mut r = if plan.linked.is_empty() {
        target.open_partition(&p.topic, p.partition)?;
        BatchReader::open(&p.dir)?
    } else {
        target.link_segments(&p.topic, p.partition, &plan.linked, plan.end)?;
        report.linked.0 += plan.linked.len();
        report.linked.1 += plan.bytes;
        metrics.appended(&p.topic, plan.batches, plan.bytes as usize);
        BatchReader::files(plan.rest)
    };
    let (mut batches, mut bytes) = (0usize, 0u64);
    let mut chunk = BytesMut::new();
    loop {
        let next = r.next_batch()?;
        if let Some((_, b)) = &next {
            chunk.extend_from_slice(b);
        }
        if !chunk.is_empty() && (next.is_none() || chunk.len() >= CHUNK_BYTES) {
            let done = target
                .append(&p.topic, p.partition, &chunk.split().freeze())
                .await?;
            batches += done.batches;
            bytes += done.bytes as u64;
            metrics.appended(&p.topic, done.batches, done.bytes);
        }
        if next.is_none() {
            break;
        }
    }
    if batches != r.batches {
        return Err(MigrateError::Target(format!(
            "{}-{}: {} batches read, {batches} appended (did the Kafka dir change?)",
            p.topic, p.partition, r.batches
        )));
    }
    metrics.partition_appended(&p.topic);
    Ok((batches + plan.batches, bytes + plan.bytes))
}

/// Copies the newest Kafka producer snapshot at or below the log end (re-encoded from its
/// CRC-checked entries). Without one Strom rebuilds producer state from the batches.
pub(super) fn carry_snapshot(
    target: &Target,
    p: &SourcePartition,
) -> Result<Result<(), String>, MigrateError> {
    let log = &target.logs[&(p.topic.clone(), p.partition)].log;
    let end = log.log_end_offset();
    let Some(offset) = producer_snapshot::list(&p.dir)?
        .into_iter()
        .filter(|&o| o <= end)
        .max()
    else {
        return Ok(Err(
            "no producer snapshot; producer state is rebuilt from the batches".into(),
        ));
    };
    let path = producer_snapshot::snapshot_path(&p.dir, offset);
    match producer_snapshot::read(&path) {
        Ok(entries) => {
            producer_snapshot::write(log.dir(), offset, &entries)?;
            Ok(Ok(()))
        }
        Err(e) => Ok(Err(format!(
            "{} unreadable ({e}); producer state is rebuilt from the batches",
            path.display()
        ))),
    }
}
