//! Feature levels (KIP-584): what this node supports and what the cluster has finalized.
//!
//! Kafka keeps the finalized levels as `FeatureLevelRecord`s in its KRaft metadata log and
//! advertises both sets in ApiVersions v3+; clients act on them (the Java producer uses
//! transactions v2 only once `transaction.version` >= 2 is finalized). So Strom advertises
//! only what it really does:
//! - `metadata.version` 7 (3.3-IV3) ..= 33 (4.4-IV2), finalized at 33 as a fresh Kafka 4.4
//!   cluster is: Strom writes no metadata records whose format it gates, and serves 4.4's
//!   client protocol. Downgrades are refused as Kafka 4.4 refuses them.
//! - `group.version` 0..=1, finalized at 1: KIP-848 consumer groups. At 0 the consumer
//!   group APIs answer UNSUPPORTED_VERSION, as Kafka's do.
//! - `share.version` 0..=2, finalized at 2 as a fresh Kafka 4.4 cluster is: 1 is KIP-932
//!   share groups (`coordinator::share`; at 0 the share APIs answer UNSUPPORTED_VERSION),
//!   2 adds their dead-letter topics (KIP-1191, `coordinator::share::dlq`). A data dir
//!   written before keeps the level it finalized (1); `kafka-features.sh upgrade` moves it.
//! - `streams.version` 0..=1, finalized at 1 as a fresh Kafka 4.4 cluster is: KIP-1071
//!   streams groups (`coordinator::group::streams`; at 0 their APIs answer
//!   UNSUPPORTED_VERSION). A data dir written before keeps 0 until `kafka-features.sh
//!   upgrade`, as an upgraded Kafka cluster does.
//! - `transaction.version` 0..=2, finalized at 2 on a fresh data dir as a fresh Kafka 4.4
//!   cluster is: KIP-890 part 2, which a client uses once it sees the level finalized —
//!   Produce v12+ and TxnOffsetCommit v5 add their partition to the transaction themselves
//!   (no AddPartitionsToTxn / AddOffsetsToTxn), and every EndTxn v5 bumps the producer
//!   epoch. 1 changes nothing a client sees. A data dir written before keeps 0 until
//!   `kafka-features.sh upgrade --feature transaction.version=2`.
//! - `kraft.version` and `eligible.leader.replicas.version` are at 0 and not advertised
//!   (Kafka lists only features whose maximum is above 0): Strom has no KRaft quorum and no
//!   eligible leader replicas.
//!
//! The finalized levels live in `<data-dir>/strom-features.json`, written atomically before
//! an UpdateFeatures is answered, with an epoch that moves at every change (Kafka's is the
//! metadata log offset; clients only compare epochs). On a cluster they are cluster-wide, as
//! in Kafka: the replicated image holds them (`cluster::image`; an update is checked by
//! `plan` there, against the image's levels), and every node mirrors them into its file
//! (`FeaturesHandle::replace`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};

pub const METADATA_VERSION: &str = "metadata.version";
pub const GROUP_VERSION: &str = "group.version";
pub const SHARE_VERSION: &str = "share.version";
pub const STREAMS_VERSION: &str = "streams.version";
pub const TRANSACTION_VERSION: &str = "transaction.version";

/// A feature this node implements: its supported range and the level a new cluster starts at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureSpec {
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
    pub bootstrap: i16,
}

/// Every feature with a supported maximum above 0 (the others are not advertised).
pub static SUPPORTED: &[FeatureSpec] = &[
    FeatureSpec {
        name: METADATA_VERSION,
        min: 7,
        max: 33,
        bootstrap: 33,
    },
    FeatureSpec {
        name: GROUP_VERSION,
        min: 0,
        max: 1,
        bootstrap: 1,
    },
    FeatureSpec {
        name: SHARE_VERSION,
        min: 0,
        max: 2,
        bootstrap: 2,
    },
    FeatureSpec {
        name: STREAMS_VERSION,
        min: 0,
        max: 1,
        bootstrap: 1,
    },
    FeatureSpec {
        name: TRANSACTION_VERSION,
        min: 0,
        max: 2,
        bootstrap: 2,
    },
];

pub fn supported(name: &str) -> Option<&'static FeatureSpec> {
    SUPPORTED.iter().find(|f| f.name == name)
}

