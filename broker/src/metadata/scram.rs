//! SCRAM credentials (Kafka's `UserScramCredentialRecord`s): per user and mechanism, the
//! salt, iteration count, StoredKey and ServerKey of RFC 5802 — never a password. PLAIN checks
//! a password against these too, so no plaintext password is stored anywhere.
//!
//! `CredentialStore` is the interface the rest of the broker uses; `FileCredentialStore`
//! keeps them in `<data-dir>/strom-scram-credentials.json`, rewritten atomically before a
//! change is acknowledged (like the topic catalog). On a cluster the credentials live in the
//! replicated image (`cluster::image`, changed with the same `apply_changes`), and every node
//! mirrors them into its file (`replace_all`), so SASL reads the same store either way.
//! Reads take a shared lock for a map lookup, once per authentication: nothing on the
//! request path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};

pub const FILE_NAME: &str = "strom-scram-credentials.json";

/// Kafka's SCRAM mechanisms (`ScramMechanism`: type 1 and 2 on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ScramMechanism {
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];
    /// Kafka's bounds for both mechanisms.
    pub const MIN_ITERATIONS: i32 = 4096;
    pub const MAX_ITERATIONS: i32 = 16384;

    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }

    /// The wire type of Describe/AlterUserScramCredentials.
    pub fn type_id(self) -> i8 {
        match self {
            Self::Sha256 => 1,
            Self::Sha512 => 2,
        }
    }

    pub fn from_type(t: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.type_id() == t)
    }
}

/// One stored credential. Byte fields are base64 in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCredential {
    #[serde(with = "b64")]
    pub salt: Vec<u8>,
    #[serde(with = "b64")]
    pub stored_key: Vec<u8>,
    #[serde(with = "b64")]
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

mod b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(serde::de::Error::custom)
    }
}

/// Every user's credentials, per mechanism.
pub type Users = BTreeMap<String, BTreeMap<ScramMechanism, StoredCredential>>;

/// One change of AlterUserScramCredentials (or `strom user add`); serialisable, as a cluster
/// replicates the changes themselves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CredentialChange {
    Upsert {
        user: String,
        mechanism: ScramMechanism,
        credential: StoredCredential,
    },
    Delete {
        user: String,
        mechanism: ScramMechanism,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum CredentialStoreError {
    #[error("cannot read SCRAM credentials {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("SCRAM credentials {path} are corrupt: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error("cannot persist SCRAM credentials: {0}")]
    Persist(#[source] storage::StorageError),
}

/// What the broker needs of the credential metadata.
pub trait CredentialStore: Send + Sync {
    fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<StoredCredential>;
    /// Every user with at least one credential: its mechanisms and iteration counts.
    fn users(&self) -> BTreeMap<String, Vec<(ScramMechanism, i32)>>;
    /// Applies all `changes` at once, durably, before returning.
    fn apply(&self, changes: &[CredentialChange]) -> Result<(), CredentialStoreError>;
    /// Every credential (what a single node hands a cluster when it joins one).
    fn all(&self) -> Users;
    /// Makes the credentials exactly `users` (a cluster node mirroring its image), durably;
    /// writes nothing when they are already.
    fn replace_all(&self, users: &Users) -> Result<(), CredentialStoreError>;
}

/// Applies `changes` in order: an upsert replaces the user's credential for its mechanism, a
/// delete removes it (and the user with its last one).
pub fn apply_changes(users: &mut Users, changes: &[CredentialChange]) {
    for c in changes {
        match c {
            CredentialChange::Upsert {
                user,
                mechanism,
                credential,
            } => {
                users
                    .entry(user.clone())
                    .or_default()
                    .insert(*mechanism, credential.clone());
            }
            CredentialChange::Delete { user, mechanism } => {
                if let Some(m) = users.get_mut(user) {
                    m.remove(mechanism);
                    if m.is_empty() {
                        users.remove(user);
                    }
                }
            }
        }
    }
}

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct Stored {
    version: u32,
    users: Users,
}

impl FileCredentialStore {
    fn persist(&self, next: &Stored) -> Result<(), CredentialStoreError> {
        let bytes = serde_json::to_vec_pretty(next).expect("credentials serialise");
        storage::logdir::write_atomic(&self.path, &bytes).map_err(CredentialStoreError::Persist)
    }
}

/// The single node's credential store: a JSON file in the data dir.
pub struct FileCredentialStore {
    path: PathBuf,
    state: RwLock<Stored>,
}

impl FileCredentialStore {
    pub fn open(data_dir: &Path) -> Result<FileCredentialStore, CredentialStoreError> {
        let path = data_dir.join(FILE_NAME);
        let state = match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|e| CredentialStoreError::Corrupt {
                    path: path.clone(),
                    message: e.to_string(),
                })?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Stored {
                version: 1,
                ..Default::default()
            },
            Err(source) => return Err(CredentialStoreError::Read { path, source }),
        };
        Ok(FileCredentialStore {
            path,
            state: RwLock::new(state),
        })
    }
}

