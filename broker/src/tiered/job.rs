//! The shard's side of tiered storage, one housekeeping pass every
//! `remote.log.manager.task.interval.ms` over the remote-enabled partitions it homes
//! (Kafka's `RLMCopyTask` and `RLMExpirationTask`): decide the next segment to copy, delete
//! local segments beyond local retention that are durably copied, and expire remote
//! segments beyond total retention. Only metadata work here; transfers go to the remote
//! runtime.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use storage::remote::keys::{self, FileKind, PartitionIdent};
use storage::remote::manifest::{RemoteSegment, SegmentState};
use storage::remote::transfer::{SegmentUpload, Source};
use storage::{producer_snapshot, Bytes, ClosedSegment, RetentionPolicy};

use super::{RemoteLogManager, RemotePartition};
use crate::partition::Partition;
use crate::shard::ShardState;

/// Runs one pass over the shard's remote-enabled partitions.
pub fn remote_log_pass(state: &Rc<ShardState>, now_ms: i64) {
    let Some(manager) = state.ctx.remote.clone() else {
        return;
    };
    let partitions: Vec<_> = state.partitions.borrow().values().cloned().collect();
    for p in partitions {
        let settings = p.settings();
        if !settings.tiered.enabled || settings.compact {
            continue;
        }
        let Some(rp) = remote_partition(state, &manager, &p) else {
            continue;
        };
        if !rp.recovered.load(Ordering::Acquire) {
            continue;
        }
        pass(&manager, &rp, &p, now_ms);
    }
}

/// The partition's remote state, opened (and its orphans cleaned) on first use.
pub(super) fn remote_partition(
    state: &ShardState,
    manager: &Arc<RemoteLogManager>,
    p: &Partition,
) -> Option<Arc<RemotePartition>> {
    if let Some(rp) = manager.partition(&p.topic, p.index) {
        return Some(rp);
    }
    let meta = state.ctx.catalog.snapshot().get(&p.topic).cloned()?;
    let prefix = prefix_of(p, *meta.id.as_bytes())?;
    let opened = RemotePartition::open(
        (p.topic.clone(), p.index),
        p.log.dir().to_path_buf(),
        prefix,
        manager.store().clone(),
        manager.metrics.clone(),
    );
    let rp = match opened {
        Ok(rp) => manager.insert(Arc::new(rp)),
        Err(e) => {
            tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "remote manifest unreadable; not tiering");
            return None;
        }
    };
    manager.spawn(rp.clone().recover());
    Some(rp)
}

/// The partition's object key prefix (`strom.remote.prefix` rendered), `None` (logged) when
/// its template or tenant is refused.
pub fn prefix_of(p: &Partition, topic_id: [u8; 16]) -> Option<String> {
    let t = &p.settings().tiered;
    let ident = PartitionIdent {
        tenant: &t.tenant,
        topic: &p.topic,
        partition: p.index,
        topic_id,
    };
    match keys::render(&t.prefix_template, &ident) {
        Ok(prefix) => Some(prefix),
        Err(e) => {
            tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "no remote prefix; not tiering");
            None
        }
    }
}

