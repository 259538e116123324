//! `strom topic create|list|describe|alter-config|add-partitions|delete|trim-prefix`, and
//! the topic reads the console shares (`list`, `describe`).

use std::collections::BTreeMap;

use clap::Subcommand;
use kafka_protocol::messages::{
    create_partitions_request::CreatePartitionsTopic,
    create_topics_request::{CreatableTopic, CreatableTopicConfig},
    delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic},
    describe_configs_request::DescribeConfigsResource,
    incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
    CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
    DescribeConfigsRequest, IncrementalAlterConfigsRequest,
};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;

use super::client::{Client, ANY};
use super::error::{CliError, ItemError};
use super::offsets::{self, OffsetSpec};
use super::output::{or_dash, Format, Render, Table};
use super::{confirm, split_kv, topic_name};

/// Kafka's DescribeConfigs resource types.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

#[derive(Subcommand)]
pub enum TopicCmd {
    /// Create topics.
    Create {
        #[arg(required = true)]
        topics: Vec<String>,
        /// Partitions per topic (-1: the broker's num.partitions).
        #[arg(short, long, default_value_t = -1, allow_negative_numbers = true)]
        partitions: i32,
        /// Replication factor (-1: the broker's default.replication.factor).
        #[arg(short, long, default_value_t = -1, allow_negative_numbers = true)]
        replicas: i16,
        /// Topic config, repeatable: -c retention.ms=3600000.
        #[arg(short = 'c', long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
        /// Validate only: the broker checks the request and creates nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// List topics.
    List {
        /// Include internal topics (__consumer_offsets, __transaction_state).
        #[arg(short, long)]
        internal: bool,
    },
    /// Partitions (leader, replicas, offsets) and configs of a topic.
    Describe { topic: String },
    /// Set or remove topic configs (IncrementalAlterConfigs).
    AlterConfig {
        topic: String,
        /// KEY=VALUE to set, repeatable.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// KEY to return to its default, repeatable.
        #[arg(long = "delete", value_name = "KEY")]
        delete: Vec<String>,
    },
    /// Add partitions to topics.
    AddPartitions {
        #[arg(required = true)]
        topics: Vec<String>,
        /// How many partitions to add.
        #[arg(short, long)]
        num: i32,
    },
    /// Delete topics.
    Delete {
        #[arg(required = true)]
        topics: Vec<String>,
    },
    /// Delete the records before an offset (DeleteRecords); readers start at the new start.
    TrimPrefix {
        topic: String,
        /// New start: OFFSET, @TIMESTAMP_MS (first record at or after it) or `end`.
        #[arg(short, long)]
        offset: String,
        /// Partitions (default: all), comma-separated.
        #[arg(short, long, value_delimiter = ',')]
        partitions: Vec<i32>,
        /// Do not ask for confirmation.
        #[arg(short, long)]
        yes: bool,
    },
}

pub async fn run(client: &mut Client, cmd: TopicCmd, format: Format) -> Result<(), CliError> {
    match cmd {
        TopicCmd::Create {
            topics,
            partitions,
            replicas,
            configs,
            dry_run,
        } => {
            let configs = configs
                .iter()
                .map(|c| split_kv(c))
                .collect::<Result<Vec<_>, _>>()?;
            let r = create(client, &topics, partitions, replicas, &configs, dry_run).await?;
            finish(&r, format)
        }
        TopicCmd::List { internal } => {
            let list = list(client, internal).await?;
            super::output::print(&list, format)?;
            Ok(())
        }
        TopicCmd::Describe { topic } => {
            let d = describe(client, &topic).await?;
            super::output::print(&d, format)?;
            Ok(())
        }
        TopicCmd::AlterConfig { topic, set, delete } => {
            if set.is_empty() && delete.is_empty() {
                return Err(CliError::Usage(
                    "give --set KEY=VALUE or --delete KEY".into(),
                ));
            }
            let set = set
                .iter()
                .map(|c| split_kv(c))
                .collect::<Result<Vec<_>, _>>()?;
            let r = alter_configs(client, RESOURCE_TOPIC, &topic, &set, &delete).await?;
            finish(&ItemResults(vec![r]), format)
        }
        TopicCmd::AddPartitions { topics, num } => {
            if num < 1 {
                return Err(CliError::Usage("--num must be at least 1".into()));
            }
            let r = add_partitions(client, &topics, num).await?;
            finish(&r, format)
        }
        TopicCmd::Delete { topics } => {
            let r = delete(client, &topics).await?;
            finish(&r, format)
        }
        TopicCmd::TrimPrefix {
            topic,
            offset,
            partitions,
            yes,
        } => {
            let spec = OffsetSpec::parse(&offset)?;
            if matches!(spec, OffsetSpec::Start) {
                return Err(CliError::Usage(
                    "trim-prefix to `start` deletes nothing; give an offset, @timestamp or end"
                        .into(),
                ));
            }
            if !yes
                && !confirm(&format!(
                    "Delete the records of {topic} before {offset} (partitions: {})?",
                    if partitions.is_empty() {
                        "all".to_string()
                    } else {
                        format!("{partitions:?}")
                    }
                ))?
            {
                return Err(CliError::Usage("not confirmed (use --yes)".into()));
            }
            let r = trim_prefix(client, &topic, &partitions, spec).await?;
            finish(&r, format)
        }
    }
}

/// Prints per-item results; any failed item makes the command fail (exit 1).
fn finish<T: Render + Failures>(r: &T, format: Format) -> Result<(), CliError> {
    super::output::print(r, format)?;
    let (failed, total) = r.failures();
    if failed > 0 {
        return Err(CliError::Partial { failed, total });
    }
    Ok(())
}

pub trait Failures {
    fn failures(&self) -> (usize, usize);
}

/// One result per topic (or resource) of a write.
#[derive(Debug, Serialize)]
pub struct ItemResult {
    pub topic: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replication_factor: Option<i16>,
    pub error: Option<ItemError>,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct ItemResults(pub Vec<ItemResult>);

impl Failures for ItemResults {
    fn failures(&self) -> (usize, usize) {
        let failed = self.0.iter().filter(|r| r.error.is_some()).count();
        (failed, self.0.len())
    }
}

impl Render for ItemResults {
    fn table(&self, t: &mut Table) {
        t.header(&["TOPIC", "STATUS"]);
        for r in &self.0 {
            t.row([r.topic.clone(), status(&r.error)]);
        }
    }
}

pub fn status(e: &Option<ItemError>) -> String {
    match e {
        None => "OK".into(),
        Some(e) => match &e.message {
            Some(m) => format!("{}: {m}", e.name),
            None => e.name.clone(),
        },
    }
}

pub async fn create(
    client: &mut Client,
    topics: &[String],
    partitions: i32,
    replicas: i16,
    configs: &[(String, String)],
    validate_only: bool,
) -> Result<ItemResults, CliError> {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(client.timeout.as_millis() as i32)
        .with_validate_only(validate_only)
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    CreatableTopic::default()
                        .with_name(topic_name(t))
                        .with_num_partitions(partitions)
                        .with_replication_factor(replicas)
                        .with_configs(
                            configs
                                .iter()
                                .map(|(k, v)| {
                                    CreatableTopicConfig::default()
                                        .with_name(StrBytes::from_string(k.clone()))
                                        .with_value(Some(StrBytes::from_string(v.clone())))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let (resp, version) = client.call(ANY, &req, 7).await?;
    Ok(ItemResults(
        resp.topics
            .into_iter()
            .map(|t| {
                let ok = t.error_code == 0;
                ItemResult {
                    topic: t.name.to_string(),
                    topic_id: (ok && version >= 7).then(|| t.topic_id.to_string()),
                    partitions: (ok && version >= 5).then_some(t.num_partitions),
                    replication_factor: (ok && version >= 5).then_some(t.replication_factor),
                    error: ItemError::from_code(
                        t.error_code,
                        t.error_message.map(|m| m.to_string()),
                    ),
                }
            })
            .collect(),
    ))
}

pub async fn delete(client: &mut Client, topics: &[String]) -> Result<ItemResults, CliError> {
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(client.timeout.as_millis() as i32)
        .with_topic_names(topics.iter().map(|t| topic_name(t)).collect());
    let (resp, _) = client.call(ANY, &req, 5).await?;
    Ok(ItemResults(
        resp.responses
            .into_iter()
            .map(|r| ItemResult {
                topic: r.name.map(|n| n.to_string()).unwrap_or_default(),
                topic_id: None,
                partitions: None,
                replication_factor: None,
                error: ItemError::from_code(r.error_code, r.error_message.map(|m| m.to_string())),
            })
            .collect(),
    ))
}

pub async fn add_partitions(
    client: &mut Client,
    topics: &[String],
    add: i32,
) -> Result<ItemResults, CliError> {
    let md = client.metadata(Some(topics)).await?;
    let mut counts = BTreeMap::new();
    let mut results = Vec::new();
    for t in &md.topics {
        let name = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
        if t.error_code != 0 {
            results.push(ItemResult {
                topic: name,
                topic_id: None,
                partitions: None,
                replication_factor: None,
                error: ItemError::from_code(t.error_code, None),
            });
        } else {
            counts.insert(name, t.partitions.len() as i32 + add);
        }
    }
    if !counts.is_empty() {
        let req = CreatePartitionsRequest::default()
            .with_timeout_ms(client.timeout.as_millis() as i32)
            .with_topics(
                counts
                    .iter()
                    .map(|(t, n)| {
                        CreatePartitionsTopic::default()
                            .with_name(topic_name(t))
                            .with_count(*n)
                            // The crate's default is an empty list, which means "assign
                            // these replicas": none.
                            .with_assignments(None)
                    })
                    .collect(),
            );
        let (resp, _) = client.call(ANY, &req, 3).await?;
        for r in resp.results {
            let name = r.name.to_string();
            let ok = r.error_code == 0;
            results.push(ItemResult {
                partitions: if ok { counts.get(&name).copied() } else { None },
                topic: name,
                topic_id: None,
                replication_factor: None,
                error: ItemError::from_code(r.error_code, r.error_message.map(|m| m.to_string())),
            });
        }
    }
    Ok(ItemResults(results))
}

/// IncrementalAlterConfigs of one resource (a topic, or a broker: "" is the cluster default).
pub async fn alter_configs(
    client: &mut Client,
    resource_type: i8,
    name: &str,
    set: &[(String, String)],
    delete: &[String],
) -> Result<ItemResult, CliError> {
    let mut configs: Vec<AlterableConfig> = set
        .iter()
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_config_operation(0) // SET
                .with_value(Some(StrBytes::from_string(v.clone())))
        })
        .collect();
    configs.extend(delete.iter().map(|k| {
        AlterableConfig::default()
            .with_name(StrBytes::from_string(k.clone()))
            .with_config_operation(1) // DELETE
            .with_value(None)
    }));
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configs(configs),
    ]);
    // A broker's own configs go to that broker; topics and the cluster default to any.
    let node = match (resource_type, name.parse::<i32>()) {
        (RESOURCE_BROKER, Ok(id)) => client.route(id),
        _ => ANY,
    };
    let (resp, _) = client.call(node, &req, 1).await?;
    let r = resp
        .responses
        .into_iter()
        .next()
        .ok_or_else(|| CliError::Client("IncrementalAlterConfigs: empty answer".into()))?;
    Ok(ItemResult {
        topic: name.to_string(),
        topic_id: None,
        partitions: None,
        replication_factor: None,
        error: ItemError::from_code(r.error_code, r.error_message.map(|m| m.to_string())),
    })
}

#[derive(Debug, Serialize)]
pub struct TopicSummary {
    pub name: String,
    pub topic_id: String,
    pub partitions: usize,
    pub replication_factor: usize,
    pub internal: bool,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct TopicList(pub Vec<TopicSummary>);

impl Render for TopicList {
    fn table(&self, t: &mut Table) {
        t.header(&["NAME", "PARTITIONS", "REPLICAS"]);
        for s in &self.0 {
            t.row([
                s.name.clone(),
                s.partitions.to_string(),
                s.replication_factor.to_string(),
            ]);
        }
    }
}

pub async fn list(client: &mut Client, internal: bool) -> Result<TopicList, CliError> {
    let md = client.metadata(None).await?;
    let mut out: Vec<TopicSummary> = md
        .topics
        .iter()
        .filter(|t| t.error_code == 0 && (internal || !t.is_internal))
        .map(|t| TopicSummary {
            name: t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(),
            topic_id: t.topic_id.to_string(),
            partitions: t.partitions.len(),
            replication_factor: t
                .partitions
                .iter()
                .map(|p| p.replica_nodes.len())
                .max()
                .unwrap_or(0),
            internal: t.is_internal,
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(TopicList(out))
}

#[derive(Debug, Serialize)]
pub struct PartitionInfo {
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline_replicas: Vec<i32>,
    pub log_start_offset: Option<i64>,
    pub high_watermark: Option<i64>,
    pub error: Option<ItemError>,
}

#[derive(Debug, Serialize)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: &'static str,
    pub read_only: bool,
    pub sensitive: bool,
}

#[derive(Debug, Serialize)]
pub struct TopicDescription {
    pub name: String,
    pub topic_id: String,
    pub internal: bool,
    pub partitions: Vec<PartitionInfo>,
    pub configs: Vec<ConfigEntry>,
}

impl Render for TopicDescription {
    fn table(&self, t: &mut Table) {
        t.row(["NAME", &self.name]);
        t.row(["TOPIC-ID", &self.topic_id]);
        t.row(["INTERNAL", &self.internal.to_string()]);
        t.row(["PARTITIONS", &self.partitions.len().to_string()]);
        t.section();
        t.header(&[
            "PARTITION",
            "LEADER",
            "EPOCH",
            "REPLICAS",
            "ISR",
            "LOG-START-OFFSET",
            "HIGH-WATERMARK",
        ]);
        for p in &self.partitions {
            t.row([
                p.partition.to_string(),
                p.leader.to_string(),
                p.leader_epoch.to_string(),
                format!("{:?}", p.replicas),
                format!("{:?}", p.isr),
                or_dash(p.log_start_offset),
                p.high_watermark
                    .map(|h| h.to_string())
                    .unwrap_or_else(|| status(&p.error)),
            ]);
        }
        t.section();
        config_table(&self.configs, t);
    }
}

pub fn config_table(configs: &[ConfigEntry], t: &mut Table) {
    t.header(&["KEY", "VALUE", "SOURCE"]);
    for c in configs {
        let value = if c.sensitive {
            "(sensitive)".to_string()
        } else {
            or_dash(c.value.clone())
        };
        t.row([c.name.clone(), value, c.source.to_string()]);
    }
}

/// One topic's Metadata, partitions sorted by index; an unknown topic is an error.
pub async fn partitions_of(
    client: &mut Client,
    topic: &str,
) -> Result<kafka_protocol::messages::metadata_response::MetadataResponseTopic, CliError> {
    let md = client.metadata(Some(&[topic.to_string()])).await?;
    let mut t = md
        .topics
        .into_iter()
        .next()
        .ok_or_else(|| CliError::kafka(format!("topic {topic:?}"), 3, None))?;
    if t.error_code != 0 {
        return Err(CliError::kafka(
            format!("topic {topic:?}"),
            t.error_code,
            None,
        ));
    }
    t.partitions.sort_by_key(|p| p.partition_index);
    Ok(t)
}

pub async fn describe(client: &mut Client, topic: &str) -> Result<TopicDescription, CliError> {
    let t = partitions_of(client, topic).await?;
    let leaders: Vec<(i32, i32)> = t
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    let starts = offsets::list(client, topic, &leaders, OffsetSpec::Start).await?;
    let ends = offsets::list(client, topic, &leaders, OffsetSpec::End).await?;
    let partitions = t
        .partitions
        .iter()
        .map(|p| {
            let i = p.partition_index;
            let start = starts.get(&i).cloned().unwrap_or(Err(3));
            let end = ends.get(&i).cloned().unwrap_or(Err(3));
            let code = if p.error_code != 0 {
                p.error_code
            } else {
                start.err().or(end.err()).unwrap_or(0)
            };
            PartitionInfo {
                partition: i,
                leader: p.leader_id.0,
                leader_epoch: p.leader_epoch,
                replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                offline_replicas: p.offline_replicas.iter().map(|b| b.0).collect(),
                log_start_offset: start.ok(),
                high_watermark: end.ok(),
                error: ItemError::from_code(code, None),
            }
        })
        .collect();
    let configs = describe_configs(client, RESOURCE_TOPIC, topic, &[]).await?;
    Ok(TopicDescription {
        name: topic.to_string(),
        topic_id: t.topic_id.to_string(),
        internal: t.is_internal,
        partitions,
        configs,
    })
}

pub fn source_name(source: i8) -> &'static str {
    match source {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

/// DescribeConfigs of one resource, sorted by name; `keys` empty = all.
pub async fn describe_configs(
    client: &mut Client,
    resource_type: i8,
    name: &str,
    keys: &[String],
) -> Result<Vec<ConfigEntry>, CliError> {
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys((!keys.is_empty()).then(|| {
                keys.iter()
                    .map(|k| StrBytes::from_string(k.clone()))
                    .collect()
            }))]);
    let node = match (resource_type, name.parse::<i32>()) {
        (RESOURCE_BROKER, Ok(id)) => client.route(id),
        _ => ANY,
    };
    let (resp, _) = client.call(node, &req, 4).await?;
    let r = resp
        .results
        .into_iter()
        .next()
        .ok_or_else(|| CliError::Client("DescribeConfigs: empty answer".into()))?;
    if r.error_code != 0 {
        return Err(CliError::kafka(
            format!("DescribeConfigs of {name:?}"),
            r.error_code,
            r.error_message.map(|m| m.to_string()),
        ));
    }
    let mut out: Vec<ConfigEntry> = r
        .configs
        .into_iter()
        .map(|c| ConfigEntry {
            name: c.name.to_string(),
            value: c.value.map(|v| v.to_string()),
            source: source_name(c.config_source),
            read_only: c.read_only,
            sensitive: c.is_sensitive,
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[derive(Debug, Serialize)]
pub struct TrimResult {
    pub topic: String,
    pub partition: i32,
    pub low_watermark: Option<i64>,
    pub error: Option<ItemError>,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct TrimResults(pub Vec<TrimResult>);

impl Failures for TrimResults {
    fn failures(&self) -> (usize, usize) {
        let failed = self.0.iter().filter(|r| r.error.is_some()).count();
        (failed, self.0.len())
    }
}

impl Render for TrimResults {
    fn table(&self, t: &mut Table) {
        t.header(&["TOPIC", "PARTITION", "NEW-START-OFFSET", "STATUS"]);
        for r in &self.0 {
            t.row([
                r.topic.clone(),
                r.partition.to_string(),
                or_dash(r.low_watermark),
                status(&r.error),
            ]);
        }
    }
}

pub async fn trim_prefix(
    client: &mut Client,
    topic: &str,
    only: &[i32],
    spec: OffsetSpec,
) -> Result<TrimResults, CliError> {
    let t = partitions_of(client, topic).await?;
    let leaders: Vec<(i32, i32)> = t
        .partitions
        .iter()
        .filter(|p| only.is_empty() || only.contains(&p.partition_index))
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    if let Some(missing) = only.iter().find(|p| !leaders.iter().any(|(i, _)| i == *p)) {
        return Err(CliError::kafka(
            format!("{topic} partition {missing}"),
            3,
            None,
        ));
    }
    let targets = offsets::resolve(client, topic, &leaders, spec).await?;
    let mut results = Vec::new();
    let mut by_leader: BTreeMap<i32, Vec<(i32, i64)>> = BTreeMap::new();
    for (p, leader) in &leaders {
        match targets.get(p) {
            Some(Ok(o)) => by_leader.entry(*leader).or_default().push((*p, *o)),
            Some(Err(code)) => results.push(TrimResult {
                topic: topic.into(),
                partition: *p,
                low_watermark: None,
                error: ItemError::from_code(*code, None),
            }),
            None => {}
        }
    }
    for (leader, parts) in by_leader {
        let req = DeleteRecordsRequest::default()
            .with_timeout_ms(client.timeout.as_millis() as i32)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(
                    parts
                        .iter()
                        .map(|(p, o)| {
                            DeleteRecordsPartition::default()
                                .with_partition_index(*p)
                                .with_offset(*o)
                        })
                        .collect(),
                )]);
        let node = client.route(leader);
        let (resp, _) = client.call(node, &req, 2).await?;
        for t in resp.topics {
            for p in t.partitions {
                results.push(TrimResult {
                    topic: topic.into(),
                    partition: p.partition_index,
                    low_watermark: (p.error_code == 0).then_some(p.low_watermark),
                    error: ItemError::from_code(p.error_code, None),
                });
            }
        }
    }
    results.sort_by_key(|r| r.partition);
    Ok(TrimResults(results))
}
