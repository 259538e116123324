//! A single node becomes a node of a cluster without losing its data: on its first clustered
//! start (no `cluster/` dir yet), a data dir that holds topics, ACLs, users, quotas, configs
//! or handed-out producer ids proposes them into the image (`Command::Migrate`, decided in
//! `image/migrate.rs`), before the node serves a request.
//!
//! Order, and why:
//! 1. `capture` reads the node's stores while nothing can change them (the shards have not
//!    started), and `mark_pending` writes `cluster/migration-pending` before the metadata log
//!    exists, so a crash anywhere below retries the migration at the next start (the image
//!    takes the same topic ids twice as a no-op).
//! 2. The materializer holds back (`materialize::run`'s `migration`): the entries the cluster
//!    wrote before the migration must not be followed against the node's own catalog.
//! 3. `propose` waits for a quorum (a majority of the voters must run), then for the image's
//!    decision. Refused (the cluster has one of the node's topics under another id): start
//!    fails with the reason, the data dir as it was, the marker still there.
//! 4. Accepted: the materializer reconciles the node with the image as of the migration
//!    (the node's topics are in it, with their ids) and only then removes the marker.

use std::path::Path;

use super::handle::{write_through_leader, ClusterError};
use super::image::{Command, MigratedTopic, Migration, Outcome};
use super::types::Raft;
use crate::shard::BrokerContext;

/// Present while a migration has not been carried out on this node.
pub const PENDING_FILE: &str = "migration-pending";

/// What this node's stores hold, as a migration; `None` when there is nothing a cluster
/// would lose (a fresh data dir: its feature levels alone are no reason to migrate).
pub fn capture(ctx: &BrokerContext) -> Option<Migration> {
    let node = ctx.config.node_id;
    let topics = ctx
        .catalog
        .snapshot()
        .topics
        .values()
        .map(|t| {
            let topic = MigratedTopic {
                id: t.id,
                partitions: t.partitions,
                configs: t.configs.clone(),
                internal: t.internal,
            };
            (t.name.to_string(), topic)
        })
        .collect();
    let view = ctx.catalog.broker();
    let broker_configs = [
        (String::new(), &view.cluster),
        (node.to_string(), &view.node),
    ]
    .into_iter()
    .filter(|(_, values)| !values.is_empty())
    .map(|(scope, values)| (scope, values.clone()))
    .collect();
    let group_configs = ctx
        .group_configs
        .all()
        .iter()
        .map(|(g, o)| (g.clone(), (**o).clone()))
        .collect();
    let client_metrics = ctx
        .telemetry
        .names()
        .into_iter()
        .filter_map(|n| ctx.telemetry.configs(&n).map(|c| (n, (*c).clone())))
        .collect();
    let m = Migration {
        node,
        topics,
        acls: (*ctx.acls.snapshot()).clone(),
        users: ctx.credentials.all(),
        quotas: (*ctx.quotas.store().snapshot()).clone(),
        broker_configs,
        group_configs,
        client_metrics,
        features: (*ctx.features.snapshot()).clone(),
        next_producer_id: ctx.producer_ids.single_node_end(),
    };
    let empty = m.topics.is_empty()
        && m.acls.is_empty()
        && m.users.is_empty()
        && m.quotas.is_empty()
        && m.broker_configs.is_empty()
        && m.group_configs.is_empty()
        && m.client_metrics.is_empty()
        && m.next_producer_id == 0;
    (!empty).then_some(m)
}

/// Durably marks the migration as due (creating `dir`).
pub fn mark_pending(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    storage::logdir::write_atomic(&dir.join(PENDING_FILE), b"{}\n").map_err(std::io::Error::other)
}

/// The migration is carried out on this node: a restart does not redo it.
pub fn finish(dir: &Path) {
    let path = dir.join(PENDING_FILE);
    let removed = std::fs::remove_file(&path).and_then(|()| std::fs::File::open(dir)?.sync_all());
    if let Err(e) = removed {
        // Costs a no-op migration at the next start (the image has these topic ids already).
        tracing::warn!(path = %path.display(), error = %e, "cannot remove the migration marker");
    }
}

/// Proposes `m` until a quorum decides it; the index of its entry when the image took it.
pub async fn propose(raft: Raft, m: Migration) -> Result<u64, ClusterError> {
    let summary = Summary::of(&m);
    tracing::info!(
        topics = ?summary.topics,
        acls = summary.acls,
        users = ?summary.users,
        "migrating this node's single-node metadata into the cluster"
    );
    let cmd = Command::Migrate(Box::new(m));
    let (index, outcome) = loop {
        match write_through_leader(raft.clone(), cmd.clone()).await {
            Ok(done) => break done,
            Err(ClusterError::NoQuorum(e)) => tracing::warn!(
                error = %e,
                "the migration waits for a metadata quorum: a majority of controller.quorum.voters must run"
            ),
            Err(e) => return Err(e),
        }
    };
    match outcome {
        Outcome::Migrated { kept } => {
            tracing::info!(
                index,
                topics = ?summary.topics,
                acls = summary.acls,
                users = ?summary.users,
                quota_entities = summary.quotas,
                broker_config_scopes = summary.broker_configs,
                group_configs = summary.groups,
                client_metrics_subscriptions = summary.client_metrics,
                next_producer_id = summary.next_producer_id,
                "migrated this node's single-node metadata into the cluster: its topics keep \
                 their ids, partition counts and configs, with this node as their only replica \
                 and leader"
            );
            for what in kept {
                tracing::warn!(kept = %what, "the cluster had another value; it keeps its own");
            }
            Ok(index)
        }
        Outcome::MigrationConflict(why) => Err(ClusterError::MigrationConflict(why)),
        other => Err(ClusterError::Raft(format!(
            "unexpected answer to the migration: {other:?}"
        ))),
    }
}

/// What a migration carries, for the log.
struct Summary {
    topics: Vec<String>,
    acls: usize,
    users: Vec<String>,
    quotas: usize,
    broker_configs: usize,
    groups: usize,
    client_metrics: usize,
    next_producer_id: i64,
}

impl Summary {
    fn of(m: &Migration) -> Summary {
        Summary {
            topics: m.topics.keys().cloned().collect(),
            acls: m.acls.len(),
            users: m.users.keys().cloned().collect(),
            quotas: m.quotas.len(),
            broker_configs: m.broker_configs.len(),
            groups: m.group_configs.len(),
            client_metrics: m.client_metrics.len(),
            next_producer_id: m.next_producer_id,
        }
    }
}
