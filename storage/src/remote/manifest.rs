//! The remote log metadata of one partition: Kafka's `RemoteLogSegmentMetadata` records and
//! their state machine (`RemoteLogSegmentState`), kept in `remote-log-manifest.json` in the
//! partition dir instead of Kafka's `__remote_log_metadata` topic (docs/tiered-storage.md
//! says why). Written atomically: tmp file, fsync, rename, fsync of the dir.
//!
//! Invariant the rest relies on: a state is durable *before* the action it permits — an
//! object is only PUT under a `CopySegmentStarted` entry, a local segment only deleted once
//! its `CopySegmentFinished` entry is on disk, an object only deleted under
//! `DeleteSegmentStarted`. So after any crash every object in the store is named by an entry,
//! and the entries still `CopySegmentStarted` name exactly the possibly half-written ones.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The manifest's file name in the partition dir.
pub const MANIFEST_FILE: &str = "remote-log-manifest.json";
const VERSION: u32 = 1;

/// Kafka's `RemoteLogSegmentState` (its names, as in `kafka-remote-log-metadata` dumps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SegmentState {
    CopySegmentStarted,
    CopySegmentFinished,
    DeleteSegmentStarted,
}

/// One remote segment (Kafka's `RemoteLogSegmentMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteSegment {
    /// `RemoteLogSegmentId`: 32 hex digits, new for every copy attempt.
    pub id: String,
    pub base_offset: i64,
    /// Last offset in the segment (inclusive), as Kafka's `endOffset`.
    pub end_offset: i64,
    pub max_timestamp_ms: i64,
    pub size_bytes: u64,
    /// Leader epochs starting within the segment: (epoch, start offset).
    pub leader_epochs: Vec<(i32, i64)>,
    pub state: SegmentState,
    pub updated_ms: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("remote segment {id}: cannot go from {from:?} to {to:?}")]
    BadTransition {
        id: String,
        from: SegmentState,
        to: SegmentState,
    },
    #[error("remote segment {0} is not in the manifest")]
    Unknown(String),
    #[error("remote segment at {base} overlaps the remote log, which ends at {expected}")]
    Overlaps { base: i64, expected: i64 },
    #[error("manifest {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("manifest {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

/// All remote segments of a partition, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    version: u32,
    segments: Vec<RemoteSegment>,
    /// The partition's log start offset when DeleteRecords moved it into the remote log
    /// (Kafka's `logStartOffset`, which bounds both tiers): nothing below it is served, and
    /// segments wholly below it expire. Absent in manifests written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    log_start: Option<i64>,
}

impl Manifest {
    pub fn new() -> Manifest {
        Manifest {
            version: VERSION,
            segments: Vec::new(),
            log_start: None,
        }
    }

    pub fn segments(&self) -> &[RemoteSegment] {
        &self.segments
    }

    fn finished(&self) -> impl Iterator<Item = &RemoteSegment> {
        self.segments
            .iter()
            .filter(|s| s.state == SegmentState::CopySegmentFinished)
    }

    /// The finished segments holding offsets at or above the log start: the served ones.
    fn served(&self) -> impl Iterator<Item = &RemoteSegment> {
        let floor = self.log_start.unwrap_or(i64::MIN);
        self.finished().filter(move |s| s.end_offset >= floor)
    }

    /// The first offset the remote log serves (Kafka's remote log start), if any.
    pub fn remote_log_start(&self) -> Option<i64> {
        let floor = self.log_start.unwrap_or(i64::MIN);
        self.served().map(|s| s.base_offset.max(floor)).min()
    }

    /// The log start DeleteRecords set, if it ever reached into the remote log.
    pub fn log_start(&self) -> Option<i64> {
        self.log_start
    }

    /// DeleteRecords: the partition's log start moves to `offset` (never back). Returns
    /// whether it moved, i.e. whether the manifest must be written.
    pub fn advance_log_start(&mut self, offset: i64) -> bool {
        if self.log_start.is_some_and(|s| s >= offset) {
            return false;
        }
        self.log_start = Some(offset);
        true
    }

    /// One past the last offset copied: the next segment to copy starts here. `None` when
    /// nothing was copied yet.
    pub fn copied_end(&self) -> Option<i64> {
        self.finished().map(|s| s.end_offset + 1).max()
    }

    /// Bytes of the served remote segments (`RemoteLogSizeBytes`).
    pub fn remote_size_bytes(&self) -> u64 {
        self.finished().map(|s| s.size_bytes).sum()
    }

