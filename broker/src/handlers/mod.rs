//! Kafka API handlers: one module per API, each declaring the versions it serves. The table
//! below is the only list of what the broker implements; ApiVersions is derived from it, so
//! the broker never advertises an API or a version it cannot answer.
//!
//! **Order.** Kafka applies a connection's requests one at a time, in arrival order. Strom
//! keeps that order but overlaps the work that may overlap, in two phases per request
//! (Redpanda's `dispatched` / `response` split):
//! - `Ordering::Serial` handlers (`async fn handle(ctx, req) -> XResponse`) start only once
//!   every earlier request of the connection is answered and run whole in the first phase:
//!   exactly Kafka's semantics for groups, transactions, configs and admin APIs.
//! - `Ordering::Pipelined` handlers (Produce, Fetch: `async fn dispatch(ctx, req)`) hand their
//!   ordered effects to the home shards in the first phase — every partition's batch in
//!   request order, through `shard::frontend::dispatch_on`, which starts the work on arrival
//!   in the order it was sent — and return the second phase (await the appends or reads,
//!   encode). The connection starts the next request's first phase only when this one's is
//!   done, so the next request reaches each partition after this one; the second phases
//!   overlap, and responses still leave in request order (`server::connection`).
//!
//! Errors become Kafka error codes at this edge (`errors`), never a panic. What cannot be
//! answered at all (unparseable frame, unknown API, unsupported version of an API other than
//! ApiVersions) is a `FrameError`, and the connection is closed with a log line — what Kafka's
//! own broker does.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod add_raft_voter;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_share_group_offsets;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod broker_logger;
pub mod client_metrics_configs;
pub mod commit_plan;
pub mod config_changes;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_share_group_offsets;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_share_group_offsets;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod errors;
pub mod fetch;
pub mod find_coordinator;
pub mod get_telemetry_subscriptions;
pub mod group_configs;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_config_resources;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod placement;
pub mod produce;
pub mod push_telemetry;
pub mod remove_raft_voter;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod share_acknowledge;
pub mod share_common;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
pub mod streams_group_describe;
pub mod streams_group_heartbeat;
pub mod streams_group_topology_description_update;
pub mod sync_group;
pub mod throttle;
pub mod txn_offset_commit;
pub mod update_features;
pub mod write_txn_markers;

#[cfg(test)]
mod acl_api_table_tests;
#[cfg(test)]
mod acl_tests;
#[cfg(test)]
mod all_versions_tests;
#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod quota_tests;
#[cfg(test)]
mod share_admin_tests;
#[cfg(test)]
mod share_tests;
#[cfg(test)]
mod streams_tests;
#[cfg(test)]
pub mod testing;
#[cfg(test)]
mod txn_coordinator_tests;
#[cfg(test)]
mod txn_tests;

use std::rc::Rc;

use bytes::{BufMut, Bytes, BytesMut};
use futures::future::LocalBoxFuture;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use crate::security::Session;
use crate::shard::ShardState;

pub struct RequestContext {
    pub shard: Rc<ShardState>,
    pub header: RequestHeader,
    /// The connection: listener, client address (`/127.0.0.1`), principal.
    pub session: Rc<Session>,
    /// When the request's first phase started (latency metrics, tracing), and the request's
    /// size (header and body: what the produce quota meters, `quota`).
    pub started: std::time::Instant,
    pub frame_bytes: usize,
    /// The time the request's work has run on this thread, its waits left out: what the
    /// request quota meters (`quota::busy`).
    pub meter: Rc<crate::quota::busy::BusyMeter>,
}

