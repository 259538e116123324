//! Kafka API handlers: one module per API, each declaring the versions it serves. The table
//! below is the only list of what the broker implements; ApiVersions is derived from it, so
//! the broker never advertises an API or a version it cannot answer.
//!
//! A handler is `async fn handle(ctx: &RequestContext, req: XRequest) -> XResponse`; errors
//! become Kafka error codes inside the handler (one mapping function per handler), never a
//! panic. What cannot be answered at all (unparseable frame, unknown API, unsupported version
//! of an API other than ApiVersions) is a `FrameError`, and the connection is closed with a
//! log line — what Kafka's own broker does.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_configs;
pub mod api_versions;
pub mod config_changes;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_transactions;
pub mod end_txn;
pub mod errors;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

#[cfg(test)]
mod all_versions_tests;
#[cfg(test)]
mod group_tests;
#[cfg(test)]
pub mod testing;
#[cfg(test)]
mod txn_coordinator_tests;
#[cfg(test)]
mod txn_tests;

use std::rc::Rc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use crate::shard::ShardState;

pub struct RequestContext {
    pub shard: Rc<ShardState>,
    pub header: RequestHeader,
    /// The client's address as Kafka reports it in group descriptions (`/127.0.0.1`).
    pub client_host: Rc<str>,
}

impl RequestContext {
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }
    pub fn ctx(&self) -> &crate::shard::BrokerContext {
        &self.shard.ctx
    }
}

#[derive(Debug, Clone, Copy)]
pub struct ApiSpec {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("request frame of {0} bytes is too short for a header")]
    TooShort(usize),
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    #[error("API {0:?} is not implemented")]
    UnsupportedApi(ApiKey),
    #[error("API {key:?} version {version} is not supported (supported {min}..={max})")]
    UnsupportedVersion {
        key: ApiKey,
        version: i16,
        min: i16,
        max: i16,
    },
    #[error("malformed {key:?} v{version} request: {message}")]
    Malformed {
        key: ApiKey,
        version: i16,
        message: String,
    },
    #[error("cannot encode {key:?} v{version} response: {message}")]
    Encode {
        key: ApiKey,
        version: i16,
        message: String,
    },
}

/// Encodes a response frame: size prefix, response header (version per API), body.
pub fn encode_response<R: Encodable + HeaderVersion>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Result<BytesMut, FrameError> {
    let header_version = R::header_version(version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let enc_err = |e: anyhow::Error| FrameError::Encode {
        key,
        version,
        message: format!("{e:#}"),
    };
    let size = header.compute_size(header_version).map_err(enc_err)?
        + body.compute_size(version).map_err(enc_err)?;
    let mut buf = BytesMut::with_capacity(4 + size);
    buf.put_i32(size as i32);
    header.encode(&mut buf, header_version).map_err(enc_err)?;
    body.encode(&mut buf, version).map_err(enc_err)?;
    Ok(buf)
}

macro_rules! api_table {
    ($( $key:ident => $module:ident $(, silent_when $silent:path)? ;)*) => {
        /// Every API the broker serves, with its version range.
        pub static API_TABLE: &[ApiSpec] = &[
            $( ApiSpec { key: ApiKey::$key, min: $module::MIN_VERSION, max: $module::MAX_VERSION }, )*
        ];

        async fn dispatch(
            ctx: RequestContext,
            key: ApiKey,
            mut body: Bytes,
        ) -> Result<Option<BytesMut>, FrameError> {
            let version = ctx.version();
            let correlation_id = ctx.header.correlation_id;
            match key {
                $( ApiKey::$key => {
                    let req = Decodable::decode(&mut body, version).map_err(|e| FrameError::Malformed {
                        key,
                        version,
                        message: format!("{e:#}"),
                    })?;
                    let silent = false $( || $silent(&req) )?;
                    let resp = $module::handle(&ctx, req).await;
                    if silent {
                        return Ok(None);
                    }
                    encode_response(key, version, correlation_id, &resp).map(Some)
                } )*
                _ => Err(FrameError::UnsupportedApi(key)),
            }
        }
    };
}

api_table! {
    Produce => produce, silent_when produce::no_response;
    Fetch => fetch;
    ListOffsets => list_offsets;
    Metadata => metadata;
    ApiVersions => api_versions;
    CreateTopics => create_topics;
    DeleteTopics => delete_topics;
    InitProducerId => init_producer_id;
    DescribeConfigs => describe_configs;
    AlterConfigs => alter_configs;
    IncrementalAlterConfigs => incremental_alter_configs;
    DescribeLogDirs => describe_log_dirs;
    CreatePartitions => create_partitions;
    DescribeCluster => describe_cluster;
    FindCoordinator => find_coordinator;
    JoinGroup => join_group;
    Heartbeat => heartbeat;
    LeaveGroup => leave_group;
    SyncGroup => sync_group;
    OffsetCommit => offset_commit;
    OffsetFetch => offset_fetch;
    OffsetDelete => offset_delete;
    ListGroups => list_groups;
    DescribeGroups => describe_groups;
    DeleteGroups => delete_groups;
    ConsumerGroupHeartbeat => consumer_group_heartbeat;
    ConsumerGroupDescribe => consumer_group_describe;
    DeleteRecords => delete_records;
    OffsetForLeaderEpoch => offset_for_leader_epoch;
    AddPartitionsToTxn => add_partitions_to_txn;
    AddOffsetsToTxn => add_offsets_to_txn;
    EndTxn => end_txn;
    TxnOffsetCommit => txn_offset_commit;
    DescribeTransactions => describe_transactions;
    ListTransactions => list_transactions;
    WriteTxnMarkers => write_txn_markers;
    DescribeProducers => describe_producers;
}

pub fn spec(key: ApiKey) -> Option<&'static ApiSpec> {
    API_TABLE.iter().find(|s| s.key == key)
}

/// Handles one request frame (without its size prefix) and returns the response frame, or
/// `None` when the request gets no response (produce with acks=0).
pub async fn handle_frame(
    shard: Rc<ShardState>,
    client_host: Rc<str>,
    mut frame: Bytes,
) -> Result<Option<BytesMut>, FrameError> {
    if frame.len() < 8 {
        return Err(FrameError::TooShort(frame.len()));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let key = ApiKey::try_from(raw_key).map_err(|_| FrameError::UnknownApi(raw_key))?;
    let spec = spec(key).ok_or(FrameError::UnsupportedApi(key))?;
    if version < spec.min || version > spec.max {
        if key == ApiKey::ApiVersions {
            // KIP-511: answer in v0 with UNSUPPORTED_VERSION and our ranges, so the client can
            // pick a version it shares with us.
            return api_versions::unsupported_version_response(correlation_id).map(Some);
        }
        return Err(FrameError::UnsupportedVersion {
            key,
            version,
            min: spec.min,
            max: spec.max,
        });
    }
    let header_version = key.request_header_version(version);
    let header =
        RequestHeader::decode(&mut frame, header_version).map_err(|e| FrameError::Malformed {
            key,
            version,
            message: format!("header: {e:#}"),
        })?;
    let started = std::time::Instant::now();
    let ctx = RequestContext {
        shard: shard.clone(),
        header,
        client_host,
    };
    let r = dispatch(ctx, key, frame.clone()).await;
    shard
        .metrics
        .observe_request(key, version, started.elapsed().as_secs_f64());
    if let Err(e) = &r {
        tracing::debug!(error = %e, remaining = frame.remaining(), "request failed");
    }
    r
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    crate::now_ms()
}