    /// The served segment holding `offset`; none below the log start.
    pub fn covering(&self, offset: i64) -> Option<&RemoteSegment> {
        if self.log_start.is_some_and(|s| offset < s) {
            return None;
        }
        self.served()
            .find(|s| s.base_offset <= offset && offset <= s.end_offset)
    }

    /// Entries whose objects must be deleted: interrupted copies and started deletions.
    pub fn to_clean(&self) -> Vec<RemoteSegment> {
        self.segments
            .iter()
            .filter(|s| s.state != SegmentState::CopySegmentFinished)
            .cloned()
            .collect()
    }

    /// COPY_SEGMENT_STARTED for a new attempt. A copy must not overlap the copied range. It
    /// may leave a hole after it: offsets that left the local log before they could be
    /// copied (DeleteRecords) are gone from both tiers, as in Kafka.
    pub fn start_copy(&mut self, seg: RemoteSegment) -> Result<(), ManifestError> {
        if let Some(end) = self.copied_end() {
            if seg.base_offset < end {
                return Err(ManifestError::Overlaps {
                    base: seg.base_offset,
                    expected: end,
                });
            }
        }
        if seg.state != SegmentState::CopySegmentStarted {
            return Err(ManifestError::BadTransition {
                id: seg.id,
                from: SegmentState::CopySegmentStarted,
                to: seg.state,
            });
        }
        self.segments.push(seg);
        self.segments.sort_by_key(|s| (s.base_offset, s.updated_ms));
        Ok(())
    }

    fn transition(
        &mut self,
        id: &str,
        from: &[SegmentState],
        to: SegmentState,
        now_ms: i64,
    ) -> Result<(), ManifestError> {
        let s = self
            .segments
            .iter_mut()
            .find(|s| s.id == id)
            .ok_or_else(|| ManifestError::Unknown(id.into()))?;
        if !from.contains(&s.state) {
            return Err(ManifestError::BadTransition {
                id: id.into(),
                from: s.state,
                to,
            });
        }
        s.state = to;
        s.updated_ms = now_ms;
        Ok(())
    }

    pub fn finish_copy(&mut self, id: &str, now_ms: i64) -> Result<(), ManifestError> {
        self.transition(
            id,
            &[SegmentState::CopySegmentStarted],
            SegmentState::CopySegmentFinished,
            now_ms,
        )
    }

    /// DELETE_SEGMENT_STARTED: from a finished copy (retention) or an interrupted one
    /// (orphan cleanup). From here on the segment is no longer served.
    pub fn start_delete(&mut self, id: &str, now_ms: i64) -> Result<(), ManifestError> {
        self.transition(
            id,
            &[
                SegmentState::CopySegmentStarted,
                SegmentState::CopySegmentFinished,
                SegmentState::DeleteSegmentStarted,
            ],
            SegmentState::DeleteSegmentStarted,
            now_ms,
        )
    }

    /// DELETE_SEGMENT_FINISHED: the objects are gone, the entry goes too.
    pub fn finish_delete(&mut self, id: &str) -> Result<(), ManifestError> {
        let i = self
            .segments
            .iter()
            .position(|s| s.id == id)
            .ok_or_else(|| ManifestError::Unknown(id.into()))?;
        if self.segments[i].state != SegmentState::DeleteSegmentStarted {
            return Err(ManifestError::BadTransition {
                id: id.into(),
                from: self.segments[i].state,
                to: SegmentState::DeleteSegmentStarted,
            });
        }
        self.segments.remove(i);
        Ok(())
    }

    /// At open: every copy still `CopySegmentStarted` was interrupted (a crash, or a failed
    /// upload whose cleanup did not run); it becomes a deletion. Returns how many.
    pub fn recover(&mut self, now_ms: i64) -> usize {
        let mut n = 0;
        for s in &mut self.segments {
            if s.state == SegmentState::CopySegmentStarted {
                s.state = SegmentState::DeleteSegmentStarted;
                s.updated_ms = now_ms;
                n += 1;
            }
        }
        n
    }

