//! Topic creation: a new topic in the catalog, then its partitions opened on their home
//! shards. CreateTopics, Metadata's auto-creation and the coordinators' internal topics all
//! create topics through here, so Kafka's rules for it are written once.

use std::collections::BTreeMap;
use std::sync::Arc;

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

/// Creates the topic in the catalog and opens its partitions on their home shards.
pub async fn create_topic(
    broker: &BrokerContext,
    name: &str,
    partitions: i32,
    configs: BTreeMap<String, String>,
) -> Result<Arc<TopicMeta>, CreateError> {
    validate_topic_name(name).map_err(CreateError::InvalidName)?;
    let internal = name.starts_with("__");
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
