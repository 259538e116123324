//! Token streams over Server-Sent Events (issue 21, the requirements document's StreamChunk):
//! `GET /v1/topics/{topic}/partitions/{p}/stream?offset=N&key=K` on the admin port answers
//! `text/event-stream`, one event per record: `id:` its offset, `data:` the record as JSON
//! (`record_json`). A browser's `EventSource` reconnects by itself and sends the last id it
//! saw as `Last-Event-ID`: the stream resumes at the offset after it, so no record is lost or
//! repeated across a broker restart.
//!
//! Backpressure comes from the connection: the body is a stream that hyper polls only when
//! the socket takes more, and each poll reads at most `READ_BYTES` of the log (zero-copy
//! slices) ahead of what was sent, so a slow browser holds that much and the broker never
//! buffers unboundedly. When the stream has caught up it waits on the partition's high
//! watermark (the same watch a Fetch long poll uses) and sends keep-alive comments meanwhile.
//! Streams do not count against the admin port's request limit; they have their own
//! (`MAX_STREAMS`, then 503).
//!
//! `?group=G` consumes for consumer group G: its committed offset is where the stream starts
//! without `Last-Event-ID` or a numeric offset, and the delivered position is committed to it
//! (`stream_group`, which says how and when).
//!
//! `?isolation=read_committed` streams what a read_committed consumer gets: the stream reads
//! up to the last stable offset and waits on it, and leaves out the records of aborted
//! transactions by the client's rule (`partition::read_committed`), with the aborted list
//! the partition gives a read_committed Fetch.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{Extensions, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::Bytes;
use serde::Deserialize;
use tokio::sync::{watch, Semaphore};

use super::http_access;
use crate::partition::read_committed::AbortedFilter;
use crate::partition::record_view;
use crate::partition::records::RecordFields;
use crate::security::acl::ResourceType;
use crate::server::stream_group::{self, GroupCursor};
use crate::shard::{frontend, BrokerContext};

/// SSE streams open at once over the admin port.
pub const MAX_STREAMS: usize = 1024;
/// Log bytes read per step of a stream (what a slow client can hold up).
const READ_BYTES: usize = 64 * 1024;
/// Keep-alive comment interval while no record arrives.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The reconnect delay given to `EventSource`s.
const RETRY: Duration = Duration::from_secs(1);
/// How long a new stream waits for its partition to come online (broker recovering).
const ONLINE_WAIT: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub struct Streams {
    ctx: Arc<BrokerContext>,
    permits: Arc<Semaphore>,
    shutdown: watch::Receiver<bool>,
}

impl Streams {
    /// The streams' shared state: the broker, the stream permits, the shutdown signal.
    pub fn new(ctx: Arc<BrokerContext>, shutdown: watch::Receiver<bool>) -> Streams {
        Streams {
            ctx,
            permits: Arc::new(Semaphore::new(MAX_STREAMS)),
            shutdown,
        }
    }
}

impl Streams {
    pub fn ctx(&self) -> &Arc<BrokerContext> {
        &self.ctx
    }
}

#[derive(Debug, Deserialize)]
pub struct StreamQuery {
    /// A number, `earliest` or `latest` (the default: what is produced from now on).
    offset: Option<String>,
    /// Only records with this key (UTF-8), e.g. one conversation's tokens.
    key: Option<String>,
    /// Consume for this consumer group (`stream_group`).
    group: Option<String>,
    /// `read_uncommitted` (the default) or `read_committed`, as a consumer's isolation.level.
    isolation: Option<String>,
}

pub use super::http_access::error;

/// Checks the topic and partition exist; the partition's `max.decompressed.message.bytes`.
pub fn lookup(ctx: &BrokerContext, topic: &str, partition: i32) -> Result<usize, Box<Response>> {
    let catalog = ctx.catalog.snapshot();
    let Some(meta) = catalog.get(topic) else {
        return Err(Box::new(error(
            StatusCode::NOT_FOUND,
            format!("topic {topic} not found"),
        )));
    };
    if partition < 0 || partition >= meta.partitions {
        return Err(Box::new(error(
            StatusCode::NOT_FOUND,
            format!("partition {partition} of topic {topic} not found"),
        )));
    }
    Ok(meta.settings.max_decompressed_bytes)
}

