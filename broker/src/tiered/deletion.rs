//! Deleting a topic deletes its remote objects (storage's `remote::deletions` keeps the
//! pending work durable). On the partition's home shard, before its dir goes: the remote
//! partition is forgotten (a topic recreated under the name starts afresh) and its entries
//! are written to a pending file. On the remote runtime: the entries a copy in flight added
//! are joined, the objects deleted, the file removed; a failure retries with a backoff, and
//! a broker restarted with pending files resumes them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use storage::remote::deletions::PendingDeletion;
use storage::remote::manifest::Manifest;

use super::RemoteLogManager;
use crate::partition::Partition;

/// Retry pause after a failed deletion (the store down), doubling up to the maximum.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);

impl RemoteLogManager {
    /// `p`'s topic was deleted; called on its home shard before its files are deleted.
    /// `prefix` is the partition's rendered prefix when it is not open here.
    pub fn partition_deleted(&self, data_dir: &Path, p: &Partition, prefix: Option<String>) {
        let key = (p.topic.clone(), p.index);
        let open = self.partitions.lock().expect("not poisoned").remove(&key);
        let (manifest, prefix) = match &open {
            Some(rp) => (rp.view(), rp.prefix.clone()),
            None => match (Manifest::load(p.log.dir()), prefix) {
                (Ok(m), Some(prefix)) => (m, prefix),
                (Err(e), _) => {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e,
                        "remote manifest of a deleted partition unreadable; its objects stay");
                    return;
                }
                (Ok(_), None) => return,
            },
        };
        if open.is_none() && manifest.segments().is_empty() {
            return;
        }
        let mut pending = PendingDeletion::new(&p.topic, p.index, &prefix, &manifest);
        let path = match pending.write(data_dir) {
            Ok(path) => Some(path),
            Err(e) => {
                // Still deleted now; only a crash before the end would leave them.
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e,
                    "pending remote deletion not written; deleting without it");
                None
            }
        };
        let store = self.store().clone();
        let data_dir = data_dir.to_path_buf();
        self.spawn(async move {
            let mut path = path;
            if let Some(rp) = open {
                let before = pending.segments.len();
                pending.extend(&rp.retire().await);
                if pending.segments.len() != before {
                    path = rewrite(&pending, &data_dir, path);
                }
            }
            run(pending, store, path).await;
        });
    }

    /// At start: the deletions a stop interrupted.
    pub(super) fn resume_deletions(&self, data_dir: &Path) {
        for (path, pending) in PendingDeletion::load_all(data_dir) {
            match pending {
                Ok(pending) => {
                    tracing::info!(topic = %pending.topic, partition = pending.partition,
                        segments = pending.segments.len(), "resuming the deletion of a deleted partition's remote objects");
                    let store = self.store().clone();
                    self.spawn(run(pending, store, Some(path)));
                }
                Err(e) => tracing::warn!(path = %path.display(), error = %e,
                    "pending remote deletion unreadable; left in place"),
            }
        }
    }
}

/// The pending file with the joined entries, then the old one removed.
fn rewrite(pending: &PendingDeletion, data_dir: &Path, old: Option<PathBuf>) -> Option<PathBuf> {
    match pending.write(data_dir) {
        Ok(new) => {
            if let Some(old) = old {
                let _ = std::fs::remove_file(old);
            }
            Some(new)
        }
        Err(e) => {
            tracing::warn!(error = %e, "pending remote deletion not rewritten");
            old
        }
    }
}

async fn run(
    pending: PendingDeletion,
    store: Arc<dyn storage::remote::ObjectStore>,
    path: Option<PathBuf>,
) {
    let mut pause = RETRY_FIRST;
    loop {
        match pending.run(&store).await {
            Ok(()) => break,
            Err(e) => {
                tracing::warn!(topic = %pending.topic, partition = pending.partition, error = %e,
                    retry_in_ms = pause.as_millis() as u64, "deleting a deleted partition's remote objects failed");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_MAX);
            }
        }
    }
    tracing::info!(topic = %pending.topic, partition = pending.partition,
        segments = pending.segments.len(), "deleted a deleted partition's remote objects");
    if let Some(path) = path {
        if let Err(e) = std::fs::remove_file(&path) {
            tracing::warn!(path = %path.display(), error = %e, "pending remote deletion not removed");
        }
    }
}
