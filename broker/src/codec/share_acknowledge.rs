//! ShareAcknowledge v1–v2 (`ShareAcknowledgeRequest.json`, `ShareAcknowledgeResponse.json`,
//! flexible throughout): v2 (KIP-1222) adds `IsRenewAck` to the request and
//! `AcquisitionLockTimeoutMs` to the response, fields the crate's structs do not have, so both
//! are written out here and carry them beside the crate's structs.

use std::ops::{Deref, DerefMut};

use anyhow::Result;
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch,
};
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{self, BrokerId, GroupId};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use super::share_fetch::{decode_ack_batch, encode_ack_batch};
use super::{check_version, decode_tagged, encode_tagged, wire};

const MIN: i16 = 1;
pub const MAX: i16 = 2;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareAcknowledgeRequest {
    pub body: messages::ShareAcknowledgeRequest,
    /// v2+: the acknowledgements carry RENEW (type 4).
    pub is_renew_ack: bool,
}

impl Deref for ShareAcknowledgeRequest {
    type Target = messages::ShareAcknowledgeRequest;
    fn deref(&self) -> &Self::Target {
        &self.body
    }
}

impl From<messages::ShareAcknowledgeRequest> for ShareAcknowledgeRequest {
    fn from(body: messages::ShareAcknowledgeRequest) -> Self {
        ShareAcknowledgeRequest {
            body,
            is_renew_ack: false,
        }
    }
}

impl Decodable for ShareAcknowledgeRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        check_version("ShareAcknowledgeRequest", version, MIN, MAX)?;
        let mut body = messages::ShareAcknowledgeRequest::default()
            .with_group_id(wire::nullable_string(buf, true)?.map(GroupId))
            .with_member_id(wire::nullable_string(buf, true)?)
            .with_share_session_epoch(wire::i32(buf)?);
        let is_renew_ack = version >= 2 && wire::bool(buf)?;
        for _ in 0..wire::array_len(buf, true)? {
            let mut t = AcknowledgeTopic::default().with_topic_id(wire::uuid(buf)?);
            for _ in 0..wire::array_len(buf, true)? {
                let mut p = AcknowledgePartition::default().with_partition_index(wire::i32(buf)?);
                for _ in 0..wire::array_len(buf, true)? {
                    let (first, last, types, tagged) = decode_ack_batch(buf)?;
                    let mut b = AcknowledgementBatch::default()
                        .with_first_offset(first)
                        .with_last_offset(last)
                        .with_acknowledge_types(types);
                    b.unknown_tagged_fields = tagged;
                    p.acknowledgement_batches.push(b);
                }
                p.unknown_tagged_fields = decode_tagged(buf)?;
                t.partitions.push(p);
            }
            t.unknown_tagged_fields = decode_tagged(buf)?;
            body.topics.push(t);
        }
        body.unknown_tagged_fields = decode_tagged(buf)?;
        Ok(ShareAcknowledgeRequest { body, is_renew_ack })
    }
}

impl Encodable for ShareAcknowledgeRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        check_version("ShareAcknowledgeRequest", version, MIN, MAX)?;
        let r = &self.body;
        wire::put_nullable_string(buf, r.group_id.as_ref().map(|g| g.0.as_str()), true);
        wire::put_nullable_string(buf, r.member_id.as_ref().map(|m| m.as_str()), true);
        buf.put_i32(r.share_session_epoch);
        if version >= 2 {
            buf.put_u8(u8::from(self.is_renew_ack));
        }
        wire::put_array_len(buf, r.topics.len(), true);
        for t in &r.topics {
            buf.put_u128(t.topic_id.as_u128());
            wire::put_array_len(buf, t.partitions.len(), true);
            for p in &t.partitions {
                buf.put_i32(p.partition_index);
                wire::put_array_len(buf, p.acknowledgement_batches.len(), true);
                for b in &p.acknowledgement_batches {
                    let (first, last) = (b.first_offset, b.last_offset);
                    encode_ack_batch(
                        buf,
                        first,
                        last,
                        &b.acknowledge_types,
                        &b.unknown_tagged_fields,
                    );
                }
                encode_tagged(buf, &p.unknown_tagged_fields);
            }
            encode_tagged(buf, &t.unknown_tagged_fields);
        }
        encode_tagged(buf, &r.unknown_tagged_fields);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        super::encoded_size(self, version)
    }
}

