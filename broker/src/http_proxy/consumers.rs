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
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::{watch, Mutex};
use tokio::time::Instant;

use super::consumer_group::{self, Membership, Tp};
use super::error::{ProxyError, ProxyResult};
use super::formats::Format;
use super::{json_response, read_json, read_optional_json, Caller, Proxy, V2_BODY, V2_JSON};
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
pub(super) const MAX_POLL_WAIT_MS: i32 = 10_000;
/// Auto commit's interval (the Java consumer's `auto.commit.interval.ms`).
pub(super) const AUTO_COMMIT_INTERVAL: Duration = Duration::from_secs(5);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reset {
    Earliest,
    Latest,
    None,
}

pub struct Instance {
    pub(super) group: String,
    pub(super) format: Format,
    pub(super) reset: Reset,
    pub(super) auto_commit: bool,
    pub(super) principal: Principal,
    pub(super) client: Client,
    pub(super) subscription: Vec<String>,
    pub(super) manual: BTreeSet<Tp>,
    pub(super) membership: Membership,
    pub(super) positions: BTreeMap<Tp, i64>,
    pub(super) last_used: Instant,
    pub(super) last_commit: Instant,
    pub(super) closed: bool,
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
pub(super) async fn instance(
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

pub(super) fn done(r: ProxyResult<Response>) -> Response {
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

pub(super) async fn rejoin(i: &mut Instance, topics: &[String]) -> ProxyResult<()> {
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

pub(super) fn assigned(i: &Instance) -> BTreeSet<Tp> {
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
            let found = super::consumer_group::list_offsets(&mut i.client, &tps, spec).await?;
            i.positions.extend(found);
            Ok(no_content())
        }
        .await,
    )
}

pub(super) async fn commit_positions(i: &mut Instance) -> ProxyResult<()> {
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
            let b: Option<OffsetsBody> =
                read_optional_json(&parts.headers, body, Some(V2_BODY)).await?;
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
    let (parts, body) = req.into_parts();
    done(
        async {
            let b: Option<PartitionsBody> = read_optional_json(&parts.headers, body, None).await?;
            let wanted: Option<Vec<Tp>> = b.map(|b| {
                b.partitions
                    .into_iter()
                    .map(|t| (t.topic, t.partition))
                    .collect()
            });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_config_values_then_strings() {
        assert_eq!(config_str(&json!("x")).as_deref(), Some("x"));
        assert_eq!(config_str(&json!(false)).as_deref(), Some("false"));
        assert_eq!(config_str(&json!(5)).as_deref(), Some("5"));
        assert_eq!(config_str(&json!([1])), None);
    }
}
