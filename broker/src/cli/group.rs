//! `strom group list|describe|seek|delete`: consumer groups with their members, assignments
//! and lag per partition; offsets moved from outside the group (what kafka-consumer-groups
//! --reset-offsets does: an OffsetCommit with generation -1 while the group has no members).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Buf;
use clap::Subcommand;
use kafka_protocol::messages::{
    offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
    offset_fetch_request::OffsetFetchRequestGroup,
    ConsumerGroupDescribeRequest, ConsumerProtocolAssignment, DeleteGroupsRequest,
    DescribeGroupsRequest, GroupId, ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use serde::Serialize;

use super::client::{Client, ANY};
use super::error::{CliError, ItemError};
use super::offsets::{self, OffsetSpec};
use super::output::{or_dash, Format, Render, Table};
use super::topic::{status, Failures};

#[derive(Subcommand)]
pub enum GroupCmd {
    /// List consumer groups.
    List,
    /// Members, assignments and lag per partition of groups.
    Describe {
        #[arg(required = true)]
        groups: Vec<String>,
    },
    /// Move a group's committed offsets (the group must have no members).
    Seek {
        group: String,
        /// Target: start, end, OFFSET or @TIMESTAMP_MS.
        #[arg(long, conflicts_with = "to_file", required_unless_present = "to_file")]
        to: Option<String>,
        /// CSV lines `topic,partition,offset` (kafka-consumer-groups --from-file format).
        #[arg(long)]
        to_file: Option<std::path::PathBuf>,
        /// Topics to move (default: the topics the group has offsets for).
        #[arg(long = "topic")]
        topics: Vec<String>,
        /// Show what would change; commit nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete groups (they must have no members).
    Delete {
        #[arg(required = true)]
        groups: Vec<String>,
    },
}

pub async fn run(client: &mut Client, cmd: GroupCmd, format: Format) -> Result<(), CliError> {
    match cmd {
        GroupCmd::List => {
            let l = list(client).await?;
            super::output::print(&l, format)?;
        }
        GroupCmd::Describe { groups } => {
            let mut out = Vec::new();
            for g in &groups {
                out.push(describe(client, g).await?);
            }
            let failed = out.iter().filter(|d| d.error.is_some()).count();
            super::output::print(&Descriptions(out), format)?;
            if failed > 0 {
                return Err(CliError::Partial {
                    failed,
                    total: groups.len(),
                });
            }
        }
        GroupCmd::Seek {
            group,
            to,
            to_file,
            topics,
            dry_run,
        } => {
            let target = match (to, to_file) {
                (Some(to), _) => SeekTarget::Spec(OffsetSpec::parse(&to)?),
                (None, Some(path)) => {
                    SeekTarget::File(parse_offsets_file(&std::fs::read_to_string(&path)?)?)
                }
                (None, None) => return Err(CliError::Usage("give --to or --to-file".into())),
            };
            let r = seek(client, &group, &topics, target, dry_run).await?;
            super::output::print(&r, format)?;
            let (failed, total) = r.failures();
            if failed > 0 {
                return Err(CliError::Partial { failed, total });
            }
        }
        GroupCmd::Delete { groups } => {
            let r = delete(client, &groups).await?;
            super::output::print(&r, format)?;
            let (failed, total) = r.failures();
            if failed > 0 {
                return Err(CliError::Partial { failed, total });
            }
        }
    }
    Ok(())
}

#[derive(Debug, Serialize)]
pub struct GroupListing {
    pub group: String,
    pub state: String,
    #[serde(rename = "type")]
    pub group_type: String,
    pub protocol_type: String,
    pub coordinator: i32,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct GroupList(pub Vec<GroupListing>);

impl Render for GroupList {
    fn table(&self, t: &mut Table) {
        t.header(&["GROUP", "STATE", "TYPE", "COORDINATOR"]);
        for g in &self.0 {
            t.row([
                g.group.clone(),
                g.state.clone(),
                g.group_type.clone(),
                g.coordinator.to_string(),
            ]);
        }
    }
}

pub async fn list(client: &mut Client) -> Result<GroupList, CliError> {
    if client.brokers.is_empty() {
        client.metadata(Some(&[])).await?;
    }
    let mut out = Vec::new();
    for node in client.nodes() {
        let (resp, _) = client
            .call(client.route(node), &ListGroupsRequest::default(), 5)
            .await?;
        if resp.error_code != 0 {
            return Err(CliError::kafka("ListGroups", resp.error_code, None));
        }
        for g in resp.groups {
            out.push(GroupListing {
                group: g.group_id.to_string(),
                state: g.group_state.to_string(),
                group_type: if g.group_type.is_empty() {
                    "classic".into()
                } else {
                    g.group_type.to_string()
                },
                protocol_type: g.protocol_type.to_string(),
                coordinator: node.max(0),
            });
        }
    }
    out.sort_by(|a, b| a.group.cmp(&b.group));
    Ok(GroupList(out))
}

#[derive(Debug, Clone, Serialize)]
pub struct Assignment {
    pub topic: String,
    pub partitions: Vec<i32>,
}

#[derive(Debug, Serialize)]
pub struct Member {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub host: String,
    pub assignments: Vec<Assignment>,
}

#[derive(Debug, Serialize)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    pub committed_offset: Option<i64>,
    pub log_end_offset: Option<i64>,
    pub lag: Option<i64>,
    pub member_id: Option<String>,
    pub client_id: Option<String>,
    pub host: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct GroupDescription {
    pub group: String,
    pub coordinator: i32,
    pub state: String,
    #[serde(rename = "type")]
    pub group_type: String,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<Member>,
    pub partitions: Vec<PartitionLag>,
    pub total_lag: i64,
    pub error: Option<ItemError>,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Descriptions(pub Vec<GroupDescription>);

impl Render for Descriptions {
    fn table(&self, t: &mut Table) {
        for d in &self.0 {
            d.table(t);
            t.section();
        }
    }
}

impl Render for GroupDescription {
    fn table(&self, t: &mut Table) {
        t.row(["GROUP", &self.group]);
        if self.error.is_some() {
            t.row(["ERROR".to_string(), status(&self.error)]);
            return;
        }
        t.row(["COORDINATOR", &self.coordinator.to_string()]);
        t.row(["STATE", &self.state]);
        t.row(["TYPE", &self.group_type]);
        t.row([
            "PROTOCOL",
            &or_dash((!self.protocol.is_empty()).then_some(&self.protocol)),
        ]);
        t.row(["MEMBERS", &self.members.len().to_string()]);
        t.row(["TOTAL-LAG", &self.total_lag.to_string()]);
        t.section();
        t.header(&[
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "MEMBER-ID",
            "CLIENT-ID",
            "HOST",
        ]);
        for p in &self.partitions {
            t.row([
                p.topic.clone(),
                p.partition.to_string(),
                or_dash(p.committed_offset),
                or_dash(p.log_end_offset),
                or_dash(p.lag),
                or_dash(p.member_id.clone()),
                or_dash(p.client_id.clone()),
                or_dash(p.host.clone()),
            ]);
        }
    }
}

/// (state, type, protocol type, protocol, members) of a group, or its error code.
struct GroupState {
    state: String,
    group_type: String,
    protocol_type: String,
    protocol: String,
    members: Vec<Member>,
}

async fn group_type(
    client: &mut Client,
    node: i32,
    group: &str,
) -> Result<Option<String>, CliError> {
    let (resp, v) = client.call(node, &ListGroupsRequest::default(), 5).await?;
    if v < 5 {
        return Ok(None);
    }
    Ok(resp
        .groups
        .iter()
        .find(|g| g.group_id.as_str() == group)
        .map(|g| g.group_type.to_string()))
}

async fn group_state(
    client: &mut Client,
    node: i32,
    group: &str,
) -> Result<Result<GroupState, ItemError>, CliError> {
    let gid = GroupId(StrBytes::from_string(group.to_string()));
    // KIP-848 groups are described by ConsumerGroupDescribe; DescribeGroups answers them
    // only in the classic shape (or not at all, depending on the broker version).
    let kind = group_type(client, node, group).await?;
    if kind.as_deref() == Some("consumer")
        && client.supports(kafka_protocol::messages::ApiKey::ConsumerGroupDescribe, 0)
    {
        let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![gid]);
        let (resp, _) = client.call(node, &req, 1).await?;
        let g = resp
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| CliError::Client("ConsumerGroupDescribe: empty answer".into()))?;
        if g.error_code != 0 {
            return Ok(Err(ItemError::from_code(
                g.error_code,
                g.error_message.map(|m| m.to_string()),
            )
            .expect("error")));
        }
        let members = g
            .members
            .into_iter()
            .map(|m| Member {
                member_id: m.member_id.to_string(),
                instance_id: m.instance_id.map(|i| i.to_string()),
                client_id: m.client_id.to_string(),
                host: m.client_host.to_string(),
                assignments: m
                    .assignment
                    .topic_partitions
                    .into_iter()
                    .map(|tp| Assignment {
                        topic: tp.topic_name.to_string(),
                        partitions: tp.partitions,
                    })
                    .collect(),
            })
            .collect();
        return Ok(Ok(GroupState {
            state: g.group_state.to_string(),
            group_type: "consumer".into(),
            protocol_type: "consumer".into(),
            protocol: g.assignor_name.to_string(),
            members,
        }));
    }
    let req = DescribeGroupsRequest::default().with_groups(vec![gid]);
    let (resp, _) = client.call(node, &req, 5).await?;
    let g = resp
        .groups
        .into_iter()
        .next()
        .ok_or_else(|| CliError::Client("DescribeGroups: empty answer".into()))?;
    if g.error_code != 0 {
        return Ok(Err(ItemError::from_code(
            g.error_code,
            g.error_message.map(|m| m.to_string()),
        )
        .expect("error")));
    }
    let consumer = g.protocol_type.as_str() == "consumer";
    let members = g
        .members
        .into_iter()
        .map(|m| Member {
            member_id: m.member_id.to_string(),
            instance_id: m.group_instance_id.map(|i| i.to_string()),
            client_id: m.client_id.to_string(),
            host: m.client_host.to_string(),
            assignments: if consumer {
                decode_assignment(m.member_assignment)
            } else {
                Vec::new()
            },
        })
        .collect();
    Ok(Ok(GroupState {
        state: g.group_state.to_string(),
        group_type: kind.unwrap_or_else(|| "classic".into()),
        protocol_type: g.protocol_type.to_string(),
        protocol: g.protocol_data.to_string(),
        members,
    }))
}

/// A classic consumer's assignment (ConsumerProtocolAssignment: version, then the body);
/// what cannot be decoded shows as no partitions rather than failing the description.
pub fn decode_assignment(mut bytes: bytes::Bytes) -> Vec<Assignment> {
    if bytes.len() < 2 {
        return Vec::new();
    }
    let version = bytes.get_i16().clamp(0, 3);
    match ConsumerProtocolAssignment::decode(&mut bytes, version) {
        Ok(a) => a
            .assigned_partitions
            .into_iter()
            .map(|tp| Assignment {
                topic: tp.topic.to_string(),
                partitions: tp.partitions,
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The group's committed offsets: topic → partition → offset.
pub async fn committed(
    client: &mut Client,
    node: i32,
    group: &str,
) -> Result<BTreeMap<String, BTreeMap<i32, i64>>, CliError> {
    let gid = GroupId(StrBytes::from_string(group.to_string()));
    let mut out: BTreeMap<String, BTreeMap<i32, i64>> = BTreeMap::new();
    let req = if client.supports(kafka_protocol::messages::ApiKey::OffsetFetch, 8) {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(gid)
            // All topics: the crate's default is an empty list, which asks for none.
            .with_topics(None)])
    } else {
        OffsetFetchRequest::default()
            .with_group_id(gid)
            .with_topics(None)
    };
    let (resp, v) = client.call(node, &req, 9).await?;
    let ctx = format!("OffsetFetch for group {group:?}");
    if v >= 8 {
        for g in resp.groups {
            if g.error_code != 0 {
                return Err(CliError::kafka(ctx, g.error_code, None));
            }
            for t in g.topics {
                for p in t.partitions {
                    if p.error_code == 0 && p.committed_offset >= 0 {
                        out.entry(t.name.to_string())
                            .or_default()
                            .insert(p.partition_index, p.committed_offset);
                    }
                }
            }
        }
    } else {
        if resp.error_code != 0 {
            return Err(CliError::kafka(ctx, resp.error_code, None));
        }
        for t in resp.topics {
            for p in t.partitions {
                if p.error_code == 0 && p.committed_offset >= 0 {
                    out.entry(t.name.to_string())
                        .or_default()
                        .insert(p.partition_index, p.committed_offset);
                }
            }
        }
    }
    Ok(out)
}

/// Leaders of each partition of `topics`: topic → [(partition, leader)]; unknown topics left out.
async fn leaders(
    client: &mut Client,
    topics: &BTreeSet<String>,
) -> Result<BTreeMap<String, Vec<(i32, i32)>>, CliError> {
    if topics.is_empty() {
        return Ok(BTreeMap::new());
    }
    let list: Vec<String> = topics.iter().cloned().collect();
    let md = client.metadata(Some(&list)).await?;
    Ok(md
        .topics
        .into_iter()
        .filter(|t| t.error_code == 0)
        .map(|t| {
            let mut ps: Vec<(i32, i32)> = t
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.leader_id.0))
                .collect();
            ps.sort();
            (t.name.map(|n| n.to_string()).unwrap_or_default(), ps)
        })
        .collect())
}

pub async fn describe(client: &mut Client, group: &str) -> Result<GroupDescription, CliError> {
    let coordinator = client.coordinator(group).await?;
    let node = client.route(coordinator);
    let mut d = GroupDescription {
        group: group.to_string(),
        coordinator: coordinator.max(0),
        state: String::new(),
        group_type: String::new(),
        protocol_type: String::new(),
        protocol: String::new(),
        members: Vec::new(),
        partitions: Vec::new(),
        total_lag: 0,
        error: None,
    };
    let st = match group_state(client, node, group).await? {
        Ok(s) => s,
        Err(e) => {
            d.error = Some(e);
            return Ok(d);
        }
    };
    let commits = committed(client, node, group).await?;
    // Partition → owning member, from the assignments.
    let mut owner: BTreeMap<(String, i32), usize> = BTreeMap::new();
    for (i, m) in st.members.iter().enumerate() {
        for a in &m.assignments {
            for p in &a.partitions {
                owner.insert((a.topic.clone(), *p), i);
            }
        }
    }
    let mut keys: BTreeSet<(String, i32)> = owner.keys().cloned().collect();
    for (t, ps) in &commits {
        for p in ps.keys() {
            keys.insert((t.clone(), *p));
        }
    }
    let topics: BTreeSet<String> = keys.iter().map(|(t, _)| t.clone()).collect();
    let leaders = leaders(client, &topics).await?;
    let mut ends: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for (t, ls) in &leaders {
        for (p, r) in offsets::list(client, t, ls, OffsetSpec::End).await? {
            if let Ok(o) = r {
                ends.insert((t.clone(), p), o);
            }
        }
    }
    for (t, p) in keys {
        let committed = commits.get(&t).and_then(|m| m.get(&p)).copied();
        let end = ends.get(&(t.clone(), p)).copied();
        let lag = match (committed, end) {
            (Some(c), Some(e)) => Some((e - c).max(0)),
            // Nothing committed: the whole partition is behind, as kafka-consumer-groups shows.
            (None, Some(_)) => None,
            _ => None,
        };
        d.total_lag += lag.unwrap_or(0);
        let m = owner.get(&(t.clone(), p)).map(|i| &st.members[*i]);
        d.partitions.push(PartitionLag {
            topic: t,
            partition: p,
            committed_offset: committed,
            log_end_offset: end,
            lag,
            member_id: m.map(|m| m.member_id.clone()),
            client_id: m.map(|m| m.client_id.clone()),
            host: m.map(|m| m.host.clone()),
        });
    }
    d.state = st.state;
    d.group_type = st.group_type;
    d.protocol_type = st.protocol_type;
    d.protocol = st.protocol;
    d.members = st.members;
    Ok(d)
}

pub enum SeekTarget {
    Spec(OffsetSpec),
    /// (topic, partition, offset) triples.
    File(Vec<(String, i32, i64)>),
}

pub fn parse_offsets_file(text: &str) -> Result<Vec<(String, i32, i64)>, CliError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || {
            CliError::Usage(format!(
                "offsets file line {}: expected topic,partition,offset: {line:?}",
                n + 1
            ))
        };
        let mut parts = line.rsplitn(3, ',');
        let offset = parts
            .next()
            .ok_or_else(bad)?
            .trim()
            .parse::<i64>()
            .map_err(|_| bad())?;
        let partition = parts
            .next()
            .ok_or_else(bad)?
            .trim()
            .parse::<i32>()
            .map_err(|_| bad())?;
        let topic = parts.next().ok_or_else(bad)?.trim().to_string();
        if topic.is_empty() || offset < 0 || partition < 0 {
            return Err(bad());
        }
        out.push((topic, partition, offset));
    }
    Ok(out)
}

