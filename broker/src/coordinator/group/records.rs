//! `__consumer_offsets` records in Kafka's schemas, so a Kafka log dir's committed offsets
//! and groups are understood here and ours by Kafka tools.
//!
//! Keys start with an int16 version that doubles as the record type: 0 and 1 are
//! `OffsetCommitKey` (group, topic, partition), 2 is `GroupMetadataKey` (group). Values start
//! with their own int16 version: we write `OffsetCommitValue` v3 and `GroupMetadataValue` v3
//! (the newest non-flexible ones, which Kafka 3 and 4 read), and read v0–v4 (v4 is the first
//! flexible version: compact strings and tagged fields). A null value is a tombstone.
//! KIP-848 consumer groups use key types 3 (group epoch), 5 (member metadata), 6 (target
//! assignment epoch), 7 (a member's target assignment) and 8 (its current assignment), with
//! flexible v0 values, as Kafka's new group coordinator writes them, and 16 (what a subscribed
//! regular expression resolved to), in the codec generated from Kafka's schema.

use std::collections::BTreeSet;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::Decodable;

use crate::codec::generated::{
    consumer_group_regular_expression_key as regex_key,
    consumer_group_regular_expression_value as regex_value,
};

/// A committed offset, as `OffsetCommitValue` holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("malformed coordinator record: {0}")]
pub struct RecordError(pub String);

#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemberMetadata {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupMetadata {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp: i64,
    pub members: Vec<MemberMetadata>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum GroupRecord {
    Offset {
        group: String,
        topic: String,
        partition: i32,
        value: Option<CommittedOffset>,
    },
    Metadata {
        group: String,
        value: Option<GroupMetadata>,
    },
    /// KIP-848 `ConsumerGroupMetadata` (key 3): the group epoch.
    ConsumerEpoch { group: String, value: Option<i32> },
    /// `ConsumerGroupMemberMetadata` (key 5).
    ConsumerMember {
        group: String,
        member: String,
        value: Option<ConsumerMemberMetadata>,
    },
    /// `ConsumerGroupTargetAssignmentMetadata` (key 6): the assignment epoch.
    TargetEpoch { group: String, value: Option<i32> },
    /// `ConsumerGroupTargetAssignmentMember` (key 7).
    TargetMember {
        group: String,
        member: String,
        value: Option<TopicPartitions>,
    },
    /// `ConsumerGroupCurrentMemberAssignment` (key 8).
    CurrentAssignment {
        group: String,
        member: String,
        value: Option<CurrentAssignment>,
    },
    /// `ConsumerGroupRegularExpression` (key 16): what a subscribed regex resolved to.
    ConsumerRegex {
        group: String,
        regex: String,
        value: Option<ResolvedRegex>,
    },
    /// A KIP-1071 streams group's records (keys 17, 19–23), in the generated codec.
    Streams(crate::coordinator::group::streams::records::StreamsRecord),
    /// A KIP-932 share group's records (keys 10–15), in the generated codec.
    Share(crate::coordinator::share::persist::ShareRecord),
}

/// Partitions by topic id, as the KIP-848 records hold them.
pub type TopicPartitions = Vec<(uuid::Uuid, Vec<i32>)>;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumerMemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: Vec<String>,
    pub regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct CurrentAssignment {
    pub epoch: i32,
    pub previous_epoch: i32,
    /// Kafka's MemberState: 0 stable, 1 unrevoked partitions, 2 unreleased partitions.
    pub state: i8,
    pub assigned: TopicPartitions,
    pub pending_revocation: TopicPartitions,
}

/// `ConsumerGroupRegularExpressionValue`: the topics a regex stood for when it was resolved,
/// the metadata version it was resolved against and when (wall clock, ms).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResolvedRegex {
    pub topics: BTreeSet<String>,
    pub version: i64,
    pub timestamp: i64,
}

const OFFSET_VALUE_VERSION: i16 = 3;
const GROUP_VALUE_VERSION: i16 = 3;

pub(crate) fn put_str(b: &mut BytesMut, s: &str) {
    b.put_i16(s.len() as i16);
    b.put_slice(s.as_bytes());
}

fn put_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(b, s),
        None => b.put_i16(-1),
    }
}

fn put_bytes(b: &mut BytesMut, v: &[u8]) {
    b.put_i32(v.len() as i32);
    b.put_slice(v);
}

