//! What tiered storage asks of a log: its closed segments as files to copy, and the leader
//! epochs that cover one. Deleting local copies is retention's `delete_old_segments` with
//! the local limits and a bound at the copied end (the broker passes both).

use std::path::PathBuf;

use super::PartitionLog;
use crate::segment::file_name;

/// A closed segment (never the active one), as tiered storage copies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedSegment {
    pub base_offset: i64,
    /// One past its last offset (the next segment's base).
    pub next_offset: i64,
    pub size_bytes: u64,
    pub max_timestamp_ms: i64,
    pub log: PathBuf,
    pub offset_index: PathBuf,
    pub time_index: PathBuf,
    pub txn_index: PathBuf,
}

impl PartitionLog {
    /// The closed segments from the one holding `from` on, oldest first, at most `limit`.
    /// Reads no segment data (the max timestamp may load the time index once).
    pub fn segments_to_tier(&self, from: i64, limit: usize) -> Vec<ClosedSegment> {
        let inner = &self.inner;
        let active = inner.active();
        inner
            .segments_from(from)
            .into_iter()
            .filter(|s| !std::rc::Rc::ptr_eq(s, &active) && s.next_offset.get() > from)
            .take(limit)
            .map(|s| {
                let path = |ext| inner.dir.join(file_name(s.base_offset, ext));
                ClosedSegment {
                    base_offset: s.base_offset,
                    next_offset: s.next_offset.get(),
                    size_bytes: s.size.get(),
                    max_timestamp_ms: s.largest_timestamp(),
                    log: path("log"),
                    offset_index: path("index"),
                    time_index: path("timeindex"),
                    txn_index: path("txnindex"),
                }
            })
            .collect()
    }

    /// Kafka's leader-epoch-checkpoint text for the epochs covering `[base, next)`: the
    /// epoch in force at `base` (starting at `base`), then those starting inside.
    pub fn leader_epochs_for(&self, base: i64, next: i64) -> Vec<(i32, i64)> {
        let all = self.leader_epochs();
        let mut out: Vec<(i32, i64)> = Vec::new();
        if let Some(&(e, _)) = all.iter().rev().find(|(_, start)| *start <= base) {
            out.push((e, base));
        }
        out.extend(all.iter().filter(|(_, s)| *s > base && *s < next));
        out
    }
}

/// `0\n<count>\n<epoch> <offset>\n...` (Kafka's checkpoint file format, version 0).
pub fn leader_epoch_checkpoint(entries: &[(i32, i64)]) -> String {
    let mut s = format!("0\n{}\n", entries.len());
    for (e, o) in entries {
        s.push_str(&format!("{e} {o}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_epochs_when_rendering_checkpoint_then_kafka_format() {
        assert_eq!(
            leader_epoch_checkpoint(&[(0, 5), (2, 9)]),
            "0\n2\n0 5\n2 9\n"
        );
        assert_eq!(leader_epoch_checkpoint(&[]), "0\n0\n");
    }
}
