//! What AlterConfigs (33) and IncrementalAlterConfigs (44) share: the resource checks, the
//! SET/DELETE/APPEND/SUBTRACT arithmetic, validation and commit, in the order Kafka's broker
//! (`ConfigAdminManager.preprocess`) and controller (`ConfigurationControlManager`,
//! `ControllerConfigurationValidator`) apply them, with Kafka's codes and messages.

use crate::security::acl::{Operation, ResourceType};
use crate::security::authorizer::Access;
use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, HashSet};

use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::cluster::image::{Command, ConfigResource, Outcome};
use crate::config::dynamic::{self};
use crate::config::topic::{self as topic_config, ConfigType};
use crate::metadata::catalog::CatalogError;
use crate::shard::frontend;

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;
pub const RESOURCE_CLIENT_METRICS: i8 = 16;
pub const RESOURCE_GROUP: i8 = 32;

pub use super::errors::AlterError;

/// Which configs a resource names.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterTarget {
    Topic(String),
    /// `node_scope`: this broker (`"<id>"`), else the cluster-wide default (`""`).
    Broker {
        node_scope: bool,
    },
}

/// One requested change; AlterConfigs' entries are all `Set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Set,
    Delete,
    Append,
    Subtract,
}

impl Op {
    pub fn from_id(id: i8) -> Result<Op, AlterError> {
        Ok(match id {
            0 => Op::Set,
            1 => Op::Delete,
            2 => Op::Append,
            3 => Op::Subtract,
            other => {
                return Err(AlterError::InvalidRequest(format!(
                    "Unknown operations type {other}"
                )))
            }
        })
    }

    fn kafka_name(self) -> &'static str {
        match self {
            Op::Set => "SET",
            Op::Delete => "DELETE",
            Op::Append => "APPEND",
            Op::Subtract => "SUBTRACT",
        }
    }
}

pub struct Change {
    pub name: String,
    pub op: Op,
    pub value: Option<String>,
}

/// Kafka's config authorization (`ConfigAdminManager.preprocess`, `AuthHelper`): `op`
/// (ALTER_CONFIGS / DESCRIBE_CONFIGS) on the topic (TOPIC_AUTHORIZATION_FAILED) or, for a
/// broker, broker logger or client metrics subscription, on the cluster
/// (CLUSTER_AUTHORIZATION_FAILED). `None`: allowed,
/// or a resource type the caller refuses itself.
pub fn config_refusal(
    access: &Access,
    op: Operation,
    resource_type: i8,
    name: &str,
) -> Option<i16> {
    match resource_type {
        RESOURCE_TOPIC if !access.allows(op, ResourceType::Topic, name) => {
            Some(ResponseError::TopicAuthorizationFailed.code())
        }
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER | RESOURCE_CLIENT_METRICS
            if !access.allows_cluster(op) =>
        {
            Some(ResponseError::ClusterAuthorizationFailed.code())
        }
        // Kafka's ConfigAdminManager checks a GROUP resource on the group itself.
        RESOURCE_GROUP if !access.allows(op, ResourceType::Group, name) => {
            Some(ResponseError::GroupAuthorizationFailed.code())
        }
        _ => None,
    }
}

/// The message Kafka 4 sends with an ALTER_CONFIGS refusal: the controller answers
/// `new ApiError(error)`, which carries the error's own message; a broker logger is refused
/// on the broker (`RuntimeLoggerManager`) by an exception whose message is that default, which
/// `ApiError.fromThrowable` leaves out.
fn alter_refusal_message(resource_type: i8, code: i16) -> Option<StrBytes> {
    if resource_type == RESOURCE_BROKER_LOGGER {
        return None;
    }
    let message = match ResponseError::try_from_code(code) {
        Some(ResponseError::TopicAuthorizationFailed) => super::errors::TOPIC_AUTHORIZATION_FAILED,
        Some(ResponseError::GroupAuthorizationFailed) => super::errors::GROUP_AUTHORIZATION_FAILED,
        _ => super::errors::CLUSTER_AUTHORIZATION_FAILED,
    };
    Some(StrBytes::from_static_str(message))
}

/// Kafka's broker-side preprocessing (`ConfigAdminManager.preprocess`), which runs before the
/// controller authorizes, so a malformed resource is INVALID_REQUEST even to a client that
/// may not alter it: the entries' own checks, a broker's name (this node, or empty for the
/// cluster default), and BROKER_LOGGER in the `legacy` AlterConfigs, which does not take it.
pub fn precheck(
    ctx: &RequestContext,
    resource_type: i8,
    name: &str,
    entries: &[(&str, bool)],
    legacy: bool,
) -> Result<(), AlterError> {
    check_entries(entries)?;
    match resource_type {
        RESOURCE_BROKER => resolve(ctx, resource_type, name).map(|_| ()),
        RESOURCE_BROKER_LOGGER if legacy => Err(AlterError::InvalidRequest(format!(
            "Unknown resource type {resource_type}"
        ))),
        _ => Ok(()),
    }
}