impl RequestContext {
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }
    pub fn ctx(&self) -> &crate::shard::BrokerContext {
        &self.shard.ctx
    }
    /// The authorizer's view for this request (`security::authorizer`); everything is
    /// allowed when none is configured, at the cost of one `None` check.
    pub fn access(&self) -> crate::security::authorizer::Access {
        crate::security::authorizer::Access::new(&self.shard.ctx.authorizer, &self.session)
    }
    /// The request header's `client.id` ("" when there is none), a quota entity.
    pub fn client_id(&self) -> &str {
        self.header.client_id.as_ref().map_or("", |c| c.as_str())
    }

    /// Who the client is, for KIP-714 subscriptions (`telemetry`).
    pub fn client_meta(&self) -> crate::telemetry::ClientMeta {
        let (name, version) = self.session.software();
        crate::telemetry::ClientMeta {
            client_id: self.client_id().to_string(),
            software_name: name.to_string(),
            software_version: version.to_string(),
            source_address: self.session.client_host.trim_start_matches('/').to_string(),
            source_port: self.session.client_port.to_string(),
        }
    }

    /// Records `value` against the client's `kind` quota (principal and client id, `quota`)
    /// and answers the throttle time in ms, 0 within quota.
    pub fn record_quota(&self, kind: crate::quota::QuotaKind, value: f64) -> i64 {
        if !self.ctx().quotas.enabled() {
            return 0;
        }
        let user = self.session.principal().name;
        self.ctx()
            .quotas
            .record(kind, &user, self.client_id(), value, now_ms())
    }

    /// Records `partitions` created or deleted against the client's controller mutation
    /// quota (`quota::QuotaManager::record_mutation`): `Err(throttle ms)` when a strict
    /// request must be refused, else the throttle time.
    pub fn record_mutation(&self, partitions: i32, strict: bool) -> Result<i64, i64> {
        if !self.ctx().quotas.enabled() {
            return Ok(0);
        }
        let user = self.session.principal().name;
        self.ctx().quotas.record_mutation(
            &user,
            self.client_id(),
            f64::from(partitions.max(0)),
            strict,
            now_ms(),
        )
    }

    /// Takes back what `record_quota` recorded (a throttled fetch sends nothing).
    pub fn unrecord_quota(&self, kind: crate::quota::QuotaKind, value: f64) {
        if !self.ctx().quotas.enabled() {
            return;
        }
        let user = self.session.principal().name;
        self.ctx()
            .quotas
            .unrecord(kind, &user, self.client_id(), value, now_ms());
    }

    /// Records the time the request has run on this thread so far against the client's
    /// `request_percentage` quota (Kafka meters request handler time: 100 = one thread's
    /// whole time per second), and answers the throttle time in ms. Time spent waiting —
    /// for an fsync, replication, a coordinator, another shard — is not the thread's and
    /// is not counted (`quota::busy`).
    pub fn record_request_time(&self) -> i64 {
        if matches!(
            ApiKey::try_from(self.header.request_api_key),
            Ok(ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate)
        ) {
            return 0; // answered before authentication: exempt, as Kafka's are
        }
        let percent_seconds = self.meter.busy().as_secs_f64() * 100.0;
        self.record_quota(crate::quota::QuotaKind::Request, percent_seconds)
    }

    /// A throttled answer: the connection reads nothing more from the client for `ms`
    /// (KIP-219; the response itself leaves at once and says `throttle_time_ms`).
    pub fn throttle(&self, ms: i64) -> i32 {
        if ms > 0 {
            self.session.mute_for(ms);
        }
        ms.clamp(0, i32::MAX as i64) as i32
    }

    /// The (host, port) of this node that clients of this connection's listener are given:
    /// Kafka answers Metadata with the listener the request came in on.
    pub fn advertised(&self) -> (String, i32) {
        let l = &self.session.listener;
        (l.advertised_host.clone(), l.advertised_port)
    }
}

/// A response frame (size prefix, header, body) in chunks: a fetch's record data stays in
/// the mapped segments' pages and goes to the socket by a vectored write, with no copy.
#[derive(Debug, Default)]
pub struct ResponseFrame {
    pub chunks: Vec<Bytes>,
}

impl ResponseFrame {
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole frame in one buffer (tests; a copy).
    pub fn to_bytes(&self) -> BytesMut {
        let mut b = BytesMut::with_capacity(self.len());
        for c in &self.chunks {
            b.extend_from_slice(c);
        }
        b
    }
}

impl From<BytesMut> for ResponseFrame {
    fn from(b: BytesMut) -> Self {
        ResponseFrame {
            chunks: vec![b.freeze()],
        }
    }
}

