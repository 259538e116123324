//! The broker side of the metadata quorum: every applied command that changes a topic is
//! carried out on this node with the same code a single node runs — the local catalog
//! (`strom-topics.json`, a cache of the image when clustered) gets the topic with the
//! image's id and configs, and the partitions this node holds a replica of are opened on
//! their home shards (the replica manager, `replicas.rs`, opens and deletes them as
//! reassignments move replicas), given their new settings, or removed with their files.
//! The other sections a command changes (ACLs, SCRAM credentials, quotas, dynamic broker
//! configs, group and client-metrics configs, feature levels) are mirrored
//! whole into the node's own stores, which stay the files a single node keeps: the
//! authorizer, SASL and the quota managers read them as before, with no lock and no message
//! to the cluster thread. Idempotent: replaying an entry after a restart finds nothing to do.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use super::image::{MetadataImage, Section, TopicRecord};
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
///
/// `migration`, on a node whose single-node data dir is joining the image (`migrate.rs`),
/// gives the index of the migration's entry once it is in the log (dropped: the migration
/// was refused, and nothing is carried out). Entries before it are not carried out one by
/// one: they were decided without the node's topics, and following them could replace a
/// topic of the same name that the image had deleted meanwhile, taking the node's log with
/// it. The first entry from there on is reconciled whole instead.
pub async fn run(
    ctx: Arc<BrokerContext>,
    dir: PathBuf,
    mut applied: mpsc::UnboundedReceiver<Applied>,
    materialized: watch::Sender<u64>,
    migration: Option<oneshot::Receiver<u64>>,
) {
    let mut done = done_index(&dir);
    materialized.send_modify(|m| *m = (*m).max(done));
    let mut migrated_at = match migration {
        None => None,
        Some(rx) => match rx.await {
            Ok(index) => Some(index),
            Err(_) => return,
        },
    };
    while let Some(a) = applied.recv().await {
        let index = match a {
            Applied::Entry { index, .. } | Applied::Image { index, .. }
                if migrated_at.is_some_and(|m| index < m) =>
            {
                continue;
            }
            Applied::Entry { index, image, .. } | Applied::Image { index, image }
                if migrated_at.is_some() =>
            {
                migrated_at = None;
                reconcile(&ctx, &image).await;
                persist(&dir, index);
                super::migrate::finish(&dir);
                done = done.max(index);
                index
            }
            Applied::Entry {
                index,
                topics,
                sections,
                image,
            } => {
                if index > done && (!topics.is_empty() || !sections.is_empty()) {
                    for (name, record) in &topics {
                        follow(&ctx, name, record.as_ref()).await;
                    }
                    for section in sections {
                        mirror(&ctx, &image, *section).await;
                    }
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

/// Makes everything local match `image`: its topics, and every mirrored section.
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
    for section in Section::ALL {
        mirror(ctx, image, *section).await;
    }
}

/// Makes this node's store of `section` hold exactly what `image` does. A store that cannot
/// be written keeps its old content (logged; the next change of the section tries again).
async fn mirror(ctx: &BrokerContext, image: &MetadataImage, section: Section) {
    let written = match section {
        Section::Acls => ctx.acls.replace_all(&image.acls).map_err(|e| e.to_string()),
        Section::Users => ctx
            .credentials
            .replace_all(&image.users)
            .map_err(|e| e.to_string()),
        Section::Quotas => ctx
            .quotas
            .store()
            .replace_all(&image.quotas)
            .map_err(|e| e.to_string()),
        Section::BrokerConfigs => mirror_broker_configs(ctx, image).await,
        Section::GroupConfigs => ctx
            .group_configs
            .replace_all(&image.group_configs)
            .map_err(|e| e.to_string()),
        Section::ClientMetrics => ctx
            .telemetry
            .replace_all(&image.client_metrics)
            .map_err(|e| e.to_string()),
        // None: nothing set through the cluster yet, every node keeps its own levels.
        Section::Features => match &image.features {
            Some(f) => ctx.features.replace(f).map_err(|e| e.to_string()),
            None => Ok(()),
        },
    };
    if let Err(e) = written {
        tracing::error!(?section, error = %e, "cannot mirror the metadata image into this node's store");
    }
}

/// The cluster-wide dynamic defaults and this node's own values, as the image has them; every
/// topic then resolves its settings again, as after a single node's AlterConfigs.
async fn mirror_broker_configs(ctx: &BrokerContext, image: &MetadataImage) -> Result<(), String> {
    let of = |scope: &str| image.broker_configs.get(scope).cloned().unwrap_or_default();
    let (defaults, own) = (of(""), of(&ctx.config.node_id.to_string()));
    let view = ctx.catalog.broker();
    let mut changed = None;
    for (node_scope, values) in [(false, defaults), (true, own)] {
        let current = if node_scope {
            &view.node
        } else {
            &view.cluster
        };
        if *current != values {
            let catalog = ctx.catalog.set_broker_dynamic(node_scope, values);
            changed = Some(catalog.map_err(|e| e.to_string())?);
        }
    }
    let Some(catalog) = changed else {
        return Ok(());
    };
    for meta in catalog.topics.values() {
        frontend::apply_settings(ctx, meta).await;
    }
    tracing::info!("dynamic broker configs follow the metadata image");
    Ok(())
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
    if local
        .as_ref()
        .is_some_and(|l| l.id == record.id && l.configs != record.configs)
    {
        if let Err(e) = ctx.catalog.set_configs(name, record.configs.clone()) {
            tracing::error!(topic = name, error = %e, "cannot change topic configs in catalog");
            return;
        }
        // Its partitions (the ones open so far; new ones open with these) take them now.
        if let Some(meta) = ctx.catalog.snapshot().get(name) {
            frontend::apply_settings(ctx, meta).await;
        }
        tracing::info!(topic = name, "topic configs follow the metadata image");
    }
    if current < count {
        let meta = ctx
            .catalog
            .snapshot()
            .get(name)
            .cloned()
            .expect("just added");
        // Only the replicas the image places here: a node holds no log of the others.
        for (i, p) in record.partitions.iter().enumerate().skip(current as usize) {
            if !p.replicas.contains(&ctx.config.node_id) {
                continue;
            }
            let i = i as i32;
            if let Err(e) = frontend::open_partitions(ctx, &meta, i..i + 1).await {
                tracing::error!(topic = name, partition = i, error = %e, "cannot open partition");
            }
        }
    }
}
