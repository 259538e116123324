//! A v2 consumer instance's membership of its Kafka group, spoken with the classic group
//! protocol through the broker's own handlers: JoinGroup (protocol type `consumer`,
//! protocol `range`), SyncGroup (the leader assigns with Kafka's range assignor), Heartbeat,
//! LeaveGroup, OffsetCommit with the member's generation. That makes the instance an
//! ordinary consumer of the group: `kafka-consumer-groups --describe` lists it, two
//! instances (or an instance and a Java consumer) split the partitions, and commits are
//! fenced by generation as Kafka's are.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, GroupId, HeartbeatRequest,
    JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::error::{ProxyError, ProxyResult};
use crate::cli::client::{Client, ANY};
use crate::cli::offsets::OffsetSpec;

/// Confluent's proxy runs Java consumers with their defaults.
pub const SESSION_TIMEOUT_MS: i32 = 45_000;
pub const REBALANCE_TIMEOUT_MS: i32 = 60_000;
/// How often an instance heartbeats (a third of what Kafka's consumers use, well inside
/// the session timeout).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3);
const PROTOCOL: &str = "range";

const MEMBER_ID_REQUIRED: i16 = 79;
const REBALANCE_IN_PROGRESS: i16 = 27;
const UNKNOWN_MEMBER_ID: i16 = 25;
const ILLEGAL_GENERATION: i16 = 22;
const FENCED_INSTANCE_ID: i16 = 82;

/// A topic partition.
pub type Tp = (String, i32);

/// Where the instance stands in its group.
#[derive(Debug, Default)]
pub struct Membership {
    pub member_id: String,
    pub generation: i32,
    /// The partitions the last SyncGroup gave us.
    pub assigned: BTreeSet<Tp>,
    /// The group rebalances (or we were removed): join again before the next fetch.
    pub needs_join: bool,
}

fn gid(g: &str) -> GroupId {
    GroupId(StrBytes::from_string(g.to_string()))
}

fn kafka(code: i16, what: &str) -> ProxyError {
    ProxyError::Kafka {
        code,
        message: Some(what.to_string()),
    }
}

/// `ConsumerProtocolSubscription` v0 with its version prefix, as a Kafka consumer sends it.
pub fn encode_subscription(topics: &[String]) -> Bytes {
    let s = ConsumerProtocolSubscription::default().with_topics(
        topics
            .iter()
            .map(|t| StrBytes::from_string(t.clone()))
            .collect(),
    );
    let mut b = BytesMut::new();
    b.put_i16(0);
    let _ = s.encode(&mut b, 0);
    b.freeze()
}

pub fn decode_subscription(mut b: Bytes) -> Vec<String> {
    if b.len() < 2 {
        return Vec::new();
    }
    let v = b.get_i16().clamp(0, 3);
    ConsumerProtocolSubscription::decode(&mut b, v)
        .map(|s| s.topics.into_iter().map(|t| t.to_string()).collect())
        .unwrap_or_default()
}

pub fn encode_assignment(parts: &BTreeMap<String, Vec<i32>>) -> Bytes {
    let a = ConsumerProtocolAssignment::default().with_assigned_partitions(
        parts
            .iter()
            .map(|(t, ps)| {
                AssignedTopic::default()
                    .with_topic(crate::cli::topic_name(t))
                    .with_partitions(ps.clone())
            })
            .collect(),
    );
    let mut b = BytesMut::new();
    b.put_i16(0);
    let _ = a.encode(&mut b, 0);
    b.freeze()
}

/// Kafka's RangeAssignor: per topic, its subscribers in member-id order each take a
/// contiguous range, the first `n % m` one partition more.
pub fn range_assign(
    members: &[(String, Vec<String>)],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, BTreeMap<String, Vec<i32>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<i32>>> = members
        .iter()
        .map(|(m, _)| (m.clone(), BTreeMap::new()))
        .collect();
    for (topic, &n) in partitions {
        let mut subs: Vec<&String> = members
            .iter()
            .filter(|(_, ts)| ts.contains(topic))
            .map(|(m, _)| m)
            .collect();
        subs.sort();
        if subs.is_empty() {
            continue;
        }
        let m = subs.len() as i32;
        let (per, extra) = (n / m, n % m);
        for (i, member) in subs.into_iter().enumerate() {
            let i = i as i32;
            let start = per * i + i.min(extra);
            let len = per + i32::from(i < extra);
            if len > 0 {
                out.entry(member.clone())
                    .or_default()
                    .insert(topic.clone(), (start..start + len).collect());
            }
        }
    }
    out
}