/// A request's answer: a frame, or none (produce with acks=0).
pub type Answer = Result<Option<ResponseFrame>, FrameError>;

/// The second phase of a pipelined request.
pub type Responding = LocalBoxFuture<'static, Answer>;

/// What the first phase of a request leaves: the answer, or the work still to await.
pub enum Dispatched {
    Answered(Answer),
    Responding(Responding),
}

impl Dispatched {
    pub async fn answer(self) -> Answer {
        match self {
            Dispatched::Answered(a) => a,
            Dispatched::Responding(f) => f.await,
        }
    }
}

/// How a request is ordered against the others of its connection (module overview).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ordering {
    Serial,
    Pipelined,
}

#[derive(Debug, Clone, Copy)]
pub struct ApiSpec {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
    pub ordering: Ordering,
}

/// An API whose messages kafka-protocol does not have (`codec::generated`): its key is not
/// one of the crate's `ApiKey`s (`Api` names it). All of them are serial.
#[derive(Debug, Clone, Copy)]
pub struct ExtApiSpec {
    pub key: i16,
    pub min: i16,
    pub max: i16,
    pub header_version: fn(i16) -> i16,
}

pub use crate::codec::Api;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("request frame of {0} bytes is too short for a header")]
    TooShort(usize),
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    #[error("API {0:?} is not implemented")]
    UnsupportedApi(Api),
    #[error("API {key:?} version {version} is not supported (supported {min}..={max})")]
    UnsupportedVersion {
        key: Api,
        version: i16,
        min: i16,
        max: i16,
    },
    #[error("malformed {key:?} v{version} request: {message}")]
    Malformed {
        key: Api,
        version: i16,
        message: String,
    },
    #[error("cannot encode {key:?} v{version} response: {message}")]
    Encode {
        key: Api,
        version: i16,
        message: String,
    },
}

