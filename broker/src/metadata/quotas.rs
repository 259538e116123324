//! Client quotas (KIP-546): what Kafka keeps as `ClientQuotaRecord`s in its metadata log. An
//! entity is a map from entity type (`user`, `client-id`, `ip`) to a name, or to `None` for
//! the type's `<default>`; each entity has values for Kafka's quota keys. Strom keeps them in
//! `<data-dir>/strom-client-quotas.json`, written atomically before an alter is answered, and
//! hands every reader (the quota managers of all shards, DescribeClientQuotas) an `Arc`
//! snapshot, so a change applies to the next request on every shard. On a cluster the quotas
//! live in the replicated image (`cluster::image`, changed with the same `apply_alterations`)
//! and every node mirrors them into its file (`replace_all`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};

const FILE: &str = "strom-client-quotas.json";

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// Entity type -> name; `None` is the type's `<default>`.
pub type QuotaEntity = BTreeMap<String, Option<String>>;
/// Quota key -> value.
pub type QuotaValues = BTreeMap<String, f64>;
/// Every entity with at least one value.
pub type Quotas = BTreeMap<QuotaEntity, QuotaValues>;

/// One entity's change: key -> new value, or `None` to remove the key.
pub type QuotaAlteration = BTreeMap<String, Option<f64>>;

#[derive(Debug, thiserror::Error)]
pub enum QuotasError {
    #[error("client quotas {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("client quotas {path} are corrupt: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error("persisting client quotas: {0}")]
    Persist(#[source] storage::StorageError),
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredEntry {
    entity: Vec<(String, Option<String>)>,
    values: QuotaValues,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    version: u32,
    entries: Vec<StoredEntry>,
}

pub struct QuotaStore {
    path: PathBuf,
    current: RwLock<Arc<Quotas>>,
    /// Whether any quota is set: the per-request check when none is (one relaxed load, no
    /// lock, nothing shared written).
    any: AtomicBool,
    writer: Mutex<()>,
}

impl QuotaStore {
    pub fn open(data_dir: &Path) -> Result<QuotaStore, QuotasError> {
        let path = data_dir.join(FILE);
        let stored = match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice::<Stored>(&bytes).map_err(|e| QuotasError::Corrupt {
                    path: path.clone(),
                    message: e.to_string(),
                })?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Stored::default(),
            Err(source) => return Err(QuotasError::Io { path, source }),
        };
        let quotas: Quotas = stored
            .entries
            .into_iter()
            .filter(|e| !e.values.is_empty())
            .map(|e| (e.entity.into_iter().collect(), e.values))
            .collect();
        Ok(QuotaStore {
            path,
            any: AtomicBool::new(!quotas.is_empty()),
            current: RwLock::new(Arc::new(quotas)),
            writer: Mutex::new(()),
        })
    }

    /// True when no entity has a quota.
    pub fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Relaxed)
    }

    /// Every entity's quotas as they are now.
    pub fn snapshot(&self) -> Arc<Quotas> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Applies every alteration at once (Kafka's controller writes them as one atomic batch),
    /// persists, then publishes the new snapshot.
    pub fn alter(&self, changes: &[(QuotaEntity, QuotaAlteration)]) -> Result<(), QuotasError> {
        let _guard = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = (*self.snapshot()).clone();
        apply_alterations(&mut next, changes);
        self.publish(next)
    }

    /// Makes the quotas exactly `quotas` (a cluster node mirroring its image); writes nothing
    /// when they are already.
    pub fn replace_all(&self, quotas: &Quotas) -> Result<(), QuotasError> {
        let _guard = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if *self.snapshot() == *quotas {
            return Ok(());
        }
        self.publish(quotas.clone())
    }

    /// Persists `next`, then publishes it (the caller holds `writer`).
    fn publish(&self, next: Quotas) -> Result<(), QuotasError> {
        let stored = Stored {
            version: 1,
            entries: next
                .iter()
                .map(|(e, v)| StoredEntry {
                    entity: e.iter().map(|(t, n)| (t.clone(), n.clone())).collect(),
                    values: v.clone(),
                })
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&stored).expect("client quotas serialise");
        storage::logdir::write_atomic(&self.path, &bytes).map_err(QuotasError::Persist)?;
        self.any.store(!next.is_empty(), Ordering::Relaxed);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        Ok(())
    }
}

/// Applies each entity's alteration in order: a value sets its key, `None` removes it; an
/// entity left without values goes.
pub fn apply_alterations(quotas: &mut Quotas, changes: &[(QuotaEntity, QuotaAlteration)]) {
    for (entity, ops) in changes {
        let values = quotas.entry(entity.clone()).or_default();
        for (key, value) in ops {
            match value {
                Some(v) => {
                    values.insert(key.clone(), *v);
                }
                None => {
                    values.remove(key);
                }
            }
        }
        if values.is_empty() {
            quotas.remove(entity);
        }
    }
}

/// `Quotas` as a list of `(entity, values)` pairs in JSON: an entity is a map, which JSON
/// cannot have as an object key (`#[serde(with = "quotas::as_pairs")]`).
pub mod as_pairs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{QuotaEntity, QuotaValues, Quotas};

    pub fn serialize<S: Serializer>(q: &Quotas, s: S) -> Result<S::Ok, S::Error> {
        let pairs: Vec<(&QuotaEntity, &QuotaValues)> = q.iter().collect();
        pairs.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Quotas, D::Error> {
        let pairs = Vec::<(QuotaEntity, QuotaValues)>::deserialize(d)?;
        Ok(pairs.into_iter().collect())
    }
}

/// `[(type, name)]` as an entity (tests, callers that build one by hand).
pub fn entity(parts: &[(&str, Option<&str>)]) -> QuotaEntity {
    parts
        .iter()
        .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_alterations_when_reopened_then_kept_and_removing_the_last_key_drops_the_entity() {
        let dir = tempfile::tempdir().unwrap();
        let s = QuotaStore::open(dir.path()).unwrap();
        let alice = entity(&[(USER, Some("alice")), (CLIENT_ID, None)]);
        let clients = entity(&[(CLIENT_ID, None)]);
        s.alter(&[
            (
                alice.clone(),
                [(PRODUCER_BYTE_RATE.to_string(), Some(1024.0))].into(),
            ),
            (
                clients.clone(),
                [(REQUEST_PERCENTAGE.to_string(), Some(12.5))].into(),
            ),
        ])
        .unwrap();
        let s = QuotaStore::open(dir.path()).unwrap();
        let q = s.snapshot();
        assert_eq!(q[&alice][PRODUCER_BYTE_RATE], 1024.0);
        assert_eq!(q[&clients][REQUEST_PERCENTAGE], 12.5);
        s.alter(&[(
            alice.clone(),
            [(PRODUCER_BYTE_RATE.to_string(), None)].into(),
        )])
        .unwrap();
        let q = QuotaStore::open(dir.path()).unwrap().snapshot();
        assert!(!q.contains_key(&alice));
        assert!(q.contains_key(&clients));
        let mut mirrored = Quotas::new();
        mirrored.insert(
            alice.clone(),
            [(CONSUMER_BYTE_RATE.to_string(), 5.0)].into(),
        );
        s.replace_all(&mirrored).unwrap();
        assert_eq!(*QuotaStore::open(dir.path()).unwrap().snapshot(), mirrored);
        std::fs::write(dir.path().join(FILE), b"[").unwrap();
        assert!(matches!(
            QuotaStore::open(dir.path()),
            Err(QuotasError::Corrupt { .. })
        ));
    }
}