pub(crate) fn put_uvarint(b: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        b.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

/// A flexible-version (compact) nullable string.
pub(crate) fn put_compact_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => {
            put_uvarint(b, s.len() as u64 + 1);
            b.put_slice(s.as_bytes());
        }
        None => put_uvarint(b, 0),
    }
}

fn put_topic_partitions(b: &mut BytesMut, tps: &TopicPartitions) {
    put_uvarint(b, tps.len() as u64 + 1);
    for (id, ps) in tps {
        b.put_slice(id.as_bytes());
        put_uvarint(b, ps.len() as u64 + 1);
        for p in ps {
            b.put_i32(*p);
        }
        b.put_u8(0);
    }
}

/// A flexible v0 value holding one int32 (group epoch, assignment epoch).
fn flexible_epoch(epoch: i32) -> Bytes {
    let mut v = BytesMut::new();
    v.put_i16(0);
    v.put_i32(epoch);
    v.put_u8(0);
    v.freeze()
}

impl GroupRecord {
    /// (key, value) as stored in the log.
    pub fn encode(&self) -> (Bytes, Option<Bytes>) {
        let mut k = BytesMut::new();
        match self {
            GroupRecord::Offset {
                group,
                topic,
                partition,
                value,
            } => {
                k.put_i16(1);
                put_str(&mut k, group);
                put_str(&mut k, topic);
                k.put_i32(*partition);
                let v = value.as_ref().map(|o| {
                    let mut v = BytesMut::new();
                    v.put_i16(OFFSET_VALUE_VERSION);
                    v.put_i64(o.offset);
                    v.put_i32(o.leader_epoch);
                    put_str(&mut v, &o.metadata);
                    v.put_i64(o.commit_timestamp);
                    v.freeze()
                });
                (k.freeze(), v)
            }
            GroupRecord::Metadata { group, value } => {
                k.put_i16(2);
                put_str(&mut k, group);
                let v = value.as_ref().map(|g| {
                    let mut v = BytesMut::new();
                    v.put_i16(GROUP_VALUE_VERSION);
                    put_str(&mut v, &g.protocol_type);
                    v.put_i32(g.generation);
                    put_nullable_str(&mut v, g.protocol.as_deref());
                    put_nullable_str(&mut v, g.leader.as_deref());
                    v.put_i64(g.state_timestamp);
                    v.put_i32(g.members.len() as i32);
                    for m in &g.members {
                        put_str(&mut v, &m.member_id);
                        put_nullable_str(&mut v, m.instance_id.as_deref());
                        put_str(&mut v, &m.client_id);
                        put_str(&mut v, &m.client_host);
                        v.put_i32(m.rebalance_timeout_ms);
                        v.put_i32(m.session_timeout_ms);
                        put_bytes(&mut v, &m.subscription);
                        put_bytes(&mut v, &m.assignment);
                    }
                    v.freeze()
                });
                (k.freeze(), v)
            }
            GroupRecord::ConsumerEpoch { group, value } => {
                k.put_i16(3);
                put_str(&mut k, group);
                (k.freeze(), value.map(flexible_epoch))
            }
            GroupRecord::TargetEpoch { group, value } => {
                k.put_i16(6);
                put_str(&mut k, group);
                (k.freeze(), value.map(flexible_epoch))
            }
            GroupRecord::ConsumerMember {
                group,
                member,
                value,
            } => {
                k.put_i16(5);
                put_str(&mut k, group);
                put_str(&mut k, member);
                let v = value.as_ref().map(|m| {
                    let mut v = BytesMut::new();
                    v.put_i16(0);
                    put_compact_str(&mut v, m.instance_id.as_deref());
                    put_compact_str(&mut v, m.rack_id.as_deref());
                    put_compact_str(&mut v, Some(&m.client_id));
                    put_compact_str(&mut v, Some(&m.client_host));
                    put_uvarint(&mut v, m.subscribed.len() as u64 + 1);
                    for t in &m.subscribed {
                        put_compact_str(&mut v, Some(t));
                    }
                    put_compact_str(&mut v, m.regex.as_deref());
                    v.put_i32(m.rebalance_timeout_ms);
                    put_compact_str(&mut v, m.server_assignor.as_deref());
                    v.put_u8(0);
                    v.freeze()
                });
                (k.freeze(), v)
            }
            GroupRecord::TargetMember {
                group,
                member,
                value,
            } => {
                k.put_i16(7);
                put_str(&mut k, group);
                put_str(&mut k, member);
                let v = value.as_ref().map(|tps| {
                    let mut v = BytesMut::new();
                    v.put_i16(0);
                    put_topic_partitions(&mut v, tps);
                    v.put_u8(0);
                    v.freeze()
                });
                (k.freeze(), v)
            }
            GroupRecord::CurrentAssignment {
                group,
                member,
                value,
            } => {
                k.put_i16(8);
                put_str(&mut k, group);
                put_str(&mut k, member);
                let v = value.as_ref().map(|a| {
                    let mut v = BytesMut::new();
                    v.put_i16(0);
                    v.put_i32(a.epoch);
                    v.put_i32(a.previous_epoch);
                    v.put_i8(a.state);
                    put_topic_partitions(&mut v, &a.assigned);
                    put_topic_partitions(&mut v, &a.pending_revocation);
                    v.put_u8(0);
                    v.freeze()
                });
                (k.freeze(), v)
            }
            GroupRecord::ConsumerRegex {
                group,
                regex,
                value,
            } => {
                let key = regex_key::ConsumerGroupRegularExpressionKey {
                    group_id: group.clone(),
                    regular_expression: regex.clone(),
                    ..Default::default()
                };
                let value =
                    value
                        .as_ref()
                        .map(|r| regex_value::ConsumerGroupRegularExpressionValue {
                            topics: r.topics.iter().cloned().collect(),
                            version: r.version,
                            timestamp: r.timestamp,
                            ..Default::default()
                        });
                crate::codec::generated::encode_record(regex_key::API_KEY, &key, value.as_ref())
            }
            GroupRecord::Streams(r) => r.encode(),
            GroupRecord::Share(r) => r.encode(),
        }
    }

