//! openraft's storage for the metadata quorum, on disk under `<data-dir>/cluster/`:
//! `vote.json`, `committed.json`, `purged.json`, one file per log entry in `log/` and
//! `snapshot.json`. Every file is written with `storage::logdir::write_atomic` (tmp, fsync,
//! rename, fsync dir) before openraft is told, so what openraft believes durable is.
//! One file per entry is affordable because metadata entries are rare (topic admin, broker
//! registration, a blank entry per election); heartbeats write nothing.
//!
//! The state machine is the in-memory `MetadataImage`; each applied command is published
//! (`image`) and handed to the materializer (`applied`) in log order.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use openraft::storage::{LogState, RaftLogReader, RaftSnapshotBuilder, RaftStorage, Snapshot};
use openraft::{
    Entry, EntryPayload, LogId, OptionalSend, SnapshotMeta, StorageError, StorageIOError,
    StoredMembership, Vote,
};
use serde::{Deserialize, Serialize};

use super::image::{MetadataImage, Outcome, Section, TopicRecord};
use super::types::{NodeId, TypeConfig};

/// A change the local catalog and stores must follow, in log order.
#[derive(Debug)]
pub enum Applied {
    /// `index` applied: `topics` may have changed to these records (`None`: deleted), and
    /// `sections` of `image` (the image right after this entry) may have changed.
    Entry {
        index: u64,
        topics: Vec<(String, Option<TopicRecord>)>,
        sections: &'static [Section],
        image: Arc<MetadataImage>,
    },
    /// The whole image replaced by a snapshot from the leader (this node was too far
    /// behind): reconcile with it.
    Image {
        index: u64,
        image: Arc<MetadataImage>,
    },
}

#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, openraft::BasicNode>,
    image: MetadataImage,
}

struct Inner {
    dir: PathBuf,
    log: BTreeMap<u64, Entry<TypeConfig>>,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    purged: Option<LogId<NodeId>>,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, openraft::BasicNode>,
    image: MetadataImage,
    snapshot: Option<StoredSnapshot>,
    snapshot_seq: u64,
}

/// Cheap to clone: openraft takes a log reader and a snapshot builder as separate values.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
    /// The image every shard reads (`ClusterHandle::image`).
    pub image: Arc<RwLock<Arc<MetadataImage>>>,
    /// The last committed log index as openraft saved it (-1: none), for the metrics:
    /// openraft 0.9's `RaftMetrics` has no commit index.
    pub commit_index: Arc<AtomicI64>,
    applied: tokio::sync::mpsc::UnboundedSender<Applied>,
}

fn io_err(e: impl std::error::Error + 'static) -> StorageIOError<NodeId> {
    StorageIOError::write(&e)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> std::io::Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A file of the metadata log could not be written (a full disk): the node stops, as a
/// Kafka broker halts when its metadata log dir fails (`shard::log_dir_failure`). Returning
/// the error instead would make openraft stop this node's Raft for good while the process
/// went on serving clients from a frozen image.
fn stop_on_failure<T, E: std::error::Error + 'static>(
    path: &Path,
    r: Result<T, E>,
) -> Result<T, E> {
    if let Err(e) = &r {
        crate::shard::log_dir_failure::failed_with(
            crate::shard::log_dir_failure::Policy::Stop,
            path,
            e,
        );
    }
    r
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    stop_on_failure(path, storage::logdir::write_atomic(path, &bytes))
        .map_err(std::io::Error::other)
}

fn index_or_none(log_id: Option<LogId<NodeId>>) -> i64 {
    log_id.map_or(-1, |l| l.index as i64)
}

fn entry_path(dir: &Path, index: u64) -> PathBuf {
    dir.join("log").join(format!("{index:020}.json"))
}

