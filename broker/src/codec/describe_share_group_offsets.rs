//! DescribeShareGroupOffsetsResponse v0–v1 (`DescribeShareGroupOffsetsResponse.json`, flexible
//! throughout): v1 (KIP-1226) adds each share partition's lag. The request is kafka-protocol's
//! (`Capped`, v1 = v0).

use anyhow::Result;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use uuid::Uuid;

use super::{check_version, decode_tagged, encode_tagged, wire, TaggedFields};

const MAX: i16 = 1;

#[derive(Debug, Clone, PartialEq)]
pub struct SharePartitionOffsets {
    pub partition_index: i32,
    /// The share partition start offset (SPSO), -1 without state.
    pub start_offset: i64,
    pub leader_epoch: i32,
    /// v1+: records left to deliver, -1 when unknown.
    pub lag: i64,
    pub error_code: i16,
    pub error_message: Option<StrBytes>,
    pub unknown_tagged_fields: TaggedFields,
}

impl Default for SharePartitionOffsets {
    fn default() -> Self {
        SharePartitionOffsets {
            partition_index: 0,
            start_offset: -1,
            leader_epoch: -1,
            lag: -1,
            error_code: 0,
            error_message: None,
            unknown_tagged_fields: TaggedFields::new(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareTopicOffsets {
    pub topic_name: StrBytes,
    pub topic_id: Uuid,
    pub partitions: Vec<SharePartitionOffsets>,
    pub unknown_tagged_fields: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareGroupOffsets {
    pub group_id: StrBytes,
    pub topics: Vec<ShareTopicOffsets>,
    pub error_code: i16,
    pub error_message: Option<StrBytes>,
    pub unknown_tagged_fields: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeShareGroupOffsetsResponse {
    pub throttle_time_ms: i32,
    pub groups: Vec<ShareGroupOffsets>,
    pub unknown_tagged_fields: TaggedFields,
}

impl Encodable for DescribeShareGroupOffsetsResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        check_version("DescribeShareGroupOffsetsResponse", version, 0, MAX)?;
        buf.put_i32(self.throttle_time_ms);
        wire::put_array_len(buf, self.groups.len(), true);
        for g in &self.groups {
            wire::put_string(buf, &g.group_id, true);
            wire::put_array_len(buf, g.topics.len(), true);
            for t in &g.topics {
                wire::put_string(buf, &t.topic_name, true);
                buf.put_u128(t.topic_id.as_u128());
                wire::put_array_len(buf, t.partitions.len(), true);
                for p in &t.partitions {
                    buf.put_i32(p.partition_index);
                    buf.put_i64(p.start_offset);
                    buf.put_i32(p.leader_epoch);
                    if version >= 1 {
                        buf.put_i64(p.lag);
                    }
                    buf.put_i16(p.error_code);
                    wire::put_nullable_string(buf, p.error_message.as_deref(), true);
                    encode_tagged(buf, &p.unknown_tagged_fields);
                }
                encode_tagged(buf, &t.unknown_tagged_fields);
            }
            buf.put_i16(g.error_code);
            wire::put_nullable_string(buf, g.error_message.as_deref(), true);
            encode_tagged(buf, &g.unknown_tagged_fields);
        }
        encode_tagged(buf, &self.unknown_tagged_fields);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        super::encoded_size(self, version)
    }
}

impl Decodable for DescribeShareGroupOffsetsResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        check_version("DescribeShareGroupOffsetsResponse", version, 0, MAX)?;
        let mut resp = DescribeShareGroupOffsetsResponse {
            throttle_time_ms: wire::i32(buf)?,
            ..Default::default()
        };
        for _ in 0..wire::array_len(buf, true)? {
            let mut g = ShareGroupOffsets {
                group_id: wire::string(buf, true)?,
                ..Default::default()
            };
            for _ in 0..wire::array_len(buf, true)? {
                let mut t = ShareTopicOffsets {
                    topic_name: wire::string(buf, true)?,
                    topic_id: wire::uuid(buf)?,
                    ..Default::default()
                };
                for _ in 0..wire::array_len(buf, true)? {
                    let mut p = SharePartitionOffsets {
                        partition_index: wire::i32(buf)?,
                        start_offset: wire::i64(buf)?,
                        leader_epoch: wire::i32(buf)?,
                        ..Default::default()
                    };
                    if version >= 1 {
                        p.lag = wire::i64(buf)?;
                    }
                    p.error_code = wire::i16(buf)?;
                    p.error_message = wire::nullable_string(buf, true)?;
                    p.unknown_tagged_fields = decode_tagged(buf)?;
                    t.partitions.push(p);
                }
                t.unknown_tagged_fields = decode_tagged(buf)?;
                g.topics.push(t);
            }
            g.error_code = wire::i16(buf)?;
            g.error_message = wire::nullable_string(buf, true)?;
            g.unknown_tagged_fields = decode_tagged(buf)?;
            resp.groups.push(g);
        }
        resp.unknown_tagged_fields = decode_tagged(buf)?;
        Ok(resp)
    }
}

impl HeaderVersion for DescribeShareGroupOffsetsResponse {
    fn header_version(_version: i16) -> i16 {
        1
    }
}