/// Encodes a response frame: size prefix, response header (version per API), body.
pub fn encode_response<R: Encodable + HeaderVersion>(
    key: impl Into<Api>,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Result<BytesMut, FrameError> {
    let key = key.into();
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
    ($( $key:ident => $module:ident $(, $pipelined:ident)? ;)*) => {
        /// Every API the broker serves, with its version range and ordering.
        pub static API_TABLE: &[ApiSpec] = &[
            $( ApiSpec {
                key: ApiKey::$key,
                min: $module::MIN_VERSION,
                max: $module::MAX_VERSION,
                ordering: api_table!(@ordering $($pipelined)?),
            }, )*
        ];

        async fn dispatch(ctx: RequestContext, key: ApiKey, mut body: Bytes) -> Dispatched {
            let version = ctx.version();
            match key {
                $( ApiKey::$key => {
                    let req = match decode_request(key.into(), version, &mut body) {
                        Ok(req) => req,
                        Err(e) => return Dispatched::Answered(Err(e)),
                    };
                    api_table!(@call $module, ctx, key, req $(, $pipelined)?)
                } )*
                _ => Dispatched::Answered(Err(FrameError::UnsupportedApi(key.into()))),
            }
        }
    };
    (@ordering pipelined) => { Ordering::Pipelined };
    (@ordering) => { Ordering::Serial };
    (@call $module:ident, $ctx:ident, $key:ident, $req:ident, pipelined) => {
        Dispatched::Responding($module::dispatch(Rc::new($ctx), $req).await)
    };
    (@call $module:ident, $ctx:ident, $key:ident, $req:ident) => {{
        let resp = $module::handle(&$ctx, $req).await;
        answer_serial(&$ctx, $key.into(), resp)
    }};
}

api_table! {
    Produce => produce, pipelined;
    Fetch => fetch, pipelined;
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
    UpdateFeatures => update_features;
    DescribeTopicPartitions => describe_topic_partitions;
    DescribeQuorum => describe_quorum;
    AddRaftVoter => add_raft_voter;
    RemoveRaftVoter => remove_raft_voter;
    ElectLeaders => elect_leaders;
    AlterPartitionReassignments => alter_partition_reassignments;
    ListPartitionReassignments => list_partition_reassignments;
    SaslHandshake => sasl_handshake;
    SaslAuthenticate => sasl_authenticate;
    DescribeUserScramCredentials => describe_user_scram_credentials;
    AlterUserScramCredentials => alter_user_scram_credentials;
    DescribeAcls => describe_acls;
    CreateAcls => create_acls;
    DeleteAcls => delete_acls;
    DescribeClientQuotas => describe_client_quotas;
    AlterClientQuotas => alter_client_quotas;
    ShareGroupHeartbeat => share_group_heartbeat;
    ShareGroupDescribe => share_group_describe;
    ShareFetch => share_fetch;
    ShareAcknowledge => share_acknowledge;
    DescribeShareGroupOffsets => describe_share_group_offsets;
    AlterShareGroupOffsets => alter_share_group_offsets;
    DeleteShareGroupOffsets => delete_share_group_offsets;
    GetTelemetrySubscriptions => get_telemetry_subscriptions;
    PushTelemetry => push_telemetry;
    ListConfigResources => list_config_resources;
}

/// A request body, or the frame error that closes the connection.
fn decode_request<R: Decodable>(key: Api, version: i16, body: &mut Bytes) -> Result<R, FrameError> {
    R::decode(body, version).map_err(|e| FrameError::Malformed {
        key,
        version,
        message: format!("{e:#}"),
    })
}

/// A serial handler's response, with the request quota's throttle time, as its frame.
fn answer_serial<R: Encodable + HeaderVersion + throttle::Throttled>(
    ctx: &RequestContext,
    key: Api,
    mut resp: R,
) -> Dispatched {
    let throttle_ms = ctx.throttle(ctx.record_request_time());
    resp.raise_throttle_time_ms(throttle_ms);
    let (version, correlation_id) = (ctx.version(), ctx.header.correlation_id);
    Dispatched::Answered(
        encode_response(key, version, correlation_id, &resp).map(|b| Some(b.into())),
    )
}

/// The serial APIs whose messages are generated from Kafka's schemas (`codec::generated`):
/// `handler module, request type;`. Each module has `handle(ctx, req) -> response`.
macro_rules! ext_api_table {
    ($( $module:ident, $req:ty ;)*) => {
        /// Every API of `codec::generated` the broker serves.
        pub static EXT_API_TABLE: &[ExtApiSpec] = &[
            $( ExtApiSpec {
                key: $module::API_KEY,
                min: $module::MIN_VERSION,
                max: $module::MAX_VERSION,
                header_version: <$req as HeaderVersion>::header_version,
            }, )*
        ];

        async fn dispatch_ext(ctx: RequestContext, key: i16, mut body: Bytes) -> Dispatched {
            let version = ctx.version();
            $( if key == $module::API_KEY {
                let req: $req = match decode_request(Api(key), version, &mut body) {
                    Ok(req) => req,
                    Err(e) => return Dispatched::Answered(Err(e)),
                };
                let resp = $module::handle(&ctx, req).await;
                return answer_serial(&ctx, Api(key), resp);
            } )*
            Dispatched::Answered(Err(FrameError::UnknownApi(key)))
        }
    };
}

ext_api_table! {
    streams_group_heartbeat,
        crate::codec::generated::streams_group_heartbeat_request::StreamsGroupHeartbeatRequest;
    streams_group_describe,
        crate::codec::generated::streams_group_describe_request::StreamsGroupDescribeRequest;
    streams_group_topology_description_update,
        crate::codec::generated::streams_group_topology_description_update_request::StreamsGroupTopologyDescriptionUpdateRequest;
}

/// APIs only a cluster serves: Kafka's brokers forward them to the KRaft controller, and a
/// single node has no replicas to move and no voters to change. A single node neither
/// advertises them in ApiVersions nor answers them (an unsupported API), as Kafka advertises
/// only what it serves.
pub const CLUSTERED_ONLY: &[ApiKey] = &[
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::AddRaftVoter,
    ApiKey::RemoveRaftVoter,
];

pub fn spec(key: ApiKey) -> Option<&'static ApiSpec> {
    API_TABLE.iter().find(|s| s.key == key)
}

