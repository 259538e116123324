//! The messages generated from Kafka's schemas in `schemas/` (`broker/build.rs`): the
//! streams group APIs of KIP-1071 and KIP-1331, which kafka-protocol 0.18 does not have, and
//! the regex resolution, share and streams group records of `__consumer_offsets` (record
//! types 10–17 and 19–23, from the group coordinator's jar), with `encode_record` /
//! `decode_record_value`
//! for their layout in the log. Each message is a module
//! named after it (`streams_group_heartbeat_request`, …) with its API key (a record's type),
//! version range and structs; the top-level struct implements kafka-protocol's `Encodable`
//! and `Decodable` (and a request's or response's `HeaderVersion`), so the handlers use it as
//! they use the crate's.

#[allow(unused_imports)]
mod prelude {
    pub(crate) use super::super::TaggedFields;
    pub(crate) use super::super::{
        check_version, decode_tagged, encode_tagged, encoded_size, wire,
    };
    pub(crate) use anyhow::{anyhow, bail, Result};
    pub(crate) use bytes::{BufMut, Bytes};
    pub(crate) use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
    pub(crate) use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
    pub(crate) use uuid::Uuid;
}

include!(concat!(env!("OUT_DIR"), "/kafka_schemas.rs"));

use bytes::{BufMut, Bytes};
use kafka_protocol::protocol::{Decodable, Encodable};

/// A record of a type the generated codec has (regex resolutions, streams and share
/// groups: keys 10–17, 19–23), in Kafka's layout: the key's record type then the key at version 0, the
/// value's version 0 then the value; `None` is a tombstone.
pub fn encode_record<K: Encodable, V: Encodable>(
    t: i16,
    key: &K,
    value: Option<&V>,
) -> (Bytes, Option<Bytes>) {
    let mut k = bytes::BytesMut::new();
    k.put_i16(t);
    key.encode(&mut k, 0)
        .expect("a generated record key encodes");
    let v = value.map(|v| {
        let mut b = bytes::BytesMut::new();
        b.put_i16(0);
        v.encode(&mut b, 0)
            .expect("a generated record value encodes");
        b.freeze()
    });
    (k.freeze(), v)
}

/// The value of an `encode_record` record (`None`: a tombstone); only version 0 exists.
pub fn decode_record_value<V: Decodable>(value: Option<&[u8]>) -> anyhow::Result<Option<V>> {
    let Some(v) = value else { return Ok(None) };
    let mut b = Bytes::copy_from_slice(v);
    let version = crate::codec::wire::i16(&mut b)?;
    anyhow::ensure!(version == 0, "value version {version}");
    V::decode(&mut b, 0).map(Some)
}
