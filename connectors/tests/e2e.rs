//! End to end, per real server: 10k records of 384-dim embeddings (plus bad records) produced
//! to a real `strom serve`, sunk by a real `strom connect` that is killed -9 mid-stream and
//! restarted; then the database must hold exactly the 10k objects with their vectors, a top-10
//! query by a cluster centre must return that cluster, the bad records must be in the DLQ
//! naming their error, a replay from offset 0 (a new group) must leave the count unchanged,
//! and a keyed tombstone must delete its object. See tests/common for the setup.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

use common::*;
use strom_connectors::config::{self, ConnectorConfig};
use strom_connectors::record::offset_id;
use strom_connectors::sink::Sink;

const TOPIC: &str = "embeddings";
const KEYED: &str = "keyed";

fn connect_toml(kind: &str, url: &str, bootstrap: &str, admin: u16, group: &str) -> String {
    // Weaviate class names start upper-case.
    let (documents, keyed_docs) = match kind {
        "weaviate" => ("Documents", "KeyedDocs"),
        _ => ("documents", "keyed_docs"),
    };
    format!(
        r#"
admin_listen = "127.0.0.1:{admin}"

[[connectors]]
name = "main"
[connectors.source]
bootstrap = "{bootstrap}"
topics = ["{TOPIC}"]
group_id = "{group}"
[connectors.sink]
type = "{kind}"
url = "{url}"
collection = "{documents}"
batch_size = 64
linger_ms = 20
embedding_field = "embedding_vector"

[[connectors]]
name = "keyed"
[connectors.source]
bootstrap = "{bootstrap}"
topics = ["{KEYED}"]
group_id = "keyed-sink"
[connectors.sink]
type = "{kind}"
url = "{url}"
collection = "{keyed_docs}"
batch_size = 16
linger_ms = 20
embedding_field = "embedding_vector"
id = "key"
"#
    )
}

fn connector(toml: &str, name: &str) -> ConnectorConfig {
    config::parse(toml)
        .expect("test config")
        .connectors
        .into_iter()
        .find(|c| c.name == name)
        .expect("connector in config")
}

/// The sink's count, or None while the collection does not exist yet.
async fn count(cfg: &ConnectorConfig) -> Option<u64> {
    let mut s = Sink::connect(cfg).await.ok()?;
    s.count().await.ok()
}

fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("admin port");
    write!(s, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

async fn scenario(kind: &str, url: &str, dir: &Path, bootstrap: &str) {
    create_topics(
        bootstrap,
        &[
            (TOPIC, PARTITIONS),
            ("embeddings-dlq", 1),
            (KEYED, 1),
            ("keyed-dlq", 1),
        ],
    )
    .await;
    let data = Dataset::new();
    // 10k documents with the 15 bad records spread through them, round-robin on partitions.
    enum Item {
        Doc(usize),
        Bad(&'static str),
    }
    let mut bad = bad_records().into_iter();
    let mut items = Vec::new();
    let mut records = Vec::new();
    for i in 0..RECORDS {
        if i % 600 == 300 {
            if let Some((value, kind)) = bad.next() {
                records.push((
                    (records.len() % PARTITIONS as usize) as i32,
                    None,
                    Some(value),
                ));
                items.push(Item::Bad(kind));
            }
        }
        records.push((
            (records.len() % PARTITIONS as usize) as i32,
            None,
            Some(data.json(i)),
        ));
        items.push(Item::Doc(i));
    }
    assert!(bad.next().is_none(), "all bad records mixed in");
    let landed = produce(bootstrap, TOPIC, records).await;
    let mut doc_id = vec![String::new(); RECORDS];
    let mut want_dlq = HashMap::new();
    for (item, (p, o)) in items.iter().zip(&landed) {
        match item {
            Item::Doc(i) => doc_id[*i] = offset_id(TOPIC, *p, *o),
            Item::Bad(kind) => {
                want_dlq.insert(format!("{p}/{o}"), kind.to_string());
            }
        }
    }

    let admin = free_port();
    let toml = connect_toml(kind, url, bootstrap, admin, "vector-sink");
    let main = connector(&toml, "main");

    // Run 1, killed -9 mid-stream.
    let mut run = start_connector(dir, &toml, 1);
    eventually(300, "the first 1500 objects", || async {
        count(&main).await.is_some_and(|n| n >= 1500)
    })
    .await;
    run.kill9();
    let at_kill = count(&main).await.unwrap();
    assert!(
        at_kill < RECORDS as u64,
        "killed after the end ({at_kill}): not mid-stream"
    );
    eprintln!("{kind}: killed the connector with {at_kill} objects written");

    // Run 2 finishes the stream.
    let mut run = start_connector(dir, &toml, 2);
    eventually(600, "all records sunk and committed", || async {
        count(&main).await == Some(RECORDS as u64)
            && group_caught_up(bootstrap, "vector-sink", TOPIC, PARTITIONS)
    })
    .await;
    let metrics = http_get(admin, "/metrics");
    assert!(
        metrics.contains("strom_connector_records_written_total{connector=\"main\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("strom_connector_dlq_records_total"),
        "{metrics}"
    );

    // Exactly the 10k objects, each with its vector.
    let mut sink = Sink::connect(&main).await.expect("sink");
    let stored: HashMap<String, Vec<f32>> = sink
        .all_vectors()
        .await
        .expect("vectors")
        .into_iter()
        .collect();
    assert_eq!(stored.len(), RECORDS);
    for (i, id) in doc_id.iter().enumerate() {
        let v = stored
            .get(id)
            .unwrap_or_else(|| panic!("document {i} ({id}) missing"));
        // Chroma hands vectors back a last bit off (its own float round trip); neighbouring
        // documents differ by ~0.01 per element, so 1e-5 still names the one right vector.
        let close = v.len() == DIM
            && v.iter()
                .zip(&data.docs[i])
                .all(|(a, b)| (a - b).abs() <= 1e-5);
        assert!(close, "document {i}: wrong vector");
    }

    // Top-10 by a cluster centre is that cluster.
    for k in (0..CLUSTERS).step_by(97) {
        let got: BTreeSet<String> = sink
            .nearest(&data.centres[k], 10)
            .await
            .expect("query")
            .into_iter()
            .collect();
        let want: BTreeSet<String> = (k * PER_CLUSTER..(k + 1) * PER_CLUSTER)
            .map(|i| doc_id[i].clone())
            .collect();
        assert_eq!(got, want, "cluster {k}: top-10 neighbours");
    }

    // Every bad record in the DLQ, naming its error (a replayed tail may repeat some: read
    // all the DLQ holds, or a repeat could take the place of the last distinct one).
    let held = end_offset(bootstrap, "embeddings-dlq") as usize;
    assert!(held >= want_dlq.len(), "{held} DLQ records");
    let dlq = read_all(bootstrap, "embeddings-dlq", held, Duration::from_secs(60));
    assert_eq!(dlq.len(), held, "every DLQ record read");
    assert_eq!(
        headers_kinds(&dlq),
        want_dlq,
        "DLQ records and their error kinds"
    );
    assert!(dlq
        .iter()
        .all(|(h, _)| h.get("__connect.errors.topic").map(String::as_str) == Some(TOPIC)));

    // Tombstones delete by key.
    let keyed = connector(&toml, "keyed");
    let json = |i: usize| Some(data.json(i));
    produce(
        bootstrap,
        KEYED,
        vec![
            (0, Some(b"a".to_vec()), json(0)),
            (0, Some(b"b".to_vec()), json(1)),
            (0, Some(b"c".to_vec()), json(2)),
            (0, Some(b"b".to_vec()), None),
            (0, Some(b"a".to_vec()), json(3)),
        ],
    )
    .await;
    eventually(120, "keyed records sunk", || async {
        group_caught_up(bootstrap, "keyed-sink", KEYED, 1)
    })
    .await;
    let mut ks = Sink::connect(&keyed).await.expect("keyed sink");
    let kv: HashMap<String, Vec<f32>> = ks.all_vectors().await.unwrap().into_iter().collect();
    // Weaviate's ids are the keys' uuid5s.
    let id = |k: &str| match kind {
        "weaviate" => strom_connectors::sink::weaviate::object_id(k),
        _ => k.to_string(),
    };
    assert_eq!(
        kv.keys().cloned().collect::<BTreeSet<_>>(),
        BTreeSet::from([id("a"), id("c")])
    );
    let near = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-5);
    assert!(
        near(&kv[&id("a")], &data.docs[3]),
        "the later record of a key wins"
    );

    // Replay from offset 0 under a new group: the count does not move.
    run.terminate();
    let replay = connect_toml(kind, url, bootstrap, free_port(), "vector-sink-replay");
    let mut run = start_connector(dir, &replay, 3);
    eventually(600, "the replay committed to the end", || async {
        group_caught_up(bootstrap, "vector-sink-replay", TOPIC, PARTITIONS)
    })
    .await;
    assert_eq!(
        sink.count().await.unwrap(),
        RECORDS as u64,
        "replay changed the count"
    );
    run.terminate();
}

/// The scenario against the database `start` runs, next to a fresh `strom serve`.
async fn against(kind: &str, start: fn(&Path) -> (Proc, String)) {
    if !enabled(&format!("{kind} end-to-end")) {
        return;
    }
    let dir = TestDir::new();
    let (_strom, bootstrap) = start_strom(dir.path());
    let (_db, url) = start(dir.path());
    scenario(kind, &url, dir.path(), &bootstrap).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_pgvector_when_sinking_10k_with_a_crash_and_a_replay_then_exactly_10k_and_right_neighbours(
) {
    against("pgvector", start_postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_chroma_when_sinking_10k_with_a_crash_and_a_replay_then_exactly_10k_and_right_neighbours(
) {
    against("chroma", start_chroma).await;
}

/// A real Weaviate 1.35 (scripts/build-weaviate.sh), auto-schema off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_weaviate_when_sinking_10k_with_a_crash_and_a_replay_then_exactly_10k_and_right_neighbours(
) {
    against("weaviate", |dir| {
        let (p, url, _) = start_weaviate(dir);
        (p, url)
    })
    .await;
}

/// Milvus through milvus-lite, a reimplementation of the Milvus gRPC API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_milvus_when_sinking_10k_with_a_crash_and_a_replay_then_exactly_10k_and_right_neighbours(
) {
    against("milvus", start_milvus).await;
}

/// The Milvus sink's collection handling against the real server, without Kafka: a
/// collection someone else made without an index is indexed and loaded; the typed fields and
/// the dynamic field take what records carry; a server restart is a transient error; an
/// existing collection of another shape is refused with every difference said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_milvus_collections_when_opened_then_indexed_loaded_and_checked() {
    use milvus::v2::prelude::*;
    use strom_connectors::record::{Doc, Op, Schema};
    if !enabled("milvus collections") {
        return;
    }
    let dir = TestDir::new();
    let (mut milvus, url) = start_milvus(dir.path());
    let cfg = |collection: &str| {
        connector(
            &format!(
                "[[connectors]]\nname = \"m\"\n[connectors.source]\nbootstrap = \"127.0.0.1:1\"\n\
                 topics = [\"t\"]\ngroup_id = \"g\"\n[connectors.sink]\ntype = \"milvus\"\n\
                 url = \"{url}\"\ncollection = \"{collection}\"\nembedding_field = \"emb\"\n\
                 metric = \"l2\"\nconsistency_level = \"Strong\"\n"
            ),
            "m",
        )
    };
    let doc = |id: &str, x: f32, fields: serde_json::Value| Doc {
        id: id.into(),
        vector: vec![x, 0.0, 1.0],
        fields: fields.as_object().unwrap().clone(),
        tenant: None,
    };

    // Someone else's collection: our shape, no index, not loaded.
    let client = ClientV2::new(&ConnectConfig::new().uri(url.clone()))
        .await
        .expect("client");
    let schema = CollectionSchema::new()
        .enable_dynamic_field(true)
        .add_field(
            FieldSchema::new()
                .name("id")
                .data_type(DataType::VarChar)
                .max_length(64)
                .primary_key(true),
        )
        .add_field(
            FieldSchema::new()
                .name("emb")
                .data_type(DataType::FloatVector)
                .dimension(3),
        );
    client
        .create_collection(
            CreateCollectionRequest::builder()
                .collection_name("foreign")
                .schema(schema)
                .build()
                .unwrap(),
        )
        .await
        .expect("create collection");
    let mut s = Sink::connect(&cfg("foreign")).await.expect("sink");
    assert_eq!(s.existing_schema().map(|s| s.dimension), Some(3));
    s.write(&[Op::Upsert(doc("a", 1.0, serde_json::json!({})))], None)
        .await
        .expect("write");
    assert_eq!(s.nearest(&[1.0, 0.0, 1.0], 1).await.unwrap(), ["a"]);

    // Ours: typed fields from the first record, new fields into `$meta`.
    let first = doc("x", 1.0, serde_json::json!({"title": "t", "n": 1}));
    let mut s = Sink::connect(&cfg("ours")).await.expect("sink");
    let created = s.prepare(&Schema::infer(&first)).await.expect("create");
    assert_eq!(created, Schema::infer(&first));
    let ops = [
        Op::Upsert(first),
        Op::Upsert(doc(
            "y",
            2.0,
            serde_json::json!({"lang": "en", "my-field": 1}),
        )),
        Op::Upsert(doc("z", 3.0, serde_json::json!({"n": 2.5}))),
    ];
    let rejected = s.write(&ops, None).await.expect("write");
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0].0, 2);
    assert!(
        rejected[0]
            .1
            .contains("field `n` is integer in the collection, float in the record"),
        "{rejected:?}"
    );
    assert_eq!(s.count().await.unwrap(), 2);

    // The server gone: a transient error (the runner retries it with backoff). Back on the
    // same port and data dir: the same sink writes again and nothing acknowledged was lost.
    milvus.kill9();
    let again = [Op::Upsert(doc("v", 4.0, serde_json::json!({"n": 3})))];
    let e = s.write(&again, None).await.expect_err("server down");
    assert!(e.is_transient(), "{e}");
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let (_milvus, _) = start_milvus_on(dir.path(), port);
    s.write(&again, None)
        .await
        .expect("write after the restart");
    assert_eq!(s.count().await.unwrap(), 3);

    // Reopened with records of another shape: every difference at once.
    let mut s = Sink::connect(&cfg("ours")).await.expect("sink");
    let other = doc("w", 0.0, serde_json::json!({"title": 7, "lang": "en"}));
    let mut wanted = Schema::infer(&other);
    wanted.dimension = 4;
    let e = s.prepare(&wanted).await.expect_err("mismatch").to_string();
    assert!(
        e.contains("the collection's vectors have 3 dimensions, the records 4")
            && e.contains(
                "type conflict: field `title` is text in the collection, integer in the records"
            ),
        "{e}"
    );
}

