//! The broker side of the metadata quorum: every applied command that changes a topic is
//! carried out on this node with the same code a single node runs — the local catalog
//! (`strom-topics.json`, a cache of the image when clustered) gets the topic with the
//! image's id, and its partitions are opened on their home shards (on every node: the next
//! step replicates into them) or removed with their files. Idempotent: replaying an entry
//! after a restart finds nothing to do.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::image::{MetadataImage, TopicRecord};
use super::store::Applied;
use crate::shard::{frontend, BrokerContext};

/// Where the last index that changed the local catalog is kept (`<data-dir>/cluster/`).
pub const DONE_FILE: &str = "materialized.json";

/// The index persisted by `run`: entries up to it are already reflected locally.
pub fn done_index(dir: &Path) -> u64 {
    std::fs::read(dir.join(DONE_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(0)
}

/// Runs until the store is dropped; `materialized` follows the last index carried out.
/// Entries up to `done` (persisted before a restart) are skipped: the catalog already
/// reflects them, and redoing an old entry could undo a later one (a topic deleted and
/// created again would lose its new log).
pub async fn run(
    ctx: Arc<BrokerContext>,
    dir: PathBuf,
    mut applied: mpsc::UnboundedReceiver<Applied>,
    materialized: watch::Sender<u64>,
) {
    let mut done = done_index(&dir);
    materialized.send_modify(|m| *m = (*m).max(done));
    while let Some(a) = applied.recv().await {
        let index = match a {
            Applied::Entry { index, topic } => {
                if let Some((name, record)) = topic.filter(|_| index > done) {
                    follow(&ctx, &name, record.as_ref()).await;
                    persist(&dir, index);
                    done = index;
                }
                index
            }
            Applied::Image { index, image } => {
                reconcile(&ctx, &image).await;
                persist(&dir, index);
                done = done.max(index);
                index
            }
        };
        materialized.send_modify(|m| *m = (*m).max(index));
    }
}

fn persist(dir: &Path, index: u64) {
    let bytes = serde_json::to_vec(&index).expect("an integer serialises");
    if let Err(e) = storage::logdir::write_atomic(&dir.join(DONE_FILE), &bytes) {
        // Only costs a redo of this entry after a restart (idempotent for the same record).
        tracing::warn!(error = %e, "cannot persist the materialized metadata index");
    }
}

async fn reconcile(ctx: &BrokerContext, image: &MetadataImage) {
    for (name, record) in &image.topics {
        follow(ctx, name, Some(record)).await;
    }
    let catalog = ctx.catalog.snapshot();
    for name in catalog.topics.keys() {
        if !image.topics.contains_key(&**name) {
            follow(ctx, name, None).await;
        }
    }
}

/// Makes the local topic `name` match `record` (`None`: the topic is gone).
async fn follow(ctx: &BrokerContext, name: &str, record: Option<&TopicRecord>) {
    let local = ctx.catalog.snapshot().get(name).cloned();
    if let Some(local) = &local {
        if record.is_none_or(|r| r.id != local.id) {
            // Deleted, or deleted and created again while this node was away.
            if let Err(e) = ctx.catalog.delete(name) {
                tracing::error!(topic = name, error = %e, "cannot remove topic from catalog");
                return;
            }
            frontend::delete_partitions(ctx, local).await;
        }
    }
    let Some(record) = record else { return };
    let count = record.partitions.len() as i32;
    let current = match &local {
        Some(l) if l.id == record.id => l.partitions,
        _ => {
            let created = ctx.catalog.create_with_id(
                name,
                record.id,
                count,
                record.configs.clone(),
                record.internal,
            );
            if let Err(e) = created {
                tracing::error!(topic = name, error = %e, "cannot add topic to catalog");
                return;
            }
            0
        }
    };
    if current < count && current > 0 {
        if let Err(e) = ctx.catalog.set_partitions(name, count) {
            tracing::error!(topic = name, error = %e, "cannot grow topic in catalog");
            return;
        }
    }
    if current < count {
        let meta = ctx
            .catalog
            .snapshot()
            .get(name)
            .cloned()
            .expect("just added");
        if let Err(e) = frontend::open_partitions(ctx, &meta, current..count).await {
            tracing::error!(topic = name, error = %e, "cannot open partitions");
        }
    }
}
