//! An HTTP proxy in the shape of Confluent REST Proxy on the admin port (docs/http-proxy.md):
//! produce and consume without a Kafka client.
//!
//! As Confluent does today, cluster, topic, partition and produce requests are its **v3**
//! API (`/v3/clusters/…`, `application/json`), consumers its **v2** API
//! (`/consumers/{group}/instances/{name}/…`, `application/vnd.kafka.v2+json`): v3 has no
//! consumers.
//!
//! Data flow: an axum handler here → a Kafka request handled in this process by the broker's
//! own handlers on a shard (`cli::client::Client::local_as`, as the console does), as the
//! request's principal, so the ACLs, quotas, topic settings and error codes are the ones a
//! Kafka client gets, and no loopback socket or second client library is involved. Kafka
//! error codes become Confluent's status and `error_code` at one edge (`error`).
//!
//! - `topics`: `/v3/clusters`, topics (list, create, delete), partitions.
//! - `produce`: `/v3/clusters/{c}/topics/{t}/records`, streaming produce.
//! - `formats`: JSON / BINARY / STRING and the registry's AVRO / JSONSCHEMA to and from bytes.
//! - `consumers`, `consumer_records`, `consumer_group`: v2 consumer instances, each a real
//!   member of a classic Kafka consumer group (JoinGroup/SyncGroup/Heartbeat, range
//!   assignment), so `kafka-consumer-groups --describe` lists it and a Kafka client sees its
//!   commits.

pub mod consumer_group;
pub mod consumer_records;
pub mod consumers;
pub mod error;
pub mod formats;
pub mod produce;
pub mod time;
pub mod topics;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::cli::client::Client;
use crate::security::Principal;
use crate::shard::BrokerContext;
use error::{ProxyError, ProxyResult};

/// How long one proxied Kafka request may wait on the broker.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Proxy requests handled at once (long polls and produce streams stay open a while, so
/// they are counted apart from the admin port's other requests).
pub const MAX_CONCURRENT: usize = 64;
/// The largest body of a request that is not a streaming produce.
pub const MAX_BODY: usize = 1024 * 1024;

/// The v2 API's media types (`Versions` in kafka-rest).
pub const V2_JSON: &str = "application/vnd.kafka.v2+json";

#[derive(Clone)]
pub struct Proxy {
    ctx: Arc<BrokerContext>,
    /// The schema registry, once it runs (it starts after the admin port).
    registry: Registry,
    consumers: Arc<consumers::Instances>,
    /// Produce streams in flight: a stream outlives its handler (the body is read and
    /// answered by a task), so the request limit alone does not bound them.
    produce_streams: Arc<tokio::sync::Semaphore>,
}

impl Proxy {
    /// A client whose requests run as the caller.
    fn client(&self, who: &Caller) -> Client {
        Client::local_as(self.ctx.clone(), TIMEOUT, who.0.clone())
    }
}

/// The principal a request runs as: the admin port's authenticated one (`admin_auth`), else
/// HTTP Basic credentials checked against SCRAM as the console checks them, else
/// User:ANONYMOUS (what a PLAINTEXT Kafka connection is).
#[derive(Clone)]
pub struct Caller(pub Principal);

impl FromRequestParts<Proxy> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, p: &Proxy) -> Result<Self, Self::Rejection> {
        if let Some(a) = parts
            .extensions
            .get::<crate::server::admin_auth::Authenticated>()
        {
            return Ok(Caller(a.0.clone()));
        }
        match crate::server::console::auth::caller(&p.ctx, &parts.headers) {
            Ok(user) => Ok(Caller(crate::server::console::auth::principal(
                user.as_deref(),
            ))),
            Err(e) => Err(ProxyError::Unauthenticated(e.to_string()).into_response()),
        }
    }
}

/// Where the schema registry's service is published when it starts (`server` creates it,
/// the registry fills it): handed down, so the broker context needs no registry field.
pub type Registry = Arc<std::sync::OnceLock<Arc<crate::schema_registry::Service>>>;