impl CredentialStore for FileCredentialStore {
    fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<StoredCredential> {
        let s = self.state.read().unwrap_or_else(|e| e.into_inner());
        s.users.get(user)?.get(&mechanism).cloned()
    }

    fn users(&self) -> BTreeMap<String, Vec<(ScramMechanism, i32)>> {
        let s = self.state.read().unwrap_or_else(|e| e.into_inner());
        s.users
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(u, m)| {
                (
                    u.clone(),
                    m.iter().map(|(k, c)| (*k, c.iterations)).collect(),
                )
            })
            .collect()
    }

    fn apply(&self, changes: &[CredentialChange]) -> Result<(), CredentialStoreError> {
        let mut s = self.state.write().unwrap_or_else(|e| e.into_inner());
        let mut next = s.clone();
        apply_changes(&mut next.users, changes);
        self.persist(&next)?;
        *s = next;
        Ok(())
    }

    fn all(&self) -> Users {
        let s = self.state.read().unwrap_or_else(|e| e.into_inner());
        s.users.clone()
    }

    fn replace_all(&self, users: &Users) -> Result<(), CredentialStoreError> {
        let mut s = self.state.write().unwrap_or_else(|e| e.into_inner());
        if s.users == *users {
            return Ok(());
        }
        let next = Stored {
            version: 1,
            users: users.clone(),
        };
        self.persist(&next)?;
        *s = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(i: i32) -> StoredCredential {
        StoredCredential {
            salt: vec![1, 2, 3],
            stored_key: vec![4; 32],
            server_key: vec![5; 32],
            iterations: i,
        }
    }

    #[test]
    fn given_changes_when_reopened_then_credentials_are_there_and_no_password_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileCredentialStore::open(dir.path()).unwrap();
        s.apply(&[
            CredentialChange::Upsert {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha512,
                credential: cred(4096),
            },
            CredentialChange::Upsert {
                user: "bob".into(),
                mechanism: ScramMechanism::Sha256,
                credential: cred(8192),
            },
        ])
        .unwrap();
        s.apply(&[CredentialChange::Delete {
            user: "bob".into(),
            mechanism: ScramMechanism::Sha256,
        }])
        .unwrap();
        let again = FileCredentialStore::open(dir.path()).unwrap();
        assert_eq!(
            again.credential("alice", ScramMechanism::Sha512),
            Some(cred(4096))
        );
        assert_eq!(again.credential("alice", ScramMechanism::Sha256), None);
        assert_eq!(
            again.users().into_iter().collect::<Vec<_>>(),
            vec![("alice".to_string(), vec![(ScramMechanism::Sha512, 4096)])]
        );
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(
            text.contains("SCRAM-SHA-512") && !text.contains("password"),
            "{text}"
        );
        let mut mirrored = Users::new();
        mirrored
            .entry("carol".into())
            .or_default()
            .insert(ScramMechanism::Sha256, cred(8192));
        again.replace_all(&mirrored).unwrap();
        let reopened = FileCredentialStore::open(dir.path()).unwrap();
        assert_eq!(reopened.all(), mirrored);
        assert_eq!(reopened.credential("alice", ScramMechanism::Sha512), None);
    }
}