/// Runs `alter` on each resource in request order and gives (error code, message) per
/// resource, in Kafka's order: a (type, name) pair that appears more than once fails every
/// copy; then `precheck` (Kafka's preprocessing); then ALTER_CONFIGS (`config_refusal`, with
/// Kafka 4's message).
pub async fn answer_each<R>(
    access: &Access,
    resources: &[R],
    id: impl Fn(&R) -> (i8, &str),
    precheck: impl Fn(&R) -> Result<(), AlterError>,
    mut alter: impl AsyncFnMut(&R) -> Result<(), AlterError>,
) -> Vec<(i16, Option<StrBytes>)> {
    let mut seen = HashSet::new();
    let duplicates: HashSet<(i8, &str)> = resources
        .iter()
        .map(&id)
        .filter(|k| !seen.insert(*k))
        .collect();
    let mut out = Vec::with_capacity(resources.len());
    for r in resources {
        let outcome = if duplicates.contains(&id(r)) {
            Err(AlterError::InvalidRequest(
                "Each resource must appear at most once.".into(),
            ))
        } else if let Err(e) = precheck(r) {
            Err(e)
        } else if let Some((t, code)) = {
            let (t, name) = id(r);
            config_refusal(access, Operation::AlterConfigs, t, name).map(|code| (t, code))
        } {
            out.push((code, alter_refusal_message(t, code)));
            continue;
        } else {
            alter(r).await
        };
        out.push(match outcome {
            Ok(()) => (0, None),
            Err(e) => (
                super::errors::alter_code(&e),
                Some(StrBytes::from_string(e.to_string())),
            ),
        });
    }
    out
}

/// Kafka's broker-side preprocessing: duplicate keys, null values, resource type and name.
/// `entries` are the config names, each with whether its value is a null Kafka refuses (any
/// operation but DELETE).
pub fn preprocess(
    ctx: &RequestContext,
    resource_type: i8,
    name: &str,
    entries: &[(&str, bool)],
) -> Result<AlterTarget, AlterError> {
    check_entries(entries)?;
    resolve(ctx, resource_type, name)
}

/// Kafka's checks of every resource's entries: no key twice, no null value but for DELETE.
pub fn check_entries(entries: &[(&str, bool)]) -> Result<(), AlterError> {
    let mut keys = HashSet::new();
    if !entries.iter().all(|(k, _)| keys.insert(*k)) {
        return Err(AlterError::InvalidRequest(
            "Error due to duplicate config keys".into(),
        ));
    }
    let nulls: Vec<&str> = entries
        .iter()
        .filter(|(_, null)| *null)
        .map(|(k, _)| *k)
        .collect();
    if !nulls.is_empty() {
        return Err(AlterError::InvalidRequest(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        )));
    }
    Ok(())
}

fn resolve(ctx: &RequestContext, resource_type: i8, name: &str) -> Result<AlterTarget, AlterError> {
    match resource_type {
        RESOURCE_TOPIC => {
            if name.is_empty() {
                return Err(AlterError::InvalidRequest(
                    "Default topic resources are not allowed.".into(),
                ));
            }
            crate::metadata::catalog::validate_topic_name(name)
                .map_err(AlterError::InvalidTopic)?;
            Ok(AlterTarget::Topic(name.into()))
        }
        RESOURCE_BROKER => {
            if name.is_empty() {
                return Ok(AlterTarget::Broker { node_scope: false });
            }
            let node_id = ctx.ctx().config.node_id;
            let id: i32 = name.parse().map_err(|_| {
                AlterError::InvalidRequest(format!("Node id must be an integer, but it is: {name}"))
            })?;
            if id != node_id {
                return Err(AlterError::InvalidRequest(format!(
                    "Unexpected broker id, expected {node_id}, but received {name}"
                )));
            }
            Ok(AlterTarget::Broker { node_scope: true })
        }
        // BROKER_LOGGER (8) reaches here only from the legacy AlterConfigs, which Kafka does
        // not support for it; CLIENT_METRICS (16) and GROUP (32) are not implemented.
        other => Err(AlterError::InvalidRequest(format!(
            "Unknown resource type {other}"
        ))),
    }
}

/// The configs of `target` as they stand (topic overrides, or one scope's dynamic values).
pub fn current(ctx: &RequestContext, target: &AlterTarget) -> BTreeMap<String, String> {
    let cat = &ctx.ctx().catalog;
    match target {
        AlterTarget::Topic(name) => cat
            .snapshot()
            .get(name)
            .map(|t| t.configs.clone())
            .unwrap_or_default(),
        AlterTarget::Broker { node_scope } => {
            let view = cat.broker();
            if *node_scope {
                view.node.clone()
            } else {
                view.cluster.clone()
            }
        }
    }
}

