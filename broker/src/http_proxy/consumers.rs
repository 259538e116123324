//! v2 consumer instances (`/consumers/{group}/instances/{name}/…`), Confluent REST Proxy's
//! consumer API: create, subscribe or assign, seek, poll records, commit, delete.
//!
//! Each instance is a member of a real classic consumer group (`consumer_group`), owned by
//! the principal that created it (another principal is told it does not exist). Its
//! position per partition lives here; a partition without one starts at the group's
//! committed offset, else at `auto.offset.reset`. A task per instance heartbeats every
//! `HEARTBEAT_INTERVAL`, rejoins when the group rebalances (so a second instance's join is
//! not held up until this one polls) and removes the instance once it has been idle for
//! `INSTANCE_TIMEOUT` (Confluent's `consumer.instance.timeout.ms`), leaving the group.
//!
//! Memory is bounded: at most `MAX_INSTANCES` instances, and a poll holds at most its
//! `max_bytes` (capped at `MAX_POLL_BYTES`) of records.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Buf;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest};
use kafka_protocol::records::RecordBatchDecoder;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::{watch, Mutex};
use tokio::time::Instant;

use super::consumer_group::{self, Membership, Tp};
use super::error::{ProxyError, ProxyResult};
use super::formats::{self, Format};
use super::{json_response, read_json, Caller, Proxy, V2_BODY, V2_JSON};
use crate::cli::client::{Client, ANY};
use crate::cli::offsets::OffsetSpec;
use crate::security::Principal;

/// Instances at once over the proxy.
pub const MAX_INSTANCES: usize = 1000;
/// Idle time after which an instance is removed (Confluent's default).
pub const INSTANCE_TIMEOUT: Duration = Duration::from_millis(300_000);
/// The most a poll may return; Confluent's default `max_bytes` is 64 MiB, more than the
/// admin thread should hold for one request.
pub const MAX_POLL_BYTES: usize = 8 * 1024 * 1024;
/// The longest a poll waits for records.
const MAX_POLL_WAIT_MS: i32 = 10_000;
/// Auto commit's interval (the Java consumer's `auto.commit.interval.ms`).
const AUTO_COMMIT_INTERVAL: Duration = Duration::from_secs(5);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reset {
    Earliest,
    Latest,
    None,
}

pub struct Instance {
    group: String,
    format: Format,
    reset: Reset,
    auto_commit: bool,
    principal: Principal,
    client: Client,
    subscription: Vec<String>,
    manual: BTreeSet<Tp>,
    membership: Membership,
    positions: BTreeMap<Tp, i64>,
    last_used: Instant,
    last_commit: Instant,
    closed: bool,
}

type Shared = Arc<Mutex<Instance>>;

pub struct Instances {
    map: std::sync::Mutex<HashMap<(String, String), Shared>>,
    shutdown: watch::Receiver<bool>,
}

impl Instances {
    pub fn new(shutdown: watch::Receiver<bool>) -> Arc<Instances> {
        Arc::new(Instances {
            map: Default::default(),
            shutdown,
        })
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Shared>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, group: &str, name: &str) -> ProxyResult<Shared> {
        let i = self
            .map()
            .get(&(group.to_string(), name.to_string()))
            .cloned()
            .ok_or(ProxyError::InstanceNotFound)?;
        Ok(i)
    }

    fn remove(&self, group: &str, name: &str) {
        self.map().remove(&(group.to_string(), name.to_string()));
    }
}