impl HeaderVersion for ShareAcknowledgeRequest {
    fn header_version(version: i16) -> i16 {
        messages::ShareAcknowledgeRequest::header_version(version.min(1))
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareAcknowledgeResponse {
    pub body: messages::ShareAcknowledgeResponse,
    /// v2+: how long the records a RENEW kept stay locked.
    pub acquisition_lock_timeout_ms: i32,
}

impl Deref for ShareAcknowledgeResponse {
    type Target = messages::ShareAcknowledgeResponse;
    fn deref(&self) -> &Self::Target {
        &self.body
    }
}

impl DerefMut for ShareAcknowledgeResponse {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.body
    }
}

impl Encodable for ShareAcknowledgeResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        check_version("ShareAcknowledgeResponse", version, MIN, MAX)?;
        let r = &self.body;
        buf.put_i32(r.throttle_time_ms);
        buf.put_i16(r.error_code);
        wire::put_nullable_string(buf, r.error_message.as_ref().map(|m| m.as_str()), true);
        if version >= 2 {
            buf.put_i32(self.acquisition_lock_timeout_ms);
        }
        wire::put_array_len(buf, r.responses.len(), true);
        for t in &r.responses {
            buf.put_u128(t.topic_id.as_u128());
            wire::put_array_len(buf, t.partitions.len(), true);
            for p in &t.partitions {
                buf.put_i32(p.partition_index);
                buf.put_i16(p.error_code);
                wire::put_nullable_string(buf, p.error_message.as_ref().map(|m| m.as_str()), true);
                buf.put_i32(p.current_leader.leader_id);
                buf.put_i32(p.current_leader.leader_epoch);
                encode_tagged(buf, &p.current_leader.unknown_tagged_fields);
                encode_tagged(buf, &p.unknown_tagged_fields);
            }
            encode_tagged(buf, &t.unknown_tagged_fields);
        }
        wire::put_array_len(buf, r.node_endpoints.len(), true);
        for n in &r.node_endpoints {
            buf.put_i32(n.node_id.0);
            wire::put_string(buf, &n.host, true);
            buf.put_i32(n.port);
            wire::put_nullable_string(buf, n.rack.as_ref().map(|s| s.as_str()), true);
            encode_tagged(buf, &n.unknown_tagged_fields);
        }
        encode_tagged(buf, &r.unknown_tagged_fields);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        super::encoded_size(self, version)
    }
}

impl Decodable for ShareAcknowledgeResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        check_version("ShareAcknowledgeResponse", version, MIN, MAX)?;
        let mut body = messages::ShareAcknowledgeResponse::default()
            .with_throttle_time_ms(wire::i32(buf)?)
            .with_error_code(wire::i16(buf)?)
            .with_error_message(wire::nullable_string(buf, true)?);
        let acquisition_lock_timeout_ms = if version >= 2 { wire::i32(buf)? } else { 0 };
        for _ in 0..wire::array_len(buf, true)? {
            let mut t = ShareAcknowledgeTopicResponse::default().with_topic_id(wire::uuid(buf)?);
            for _ in 0..wire::array_len(buf, true)? {
                let mut p = PartitionData::default()
                    .with_partition_index(wire::i32(buf)?)
                    .with_error_code(wire::i16(buf)?)
                    .with_error_message(wire::nullable_string(buf, true)?);
                let mut leader = LeaderIdAndEpoch::default()
                    .with_leader_id(wire::i32(buf)?)
                    .with_leader_epoch(wire::i32(buf)?);
                leader.unknown_tagged_fields = decode_tagged(buf)?;
                p.current_leader = leader;
                p.unknown_tagged_fields = decode_tagged(buf)?;
                t.partitions.push(p);
            }
            t.unknown_tagged_fields = decode_tagged(buf)?;
            body.responses.push(t);
        }
        for _ in 0..wire::array_len(buf, true)? {
            let mut n = NodeEndpoint::default()
                .with_node_id(BrokerId(wire::i32(buf)?))
                .with_host(wire::string(buf, true)?)
                .with_port(wire::i32(buf)?)
                .with_rack(wire::nullable_string(buf, true)?);
            n.unknown_tagged_fields = decode_tagged(buf)?;
            body.node_endpoints.push(n);
        }
        body.unknown_tagged_fields = decode_tagged(buf)?;
        Ok(ShareAcknowledgeResponse {
            body,
            acquisition_lock_timeout_ms,
        })
    }
}

impl HeaderVersion for ShareAcknowledgeResponse {
    fn header_version(version: i16) -> i16 {
        messages::ShareAcknowledgeResponse::header_version(version.min(1))
    }
}