    /// Finished segments that total retention (Kafka's `retention.ms` / `retention.bytes`
    /// over local + remote) expires, oldest first: those wholly below the log start
    /// (DeleteRecords), then those whose newest record is older than
    /// `retention_ms`, then the oldest while the total exceeds `retention_bytes` by at least
    /// the segment's size. `local_only_bytes` is what exists only locally (not yet copied).
    pub fn expired(
        &self,
        retention_ms: i64,
        retention_bytes: i64,
        local_only_bytes: u64,
        now_ms: i64,
    ) -> Vec<String> {
        let mut total = self.remote_size_bytes() + local_only_bytes;
        let mut out = Vec::new();
        let floor = self.log_start.unwrap_or(i64::MIN);
        for s in self.finished() {
            // Wholly below the log start (DeleteRecords): Kafka's log-start breach.
            let below_start = s.end_offset < floor;
            let by_time = retention_ms >= 0 && now_ms - s.max_timestamp_ms > retention_ms;
            let by_size = retention_bytes >= 0 && total - s.size_bytes >= retention_bytes as u64;
            if !(below_start || by_time || by_size) {
                break;
            }
            total -= s.size_bytes;
            out.push(s.id.clone());
        }
        out
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a manifest serializes")
    }

    pub fn from_json(path: &Path, b: &[u8]) -> Result<Manifest, ManifestError> {
        let m: Manifest = serde_json::from_slice(b).map_err(|e| ManifestError::Corrupt {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        if m.version != VERSION {
            return Err(ManifestError::Corrupt {
                path: path.to_path_buf(),
                reason: format!("version {} (this broker reads {VERSION})", m.version),
            });
        }
        Ok(m)
    }

    /// Reads `<dir>/remote-log-manifest.json`; an absent file is an empty manifest. A
    /// leftover `.tmp` (crash before the rename) is ignored: the old manifest stands.
    pub fn load(dir: &Path) -> Result<Manifest, ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        match std::fs::read(&path) {
            Ok(b) => Manifest::from_json(&path, &b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Manifest::new()),
            Err(source) => Err(ManifestError::Io { path, source }),
        }
    }

    /// Replaces the manifest on disk atomically and durably (blocking: call off the shard).
    pub fn store(&self, dir: &Path) -> Result<(), ManifestError> {
        use std::io::Write;
        let path = dir.join(MANIFEST_FILE);
        let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| ManifestError::Io { path: p, source }
        };
        let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(&self.to_json()).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SegmentState::*;

    fn seg(id: &str, base: i64, end: i64, ts: i64, size: u64) -> RemoteSegment {
        RemoteSegment {
            id: id.into(),
            base_offset: base,
            end_offset: end,
            max_timestamp_ms: ts,
            size_bytes: size,
            leader_epochs: vec![(0, base)],
            state: CopySegmentStarted,
            updated_ms: 0,
        }
    }

    #[test]
    fn given_started_copy_when_not_finished_then_not_served() {
        let mut m = Manifest::new();
        m.start_copy(seg("a", 0, 9, 100, 10)).unwrap();
        assert_eq!(m.remote_log_start(), None);
        assert_eq!(m.covering(5), None);
        assert_eq!(m.copied_end(), None);
        m.finish_copy("a", 1).unwrap();
        assert_eq!(m.remote_log_start(), Some(0));
        assert_eq!(m.covering(5).unwrap().id, "a");
        assert_eq!(m.copied_end(), Some(10));
        assert_eq!(m.remote_size_bytes(), 10);
    }

    #[test]
    fn given_copied_range_when_next_copy_overlaps_then_refused_and_a_gap_allowed() {
        let mut m = Manifest::new();
        m.start_copy(seg("a", 0, 9, 100, 10)).unwrap();
        m.finish_copy("a", 1).unwrap();
        let e = m.start_copy(seg("b", 9, 20, 100, 10)).unwrap_err();
        assert!(
            matches!(e, ManifestError::Overlaps { expected: 10, .. }),
            "{e}"
        );
        m.start_copy(seg("b", 10, 20, 100, 10)).unwrap();
        m.finish_copy("b", 2).unwrap();
        // Offsets 21..30 left the local log uncopied (DeleteRecords): a hole, not an overlap.
        m.start_copy(seg("c", 31, 40, 100, 10)).unwrap();
    }

    #[test]
    fn given_each_state_when_transitioning_then_only_kafkas_edges() {
        let mut m = Manifest::new();
        m.start_copy(seg("a", 0, 9, 100, 10)).unwrap();
        assert!(
            m.finish_delete("a").is_err(),
            "copy started -> delete finished"
        );
        m.finish_copy("a", 1).unwrap();
        assert!(m.finish_copy("a", 1).is_err(), "finished twice");
        m.start_delete("a", 2).unwrap();
        assert!(m.finish_copy("a", 3).is_err(), "deleting -> finished");
        assert_eq!(
            m.remote_log_start(),
            None,
            "a deleting segment is not served"
        );
        m.finish_delete("a").unwrap();
        assert!(m.segments().is_empty());
        assert!(matches!(
            m.start_delete("a", 4),
            Err(ManifestError::Unknown(_))
        ));
    }

    #[test]
    fn given_delete_records_into_the_remote_log_when_reading_then_nothing_below_is_served() {
        let mut m = Manifest::new();
        for (id, base) in [("a", 0), ("b", 10), ("c", 20)] {
            m.start_copy(seg(id, base, base + 9, 100, 10)).unwrap();
            m.finish_copy(id, 1).unwrap();
        }
        assert!(m.advance_log_start(15));
        assert!(!m.advance_log_start(12), "the log start never moves back");
        assert_eq!(m.log_start(), Some(15));
        assert_eq!(m.remote_log_start(), Some(15));
        assert!(m.covering(9).is_none(), "below the log start");
        assert!(
            m.covering(14).is_none(),
            "below the log start, in a served segment"
        );
        assert_eq!(m.covering(15).map(|s| s.id.as_str()), Some("b"));
        assert_eq!(
            m.copied_end(),
            Some(30),
            "copies go on after the copied range"
        );
        // Only the segment wholly below goes, whatever the retention.
        assert_eq!(m.expired(-1, -1, 0, 200), vec!["a".to_string()]);
        // Survives a store and load.
        let dir = tempfile::tempdir().unwrap();
        m.store(dir.path()).unwrap();
        let loaded = Manifest::load(dir.path()).unwrap();
        assert_eq!(loaded.log_start(), Some(15));
        assert_eq!(loaded, m);
        // Past every remote segment: none is served, all expire.
        assert!(m.advance_log_start(30));
        assert_eq!(m.remote_log_start(), None);
        assert_eq!(m.expired(-1, -1, 0, 200).len(), 3);
    }

    #[test]
    fn given_interrupted_copy_when_recovering_then_becomes_a_deletion() {
        let mut m = Manifest::new();
        m.start_copy(seg("a", 0, 9, 100, 10)).unwrap();
        m.finish_copy("a", 1).unwrap();
        m.start_copy(seg("b", 10, 19, 100, 10)).unwrap();
        assert_eq!(m.recover(5), 1);
        let clean = m.to_clean();
        assert_eq!(clean.len(), 1);
        assert_eq!(
            (clean[0].id.as_str(), clean[0].state),
            ("b", DeleteSegmentStarted)
        );
        // The next attempt of the same segment gets a new id beside the one being deleted.
        m.start_copy(seg("c", 10, 19, 100, 10)).unwrap();
        m.finish_copy("c", 6).unwrap();
        m.finish_delete("b").unwrap();
        assert_eq!(m.copied_end(), Some(20));
    }

    #[test]
    fn given_retention_when_expiring_then_oldest_by_time_then_by_size() {
        let mut m = Manifest::new();
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            let base = i as i64 * 10;
            m.start_copy(seg(id, base, base + 9, 1000 + i as i64 * 1000, 100))
                .unwrap();
            m.finish_copy(id, 0).unwrap();
        }
        assert_eq!(m.expired(-1, -1, 0, 10_000), Vec::<String>::new());
        assert_eq!(m.expired(7_500, -1, 0, 10_000), vec!["a", "b"]);
        // 300 remote + 50 local, limit 200: dropping a leaves 250, b leaves 150 < 200: only a.
        assert_eq!(m.expired(-1, 200, 50, 10_000), vec!["a"]);
        assert_eq!(m.expired(-1, 0, 0, 10_000), vec!["a", "b", "c"]);
    }

    #[test]
    fn given_stored_manifest_when_loading_then_same_and_tmp_ignored() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Manifest::load(dir.path()).unwrap(), Manifest::new());
        let mut m = Manifest::new();
        m.start_copy(seg("a", 0, 9, 100, 10)).unwrap();
        m.store(dir.path()).unwrap();
        std::fs::write(dir.path().join(format!("{MANIFEST_FILE}.tmp")), b"{half").unwrap();
        assert_eq!(Manifest::load(dir.path()).unwrap(), m);
        std::fs::write(dir.path().join(MANIFEST_FILE), b"{half").unwrap();
        assert!(matches!(
            Manifest::load(dir.path()),
            Err(ManifestError::Corrupt { .. })
        ));
    }
}