/// The instance, locked and touched, if `who` owns it.
async fn instance(
    p: &Proxy,
    group: &str,
    name: &str,
    who: &Caller,
) -> ProxyResult<tokio::sync::OwnedMutexGuard<Instance>> {
    let shared = p.consumers.get(group, name)?;
    let mut g = shared.lock_owned().await;
    if g.closed || g.principal != who.0 {
        return Err(ProxyError::InstanceNotFound);
    }
    g.last_used = Instant::now();
    Ok(g)
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

fn v2(v: &Value) -> Response {
    json_response(StatusCode::OK, V2_JSON, v)
}

fn done(r: ProxyResult<Response>) -> Response {
    r.unwrap_or_else(IntoResponse::into_response)
}

/// A config value given as a string (Confluent's way) or as a JSON scalar.
fn config_str(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

pub async fn create(
    State(p): State<Proxy>,
    who: Caller,
    Path(group): Path<String>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    done(create_inner(p, who, group, &parts.headers, body).await)
}

async fn create_inner(
    p: Proxy,
    who: Caller,
    group: String,
    headers: &HeaderMap,
    body: Body,
) -> ProxyResult<Response> {
    let cfg: serde_json::Map<String, Value> = read_json(headers, body, V2_BODY).await?;
    let mut name = None;
    let mut format = Format::Binary;
    let mut reset = Reset::Latest;
    let mut auto_commit = true;
    for (k, v) in &cfg {
        let s = config_str(v)
            .ok_or_else(|| ProxyError::InvalidConsumerConfig(format!("{k} must be a string")))?;
        match k.as_str() {
            "name" => name = Some(s),
            "format" => {
                format = Format::parse(&s).ok_or_else(|| {
                    ProxyError::InvalidConsumerConfig(format!(
                        "format {s:?} is not one of binary, json, avro, protobuf, jsonschema"
                    ))
                })?
            }
            "auto.offset.reset" => {
                reset = match s.as_str() {
                    "earliest" | "smallest" => Reset::Earliest,
                    "latest" | "largest" => Reset::Latest,
                    "none" => Reset::None,
                    _ => {
                        return Err(ProxyError::InvalidConsumerConfig(format!(
                            "auto.offset.reset {s:?} is not one of earliest, latest, none"
                        )))
                    }
                }
            }
            "auto.commit.enable" => {
                auto_commit = match s.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(ProxyError::InvalidConsumerConfig(format!(
                            "auto.commit.enable {s:?} is not true or false"
                        )))
                    }
                }
            }
            // Accepted for compatibility; the proxy's own limits apply.
            "fetch.min.bytes" | "consumer.request.timeout.ms" | "id" => {}
            other => {
                return Err(ProxyError::InvalidConsumerConfig(format!(
                    "unknown setting {other:?}"
                )))
            }
        }
    }
    if format == Format::Protobuf {
        return Err(ProxyError::InvalidConsumerConfig(
            "format protobuf is not served by this proxy yet".into(),
        ));
    }
    let name = name.unwrap_or_else(|| {
        format!(
            "rest-consumer-{:016x}",
            crate::now_ms() as u64 ^ (rand_u64() << 20)
        )
    });
    if name.is_empty() || name.contains('/') {
        return Err(ProxyError::InvalidConsumerConfig(format!("name {name:?}")));
    }
    let instance = Instance {
        group: group.clone(),
        format,
        reset,
        auto_commit,
        principal: who.0.clone(),
        client: Client::local_as(p.ctx.clone(), CLIENT_TIMEOUT, who.0.clone()),
        subscription: Vec::new(),
        manual: BTreeSet::new(),
        membership: Membership::default(),
        positions: BTreeMap::new(),
        last_used: Instant::now(),
        last_commit: Instant::now(),
        closed: false,
    };
    let shared = Arc::new(Mutex::new(instance));
    {
        let mut map = p.consumers.map();
        let key = (group.clone(), name.clone());
        if map.contains_key(&key) {
            return Err(ProxyError::InstanceExists);
        }
        if map.len() >= MAX_INSTANCES {
            return Err(ProxyError::TooManyInstances(MAX_INSTANCES));
        }
        map.insert(key, shared.clone());
    }
    tokio::spawn(keep_alive(
        p.consumers.clone(),
        group.clone(),
        name.clone(),
        shared,
    ));
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    Ok(v2(&json!({
        "instance_id": name,
        "base_uri": format!("http://{host}/consumers/{group}/instances/{name}"),
    })))
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(crate::now_ms() as u64);
    h.finish()
}

