//! A minimal Kafka client for the source cluster, on the kafka-protocol crate: one request in
//! flight per connection, a connection per source broker. Fetch asks for raw record batches
//! (read_uncommitted) and nothing is decompressed: the bytes go to Strom's log as they are.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    describe_configs_request::DescribeConfigsResource, fetch_request::FetchPartition,
    fetch_request::FetchTopic, list_offsets_request::ListOffsetsPartition,
    list_offsets_request::ListOffsetsTopic, offset_fetch_request::OffsetFetchRequestGroup, ApiKey,
    BrokerId, DescribeConfigsRequest, DescribeConfigsResponse, FetchRequest, FetchResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, ListGroupsRequest,
    ListGroupsResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

use super::MigrateError;
use crate::kafka_conn::KafkaConn;

/// Versions every Kafka since 3.x (and Strom) serves; Kafka 4 dropped older ones (KIP-896).
const METADATA_V: i16 = 12;
const DESCRIBE_CONFIGS_V: i16 = 4;
const LIST_OFFSETS_V: i16 = 7;
const FETCH_V: i16 = 12;
const FIND_COORDINATOR_V: i16 = 4;
const OFFSET_FETCH_V: i16 = 8;
const LIST_GROUPS_V: i16 = 4;

/// A response larger than this is refused (a bound on what one answer may make us allocate).
const MAX_RESPONSE: usize = 256 << 20;

/// One connection to a source broker (crate::kafka_conn), its errors as MigrateError.
struct Conn(KafkaConn);

impl Conn {
    async fn connect(addr: &str, timeout: Duration) -> Result<Conn, MigrateError> {
        KafkaConn::connect(addr, timeout, "strom-migrate", MAX_RESPONSE)
            .await
            .map(Conn)
            .map_err(|e| MigrateError::Source(format!("connecting to {e}")))
    }

    async fn call<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, MigrateError> {
        self.0
            .call(key, version, req, timeout)
            .await
            .map_err(|e| MigrateError::Source(e.to_string()))
    }
}

#[derive(Debug, Clone)]
pub struct SourceTopic {
    pub name: String,
    pub partitions: Vec<(i32, i32)>, // (partition, leader node id)
}

/// One partition's share of a fetch answer.
pub struct FetchedPartition {
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub records: Bytes,
}

pub struct SourceClient {
    bootstrap: String,
    brokers: HashMap<i32, String>,
    conns: HashMap<i32, Conn>,
    timeout: Duration,
}

/// A committed offset as OffsetFetch reports it: (offset, leader epoch, metadata).
pub type Committed = (i64, i32, String);

pub fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

impl SourceClient {
    pub async fn connect(bootstrap: &str, timeout: Duration) -> Result<SourceClient, MigrateError> {
        let mut c = SourceClient {
            bootstrap: bootstrap.to_string(),
            brokers: HashMap::new(),
            conns: HashMap::new(),
            timeout,
        };
        c.metadata(None).await?;
        Ok(c)
    }

    async fn conn(&mut self, node: i32) -> Result<&mut Conn, MigrateError> {
        if !self.conns.contains_key(&node) {
            let addr = if node < 0 {
                self.bootstrap.clone()
            } else {
                self.brokers.get(&node).cloned().ok_or_else(|| {
                    MigrateError::Source(format!("source broker {node} is not in the metadata"))
                })?
            };
            let c = Conn::connect(&addr, self.timeout).await?;
            self.conns.insert(node, c);
        }
        Ok(self.conns.get_mut(&node).expect("inserted"))
    }

