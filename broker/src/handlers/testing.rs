//! In-process harness for handler tests: one shard on the test thread, requests encoded and
//! responses decoded through the real wire codec, no sockets.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use tokio::sync::mpsc;

use crate::config::BrokerConfig;
use crate::metadata::catalog::CatalogHandle;
use crate::shard::{self, BrokerContext, ShardState};

pub struct Harness {
    rt: tokio::runtime::Runtime,
    local: tokio::task::LocalSet,
    pub state: Rc<ShardState>,
    _dir: tempfile::TempDir,
    correlation: RefCell<i32>,
    /// The principal requests are sent as (`as_user`); anonymous by default.
    principal: RefCell<crate::security::Principal>,
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    pub fn new() -> Harness {
        Self::with_config(BrokerConfig::default())
    }

    pub fn with_config(mut config: BrokerConfig) -> Harness {
        let dir = tempfile::tempdir().expect("tempdir");
        config.data_dir = dir.path().to_path_buf();
        config.shards = 1;
        config.io_backend = "sync".into();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let local = tokio::task::LocalSet::new();
        let (tx, mut rx) = mpsc::channel::<shard::ShardMessage>(16);
        let acls: Arc<dyn crate::metadata::acls::AclStore> =
            Arc::new(crate::metadata::acls::FileAclStore::open(dir.path()).expect("acls"));
        let ctx = Arc::new(BrokerContext {
            cluster: Default::default(),
            remote: None,
            catalog: CatalogHandle::open(dir.path(), config.clone(), Default::default())
                .expect("catalog"),
            producer_ids: crate::metadata::producer_ids::ProducerIdAllocator::open(dir.path())
                .expect("producer ids"),
            features: crate::metadata::features::FeaturesHandle::open(dir.path(), config.node_id)
                .expect("features"),
            cluster_id: "test-cluster".into(),
            shard_senders: vec![tx],
            started_ms: crate::now_ms(),
            steering: Default::default(),
            schema_view: Default::default(),
            cleaner_checkpoints: Arc::new(crate::shard::cleaner_checkpoints::Checkpoints::load(
                dir.path(),
            )),
            loggers: Arc::new(crate::logging::Loggers::detached("info")),
            group_configs: crate::metadata::group_configs::GroupConfigsHandle::open(dir.path())
                .expect("group configs"),
            telemetry: crate::telemetry::ClientTelemetry::open(dir.path(), "").expect("telemetry"),
            credentials: Arc::new(
                crate::metadata::scram::FileCredentialStore::open(dir.path()).expect("credentials"),
            ),
            oauthbearer: None,
            otel: None,
            authorizer: BrokerContext::authorizer_for(&config, &acls),
            quotas: BrokerContext::quotas_for(&config, dir.path()).expect("quotas"),
            acls,
            config,
        });
        let state = local.block_on(&rt, async {
            let io = storage::IoBackend::new(storage::IoBackendKind::Sync).expect("io");
            let state = Rc::new(ShardState::new(0, ctx, io));
            shard::set_current(Some(state.clone()));
            let s = state.clone();
            tokio::task::spawn_local(async move {
                while let Some(m) = rx.recv().await {
                    m(s.clone());
                }
            });
            state
        });
        Harness {
            rt,
            local,
            state,
            _dir: dir,
            correlation: RefCell::new(0),
            principal: RefCell::new(crate::security::Principal::anonymous()),
        }
    }

    /// A session on the config's first listener as the current principal (anonymous, as a
    /// PLAINTEXT client has, unless `as_user` said otherwise).
    pub fn session(&self) -> Rc<crate::security::Session> {
        let s = crate::security::Session::local(&self.state.ctx.config);
        s.set_principal(self.principal.borrow().clone());
        Rc::new(s)
    }