fn list_kind(target: &AlterTarget, name: &str) -> Option<(bool, &'static str)> {
    match target {
        AlterTarget::Topic(_) => {
            topic_config::find(name).map(|d| (d.kind == ConfigType::List, d.default))
        }
        AlterTarget::Broker { .. } => match name {
            "listeners" | "advertised.listeners" | "log.dirs" => Some((true, "")),
            _ => dynamic::kind(name).map(|k| {
                (
                    k == ConfigType::List,
                    dynamic::kafka_default(name).unwrap_or(""),
                )
            }),
        },
    }
}

/// Applies incremental changes to `configs` (Kafka's `prepareIncrementalConfigs` and the
/// controller's APPEND/SUBTRACT): APPEND adds values not yet present, SUBTRACT removes them,
/// both starting from the config's default when it is not set.
pub fn apply_ops(
    target: &AlterTarget,
    configs: BTreeMap<String, String>,
    changes: &[Change],
) -> Result<BTreeMap<String, String>, AlterError> {
    apply_changes(configs, changes, |c| {
        match (target, list_kind(target, &c.name)) {
            (_, Some((true, default))) => Ok(default),
            (AlterTarget::Topic(_), _) => Err(not_a_list(c)),
            (AlterTarget::Broker { .. }, Some(_)) => {
                let verb = if c.op == Op::Append {
                    "append"
                } else {
                    "subtract"
                };
                Err(AlterError::InvalidConfig(format!(
                    "Config value {verb} is not allowed for config key: {}",
                    c.name
                )))
            }
            (AlterTarget::Broker { .. }, None) => Err(AlterError::InvalidConfig(format!(
                "Unknown config name: {}",
                c.name
            ))),
        }
    })
}

/// Kafka's refusal of APPEND/SUBTRACT on a key that is not a LIST (topics, groups, client
/// metrics subscriptions).
pub fn not_a_list(c: &Change) -> AlterError {
    AlterError::InvalidConfig(format!(
        "Can't {} to key {} because its type is not LIST.",
        c.op.kafka_name(),
        c.name
    ))
}

/// SET/DELETE/APPEND/SUBTRACT on one resource's configs, for every resource type.
/// `list_default` gives, for an APPEND or SUBTRACT, the key's default when it is a LIST
/// (what the arithmetic starts from when the key is not set), else the resource's refusal.
pub fn apply_changes(
    mut configs: BTreeMap<String, String>,
    changes: &[Change],
    list_default: impl Fn(&Change) -> Result<&'static str, AlterError>,
) -> Result<BTreeMap<String, String>, AlterError> {
    for c in changes {
        match c.op {
            Op::Set => {
                configs.insert(c.name.clone(), c.value.clone().unwrap_or_default());
            }
            Op::Delete => {
                configs.remove(&c.name);
            }
            Op::Append | Op::Subtract => {
                let default = list_default(c)?;
                let old = configs.get(&c.name).map(String::as_str).unwrap_or(default);
                let mut parts: Vec<String> = old
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect();
                for v in c.value.as_deref().unwrap_or_default().split(',') {
                    if c.op == Op::Append {
                        if !parts.iter().any(|p| p == v) {
                            parts.push(v.to_string());
                        }
                    } else if let Some(i) = parts.iter().position(|p| p == v) {
                        parts.remove(i);
                    }
                }
                configs.insert(c.name.clone(), parts.join(","));
            }
        }
    }
    Ok(configs)
}