    /// Calls `node` (-1: the bootstrap address); a failed connection is dropped so that the
    /// next call reconnects.
    async fn call<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &mut self,
        node: i32,
        key: ApiKey,
        version: i16,
        req: &Req,
        extra_wait: Duration,
    ) -> Result<Resp, MigrateError> {
        let timeout = self.timeout + extra_wait;
        let r = self
            .conn(node)
            .await?
            .call(key, version, req, timeout)
            .await;
        if r.is_err() {
            self.conns.remove(&node);
        }
        r
    }

    /// Topics (all when `None`) with their partitions and leaders; learns broker addresses.
    pub async fn metadata(
        &mut self,
        topics: Option<&[String]>,
    ) -> Result<Vec<SourceTopic>, MigrateError> {
        let req = MetadataRequest::default().with_topics(topics.map(|ts| {
            ts.iter()
                .map(|t| {
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(topic_name(t)))
                })
                .collect()
        }));
        let node = self.any_node();
        let resp: MetadataResponse = self
            .call(node, ApiKey::Metadata, METADATA_V, &req, Duration::ZERO)
            .await?;
        for b in &resp.brokers {
            self.brokers
                .insert(b.node_id.0, format!("{}:{}", b.host.as_str(), b.port));
        }
        let mut out = Vec::new();
        for t in resp.topics {
            let Some(name) = t.name else { continue };
            if t.error_code != 0 {
                return Err(MigrateError::Source(format!(
                    "metadata of topic {}: error code {}",
                    name.as_str(),
                    t.error_code
                )));
            }
            let mut partitions: Vec<(i32, i32)> = t
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.leader_id.0))
                .collect();
            partitions.sort_unstable();
            out.push(SourceTopic {
                name: name.as_str().to_string(),
                partitions,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn any_node(&self) -> i32 {
        self.conns
            .keys()
            .copied()
            .max()
            .or_else(|| self.brokers.keys().copied().min())
            .unwrap_or(-1)
    }

    /// A topic's configs that were set on it (source DYNAMIC_TOPIC_CONFIG), not defaults.
    pub async fn topic_configs(
        &mut self,
        topic: &str,
    ) -> Result<BTreeMap<String, String>, MigrateError> {
        let req = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_string(topic.to_string()))
                .with_configuration_keys(None),
        ]);
        let node = self.any_node();
        let resp: DescribeConfigsResponse = self
            .call(
                node,
                ApiKey::DescribeConfigs,
                DESCRIBE_CONFIGS_V,
                &req,
                Duration::ZERO,
            )
            .await?;
        let mut out = BTreeMap::new();
        for r in resp.results {
            if r.error_code != 0 {
                return Err(MigrateError::Source(format!(
                    "DescribeConfigs of topic {topic}: error code {} {}",
                    r.error_code,
                    r.error_message.as_deref().unwrap_or("")
                )));
            }
            for c in r.configs {
                // 1 = DYNAMIC_TOPIC_CONFIG: set on this topic, as `--config` at creation.
                if c.config_source == 1 && !c.is_sensitive {
                    if let Some(v) = c.value {
                        out.insert(c.name.to_string(), v.to_string());
                    }
                }
            }
        }
        Ok(out)
    }

    /// Latest (high watermark, read_uncommitted) or earliest offsets of partitions on `node`.
    pub async fn list_offsets(
        &mut self,
        node: i32,
        topic: &str,
        partitions: &[i32],
        timestamp: i64,
    ) -> Result<BTreeMap<i32, i64>, MigrateError> {
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&p| {
                            ListOffsetsPartition::default()
                                .with_partition_index(p)
                                .with_current_leader_epoch(-1)
                                .with_timestamp(timestamp)
                        })
                        .collect(),
                )]);
        let resp: ListOffsetsResponse = self
            .call(
                node,
                ApiKey::ListOffsets,
                LIST_OFFSETS_V,
                &req,
                Duration::ZERO,
            )
            .await?;
        let mut out = BTreeMap::new();
        for t in resp.topics {
            for p in t.partitions {
                if p.error_code != 0 {
                    return Err(MigrateError::Source(format!(
                        "ListOffsets {topic}-{}: error code {}",
                        p.partition_index, p.error_code
                    )));
                }
                out.insert(p.partition_index, p.offset);
            }
        }
        Ok(out)
    }

    /// One Fetch (read_uncommitted, no session) from `node` for `wants` (topic, partition,
    /// offset). Answers by topic.
    pub async fn fetch(
        &mut self,
        node: i32,
        wants: &[(String, i32, i64)],
        max_wait_ms: i32,
        max_bytes: i32,
        partition_max_bytes: i32,
    ) -> Result<Vec<(String, Vec<FetchedPartition>)>, MigrateError> {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for (t, p, o) in wants {
            if topics.last().is_none_or(|ft| ft.topic.as_str() != t) {
                topics.push(FetchTopic::default().with_topic(topic_name(t)));
            }
            let ft = topics.last_mut().expect("pushed");
            ft.partitions.push(
                FetchPartition::default()
                    .with_partition(*p)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(*o)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(partition_max_bytes),
            );
        }
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(max_bytes)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(topics);
        let wait = Duration::from_millis(max_wait_ms.max(0) as u64);
        let resp: FetchResponse = self.call(node, ApiKey::Fetch, FETCH_V, &req, wait).await?;
        if resp.error_code != 0 {
            return Err(MigrateError::Source(format!(
                "Fetch: error code {}",
                resp.error_code
            )));
        }
        Ok(resp
            .responses
            .into_iter()
            .map(|t| {
                let parts = t
                    .partitions
                    .into_iter()
                    .map(|p| FetchedPartition {
                        partition: p.partition_index,
                        error_code: p.error_code,
                        high_watermark: p.high_watermark,
                        log_start_offset: p.log_start_offset,
                        records: p.records.unwrap_or_default(),
                    })
                    .collect();
                (t.topic.as_str().to_string(), parts)
            })
            .collect())
    }

    /// Every consumer group the source knows.
    pub async fn list_groups(&mut self) -> Result<Vec<String>, MigrateError> {
        let mut out = Vec::new();
        let nodes: Vec<i32> = self.brokers.keys().copied().collect();
        for node in nodes {
            let resp: ListGroupsResponse = self
                .call(
                    node,
                    ApiKey::ListGroups,
                    LIST_GROUPS_V,
                    &ListGroupsRequest::default(),
                    Duration::ZERO,
                )
                .await?;
            if resp.error_code != 0 {
                return Err(MigrateError::Source(format!(
                    "ListGroups on broker {node}: error code {}",
                    resp.error_code
                )));
            }
            out.extend(resp.groups.into_iter().map(|g| g.group_id.to_string()));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// A group's committed offsets: (topic, partition) => (offset, leader epoch, metadata).
    pub async fn committed_offsets(
        &mut self,
        group: &str,
    ) -> Result<BTreeMap<(String, i32), Committed>, MigrateError> {
        let req = FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![StrBytes::from_string(group.to_string())]);
        let node = self.any_node();
        let resp: FindCoordinatorResponse = self
            .call(
                node,
                ApiKey::FindCoordinator,
                FIND_COORDINATOR_V,
                &req,
                Duration::ZERO,
            )
            .await?;
        let c = resp
            .coordinators
            .first()
            .ok_or_else(|| MigrateError::Source(format!("no coordinator for group {group}")))?;
        if c.error_code != 0 {
            return Err(MigrateError::Source(format!(
                "FindCoordinator for group {group}: error code {}",
                c.error_code
            )));
        }
        self.brokers
            .insert(c.node_id.0, format!("{}:{}", c.host.as_str(), c.port));
        let coordinator = c.node_id.0;
        let req =
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                .with_topics(None)]);
        let resp: OffsetFetchResponse = self
            .call(
                coordinator,
                ApiKey::OffsetFetch,
                OFFSET_FETCH_V,
                &req,
                Duration::ZERO,
            )
            .await?;
        let mut out = BTreeMap::new();
        for g in resp.groups {
            if g.error_code != 0 {
                return Err(MigrateError::Source(format!(
                    "OffsetFetch of group {group}: error code {}",
                    g.error_code
                )));
            }
            for t in g.topics {
                for p in t.partitions {
                    if p.error_code == 0 && p.committed_offset >= 0 {
                        out.insert(
                            (t.name.as_str().to_string(), p.partition_index),
                            (
                                p.committed_offset,
                                p.committed_leader_epoch,
                                p.metadata.map(|m| m.to_string()).unwrap_or_default(),
                            ),
                        );
                    }
                }
            }
        }
        Ok(out)
    }
}