    /// Decodes one record; `Ok(None)` for record types this coordinator does not keep
    /// (KIP-848 consumer-group records, transactional offsets markers).
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<GroupRecord>, RecordError> {
        let mut k = Reader::new(key, false);
        let key_version = k.i16()?;
        match key_version {
            0 | 1 => {
                let group = k.string()?;
                let topic = k.string()?;
                let partition = k.i32()?;
                let value = value.map(decode_offset_value).transpose()?;
                Ok(Some(GroupRecord::Offset {
                    group,
                    topic,
                    partition,
                    value,
                }))
            }
            2 => {
                let group = k.string()?;
                let value = value.map(decode_group_value).transpose()?;
                Ok(Some(GroupRecord::Metadata { group, value }))
            }
            3 | 6 => {
                let group = k.string()?;
                let value = value
                    .map(|v| Reader::value(v).and_then(|mut r| r.i32()))
                    .transpose()?;
                Ok(Some(if key_version == 3 {
                    GroupRecord::ConsumerEpoch { group, value }
                } else {
                    GroupRecord::TargetEpoch { group, value }
                }))
            }
            5 => {
                let (group, member) = (k.string()?, k.string()?);
                let value = value
                    .map(|v| {
                        let mut r = Reader::value(v)?;
                        let instance_id = r.nullable_string()?;
                        let rack_id = r.nullable_string()?;
                        let client_id = r.string()?;
                        let client_host = r.string()?;
                        let n = r.array_len()?;
                        let mut subscribed = Vec::with_capacity(n.min(1024));
                        for _ in 0..n {
                            subscribed.push(r.string()?);
                        }
                        Ok(ConsumerMemberMetadata {
                            instance_id,
                            rack_id,
                            client_id,
                            client_host,
                            subscribed,
                            regex: r.nullable_string()?,
                            rebalance_timeout_ms: r.i32()?,
                            server_assignor: r.nullable_string()?,
                        })
                    })
                    .transpose()?;
                Ok(Some(GroupRecord::ConsumerMember {
                    group,
                    member,
                    value,
                }))
            }
            7 => {
                let (group, member) = (k.string()?, k.string()?);
                let value = value
                    .map(|v| Reader::value(v)?.topic_partitions())
                    .transpose()?;
                Ok(Some(GroupRecord::TargetMember {
                    group,
                    member,
                    value,
                }))
            }
            8 => {
                let (group, member) = (k.string()?, k.string()?);
                let value = value
                    .map(|v| {
                        let mut r = Reader::value(v)?;
                        Ok(CurrentAssignment {
                            epoch: r.i32()?,
                            previous_epoch: r.i32()?,
                            state: r.i8()?,
                            assigned: r.topic_partitions()?,
                            pending_revocation: r.topic_partitions()?,
                        })
                    })
                    .transpose()?;
                Ok(Some(GroupRecord::CurrentAssignment {
                    group,
                    member,
                    value,
                }))
            }
            regex_key::API_KEY => decode_regex(&key[2..], value)
                .map(Some)
                .map_err(|e| RecordError(format!("regular expression record: {e:#}"))),
            // 4 and 9 (partition metadata, no longer written) and newer record types are not
            // kept.
            t if crate::coordinator::group::streams::records::is_streams_type(t) => {
                crate::coordinator::group::streams::records::StreamsRecord::decode(
                    t,
                    &key[2..],
                    value,
                )
                .map(|r| Some(GroupRecord::Streams(r)))
                .map_err(|e| RecordError(format!("streams group record {t}: {e:#}")))
            }
            t if crate::coordinator::share::persist::is_share_type(t) => {
                crate::coordinator::share::persist::ShareRecord::decode(t, &key[2..], value)
                    .map(|r| Some(GroupRecord::Share(r)))
                    .map_err(|e| RecordError(format!("share group record {t}: {e:#}")))
            }
            _ => Ok(None),
        }
    }
}