/// `strom serve` with `[[connectors]]` in its config runs them itself: records produced to the
/// broker reach Chroma, and the connectors' metrics are on `connectors_admin_listen`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_serve_config_with_connectors_when_records_arrive_then_the_broker_process_sinks_them()
{
    if !enabled("strom serve [[connectors]]") {
        return;
    }
    let dir = TestDir::new();
    let (_chroma, url) = start_chroma(dir.path());
    let (port, admin) = (free_port(), free_port());
    let config = format!(
        r#"
num_partitions = 1
connectors_admin_listen = "127.0.0.1:{admin}"

[[connectors]]
name = "served"
[connectors.source]
bootstrap = "127.0.0.1:{port}"
topics = ["served"]
group_id = "served-sink"
[connectors.sink]
type = "chroma"
url = "{url}"
collection = "served"
linger_ms = 20
embedding_field = "embedding_vector"
"#
    );
    let (_strom, bootstrap) = start_strom_on(dir.path(), port, Some(&config));
    create_topics(&bootstrap, &[("served", 1), ("served-dlq", 1)]).await;
    let data = Dataset::new();
    let records = (0..200).map(|i| (0, None, Some(data.json(i)))).collect();
    produce(&bootstrap, "served", records).await;
    let cfg = strom_connectors::config::from_serve_table(&toml::from_str(&config).unwrap())
        .unwrap()
        .unwrap()
        .connectors
        .remove(0);
    eventually(300, "200 objects sunk by strom serve", || async {
        count(&cfg).await == Some(200)
    })
    .await;
    let metrics = http_get(admin, "/metrics");
    assert!(
        metrics.contains("strom_connector_records_written_total{connector=\"served\"} 200"),
        "{metrics}"
    );
}
