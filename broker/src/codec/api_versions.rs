//! ApiVersionsRequest v0–v5 (`ApiVersionsRequest.json`): v3 is the first flexible version
//! (client software name and version), v5 (KIP-1242) adds the cluster id and node id the
//! client means to reach. The response is kafka-protocol's (`Capped`, v5 = v4).

use anyhow::Result;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

use super::{check_version, decode_tagged, encode_tagged, tagged_size, wire, TaggedFields};

const MAX: i16 = 5;

#[derive(Debug, Clone, PartialEq)]
pub struct ApiVersionsRequest {
    pub client_software_name: StrBytes,
    pub client_software_version: StrBytes,
    /// v5+: the cluster the client intends to connect to, if known.
    pub cluster_id: Option<StrBytes>,
    /// v5+: the node the client intends to connect to, -1 if unknown.
    pub node_id: i32,
    pub unknown_tagged_fields: TaggedFields,
}

impl Default for ApiVersionsRequest {
    fn default() -> Self {
        ApiVersionsRequest {
            client_software_name: StrBytes::default(),
            client_software_version: StrBytes::default(),
            cluster_id: None,
            node_id: -1,
            unknown_tagged_fields: TaggedFields::new(),
        }
    }
}

impl Encodable for ApiVersionsRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        check_version("ApiVersionsRequest", version, 0, MAX)?;
        if version >= 3 {
            wire::put_string(buf, &self.client_software_name, true);
            wire::put_string(buf, &self.client_software_version, true);
        }
        if version >= 5 {
            wire::put_nullable_string(buf, self.cluster_id.as_deref(), true);
            buf.put_i32(self.node_id);
        }
        if version >= 3 {
            encode_tagged(buf, &self.unknown_tagged_fields);
        }
        Ok(())
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        let mut n = 0;
        if version >= 3 {
            n += wire::string_size(&self.client_software_name, true);
            n += wire::string_size(&self.client_software_version, true);
        }
        if version >= 5 {
            n += wire::nullable_string_size(self.cluster_id.as_deref(), true) + 4;
        }
        if version >= 3 {
            n += tagged_size(&self.unknown_tagged_fields);
        }
        Ok(n)
    }
}

impl Decodable for ApiVersionsRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        check_version("ApiVersionsRequest", version, 0, MAX)?;
        let mut r = ApiVersionsRequest::default();
        if version >= 3 {
            r.client_software_name = wire::string(buf, true)?;
            r.client_software_version = wire::string(buf, true)?;
        }
        if version >= 5 {
            r.cluster_id = wire::nullable_string(buf, true)?;
            r.node_id = wire::i32(buf)?;
        }
        if version >= 3 {
            r.unknown_tagged_fields = decode_tagged(buf)?;
        }
        Ok(r)
    }
}

impl HeaderVersion for ApiVersionsRequest {
    /// Request header v2 from v3 on (KIP-511 keeps ApiVersions' response header at v0).
    fn header_version(version: i16) -> i16 {
        if version >= 3 {
            2
        } else {
            1
        }
    }
}
