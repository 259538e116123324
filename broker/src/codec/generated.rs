//! The messages generated from Kafka's schemas in `schemas/` (`broker/build.rs`): the
//! streams group APIs of KIP-1071 and KIP-1331, which kafka-protocol 0.18 does not have, and
//! the streams group records of `__consumer_offsets` (record types 17 and 19–23, from the
//! group coordinator's jar; what their persistence will write). Each message is a module
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
