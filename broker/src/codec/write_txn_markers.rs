//! WriteTxnMarkersRequest v1–v2 (`WriteTxnMarkersRequest.json`, flexible throughout): v2
//! (KIP-1228) adds the transaction version of each marker. The response is kafka-protocol's
//! (`Capped`, v2 = v1).

use anyhow::Result;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

use super::{check_version, decode_tagged, encode_tagged, wire, TaggedFields};

const MIN: i16 = 1;
const MAX: i16 = 2;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct WritableTxnMarkerTopic {
    pub name: StrBytes,
    pub partition_indexes: Vec<i32>,
    pub unknown_tagged_fields: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct WritableTxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// true = COMMIT, false = ABORT.
    pub transaction_result: bool,
    pub topics: Vec<WritableTxnMarkerTopic>,
    pub coordinator_epoch: i32,
    /// v2+: 0/1 = the legacy markers (TV0, TV1), 2 = transactions v2.
    pub transaction_version: i8,
    pub unknown_tagged_fields: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteTxnMarkersRequest {
    pub markers: Vec<WritableTxnMarker>,
    pub unknown_tagged_fields: TaggedFields,
}

impl Encodable for WriteTxnMarkersRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        check_version("WriteTxnMarkersRequest", version, MIN, MAX)?;
        wire::put_array_len(buf, self.markers.len(), true);
        for m in &self.markers {
            buf.put_i64(m.producer_id);
            buf.put_i16(m.producer_epoch);
            buf.put_u8(u8::from(m.transaction_result));
            wire::put_array_len(buf, m.topics.len(), true);
            for t in &m.topics {
                wire::put_string(buf, &t.name, true);
                wire::put_array_len(buf, t.partition_indexes.len(), true);
                for p in &t.partition_indexes {
                    buf.put_i32(*p);
                }
                encode_tagged(buf, &t.unknown_tagged_fields);
            }
            buf.put_i32(m.coordinator_epoch);
            if version >= 2 {
                buf.put_i8(m.transaction_version);
            }
            encode_tagged(buf, &m.unknown_tagged_fields);
        }
        encode_tagged(buf, &self.unknown_tagged_fields);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        super::encoded_size(self, version)
    }
}

impl Decodable for WriteTxnMarkersRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        check_version("WriteTxnMarkersRequest", version, MIN, MAX)?;
        let mut req = WriteTxnMarkersRequest::default();
        for _ in 0..wire::array_len(buf, true)? {
            let mut m = WritableTxnMarker {
                producer_id: wire::i64(buf)?,
                producer_epoch: wire::i16(buf)?,
                transaction_result: wire::bool(buf)?,
                ..Default::default()
            };
            for _ in 0..wire::array_len(buf, true)? {
                let mut t = WritableTxnMarkerTopic {
                    name: wire::string(buf, true)?,
                    ..Default::default()
                };
                for _ in 0..wire::array_len(buf, true)? {
                    t.partition_indexes.push(wire::i32(buf)?);
                }
                t.unknown_tagged_fields = decode_tagged(buf)?;
                m.topics.push(t);
            }
            m.coordinator_epoch = wire::i32(buf)?;
            if version >= 2 {
                m.transaction_version = wire::i8(buf)?;
            }
            m.unknown_tagged_fields = decode_tagged(buf)?;
            req.markers.push(m);
        }
        req.unknown_tagged_fields = decode_tagged(buf)?;
        Ok(req)
    }
}

impl HeaderVersion for WriteTxnMarkersRequest {
    fn header_version(_version: i16) -> i16 {
        2
    }
}