impl Store {
    /// Opens (or creates) the store in `dir`. The loaded snapshot is the starting image; the
    /// entries after it are applied again by openraft up to the saved commit index.
    pub fn open(
        dir: &Path,
        applied: tokio::sync::mpsc::UnboundedSender<Applied>,
    ) -> std::io::Result<Store> {
        std::fs::create_dir_all(dir.join("log"))?;
        let mut log = BTreeMap::new();
        for e in std::fs::read_dir(dir.join("log"))? {
            let path = e?.path();
            if path.extension().and_then(|x| x.to_str()) != Some("json") {
                continue; // a tmp file a crash left behind
            }
            if let Some(entry) = read_json::<Entry<TypeConfig>>(&path)? {
                log.insert(entry.log_id.index, entry);
            }
        }
        let snapshot: Option<StoredSnapshot> = read_json(&dir.join("snapshot.json"))?;
        let (image, last_applied, membership) = match &snapshot {
            Some(s) => (
                s.image.clone(),
                s.meta.last_log_id,
                s.meta.last_membership.clone(),
            ),
            None => Default::default(),
        };
        // Not handed to the materializer: the local catalog already reflects at least this
        // snapshot (it was materialised before the snapshot was taken), and the entries after
        // it are replayed one by one.
        let image_arc = Arc::new(image.clone());
        let inner = Inner {
            dir: dir.to_path_buf(),
            log,
            vote: read_json(&dir.join("vote.json"))?,
            committed: read_json(&dir.join("committed.json"))?,
            purged: read_json(&dir.join("purged.json"))?,
            last_applied,
            membership,
            image,
            snapshot,
            snapshot_seq: 0,
        };
        let commit_index = Arc::new(AtomicI64::new(index_or_none(inner.committed)));
        Ok(Store {
            inner: Arc::new(Mutex::new(inner)),
            image: Arc::new(RwLock::new(image_arc)),
            commit_index,
            applied,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("cluster store lock")
    }

    fn publish(&self, image: MetadataImage) -> Arc<MetadataImage> {
        let arc = Arc::new(image);
        *self.image.write().expect("image lock") = arc.clone();
        arc
    }
}

impl RaftLogReader<TypeConfig> for Store {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        Ok(self
            .lock()
            .log
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftSnapshotBuilder<TypeConfig> for Store {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let mut inner = self.lock();
        inner.snapshot_seq += 1;
        let snapshot_id = match inner.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id, l.index, inner.snapshot_seq),
            None => format!("--{}", inner.snapshot_seq),
        };
        let meta = SnapshotMeta {
            last_log_id: inner.last_applied,
            last_membership: inner.membership.clone(),
            snapshot_id,
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            image: inner.image.clone(),
        };
        write_json(&inner.dir.join("snapshot.json"), &stored).map_err(io_err)?;
        let data = serde_json::to_vec(&stored.image).map_err(io_err)?;
        inner.snapshot = Some(stored);
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStorage<TypeConfig> for Store {
    type LogReader = Store;
    type SnapshotBuilder = Store;

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.lock();
        write_json(&inner.dir.join("vote.json"), vote).map_err(io_err)?;
        inner.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.lock().vote)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.lock();
        write_json(&inner.dir.join("committed.json"), &committed).map_err(io_err)?;
        inner.committed = committed;
        self.commit_index
            .store(index_or_none(committed), Ordering::Relaxed);
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.lock().committed)
    }

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let inner = self.lock();
        let last = inner.log.values().next_back().map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id: inner.purged,
            last_log_id: last.or(inner.purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn append_to_log<I>(&mut self, entries: I) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
    {
        let mut inner = self.lock();
        for entry in entries {
            write_json(&entry_path(&inner.dir, entry.log_id.index), &entry).map_err(io_err)?;
            inner.log.insert(entry.log_id.index, entry);
        }
        Ok(())
    }

    async fn delete_conflict_logs_since(
        &mut self,
        log_id: LogId<NodeId>,
    ) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.lock();
        let doomed: Vec<u64> = inner.log.range(log_id.index..).map(|(i, _)| *i).collect();
        // Newest first: a crash midway leaves a shorter log, never one with a hole.
        for i in doomed.into_iter().rev() {
            let path = entry_path(&inner.dir, i);
            stop_on_failure(&path, remove(&path)).map_err(io_err)?;
            inner.log.remove(&i);
        }
        // Durable before openraft appends the leader's entries in their place: a conflicting
        // entry must not come back after a crash.
        let log_dir = inner.dir.join("log");
        stop_on_failure(&log_dir, sync_dir(&log_dir)).map_err(io_err)?;
        Ok(())
    }

    async fn purge_logs_upto(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.lock();
        // The purge point first: a crash midway leaves files below it, which `open` skips
        // over harmlessly (openraft never asks for entries below the purge point).
        write_json(&inner.dir.join("purged.json"), &Some(log_id)).map_err(io_err)?;
        inner.purged = Some(log_id);
        let doomed: Vec<u64> = inner.log.range(..=log_id.index).map(|(i, _)| *i).collect();
        for i in doomed {
            let path = entry_path(&inner.dir, i);
            stop_on_failure(&path, remove(&path)).map_err(io_err)?;
            inner.log.remove(&i);
        }
        Ok(())
    }

