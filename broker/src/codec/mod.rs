//! The wire codec beyond kafka-protocol 0.18: the message versions Apache Kafka 4.4 serves
//! that the crate does not have, derived from Kafka's message JSON schemas
//! (`clients/src/main/resources/common/message/*.json`), all in this one module.
//!
//! Two kinds of extension:
//! - [`Capped`]: a version whose layout is the previous version's (the schema bumps the
//!   version for a new error code or new semantics, adding no field at it). The message is
//!   encoded and decoded by kafka-protocol at the highest version it knows ([`Cap`]).
//! - A hand-derived message (one file each, e.g. `api_versions`): the version adds fields,
//!   so the whole message is written out here from its schema, with kafka-protocol's
//!   primitive encoders.
//! - A message the crate does not have at all (the streams group APIs): generated at build
//!   time from Kafka's schema files in `schemas/` (`broker/build.rs`, module `generated`).
//!
//! `schema_tests` checks both against Kafka's schemas: a `Capped` version must add no field
//! at any nesting level, and a hand-derived message must encode exactly what a
//! schema-driven encoder makes of the same values, at every version.

pub mod api_versions;
pub mod delete_groups;
pub mod describe_log_dirs;
pub mod describe_share_group_offsets;
pub mod generated;
pub mod offset_commit;
pub mod offset_fetch;
#[cfg(test)]
mod schema_tests;
pub mod share_acknowledge;
pub mod share_fetch;
pub mod wire;
pub mod write_txn_markers;

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

use anyhow::{bail, Result};
use bytes::Bytes;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

/// The highest version of a message that kafka-protocol encodes; above it, up to the version
/// the broker serves, the layout is unchanged (checked against Kafka's schema).
pub trait Cap {
    const CRATE_MAX: i16;
}

macro_rules! caps {
    ($( $ty:ty => $max:expr ;)*) => {
        $( impl Cap for $ty { const CRATE_MAX: i16 = $max; } )*
        /// (message name in Kafka's schema, crate maximum) of every capped message.
        #[cfg(test)]
        pub(crate) static CAPPED: &[(&str, i16)] = &[
            $( (stringify!($ty), $max), )*
        ];
    };
}

use kafka_protocol::messages::{
    ApiVersionsResponse, DeleteGroupsRequest, DescribeLogDirsRequest,
    DescribeShareGroupOffsetsRequest, ListOffsetsRequest, ListOffsetsResponse, ShareFetchResponse,
    WriteTxnMarkersResponse,
};

caps! {
    // v5 (KIP-1242): only the request changed; REBOOTSTRAP_REQUIRED is a new error code.
    ApiVersionsResponse => 4;
    // v11 (KIP-1023): a new timestamp value, EARLIEST_PENDING_UPLOAD (-6).
    ListOffsetsRequest => 10;
    ListOffsetsResponse => 10;
    // v3: only the response gained a field (an error message per group).
    DeleteGroupsRequest => 2;
    // v3-v5: only the response gained fields.
    DescribeLogDirsRequest => 4;
    // v2 (KIP-1228): only the request gained a field (each marker's transaction version).
    WriteTxnMarkersResponse => 1;
    // v1 (KIP-1226): only the response gained a field (each share partition's lag).
    DescribeShareGroupOffsetsRequest => 0;
    // v2 (KIP-1206, KIP-1222): only the request gained fields (`share_fetch`).
    ShareFetchResponse => 1;
}

/// A message served at versions above kafka-protocol's maximum, where the layout is the
/// maximum's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capped<T>(pub T);

impl<T> Capped<T> {
    pub fn new(inner: T) -> Capped<T> {
        Capped(inner)
    }
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> Deref for Capped<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Capped<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: Encodable + Cap> Encodable for Capped<T> {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        self.0.encode(buf, version.min(T::CRATE_MAX))
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        self.0.compute_size(version.min(T::CRATE_MAX))
    }
}

impl<T: Decodable + Cap> Decodable for Capped<T> {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        T::decode(buf, version.min(T::CRATE_MAX)).map(Capped)
    }
}

impl<T: HeaderVersion + Cap> HeaderVersion for Capped<T> {
    fn header_version(version: i16) -> i16 {
        T::header_version(version.min(T::CRATE_MAX))
    }
}

/// An API key as the broker names it in errors and metrics: kafka-protocol's, or one of the
/// generated messages' (`generated::API_NAMES`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Api(pub i16);

impl From<kafka_protocol::messages::ApiKey> for Api {
    fn from(k: kafka_protocol::messages::ApiKey) -> Api {
        Api(k as i16)
    }
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Ok(k) = kafka_protocol::messages::ApiKey::try_from(self.0) {
            return write!(f, "{k:?}");
        }
        match generated::API_NAMES.iter().find(|(k, _)| *k == self.0) {
            Some((_, name)) => f.write_str(name),
            None => write!(f, "ApiKey({})", self.0),
        }
    }
}

/// The first version of OffsetCommit and OffsetFetch that names topics by id (KIP-848).
pub const TOPIC_IDS_VERSION: i16 = 10;

/// A kafka-protocol request whose v10 names topics by id, a layout the crate's struct has
/// fields for but does not decode (`offset_commit`, `offset_fetch`): at v10 each topic's
/// `topic_id` is set and its name is empty until the handler resolves it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ById<T>(pub T);

impl<T> ById<T> {
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> Deref for ById<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Unknown tagged fields of a flexible message: kept on decode, written back on encode.
pub type TaggedFields = BTreeMap<i32, Bytes>;

pub(crate) fn decode_tagged<B: ByteBuf>(buf: &mut B) -> Result<TaggedFields> {
    let mut fields = TaggedFields::new();
    let n = wire::uvarint(buf)?;
    for _ in 0..n {
        let tag = wire::uvarint(buf)?;
        let size = wire::uvarint(buf)? as usize;
        let value = buf
            .try_get_bytes(size)
            .map_err(|_| anyhow::anyhow!("tagged field {tag} of {size} bytes is truncated"))?;
        fields.insert(tag as i32, value);
    }
    Ok(fields)
}

pub(crate) fn encode_tagged<B: ByteBufMut>(buf: &mut B, fields: &TaggedFields) {
    wire::put_uvarint(buf, fields.len() as u32);
    for (tag, value) in fields {
        wire::put_uvarint(buf, *tag as u32);
        wire::put_uvarint(buf, value.len() as u32);
        buf.put_slice(value);
    }
}

pub(crate) fn tagged_size(fields: &TaggedFields) -> usize {
    let mut n = wire::uvarint_size(fields.len() as u32);
    for (tag, value) in fields {
        n += wire::uvarint_size(*tag as u32) + wire::uvarint_size(value.len() as u32) + value.len();
    }
    n
}

/// The size of a hand-derived message: it is encoded once to learn it (these messages are
/// small and rare; the hot paths' are kafka-protocol's).
pub(crate) fn encoded_size<T: Encodable>(message: &T, version: i16) -> Result<usize> {
    let mut b = bytes::BytesMut::new();
    message.encode(&mut b, version)?;
    Ok(b.len())
}

pub(crate) fn check_version(name: &str, version: i16, min: i16, max: i16) -> Result<()> {
    if version < min || version > max {
        bail!("{name} v{version} is not in {min}..={max}");
    }
    Ok(())
}