pub fn router(
    ctx: Arc<BrokerContext>,
    registry: Registry,
    shutdown: watch::Receiver<bool>,
) -> Router {
    let consumers = consumers::Instances::new(shutdown);
    let proxy = Proxy {
        ctx,
        registry,
        consumers,
        produce_streams: Arc::new(tokio::sync::Semaphore::new(produce::MAX_STREAMS)),
    };
    Router::new()
        .route("/v3/clusters", get(topics::clusters))
        .route("/v3/clusters/{cluster}", get(topics::cluster))
        .route(
            "/v3/clusters/{cluster}/topics",
            get(topics::list).post(topics::create),
        )
        .route(
            "/v3/clusters/{cluster}/topics/{topic}",
            get(topics::get_topic).delete(topics::delete),
        )
        .route(
            "/v3/clusters/{cluster}/topics/{topic}/partitions",
            get(topics::partitions),
        )
        .route(
            "/v3/clusters/{cluster}/topics/{topic}/partitions/{partition}",
            get(topics::partition),
        )
        .route(
            "/v3/clusters/{cluster}/topics/{topic}/records",
            post(produce_route),
        )
        .route("/consumers/{group}", post(consumers::create))
        .route(
            "/consumers/{group}/instances/{name}",
            axum::routing::delete(consumers::delete),
        )
        .route(
            "/consumers/{group}/instances/{name}/subscription",
            post(consumers::subscribe)
                .get(consumers::subscription)
                .delete(consumers::unsubscribe),
        )
        .route(
            "/consumers/{group}/instances/{name}/assignments",
            post(consumers::assign).get(consumers::assignments),
        )
        .route(
            "/consumers/{group}/instances/{name}/positions",
            post(consumers::seek),
        )
        .route(
            "/consumers/{group}/instances/{name}/positions/beginning",
            post(consumers::seek_beginning),
        )
        .route(
            "/consumers/{group}/instances/{name}/positions/end",
            post(consumers::seek_end),
        )
        .route(
            "/consumers/{group}/instances/{name}/records",
            get(consumer_records::records),
        )
        .route(
            "/consumers/{group}/instances/{name}/offsets",
            post(consumers::commit).get(consumers::committed),
        )
        .with_state(proxy)
}

async fn produce_route(
    State(p): State<Proxy>,
    who: Caller,
    Path((cluster, topic)): Path<(String, String)>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    produce::produce(p, who, cluster, topic, parts.headers, body).await
}

/// Whether the request's Content-Type is one of `accepted` (parameters such as charset
/// ignored).
pub fn content_type_is(headers: &HeaderMap, accepted: &[&str]) -> bool {
    let Some(ct) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = ct.split(';').next().unwrap_or("").trim();
    accepted.iter().any(|a| essence.eq_ignore_ascii_case(a))
}

/// The body as `T`: the content type checked (415), the size capped (413), the JSON parsed
/// (400 as Jackson's parse errors are in Confluent's proxy).
pub async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    accepted: &[&str],
) -> ProxyResult<T> {
    if !content_type_is(headers, accepted) {
        return Err(ProxyError::UnsupportedMediaType);
    }
    let bytes = body_bytes(body).await?;
    serde_json::from_slice(&bytes).map_err(|e| ProxyError::BadRequest(e.to_string()))
}

/// A body that may be left out (only whitespace: `None`), else `T`; its content type is
/// checked against `accepted` when given (413 / 415 / 400 as `read_json`).
pub async fn read_optional_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    accepted: Option<&[&str]>,
) -> ProxyResult<Option<T>> {
    let bytes = body_bytes(body).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if accepted.is_some_and(|a| !content_type_is(headers, a)) {
        return Err(ProxyError::UnsupportedMediaType);
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| ProxyError::BadRequest(e.to_string()))
}

async fn body_bytes(body: Body) -> ProxyResult<bytes::Bytes> {
    axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|_| ProxyError::TooLarge(MAX_BODY))
}

/// The media types a v2 consumer request body may have.
pub const V2_BODY: &[&str] = &[V2_JSON, "application/vnd.kafka+json", "application/json"];

/// A JSON answer with `content_type`.
pub fn json_response(
    status: axum::http::StatusCode,
    content_type: &'static str,
    v: &serde_json::Value,
) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, content_type)],
        serde_json::to_vec(v).unwrap_or_default(),
    )
        .into_response()
}