/// Joins (or rejoins) `group` subscribed to `topics`, syncs, and records the assignment.
pub async fn join(
    client: &mut Client,
    group: &str,
    topics: &[String],
    m: &mut Membership,
) -> ProxyResult<()> {
    let metadata = encode_subscription(topics);
    let mut attempts = 0;
    let joined = loop {
        attempts += 1;
        let req = JoinGroupRequest::default()
            .with_group_id(gid(group))
            .with_session_timeout_ms(SESSION_TIMEOUT_MS)
            .with_rebalance_timeout_ms(REBALANCE_TIMEOUT_MS)
            .with_member_id(StrBytes::from_string(m.member_id.clone()))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str(PROTOCOL))
                .with_metadata(metadata.clone())]);
        let (resp, _) = client.call(ANY, &req, 7).await?;
        match resp.error_code {
            0 => break resp,
            MEMBER_ID_REQUIRED if attempts < 5 => m.member_id = resp.member_id.to_string(),
            UNKNOWN_MEMBER_ID if attempts < 5 => m.member_id.clear(),
            REBALANCE_IN_PROGRESS if attempts < 5 => {}
            code => return Err(kafka(code, &format!("JoinGroup {group}"))),
        }
    };
    m.member_id = joined.member_id.to_string();
    m.generation = joined.generation_id;
    let assignments = if joined.leader == joined.member_id {
        let members: Vec<(String, Vec<String>)> = joined
            .members
            .iter()
            .map(|x| {
                (
                    x.member_id.to_string(),
                    decode_subscription(x.metadata.clone()),
                )
            })
            .collect();
        let all: BTreeSet<String> = members.iter().flat_map(|(_, t)| t.clone()).collect();
        let md = client
            .metadata(Some(&all.iter().cloned().collect::<Vec<_>>()))
            .await?;
        let counts: BTreeMap<String, i32> = md
            .topics
            .iter()
            .filter(|t| t.error_code == 0)
            .filter_map(|t| Some((t.name.as_ref()?.to_string(), t.partitions.len() as i32)))
            .collect();
        range_assign(&members, &counts)
            .into_iter()
            .map(|(member, parts)| {
                SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(member))
                    .with_assignment(encode_assignment(&parts))
            })
            .collect()
    } else {
        Vec::new()
    };
    let req = SyncGroupRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(m.generation)
        .with_member_id(StrBytes::from_string(m.member_id.clone()))
        .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
        .with_protocol_name(Some(StrBytes::from_static_str(PROTOCOL)))
        .with_assignments(assignments);
    let (resp, _) = client.call(ANY, &req, 5).await?;
    if resp.error_code != 0 {
        m.needs_join = true;
        return Err(kafka(resp.error_code, &format!("SyncGroup {group}")));
    }
    m.assigned = crate::cli::group::decode_assignment(resp.assignment)
        .into_iter()
        .flat_map(|a| a.partitions.into_iter().map(move |p| (a.topic.clone(), p)))
        .collect();
    m.needs_join = false;
    Ok(())
}

/// One heartbeat; a rebalance (or losing the membership) marks the instance for a rejoin.
pub async fn heartbeat(client: &mut Client, group: &str, m: &mut Membership) -> ProxyResult<()> {
    if m.member_id.is_empty() {
        return Ok(());
    }
    let req = HeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(m.generation)
        .with_member_id(StrBytes::from_string(m.member_id.clone()));
    let (resp, _) = client.call(ANY, &req, 4).await?;
    match resp.error_code {
        0 => Ok(()),
        REBALANCE_IN_PROGRESS => {
            m.needs_join = true;
            Ok(())
        }
        UNKNOWN_MEMBER_ID | ILLEGAL_GENERATION | FENCED_INSTANCE_ID => {
            m.needs_join = true;
            m.member_id.clear();
            m.assigned.clear();
            Ok(())
        }
        code => Err(kafka(code, &format!("Heartbeat {group}"))),
    }
}

