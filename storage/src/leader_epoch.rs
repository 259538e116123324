//! The leader epoch cache of one partition: which leader epoch started at which offset,
//! persisted as Kafka's `leader-epoch-checkpoint` in the partition dir
//! ("0\n<count>\n<epoch> <start offset>\n...", see `logdir`). Kafka's `LeaderEpochFileCache`:
//! OffsetForLeaderEpoch answers from it, and it follows the log's both ends (truncation
//! drops entries at and above the cut, a new log start moves the first entry up to it).
//!
//! The file is rewritten (tmp + fsync + rename) whenever the entries change. That happens when
//! a partition first gets a leader epoch, and when the log start moves or the log is
//! truncated: never per append while the epoch stays the same.

use std::path::PathBuf;

use crate::error::StorageError;
use crate::logdir;

/// Kafka's `UNDEFINED_EPOCH` / `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

pub(crate) struct LeaderEpochCache {
    dir: PathBuf,
    /// (epoch, start offset), both strictly increasing.
    entries: Vec<(i32, i64)>,
}

impl LeaderEpochCache {
    /// Loads the checkpoint and fits it to the log `[log_start, log_end)` as Kafka does at
    /// load: entries at or past the log end are dropped, the first is moved up to the log
    /// start. An unreadable file is rebuilt from what the log says (`first_batch_epoch`).
    pub fn load(
        dir: PathBuf,
        log_start: i64,
        log_end: i64,
        first_batch_epoch: impl FnOnce() -> Option<i32>,
    ) -> Result<LeaderEpochCache, StorageError> {
        let entries = match logdir::read_leader_epoch_checkpoint(&dir) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "unreadable leader-epoch-checkpoint; rebuilding it");
                Vec::new()
            }
        };
        let mut cache = LeaderEpochCache { dir, entries };
        let mut changed = cache.entries.windows(2).any(|w| w[0] >= w[1]);
        if changed {
            cache.entries.clear();
        }
        changed |= cache.drop_from(log_end);
        changed |= cache.drop_below(log_start);
        if cache.entries.is_empty() {
            // No checkpoint (a log written before Strom kept one): every batch Strom wrote
            // carries the epoch it was appended under, and the first one tells where the
            // cache starts.
            // Only asked then: reading the first batch maps a segment that a clean open
            // would otherwise not touch.
            if let Some(epoch) = (log_end > log_start)
                .then(first_batch_epoch)
                .flatten()
                .filter(|e| *e >= 0)
            {
                cache.entries.push((epoch, log_start));
                changed = true;
            }
        }
        if changed {
            cache.persist()?;
        }
        Ok(cache)
    }

    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.0)
    }

    /// Kafka's `assign`: a new epoch starting at `start_offset`. An epoch not newer than the
    /// latest is ignored (Kafka logs and ignores it too).
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool, StorageError> {
        if epoch < 0 || self.latest_epoch().is_some_and(|e| e >= epoch) {
            return Ok(false);
        }
        // An older epoch whose start is at or past the new one's never led any record.
        self.entries.retain(|&(_, o)| o < start_offset);
        self.entries.push((epoch, start_offset));
        self.persist()?;
        Ok(true)
    }

    /// Kafka's `truncateFromStart`: entries wholly below `log_start` go; the last of them
    /// stays, starting at `log_start`.
    pub fn truncate_from_start(&mut self, log_start: i64) -> Result<(), StorageError> {
        if self.drop_below(log_start) {
            self.persist()?;
        }
        Ok(())
    }

    /// Kafka's `truncateFromEnd`: entries starting at or past `end` go.
    pub fn truncate_from_end(&mut self, end: i64) -> Result<(), StorageError> {
        if self.drop_from(end) {
            self.persist()?;
        }
        Ok(())
    }

    fn drop_below(&mut self, log_start: i64) -> bool {
        let below = self
            .entries
            .iter()
            .take_while(|&&(_, o)| o <= log_start)
            .count();
        if below == 0 || (below == 1 && self.entries[0].1 == log_start) {
            return false;
        }
        let (epoch, _) = self.entries[below - 1];
        self.entries.drain(..below);
        self.entries.insert(0, (epoch, log_start));
        true
    }

    fn drop_from(&mut self, end: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|&(_, o)| o < end);
        self.entries.len() != before
    }

    /// Kafka's `endOffsetFor(requestedEpoch, logEndOffset)`: (epoch, end offset) of the
    /// largest epoch <= `requested`, the end being the next epoch's start (or the log end
    /// for the latest epoch); (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) when unknown.
    pub fn end_offset_for(&self, requested: i32, log_end: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end);
        }
        let Some(higher) = self.entries.iter().find(|&&(e, _)| e > requested) else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match self.entries.iter().rev().find(|&&(e, _)| e <= requested) {
            // Older than anything the cache knows: Kafka answers with the requested epoch
            // and the first known epoch's start.
            None => (requested, higher.1),
            Some(&(floor, _)) => (floor, higher.1),
        }
    }

    fn persist(&self) -> Result<(), StorageError> {
        logdir::write_leader_epoch_checkpoint(&self.dir, &self.entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> (tempfile::TempDir, LeaderEpochCache) {
        let dir = tempfile::tempdir().unwrap();
        logdir::write_leader_epoch_checkpoint(dir.path(), entries).unwrap();
        let c = LeaderEpochCache::load(dir.path().to_path_buf(), 0, i64::MAX, || None).unwrap();
        (dir, c)
    }

    #[test]
    fn given_epochs_when_asking_end_offsets_then_answers_as_kafkas_cache() {
        let (_d, c) = cache(&[(1, 10), (3, 20), (5, 30)]);
        assert_eq!(c.end_offset_for(-1, 40), (-1, -1));
        assert_eq!(c.end_offset_for(5, 40), (5, 40));
        assert_eq!(c.end_offset_for(3, 40), (3, 30));
        assert_eq!(c.end_offset_for(4, 40), (3, 30));
        assert_eq!(c.end_offset_for(0, 40), (0, 10));
        assert_eq!(c.end_offset_for(6, 40), (-1, -1));
        let (_d, empty) = cache(&[]);
        assert_eq!(empty.end_offset_for(0, 5), (-1, -1));
    }

    #[test]
    fn given_log_start_moved_when_truncating_from_start_then_first_entry_moves_up_and_persists() {
        let (d, mut c) = cache(&[(1, 10), (3, 20), (5, 30)]);
        c.truncate_from_start(25).unwrap();
        assert_eq!(c.entries(), &[(3, 25), (5, 30)]);
        c.truncate_from_start(30).unwrap();
        assert_eq!(c.entries(), &[(5, 30)]);
        assert_eq!(
            logdir::read_leader_epoch_checkpoint(d.path()).unwrap(),
            vec![(5, 30)]
        );
        c.truncate_from_end(30).unwrap();
        assert!(c.entries().is_empty());
        assert!(c.assign(7, 30).unwrap());
        assert!(!c.assign(6, 40).unwrap());
        assert_eq!(
            std::fs::read_to_string(d.path().join("leader-epoch-checkpoint")).unwrap(),
            "0\n1\n7 30\n"
        );
    }

    #[test]
    fn given_checkpoint_past_the_log_when_loading_then_fitted_to_the_log() {
        let dir = tempfile::tempdir().unwrap();
        logdir::write_leader_epoch_checkpoint(dir.path(), &[(0, 0), (2, 50), (4, 90)]).unwrap();
        let c = LeaderEpochCache::load(dir.path().to_path_buf(), 10, 60, || None).unwrap();
        assert_eq!(c.entries(), &[(0, 10), (2, 50)]);
        let none = tempfile::tempdir().unwrap();
        let c = LeaderEpochCache::load(none.path().to_path_buf(), 7, 9, || Some(0)).unwrap();
        assert_eq!(c.entries(), &[(0, 7)]);
    }
}