/// Heartbeats, rejoins, expires: the instance's life between requests.
async fn keep_alive(all: Arc<Instances>, group: String, name: String, shared: Shared) {
    let mut shutdown = all.shutdown.clone();
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(consumer_group::HEARTBEAT_INTERVAL) => {}
        }
        // A poll in progress holds the lock: it speaks for the member meanwhile.
        let Ok(mut i) = shared.clone().try_lock_owned() else {
            continue;
        };
        if i.closed {
            return;
        }
        if i.last_used.elapsed() >= INSTANCE_TIMEOUT {
            tracing::info!(%group, instance = %name, "http proxy: consumer instance expired");
            close(&mut i).await;
            all.remove(&group, &name);
            return;
        }
        if i.subscription.is_empty() {
            continue;
        }
        let inst = &mut *i;
        let r = if inst.membership.needs_join {
            let topics = inst.subscription.clone();
            rejoin(inst, &topics).await
        } else {
            consumer_group::heartbeat(&mut inst.client, &group, &mut inst.membership).await
        };
        if let Err(e) = r {
            tracing::debug!(%group, instance = %name, error = %e, "http proxy: heartbeat");
        }
    }
}

async fn rejoin(i: &mut Instance, topics: &[String]) -> ProxyResult<()> {
    consumer_group::join(&mut i.client, &i.group, topics, &mut i.membership).await?;
    // Positions of partitions we lost are no longer ours; new ones start from the commit.
    i.positions
        .retain(|tp, _| i.membership.assigned.contains(tp));
    Ok(())
}

/// Commits what auto commit owes, leaves the group, marks the instance gone.
async fn close(i: &mut Instance) {
    if i.auto_commit {
        let _ = commit_positions(i).await;
    }
    let group = i.group.clone();
    consumer_group::leave(&mut i.client, &group, &mut i.membership).await;
    i.closed = true;
}