/// The finalized levels and their epoch. A level of 0 means "not finalized" and is not listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finalized {
    pub epoch: i64,
    pub levels: BTreeMap<String, i16>,
}

impl Finalized {
    /// The levels a new cluster starts at.
    pub fn bootstrap() -> Finalized {
        Finalized {
            epoch: 0,
            levels: SUPPORTED
                .iter()
                .filter(|f| f.bootstrap > 0)
                .map(|f| (f.name.to_string(), f.bootstrap))
                .collect(),
        }
    }

    pub fn level(&self, name: &str) -> i16 {
        self.levels.get(name).copied().unwrap_or(0)
    }
}

/// Kafka's `FeatureUpdate.UpgradeType` (UpdateFeatures v1+; v0's AllowDowngrade maps to
/// `SafeDowngrade`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpgradeType {
    Unknown,
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
}

impl UpgradeType {
    pub fn from_code(code: i8) -> UpgradeType {
        match code {
            1 => UpgradeType::Upgrade,
            2 => UpgradeType::SafeDowngrade,
            3 => UpgradeType::UnsafeDowngrade,
            _ => UpgradeType::Unknown,
        }
    }
}

/// One requested change (serialisable: a cluster replicates the request, and its controller
/// decides it against the image's levels).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureUpdate {
    pub name: String,
    pub level: i16,
    pub upgrade: UpgradeType,
}

#[derive(Debug, thiserror::Error)]
pub enum FeatureError {
    /// Kafka's INVALID_UPDATE_VERSION, with `FeatureControlManager`'s message.
    #[error("{0}")]
    InvalidUpdate(String),
    #[error("cannot persist feature levels: {0}")]
    Persist(#[source] storage::StorageError),
    #[error("cannot read feature levels {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("feature levels {path} are corrupt: {message}")]
    Corrupt { path: PathBuf, message: String },
}

fn invalid(name: &str, level: i16, why: &str) -> FeatureError {
    FeatureError::InvalidUpdate(format!(
        "Invalid update version {level} for feature {name}. {why}"
    ))
}

/// Checks one update against the current levels, as Kafka's `FeatureControlManager.
/// updateFeature` does (same checks, same order, same messages); `node_id` names the
/// "local controller".
fn check(current: &Finalized, u: &FeatureUpdate, node_id: i32) -> Result<(), FeatureError> {
    if u.upgrade == UpgradeType::Unknown {
        return Err(invalid(
            &u.name,
            u.level,
            "The controller does not support the given upgrade type.",
        ));
    }
    if u.level < 0 {
        return Err(invalid(
            &u.name,
            u.level,
            "A feature version cannot be less than 0.",
        ));
    }
    let what = format!("Local controller {node_id}");
    let (min, max) = supported(&u.name).map_or((0, 0), |f| (f.min, f.max));
    if u.level < min || u.level > max {
        let why = if max == 0 {
            format!("{what} does not support this feature.")
        } else {
            format!("{what} only supports versions {min}-{max}")
        };
        return Err(invalid(&u.name, u.level, &why));
    }
    let now = current.level(&u.name);
    if u.level < now && u.upgrade == UpgradeType::Upgrade {
        return Err(invalid(
            &u.name,
            u.level,
            "Can't downgrade the version of this feature without setting the upgrade type to \
             either safe or unsafe downgrade.",
        ));
    }
    if u.level > now && u.upgrade != UpgradeType::Upgrade {
        return Err(invalid(
            &u.name,
            u.level,
            "Can't downgrade to a newer version.",
        ));
    }
    if u.name == METADATA_VERSION && u.level < now {
        // Kafka 4.4 refuses every metadata.version downgrade; its answer has no
        // "Invalid update version" prefix.
        let why = if u.upgrade == UpgradeType::UnsafeDowngrade {
            "Unsafe metadata downgrade is not supported in this version."
        } else {
            "Refusing to perform the requested downgrade because it might delete metadata \
             information."
        };
        return Err(FeatureError::InvalidUpdate(format!(
            "Unsupported metadata.version downgrade from {now} to {}. {why}",
            u.level
        )));
    }
    Ok(())
}

/// The levels after `updates`, or the first update's error (nothing is applied then: Kafka
/// applies an UpdateFeatures atomically). Pure, for tests and for validate-only requests.
pub fn plan(
    current: &Finalized,
    updates: &[FeatureUpdate],
    node_id: i32,
) -> Result<Finalized, FeatureError> {
    let mut next = current.clone();
    for u in updates {
        check(current, u, node_id)?;
        if u.level == 0 {
            next.levels.remove(&u.name);
        } else {
            next.levels.insert(u.name.clone(), u.level);
        }
    }
    if next.levels != current.levels {
        next.epoch = current.epoch + 1;
    }
    Ok(next)
}

#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    version: u32,
    #[serde(flatten)]
    finalized: Finalized,
}

