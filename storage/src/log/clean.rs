//! The log cleaner's side of a log.

use std::rc::Rc;

use super::PartitionLog;
use crate::clock::now_ms;
use crate::error::StorageError;
use crate::segment::Segment;

/// Log compaction (see `crate::cleaner`): planning and the swap run here, on the shard,
/// because they read and change the segment list; the rewrite runs off the shard.
impl PartitionLog {
    /// Closed segments with the offset where each one's successor starts, first to last.
    fn closed_segments(&self) -> Vec<(Rc<Segment>, i64)> {
        let segs = self.inner.segments.borrow();
        let list: Vec<_> = segs.iter().map(|(b, s)| (*b, s.clone())).collect();
        list.windows(2).map(|w| (w[0].1.clone(), w[1].0)).collect()
    }

    /// How much of the log is dirty, given the cleaner checkpoint (Kafka's
    /// `cleanableOffsets`): from the checkpoint (or the log start, if the checkpoint is
    /// out of the log) to the active segment, or to the first segment holding a record
    /// younger than `min.compaction.lag.ms` or reaching past the last stable offset
    /// `lso` (an open transaction's data is not cleaned, nor counted as dirty).
    pub fn cleanable(
        &self,
        checkpoint: i64,
        cfg: &crate::cleaner::CleanerConfig,
        now: i64,
        lso: i64,
    ) -> crate::cleaner::Cleanable {
        let inner = &self.inner;
        let log_start = inner.log_start.get();
        let first_dirty = if checkpoint < log_start || checkpoint > inner.log_end.get() {
            log_start
        } else {
            checkpoint
        };
        let mut first_uncleanable = inner.active().base_offset;
        let mut out = crate::cleaner::Cleanable {
            first_dirty,
            ..Default::default()
        };
        let mut first_dirty_ts = None;
        for (seg, next) in self.closed_segments() {
            if next <= first_dirty {
                out.clean_bytes += seg.size.get();
                continue;
            }
            let (max_ts, _) = seg.max_ts();
            let too_young = cfg.min_compaction_lag_ms > 0
                && max_ts > now.saturating_sub(cfg.min_compaction_lag_ms);
            if too_young || next > lso {
                first_uncleanable = first_uncleanable.min(seg.base_offset.max(first_dirty));
                break;
            }
            first_dirty_ts.get_or_insert(max_ts);
            out.dirty_bytes += seg.size.get();
        }
        out.first_uncleanable = first_uncleanable;
        out.overdue = cfg.max_compaction_lag_ms < i64::MAX
            && first_dirty_ts
                .is_some_and(|t| t >= 0 && t < now.saturating_sub(cfg.max_compaction_lag_ms));
        out
    }

    /// A cleaning pass over every closed segment below the first uncleanable offset, or
    /// None when there is no closed segment to clean. `producers`: the active producers
    /// (the batch holding each one's last record is kept, emptied if need be, so producer
    /// state survives a reload as in Kafka) and the last stable offset, past which the
    /// pass does not go (Kafka's `cleanableOffsets`): every transaction it reads is decided.
    pub fn clean_task(
        &self,
        checkpoint: i64,
        cfg: &crate::cleaner::CleanerConfig,
        now: i64,
        producers: crate::cleaner::ProducerState,
    ) -> Result<Option<crate::cleaner::CleanTask>, StorageError> {
        self.inner.check_failed()?;
        self.inner.io.poll_completions();
        let cleanable = self.cleanable(checkpoint, cfg, now, producers.last_stable_offset);
        let mut sources = Vec::new();
        for (seg, next) in self.closed_segments() {
            if next > cleanable.first_uncleanable {
                break;
            }
            let size = seg.written_size.get();
            let data = if size == 0 {
                bytes::Bytes::new()
            } else {
                seg.slice(0, size)
                    .map_err(|e| StorageError::io(e, seg.log_path()))?
            };
            sources.push(crate::cleaner::SourceSegment {
                base: seg.base_offset,
                next,
                data,
            });
        }
        if sources.is_empty() {
            return Ok(None);
        }
        // Markers may lie past the cleaned range (even in the active segment): every
        // entry of a transaction that starts below it.
        let mut aborted = Vec::new();
        for seg in self.inner.segments.borrow().values() {
            aborted.extend(
                seg.txn_index
                    .borrow()
                    .entries()
                    .iter()
                    .filter(|t| t.first_offset < cleanable.first_uncleanable)
                    .copied(),
            );
        }
        Ok(Some(crate::cleaner::CleanTask {
            dir: self.inner.dir.clone(),
            log_config: self.inner.config.clone(),
            config: cfg.clone(),
            now_ms: now,
            sources,
            cleanable,
            producers,
            aborted,
        }))
    }

