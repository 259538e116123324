//! Topic creation: a new topic in the catalog, then its partitions opened on their home
//! shards. CreateTopics, Metadata's auto-creation and the coordinators' internal topics all
//! create topics through here, so Kafka's rules for it are written once.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cluster::handle::ClusterError;
use crate::cluster::image::{Command, Outcome};
use crate::config::topic::TopicConfigError;
use crate::metadata::catalog::{validate_topic_name, CatalogError, TopicMeta};
use crate::shard::{frontend, BrokerContext};

/// Why a topic could not be created; `handlers::errors::create_error_code` maps it.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("{0}")]
    InvalidName(String),
    #[error("Topic already exists.")]
    AlreadyExists,
    #[error("Number of partitions was set to an invalid non-positive value.")]
    InvalidPartitions,
    #[error("{0}")]
    InvalidReplicationFactor(String),
    #[error("{0}")]
    InvalidAssignment(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error(transparent)]
    InvalidConfig(#[from] TopicConfigError),
    #[error("{0}")]
    Storage(String),
    /// The client's controller mutation quota is used up (`quota`).
    #[error("The throttling quota has been exceeded.")]
    ThrottlingQuotaExceeded,
}

impl From<ClusterError> for CreateError {
    fn from(e: ClusterError) -> Self {
        CreateError::Storage(e.to_string())
    }
}

/// Creates the topic in the catalog and opens its partitions on their home shards, with
/// `default.replication.factor` replicas (Kafka's auto-creation; 1 on a single node).
pub async fn create_topic(
    broker: &BrokerContext,
    name: &str,
    partitions: i32,
    configs: BTreeMap<String, String>,
) -> Result<Arc<TopicMeta>, CreateError> {
    let rf = i32::from(broker.config.default_replication_factor);
    create_replicated(broker, name, partitions, rf, configs).await
}

/// `create_topic` with `replication_factor` replicas per partition (clustered only: the
/// caller refuses a factor above 1 on a single node).
pub async fn create_replicated(
    broker: &BrokerContext,
    name: &str,
    partitions: i32,
    replication_factor: i32,
    configs: BTreeMap<String, String>,
) -> Result<Arc<TopicMeta>, CreateError> {
    validate_topic_name(name).map_err(CreateError::InvalidName)?;
    let internal = name.starts_with("__");
    if let Some(cluster) = broker.cluster.get() {
        // Through the metadata log: every node's materializer creates it (this one included,
        // before `propose` returns).
        let cmd = Command::CreateTopic {
            name: name.into(),
            id: uuid::Uuid::new_v4(),
            partitions,
            configs,
            internal,
            replication_factor,
        };
        return match cluster.propose(cmd).await? {
            Outcome::Done => local(broker, name),
            Outcome::TopicExists => Err(CreateError::AlreadyExists),
            Outcome::InvalidReplicationFactor(live) => Err(CreateError::InvalidReplicationFactor(
                format!("Unable to replicate the partition {replication_factor} time(s): The target replication factor of {replication_factor} cannot be reached because only {live} broker(s) are registered.")
            )),
            other => Err(CreateError::Storage(format!(
                "topic not created: {other:?}"
            ))),
        };
    }
    let meta = broker
        .catalog
        .create(name, partitions, configs, internal)
        .map_err(|e| match e {
            CatalogError::AlreadyExists(_) => CreateError::AlreadyExists,
            other => CreateError::Storage(other.to_string()),
        })?;
    frontend::open_partitions(broker, &meta, 0..partitions)
        .await
        .map_err(|e| CreateError::Storage(e.to_string()))?;
    Ok(meta)
}

fn local(broker: &BrokerContext, name: &str) -> Result<Arc<TopicMeta>, CreateError> {
    broker
        .catalog
        .snapshot()
        .get(name)
        .cloned()
        .ok_or_else(|| CreateError::Storage(format!("topic {name} not materialised")))
}

/// Why a topic could not be deleted or grown.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    /// The message, as Kafka words it.
    #[error("{0}")]
    UnknownTopic(String),
    #[error("Topic already has at least the requested partition count.")]
    InvalidPartitions,
    #[error("{0}")]
    Storage(String),
}

fn unknown(name: &str) -> ChangeError {
    ChangeError::UnknownTopic(CatalogError::UnknownTopic(name.into()).to_string())
}

/// Deletes the topic and its partitions (through the metadata log when clustered).
pub async fn delete_topic(
    broker: &BrokerContext,
    meta: &Arc<TopicMeta>,
) -> Result<(), ChangeError> {
    if let Some(cluster) = broker.cluster.get() {
        let cmd = Command::DeleteTopic {
            name: meta.name.to_string(),
        };
        return match cluster.propose(cmd).await {
            Ok(Outcome::Done) => Ok(()),
            Ok(_) => Err(unknown(&meta.name)),
            Err(e) => Err(ChangeError::Storage(e.to_string())),
        };
    }
    broker
        .catalog
        .delete(&meta.name)
        .map_err(|e| ChangeError::UnknownTopic(e.to_string()))?;
    frontend::delete_partitions(broker, meta).await;
    Ok(())
}

/// Grows the topic from `meta.partitions` to `count` partitions and opens the new ones.
pub async fn add_partitions(
    broker: &BrokerContext,
    meta: &Arc<TopicMeta>,
    count: i32,
) -> Result<(), ChangeError> {
    if let Some(cluster) = broker.cluster.get() {
        let cmd = Command::CreatePartitions {
            name: meta.name.to_string(),
            count,
        };
        return match cluster.propose(cmd).await {
            Ok(Outcome::Done) => Ok(()),
            Ok(Outcome::InvalidPartitions) => Err(ChangeError::InvalidPartitions),
            Ok(_) => Err(unknown(&meta.name)),
            Err(e) => Err(ChangeError::Storage(e.to_string())),
        };
    }
    broker
        .catalog
        .set_partitions(&meta.name, count)
        .map_err(|e| ChangeError::Storage(e.to_string()))?;
    let updated = broker
        .catalog
        .snapshot()
        .get(&meta.name)
        .cloned()
        .ok_or_else(|| unknown(&meta.name))?;
    frontend::open_partitions(broker, &updated, meta.partitions..count)
        .await
        .map_err(|e| ChangeError::Storage(e.to_string()))
}
