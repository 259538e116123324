//! The remote objects of deleted partitions (Kafka's `RemoteLogManager.stopPartitions` with
//! `deleteRemoteLog`): when a topic is deleted, its partitions' remote segments are written
//! down here, in `<data dir>/remote-deletions/`, before the partition dirs (and with them
//! their manifests) go. A pending file is removed only once every object it names is
//! deleted, so a broker killed in between resumes the deletion at its next start, and a
//! store that is down only delays it. Only the objects a manifest named are deleted, never
//! a listing of the prefix: a topic recreated under the same name and a template without
//! `{topic_id}` shares the prefix, and its objects must stay.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use serde::{Deserialize, Serialize};

use super::manifest::Manifest;
use super::transfer::{self, TransferError};

/// The directory under the data dir.
pub const DIR: &str = "remote-deletions";

/// One deleted partition's remote objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingDeletion {
    pub topic: String,
    pub partition: i32,
    pub prefix: String,
    /// (base offset, segment id) of every entry the manifest had, in any state: an
    /// interrupted copy may have PUT some objects too.
    pub segments: Vec<(i64, String)>,
}

impl PendingDeletion {
    pub fn new(topic: &str, partition: i32, prefix: &str, manifest: &Manifest) -> Self {
        PendingDeletion {
            topic: topic.into(),
            partition,
            prefix: prefix.into(),
            segments: manifest
                .segments()
                .iter()
                .map(|s| (s.base_offset, s.id.clone()))
                .collect(),
        }
    }

    /// Adds the entries of `manifest` not named yet (a copy that started meanwhile).
    pub fn extend(&mut self, manifest: &Manifest) {
        for s in manifest.segments() {
            if !self.segments.iter().any(|(_, id)| *id == s.id) {
                self.segments.push((s.base_offset, s.id.clone()));
            }
        }
    }

    /// Writes the pending file durably (tmp, fsync, rename, fsync of the dir); blocking.
    pub fn write(&self, data_dir: &Path) -> std::io::Result<PathBuf> {
        use std::io::Write;
        let dir = data_dir.join(DIR);
        std::fs::create_dir_all(&dir)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = dir.join(format!("{}-{}-{nanos}.json", self.topic, self.partition));
        let tmp = path.with_extension("json.tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(self).expect("serializes"))?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(&dir)?.sync_all()?;
        Ok(path)
    }

    /// Every pending file under the data dir (a leftover `.tmp` was never pending: its
    /// partition dir was not deleted yet when the broker stopped). A file that does not
    /// parse is answered as an error with its path, and left for the operator.
    pub fn load_all(data_dir: &Path) -> Vec<(PathBuf, Result<PendingDeletion, String>)> {
        let Ok(entries) = std::fs::read_dir(data_dir.join(DIR)) else {
            return Vec::new();
        };
        let mut out: Vec<_> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| {
                let parsed = std::fs::read(&p)
                    .map_err(|e| e.to_string())
                    .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()));
                (p, parsed)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Deletes every object named (absent ones are fine), then the manifest's mirror.
    pub async fn run(&self, store: &Arc<dyn ObjectStore>) -> Result<(), TransferError> {
        for (base, id) in &self.segments {
            transfer::delete_segment(store, &self.prefix, *base, id).await?;
        }
        let mirror = ObjectPath::from(super::keys::manifest_key(&self.prefix));
        match store.delete(&mirror).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::keys::{object_key, FileKind};
    use crate::remote::manifest::{RemoteSegment, SegmentState};
    use crate::remote::store::StoreConfig;
    use object_store::{ObjectStoreExt, PutPayload};

    fn seg(id: &str, base: i64) -> RemoteSegment {
        RemoteSegment {
            id: id.into(),
            base_offset: base,
            end_offset: base + 9,
            max_timestamp_ms: 0,
            size_bytes: 1,
            leader_epochs: vec![],
            state: SegmentState::CopySegmentStarted,
            updated_ms: 0,
        }
    }

    #[tokio::test]
    async fn given_a_deleted_partition_when_run_then_only_its_named_objects_go() {
        let root = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let store = StoreConfig::Local {
            path: root.path().to_path_buf(),
        }
        .build()
        .unwrap();
        let put = |key: String| {
            let store = store.clone();
            async move {
                store
                    .put(&ObjectPath::from(key), PutPayload::from_static(b"x"))
                    .await
                    .unwrap();
            }
        };
        let prefix = "tenant-t/topic/0";
        for (id, base) in [("a", 0), ("b", 10), ("other", 20)] {
            for kind in FileKind::ALL {
                put(object_key(prefix, base, id, kind)).await;
            }
        }
        put(crate::remote::keys::manifest_key(prefix)).await;

        let mut m = Manifest::new();
        m.start_copy(seg("a", 0)).unwrap();
        m.finish_copy("a", 1).unwrap();
        let mut pending = PendingDeletion::new("topic", 0, prefix, &m);
        m.start_copy(seg("b", 10)).unwrap(); // a copy that started after the first look
        pending.extend(&m);
        pending.extend(&m);
        assert_eq!(pending.segments.len(), 2);

        let path = pending.write(data.path()).unwrap();
        let loaded = PendingDeletion::load_all(data.path());
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].0, path);
        assert_eq!(loaded[0].1.as_ref().unwrap(), &pending);

        pending.run(&store).await.unwrap();
        let left: Vec<String> = walk(root.path());
        assert_eq!(left.len(), FileKind::ALL.len(), "{left:?}");
        assert!(left.iter().all(|k| k.contains("other")), "{left:?}");
        // Again (a resumed deletion): nothing missing is an error.
        pending.run(&store).await.unwrap();
    }

    fn walk(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p.to_string_lossy().into_owned());
            }
        }
        out
    }
}
