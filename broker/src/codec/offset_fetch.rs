//! OffsetFetchRequest v1–v10 (`OffsetFetchRequest.json`): v10 (KIP-848) names each topic of a
//! group by its id instead of its name. kafka-protocol 0.18 has the `topic_id` field but
//! decodes only up to v9, so v10 is written out here and the rest is the crate's. The response
//! is the crate's (it serves v10).

use anyhow::Result;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use super::{check_version, decode_tagged, encode_tagged, wire, ById, TOPIC_IDS_VERSION};

impl Decodable for ById<OffsetFetchRequest> {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version < TOPIC_IDS_VERSION {
            return OffsetFetchRequest::decode(buf, version).map(ById);
        }
        check_version("OffsetFetchRequest", version, 1, TOPIC_IDS_VERSION)?;
        let mut req = OffsetFetchRequest::default();
        for _ in 0..wire::array_len(buf, true)? {
            let mut group = OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(wire::string(buf, true)?))
                .with_member_id(wire::nullable_string(buf, true)?)
                .with_member_epoch(wire::i32(buf)?);
            // Null topics: every partition the group has committed.
            group.topics = match wire::nullable_array_len(buf, true)? {
                None => None,
                Some(n) => {
                    let mut topics = Vec::with_capacity(n);
                    for _ in 0..n {
                        let id = wire::uuid(buf)?;
                        let mut partitions = Vec::new();
                        for _ in 0..wire::array_len(buf, true)? {
                            partitions.push(wire::i32(buf)?);
                        }
                        let mut t = OffsetFetchRequestTopics::default()
                            .with_topic_id(id)
                            .with_partition_indexes(partitions);
                        t.unknown_tagged_fields = decode_tagged(buf)?;
                        topics.push(t);
                    }
                    Some(topics)
                }
            };
            group.unknown_tagged_fields = decode_tagged(buf)?;
            req.groups.push(group);
        }
        req.require_stable = wire::bool(buf)?;
        req.unknown_tagged_fields = decode_tagged(buf)?;
        Ok(ById(req))
    }
}

impl Encodable for ById<OffsetFetchRequest> {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version < TOPIC_IDS_VERSION {
            return self.0.encode(buf, version);
        }
        check_version("OffsetFetchRequest", version, 1, TOPIC_IDS_VERSION)?;
        let req = &self.0;
        wire::put_array_len(buf, req.groups.len(), true);
        for g in &req.groups {
            wire::put_string(buf, &g.group_id, true);
            wire::put_nullable_string(buf, g.member_id.as_deref(), true);
            buf.put_i32(g.member_epoch);
            match &g.topics {
                None => wire::put_uvarint(buf, 0),
                Some(topics) => {
                    wire::put_array_len(buf, topics.len(), true);
                    for t in topics {
                        buf.put_u128(t.topic_id.as_u128());
                        wire::put_array_len(buf, t.partition_indexes.len(), true);
                        for p in &t.partition_indexes {
                            buf.put_i32(*p);
                        }
                        encode_tagged(buf, &t.unknown_tagged_fields);
                    }
                }
            }
            encode_tagged(buf, &g.unknown_tagged_fields);
        }
        buf.put_u8(u8::from(req.require_stable));
        encode_tagged(buf, &req.unknown_tagged_fields);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        super::encoded_size(self, version)
    }
}

impl HeaderVersion for ById<OffsetFetchRequest> {
    fn header_version(version: i16) -> i16 {
        OffsetFetchRequest::header_version(version.min(TOPIC_IDS_VERSION - 1))
    }
}