/// Leaves the group (instance deleted, unsubscribed or expired).
pub async fn leave(client: &mut Client, group: &str, m: &mut Membership) {
    if m.member_id.is_empty() {
        return;
    }
    // v3+ names members in a list, v0-2 by one id: the codec refuses the other field.
    let id = StrBytes::from_string(m.member_id.clone());
    let req = if client.supports(kafka_protocol::messages::ApiKey::LeaveGroup, 3) {
        LeaveGroupRequest::default()
            .with_group_id(gid(group))
            .with_members(vec![MemberIdentity::default().with_member_id(id)])
    } else {
        LeaveGroupRequest::default()
            .with_group_id(gid(group))
            .with_member_id(id)
    };
    if let Err(e) = client.call(ANY, &req, 4).await {
        tracing::debug!(group, error = %e, "http proxy: LeaveGroup");
    }
    *m = Membership::default();
}

/// Commits `offsets` (the next offset to read, per partition) as the member, or as a
/// simple consumer (generation -1) when the instance assigned its partitions by hand.
pub async fn commit(
    client: &mut Client,
    group: &str,
    m: Option<&Membership>,
    offsets: &BTreeMap<Tp, (i64, Option<String>)>,
) -> ProxyResult<()> {
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((t, p), (o, meta)) in offsets {
        by_topic.entry(t).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(*p)
                .with_committed_offset(*o)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(StrBytes::from_string(
                    meta.clone().unwrap_or_default(),
                ))),
        );
    }
    let (generation, member) = match m {
        Some(m) if !m.member_id.is_empty() => (m.generation, m.member_id.clone()),
        _ => (-1, String::new()),
    };
    let req = OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(StrBytes::from_string(member))
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(crate::cli::topic_name(t))
                        .with_partitions(ps)
                })
                .collect(),
        );
    // v8: names, generation (v9+ speaks member epochs).
    let (resp, _) = client.call(ANY, &req, 8).await?;
    let failed = resp
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
        .find(|(_, p)| p.error_code != 0);
    match failed {
        None => Ok(()),
        Some((t, p)) => Err(kafka(
            p.error_code,
            &format!("OffsetCommit {}-{}", t.name.as_str(), p.partition_index),
        )),
    }
}

/// ListOffsets for `tps` at `spec` (start or end).
pub(super) async fn list_offsets(
    client: &mut Client,
    tps: &[Tp],
    spec: OffsetSpec,
) -> ProxyResult<BTreeMap<Tp, i64>> {
    let mut by_topic: BTreeMap<&str, Vec<(i32, i32)>> = BTreeMap::new();
    for (t, p) in tps {
        by_topic.entry(t).or_default().push((*p, ANY));
    }
    let mut out = BTreeMap::new();
    for (t, parts) in by_topic {
        let got = crate::cli::offsets::list(client, t, &parts, spec).await?;
        for (p, r) in got {
            let o = r.map_err(|code| ProxyError::Kafka {
                code,
                message: Some(format!("ListOffsets {t}-{p}")),
            })?;
            out.insert((t.to_string(), p), o);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_members_when_range_assigned_then_contiguous_ranges_first_ones_larger() {
        let members = vec![
            ("b".to_string(), vec!["t".to_string(), "u".to_string()]),
            ("a".to_string(), vec!["t".to_string()]),
        ];
        let counts = BTreeMap::from([("t".to_string(), 3), ("u".to_string(), 2)]);
        let a = range_assign(&members, &counts);
        assert_eq!(a["a"]["t"], vec![0, 1]);
        assert_eq!(a["b"]["t"], vec![2]);
        assert_eq!(a["b"]["u"], vec![0, 1]);
        assert!(!a["a"].contains_key("u"));
        // More members than partitions: the last ones get none.
        let many: Vec<(String, Vec<String>)> = (0..4)
            .map(|i| (format!("m{i}"), vec!["u".to_string()]))
            .collect();
        let a = range_assign(&many, &counts);
        assert_eq!(a["m0"]["u"], vec![0]);
        assert_eq!(a["m1"]["u"], vec![1]);
        assert!(a["m3"].is_empty());
    }

    #[test]
    fn given_a_subscription_when_encoded_then_decodes_back() {
        let b = encode_subscription(&["a".into(), "b".into()]);
        assert_eq!(
            decode_subscription(b),
            vec!["a".to_string(), "b".to_string()]
        );
        let parts = BTreeMap::from([("a".to_string(), vec![0, 2])]);
        let got = crate::cli::group::decode_assignment(encode_assignment(&parts));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].partitions, vec![0, 2]);
        assert!(decode_subscription(Bytes::from_static(&[0])).is_empty());
    }
}
