//! RAG round trip (issue 26): a question's embedding produced to Strom → a retriever consumes
//! it, asks the vector database for the 5 nearest documents, produces their ids → the asker
//! consumes the context. Against the same nearest-neighbour query made directly (the
//! database's own round trip), so the difference is the broker's share: two produce→consume
//! hops through a real `strom serve`.
//!
//! Per sink in `BENCH_SINKS` (default `pgvector chroma milvus weaviate`), on 127.0.0.1: a fresh
//! database loaded with the e2e tests' 10k 384-float documents (1000 clusters of 10) through
//! the connector's own sink code; questions are cluster centres, sent on a schedule of
//! `BENCH_RAG_RATE`/s (default 50) for `BENCH_SECS` (default 20). Latency: the context's
//! arrival minus the question's intended send time, in an HdrHistogram. The retriever is
//! in this process (one rdkafka consumer and producer, the sink's client), as an
//! application's would be. Not run by CI: `cargo bench -p strom-connectors --bench rag`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    create_topics, start_chroma, start_milvus, start_postgres, start_strom, start_weaviate,
    Dataset, Proc, TestDir, CLUSTERS, DIM,
};
use hdrhistogram::Histogram;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use strom_connectors::record::{Doc, Op, Schema};
use strom_connectors::sink::Sink;

const K: usize = 5;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config(kind: &str, url: &str) -> strom_connectors::ConnectorConfig {
    let collection = if kind == "weaviate" {
        "RagDocs"
    } else {
        "rag_docs"
    };
    strom_connectors::config::parse(&format!(
        "[source]\nbootstrap = \"127.0.0.1:9\"\ntopics = [\"t\"]\ngroup_id = \"g\"\n\
         [sink]\ntype = \"{kind}\"\nurl = \"{url}\"\ncollection = \"{collection}\"\n\
         embedding_field = \"embedding\"\n"
    ))
    .expect("config")
    .connectors
    .remove(0)
}

async fn start_db(kind: &str, dir: &std::path::Path) -> (Proc, Sink) {
    let (p, url) = match kind {
        "pgvector" => start_postgres(dir),
        "chroma" => start_chroma(dir),
        "milvus" => start_milvus(dir),
        "weaviate" => {
            let (p, url, _) = start_weaviate(dir);
            (p, url)
        }
        other => panic!("unknown sink {other}"),
    };
    let cfg = config(kind, &url);
    let deadline = Instant::now() + Duration::from_secs(120);
    let sink = loop {
        match Sink::connect(&cfg).await {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                eprintln!("{kind} not ready yet: {e}");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("{kind}: {e}"),
        }
    };
    (p, sink)
}

/// The 10k documents, written in batches of 500 by the connector's sink code.
async fn load(sink: &mut Sink, data: &Dataset) {
    let docs: Vec<Op> = data
        .docs
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Op::Upsert(Doc {
                id: format!("doc-{i}"),
                vector: v.clone(),
                fields: serde_json::json!({"doc": i}).as_object().unwrap().clone(),
                tenant: None,
            })
        })
        .collect();
    let Op::Upsert(first) = &docs[0] else {
        unreachable!()
    };
    sink.prepare(&Schema::infer(first))
        .await
        .expect("collection");
    for chunk in docs.chunks(500) {
        let rejected = sink.write(chunk, None).await.expect("load");
        assert!(rejected.is_empty(), "{rejected:?}");
    }
}