    /// Whether the segments a group replaces are still the ones it read.
    fn group_current(&self, g: &crate::cleaner::CleanedGroup) -> bool {
        let segs = self.inner.segments.borrow();
        let active = segs.keys().next_back().copied();
        g.old.iter().all(|&(base, size)| {
            Some(base) != active && segs.get(&base).is_some_and(|s| s.size.get() == size)
        })
    }

    /// Swaps the cleaned segments in (module doc of `crate::cleaner::swap`). A group whose
    /// old segments changed meanwhile (retention, truncation) is discarded. Readers
    /// holding data of replaced segments keep reading it (their mmaps stay valid).
    pub async fn install_cleaned(
        &self,
        outcome: crate::cleaner::CleanOutcome,
    ) -> Result<(), StorageError> {
        use crate::cleaner::swap;
        let inner = &self.inner;
        let dir = inner.dir.clone();
        let groups = outcome.groups;
        for (i, g) in groups.iter().enumerate() {
            let r = self.install_group(g).await;
            if r.is_err() {
                // Their `.cleaned` files would otherwise wait for the next open.
                for later in &groups[i + 1..] {
                    swap::discard(&dir, later.base);
                }
            }
            r?;
        }
        Ok(())
    }

    async fn install_group(&self, g: &crate::cleaner::CleanedGroup) -> Result<(), StorageError> {
        use crate::cleaner::swap;
        let inner = &self.inner;
        let dir = inner.dir.clone();
        {
            let stale = || {
                tracing::info!(dir = %dir.display(), base = g.base,
                    "segments changed while cleaning; dropping the cleaned group");
                swap::discard(&dir, g.base);
            };
            if inner.check_failed().is_err() || !self.group_current(g) {
                stale();
                return Ok(());
            }
            swap::commit(&dir, g.base).map_err(|e| StorageError::io(e, &dir))?;
            inner
                .io
                .sync_dir(&dir)
                .await
                .map_err(|e| StorageError::io(e, &dir))?;
            if inner.check_failed().is_err() || !self.group_current(g) {
                stale();
                return Ok(());
            }
            // From here to the new segment's insertion nothing awaits: no reader or
            // writer sees the segment list half swapped.
            let r = (|| -> Result<(), StorageError> {
                // As Kafka's replaceSegments: the old files are renamed `.deleted` and
                // unlinked after file.delete.delay.ms by the shard's housekeeping.
                let bases: Vec<i64> = g.old.iter().map(|&(b, _)| b).collect();
                inner.retire_segments(&bases, now_ms())?;
                swap::finish(&dir, g.base).map_err(|e| StorageError::io(e, &dir))?;
                let seg = Segment::open(&dir, g.base, &inner.config, now_ms())
                    .map_err(|e| StorageError::io(e, &dir))?;
                let next = inner
                    .segments
                    .borrow()
                    .range(g.base..)
                    .next()
                    .map(|(b, _)| *b)
                    .expect("the active segment follows");
                seg.open_trusted(next);
                seg.set_active(false)
                    .map_err(|e| StorageError::io(e, seg.log_path()))?;
                inner.segments.borrow_mut().insert(g.base, Rc::new(seg));
                Ok(())
            })();
            if let Err(e) = r {
                // Recovery at the next open completes the swap from the files.
                inner.fail(format!("swapping in cleaned segment {} failed", g.base), &e);
                return Err(e);
            }
            inner
                .io
                .sync_dir(&dir)
                .await
                .map_err(|e| StorageError::io(e, &dir))?;
        }
        Ok(())
    }
}