pub fn ext_spec(key: i16) -> Option<&'static ExtApiSpec> {
    EXT_API_TABLE.iter().find(|s| s.key == key)
}

/// How the connection orders a request it has read (its API key is the frame's first two
/// bytes); `Serial` for anything it cannot parse (the first phase answers the error).
pub fn ordering_of(frame: &[u8]) -> Ordering {
    frame
        .get(..2)
        .map(|k| i16::from_be_bytes([k[0], k[1]]))
        .and_then(|k| ApiKey::try_from(k).ok())
        .and_then(spec)
        .map_or(Ordering::Serial, |s| s.ordering)
}

/// The first phase of one request frame (without its size prefix): a serial request runs
/// whole, a pipelined one hands its work to the home shards and returns the rest.
pub async fn dispatch_frame(
    shard: Rc<ShardState>,
    session: Rc<Session>,
    mut frame: Bytes,
) -> Dispatched {
    if frame.len() < 8 {
        return Dispatched::Answered(Err(FrameError::TooShort(frame.len())));
    }
    let frame_len = frame.len();
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api = Api(raw_key);
    let known = ApiKey::try_from(raw_key).ok();
    let (min, max, header_version) = match known {
        Some(key) if CLUSTERED_ONLY.contains(&key) && shard.ctx.cluster.get().is_none() => {
            return Dispatched::Answered(Err(FrameError::UnsupportedApi(api)));
        }
        Some(key) => match spec(key) {
            Some(s) => (s.min, s.max, key.request_header_version(version)),
            None => return Dispatched::Answered(Err(FrameError::UnsupportedApi(api))),
        },
        None => match ext_spec(raw_key) {
            Some(s) => (s.min, s.max, (s.header_version)(version)),
            None => return Dispatched::Answered(Err(FrameError::UnknownApi(raw_key))),
        },
    };
    if version < min || version > max {
        if known == Some(ApiKey::ApiVersions) {
            // KIP-511: answer in v0 with UNSUPPORTED_VERSION and our ranges, so the client can
            // pick a version it shares with us.
            let clustered = shard.ctx.cluster.get().is_some();
            let answer = api_versions::unsupported_version_response(correlation_id, clustered);
            return Dispatched::Answered(answer.map(|b| Some(b.into())));
        }
        return Dispatched::Answered(Err(FrameError::UnsupportedVersion {
            key: api,
            version,
            min,
            max,
        }));
    }
    let header = match RequestHeader::decode(&mut frame, header_version) {
        Ok(h) => h,
        Err(e) => {
            return Dispatched::Answered(Err(FrameError::Malformed {
                key: api,
                version,
                message: format!("header: {e:#}"),
            }))
        }
    };
    let started = std::time::Instant::now();
    let meter = Rc::new(crate::quota::busy::BusyMeter::default());
    let ctx = RequestContext {
        shard: shard.clone(),
        header,
        session,
        started,
        frame_bytes: frame_len,
        meter: meter.clone(),
    };
    let observe = move |r: &Answer| {
        shard
            .metrics
            .observe_request(api, version, started.elapsed().as_secs_f64());
        if let Err(e) = r {
            tracing::debug!(error = %e, "request failed");
        }
    };
    let dispatched = match known {
        Some(key) => meter.run(dispatch(ctx, key, frame)).await,
        None => meter.run(dispatch_ext(ctx, raw_key, frame)).await,
    };
    match dispatched {
        Dispatched::Answered(a) => {
            observe(&a);
            Dispatched::Answered(a)
        }
        Dispatched::Responding(rest) => Dispatched::Responding(Box::pin(async move {
            let a = meter.run(rest).await;
            observe(&a);
            a
        })),
    }
}

/// Both phases of one request frame, in one call (tests, and callers that do not pipeline).
pub async fn handle_frame(shard: Rc<ShardState>, session: Rc<Session>, frame: Bytes) -> Answer {
    dispatch_frame(shard, session, frame).await.answer().await
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    crate::now_ms()
}
