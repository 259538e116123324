//! Vector-sink benchmark (issue 9): 384-float embedding records at a fixed rate (default
//! 10k msg/s) into each real sink, through a real `strom serve` and a real `strom connect`,
//! against the same records written straight into the database with its own client.
//!
//! Per sink (PostgreSQL + pgvector, Chroma), on 127.0.0.1:
//! - connector run: an rdkafka producer sends JSON records (each stamped with its send time)
//!   to a one-partition topic on the intended schedule for `BENCH_SECS`; `strom connect`
//!   sinks them. Sustained rate and produce-to-visible latency p50/p99.
//! - direct max: the same records written flat out with the database's client in its plain
//!   bulk form (pgvector: binary COPY per batch, one transaction each; Chroma: `/add` of a
//!   batch), one batch at a time like the connector: the sink's ceiling.
//! - direct paced: the same writer fed at the rate, batches of `batch_size` or what came within
//!   `linger_ms`: write-to-visible latency p50/p99.
//!
//! Visibility is observed, the same way for all three runs, by polling the database every
//! `BENCH_POLL_MS`: pgvector `max(seq)` (a b-tree index on `seq`), Chroma `count`. With one
//! partition and batches applied in offset order, "n records visible" means records 0..n are,
//! so each record's latency is the end of the first poll that saw it minus its *intended*
//! send time (the schedule: stalls are not hidden). Resolution: the poll period plus one poll
//! query, both printed. Latencies go into HdrHistograms (µs).
//!
//! Not a test: run it by hand (`cargo bench -p strom-connectors --bench sinks`, see
//! benches/README.md). It needs the release `strom` binary and the vector-DB venv, like the
//! end-to-end tests. Every server is stopped by PID at the end, also when a run fails.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{
    create_topics, free_port, start_chroma, start_connector, start_milvus, start_postgres,
    start_strom, start_weaviate,
};
use common::{Proc, Rng, TestDir, DIM};
use hdrhistogram::Histogram;
use milvus::v2::prelude::{
    ClientV2, ConnectConfig, ConsistencyLevel, FieldData, InsertRequest, QueryRequest,
    TelemetryConfig,
};
use pgvector::Vector;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use serde_json::json;
use strom_connectors::record::{offset_id, Doc, FieldType, Schema};
use strom_connectors::sink::milvus::columns as milvus_columns;
use strom_connectors::sink::Sink;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

const TOPIC: &str = "bench";

struct Params {
    secs: u64,
    rate: u64,
    batch: usize,
    linger_ms: u64,
    poll_ms: u64,
    drain_secs: u64,
    pg_hnsw: bool,
    sinks: Vec<String>,
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl Params {
    fn from_env() -> Params {
        Params {
            secs: env("BENCH_SECS", 20),
            rate: env("BENCH_RATE", 10_000),
            batch: env("BENCH_BATCH", 128),
            linger_ms: env("BENCH_LINGER_MS", 20),
            poll_ms: env("BENCH_POLL_MS", 5),
            drain_secs: env("BENCH_DRAIN_SECS", 30),
            pg_hnsw: env("BENCH_PG_HNSW", 1) == 1,
            sinks: env("BENCH_SINKS", "pgvector chroma milvus".to_string())
                .split_whitespace()
                .map(str::to_string)
                .collect(),
        }
    }

    /// The scalar knobs (for a task that outlives the borrow).
    fn copy(&self) -> Params {
        Params {
            sinks: Vec::new(),
            ..*self
        }
    }

    fn records(&self) -> u64 {
        self.secs * self.rate
    }

    /// When record `seq` is due, from the run's start.
    fn intended(&self, seq: u64) -> Duration {
        Duration::from_nanos(seq * 1_000_000_000 / self.rate)
    }
}

/// Record `seq`'s vector: deterministic, distinct per record (duplicates would flatter or
/// hurt an HNSW index), cheap to regenerate for the direct runs.
fn vector(seq: u64) -> Vec<f32> {
    let mut rng = Rng::new(seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5eed);
    (0..DIM).map(|_| rng.unit()).collect()
}

fn title(seq: u64) -> String {
    format!("document {seq}")
}

fn unix_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or_default()
}

/// The JSON after the send stamp (`"title":...,"embedding_vector":[...]}`), made before the
/// run so formatting 384 floats per record does not load the machine while it is measured.
fn json_tails(n: u64) -> Vec<Vec<u8>> {
    (0..n)
        .map(|seq| {
            // A struct, not `json!`: the vector keeps f32's shortest decimal form (json!
            // would widen it to f64 digits).
            #[derive(serde::Serialize)]
            struct Tail {
                title: String,
                embedding_vector: Vec<f32>,
            }
            let v = serde_json::to_string(&Tail {
                title: title(seq),
                embedding_vector: vector(seq),
            })
            .expect("json");
            v.as_bytes()[1..].to_vec()
        })
        .collect()
}

