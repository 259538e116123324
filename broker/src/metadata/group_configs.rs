//! Per-group config overrides (the GROUP config resource, KIP-848): what Kafka keeps as
//! `ConfigRecord`s of resource type GROUP in its metadata log. Strom keeps them in
//! `<data-dir>/strom-group-configs.json`, written atomically before an alter is answered, and
//! serves reads from an in-memory copy (the group coordinator reads them per heartbeat).
//! The CLIENT_METRICS resources (KIP-714 subscriptions, `telemetry`) are kept the same way,
//! in a file of their own (`open_file`). On a cluster both live in the replicated image
//! (`cluster::image`) and every node mirrors them into its files (`replace_all`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};

const FILE: &str = "strom-group-configs.json";

pub type Overrides = BTreeMap<String, String>;

#[derive(Debug, thiserror::Error)]
pub enum GroupConfigsError {
    #[error("configs {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("configs {path} are corrupt: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error("persisting configs: {0}")]
    Persist(#[source] storage::StorageError),
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    version: u32,
    groups: BTreeMap<String, Overrides>,
}

pub struct GroupConfigsHandle {
    path: PathBuf,
    current: RwLock<Arc<BTreeMap<String, Arc<Overrides>>>>,
    writer: Mutex<()>,
}

impl GroupConfigsHandle {
    pub fn open(data_dir: &Path) -> Result<GroupConfigsHandle, GroupConfigsError> {
        Self::open_file(data_dir, FILE)
    }

    /// Per-name overrides of another config resource, in `data_dir/file`.
    pub fn open_file(data_dir: &Path, file: &str) -> Result<GroupConfigsHandle, GroupConfigsError> {
        let path = data_dir.join(file);
        let stored = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<Stored>(&bytes).map_err(|e| {
                GroupConfigsError::Corrupt {
                    path: path.clone(),
                    message: e.to_string(),
                }
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Stored::default(),
            Err(source) => return Err(GroupConfigsError::Io { path, source }),
        };
        let groups = stored
            .groups
            .into_iter()
            .map(|(g, o)| (g, Arc::new(o)))
            .collect();
        Ok(GroupConfigsHandle {
            path,
            current: RwLock::new(Arc::new(groups)),
            writer: Mutex::new(()),
        })
    }

    /// The overrides of `group` (none: it follows the broker's group defaults).
    pub fn get(&self, group: &str) -> Option<Arc<Overrides>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(group)
            .cloned()
    }

    /// Every name with overrides.
    pub fn all(&self) -> Arc<BTreeMap<String, Arc<Overrides>>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the overrides of `group` (empty: removes them) and persists all groups'.
    pub fn set(&self, group: &str, overrides: Overrides) -> Result<(), GroupConfigsError> {
        let _guard = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = (**self.current.read().unwrap_or_else(|e| e.into_inner())).clone();
        if overrides.is_empty() {
            next.remove(group);
        } else {
            next.insert(group.to_string(), Arc::new(overrides));
        }
        self.publish(next)
    }

    /// Makes every name's overrides exactly `all` (a cluster node mirroring its image; empty
    /// overrides are dropped); writes nothing when they are already.
    pub fn replace_all(&self, all: &BTreeMap<String, Overrides>) -> Result<(), GroupConfigsError> {
        let _guard = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let next: BTreeMap<String, Arc<Overrides>> = all
            .iter()
            .filter(|(_, o)| !o.is_empty())
            .map(|(g, o)| (g.clone(), Arc::new(o.clone())))
            .collect();
        if *self.all() == next {
            return Ok(());
        }
        self.publish(next)
    }

    /// Persists `next`, then publishes it (the caller holds `writer`).
    fn publish(&self, next: BTreeMap<String, Arc<Overrides>>) -> Result<(), GroupConfigsError> {
        let stored = Stored {
            version: 1,
            groups: next
                .iter()
                .map(|(g, o)| (g.clone(), (**o).clone()))
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&stored).expect("group configs serialise");
        storage::logdir::write_atomic(&self.path, &bytes).map_err(GroupConfigsError::Persist)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_overrides_when_reopened_then_kept_and_empty_removes() {
        let dir = tempfile::tempdir().unwrap();
        let h = GroupConfigsHandle::open(dir.path()).unwrap();
        assert!(h.get("g").is_none());
        h.set(
            "g",
            [("consumer.session.timeout.ms".into(), "50000".into())].into(),
        )
        .unwrap();
        let h = GroupConfigsHandle::open(dir.path()).unwrap();
        assert_eq!(h.get("g").unwrap()["consumer.session.timeout.ms"], "50000");
        h.set("g", Overrides::new()).unwrap();
        assert!(GroupConfigsHandle::open(dir.path())
            .unwrap()
            .get("g")
            .is_none());
        let mirrored: BTreeMap<String, Overrides> =
            [("h".to_string(), [("a".into(), "1".into())].into())].into();
        h.replace_all(&mirrored).unwrap();
        let h = GroupConfigsHandle::open(dir.path()).unwrap();
        assert_eq!(h.get("h").unwrap()["a"], "1");
        assert_eq!(h.all().len(), 1);
        std::fs::write(dir.path().join(FILE), b"{").unwrap();
        assert!(matches!(
            GroupConfigsHandle::open(dir.path()),
            Err(GroupConfigsError::Corrupt { .. })
        ));
    }
}
