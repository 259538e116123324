//! ACL bindings (Kafka's `AccessControlEntryRecord`s in KRaft's metadata log).
//!
//! `AclStore` is what the broker needs; `FileAclStore` keeps the bindings in
//! `<data-dir>/strom-acls.json`, rewritten atomically before a change is acknowledged (like
//! the SCRAM credentials). A single node changes it with `create` / `delete`; on a cluster the
//! bindings live in the replicated image (`cluster::image`, which changes them with the same
//! `add` / `remove` below) and every node mirrors the image's list into its file with
//! `replace_all`, so the authorizer reads the same `Arc` snapshot either way: one atomic
//! load-and-clone per check, no lock held while matching.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::security::acl::{AclBinding, AclFilter};

pub const FILE_NAME: &str = "strom-acls.json";

#[derive(Debug, thiserror::Error)]
pub enum AclStoreError {
    #[error("cannot read ACLs {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("ACLs {path} are corrupt: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error("cannot persist ACLs: {0}")]
    Persist(#[source] storage::StorageError),
}

/// What the broker needs of the ACL metadata.
pub trait AclStore: Send + Sync {
    /// Every binding, as of now.
    fn snapshot(&self) -> Arc<Vec<AclBinding>>;
    /// Adds `acls` (one already present is not added twice), durably, before returning.
    fn create(&self, acls: &[AclBinding]) -> Result<(), AclStoreError>;
    /// Removes every binding that one of `filters` matches; returns, per filter, the
    /// bindings it removed (a binding two filters match is reported by both, as Kafka does).
    fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, AclStoreError>;
    /// Makes the bindings exactly `acls` (a cluster node mirroring its image), durably;
    /// writes nothing when they are already.
    fn replace_all(&self, acls: &[AclBinding]) -> Result<(), AclStoreError>;
}

/// Adds the bindings of `new` that `acls` lacks, in order (CreateAcls).
pub fn add(acls: &mut Vec<AclBinding>, new: &[AclBinding]) {
    for a in new {
        if !acls.contains(a) {
            acls.push(a.clone());
        }
    }
}

/// Removes every binding one of `filters` matches; per filter, the bindings it matched (a
/// binding two filters match is reported by both, as Kafka does).
pub fn remove(acls: &mut Vec<AclBinding>, filters: &[AclFilter]) -> Vec<Vec<AclBinding>> {
    let removed = filters
        .iter()
        .map(|f| acls.iter().filter(|a| f.matches(a)).cloned().collect())
        .collect();
    acls.retain(|a| !filters.iter().any(|f| f.matches(a)));
    removed
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Stored {
    version: u32,
    acls: Vec<AclBinding>,
}

/// The single node's ACLs: a JSON file in the data dir.
pub struct FileAclStore {
    path: PathBuf,
    state: RwLock<Arc<Vec<AclBinding>>>,
}

impl FileAclStore {
    pub fn open(data_dir: &Path) -> Result<FileAclStore, AclStoreError> {
        let path = data_dir.join(FILE_NAME);
        let acls = match std::fs::read(&path) {
            Ok(bytes) => {
                let s: Stored =
                    serde_json::from_slice(&bytes).map_err(|e| AclStoreError::Corrupt {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                s.acls
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(AclStoreError::Read { path, source }),
        };
        Ok(FileAclStore {
            path,
            state: RwLock::new(Arc::new(acls)),
        })
    }

    fn persist(&self, acls: &[AclBinding]) -> Result<(), AclStoreError> {
        let stored = Stored {
            version: 1,
            acls: acls.to_vec(),
        };
        let bytes = serde_json::to_vec_pretty(&stored).expect("ACLs serialise");
        storage::logdir::write_atomic(&self.path, &bytes).map_err(AclStoreError::Persist)
    }
}

impl AclStore for FileAclStore {
    fn snapshot(&self) -> Arc<Vec<AclBinding>> {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn create(&self, acls: &[AclBinding]) -> Result<(), AclStoreError> {
        let mut s = self.state.write().unwrap_or_else(|e| e.into_inner());
        let mut next = (**s).clone();
        add(&mut next, acls);
        self.persist(&next)?;
        *s = Arc::new(next);
        Ok(())
    }

    fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, AclStoreError> {
        let mut s = self.state.write().unwrap_or_else(|e| e.into_inner());
        let mut next = (**s).clone();
        let removed = remove(&mut next, filters);
        if removed.iter().all(Vec::is_empty) {
            return Ok(removed);
        }
        self.persist(&next)?;
        *s = Arc::new(next);
        Ok(removed)
    }

    fn replace_all(&self, acls: &[AclBinding]) -> Result<(), AclStoreError> {
        let mut s = self.state.write().unwrap_or_else(|e| e.into_inner());
        if **s == acls {
            return Ok(());
        }
        self.persist(acls)?;
        *s = Arc::new(acls.to_vec());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::{Operation, PatternType, Permission, ResourceType};

    fn acl(name: &str, op: Operation) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type: PatternType::Literal,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn given_created_and_deleted_acls_when_reopened_then_the_rest_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileAclStore::open(dir.path()).unwrap();
        s.create(&[acl("a", Operation::Read), acl("b", Operation::Write)])
            .unwrap();
        s.create(&[acl("a", Operation::Read)]).unwrap();
        assert_eq!(s.snapshot().len(), 2, "no duplicate binding");
        let f = AclFilter {
            resource_type: ResourceType::Any,
            resource_name: Some("a".into()),
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        };
        let removed = s.delete(&[f.clone(), f]).unwrap();
        assert_eq!(removed, vec![vec![acl("a", Operation::Read)]; 2]);
        let again = FileAclStore::open(dir.path()).unwrap();
        assert_eq!(*again.snapshot(), vec![acl("b", Operation::Write)]);
        again.replace_all(&[acl("c", Operation::Read)]).unwrap();
        let mirrored = FileAclStore::open(dir.path()).unwrap();
        assert_eq!(*mirrored.snapshot(), vec![acl("c", Operation::Read)]);
    }
}