/// The finalized levels of this node, read by every shard (`Arc` snapshot) and changed only
/// by UpdateFeatures (serialised by a mutex).
pub struct FeaturesHandle {
    path: PathBuf,
    node_id: i32,
    current: RwLock<Arc<Finalized>>,
    writer: Mutex<()>,
}

impl FeaturesHandle {
    pub fn open(data_dir: &Path, node_id: i32) -> Result<FeaturesHandle, FeatureError> {
        let path = data_dir.join("strom-features.json");
        let finalized = match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice::<Stored>(&bytes)
                    .map_err(|e| FeatureError::Corrupt {
                        path: path.clone(),
                        message: e.to_string(),
                    })?
                    .finalized
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Finalized::bootstrap(),
            Err(source) => return Err(FeatureError::Io { path, source }),
        };
        Ok(FeaturesHandle {
            path,
            node_id,
            current: RwLock::new(Arc::new(finalized)),
            writer: Mutex::new(()),
        })
    }

    pub fn snapshot(&self) -> Arc<Finalized> {
        self.current.read().expect("features lock").clone()
    }

    pub fn level(&self, name: &str) -> i16 {
        self.snapshot().level(name)
    }

    /// KIP-848 consumer groups are on from group.version 1 (Kafka's `GroupVersion.GV_1`).
    pub fn consumer_protocol_enabled(&self) -> bool {
        self.level(GROUP_VERSION) >= 1
    }

    /// Validates `updates` and, unless `validate_only`, persists and publishes the result
    /// before returning it.
    pub fn update(
        &self,
        updates: &[FeatureUpdate],
        validate_only: bool,
    ) -> Result<Arc<Finalized>, FeatureError> {
        let _guard = self.writer.lock().expect("features writer");
        let current = self.snapshot();
        let next = plan(&current, updates, self.node_id)?;
        if validate_only || next == *current {
            return Ok(current);
        }
        let stored = Stored {
            version: 1,
            finalized: next,
        };
        let bytes = serde_json::to_vec_pretty(&stored).expect("features serialise");
        storage::logdir::write_atomic(&self.path, &bytes).map_err(FeatureError::Persist)?;
        let next = Arc::new(stored.finalized);
        *self.current.write().expect("features lock") = next.clone();
        Ok(next)
    }

    /// Makes the levels exactly `finalized` (a cluster node mirroring its image), durably;
    /// writes nothing when they are already.
    pub fn replace(&self, finalized: &Finalized) -> Result<(), FeatureError> {
        let _guard = self.writer.lock().expect("features writer");
        if *self.snapshot() == *finalized {
            return Ok(());
        }
        let stored = Stored {
            version: 1,
            finalized: finalized.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&stored).expect("features serialise");
        storage::logdir::write_atomic(&self.path, &bytes).map_err(FeatureError::Persist)?;
        *self.current.write().expect("features lock") = Arc::new(stored.finalized);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(name: &str, level: i16, upgrade: UpgradeType) -> FeatureUpdate {
        FeatureUpdate {
            name: name.into(),
            level,
            upgrade,
        }
    }

    fn message(r: Result<Finalized, FeatureError>) -> String {
        r.expect_err("refused").to_string()
    }

    #[test]
    fn given_fresh_node_when_reading_levels_then_kafka_4_4_bootstrap_of_what_strom_implements() {
        let f = Finalized::bootstrap();
        assert_eq!(f.level(METADATA_VERSION), 33);
        assert_eq!(f.level(GROUP_VERSION), 1);
        assert_eq!(f.level(TRANSACTION_VERSION), 2);
        assert!(SUPPORTED.iter().all(|s| s.max > 0 && s.min <= s.bootstrap));
    }

    #[test]
    fn given_updates_when_planning_then_kafka_messages() {
        let cur = Finalized::bootstrap();
        use UpgradeType::*;
        assert_eq!(
            message(plan(&cur, &[up("kraft.version", 1, Upgrade)], 0)),
            "Invalid update version 1 for feature kraft.version. Local controller 0 does not \
             support this feature."
        );
        assert_eq!(
            message(plan(&cur, &[up(TRANSACTION_VERSION, 3, Upgrade)], 0)),
            "Invalid update version 3 for feature transaction.version. Local controller 0 only \
             supports versions 0-2"
        );
        assert_eq!(
            message(plan(&cur, &[up(GROUP_VERSION, 3, Upgrade)], 5)),
            "Invalid update version 3 for feature group.version. Local controller 5 only \
             supports versions 0-1"
        );
        assert_eq!(
            message(plan(&cur, &[up(METADATA_VERSION, 6, SafeDowngrade)], 0)),
            "Invalid update version 6 for feature metadata.version. Local controller 0 only \
             supports versions 7-33"
        );
        assert_eq!(
            message(plan(&cur, &[up(GROUP_VERSION, 0, Upgrade)], 0)),
            "Invalid update version 0 for feature group.version. Can't downgrade the version of \
             this feature without setting the upgrade type to either safe or unsafe downgrade."
        );
        assert_eq!(
            message(plan(&cur, &[up(GROUP_VERSION, 1, Unknown)], 0)),
            "Invalid update version 1 for feature group.version. The controller does not \
             support the given upgrade type."
        );
        assert_eq!(
            message(plan(&cur, &[up(METADATA_VERSION, 30, SafeDowngrade)], 0)),
            "Unsupported metadata.version downgrade from 33 to 30. Refusing to perform the \
             requested downgrade because it might delete metadata information."
        );
        assert_eq!(
            message(plan(&cur, &[up(METADATA_VERSION, 32, UnsafeDowngrade)], 0)),
            "Unsupported metadata.version downgrade from 33 to 32. Unsafe metadata downgrade \
             is not supported in this version."
        );
        assert!(
            message(plan(&cur, &[up(GROUP_VERSION, -1, SafeDowngrade)], 0))
                .ends_with("A feature version cannot be less than 0.")
        );
    }

    #[test]
    fn given_downgrade_then_upgrade_when_planning_then_level_0_unlisted_and_epoch_moves() {
        use UpgradeType::*;
        let cur = Finalized::bootstrap();
        let down = plan(&cur, &[up(GROUP_VERSION, 0, SafeDowngrade)], 0).unwrap();
        assert!(!down.levels.contains_key(GROUP_VERSION));
        assert_eq!(down.epoch, cur.epoch + 1);
        assert!(
            message(plan(&down, &[up(GROUP_VERSION, 1, SafeDowngrade)], 0))
                .ends_with("Can't downgrade to a newer version.")
        );
        let again = plan(&down, &[up(GROUP_VERSION, 1, Upgrade)], 0).unwrap();
        assert_eq!(again.level(GROUP_VERSION), 1);
        // The same level again changes nothing, so the epoch stays.
        let same = plan(&again, &[up(METADATA_VERSION, 33, Upgrade)], 0).unwrap();
        assert_eq!(same.epoch, again.epoch);
    }

    #[test]
    fn given_one_bad_update_when_planning_then_none_applied() {
        use UpgradeType::*;
        let cur = Finalized::bootstrap();
        let r = plan(
            &cur,
            &[
                up(GROUP_VERSION, 0, SafeDowngrade),
                up("kraft.version", 1, Upgrade),
            ],
            0,
        );
        assert!(r.is_err());
    }

    #[test]
    fn given_update_when_reopening_then_levels_and_epoch_persisted() {
        let dir = tempfile::tempdir().unwrap();
        let h = FeaturesHandle::open(dir.path(), 0).unwrap();
        let down = [up(GROUP_VERSION, 0, UpgradeType::SafeDowngrade)];
        let v = h.update(&down, true).unwrap();
        assert_eq!(v.level(GROUP_VERSION), 1, "validate only changes nothing");
        h.update(&down, false).unwrap();
        assert_eq!(h.level(GROUP_VERSION), 0);
        let h2 = FeaturesHandle::open(dir.path(), 0).unwrap();
        assert_eq!(*h2.snapshot(), *h.snapshot());
        assert_eq!(h2.snapshot().epoch, 1);
    }
}