/// Record 16 (`key` without its record type).
fn decode_regex(key: &[u8], value: Option<&[u8]>) -> anyhow::Result<GroupRecord> {
    let k =
        regex_key::ConsumerGroupRegularExpressionKey::decode(&mut Bytes::copy_from_slice(key), 0)?;
    let value = crate::codec::generated::decode_record_value::<
        regex_value::ConsumerGroupRegularExpressionValue,
    >(value)?;
    Ok(GroupRecord::ConsumerRegex {
        group: k.group_id,
        regex: k.regular_expression,
        value: value.map(|v| ResolvedRegex {
            topics: v.topics.into_iter().collect(),
            version: v.version,
            timestamp: v.timestamp,
        }),
    })
}

fn decode_offset_value(v: &[u8]) -> Result<CommittedOffset, RecordError> {
    let version = i16::from_be_bytes(
        v.get(0..2)
            .ok_or_else(|| RecordError("empty offset value".into()))?
            .try_into()
            .expect("two bytes"),
    );
    let mut r = Reader::new(&v[2..], version >= 4);
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.string()?;
    let commit_timestamp = r.i64()?;
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
    })
}

fn decode_group_value(v: &[u8]) -> Result<GroupMetadata, RecordError> {
    let version = i16::from_be_bytes(
        v.get(0..2)
            .ok_or_else(|| RecordError("empty group value".into()))?
            .try_into()
            .expect("two bytes"),
    );
    let mut r = Reader::new(&v[2..], version >= 4);
    let protocol_type = r.string()?;
    let generation = r.i32()?;
    let protocol = r.nullable_string()?;
    let leader = r.nullable_string()?;
    let state_timestamp = if version >= 2 { r.i64()? } else { -1 };
    let n = r.array_len()?;
    let mut members = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let member_id = r.string()?;
        let instance_id = if version >= 3 {
            r.nullable_string()?
        } else {
            None
        };
        let client_id = r.string()?;
        let client_host = r.string()?;
        let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { -1 };
        let session_timeout_ms = r.i32()?;
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        r.tagged_fields()?;
        members.push(MemberMetadata {
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms: if rebalance_timeout_ms < 0 {
                session_timeout_ms
            } else {
                rebalance_timeout_ms
            },
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    Ok(GroupMetadata {
        protocol_type,
        generation,
        protocol,
        leader,
        state_timestamp,
        members,
    })
}

/// Reads Kafka's primitive types, classic or flexible (compact) encoding (also used for
/// `__transaction_state` records).
pub(crate) struct Reader<'a> {
    b: &'a [u8],
    pub(crate) flexible: bool,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(b: &'a [u8], flexible: bool) -> Self {
        Reader { b, flexible }
    }
    fn need(&self, n: usize) -> Result<(), RecordError> {
        if self.b.remaining() < n {
            return Err(RecordError(format!(
                "needs {n} bytes, {} left",
                self.b.len()
            )));
        }
        Ok(())
    }
    /// A flexible KIP-848 value: int16 version (0 is the only one), compact encoding.
    fn value(v: &'a [u8]) -> Result<Reader<'a>, RecordError> {
        let mut r = Reader::new(v, false);
        r.i16()?;
        r.flexible = true;
        Ok(r)
    }
    pub(crate) fn i8(&mut self) -> Result<i8, RecordError> {
        self.need(1)?;
        Ok(self.b.get_i8())
    }
    fn topic_partitions(&mut self) -> Result<TopicPartitions, RecordError> {
        let n = self.array_len()?;
        let mut out = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let id =
                uuid::Uuid::from_slice(self.raw(16)?).map_err(|e| RecordError(e.to_string()))?;
            let m = self.array_len()?;
            let mut ps = Vec::with_capacity(m.min(4096));
            for _ in 0..m {
                ps.push(self.i32()?);
            }
            self.tagged_fields()?;
            out.push((id, ps));
        }
        Ok(out)
    }
    pub(crate) fn i16(&mut self) -> Result<i16, RecordError> {
        self.need(2)?;
        Ok(self.b.get_i16())
    }
    pub(crate) fn i32(&mut self) -> Result<i32, RecordError> {
        self.need(4)?;
        Ok(self.b.get_i32())
    }
    pub(crate) fn i64(&mut self) -> Result<i64, RecordError> {
        self.need(8)?;
        Ok(self.b.get_i64())
    }
    fn uvarint(&mut self) -> Result<u64, RecordError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            self.need(1)?;
            let byte = self.b.get_u8();
            v |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(RecordError("varint too long".into()))
    }
    /// Length of a string/bytes/array; `None` for null.
    pub(crate) fn len(&mut self, wide: bool) -> Result<Option<usize>, RecordError> {
        if self.flexible {
            let n = self.uvarint()?;
            return Ok(n.checked_sub(1).map(|n| n as usize));
        }
        let n = if wide {
            self.i32()? as i64
        } else {
            self.i16()? as i64
        };
        Ok((n >= 0).then_some(n as usize))
    }
    pub(crate) fn raw(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        self.need(n)?;
        let (head, tail) = self.b.split_at(n);
        self.b = tail;
        Ok(head)
    }
    fn nullable_string(&mut self) -> Result<Option<String>, RecordError> {
        match self.len(false)? {
            None => Ok(None),
            Some(n) => {
                let raw = self.raw(n)?;
                String::from_utf8(raw.to_vec())
                    .map(Some)
                    .map_err(|_| RecordError("string is not UTF-8".into()))
            }
        }
    }
    pub(crate) fn string(&mut self) -> Result<String, RecordError> {
        Ok(self.nullable_string()?.unwrap_or_default())
    }
    fn bytes(&mut self) -> Result<Bytes, RecordError> {
        match self.len(true)? {
            None => Ok(Bytes::new()),
            Some(n) => Ok(Bytes::copy_from_slice(self.raw(n)?)),
        }
    }
    pub(crate) fn array_len(&mut self) -> Result<usize, RecordError> {
        Ok(self.len(true)?.unwrap_or(0))
    }
    pub(crate) fn tagged_fields(&mut self) -> Result<(), RecordError> {
        self.tagged_fields_with(|_, _| Ok(()))
    }
    /// Tagged fields, each (tag, data) given to `f`; nothing in classic encoding.
    pub(crate) fn tagged_fields_with(
        &mut self,
        mut f: impl FnMut(u64, &[u8]) -> Result<(), RecordError>,
    ) -> Result<(), RecordError> {
        if !self.flexible {
            return Ok(());
        }
        let n = self.uvarint()?;
        for _ in 0..n {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            f(tag, self.raw(size)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_offset_commit_when_encoding_then_kafka_layout_and_round_trip() {
        let r = GroupRecord::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
            value: Some(CommittedOffset {
                offset: 42,
                leader_epoch: -1,
                metadata: "meta".into(),
                commit_timestamp: 1000,
            }),
        };
        let (k, v) = r.encode();
        // OffsetCommitKey v1: version, group, topic, partition.
        assert_eq!(&k[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
        let v = v.unwrap();
        assert_eq!(&v[..2], &[0, 3]);
        assert_eq!(GroupRecord::decode(&k, Some(&v)).unwrap(), Some(r));
    }

    #[test]
    fn given_group_metadata_when_encoding_then_round_trips_and_tombstone_is_null() {
        let r = GroupRecord::Metadata {
            group: "g".into(),
            value: Some(GroupMetadata {
                protocol_type: "consumer".into(),
                generation: 7,
                protocol: Some("range".into()),
                leader: Some("m1".into()),
                state_timestamp: 5,
                members: vec![MemberMetadata {
                    member_id: "m1".into(),
                    instance_id: Some("i1".into()),
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout_ms: 300000,
                    session_timeout_ms: 45000,
                    subscription: Bytes::from_static(b"sub"),
                    assignment: Bytes::from_static(b"asg"),
                }],
            }),
        };
        let (k, v) = r.encode();
        assert_eq!(&k[..], &[0, 2, 0, 1, b'g']);
        assert_eq!(GroupRecord::decode(&k, v.as_deref()).unwrap(), Some(r));
        let tomb = GroupRecord::Metadata {
            group: "g".into(),
            value: None,
        };
        let (k, v) = tomb.encode();
        assert!(v.is_none());
        assert_eq!(GroupRecord::decode(&k, None).unwrap(), Some(tomb));
    }

    #[test]
    fn given_flexible_v4_offset_value_when_decoding_then_read() {
        let mut v = BytesMut::new();
        v.put_i16(4);
        v.put_i64(9);
        v.put_i32(2);
        v.put_u8(3); // compact string "ab"
        v.put_slice(b"ab");
        v.put_i64(77);
        v.put_u8(0); // no tagged fields
        let (k, _) = GroupRecord::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            value: None,
        }
        .encode();
        let Some(GroupRecord::Offset { value: Some(o), .. }) =
            GroupRecord::decode(&k, Some(&v)).unwrap()
        else {
            panic!("offset record");
        };
        assert_eq!(
            (o.offset, o.leader_epoch, o.metadata.as_str()),
            (9, 2, "ab")
        );
    }

    #[test]
    fn given_kip848_records_when_encoding_then_round_trip() {
        let id = uuid::Uuid::new_v4();
        let recs = vec![
            GroupRecord::ConsumerEpoch {
                group: "g".into(),
                value: Some(5),
            },
            GroupRecord::TargetEpoch {
                group: "g".into(),
                value: Some(5),
            },
            GroupRecord::ConsumerMember {
                group: "g".into(),
                member: "m".into(),
                value: Some(ConsumerMemberMetadata {
                    instance_id: Some("i".into()),
                    rack_id: None,
                    client_id: "c".into(),
                    client_host: "h".into(),
                    subscribed: vec!["a".into(), "b".into()],
                    regex: None,
                    rebalance_timeout_ms: 300_000,
                    server_assignor: Some("uniform".into()),
                }),
            },
            GroupRecord::TargetMember {
                group: "g".into(),
                member: "m".into(),
                value: Some(vec![(id, vec![0, 2])]),
            },
            GroupRecord::CurrentAssignment {
                group: "g".into(),
                member: "m".into(),
                value: Some(CurrentAssignment {
                    epoch: 5,
                    previous_epoch: 4,
                    state: 1,
                    assigned: vec![(id, vec![0])],
                    pending_revocation: vec![(id, vec![1])],
                }),
            },
            GroupRecord::CurrentAssignment {
                group: "g".into(),
                member: "m".into(),
                value: None,
            },
            GroupRecord::ConsumerRegex {
                group: "g".into(),
                regex: "rx-.*".into(),
                value: Some(ResolvedRegex {
                    topics: BTreeSet::from(["rx-a".into(), "rx-b".into()]),
                    version: 7,
                    timestamp: 1_700_000_000_000,
                }),
            },
            GroupRecord::ConsumerRegex {
                group: "g".into(),
                regex: "rx-.*".into(),
                value: None,
            },
        ];
        for r in recs {
            let (k, v) = r.encode();
            assert_eq!(GroupRecord::decode(&k, v.as_deref()).unwrap(), Some(r));
        }
    }

    #[test]
    fn given_truncated_or_unknown_records_when_decoding_then_error_or_skipped() {
        assert!(GroupRecord::decode(&[0, 1, 0, 5, b'g'], None).is_err());
        assert_eq!(
            GroupRecord::decode(&[0, 9, 1, 2], Some(b"x")).unwrap(),
            None
        );
    }
}