/// Validates the full new config set of `target`, then (unless `validate_only`) persists it
/// and pushes the resulting settings to the partitions on their home shards. On a cluster
/// the set goes through the metadata quorum instead (`replicate`): every node's materializer
/// persists and pushes it, this one's before the answer.
pub async fn commit(
    ctx: &RequestContext,
    target: &AlterTarget,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), AlterError> {
    let broker = ctx.ctx();
    match target {
        AlterTarget::Topic(name) => {
            for (k, v) in &configs {
                topic_config::validate(k, v)?;
            }
            let existing = broker
                .catalog
                .snapshot()
                .get(name)
                .map(|t| t.configs.clone());
            crate::config::topic_set::validate_set(
                &configs,
                existing.as_ref().unwrap_or(&BTreeMap::new()),
                &broker.catalog.broker(),
            )?;
            if existing.is_none() {
                return Err(AlterError::UnknownTopic(name.clone()));
            }
            if validate_only {
                return Ok(());
            }
            if replicate(ctx, ConfigResource::Topic(name.clone()), configs.clone()).await? {
                tracing::info!(topic = %name, "topic configs altered");
                return Ok(());
            }
            broker
                .catalog
                .set_configs(name, configs)
                .map_err(|e| match e {
                    CatalogError::UnknownTopic(n) => AlterError::UnknownTopic(n),
                    other => AlterError::Storage(other.to_string()),
                })?;
            if let Some(meta) = broker.catalog.snapshot().get(name) {
                frontend::apply_settings(broker, meta).await;
            }
            tracing::info!(topic = %name, "topic configs altered");
        }
        AlterTarget::Broker { node_scope } => {
            dynamic::validate_all(&configs)?;
            if validate_only {
                return Ok(());
            }
            // Kafka keeps a broker's own values in the quorum too (`ConfigRecord` of resource
            // `"<id>"`): described the same wherever they are read, and kept if the node's
            // data dir is lost.
            let node = node_scope.then_some(broker.config.node_id);
            if replicate(ctx, ConfigResource::Broker(node), configs.clone()).await? {
                tracing::info!(node_scope, "dynamic broker configs altered");
                return Ok(());
            }
            let catalog = broker
                .catalog
                .set_broker_dynamic(*node_scope, configs)
                .map_err(|e| AlterError::Storage(e.to_string()))?;
            // Every topic may follow a broker default that just changed.
            for meta in catalog.topics.values() {
                frontend::apply_settings(broker, meta).await;
            }
            tracing::info!(node_scope, "dynamic broker configs altered");
        }
    }
    Ok(())
}

/// When clustered, proposes `configs` as `resource`'s whole config set and waits until this
/// node has applied it (true); false on a single node, which writes its own files.
pub async fn replicate(
    ctx: &RequestContext,
    resource: ConfigResource,
    configs: BTreeMap<String, String>,
) -> Result<bool, AlterError> {
    let Some(cluster) = ctx.ctx().cluster.get() else {
        return Ok(false);
    };
    let name = match &resource {
        ConfigResource::Topic(name) => Some(name.clone()),
        _ => None,
    };
    match cluster
        .propose(Command::SetConfigs { resource, configs })
        .await?
    {
        Outcome::UnknownTopic => Err(AlterError::UnknownTopic(name.unwrap_or_default())),
        _ => Ok(true),
    }
}

/// DescribeConfigs of a named resource (a group, a client-metrics subscription): the result
/// to fill in, or Kafka's refusal of an empty name (INVALID_REQUEST, `empty` its message).
pub fn named_result(
    resource_type: i8,
    name: &str,
    empty: &'static str,
) -> Result<DescribeConfigsResult, DescribeConfigsResult> {
    let base = DescribeConfigsResult::default()
        .with_resource_type(resource_type)
        .with_resource_name(StrBytes::from_string(name.into()));
    if name.is_empty() {
        return Err(base
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(StrBytes::from_static_str(empty))));
    }
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(name: &str, op: Op, value: &str) -> Change {
        Change {
            name: name.into(),
            op,
            value: Some(value.into()),
        }
    }

    #[test]
    fn given_list_ops_when_applied_then_kafka_arithmetic() {
        let t = AlterTarget::Topic("t".into());
        let out = apply_ops(
            &t,
            BTreeMap::new(),
            &[change("cleanup.policy", Op::Append, "compact,delete")],
        )
        .unwrap();
        // Starts from the default `delete`, which is not added twice.
        assert_eq!(out["cleanup.policy"], "delete,compact");
        let out = apply_ops(&t, out, &[change("cleanup.policy", Op::Subtract, "delete")]).unwrap();
        assert_eq!(out["cleanup.policy"], "compact");
        let out = apply_ops(&t, out, &[change("cleanup.policy", Op::Delete, "")]).unwrap();
        assert!(out.is_empty());
        assert_eq!(
            apply_ops(
                &t,
                BTreeMap::new(),
                &[change("retention.ms", Op::Append, "1")]
            )
            .unwrap_err(),
            AlterError::InvalidConfig(
                "Can't APPEND to key retention.ms because its type is not LIST.".into()
            )
        );
        let b = AlterTarget::Broker { node_scope: false };
        assert_eq!(
            apply_ops(
                &b,
                BTreeMap::new(),
                &[change("message.max.bytes", Op::Subtract, "1")]
            )
            .map_err(|e| crate::handlers::errors::alter_code(&e))
            .unwrap_err(),
            40
        );
        let out = apply_ops(
            &b,
            BTreeMap::new(),
            &[change("log.cleanup.policy", Op::Append, "compact")],
        )
        .unwrap();
        assert_eq!(out["log.cleanup.policy"], "delete,compact");
        assert!(Op::from_id(9).is_err());
    }
}