pub async fn delete(
    State(p): State<Proxy>,
    who: Caller,
    Path((group, name)): Path<(String, String)>,
) -> Response {
    done(
        async {
            let mut i = instance(&p, &group, &name, &who).await?;
            close(&mut i).await;
            p.consumers.remove(&group, &name);
            Ok(no_content())
        }
        .await,
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubscribeBody {
    #[serde(default)]
    topics: Vec<String>,
    topic_pattern: Option<String>,
}

pub async fn subscribe(
    State(p): State<Proxy>,
    who: Caller,
    Path((group, name)): Path<(String, String)>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    done(
        async {
            let b: SubscribeBody = read_json(&parts.headers, body, V2_BODY).await?;
            let mut i = instance(&p, &group, &name, &who).await?;
            if !i.manual.is_empty() {
                return Err(ProxyError::IllegalState(
                    "Subscription to topics, partitions and pattern are mutually exclusive".into(),
                ));
            }
            let mut topics = b.topics;
            if let Some(pattern) = b.topic_pattern {
                if !topics.is_empty() {
                    return Err(ProxyError::BadRequest(
                        "topics and topic_pattern are exclusive".into(),
                    ));
                }
                let re = regex::Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| ProxyError::BadRequest(format!("topic_pattern: {e}")))?;
                let md = i.client.metadata(None).await?;
                topics = md
                    .topics
                    .iter()
                    .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
                    .filter(|n| re.is_match(n))
                    .collect();
            }
            if topics.is_empty() {
                return Err(ProxyError::BadRequest("no topics to subscribe to".into()));
            }
            topics.sort();
            topics.dedup();
            if !i.subscription.is_empty() && i.subscription != topics {
                // Java's consumer replaces the subscription; so does the proxy (a rejoin).
                let group = i.group.clone();
                let inst = &mut *i;
                consumer_group::leave(&mut inst.client, &group, &mut inst.membership).await;
                inst.positions.clear();
            }
            i.subscription = topics;
            i.membership.needs_join = true;
            Ok(no_content())
        }
        .await,
    )
}

pub async fn subscription(
    State(p): State<Proxy>,
    who: Caller,
    Path((group, name)): Path<(String, String)>,
) -> Response {
    done(
        async {
            let i = instance(&p, &group, &name, &who).await?;
            Ok(v2(&json!({ "topics": i.subscription })))
        }
        .await,
    )
}

pub async fn unsubscribe(
    State(p): State<Proxy>,
    who: Caller,
    Path((group, name)): Path<(String, String)>,
) -> Response {
    done(
        async {
            let mut i = instance(&p, &group, &name, &who).await?;
            let inst = &mut *i;
            if inst.auto_commit {
                let _ = commit_positions(inst).await;
            }
            consumer_group::leave(&mut inst.client, &group, &mut inst.membership).await;
            inst.subscription.clear();
            inst.positions.clear();
            Ok(no_content())
        }
        .await,
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionsBody {
    #[serde(default)]
    partitions: Vec<TopicPartitionIn>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopicPartitionIn {
    topic: String,
    partition: i32,
}

pub async fn assign(
    State(p): State<Proxy>,
    who: Caller,
    Path((group, name)): Path<(String, String)>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    done(
        async {
            let b: PartitionsBody = read_json(&parts.headers, body, V2_BODY).await?;
            let mut i = instance(&p, &group, &name, &who).await?;
            if !i.subscription.is_empty() {
                return Err(ProxyError::IllegalState(
                    "Subscription to topics, partitions and pattern are mutually exclusive".into(),
                ));
            }
            i.manual = b
                .partitions
                .into_iter()
                .map(|t| (t.topic, t.partition))
                .collect();
            let manual = i.manual.clone();
            i.positions.retain(|tp, _| manual.contains(tp));
            Ok(no_content())
        }
        .await,
    )
}

fn assigned(i: &Instance) -> BTreeSet<Tp> {
    if i.manual.is_empty() {
        i.membership.assigned.clone()
    } else {
        i.manual.clone()
    }
}

fn tps_json(tps: impl IntoIterator<Item = Tp>) -> Value {
    Value::Array(
        tps.into_iter()
            .map(|(t, p)| json!({ "topic": t, "partition": p }))
            .collect(),
    )
}

pub async fn assignments(
    State(p): State<Proxy>,
    who: Caller,
    Path((group, name)): Path<(String, String)>,
) -> Response {
    done(
        async {
            let i = instance(&p, &group, &name, &who).await?;
            Ok(v2(&json!({ "partitions": tps_json(assigned(&i)) })))
        }
        .await,
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OffsetsBody {
    #[serde(default)]
    offsets: Vec<OffsetIn>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OffsetIn {
    topic: String,
    partition: i32,
    offset: i64,
    metadata: Option<String>,
}

fn check_assigned(i: &Instance, tp: &Tp) -> ProxyResult<()> {
    if assigned(i).contains(tp) {
        Ok(())
    } else {
        Err(ProxyError::IllegalState(format!(
            "No current assignment for partition {}-{}",
            tp.0, tp.1
        )))
    }
}

pub async fn seek(
    State(p): State<Proxy>,
    who: Caller,
    Path((group, name)): Path<(String, String)>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    done(
        async {
            let b: OffsetsBody = read_json(&parts.headers, body, V2_BODY).await?;
            let mut i = instance(&p, &group, &name, &who).await?;
            for o in &b.offsets {
                check_assigned(&i, &(o.topic.clone(), o.partition))?;
            }
            for o in b.offsets {
                i.positions.insert((o.topic, o.partition), o.offset.max(0));
            }
            Ok(no_content())
        }
        .await,
    )
}

pub async fn seek_beginning(
    s: State<Proxy>,
    who: Caller,
    path: Path<(String, String)>,
    req: Request,
) -> Response {
    seek_to(s, who, path, req, OffsetSpec::Start).await
}

pub async fn seek_end(
    s: State<Proxy>,
    who: Caller,
    path: Path<(String, String)>,
    req: Request,
) -> Response {
    seek_to(s, who, path, req, OffsetSpec::End).await
}

async fn seek_to(
    State(p): State<Proxy>,
    who: Caller,
    Path((group, name)): Path<(String, String)>,
    req: Request,
    spec: OffsetSpec,
) -> Response {
    let (parts, body) = req.into_parts();
    done(
        async {
            let b: PartitionsBody = read_json(&parts.headers, body, V2_BODY).await?;
            let mut i = instance(&p, &group, &name, &who).await?;
            let tps: Vec<Tp> = b
                .partitions
                .into_iter()
                .map(|t| (t.topic, t.partition))
                .collect();
            for tp in &tps {
                check_assigned(&i, tp)?;
            }
            let found = list_offsets(&mut i.client, &tps, spec).await?;
            i.positions.extend(found);
            Ok(no_content())
        }
        .await,
    )
}

/// ListOffsets for `tps` at `spec` (start or end).
async fn list_offsets(
    client: &mut Client,
    tps: &[Tp],
    spec: OffsetSpec,
) -> ProxyResult<BTreeMap<Tp, i64>> {
    let mut by_topic: BTreeMap<&str, Vec<(i32, i32)>> = BTreeMap::new();
    for (t, p) in tps {
        by_topic.entry(t).or_default().push((*p, ANY));
    }
    let mut out = BTreeMap::new();
    for (t, parts) in by_topic {
        let got = crate::cli::offsets::list(client, t, &parts, spec).await?;
        for (p, r) in got {
            let o = r.map_err(|code| ProxyError::Kafka {
                code,
                message: Some(format!("ListOffsets {t}-{p}")),
            })?;
            out.insert((t.to_string(), p), o);
        }
    }
    Ok(out)
}

async fn commit_positions(i: &mut Instance) -> ProxyResult<()> {
    let offsets: BTreeMap<Tp, (i64, Option<String>)> = i
        .positions
        .iter()
        .map(|(tp, o)| (tp.clone(), (*o, None)))
        .collect();
    i.last_commit = Instant::now();
    if offsets.is_empty() {
        return Ok(());
    }
    let member = i.manual.is_empty().then_some(&i.membership);
    consumer_group::commit(&mut i.client, &i.group, member, &offsets).await
}

pub async fn commit(
    State(p): State<Proxy>,
    who: Caller,
    Path((group, name)): Path<(String, String)>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    done(
        async {
            let bytes = axum::body::to_bytes(body, super::MAX_BODY)
                .await
                .map_err(|_| ProxyError::TooLarge(super::MAX_BODY))?;
            let b: Option<OffsetsBody> = if bytes.iter().all(u8::is_ascii_whitespace) {
                None
            } else {
                if !super::content_type_is(&parts.headers, V2_BODY) {
                    return Err(ProxyError::UnsupportedMediaType);
                }
                Some(
                    serde_json::from_slice(&bytes)
                        .map_err(|e| ProxyError::BadRequest(e.to_string()))?,
                )
            };
            let mut i = instance(&p, &group, &name, &who).await?;
            match b {
                Some(b) if !b.offsets.is_empty() => {
                    // Confluent commits the offset after the one named (the last one consumed).
                    let offsets = b
                        .offsets
                        .into_iter()
                        .map(|o| ((o.topic, o.partition), (o.offset + 1, o.metadata)))
                        .collect();
                    let inst = &mut *i;
                    let member = inst.manual.is_empty().then_some(&inst.membership);
                    consumer_group::commit(&mut inst.client, &group, member, &offsets).await?;
                }
                _ => commit_positions(&mut i).await?,
            }
            Ok((StatusCode::OK, [(header::CONTENT_TYPE, V2_JSON)]).into_response())
        }
        .await,
    )
}

pub async fn committed(
    State(p): State<Proxy>,
    who: Caller,
    Path((group, name)): Path<(String, String)>,
    req: Request,
) -> Response {
    let (_, body) = req.into_parts();
    done(
        async {
            let bytes = axum::body::to_bytes(body, super::MAX_BODY)
                .await
                .map_err(|_| ProxyError::TooLarge(super::MAX_BODY))?;
            let wanted: Option<Vec<Tp>> = if bytes.iter().all(u8::is_ascii_whitespace) {
                None
            } else {
                let b: PartitionsBody = serde_json::from_slice(&bytes)
                    .map_err(|e| ProxyError::BadRequest(e.to_string()))?;
                Some(
                    b.partitions
                        .into_iter()
                        .map(|t| (t.topic, t.partition))
                        .collect(),
                )
            };
            let mut i = instance(&p, &group, &name, &who).await?;
            let all = crate::cli::group::committed(&mut i.client, ANY, &group).await?;
            let wanted = wanted.unwrap_or_else(|| assigned(&i).into_iter().collect());
            let offsets: Vec<Value> = wanted
                .into_iter()
                .filter_map(|(t, p)| {
                    let o = all.get(&t)?.get(&p)?;
                    Some(json!({ "topic": t, "partition": p, "offset": o, "metadata": "" }))
                })
                .collect();
            Ok(v2(&json!({ "offsets": offsets })))
        }
        .await,
    )
}

#[derive(Debug, Deserialize)]
pub struct RecordsQuery {
    timeout: Option<i64>,
    max_bytes: Option<i64>,
}

/// Whether `Accept` allows the instance's format: 406 with 40601 when it names another
/// embedded format, plain 406 when it names nothing JSON.
fn check_accept(headers: &HeaderMap, format: Format) -> ProxyResult<()> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let types: Vec<&str> = accept
        .split(',')
        .map(|t| t.split(';').next().unwrap_or("").trim())
        .collect();
    let ok = types.iter().any(|t| {
        t.eq_ignore_ascii_case(format.media_type())
            || matches!(*t, "*/*" | "application/*" | "application/json" | "")
            || t.eq_ignore_ascii_case(V2_JSON)
    });
    if ok {
        return Ok(());
    }
    if types
        .iter()
        .any(|t| t.starts_with("application/vnd.kafka.") && t.ends_with(".v2+json"))
    {
        return Err(ProxyError::FormatMismatch);
    }
    Err(ProxyError::NotAcceptable)
}

pub async fn records(
    State(p): State<Proxy>,
    who: Caller,
    Path((group, name)): Path<(String, String)>,
    Query(q): Query<RecordsQuery>,
    headers: HeaderMap,
) -> Response {
    done(
        async {
            let mut i = instance(&p, &group, &name, &who).await?;
            check_accept(&headers, i.format)?;
            let max_bytes = q
                .max_bytes
                .map_or(MAX_POLL_BYTES, |b| (b.max(1) as usize).min(MAX_POLL_BYTES));
            let wait = q.timeout.unwrap_or(1000).clamp(0, MAX_POLL_WAIT_MS as i64) as i32;
            let registry = p.ctx.registry.get().cloned();
            let records = poll(&mut i, wait, max_bytes, registry.as_ref()).await?;
            let format = i.format;
            Ok(json_response(
                StatusCode::OK,
                format.media_type(),
                &Value::Array(records),
            ))
        }
        .await,
    )
}

async fn poll(
    i: &mut Instance,
    wait_ms: i32,
    max_bytes: usize,
    registry: Option<&Arc<crate::schema_registry::Service>>,
) -> ProxyResult<Vec<Value>> {
    if i.auto_commit && i.last_commit.elapsed() >= AUTO_COMMIT_INTERVAL {
        if let Err(e) = commit_positions(i).await {
            tracing::debug!(group = %i.group, error = %e, "http proxy: auto commit");
        }
    }
    if !i.subscription.is_empty() && (i.membership.needs_join || i.membership.member_id.is_empty())
    {
        let topics = i.subscription.clone();
        rejoin(i, &topics).await?;
    }
    let tps = assigned(i);
    if tps.is_empty() {
        return Ok(Vec::new());
    }
    position_unpositioned(i, &tps).await?;
    let mut by_topic: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
    for (t, p) in &tps {
        by_topic.entry(t).or_default().push(
            FetchPartition::default()
                .with_partition(*p)
                .with_fetch_offset(i.positions[&(t.clone(), *p)])
                .with_current_leader_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(max_bytes as i32),
        );
    }
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes as i32)
        .with_isolation_level(0)
        .with_session_epoch(-1)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    FetchTopic::default()
                        .with_topic(crate::cli::topic_name(t))
                        .with_partitions(ps)
                })
                .collect(),
        );
    let (resp, _) = i.client.call(ANY, &req, 12).await?;
    if resp.error_code != 0 {
        return Err(ProxyError::Kafka {
            code: resp.error_code,
            message: Some("Fetch".into()),
        });
    }
    let mut out = Vec::new();
    let mut used = 0usize;
    let mut out_of_range = Vec::new();
    for t in resp.responses {
        let topic = t.topic.to_string();
        for pd in t.partitions {
            let tp = (topic.clone(), pd.partition_index);
            match pd.error_code {
                0 => {}
                1 => {
                    out_of_range.push(tp);
                    continue;
                }
                code => {
                    return Err(ProxyError::Kafka {
                        code,
                        message: Some(format!("Fetch {topic}-{}", pd.partition_index)),
                    })
                }
            }
            let mut records = pd.records.unwrap_or_default();
            let Some(pos) = i.positions.get(&tp).copied() else {
                continue;
            };
            let mut next = pos;
            'batches: while records.remaining() >= 12 {
                let len = i32::from_be_bytes([records[8], records[9], records[10], records[11]]);
                if len < 0 || records.remaining() < 12 + len as usize {
                    break;
                }
                let mut batch = records.split_to(12 + len as usize);
                let Ok(set) = RecordBatchDecoder::decode(&mut batch) else {
                    return Err(ProxyError::Internal(format!(
                        "undecodable batch at offset {next} of {topic}-{}",
                        pd.partition_index
                    )));
                };
                for r in set.records {
                    if r.offset < next {
                        continue;
                    }
                    if r.control {
                        next = r.offset + 1;
                        continue;
                    }
                    let size = r.key.as_ref().map_or(0, |k| k.len())
                        + r.value.as_ref().map_or(0, |v| v.len());
                    // The first record always goes (as Kafka returns at least one).
                    if used > 0 && used + size > max_bytes {
                        break 'batches;
                    }
                    used += size;
                    out.push(json!({
                        "topic": topic,
                        "key": formats::decode(registry, i.format, r.key.as_deref())?,
                        "value": formats::decode(registry, i.format, r.value.as_deref())?,
                        "partition": pd.partition_index,
                        "offset": r.offset,
                    }));
                    next = r.offset + 1;
                }
            }
            i.positions.insert(tp, next);
        }
    }
    for tp in out_of_range {
        i.positions.remove(&tp);
    }
    Ok(out)
}

/// Gives each partition without a position the group's committed offset, else the reset
/// policy's.
async fn position_unpositioned(i: &mut Instance, tps: &BTreeSet<Tp>) -> ProxyResult<()> {
    let missing: Vec<Tp> = tps
        .iter()
        .filter(|tp| !i.positions.contains_key(*tp))
        .cloned()
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let group = i.group.clone();
    let committed = crate::cli::group::committed(&mut i.client, ANY, &group).await?;
    let mut rest = Vec::new();
    for tp in missing {
        match committed.get(&tp.0).and_then(|m| m.get(&tp.1)) {
            Some(o) => {
                i.positions.insert(tp, *o);
            }
            None => rest.push(tp),
        }
    }
    if rest.is_empty() {
        return Ok(());
    }
    let spec = match i.reset {
        Reset::Earliest => OffsetSpec::Start,
        Reset::Latest => OffsetSpec::End,
        Reset::None => {
            return Err(ProxyError::IllegalState(format!(
                "Undefined offset with no reset policy for partitions: {}",
                rest.iter()
                    .map(|(t, p)| format!("{t}-{p}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    };
    let found = list_offsets(&mut i.client, &rest, spec).await?;
    i.positions.extend(found);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn given_accept_headers_then_format_checked_as_confluent_does() {
        assert!(check_accept(&HeaderMap::new(), Format::Json).is_ok());
        assert!(check_accept(&accept("application/vnd.kafka.json.v2+json"), Format::Json).is_ok());
        assert!(check_accept(&accept("*/*"), Format::Binary).is_ok());
        let e = check_accept(
            &accept("application/vnd.kafka.binary.v2+json"),
            Format::Json,
        )
        .unwrap_err();
        assert_eq!(e.status_and_code(), (StatusCode::NOT_ACCEPTABLE, 40601));
        let e = check_accept(&accept("text/html"), Format::Json).unwrap_err();
        assert_eq!(e.status_and_code(), (StatusCode::NOT_ACCEPTABLE, 406));
    }

    #[test]
    fn given_config_values_then_strings() {
        assert_eq!(config_str(&json!("x")).as_deref(), Some("x"));
        assert_eq!(config_str(&json!(false)).as_deref(), Some("false"));
        assert_eq!(config_str(&json!(5)).as_deref(), Some("5"));
        assert_eq!(config_str(&json!([1])), None);
    }
}
