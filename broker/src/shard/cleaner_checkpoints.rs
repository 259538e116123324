//! `cleaner-offset-checkpoint` (Kafka's file, in the data dir): where each compacted
//! partition's dirty section starts. Loaded once at start and shared by every shard's cleaner
//! through the broker context.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;

use storage::cleaner::CHECKPOINT_FILE;

/// `cleaner-offset-checkpoint`: where each partition's dirty section starts. Shared by
/// the shards; each pass's result is persisted before the next pass of that partition.
pub struct Checkpoints {
    path: PathBuf,
    offsets: Mutex<HashMap<(String, i32), i64>>,
    /// Serialises file writes so the newest state is the one left on disk.
    write: Mutex<()>,
}

impl Checkpoints {
    pub fn load(data_dir: &std::path::Path) -> Checkpoints {
        let path = data_dir.join(CHECKPOINT_FILE);
        let offsets = storage::logdir::read_checkpoint(&path).unwrap_or_else(|e| {
            // Only costs work: the whole log is treated as dirty.
            tracing::warn!(error = %e, "unreadable cleaner checkpoint; cleaning logs from their start");
            HashMap::new()
        });
        Checkpoints {
            path,
            offsets: Mutex::new(offsets),
            write: Mutex::new(()),
        }
    }

    /// The checkpointed offset, or 0 (the log start) when none.
    pub fn get(&self, topic: &str, partition: i32) -> i64 {
        let map = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&(topic.to_string(), partition))
            .copied()
            .unwrap_or(0)
    }

    pub(super) fn set(&self, topic: &str, partition: i32, offset: i64) {
        let mut map = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        map.insert((topic.to_string(), partition), offset);
    }

    /// Writes the file (blocking: call off the shard), keeping only partitions of
    /// topics that still exist.
    pub(super) fn persist(
        &self,
        live_topics: &HashSet<String>,
    ) -> Result<(), storage::StorageError> {
        let _w = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let entries: Vec<(String, i32, i64)> = {
            let mut map = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
            map.retain(|(t, _), _| live_topics.contains(t));
            map.iter().map(|((t, p), o)| (t.clone(), *p, *o)).collect()
        };
        storage::logdir::write_checkpoint(&self.path, &entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_offsets_set_when_persisted_then_reloaded_without_deleted_topics() {
        let dir = tempfile::tempdir().unwrap();
        let c = Checkpoints::load(dir.path());
        assert_eq!(c.get("a", 0), 0);
        c.set("a", 0, 42);
        c.set("gone", 1, 7);
        c.persist(&["a".to_string()].into_iter().collect()).unwrap();
        let again = Checkpoints::load(dir.path());
        assert_eq!(again.get("a", 0), 42);
        assert_eq!(again.get("gone", 1), 0);
        let text = std::fs::read_to_string(dir.path().join(CHECKPOINT_FILE)).unwrap();
        assert_eq!(text, "0\n1\na 0 42\n", "Kafka's checkpoint format");
    }
}