fn hist() -> Histogram<u64> {
    Histogram::new(3).expect("histogram")
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// Questions through Strom: the retriever answers on `contexts`; the asker times each.
async fn via_strom(
    sink: Sink,
    data: &Dataset,
    bootstrap: &str,
    n: usize,
    rate: u64,
) -> Histogram<u64> {
    create_topics(bootstrap, &[("questions", 1), ("contexts", 1)]).await;
    let producer = |b: &str| -> FutureProducer {
        ClientConfig::new()
            .set("bootstrap.servers", b)
            .set("acks", "all")
            .set("linger.ms", "0")
            .create()
            .expect("producer")
    };
    let consumer = |b: &str, group: &str, topic: &str| -> StreamConsumer {
        let c: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", b)
            .set("group.id", group)
            .set("auto.offset.reset", "earliest")
            .set("fetch.wait.max.ms", "100")
            .create()
            .expect("consumer");
        c.subscribe(&[topic]).expect("subscribe");
        c
    };
    // The retriever: question → nearest K → context.
    let retriever_in = consumer(bootstrap, "retriever", "questions");
    let retriever_out = producer(bootstrap);
    let retriever = tokio::spawn(async move {
        let mut sink = sink;
        while let Ok(m) = retriever_in.recv().await {
            let bytes = m.payload().unwrap_or_default();
            let v: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let ids = sink.nearest(&v, K).await.expect("nearest");
            let key = m.key().unwrap_or_default().to_vec();
            let value = serde_json::to_vec(&ids).unwrap();
            retriever_out
                .send(
                    FutureRecord::to("contexts").key(&key).payload(&value),
                    Duration::from_secs(30),
                )
                .await
                .map_err(|(e, _)| e)
                .expect("context");
        }
    });
    let asker = consumer(bootstrap, "asker", "contexts");
    let sent: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    let out = producer(bootstrap);
    // Warm-up: one question through both hops (group joins, connections).
    let warm = f32_bytes(&data.centres[0]);
    out.send(
        FutureRecord::to("questions").key(b"warm").payload(&warm),
        Duration::from_secs(30),
    )
    .await
    .map_err(|(e, _)| e)
    .expect("warm-up");
    asker.recv().await.expect("warm-up context");
    let start = Instant::now() + Duration::from_millis(100);
    let asking = {
        let sent = sent.clone();
        let questions: Vec<Vec<u8>> = (0..n)
            .map(|i| f32_bytes(&data.centres[i % CLUSTERS]))
            .collect();
        tokio::spawn(async move {
            for (i, q) in questions.iter().enumerate() {
                let due = start + Duration::from_nanos(i as u64 * 1_000_000_000 / rate);
                tokio::time::sleep_until(due.into()).await;
                sent.lock().unwrap().insert(i as u64, due);
                let key = i.to_string();
                // Enqueued now; the delivery report is awaited elsewhere (the asker times the
                // context, not the ack).
                let delivery = out
                    .send_result(FutureRecord::to("questions").key(&key).payload(q))
                    .map_err(|(e, _)| e)
                    .expect("question enqueued");
                tokio::spawn(delivery);
            }
        })
    };
    let mut h = hist();
    let deadline = Instant::now() + Duration::from_secs(n as u64 / rate + 60);
    let mut got = 0;
    while got < n && Instant::now() < deadline {
        let Ok(Ok(m)) = tokio::time::timeout(Duration::from_secs(5), asker.recv()).await else {
            continue;
        };
        let at = Instant::now();
        let Some(i) = m
            .key()
            .and_then(|k| std::str::from_utf8(k).ok()?.parse::<u64>().ok())
        else {
            continue;
        };
        if let Some(due) = sent.lock().unwrap().remove(&i) {
            h.record(at.duration_since(due).as_micros() as u64).unwrap();
            got += 1;
        }
    }
    assert_eq!(got, n, "every question answered");
    asking.abort();
    retriever.abort();
    h
}

/// The same questions straight to the database, on the same schedule.
async fn direct(sink: &mut Sink, data: &Dataset, n: usize, rate: u64) -> Histogram<u64> {
    let mut h = hist();
    let start = Instant::now() + Duration::from_millis(100);
    for i in 0..n {
        let due = start + Duration::from_nanos(i as u64 * 1_000_000_000 / rate);
        tokio::time::sleep_until(due.into()).await;
        let ids = sink
            .nearest(&data.centres[i % CLUSTERS], K)
            .await
            .expect("nearest");
        assert_eq!(ids.len(), K);
        h.record(Instant::now().duration_since(due).as_micros() as u64)
            .unwrap();
    }
    h
}

fn main() {
    let sinks: Vec<String> = env("BENCH_SINKS", "pgvector chroma milvus weaviate".to_string())
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let secs: u64 = env("BENCH_SECS", 20);
    let rate: u64 = env("BENCH_RAG_RATE", 50);
    if !common::strom_bin().exists() {
        eprintln!(
            "SKIPPED rag bench: {} missing",
            common::strom_bin().display()
        );
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let data = Dataset::new();
    let n = (secs * rate) as usize;
    println!("RAG round trip: {n} questions at {rate}/s, top-{K} of 10k {DIM}-float documents");
    println!();
    println!(
        "| sink | via Strom p50 / p99 ms | direct p50 / p99 ms | Strom's share p50 / p99 ms |"
    );
    println!("|---|---|---|---|");
    for kind in &sinks {
        let (d, s) = rt.block_on(async {
            let dir = TestDir::new();
            let (_strom, bootstrap) = start_strom(dir.path());
            let (_db, mut sink) = start_db(kind, dir.path()).await;
            eprintln!("[{kind}] loading 10k documents");
            load(&mut sink, &data).await;
            eprintln!("[{kind}] direct");
            let d = direct(&mut sink, &data, n, rate).await;
            eprintln!("[{kind}] via strom");
            let s = via_strom(sink, &data, &bootstrap, n, rate).await;
            (d, s)
        });
        println!(
            "| {kind} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} |",
            ms(&s, 0.5),
            ms(&s, 0.99),
            ms(&d, 0.5),
            ms(&d, 0.99),
            ms(&s, 0.5) - ms(&d, 0.5),
            ms(&s, 0.99) - ms(&d, 0.99)
        );
    }
}