    async fn last_applied_state(
        &mut self,
    ) -> Result<
        (
            Option<LogId<NodeId>>,
            StoredMembership<NodeId, openraft::BasicNode>,
        ),
        StorageError<NodeId>,
    > {
        let inner = self.lock();
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply_to_state_machine(
        &mut self,
        entries: &[Entry<TypeConfig>],
    ) -> Result<Vec<Outcome>, StorageError<NodeId>> {
        let mut outcomes = Vec::with_capacity(entries.len());
        for entry in entries {
            let mut inner = self.lock();
            inner.last_applied = Some(entry.log_id);
            let (mut topics, mut sections) = (Vec::new(), &[][..]);
            let outcome = match &entry.payload {
                EntryPayload::Blank => Outcome::Done,
                EntryPayload::Membership(m) => {
                    inner.membership = StoredMembership::new(Some(entry.log_id), m.clone());
                    Outcome::Done
                }
                EntryPayload::Normal(cmd) => {
                    let outcome = inner.image.apply(cmd);
                    // A refused migration changed nothing, and its topics are the node's
                    // own, not the image's: there is nothing to follow.
                    if !matches!(outcome, Outcome::MigrationConflict(_)) {
                        topics = cmd
                            .topics()
                            .into_iter()
                            .map(|name| {
                                let record = inner.image.topics.get(&name).cloned();
                                (name, record)
                            })
                            .collect();
                        sections = cmd.sections();
                    }
                    outcome
                }
            };
            let image = inner.image.clone();
            drop(inner);
            let image = self.publish(image);
            let _ = self.applied.send(Applied::Entry {
                index: entry.log_id.index,
                topics,
                sections,
                image,
            });
            outcomes.push(outcome);
        }
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let image: MetadataImage = serde_json::from_slice(snapshot.get_ref())
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        let mut inner = self.lock();
        let stored = StoredSnapshot {
            meta: meta.clone(),
            image: image.clone(),
        };
        write_json(&inner.dir.join("snapshot.json"), &stored).map_err(io_err)?;
        inner.snapshot = Some(stored);
        inner.last_applied = meta.last_log_id;
        inner.membership = meta.last_membership.clone();
        inner.image = image.clone();
        drop(inner);
        let arc = self.publish(image);
        let _ = self.applied.send(Applied::Image {
            index: meta.last_log_id.map_or(0, |l| l.index),
            image: arc,
        });
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let inner = self.lock();
        let Some(s) = &inner.snapshot else {
            return Ok(None);
        };
        let data = serde_json::to_vec(&s.image).map_err(io_err)?;
        Ok(Some(Snapshot {
            meta: s.meta.clone(),
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}

fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    /// openraft's own storage conformance suite (vote, log, truncation, purge, apply,
    /// snapshots) against this store, each case in a fresh directory.
    #[test]
    fn given_openraft_storage_suite_when_run_then_store_conforms() {
        let root = Arc::new(tempfile::tempdir().unwrap());
        let seq = Arc::new(AtomicU64::new(0));
        let builder = move || {
            let dir = root
                .path()
                .join(seq.fetch_add(1, Ordering::Relaxed).to_string());
            async move {
                let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
                Store::open(&dir, tx).unwrap()
            }
        };
        openraft::testing::Suite::test_all(builder).unwrap();
    }

    #[test]
    fn given_vote_and_entries_when_reopened_then_same_state() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
            let mut s = Store::open(dir.path(), tx.clone()).unwrap();
            let vote = Vote::new(3, 2);
            s.save_vote(&vote).await.unwrap();
            let entries: Vec<Entry<TypeConfig>> = (1..=3)
                .map(|i| Entry {
                    log_id: LogId::new(openraft::CommittedLeaderId::new(3, 2), i),
                    payload: EntryPayload::Blank,
                })
                .collect();
            s.append_to_log(entries).await.unwrap();
            s.delete_conflict_logs_since(LogId::new(openraft::CommittedLeaderId::new(3, 2), 3))
                .await
                .unwrap();
            drop(s);
            let mut s = Store::open(dir.path(), tx).unwrap();
            assert_eq!(s.read_vote().await.unwrap(), Some(vote));
            let state = s.get_log_state().await.unwrap();
            assert_eq!(
                state.last_log_id.map(|l| l.index),
                Some(2),
                "truncated entry gone"
            );
        });
    }
}