#[derive(Debug, Serialize)]
pub struct SeekResult {
    pub topic: String,
    pub partition: i32,
    pub previous_offset: Option<i64>,
    pub new_offset: Option<i64>,
    pub error: Option<ItemError>,
}

#[derive(Debug, Serialize)]
pub struct SeekResults {
    pub group: String,
    pub dry_run: bool,
    pub partitions: Vec<SeekResult>,
}

impl Failures for SeekResults {
    fn failures(&self) -> (usize, usize) {
        let failed = self.partitions.iter().filter(|r| r.error.is_some()).count();
        (failed, self.partitions.len())
    }
}

impl Render for SeekResults {
    fn table(&self, t: &mut Table) {
        t.header(&[
            "TOPIC",
            "PARTITION",
            "PREVIOUS-OFFSET",
            "NEW-OFFSET",
            "STATUS",
        ]);
        for r in &self.partitions {
            let st = if self.dry_run && r.error.is_none() {
                "DRY-RUN".to_string()
            } else {
                status(&r.error)
            };
            t.row([
                r.topic.clone(),
                r.partition.to_string(),
                or_dash(r.previous_offset),
                or_dash(r.new_offset),
                st,
            ]);
        }
    }
}

pub async fn seek(
    client: &mut Client,
    group: &str,
    topics: &[String],
    target: SeekTarget,
    dry_run: bool,
) -> Result<SeekResults, CliError> {
    let coordinator = client.coordinator(group).await?;
    let node = client.route(coordinator);
    // Kafka refuses commits from outside a group that has members (UNKNOWN_MEMBER_ID); say
    // why before trying, as kafka-consumer-groups does.
    if let Ok(st) = group_state(client, node, group).await? {
        if !st.members.is_empty() {
            return Err(CliError::kafka(
                format!(
                    "seek group {group:?}: it has {} active member(s) (state {})",
                    st.members.len(),
                    st.state
                ),
                68,
                None,
            ));
        }
    }
    let previous = committed(client, node, group).await?;
    let mut wanted: Vec<(String, i32, Result<i64, i16>)> = Vec::new();
    match target {
        SeekTarget::File(rows) => {
            for (t, p, o) in rows {
                if !topics.is_empty() && !topics.contains(&t) {
                    continue;
                }
                wanted.push((t, p, Ok(o)));
            }
        }
        SeekTarget::Spec(spec) => {
            let names: BTreeSet<String> = if topics.is_empty() {
                previous.keys().cloned().collect()
            } else {
                topics.iter().cloned().collect()
            };
            if names.is_empty() {
                return Err(CliError::Usage(format!(
                    "group {group:?} has no committed offsets: name the topics with --topic"
                )));
            }
            let leaders = leaders(client, &names).await?;
            for t in &names {
                let Some(ls) = leaders.get(t) else {
                    return Err(CliError::kafka(format!("topic {t:?}"), 3, None));
                };
                for (p, r) in offsets::resolve(client, t, ls, spec).await? {
                    wanted.push((t.clone(), p, r));
                }
            }
        }
    }
    let mut results: Vec<SeekResult> = Vec::new();
    let mut commit: BTreeMap<String, Vec<(i32, i64)>> = BTreeMap::new();
    for (t, p, r) in wanted {
        let prev = previous.get(&t).and_then(|m| m.get(&p)).copied();
        match r {
            Ok(o) => {
                commit.entry(t.clone()).or_default().push((p, o));
                results.push(SeekResult {
                    topic: t,
                    partition: p,
                    previous_offset: prev,
                    new_offset: Some(o),
                    error: None,
                });
            }
            Err(code) => results.push(SeekResult {
                topic: t,
                partition: p,
                previous_offset: prev,
                new_offset: None,
                error: ItemError::from_code(code, None),
            }),
        }
    }
    if !dry_run && !commit.is_empty() {
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::from_static_str(""))
            .with_retention_time_ms(-1)
            .with_topics(
                commit
                    .iter()
                    .map(|(t, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(super::topic_name(t))
                            .with_partitions(
                                ps.iter()
                                    .map(|(p, o)| {
                                        OffsetCommitRequestPartition::default()
                                            .with_partition_index(*p)
                                            .with_committed_offset(*o)
                                            .with_committed_leader_epoch(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let (resp, _) = client.call(node, &req, 9).await?;
        for t in resp.topics {
            for p in t.partitions {
                if p.error_code != 0 {
                    if let Some(r) = results
                        .iter_mut()
                        .find(|r| r.topic == t.name.as_str() && r.partition == p.partition_index)
                    {
                        r.error = ItemError::from_code(p.error_code, None);
                    }
                }
            }
        }
    }
    results.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Ok(SeekResults {
        group: group.to_string(),
        dry_run,
        partitions: results,
    })
}

#[derive(Debug, Serialize)]
pub struct DeleteResult {
    pub group: String,
    pub error: Option<ItemError>,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct DeleteResults(pub Vec<DeleteResult>);

impl Failures for DeleteResults {
    fn failures(&self) -> (usize, usize) {
        (
            self.0.iter().filter(|r| r.error.is_some()).count(),
            self.0.len(),
        )
    }
}

impl Render for DeleteResults {
    fn table(&self, t: &mut Table) {
        t.header(&["GROUP", "STATUS"]);
        for r in &self.0 {
            t.row([r.group.clone(), status(&r.error)]);
        }
    }
}

pub async fn delete(client: &mut Client, groups: &[String]) -> Result<DeleteResults, CliError> {
    let mut out = Vec::new();
    for g in groups {
        let node = client.coordinator(g).await?;
        let req = DeleteGroupsRequest::default()
            .with_groups_names(vec![GroupId(StrBytes::from_string(g.clone()))]);
        let (resp, _) = client.call(client.route(node), &req, 2).await?;
        for r in resp.results {
            out.push(DeleteResult {
                group: r.group_id.to_string(),
                error: ItemError::from_code(r.error_code, None),
            });
        }
    }
    let _ = ANY;
    Ok(DeleteResults(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_an_offsets_file_when_parsed_then_rows_and_comments_skipped() {
        let rows =
            parse_offsets_file("# saved\norders,0,10\n\norders , 1 , 20\nmy,topic,2,5\n").unwrap();
        assert_eq!(
            rows,
            vec![
                ("orders".into(), 0, 10),
                ("orders".into(), 1, 20),
                ("my,topic".into(), 2, 5)
            ]
        );
    }

    #[test]
    fn given_bad_offsets_file_lines_when_parsed_then_usage_error_names_the_line() {
        for text in ["orders,0", "orders,x,1", ",0,1", "orders,0,-3"] {
            let e = parse_offsets_file(text).unwrap_err();
            assert!(e.to_string().contains("line 1"), "{e}");
        }
    }

    #[test]
    fn given_assignment_bytes_when_decoded_then_topics_and_partitions() {
        use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
        use kafka_protocol::protocol::Encodable;
        let a = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
            TopicPartition::default()
                .with_topic(super::super::topic_name("orders"))
                .with_partitions(vec![0, 2]),
        ]);
        let mut buf = bytes::BytesMut::new();
        bytes::BufMut::put_i16(&mut buf, 1);
        a.encode(&mut buf, 1).unwrap();
        let got = decode_assignment(buf.freeze());
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].topic.as_str(), got[0].partitions.clone()),
            ("orders", vec![0, 2])
        );
        assert!(decode_assignment(bytes::Bytes::from_static(&[0, 1, 9])).is_empty());
    }
}
