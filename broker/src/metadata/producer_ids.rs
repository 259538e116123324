//! Producer id allocation for InitProducerId. Ids must never repeat across restarts (a reused
//! id would make a new producer's batches look like an old one's duplicates), so ids are handed
//! out from blocks whose upper end is persisted before any id of the block is used — Kafka's
//! controller does the same with its producer id blocks.
//!
//! On a cluster the blocks come from the metadata image instead (`AllocateProducerIds`, as
//! Kafka's brokers ask the controller): blocks never overlap, so two nodes never hand out the
//! same id, and a restarted node takes a fresh block. `ready` fetches a block when the
//! current one is used up; `next` then takes from it without waiting.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::cluster::handle::ClusterHandle;
use crate::cluster::image::{Command, Outcome};

const BLOCK: i64 = 1000;

pub struct ProducerIdAllocator {
    path: PathBuf,
    state: Mutex<(i64, i64)>, // (next id, end of persisted block, exclusive)
    /// Set once the node is clustered: ids come from `cluster_block`, never from the file.
    clustered: AtomicBool,
    /// The image's block this node uses: (next id, end exclusive); empty at start.
    cluster_block: Mutex<(i64, i64)>,
    /// One block request at a time (concurrent callers wait for it instead of each
    /// taking a block).
    fetching: tokio::sync::Mutex<()>,
}

impl ProducerIdAllocator {
    pub fn open(data_dir: &Path) -> std::io::Result<ProducerIdAllocator> {
        let path = data_dir.join("strom-producer-ids");
        let next = match std::fs::read_to_string(&path) {
            Ok(s) => s.trim().parse::<i64>().map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Ok(ProducerIdAllocator {
            path,
            state: Mutex::new((next, next)),
            clustered: AtomicBool::new(false),
            cluster_block: Mutex::new((0, 0)),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// Makes sure `next` has an id to give: on a cluster (node `node_id`), takes a new block
    /// from the image when this node's is used up (single node: nothing to do, `next`
    /// persists its own).
    pub async fn ready(
        &self,
        cluster: Option<&ClusterHandle>,
        node_id: i32,
    ) -> std::io::Result<()> {
        let Some(cluster) = cluster else {
            return Ok(());
        };
        self.clustered.store(true, Ordering::Release);
        let has_ids = || {
            let b = self.cluster_block.lock().expect("producer id block lock");
            b.0 < b.1
        };
        if has_ids() {
            return Ok(());
        }
        let _one = self.fetching.lock().await;
        if has_ids() {
            return Ok(());
        }
        let cmd = Command::AllocateProducerIds { broker: node_id };
        match cluster.propose(cmd).await {
            Ok(Outcome::ProducerIds { start, len }) => {
                tracing::info!(
                    start,
                    len,
                    "took a producer id block from the metadata quorum"
                );
                *self.cluster_block.lock().expect("producer id block lock") = (start, start + len);
                Ok(())
            }
            Ok(other) => Err(std::io::Error::other(format!(
                "unexpected answer to a producer id block request: {other:?}"
            ))),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        }
    }

    /// The first id a single node has not persisted a block for: no id at or above it was
    /// ever handed out (a cluster it joins continues above it).
    pub fn single_node_end(&self) -> i64 {
        self.state.lock().expect("producer id lock").1
    }

    /// The next producer id. On a cluster, call `ready` first (an empty block is an error
    /// the client retries).
    pub fn next(&self) -> std::io::Result<i64> {
        if self.clustered.load(Ordering::Acquire) {
            let mut b = self.cluster_block.lock().expect("producer id block lock");
            if b.0 >= b.1 {
                return Err(std::io::Error::other("no producer id block yet"));
            }
            let id = b.0;
            b.0 += 1;
            return Ok(id);
        }
        let mut s = self.state.lock().expect("producer id lock");
        if s.0 >= s.1 {
            let end = s.1 + BLOCK;
            storage::logdir::write_atomic(&self.path, end.to_string().as_bytes())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            s.1 = end;
        }
        let id = s.0;
        s.0 += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_restart_when_allocating_then_ids_never_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let a = ProducerIdAllocator::open(dir.path()).unwrap();
        let first: Vec<i64> = (0..3).map(|_| a.next().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(a);
        let b = ProducerIdAllocator::open(dir.path()).unwrap();
        assert!(b.next().unwrap() >= BLOCK);
    }
}
