//! DeleteGroupsResponse v0–v3 (`DeleteGroupsResponse.json`): v2 is the first flexible
//! version, v3 adds an error message per group. The request is kafka-protocol's (`Capped`,
//! v3 = v2).

use anyhow::Result;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

use super::{check_version, decode_tagged, encode_tagged, wire, TaggedFields};

const MAX: i16 = 3;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeletableGroupResult {
    pub group_id: StrBytes,
    pub error_code: i16,
    /// v3+: why the group could not be deleted.
    pub error_message: Option<StrBytes>,
    pub unknown_tagged_fields: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteGroupsResponse {
    pub throttle_time_ms: i32,
    pub results: Vec<DeletableGroupResult>,
    pub unknown_tagged_fields: TaggedFields,
}

impl Encodable for DeleteGroupsResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        check_version("DeleteGroupsResponse", version, 0, MAX)?;
        let flexible = version >= 2;
        buf.put_i32(self.throttle_time_ms);
        wire::put_array_len(buf, self.results.len(), flexible);
        for r in &self.results {
            wire::put_string(buf, &r.group_id, flexible);
            buf.put_i16(r.error_code);
            if version >= 3 {
                wire::put_nullable_string(buf, r.error_message.as_deref(), flexible);
            }
            if flexible {
                encode_tagged(buf, &r.unknown_tagged_fields);
            }
        }
        if flexible {
            encode_tagged(buf, &self.unknown_tagged_fields);
        }
        Ok(())
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        super::encoded_size(self, version)
    }
}

impl Decodable for DeleteGroupsResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        check_version("DeleteGroupsResponse", version, 0, MAX)?;
        let flexible = version >= 2;
        let mut resp = DeleteGroupsResponse {
            throttle_time_ms: wire::i32(buf)?,
            ..Default::default()
        };
        for _ in 0..wire::array_len(buf, flexible)? {
            let mut r = DeletableGroupResult {
                group_id: wire::string(buf, flexible)?,
                error_code: wire::i16(buf)?,
                ..Default::default()
            };
            if version >= 3 {
                r.error_message = wire::nullable_string(buf, flexible)?;
            }
            if flexible {
                r.unknown_tagged_fields = decode_tagged(buf)?;
            }
            resp.results.push(r);
        }
        if flexible {
            resp.unknown_tagged_fields = decode_tagged(buf)?;
        }
        Ok(resp)
    }
}

impl HeaderVersion for DeleteGroupsResponse {
    fn header_version(version: i16) -> i16 {
        if version >= 2 {
            1
        } else {
            0
        }
    }
}
