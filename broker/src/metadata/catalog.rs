//! The topic catalog: which topics exist, their ids, partition counts and config overrides.
//!
//! Single-node Kafka keeps this in its KRaft metadata log; Strom keeps it in
//! `<data-dir>/strom-topics.json`, written atomically (tmp file, fsync, rename, fsync dir)
//! before a change is acknowledged. Readers on every shard take an `Arc` snapshot (a read lock
//! held only long enough to clone the `Arc`), so the produce and fetch paths never wait on a
//! writer; writers (topic admin, rare) are serialised by a mutex.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::dynamic::{self, BrokerView, DynamicFileError, StoredDynamic};
use crate::config::effective::TopicSettings;
use crate::config::{BrokerConfig, Origin};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredTopic {
    name: String,
    id: Uuid,
    partitions: i32,
    #[serde(default)]
    configs: BTreeMap<String, String>,
    #[serde(default)]
    internal: bool,
}

#[derive(Debug, Serialize, Deserialize, Default)]
struct StoredCatalog {
    version: u32,
    topics: Vec<StoredTopic>,
}

#[derive(Debug)]
pub struct TopicMeta {
    pub name: Arc<str>,
    pub id: Uuid,
    pub partitions: i32,
    pub configs: BTreeMap<String, String>,
    pub internal: bool,
    pub settings: Arc<TopicSettings>,
}