fn record_json(seq: i64, tail: &[u8]) -> Vec<u8> {
    let mut out = format!("{{\"seq\":{seq},\"sent_us\":{},", unix_us()).into_bytes();
    out.extend_from_slice(tail);
    out
}

/// A database as the benchmark sees it: its own client, for tables/collections, bulk writes
/// and the visibility probe.
enum Db {
    Pg {
        client: tokio_postgres::Client,
        vector_type: Type,
    },
    Chroma {
        http: reqwest::Client,
        base: String,
    },
    Milvus {
        client: ClientV2,
        url: String,
    },
    Weaviate {
        http: reqwest::Client,
        url: String,
    },
}

/// One table / collection.
#[derive(Clone)]
enum Target {
    Pg(String),
    Chroma(String),
    Milvus(String),
    Weaviate(String),
}

/// A table name as a Weaviate class name (upper camel case: `bench_connector` → `BenchConnector`).
fn weaviate_class(name: &str) -> String {
    name.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The connector's config for a sink of `kind` into `collection` (as the connector names it).
fn sink_config(kind: &str, url: &str, collection: &str) -> strom_connectors::ConnectorConfig {
    strom_connectors::config::parse(&format!(
        r#"[source]
bootstrap = "127.0.0.1:9"
topics = ["{TOPIC}"]
group_id = "bench"
[sink]
type = "{kind}"
url = "{url}"
collection = "{collection}"
embedding_field = "embedding_vector"
"#
    ))
    .expect("sink config")
    .connectors
    .remove(0)
}

/// The records' shape, as the connector infers it from the first record.
fn record_schema() -> Schema {
    Schema {
        dimension: DIM,
        fields: [
            ("seq", FieldType::Int),
            ("sent_us", FieldType::Int),
            ("title", FieldType::Text),
        ]
        .into_iter()
        .map(|(n, t)| (n.to_string(), t))
        .collect(),
    }
}

fn milvus_error(e: milvus::v2::error::Error) -> String {
    e.to_string()
}

async fn pg_client(url: &str) -> tokio_postgres::Client {
    // The port listens while the server still refuses connections ("starting up").
    let deadline = Instant::now() + Duration::from_secs(60);
    let (client, conn) = loop {
        match tokio_postgres::connect(url, tokio_postgres::NoTls).await {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                eprintln!("postgres not ready yet: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("postgres connect: {e}"),
        }
    };
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

impl Db {
    async fn open(kind: &str, url: &str) -> Db {
        match kind {
            "pgvector" => {
                let client = pg_client(url).await;
                client
                    .batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
                    .await
                    .expect("pgvector extension");
                let vector_type = client
                    .prepare("SELECT $1::vector")
                    .await
                    .expect("vector type")
                    .params()[0]
                    .clone();
                Db::Pg {
                    client,
                    vector_type,
                }
            }
            "chroma" => Db::Chroma {
                http: reqwest::Client::new(),
                base: format!(
                    "{url}/api/v2/tenants/default_tenant/databases/default_database/collections"
                ),
            },
            "milvus" => {
                let config = ConnectConfig::new()
                    .uri(url.to_string())
                    .rpc_timeout(Duration::from_secs(120))
                    .telemetry(TelemetryConfig::new().enabled(false));
                let deadline = Instant::now() + Duration::from_secs(120);
                let client = loop {
                    match ClientV2::new(&config).await {
                        Ok(c) => break c,
                        Err(e) if Instant::now() < deadline => {
                            eprintln!("milvus not ready yet: {}", milvus_error(e));
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                        Err(e) => panic!("milvus connect: {}", milvus_error(e)),
                    }
                };
                Db::Milvus {
                    client,
                    url: url.to_string(),
                }
            }
            "weaviate" => Db::Weaviate {
                http: reqwest::Client::new(),
                url: url.to_string(),
            },
            other => panic!("unknown sink {other}"),
        }
    }

    /// Creates `name` as the connector would (pgvector: its columns, its HNSW cosine index when
    /// `hnsw`; Chroma: the cosine space), plus, for pgvector, the b-tree on `seq` the probe
    /// reads. The connector adopts an existing table or collection that fits its records.
    async fn create(&self, name: &str, hnsw: bool) -> Target {
        match self {
            Db::Pg { client, .. } => {
                let index = if hnsw {
                    format!(
                        "CREATE INDEX ON {name} USING hnsw (embedding_vector vector_cosine_ops);"
                    )
                } else {
                    String::new()
                };
                client
                    .batch_execute(&format!(
                        "CREATE TABLE {name} (id text PRIMARY KEY, embedding_vector vector({DIM}),
                             sent_us bigint, seq bigint, title text);
                         {index}
                         CREATE INDEX ON {name} (seq);"
                    ))
                    .await
                    .expect("create table");
                Target::Pg(name.to_string())
            }
            Db::Chroma { http, base } => {
                let r: serde_json::Value = http
                    .post(base.as_str())
                    .json(&json!({"name": name, "get_or_create": true,
                                  "configuration": {"hnsw": {"space": "cosine"}}}))
                    .send()
                    .await
                    .and_then(|r| r.error_for_status())
                    .expect("create collection")
                    .json()
                    .await
                    .expect("collection json");
                Target::Chroma(r["id"].as_str().expect("collection id").to_string())
            }
            Db::Milvus { url, .. } => {
                // Exactly the collection the connector creates (its schema, HNSW index for
                // cosine, loaded), made by the connector's own code; only the writes differ.
                let cfg = sink_config("milvus", url, name);
                let mut sink = Sink::connect(&cfg).await.expect("milvus sink connect");
                sink.prepare(&record_schema())
                    .await
                    .expect("milvus collection");
                Target::Milvus(name.to_string())
            }
            Db::Weaviate { url, .. } => {
                // The class the connector creates, by its own code (explicit properties,
                // cosine HNSW).
                let class = weaviate_class(name);
                let mut sink = Sink::connect(&sink_config("weaviate", url, &class))
                    .await
                    .expect("weaviate sink connect");
                sink.prepare(&record_schema())
                    .await
                    .expect("weaviate class");
                Target::Weaviate(class)
            }
        }
    }

    /// How many of the timed records (seq >= 0) are visible.
    async fn visible(&self, t: &Target) -> u64 {
        match (self, t) {
            (Db::Pg { client, .. }, Target::Pg(table)) => {
                let row = client
                    .query_one(&format!("SELECT coalesce(max(seq), -1) FROM {table}"), &[])
                    .await
                    .expect("max(seq)");
                (row.get::<_, i64>(0) + 1) as u64
            }
            (Db::Chroma { http, base }, Target::Chroma(id)) => http
                .get(format!("{base}/{id}/count"))
                .send()
                .await
                .and_then(|r| r.error_for_status())
                .expect("chroma count")
                .json::<u64>()
                .await
                .expect("count json"),
            (Db::Milvus { client, .. }, Target::Milvus(name)) => {
                let r = client
                    .query(
                        QueryRequest::builder()
                            .collection_name(name)
                            .output_fields(["count(*)"])
                            .consistency_level(ConsistencyLevel::Strong)
                            .build()
                            .expect("count request"),
                    )
                    .await
                    .unwrap_or_else(|e| panic!("milvus count: {}", milvus_error(e)));
                match r.results().get_output_field("count(*)") {
                    Some(FieldData::Int64 { values, .. }) if values.len() == 1 => values[0] as u64,
                    other => panic!("milvus count: {other:?}"),
                }
            }
            (Db::Weaviate { http, url }, Target::Weaviate(class)) => {
                let q = format!("{{ Aggregate {{ {class} {{ meta {{ count }} }} }} }}");
                let v: serde_json::Value = http
                    .post(format!("{url}/v1/graphql"))
                    .json(&json!({"query": q}))
                    .send()
                    .await
                    .and_then(|r| r.error_for_status())
                    .expect("weaviate count")
                    .json()
                    .await
                    .expect("count json");
                v["data"]["Aggregate"][class][0]["meta"]["count"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("weaviate count: {v}"))
            }
            _ => unreachable!("target of another database"),
        }
    }

    /// Writes records `seqs` in the plain bulk form: binary COPY in one transaction, or one
    /// Chroma `/add`. Returns once the database acknowledged.
    async fn write(&mut self, t: &Target, seqs: std::ops::Range<u64>) {
        let sent = unix_us();
        match (self, t) {
            (
                Db::Pg {
                    client,
                    vector_type,
                },
                Target::Pg(table),
            ) => {
                let tx = client.transaction().await.expect("begin");
                let sink = tx
                    .copy_in(&format!(
                        "COPY {table} (id, embedding_vector, sent_us, seq, title) FROM STDIN BINARY"
                    ))
                    .await
                    .expect("copy in");
                let types = [
                    Type::TEXT,
                    vector_type.clone(),
                    Type::INT8,
                    Type::INT8,
                    Type::TEXT,
                ];
                let writer = BinaryCopyInWriter::new(sink, &types);
                futures::pin_mut!(writer);
                for seq in seqs {
                    let id = offset_id(table, 0, seq as i64);
                    let v = Vector::from(vector(seq));
                    let s = seq as i64;
                    let title = title(seq);
                    let row: [&(dyn ToSql + Sync); 5] = [&id, &v, &sent, &s, &title];
                    writer.as_mut().write(&row).await.expect("copy row");
                }
                writer.finish().await.expect("copy finish");
                tx.commit().await.expect("commit");
            }
            (Db::Chroma { http, base }, Target::Chroma(id)) => {
                let ids: Vec<String> = seqs.clone().map(|s| offset_id(id, 0, s as i64)).collect();
                let embeddings: Vec<Vec<f32>> = seqs.clone().map(vector).collect();
                let metadatas: Vec<serde_json::Value> = seqs
                    .map(|s| json!({"seq": s, "sent_us": sent, "title": title(s)}))
                    .collect();
                http.post(format!("{base}/{id}/add"))
                    .json(&json!({"ids": ids, "embeddings": embeddings, "metadatas": metadatas}))
                    .send()
                    .await
                    .and_then(|r| r.error_for_status())
                    .expect("chroma add");
            }
            (Db::Milvus { client, .. }, Target::Milvus(name)) => {
                let docs: Vec<Doc> = seqs
                    .map(|s| Doc {
                        id: offset_id(name, 0, s as i64),
                        vector: vector(s),
                        fields: json!({"seq": s, "sent_us": sent, "title": title(s)})
                            .as_object()
                            .expect("object")
                            .clone(),
                        tenant: None,
                    })
                    .collect();
                let refs: Vec<&Doc> = docs.iter().collect();
                let columns = milvus_columns(&record_schema(), "embedding_vector", &refs)
                    .expect("milvus columns");
                client
                    .insert(
                        InsertRequest::builder()
                            .collection_name(name)
                            .columns(columns)
                            .build()
                            .expect("insert request"),
                    )
                    .await
                    .unwrap_or_else(|e| panic!("milvus insert: {}", milvus_error(e)));
            }
            (Db::Weaviate { http, url }, Target::Weaviate(class)) => {
                let objects: Vec<serde_json::Value> = seqs
                    .map(|s| {
                        json!({"class": class, "id": offset_id(class, 0, s as i64),
                               "vector": vector(s),
                               "properties": {"seq": s, "sent_us": sent, "title": title(s)}})
                    })
                    .collect();
                let answer: serde_json::Value = http
                    .post(format!("{url}/v1/batch/objects"))
                    .json(&json!({"objects": objects}))
                    .send()
                    .await
                    .and_then(|r| r.error_for_status())
                    .expect("weaviate batch")
                    .json()
                    .await
                    .expect("batch json");
                assert!(
                    answer
                        .as_array()
                        .into_iter()
                        .flatten()
                        .all(|o| o["result"]["errors"].is_null()),
                    "weaviate batch errors: {answer}"
                );
            }
            _ => unreachable!("target of another database"),
        }
    }
}

/// CPU seconds (user + system) of `root` and every process below it (postgres forks a
/// backend per connection; live children are not in the parent's own counters). For this
/// process, only itself: the servers it started are its children.
fn tree_cpu(root: u32) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut procs: Vec<(u32, u32, u64)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the command name, which is in parentheses and may hold spaces.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        procs.push((pid, num(1) as u32, num(11) + num(12)));
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() && root != std::process::id() {
        let parent = tree[i];
        tree.extend(procs.iter().filter(|p| p.1 == parent).map(|p| p.0));
        i += 1;
    }
    procs
        .iter()
        .filter(|p| tree.contains(&p.0))
        .map(|p| p.2 as f64 / hz)
        .sum()
}

/// CPU use of named process trees over a run, as "name X s" (the machine has
/// `available_parallelism` cores for all of them, and for the other engineers' builds).
struct CpuMeter(Vec<(&'static str, u32, f64)>, Instant);

impl CpuMeter {
    fn start(procs: &[(&'static str, u32)]) -> CpuMeter {
        CpuMeter(
            procs
                .iter()
                .map(|&(n, pid)| (n, pid, tree_cpu(pid)))
                .collect(),
            Instant::now(),
        )
    }

    fn report(&self) -> String {
        let wall = self.1.elapsed().as_secs_f64();
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|&(name, pid, before)| format!("{name} {:.1}", tree_cpu(pid) - before))
            .collect();
        format!("CPU s over {wall:.0} s: {}", parts.join(", "))
    }
}

/// What one run measured.
#[derive(Default)]
struct Outcome {
    /// Records visible / seconds from the first intended send to the last visible.
    rate: f64,
    /// Records produced (sent) but not visible when the schedule ended.
    backlog_at_end: u64,
    /// Records not visible when the drain bound ran out.
    never_visible: u64,
    latency: Option<Histogram<u64>>,
    /// Poll queries' own duration (µs): part of the resolution.
    probe: Option<Histogram<u64>>,
    /// The connector's own account (its /metrics): batches, records, mean sink write.
    sink_writes: Option<String>,
    /// CPU seconds per process over the run.
    cpu: Option<String>,
    /// The worst latency (ms) of the records due in each second of the schedule: where a
    /// tail comes from (the start, one stall, or spread).
    worst_by_sec: Vec<f64>,
    /// Connector runs: the producer's send-to-acknowledged latency (µs), acks=all.
    produce_ack: Option<Histogram<u64>>,
}

/// Batches, records per batch and mean sink write time from the connector's /metrics.
async fn sink_writes(admin: u16, wall: Duration) -> Option<String> {
    let text = reqwest::get(format!("http://127.0.0.1:{admin}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let value = |name: &str| -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(name))?
            .rsplit(' ')
            .next()?
            .parse()
            .ok()
    };
    let batches = value("strom_connector_batches_written_total")?;
    let records = value("strom_connector_records_written_total")?;
    let seconds = value("strom_connector_sink_latency_seconds_sum")?;
    Some(format!(
        "{batches} batches, {:.0} records per batch, sink write {:.1} ms per batch ({:.0}% of the run's wall time)",
        records / batches.max(1.0),
        seconds * 1000.0 / batches.max(1.0),
        seconds * 100.0 / wall.as_secs_f64()
    ))
}

fn hist() -> Histogram<u64> {
    Histogram::new(3).expect("histogram")
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Polls `target` until `total` records are visible or `deadline`; records each record's
/// latency from its intended time (`start` + schedule) to the end of the poll that first saw
/// it. `sent` is how many the producer had sent; `end_of_schedule` when it finished.
async fn observe(
    db: &Db,
    target: &Target,
    p: &Params,
    start: Instant,
    total: u64,
    offset: u64,
    schedule_done: Arc<AtomicU64>,
) -> Outcome {
    let mut latency = hist();
    let mut probe = hist();
    let mut worst_by_sec: Vec<u64> = Vec::new();
    let mut seen = 0u64;
    let mut backlog_at_end = None;
    let mut last_visible_at = start;
    let schedule_end = start + p.intended(total);
    let deadline = schedule_end + Duration::from_secs(p.drain_secs);
    let period = Duration::from_millis(p.poll_ms);
    while seen < total && Instant::now() < deadline {
        let t0 = Instant::now();
        let visible = db.visible(target).await.saturating_sub(offset).min(total);
        let t1 = Instant::now();
        probe
            .record(t1.duration_since(t0).as_micros() as u64)
            .expect("auto-resizing histogram");
        if visible > seen {
            last_visible_at = t1;
        }
        while seen < visible {
            let due = start + p.intended(seen);
            let us = t1.saturating_duration_since(due).as_micros() as u64;
            latency.record(us).expect("auto-resizing histogram");
            let sec = (seen / p.rate.max(1)) as usize;
            if worst_by_sec.len() <= sec {
                worst_by_sec.resize(sec + 1, 0);
            }
            worst_by_sec[sec] = worst_by_sec[sec].max(us);
            seen += 1;
        }
        if backlog_at_end.is_none() && t0 >= schedule_end {
            let sent = schedule_done.load(Ordering::Relaxed).min(total);
            backlog_at_end = Some(sent.saturating_sub(visible));
        }
        let next = t0 + period;
        tokio::time::sleep_until(next.into()).await;
    }
    // Records never seen count as seen at the bound: a lower bound on their latency.
    let never_visible = total - seen;
    let now = Instant::now();
    for s in seen..total {
        latency
            .record(
                now.saturating_duration_since(start + p.intended(s))
                    .as_micros() as u64,
            )
            .expect("auto-resizing histogram");
    }
    let elapsed = last_visible_at
        .duration_since(start)
        .as_secs_f64()
        .max(1e-9);
    Outcome {
        rate: seen as f64 / elapsed,
        backlog_at_end: backlog_at_end.unwrap_or(0),
        never_visible,
        latency: Some(latency),
        probe: Some(probe),
        sink_writes: None,
        cpu: None,
        worst_by_sec: worst_by_sec.into_iter().map(ms).collect(),
        produce_ack: None,
    }
}

/// Records each message's send-to-acknowledged time (the opaque is its send instant).
struct AckTimer(Arc<std::sync::Mutex<Histogram<u64>>>);

impl rdkafka::ClientContext for AckTimer {}

impl rdkafka::producer::ProducerContext for AckTimer {
    type DeliveryOpaque = Box<Instant>;
    fn delivery(&self, _: &rdkafka::message::DeliveryResult<'_>, sent: Box<Instant>) {
        let us = sent.elapsed().as_micros() as u64;
        if let Ok(mut h) = self.0.lock() {
            let _ = h.record(us);
        }
    }
}

/// The schedule's producer (acks=all unless `BENCH_ACKS`), connected and with the measured
/// topic's metadata: one record (seq -2, never timed) to [`TOPIC`] acknowledged.
fn paced_producer(
    bootstrap: &str,
    acks: Arc<std::sync::Mutex<Histogram<u64>>>,
    tail: &[u8],
) -> ThreadedProducer<AckTimer> {
    // BENCH_ACKS (default all): to tell the broker's durable-ack wait from the rest.
    let acks_mode = std::env::var("BENCH_ACKS").unwrap_or_else(|_| "all".into());
    let producer: ThreadedProducer<AckTimer> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", &acks_mode)
        .set("linger.ms", "1")
        .set("queue.buffering.max.kbytes", "262144")
        .create_with_context(AckTimer(acks.clone()))
        .expect("producer");
    let warm = record_json(-2, tail);
    producer
        .send(
            BaseRecord::<(), Vec<u8>, Box<Instant>>::with_opaque_to(
                TOPIC,
                Box::new(Instant::now()),
            )
            .partition(0)
            .payload(&warm),
        )
        .map_err(|(e, _)| e)
        .expect("warm-up send");
    producer
        .flush(Duration::from_secs(60))
        .expect("warm-up flush");
    // The warm-up's own ack time is not the schedule's.
    if let Ok(mut h) = acks.lock() {
        h.reset();
    }
    producer
}

/// Sends records 0..n on the schedule from a producer thread; `sent` counts them.
fn produce_paced(
    producer: ThreadedProducer<AckTimer>,
    p: &Params,
    start: Instant,
    tails: Arc<Vec<Vec<u8>>>,
    sent: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    let n = tails.len() as u64;
    let rate = p.rate;
    std::thread::spawn(move || {
        let intended = |seq: u64| Duration::from_nanos(seq * 1_000_000_000 / rate);
        let mut seq = 0u64;
        while seq < n {
            let due = start + intended(seq);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
                continue;
            }
            let value = record_json(seq as i64, &tails[seq as usize]);
            let mut rec: BaseRecord<'_, (), Vec<u8>, Box<Instant>> =
                BaseRecord::with_opaque_to(TOPIC, Box::new(Instant::now()))
                    .partition(0)
                    .payload(&value);
            loop {
                match producer.send(rec) {
                    Ok(()) => break,
                    Err((e, back)) => {
                        // Queue full: let librdkafka drain, then retry the same record.
                        assert!(
                            matches!(
                                e,
                                rdkafka::error::KafkaError::MessageProduction(
                                    rdkafka::types::RDKafkaErrorCode::QueueFull
                                )
                            ),
                            "produce: {e}"
                        );
                        rec = back;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
            seq += 1;
            sent.store(seq, Ordering::Relaxed);
        }
        producer.flush(Duration::from_secs(60)).expect("flush");
    })
}

fn connect_toml(kind: &str, url: &str, bootstrap: &str, admin: u16, p: &Params) -> String {
    format!(
        r#"admin_listen = "127.0.0.1:{admin}"
[source]
bootstrap = "{bootstrap}"
topics = ["{TOPIC}"]
group_id = "bench"
[sink]
type = "{kind}"
url = "{url}"
collection = "{collection}"
batch_size = {batch}
linger_ms = {linger}
embedding_field = "embedding_vector"
"#,
        batch = p.batch,
        linger = p.linger_ms,
        collection = if kind == "weaviate" {
            weaviate_class("bench_connector")
        } else {
            "bench_connector".to_string()
        },
    )
}

/// Connector run: strom serve + strom connect into a fresh table, produce on the schedule.
async fn connector_run(
    kind: &str,
    url: &str,
    db_pid: u32,
    dir: &std::path::Path,
    p: &Params,
    tails: Arc<Vec<Vec<u8>>>,
) -> Outcome {
    let (mut strom, bootstrap) = start_strom(dir);
    create_topics(&bootstrap, &[(TOPIC, 1), ("bench-dlq", 1)]).await;
    let db = Db::open(kind, url).await;
    let target = db.create("bench_connector", p.pg_hnsw).await;
    let admin = free_port();
    let mut connector = start_connector(dir, &connect_toml(kind, url, &bootstrap, admin, p), 0);
    // Warm-up: one record (seq -1) through the whole path, so group join and the first
    // batch's setup are not in the figures.
    {
        let warm: ThreadedProducer<_> = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()
            .expect("producer");
        let v = record_json(-1, &tails[0]);
        warm.send(
            BaseRecord::<(), Vec<u8>>::to(TOPIC)
                .partition(0)
                .payload(&v),
        )
        .map_err(|(e, _)| e)
        .expect("warm-up send");
        warm.flush(Duration::from_secs(30)).expect("warm-up flush");
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let ready = match &target {
                Target::Pg(t) => match &db {
                    Db::Pg { client, .. } => {
                        client
                            .query_one(&format!("SELECT count(*) FROM {t}"), &[])
                            .await
                            .expect("count")
                            .get::<_, i64>(0)
                            >= 1
                    }
                    _ => unreachable!(),
                },
                Target::Chroma(_) | Target::Milvus(_) | Target::Weaviate(_) => {
                    db.visible(&target).await >= 1
                }
            };
            if ready {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "connector did not sink the warm-up record within 120 s (see {})",
                dir.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let sent = Arc::new(AtomicU64::new(0));
    let acks = Arc::new(std::sync::Mutex::new(hist()));
    // The producer is connected before the schedule starts: a new librdkafka client's first
    // records wait for its bootstrap (connection, ApiVersions, Metadata, the leader's
    // connection), which held the first ~0.9 s of records and made the p99 (issue 26).
    let paced = paced_producer(&bootstrap, acks.clone(), &tails[0]);
    let start = Instant::now() + Duration::from_millis(100);
    let total = tails.len() as u64;
    let cpu = CpuMeter::start(&[
        ("strom serve", strom.child.id()),
        ("strom connect", connector.child.id()),
        ("database", db_pid),
        ("bench (producer, probe)", std::process::id()),
    ]);
    let producer = produce_paced(paced, p, start, tails, sent.clone());
    // The counts (Chroma, Milvus, Weaviate) include the two warm-up records (the connector's,
    // the paced producer's); pgvector's max(seq) does not.
    let offset = if matches!(target, Target::Pg(_)) {
        0
    } else {
        2
    };
    let out = observe(&db, &target, p, start, total, offset, sent).await;
    let _ = tokio::task::spawn_blocking(move || producer.join()).await;
    let mut out = out;
    out.cpu = Some(cpu.report());
    out.produce_ack = acks.lock().ok().map(|h| h.clone());
    out.sink_writes = sink_writes(admin, start.elapsed()).await;
    connector.terminate();
    strom.terminate();
    out
}

/// Direct run, flat out: batches of `batch` written back to back until every record is
/// written or for the connector run's window (`secs` + `drain_secs`): an HNSW insert costs
/// more as the index grows, so a shorter run would flatter the direct client.
async fn direct_max(kind: &str, url: &str, db_pid: u32, p: &Params) -> Outcome {
    let mut db = Db::open(kind, url).await;
    let target = db.create("bench_direct_max", p.pg_hnsw).await;
    let cpu = CpuMeter::start(&[("database", db_pid), ("bench (writer)", std::process::id())]);
    let start = Instant::now();
    let bound = start + Duration::from_secs(p.secs + p.drain_secs);
    let mut written = 0u64;
    while written < p.records() && Instant::now() < bound {
        let end = (written + p.batch as u64).min(p.records());
        db.write(&target, written..end).await;
        written = end;
    }
    // Acknowledged is not necessarily visible (Chroma): wait until it is.
    let deadline = Instant::now() + Duration::from_secs(p.drain_secs);
    while db.visible(&target).await < written && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(p.poll_ms)).await;
    }
    let visible = db.visible(&target).await;
    Outcome {
        rate: visible.min(written) as f64 / start.elapsed().as_secs_f64(),
        never_visible: written - visible.min(written),
        cpu: Some(cpu.report()),
        ..Outcome::default()
    }
}

/// Direct run at the rate: records become due on the schedule; the writer takes up to
/// `batch` due records, waiting at most `linger` after the oldest for a full batch.
async fn direct_paced(kind: &str, url: &str, db_pid: u32, p: &Params) -> Outcome {
    let mut db = Db::open(kind, url).await;
    let target = db.create("bench_direct_paced", p.pg_hnsw).await;
    let cpu = CpuMeter::start(&[
        ("database", db_pid),
        ("bench (writer, probe)", std::process::id()),
    ]);
    let probe_db = Db::open(kind, url).await;
    let total = p.records();
    let start = Instant::now() + Duration::from_millis(100);
    let due_count = move |now: Instant, p: &Params| -> u64 {
        if now < start {
            return 0;
        }
        ((now - start).as_nanos() as u64 * p.rate / 1_000_000_000 + 1).min(total)
    };
    let done = Arc::new(AtomicU64::new(0));
    let observer = {
        let target = target.clone();
        let p2 = p.copy();
        let done = done.clone();
        tokio::spawn(async move { observe(&probe_db, &target, &p2, start, total, 0, done).await })
    };
    let linger = Duration::from_millis(p.linger_ms);
    let mut written = 0u64;
    let hard_end = start + p.intended(total) + Duration::from_secs(p.drain_secs);
    while written < total && Instant::now() < hard_end {
        let now = Instant::now();
        let due = due_count(now, p);
        done.store(due, Ordering::Relaxed);
        let pending = due - written;
        let oldest = start + p.intended(written);
        if pending >= p.batch as u64 || (pending > 0 && (now >= oldest + linger || due == total)) {
            let end = written + pending.min(p.batch as u64);
            db.write(&target, written..end).await;
            written = end;
            continue;
        }
        // Sleep until the batch fills or the oldest record's linger runs out.
        let fill = start + p.intended(written + p.batch as u64 - 1);
        let wake = if pending > 0 {
            fill.min(oldest + linger)
        } else {
            fill.min(oldest)
        };
        tokio::time::sleep_until(wake.max(now + Duration::from_micros(100)).into()).await;
    }
    done.store(total, Ordering::Relaxed);
    let mut out = observer.await.expect("observer");
    out.cpu = Some(cpu.report());
    out
}

struct Row {
    sink: String,
    connector: Outcome,
    max: Outcome,
    paced: Outcome,
}

fn pct(h: &Option<Histogram<u64>>, q: f64) -> f64 {
    h.as_ref().map_or(f64::NAN, |h| ms(h.value_at_quantile(q)))
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A fresh database server for each run, so one run's background work (index building,
/// compaction, checkpoints) does not land in the next run's figures.
async fn start_db(kind: &str, dir: &std::path::Path) -> (Proc, String) {
    let (server, url) = match kind {
        "pgvector" => start_postgres(dir),
        "chroma" => start_chroma(dir),
        "milvus" => start_milvus(dir),
        "weaviate" => {
            let (p, url, _) = start_weaviate(dir);
            (p, url)
        }
        other => panic!("unknown sink {other} (BENCH_SINKS: pgvector chroma milvus weaviate)"),
    };
    if kind == "chroma" {
        // The port listens before the API answers.
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        while http
            .get(format!("{url}/api/v2/heartbeat"))
            .send()
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "chroma did not answer");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    (server, url)
}

async fn bench_sink(kind: &str, p: &Params, tails: Arc<Vec<Vec<u8>>>) -> Row {
    eprintln!("[{kind}] connector run (load {})", loadavg());
    let connector = {
        let dir = TestDir::new();
        let (mut server, url) = start_db(kind, dir.path()).await;
        let out = connector_run(kind, &url, server.child.id(), dir.path(), p, tails).await;
        server.terminate();
        out
    };
    eprintln!("[{kind}] direct, flat out (load {})", loadavg());
    let max = {
        let dir = TestDir::new();
        let (mut server, url) = start_db(kind, dir.path()).await;
        let out = direct_max(kind, &url, server.child.id(), p).await;
        server.terminate();
        out
    };
    eprintln!(
        "[{kind}] direct, paced at {}/s (load {})",
        p.rate,
        loadavg()
    );
    let paced = {
        let dir = TestDir::new();
        let (mut server, url) = start_db(kind, dir.path()).await;
        let out = direct_paced(kind, &url, server.child.id(), p).await;
        server.terminate();
        out
    };
    Row {
        sink: kind.to_string(),
        connector,
        max,
        paced,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument (a filter from `cargo test
    // --benches`) is ignored: everything here is opted into by running this bench.
    let p = Params::from_env();
    if !common::strom_bin().exists() {
        eprintln!(
            "SKIPPED sinks bench: {} missing (cargo build --release -p strom)",
            common::strom_bin().display()
        );
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    eprintln!("generating {} records of {DIM} floats", p.records());
    let tails = Arc::new(json_tails(p.records()));
    let load_before = loadavg();
    let mut rows = Vec::new();
    for kind in &p.sinks {
        rows.push(rt.block_on(bench_sink(kind, &p, tails.clone())));
    }
    println!(
        "vector sinks: {} s at {} msg/s of {DIM}-float JSON records ({} B each), batch_size {}, linger_ms {}, pgvector HNSW index {}; load average before {} after {}",
        p.secs, p.rate, tails[0].len() + 40, p.batch, p.linger_ms, if p.pg_hnsw { "on" } else { "off" }, load_before, loadavg()
    );
    println!();
    println!("| sink | connector rate msg/s | backlog at end | connector p50 / p99 ms | direct max msg/s | direct p50 / p99 ms at {}/s | direct rate at {}/s | connector / direct max |", p.rate, p.rate);
    println!("|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let never = |o: &Outcome| {
            if o.never_visible > 0 {
                format!(" ({} never visible)", o.never_visible)
            } else {
                String::new()
            }
        };
        println!(
            "| {} | {:.0}{} | {} | {:.1} / {:.1} | {:.0} | {:.1} / {:.1}{} | {:.0} | {:.2} |",
            r.sink,
            r.connector.rate,
            never(&r.connector),
            r.connector.backlog_at_end,
            pct(&r.connector.latency, 0.5),
            pct(&r.connector.latency, 0.99),
            r.max.rate,
            pct(&r.paced.latency, 0.5),
            pct(&r.paced.latency, 0.99),
            never(&r.paced),
            r.paced.rate,
            r.connector.rate / r.max.rate,
        );
    }
    println!();
    for r in &rows {
        println!(
            "resolution {}: poll every {} ms; poll query p50 / max {:.2} / {:.2} ms (connector run), {:.2} / {:.2} ms (direct paced)",
            r.sink, p.poll_ms, pct(&r.connector.probe, 0.5), pct(&r.connector.probe, 1.0), pct(&r.paced.probe, 0.5), pct(&r.paced.probe, 1.0)
        );
        if let Some(w) = &r.connector.sink_writes {
            println!("connector {}: {w}", r.sink);
        }
        if let Some(h) = &r.connector.produce_ack {
            println!(
                "connector {}: producer send-to-ack p50 / p99 / max {:.1} / {:.1} / {:.1} ms",
                r.sink,
                pct(&Some(h.clone()), 0.5),
                pct(&Some(h.clone()), 0.99),
                pct(&Some(h.clone()), 1.0)
            );
        }
        for (run, o) in [("connector", &r.connector), ("direct paced", &r.paced)] {
            let w: Vec<String> = o.worst_by_sec.iter().map(|m| format!("{m:.0}")).collect();
            println!(
                "{run} {}: worst latency per second of the schedule, ms: {}",
                r.sink,
                w.join(" ")
            );
        }
        for (run, o) in [
            ("connector", &r.connector),
            ("direct max", &r.max),
            ("direct paced", &r.paced),
        ] {
            if let Some(c) = &o.cpu {
                println!("{run} {}: {c}", r.sink);
            }
        }
    }
}
