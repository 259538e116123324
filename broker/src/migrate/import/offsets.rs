//! Kafka's committed group offsets, folded from its `__consumer_offsets` partitions as Kafka
//! replays them (the import re-keys them into Strom's own partition of each group).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use kafka_protocol::records::{Record, RecordBatchDecoder};

use crate::coordinator::group::records::GroupRecord;
use crate::coordinator::group::topic_regex::TopicRegex;
use crate::migrate::client::Committed;
use crate::migrate::source::{BatchReader, SourcePartition};
use crate::migrate::MigrateError;

/// Committed offsets of Kafka's `__consumer_offsets` partitions, per group.
pub(super) fn read_group_offsets(
    parts: &[SourcePartition],
    groups_re: &TopicRegex,
) -> Result<BTreeMap<String, GroupOffsets>, MigrateError> {
    let mut fold = OffsetsFold::default();
    for p in parts {
        let mut r = BatchReader::open(&p.dir)?;
        while let Some((h, b)) = r.next_batch()? {
            let mut buf = Bytes::from(b);
            let sets = RecordBatchDecoder::decode_all(&mut buf).map_err(|e| {
                MigrateError::Source(format!(
                    "{}: batch at offset {}: {e:#}",
                    p.dir.display(),
                    h.base_offset
                ))
            })?;
            for set in sets {
                for rec in &set.records {
                    fold.apply(rec);
                }
            }
        }
    }
    let mut out = fold.committed;
    out.retain(|g, _| groups_re.matches(g));
    Ok(out)
}

/// One group's committed offsets by (topic, partition).
pub(super) type GroupOffsets = BTreeMap<(String, i32), Committed>;
type PendingCommit = (String, (String, i32), Option<Committed>);

/// Kafka's offset-commit replay: the last value per (group, topic, partition) wins, a
/// tombstone deletes, transactional commits count only once their commit marker is seen.
#[derive(Default)]
pub(super) struct OffsetsFold {
    pub(super) committed: BTreeMap<String, GroupOffsets>,
    /// Per producer id: (group, topic-partition, commit or tombstone) awaiting the marker.
    pending: BTreeMap<i64, Vec<PendingCommit>>,
    unknown: BTreeSet<i16>,
}

impl OffsetsFold {
    pub(super) fn apply(&mut self, r: &Record) {
        if let Some(commit) = crate::coordinator::log::control_commit(r) {
            for (g, tp, v) in self.pending.remove(&r.producer_id).unwrap_or_default() {
                if commit {
                    self.set(g, tp, v);
                }
            }
            return;
        }
        let Some(key) = &r.key else { return };
        match GroupRecord::decode(key, r.value.as_deref()) {
            Ok(Some(GroupRecord::Offset {
                group,
                topic,
                partition,
                value,
            })) => {
                let v = value.map(|c| (c.offset, c.leader_epoch, c.metadata));
                if r.transactional {
                    let pending = self.pending.entry(r.producer_id).or_default();
                    pending.push((group, (topic, partition), v));
                } else {
                    self.set(group, (topic, partition), v);
                }
            }
            Ok(_) => {}
            Err(e) => {
                let version = key
                    .get(..2)
                    .map_or(-1, |k| i16::from_be_bytes([k[0], k[1]]));
                if self.unknown.insert(version) {
                    tracing::warn!(version, error = %e, "__consumer_offsets record not understood; skipped");
                }
            }
        }
    }

    fn set(&mut self, group: String, tp: (String, i32), v: Option<Committed>) {
        let offsets = self.committed.entry(group.clone()).or_default();
        match v {
            Some(v) => {
                offsets.insert(tp, v);
            }
            None => {
                offsets.remove(&tp);
                if offsets.is_empty() {
                    self.committed.remove(&group);
                }
            }
        }
    }
}