#[derive(Debug, Default)]
pub struct Catalog {
    pub topics: BTreeMap<Arc<str>, Arc<TopicMeta>>,
    by_id: HashMap<Uuid, Arc<TopicMeta>>,
}

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&Arc<TopicMeta>> {
        self.topics.get(name)
    }
    pub fn by_id(&self, id: &Uuid) -> Option<&Arc<TopicMeta>> {
        self.by_id.get(id)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("Topic '{0}' already exists.")]
    AlreadyExists(String),
    #[error("Topic '{0}' does not exist.")]
    UnknownTopic(String),
    #[error("cannot read topic catalog {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot persist topic catalog: {0}")]
    Persist(#[source] storage::StorageError),
    #[error("topic catalog {path} is corrupt: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error(transparent)]
    Dynamic(#[from] DynamicFileError),
}

pub struct CatalogHandle {
    path: PathBuf,
    data_dir: PathBuf,
    current: RwLock<Arc<Catalog>>,
    /// Serialises writers of both the topic catalog and the dynamic broker configs (a broker
    /// default change re-resolves every topic's settings).
    writer: Mutex<()>,
    /// Static broker config with the dynamic broker configs layered on top.
    broker: RwLock<Arc<BrokerView>>,
    /// The dynamic broker configs as stored (all node ids, not only this one's).
    dynamic: Mutex<StoredDynamic>,
}

impl CatalogHandle {
    pub fn open(
        data_dir: &Path,
        broker: BrokerConfig,
        origins: BTreeMap<String, Origin>,
    ) -> Result<CatalogHandle, CatalogError> {
        let path = data_dir.join("strom-topics.json");
        let stored = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<StoredCatalog>(&bytes).map_err(|e| {
                CatalogError::Corrupt {
                    path: path.clone(),
                    message: e.to_string(),
                }
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => StoredCatalog::default(),
            Err(source) => return Err(CatalogError::Io { path, source }),
        };
        let stored_dynamic = dynamic::load(data_dir)?;
        let view = BrokerView::with_dynamic(broker, origins, &stored_dynamic);
        let handle = CatalogHandle {
            path,
            data_dir: data_dir.to_path_buf(),
            current: RwLock::new(Arc::new(Catalog::default())),
            writer: Mutex::new(()),
            broker: RwLock::new(Arc::new(view)),
            dynamic: Mutex::new(stored_dynamic),
        };
        let catalog = handle.build(stored.topics);
        *handle.current.write().expect("catalog lock") = Arc::new(catalog);
        Ok(handle)
    }

    pub fn snapshot(&self) -> Arc<Catalog> {
        self.current.read().expect("catalog lock").clone()
    }

    /// The broker configuration in force now (static plus dynamic). Code that must follow a
    /// dynamic change reads this each time instead of keeping a copy.
    pub fn broker(&self) -> Arc<BrokerView> {
        self.broker.read().expect("broker config lock").clone()
    }

    /// Replaces the dynamic broker configs of one scope (this broker when `node_scope`, else
    /// the cluster-wide default), persists them, and re-resolves every topic's settings so
    /// topics following a broker default see the new value. Returns the new catalog, whose
    /// settings the caller pushes to the partitions.
    pub fn set_broker_dynamic(
        &self,
        node_scope: bool,
        values: BTreeMap<String, String>,
    ) -> Result<Arc<Catalog>, CatalogError> {
        let _guard = self.writer.lock().expect("catalog writer");
        let view = self.broker().replaced(node_scope, values.clone());
        let mut stored = self.dynamic.lock().expect("dynamic configs").clone();
        stored.version = 1;
        if node_scope {
            let id = view.static_config.node_id.to_string();
            if values.is_empty() {
                stored.brokers.remove(&id);
            } else {
                stored.brokers.insert(id, values);
            }
        } else {
            stored.cluster = values;
        }
        dynamic::save(&self.data_dir, &stored)?;
        *self.dynamic.lock().expect("dynamic configs") = stored;
        *self.broker.write().expect("broker config lock") = Arc::new(view);
        let catalog = Arc::new(self.build(Self::stored(&self.snapshot())));
        *self.current.write().expect("catalog lock") = catalog.clone();
        Ok(catalog)
    }

    fn build(&self, topics: Vec<StoredTopic>) -> Catalog {
        let mut c = Catalog::default();
        let broker = self.broker();
        for t in topics {
            let settings = Arc::new(TopicSettings::resolve(&t.configs, &broker));
            let meta = Arc::new(TopicMeta {
                name: t.name.as_str().into(),
                id: t.id,
                partitions: t.partitions,
                configs: t.configs,
                internal: t.internal,
                settings,
            });
            c.by_id.insert(meta.id, meta.clone());
            c.topics.insert(meta.name.clone(), meta);
        }
        c
    }

    fn stored(c: &Catalog) -> Vec<StoredTopic> {
        c.topics
            .values()
            .map(|t| StoredTopic {
                name: t.name.to_string(),
                id: t.id,
                partitions: t.partitions,
                configs: t.configs.clone(),
                internal: t.internal,
            })
            .collect()
    }

    /// Applies `change` to a copy of the catalog, persists it, then publishes it.
    fn update<R>(
        &self,
        change: impl FnOnce(&mut Vec<StoredTopic>) -> Result<R, CatalogError>,
    ) -> Result<R, CatalogError> {
        let _guard = self.writer.lock().expect("catalog writer");
        let mut topics = Self::stored(&self.snapshot());
        let result = change(&mut topics)?;
        let stored = StoredCatalog { version: 1, topics };
        let bytes = serde_json::to_vec_pretty(&stored).expect("catalog serialises");
        storage::logdir::write_atomic(&self.path, &bytes).map_err(CatalogError::Persist)?;
        let catalog = self.build(stored.topics);
        *self.current.write().expect("catalog lock") = Arc::new(catalog);
        Ok(result)
    }

    pub fn create(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        internal: bool,
    ) -> Result<Arc<TopicMeta>, CatalogError> {
        self.create_with_id(name, Uuid::new_v4(), partitions, configs, internal)
    }

    /// `create` keeping a given topic id (`strom migrate import` adopts Kafka's, so the
    /// partition dirs' `partition.metadata` and clients that cache ids stay valid).
    pub fn create_with_id(
        &self,
        name: &str,
        id: Uuid,
        partitions: i32,
        configs: BTreeMap<String, String>,
        internal: bool,
    ) -> Result<Arc<TopicMeta>, CatalogError> {
        self.update(|topics| {
            if topics.iter().any(|t| t.name == name) {
                return Err(CatalogError::AlreadyExists(name.into()));
            }
            topics.push(StoredTopic {
                name: name.into(),
                id,
                partitions,
                configs,
                internal,
            });
            Ok(())
        })?;
        Ok(self.snapshot().get(name).expect("just created").clone())
    }

    pub fn delete(&self, name: &str) -> Result<Arc<TopicMeta>, CatalogError> {
        let old = self
            .snapshot()
            .get(name)
            .cloned()
            .ok_or_else(|| CatalogError::UnknownTopic(name.into()))?;
        self.update(|topics| {
            topics.retain(|t| t.name != name);
            Ok(())
        })?;
        Ok(old)
    }

    pub fn set_partitions(&self, name: &str, partitions: i32) -> Result<(), CatalogError> {
        self.update(|topics| {
            let t = topics
                .iter_mut()
                .find(|t| t.name == name)
                .ok_or_else(|| CatalogError::UnknownTopic(name.into()))?;
            t.partitions = partitions;
            Ok(())
        })
    }

    pub fn set_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), CatalogError> {
        self.update(|topics| {
            let t = topics
                .iter_mut()
                .find(|t| t.name == name)
                .ok_or_else(|| CatalogError::UnknownTopic(name.into()))?;
            t.configs = configs;
            Ok(())
        })
    }
}

/// tmp + fsync + rename + fsync(dir): the file is either the old or the new version after a crash.
/// Kafka's topic name rules (`Topic.validate`): 1..=249 chars of `[a-zA-Z0-9._-]`, not `.`/`..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > 249 {
        return Err(format!(
            "Topic name is illegal, it can't be longer than 249 characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_created_topic_when_reopening_then_same_id_and_configs() {
        let dir = tempfile::tempdir().unwrap();
        let c = CatalogHandle::open(dir.path(), BrokerConfig::default(), BTreeMap::new()).unwrap();
        let mut cfg = BTreeMap::new();
        cfg.insert("cleanup.policy".to_string(), "compact".to_string());
        let t = c.create("orders", 3, cfg, false).unwrap();
        assert!(t.settings.compact);
        assert!(matches!(
            c.create("orders", 1, BTreeMap::new(), false),
            Err(CatalogError::AlreadyExists(_))
        ));
        let c2 = CatalogHandle::open(dir.path(), BrokerConfig::default(), BTreeMap::new()).unwrap();
        let snap = c2.snapshot();
        let t2 = snap.get("orders").unwrap();
        assert_eq!((t2.id, t2.partitions), (t.id, 3));
        assert!(snap.by_id(&t.id).is_some());
        c2.delete("orders").unwrap();
        assert!(c2.snapshot().get("orders").is_none());
    }

    #[test]
    fn given_topic_names_when_validating_then_kafka_rules() {
        for ok in ["a", "my-topic.v1_2", &"x".repeat(249)] {
            assert!(validate_topic_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "has space", "slash/", &"x".repeat(250), "ü"] {
            assert!(validate_topic_name(bad).is_err(), "{bad}");
        }
    }
}
