//! DescribeLogDirsResponse v1–v5 (`DescribeLogDirsResponse.json`): v2 is the first flexible
//! version, v3 adds a top-level error code, v4 each dir's total and usable bytes, v5 whether
//! a dir is cordoned. The request is kafka-protocol's (`Capped`, v5 = v2).

use anyhow::Result;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

use super::{check_version, decode_tagged, encode_tagged, wire, TaggedFields};

const MIN: i16 = 1;
const MAX: i16 = 5;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeLogDirsPartition {
    pub partition_index: i32,
    pub partition_size: i64,
    pub offset_lag: i64,
    pub is_future_key: bool,
    pub unknown_tagged_fields: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeLogDirsTopic {
    pub name: StrBytes,
    pub partitions: Vec<DescribeLogDirsPartition>,
    pub unknown_tagged_fields: TaggedFields,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeLogDirsResult {
    pub error_code: i16,
    pub log_dir: StrBytes,
    pub topics: Vec<DescribeLogDirsTopic>,
    /// v4+: the volume's size, -1 if unknown.
    pub total_bytes: i64,
    /// v4+: the volume's free bytes, -1 if unknown.
    pub usable_bytes: i64,
    /// v5+: no new partitions are placed in a cordoned dir.
    pub is_cordoned: bool,
    pub unknown_tagged_fields: TaggedFields,
}

impl Default for DescribeLogDirsResult {
    fn default() -> Self {
        DescribeLogDirsResult {
            error_code: 0,
            log_dir: StrBytes::default(),
            topics: Vec::new(),
            total_bytes: -1,
            usable_bytes: -1,
            is_cordoned: false,
            unknown_tagged_fields: TaggedFields::new(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeLogDirsResponse {
    pub throttle_time_ms: i32,
    /// v3+.
    pub error_code: i16,
    pub results: Vec<DescribeLogDirsResult>,
    pub unknown_tagged_fields: TaggedFields,
}

fn tagged<B: ByteBufMut>(buf: &mut B, fields: &TaggedFields, flexible: bool) {
    if flexible {
        encode_tagged(buf, fields);
    }
}

fn read_tagged<B: ByteBuf>(buf: &mut B, flexible: bool) -> Result<TaggedFields> {
    if flexible {
        decode_tagged(buf)
    } else {
        Ok(TaggedFields::new())
    }
}

impl Encodable for DescribeLogDirsResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        check_version("DescribeLogDirsResponse", version, MIN, MAX)?;
        let flexible = version >= 2;
        buf.put_i32(self.throttle_time_ms);
        if version >= 3 {
            buf.put_i16(self.error_code);
        }
        wire::put_array_len(buf, self.results.len(), flexible);
        for r in &self.results {
            buf.put_i16(r.error_code);
            wire::put_string(buf, &r.log_dir, flexible);
            wire::put_array_len(buf, r.topics.len(), flexible);
            for t in &r.topics {
                wire::put_string(buf, &t.name, flexible);
                wire::put_array_len(buf, t.partitions.len(), flexible);
                for p in &t.partitions {
                    buf.put_i32(p.partition_index);
                    buf.put_i64(p.partition_size);
                    buf.put_i64(p.offset_lag);
                    buf.put_u8(u8::from(p.is_future_key));
                    tagged(buf, &p.unknown_tagged_fields, flexible);
                }
                tagged(buf, &t.unknown_tagged_fields, flexible);
            }
            if version >= 4 {
                buf.put_i64(r.total_bytes);
                buf.put_i64(r.usable_bytes);
            }
            if version >= 5 {
                buf.put_u8(u8::from(r.is_cordoned));
            }
            tagged(buf, &r.unknown_tagged_fields, flexible);
        }
        tagged(buf, &self.unknown_tagged_fields, flexible);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        super::encoded_size(self, version)
    }
}

impl Decodable for DescribeLogDirsResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        check_version("DescribeLogDirsResponse", version, MIN, MAX)?;
        let flexible = version >= 2;
        let mut resp = DescribeLogDirsResponse {
            throttle_time_ms: wire::i32(buf)?,
            ..Default::default()
        };
        if version >= 3 {
            resp.error_code = wire::i16(buf)?;
        }
        for _ in 0..wire::array_len(buf, flexible)? {
            let mut r = DescribeLogDirsResult {
                error_code: wire::i16(buf)?,
                log_dir: wire::string(buf, flexible)?,
                ..Default::default()
            };
            for _ in 0..wire::array_len(buf, flexible)? {
                let mut t = DescribeLogDirsTopic {
                    name: wire::string(buf, flexible)?,
                    ..Default::default()
                };
                for _ in 0..wire::array_len(buf, flexible)? {
                    t.partitions.push(DescribeLogDirsPartition {
                        partition_index: wire::i32(buf)?,
                        partition_size: wire::i64(buf)?,
                        offset_lag: wire::i64(buf)?,
                        is_future_key: wire::bool(buf)?,
                        unknown_tagged_fields: read_tagged(buf, flexible)?,
                    });
                }
                t.unknown_tagged_fields = read_tagged(buf, flexible)?;
                r.topics.push(t);
            }
            if version >= 4 {
                r.total_bytes = wire::i64(buf)?;
                r.usable_bytes = wire::i64(buf)?;
            }
            if version >= 5 {
                r.is_cordoned = wire::bool(buf)?;
            }
            r.unknown_tagged_fields = read_tagged(buf, flexible)?;
            resp.results.push(r);
        }
        resp.unknown_tagged_fields = read_tagged(buf, flexible)?;
        Ok(resp)
    }
}

impl HeaderVersion for DescribeLogDirsResponse {
    fn header_version(version: i16) -> i16 {
        if version >= 2 {
            1
        } else {
            0
        }
    }
}