    /// Sends the next requests as `User:name`.
    pub fn as_user(&self, name: &str) -> &Self {
        *self.principal.borrow_mut() = crate::security::Principal::user(name);
        self
    }

    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.local.block_on(&self.rt, f)
    }

    /// A request's context as `dispatch_frame` makes it, for calling a handler (or a part of
    /// one) directly.
    pub fn request_context(&self, key: ApiKey, version: i16) -> Rc<super::RequestContext> {
        Rc::new(super::RequestContext {
            shard: self.state.clone(),
            header: RequestHeader::default()
                .with_request_api_key(key as i16)
                .with_request_api_version(version),
            session: self.session(),
            started: std::time::Instant::now(),
            frame_bytes: 0,
            meter: Default::default(),
        })
    }

    pub fn catalog_has(&self, topic: &str) -> bool {
        self.state.ctx.catalog.snapshot().get(topic).is_some()
    }

    /// Sends a raw frame (header fields + body bytes) and returns the raw response frame.
    pub fn call_raw_frame(
        &self,
        key: ApiKey,
        version: i16,
        correlation: i32,
        body: &[u8],
    ) -> Option<BytesMut> {
        let mut frame = BytesMut::new();
        frame.put_i16(key as i16);
        frame.put_i16(version);
        frame.put_i32(correlation);
        frame.put_i16(-1); // null client id
        if version >= 3 && key == ApiKey::ApiVersions {
            frame.put_u8(0); // empty tagged fields
        }
        frame.put_slice(body);
        self.block_on(super::handle_frame(
            self.state.clone(),
            self.session(),
            frame.freeze(),
        ))
        .expect("frame handled")
        .map(|f| f.to_bytes())
    }

    /// Encodes `req` at `version`, runs it through `handle_frame`, decodes the response.
    pub fn call<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &self,
        key: ApiKey,
        version: i16,
        req: Req,
    ) -> Resp {
        self.try_call(key, version, req).expect("a response")
    }

    pub fn try_call<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &self,
        key: ApiKey,
        version: i16,
        req: Req,
    ) -> Option<Resp> {
        self.call_key(
            key as i16,
            key.request_header_version(version),
            version,
            req,
        )
    }

    /// `call` for an API of `codec::generated` (its key is not one of the crate's).
    pub fn call_ext<Req: Encodable + HeaderVersion, Resp: Decodable + HeaderVersion>(
        &self,
        key: i16,
        version: i16,
        req: Req,
    ) -> Resp {
        self.call_key(key, Req::header_version(version), version, req)
            .expect("a response")
    }

    fn call_key<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &self,
        key: i16,
        header_version: i16,
        version: i16,
        req: Req,
    ) -> Option<Resp> {
        let corr = {
            let mut c = self.correlation.borrow_mut();
            *c += 1;
            *c
        };
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key)
            .with_request_api_version(version)
            .with_correlation_id(corr)
            .encode(&mut frame, header_version)
            .expect("header encodes");
        req.encode(&mut frame, version).expect("request encodes");
        let resp = self
            .block_on(super::handle_frame(
                self.state.clone(),
                self.session(),
                frame.freeze(),
            ))
            .expect("frame handled")?
            .to_bytes();
        let (got, body) = decode_response::<Resp>(resp, version, Resp::header_version(version));
        assert_eq!(got, corr, "correlation id echoed");
        Some(body)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        shard::set_current(None);
    }
}

/// One request through both phases on `shard`, from a task of the test's own (a harness
/// call blocks; this one can run beside others, e.g. a long poll and the produce it waits
/// for).
pub async fn roundtrip<Req: Encodable, Resp: Decodable + HeaderVersion>(
    shard: Rc<ShardState>,
    key: ApiKey,
    version: i16,
    req: Req,
) -> Resp {
    let mut frame = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .encode(&mut frame, key.request_header_version(version))
        .expect("header encodes");
    req.encode(&mut frame, version).expect("request encodes");
    let session = Rc::new(crate::security::Session::local(&shard.ctx.config));
    let resp = super::handle_frame(shard, session, frame.freeze())
        .await
        .expect("frame handled")
        .expect("a response")
        .to_bytes();
    decode_response::<Resp>(resp, version, Resp::header_version(version)).1
}