fn pass(manager: &Arc<RemoteLogManager>, rp: &Arc<RemotePartition>, p: &Partition, now_ms: i64) {
    let settings = p.settings();
    let manifest = rp.view();
    let copied_end = manifest.copied_end();
    let log_start = p.log.log_start_offset();
    let closed = p.log.segments_to_tier(log_start, usize::MAX);
    let uncopied: Vec<&ClosedSegment> = closed
        .iter()
        .filter(|s| copied_end.is_none_or(|e| s.base_offset >= e))
        .collect();
    let active_bytes = p.log.size_bytes() - closed.iter().map(|s| s.size_bytes).sum::<u64>();
    let local_only: u64 = uncopied.iter().map(|s| s.size_bytes).sum::<u64>() + active_bytes;
    manager.metrics.set_partition(
        &p.topic,
        p.index,
        manifest.remote_size_bytes(),
        uncopied.iter().map(|s| s.size_bytes).sum(),
        uncopied.len(),
    );

    // Copy: the oldest uncopied closed segment wholly below min(HW, LSO), as Kafka.
    let upper = p.high_watermark().min(p.last_stable_offset());
    if let Some(seg) = uncopied.first().filter(|s| s.next_offset <= upper) {
        if !rp.copying.swap(true, Ordering::AcqRel) {
            let (meta, upload) = describe(p, rp, seg, now_ms);
            let slots = manager.copy_slots.clone();
            let rp2 = rp.clone();
            manager.spawn(async move {
                if let Ok(_permit) = slots.acquire_owned().await {
                    rp2.copy(meta, upload).await;
                }
                rp2.copying.store(false, Ordering::Release);
            });
        }
    }

    // Local retention, bounded by what is durably copied (Kafka deletes a tiered segment
    // locally only once its copy is finished).
    if let Some(end) = copied_end {
        let policy = RetentionPolicy {
            retention_ms: settings.tiered.local_retention_ms,
            retention_bytes: settings.tiered.local_retention_bytes,
            delete: true,
        };
        match p
            .log
            .delete_old_segments(&policy, p.high_watermark().min(end), now_ms)
        {
            Ok(out) if !out.deleted.is_empty() => {
                tracing::info!(topic = %p.topic, partition = p.index, segments = ?out.deleted, bytes = out.bytes,
                    local_log_start_offset = out.log_start_offset, "deleted local copies of remote segments");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "local retention failed")
            }
        }
    }

    // Total retention over remote + local, and pending deletions (orphans, a store that
    // was down).
    if !rp.cleaning.swap(true, Ordering::AcqRel) {
        let expired = manifest.expired(
            settings.retention.retention_ms,
            settings.retention.retention_bytes,
            local_only,
            now_ms,
        );
        let pending = manifest
            .segments()
            .iter()
            .any(|s| s.state == SegmentState::DeleteSegmentStarted);
        if expired.is_empty() && !pending {
            rp.cleaning.store(false, Ordering::Release);
        } else {
            let rp2 = rp.clone();
            manager.spawn(async move {
                if expired.is_empty() {
                    rp2.clean().await;
                } else {
                    rp2.expire(expired).await;
                }
                rp2.cleaning.store(false, Ordering::Release);
            });
        }
    }
}

/// The manifest entry and the objects of one segment (Kafka's `LogSegmentData`).
fn describe(
    p: &Partition,
    rp: &RemotePartition,
    seg: &ClosedSegment,
    now_ms: i64,
) -> (RemoteSegment, SegmentUpload) {
    let id: String = uuid::Uuid::new_v4().simple().to_string();
    let epochs = p.log.leader_epochs_for(seg.base_offset, seg.next_offset);
    let file_or_empty = |path: &std::path::Path, empty: fn() -> Bytes| {
        if path.exists() {
            Source::File(path.to_path_buf())
        } else {
            Source::Bytes(empty())
        }
    };
    let snapshot = producer_snapshot::snapshot_path(p.log.dir(), seg.next_offset);
    let files = vec![
        (FileKind::Log, Source::File(seg.log.clone())),
        (
            FileKind::OffsetIndex,
            file_or_empty(&seg.offset_index, Bytes::new),
        ),
        (
            FileKind::TimeIndex,
            file_or_empty(&seg.time_index, Bytes::new),
        ),
        (
            FileKind::TxnIndex,
            file_or_empty(&seg.txn_index, Bytes::new),
        ),
        (
            FileKind::ProducerSnapshot,
            file_or_empty(&snapshot, || Bytes::from(producer_snapshot::encode(&[]))),
        ),
        (
            FileKind::LeaderEpochs,
            Source::Bytes(Bytes::from(storage::leader_epoch_checkpoint(&epochs))),
        ),
    ];
    let meta = RemoteSegment {
        id: id.clone(),
        base_offset: seg.base_offset,
        end_offset: seg.next_offset - 1,
        max_timestamp_ms: seg.max_timestamp_ms,
        size_bytes: seg.size_bytes,
        leader_epochs: epochs,
        state: SegmentState::CopySegmentStarted,
        updated_ms: now_ms,
    };
    let upload = SegmentUpload {
        prefix: rp.prefix.clone(),
        segment_id: id,
        base_offset: seg.base_offset,
        files,
    };
    (meta, upload)
}