pub async fn stream(
    State(s): State<Streams>,
    Path((topic, partition)): Path<(String, i32)>,
    Query(q): Query<StreamQuery>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Response {
    if q.group.as_deref().is_some_and(|g| g.trim().is_empty()) {
        return error(StatusCode::BAD_REQUEST, "group must not be empty");
    }
    let read_committed = match q.isolation.as_deref() {
        None | Some("read_uncommitted") => false,
        Some("read_committed") => true,
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "isolation must be read_uncommitted or read_committed",
            )
        }
    };
    // What a consumer needs: READ on the topic, and on the group it commits for.
    let access = match http_access::reader(&s.ctx, &headers, &extensions) {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let allowed = http_access::require_read(&access, ResourceType::Topic, &topic).and_then(|()| {
        q.group.as_deref().map_or(Ok(()), |g| {
            http_access::require_read(&access, ResourceType::Group, g)
        })
    });
    if let Err(r) = allowed {
        return *r;
    }
    let max_decompressed = match lookup(&s.ctx, &topic, partition) {
        Ok(m) => m,
        Err(r) => return *r,
    };
    // Last-Event-ID (the browser's reconnect) wins over ?offset=: it is where the client is.
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty());
    let mut start = match (resume, q.offset.as_deref()) {
        (Some(id), _) => match id.trim().parse::<i64>() {
            Ok(o) if o >= -1 => Start::At(o + 1),
            _ => return error(StatusCode::BAD_REQUEST, "Last-Event-ID must be an offset"),
        },
        (None, None | Some("latest")) => Start::Latest,
        (None, Some("earliest")) => Start::Earliest,
        (None, Some(n)) => match n.parse::<i64>() {
            Ok(o) if o >= 0 => Start::At(o),
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "offset must be a number >= 0, earliest or latest",
                )
            }
        },
    };
    let Ok(permit) = s.permits.clone().try_acquire_owned() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{MAX_STREAMS} streams are open already"),
        );
    };
    // A group's committed offset comes before `earliest`/`latest`, which are then only the
    // reset policy (Kafka's auto.offset.reset); an explicit offset or Last-Event-ID wins.
    if let (Some(g), Start::Latest | Start::Earliest) = (q.group.as_deref(), &start) {
        match stream_group::committed(&s.ctx, g, &topic, partition).await {
            Ok(Some(o)) => start = Start::At(o),
            Ok(None) => {}
            Err(e) => {
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("group {g}'s offsets: {e}"),
                )
            }
        }
    }
    let topic: Arc<str> = topic.into();
    let Some((log_start, hw, lso)) = offsets_when_online(&s.ctx, &topic, partition).await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "partition not online");
    };
    let next = match start {
        // A read_committed consumer's `latest` is the LSO (ListOffsets with its isolation).
        Start::Latest if read_committed => lso,
        Start::Latest => hw,
        Start::Earliest => log_start,
        Start::At(o) => o.max(log_start),
    };
    let group = q
        .group
        .map(|g| GroupCursor::new(s.ctx.clone(), g, topic.clone(), partition, next));
    let tail = Tail {
        ctx: s.ctx.clone(),
        topic,
        partition,
        next,
        key: q.key.map(Bytes::from),
        read_committed,
        max_decompressed,
        // Browsers retry after ~3 s by default; a restarted broker is back sooner.
        pending: VecDeque::from([(next, Event::default().retry(RETRY))]),
        watch: None,
        shutdown: s.shutdown.clone(),
        group,
        _permit: permit,
    };
    let events = futures::stream::unfold(tail, |mut t| async move {
        let event = t.next_event().await?;
        Some((Ok::<_, Infallible>(event), t))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response()
}

/// The partition's (log start, high watermark, LSO), waiting while it is not open yet: the admin
/// port answers during recovery, and an `EventSource` reconnecting to a restarting broker
/// gives up for good on an error status, so it is held until the log is back.
async fn offsets_when_online(
    ctx: &Arc<BrokerContext>,
    topic: &Arc<str>,
    partition: i32,
) -> Option<(i64, i64, i64)> {
    let deadline = tokio::time::Instant::now() + ONLINE_WAIT;
    loop {
        let t = topic.clone();
        let offsets = frontend::call_from_outside(
            ctx,
            home(ctx, topic, partition),
            move |state| async move {
                state.partition(&t, partition).map(|p| {
                    let log_start = p.log.log_start_offset();
                    (log_start, p.high_watermark(), p.last_stable_offset())
                })
            },
        );
        if let Ok(Ok(Some(o))) = tokio::time::timeout(ONLINE_WAIT, offsets).await {
            return Some(o);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

enum Start {
    Latest,
    Earliest,
    At(i64),
}

fn home(ctx: &BrokerContext, topic: &str, partition: i32) -> usize {
    crate::shard::home_shard(topic, partition, ctx.shard_count())
}

/// One stream's position and what it read but has not sent.
struct Tail {
    ctx: Arc<BrokerContext>,
    topic: Arc<str>,
    partition: i32,
    next: i64,
    key: Option<Bytes>,
    /// `?isolation=read_committed`: up to the LSO, without aborted transactions.
    read_committed: bool,
    max_decompressed: usize,
    /// Events read but not sent, each with the offset it is about.
    pending: VecDeque<(i64, Event)>,
    watch: Option<watch::Receiver<i64>>,
    shutdown: watch::Receiver<bool>,
    /// `?group=`: the delivered position and its commits.
    group: Option<GroupCursor>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

/// What one read step brought back from the partition's home shard.
struct Step {
    chunks: Vec<Bytes>,
    /// read_committed: the aborted transactions overlapping `chunks`, (producer id, first).
    aborted: Option<Vec<(i64, i64)>>,
    log_start: i64,
    /// Where the stream may read to: the high watermark, or for read_committed the LSO.
    end: i64,
    /// Watches `end`.
    watch: watch::Receiver<i64>,
}

impl Tail {
    /// The next event; `None` ends the stream (shutdown, partition gone).
    async fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some((_, e)) = self.pending.pop_front() {
                if let Some(g) = self.group.as_mut() {
                    // Everything before the next unsent event (or the read position) is out.
                    let position = self.pending.front().map_or(self.next, |(o, _)| *o);
                    g.delivered(position);
                    g.commit_if_due().await;
                }
                return Some(e);
            }
            if *self.shutdown.borrow() {
                return None;
            }
            let step = self.read().await?;
            if self.next < step.log_start {
                // Retention or DeleteRecords passed us: continue at the log start.
                self.next = step.log_start;
                continue;
            }
            let read_to = self.decode(&step.chunks, step.aborted.as_deref());
            if read_to > self.next {
                self.next = read_to;
                continue;
            }
            // Caught up: wait for the high watermark (the LSO) to pass us (or shutdown).
            let mut watch = self.watch.take().unwrap_or(step.watch);
            if *watch.borrow_and_update() <= self.next {
                // A group's delivered position is committed while the stream waits.
                let due = self.group.as_ref().and_then(GroupCursor::due_at);
                let commit_due = async {
                    match due {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    changed = watch.changed() => changed.ok()?,
                    _ = self.shutdown.changed() => return None,
                    _ = commit_due => {
                        if let Some(g) = self.group.as_mut() {
                            g.commit_if_due().await;
                        }
                    }
                }
            } else if step.end > self.next {
                // Data below the high watermark that read nothing (never expected): do not
                // spin on it.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            self.watch = Some(watch);
        }
    }

    async fn read(&mut self) -> Option<Step> {
        let (topic, partition, offset) = (self.topic.clone(), self.partition, self.next);
        let committed = self.read_committed;
        let shard = home(&self.ctx, &topic, partition);
        let r = frontend::call_from_outside(&self.ctx, shard, move |state| async move {
            let p = state.partition(&topic, partition)?;
            let (watch, end) = if committed {
                (p.watch_last_stable_offset(), p.last_stable_offset())
            } else {
                (p.watch_high_watermark(), p.high_watermark())
            };
            let log_start = p.log.log_start_offset();
            let (chunks, aborted) = if offset >= log_start && offset < end {
                let o = p.read(offset, READ_BYTES, committed).ok()?;
                let aborted = o.aborted.map(|list| {
                    list.iter()
                        .map(|t| (t.producer_id, t.first_offset))
                        .collect()
                });
                (o.data.chunks, aborted)
            } else {
                (Vec::new(), None)
            };
            Some(Step {
                chunks,
                aborted,
                log_start,
                end,
                watch,
            })
        })
        .await;
        r.ok().flatten()
    }

    /// Queues the events of `chunks` from `self.next` on, without the records a read_committed
    /// client drops for `aborted`; returns the offset after the last batch read (filtered or
    /// not, control batches included: they hold no records but take offsets), or `self.next`
    /// if none was.
    fn decode(&mut self, chunks: &[Bytes], aborted: Option<&[(i64, i64)]>) -> i64 {
        let mut end = self.next;
        let from = self.next;
        // Every batch goes through the filter in log order (an ABORT marker changes its state).
        let mut filter = aborted.map(|a| AbortedFilter::new(a.iter().copied()));
        for chunk in chunks {
            for (h, batch) in storage::batch::BatchIter::new(chunk).map_while(Result::ok) {
                end = end.max(h.last_offset() + 1);
                if filter.as_mut().is_some_and(|f| !f.delivers(&h, batch)) {
                    continue;
                }
                let r = record_view::for_each_record(
                    batch,
                    from,
                    self.max_decompressed,
                    |_, offset, ts, r| {
                        if self.key.as_deref().is_some_and(|k| r.key != Some(k)) {
                            return;
                        }
                        let json = record_json(&self.topic, self.partition, offset, ts, r);
                        self.pending.push_back((
                            offset,
                            Event::default()
                                .id(offset.to_string())
                                .data(json.to_string()),
                        ));
                    },
                );
                if let Err(e) = r {
                    tracing::warn!(topic = %self.topic, partition = self.partition, offset = h.base_offset, error = %e, "SSE stream: unreadable batch skipped");
                }
            }
        }
        end
    }
}

/// Text if UTF-8, else base64 (with the encoding named beside it).
fn text_or_base64(b: Option<&[u8]>) -> (serde_json::Value, &'static str) {
    match b {
        None => (serde_json::Value::Null, "null"),
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => (serde_json::Value::String(s.to_string()), "utf8"),
            Err(_) => (
                base64::engine::general_purpose::STANDARD.encode(b).into(),
                "base64",
            ),
        },
    }
}

/// The StreamChunk fields (requirements document) a record carries, in its JSON value or its
/// headers.
const CHUNK_FIELDS: &[&str] = &[
    "chunk_token_offset",
    "function_call_id",
    "x-trace-id",
    "traceparent",
    "token",
    "call_ctx",
];

/// A record as the streams and key reads show it.
pub fn record_json(
    topic: &str,
    partition: i32,
    offset: i64,
    timestamp: i64,
    r: &RecordFields<'_>,
) -> serde_json::Value {
    let (key, key_encoding) = text_or_base64(r.key);
    let (value, value_encoding) = text_or_base64(r.value);
    let headers: Vec<serde_json::Value> = r
        .headers()
        .map(|(k, v)| {
            let (value, encoding) = text_or_base64(v);
            serde_json::json!({
                "key": String::from_utf8_lossy(k),
                "value": value,
                "encoding": encoding,
            })
        })
        .collect();
    let mut chunk = serde_json::Map::new();
    if let Some(serde_json::Value::Object(doc)) = r
        .value
        .and_then(|v| serde_json::from_slice::<serde_json::Value>(v).ok())
    {
        for f in CHUNK_FIELDS {
            if let Some(v) = doc.get(*f) {
                chunk.insert(f.to_string(), v.clone());
            }
        }
    }
    for (k, v) in r.headers() {
        if let (Ok(k), Some(Ok(v))) = (std::str::from_utf8(k), v.map(std::str::from_utf8)) {
            if CHUNK_FIELDS.contains(&k) && !chunk.contains_key(k) {
                chunk.insert(k.to_string(), v.into());
            }
        }
    }
    let mut out = serde_json::json!({
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp": timestamp,
        "key": key,
        "key_encoding": key_encoding,
        "value": value,
        "value_encoding": value_encoding,
        "headers": headers,
    });
    if !chunk.is_empty() {
        out["chunk"] = serde_json::Value::Object(chunk);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_a_stream_chunk_value_when_shown_then_fields_surfaced() {
        let value = br#"{"token":"Hel","chunk_token_offset":3,"function_call_id":"f1"}"#;
        let batch = crate::test_support::TestBatch::new(1)
            .header("x-trace-id", Some(b"abc"))
            .header("bin", Some(&[0xff, 0xfe]))
            .encode_with(|rs| {
                rs[0].key = Some(bytes::Bytes::from_static(b"conv-1"));
                rs[0].value = Some(bytes::Bytes::from_static(value));
            });
        let mut j = serde_json::Value::Null;
        record_view::for_each_record(&batch, 0, 1 << 20, |_, _, _, r| {
            j = record_json("t", 0, 42, 1000, r);
        })
        .unwrap();
        assert_eq!(j["offset"], 42);
        assert_eq!(j["key"], "conv-1");
        assert_eq!(j["chunk"]["chunk_token_offset"], 3);
        assert_eq!(j["chunk"]["function_call_id"], "f1");
        assert_eq!(j["chunk"]["x-trace-id"], "abc");
        assert_eq!(j["headers"][1]["encoding"], "base64");
        assert_eq!(j["headers"][1]["value"], "//4=");
    }
}