/// Splits a response frame into correlation id and decoded body.
pub fn decode_response<R: Decodable>(
    frame: BytesMut,
    version: i16,
    header_version: i16,
) -> (i32, R) {
    let mut b: Bytes = frame.freeze();
    let size = i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
    assert_eq!(size + 4, b.len(), "size prefix matches");
    let _ = bytes::Buf::get_i32(&mut b);
    let header = ResponseHeader::decode(&mut b, header_version).expect("response header");
    let body = R::decode(&mut b, version).expect("response body");
    (header.correlation_id, body)
}

/// A batch as a client sends it (`producer_id` -1 = plain), keys `k<i>`, values `v<i>`.
pub fn batch(n: usize, producer_id: i64, epoch: i16, first_seq: i32) -> Bytes {
    crate::test_support::TestBatch::new(n)
        .idempotent(producer_id, epoch, first_seq)
        .encode()
}

/// A batch of a transactional producer (the transactional attribute set).
pub fn txn_batch(n: usize, producer_id: i64, epoch: i16, first_seq: i32) -> Bytes {
    crate::test_support::TestBatch::new(n)
        .transactional(producer_id, epoch, first_seq)
        .encode()
}

pub fn produce_req(topic: &str, partition: i32, acks: i16, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

pub fn create(h: &Harness, topic: &str, partitions: i32) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let req = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(topic.into())))
        .with_num_partitions(partitions)
        .with_replication_factor(1)]);
    let resp: CreateTopicsResponse = h.call(ApiKey::CreateTopics, 7, req);
    assert_eq!(resp.topics[0].error_code, 0);
}

/// CreateTopics v7 of one single-partition topic with config overrides; the topic's result.
pub fn create_topic_with(
    h: &Harness,
    topic: &str,
    configs: &[(&str, &str)],
) -> kafka_protocol::messages::create_topics_response::CreatableTopicResult {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(k.to_string()))
                .with_value(Some(StrBytes::from_string(v.to_string())))
        })
        .collect();
    let req = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(topic.into())))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(configs)]);
    let resp: CreateTopicsResponse = h.call(ApiKey::CreateTopics, 7, req);
    resp.topics.into_iter().next().expect("one topic")
}

/// Fetch v12 of partition 0 of `topic` from `offset`, sessionless, no long poll.
pub fn fetch_v12(h: &Harness, topic: &str, offset: i64) -> kafka_protocol::messages::FetchResponse {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::FetchRequest;
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(50 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(10 << 20)])]);
    h.call(ApiKey::Fetch, 12, req)
}

/// Fetch v12 of partition 0 of `topic` from `offset`: the records bytes (no long poll).
pub fn fetch_records(h: &Harness, topic: &str, offset: i64) -> Bytes {
    let resp = fetch_v12(h, topic, offset);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch of {topic}");
    p.records.clone().unwrap_or_default()
}

/// IncrementalAlterConfigs (v1) of one resource: (name, op id, value) per change; answers
/// the resource's (error code, message).
pub fn incremental_alter(
    h: &Harness,
    kind: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> (i16, String) {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    };
    let s = |v: &str| StrBytes::from_string(v.into());
    let configs = ops
        .iter()
        .map(|(n, op, v)| {
            AlterableConfig::default()
                .with_name(s(n))
                .with_config_operation(*op)
                .with_value(v.map(s))
        })
        .collect();
    let req = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(name))
            .with_configs(configs)]);
    let r: IncrementalAlterConfigsResponse = h.call(ApiKey::IncrementalAlterConfigs, 1, req);
    let r = &r.responses[0];
    (
        r.error_code,
        r.error_message.as_deref().unwrap_or("").to_string(),
    )
}
