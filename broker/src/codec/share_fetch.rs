//! ShareFetchRequest v1–v2 (`ShareFetchRequest.json`, flexible throughout): v2 (KIP-1206,
//! KIP-1222) adds `ShareAcquireMode` and `IsRenewAck` after `BatchSize`, fields the crate's
//! struct does not have, so the whole request is written out here and carries them beside the
//! crate's struct. The response is the crate's at v1 (`Capped`, v2 = v1).

use std::ops::Deref;

use anyhow::Result;
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::{self, GroupId};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use super::{check_version, decode_tagged, encode_tagged, wire, TaggedFields};

const MIN: i16 = 1;
pub const MAX: i16 = 2;

/// Kafka's `ShareAcquireMode`: 0 batch-optimized (whole batches, may pass MaxRecords),
/// 1 record-limit (never more than MaxRecords).
pub const ACQUIRE_RECORD_LIMIT: i8 = 1;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareFetchRequest {
    pub body: messages::ShareFetchRequest,
    /// v2+: `ShareAcquireMode`.
    pub share_acquire_mode: i8,
    /// v2+: the acknowledgements carry RENEW (type 4); such a request fetches nothing.
    pub is_renew_ack: bool,
}

impl Deref for ShareFetchRequest {
    type Target = messages::ShareFetchRequest;
    fn deref(&self) -> &Self::Target {
        &self.body
    }
}

impl From<messages::ShareFetchRequest> for ShareFetchRequest {
    fn from(body: messages::ShareFetchRequest) -> Self {
        ShareFetchRequest {
            body,
            ..Default::default()
        }
    }
}

impl Decodable for ShareFetchRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        check_version("ShareFetchRequest", version, MIN, MAX)?;
        let mut body = messages::ShareFetchRequest::default()
            .with_group_id(wire::nullable_string(buf, true)?.map(GroupId))
            .with_member_id(wire::nullable_string(buf, true)?)
            .with_share_session_epoch(wire::i32(buf)?)
            .with_max_wait_ms(wire::i32(buf)?)
            .with_min_bytes(wire::i32(buf)?)
            .with_max_bytes(wire::i32(buf)?)
            .with_max_records(wire::i32(buf)?)
            .with_batch_size(wire::i32(buf)?);
        let (mut share_acquire_mode, mut is_renew_ack) = (0, false);
        if version >= 2 {
            share_acquire_mode = wire::i8(buf)?;
            is_renew_ack = wire::bool(buf)?;
        }
        for _ in 0..wire::array_len(buf, true)? {
            let mut t = FetchTopic::default().with_topic_id(wire::uuid(buf)?);
            for _ in 0..wire::array_len(buf, true)? {
                let mut p = FetchPartition::default().with_partition_index(wire::i32(buf)?);
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
        for _ in 0..wire::array_len(buf, true)? {
            let mut t = ForgottenTopic::default().with_topic_id(wire::uuid(buf)?);
            for _ in 0..wire::array_len(buf, true)? {
                t.partitions.push(wire::i32(buf)?);
            }
            t.unknown_tagged_fields = decode_tagged(buf)?;
            body.forgotten_topics_data.push(t);
        }
        body.unknown_tagged_fields = decode_tagged(buf)?;
        Ok(ShareFetchRequest {
            body,
            share_acquire_mode,
            is_renew_ack,
        })
    }
}

impl Encodable for ShareFetchRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        check_version("ShareFetchRequest", version, MIN, MAX)?;
        let r = &self.body;
        wire::put_nullable_string(buf, r.group_id.as_ref().map(|g| g.0.as_str()), true);
        wire::put_nullable_string(buf, r.member_id.as_ref().map(|m| m.as_str()), true);
        buf.put_i32(r.share_session_epoch);
        buf.put_i32(r.max_wait_ms);
        buf.put_i32(r.min_bytes);
        buf.put_i32(r.max_bytes);
        buf.put_i32(r.max_records);
        buf.put_i32(r.batch_size);
        if version >= 2 {
            buf.put_i8(self.share_acquire_mode);
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
        wire::put_array_len(buf, r.forgotten_topics_data.len(), true);
        for t in &r.forgotten_topics_data {
            buf.put_u128(t.topic_id.as_u128());
            wire::put_array_len(buf, t.partitions.len(), true);
            for p in &t.partitions {
                buf.put_i32(*p);
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

/// One acknowledgement batch (the same layout in ShareFetch and ShareAcknowledge): first and
/// last offset, the types, the tagged fields.
pub(super) fn decode_ack_batch<B: ByteBuf>(
    buf: &mut B,
) -> Result<(i64, i64, Vec<i8>, TaggedFields)> {
    let (first, last) = (wire::i64(buf)?, wire::i64(buf)?);
    let mut types = Vec::new();
    for _ in 0..wire::array_len(buf, true)? {
        types.push(wire::i8(buf)?);
    }
    Ok((first, last, types, decode_tagged(buf)?))
}

pub(super) fn encode_ack_batch<B: ByteBufMut>(
    buf: &mut B,
    first: i64,
    last: i64,
    types: &[i8],
    tagged: &TaggedFields,
) {
    buf.put_i64(first);
    buf.put_i64(last);
    wire::put_array_len(buf, types.len(), true);
    for ty in types {
        buf.put_i8(*ty);
    }
    encode_tagged(buf, tagged);
}

impl HeaderVersion for ShareFetchRequest {
    fn header_version(version: i16) -> i16 {
        messages::ShareFetchRequest::header_version(version.min(1))
    }
}
