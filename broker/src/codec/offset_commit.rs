//! OffsetCommitRequest v2–v10 (`OffsetCommitRequest.json`): v10 (KIP-848) names each topic by
//! its id instead of its name. kafka-protocol 0.18 has the `topic_id` field but decodes only up
//! to v9, so v10 is written out here and the rest is the crate's. The response is the crate's
//! (it serves v10).

use anyhow::Result;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use super::{check_version, decode_tagged, encode_tagged, wire, ById, TOPIC_IDS_VERSION};

impl Decodable for ById<OffsetCommitRequest> {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version < TOPIC_IDS_VERSION {
            return OffsetCommitRequest::decode(buf, version).map(ById);
        }
        check_version("OffsetCommitRequest", version, 2, TOPIC_IDS_VERSION)?;
        let mut req = OffsetCommitRequest::default()
            .with_group_id(GroupId(wire::string(buf, true)?))
            .with_generation_id_or_member_epoch(wire::i32(buf)?)
            .with_member_id(wire::string(buf, true)?)
            .with_group_instance_id(wire::nullable_string(buf, true)?);
        for _ in 0..wire::array_len(buf, true)? {
            let mut topic = OffsetCommitRequestTopic::default().with_topic_id(wire::uuid(buf)?);
            for _ in 0..wire::array_len(buf, true)? {
                let mut p = OffsetCommitRequestPartition::default()
                    .with_partition_index(wire::i32(buf)?)
                    .with_committed_offset(wire::i64(buf)?)
                    .with_committed_leader_epoch(wire::i32(buf)?)
                    .with_committed_metadata(wire::nullable_string(buf, true)?);
                p.unknown_tagged_fields = decode_tagged(buf)?;
                topic.partitions.push(p);
            }
            topic.unknown_tagged_fields = decode_tagged(buf)?;
            req.topics.push(topic);
        }
        req.unknown_tagged_fields = decode_tagged(buf)?;
        Ok(ById(req))
    }
}

impl Encodable for ById<OffsetCommitRequest> {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version < TOPIC_IDS_VERSION {
            return self.0.encode(buf, version);
        }
        check_version("OffsetCommitRequest", version, 2, TOPIC_IDS_VERSION)?;
        let req = &self.0;
        wire::put_string(buf, &req.group_id, true);
        buf.put_i32(req.generation_id_or_member_epoch);
        wire::put_string(buf, &req.member_id, true);
        wire::put_nullable_string(buf, req.group_instance_id.as_deref(), true);
        wire::put_array_len(buf, req.topics.len(), true);
        for t in &req.topics {
            buf.put_u128(t.topic_id.as_u128());
            wire::put_array_len(buf, t.partitions.len(), true);
            for p in &t.partitions {
                buf.put_i32(p.partition_index);
                buf.put_i64(p.committed_offset);
                buf.put_i32(p.committed_leader_epoch);
                wire::put_nullable_string(buf, p.committed_metadata.as_deref(), true);
                encode_tagged(buf, &p.unknown_tagged_fields);
            }
            encode_tagged(buf, &t.unknown_tagged_fields);
        }
        encode_tagged(buf, &req.unknown_tagged_fields);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        super::encoded_size(self, version)
    }
}

impl HeaderVersion for ById<OffsetCommitRequest> {
    fn header_version(version: i16) -> i16 {
        OffsetCommitRequest::header_version(version.min(TOPIC_IDS_VERSION - 1))
    }
}
