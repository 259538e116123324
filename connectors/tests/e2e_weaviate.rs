//! The Weaviate sink against a real Weaviate 1.35 server (built by scripts/build-weaviate.sh,
//! started by tests/common with auto-schema off), beyond the 10k scenario every sink runs in
//! e2e.rs: the server killed -9 and restarted under a running connector, multi-tenancy (a
//! tenant per topic and per key prefix), schema mapping from a JSON Schema in the TOML with
//! evolution and incompatible changes, consistency levels passed through, and the server's
//! own per-object refusals (a vector of another dimension) to the DLQ. They run when
//! `STROM_CONNECTOR_E2E=1`, like e2e.rs.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use common::*;
use serde_json::{json, Value};
use strom_connectors::config::{self, ConnectorConfig};
use strom_connectors::record::{offset_id, Doc, Op, Schema};
use strom_connectors::sink::weaviate::{object_id, WeaviateSink};
use strom_connectors::sink::Sink;

/// The last warnings and errors of a connector's log, for a failure message.
fn warnings(log: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn connector(toml: &str, name: &str) -> ConnectorConfig {
    config::parse(toml)
        .expect("test config")
        .connectors
        .into_iter()
        .find(|c| c.name == name)
        .expect("connector in config")
}

async fn weaviate(cfg: &ConnectorConfig) -> WeaviateSink {
    WeaviateSink::connect(cfg).await.expect("weaviate sink")
}

/// The class as the server has it.
async fn class(url: &str, name: &str) -> Value {
    reqwest::get(format!("{url}/v1/schema/{name}"))
        .await
        .expect("get class")
        .json()
        .await
        .expect("class JSON")
}

fn properties(class: &Value) -> BTreeMap<String, String> {
    class["properties"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["dataType"][0].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The server killed -9 twice while a connector (consistency_level ALL) writes 3000 records
/// into it, restarted each time on the same ports and data dir: the connector retries, and
/// the class ends with exactly the 3000 objects, each with its vector (deterministic ids:
/// a batch written again after the crash overwrites instead of duplicating).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_weaviate_killed_mid_stream_when_restarted_then_nothing_lost_or_duplicated() {
    if !enabled("weaviate server kill -9") {
        return;
    }
    const N: usize = 3000;
    let dir = TestDir::new();
    let (_strom, bootstrap) = start_strom(dir.path());
    let (mut server, url, ports) = start_weaviate(dir.path());
    create_topics(&bootstrap, &[("crash", PARTITIONS), ("crash-dlq", 1)]).await;
    let toml = format!(
        r#"
admin_listen = "127.0.0.1:{admin}"
[[connectors]]
name = "crash"
[connectors.source]
bootstrap = "{bootstrap}"
topics = ["crash"]
group_id = "crash-sink"
[connectors.sink]
type = "weaviate"
url = "{url}"
collection = "Crash"
batch_size = 50
linger_ms = 20
embedding_field = "embedding_vector"
consistency_level = "ALL"
max_attempts = 200
retry_backoff_ms = 50
"#,
        admin = free_port()
    );
    let cfg = connector(&toml, "crash");
    let data = Dataset::new();
    let records: Vec<Outgoing> = (0..N)
        .map(|i| ((i % PARTITIONS as usize) as i32, None, Some(data.json(i))))
        .collect();
    // Produced in three parts, so the stream is still arriving while the server is down.
    let mut landed = Vec::new();
    let mut run = start_connector(dir.path(), &toml, 1);
    let thirds: Vec<Vec<Outgoing>> = records.chunks(N / 3).map(<[Outgoing]>::to_vec).collect();
    for (k, part) in thirds.into_iter().enumerate() {
        landed.extend(produce(&bootstrap, "crash", part).await);
        if k == 2 {
            break;
        }
        let at_least = (k as u64 + 1) * 500;
        eventually(300, "objects written before the kill", || async {
            match WeaviateSink::connect(&cfg).await {
                Ok(s) => s.count_in(None).await.is_ok_and(|n| n >= at_least),
                Err(_) => false,
            }
        })
        .await;
        server.kill9();
        eprintln!("weaviate killed -9 ({}); restarting", k + 1);
        std::thread::sleep(Duration::from_secs(2));
        server = start_weaviate_on(dir.path(), ports).0;
    }
    eventually(600, "all records sunk and committed", || async {
        group_caught_up(&bootstrap, "crash-sink", "crash", PARTITIONS)
    })
    .await;
    run.terminate();
    let connect_log = std::fs::read_to_string(dir.path().join("connect-1.log")).unwrap();
    assert!(
        connect_log.contains("retrying"),
        "the connector saw the server gone and retried"
    );
    // Before counting: a record refused while the server restarted must not be dead-lettered.
    // Counted by the DLQ's end offset (exact); its records are read only to say why.
    let dead = end_offset(&bootstrap, "crash-dlq");
    if dead > 0 {
        let dlq = read_all(&bootstrap, "crash-dlq", 1, Duration::from_secs(30));
        panic!(
            "nothing dead-lettered, but {dead} records were; the first one's headers: {:?}",
            dlq.first().map(|(h, _)| h)
        );
    }
    let mut sink = Sink::connect(&cfg).await.expect("sink");
    // Once seen on a loaded machine: 2950 of 3000 counted right after the group caught up
    // (a server restarted 2 s before may still be loading its shards). Wait up to 60 s for
    // the count to reach N; a lost record still fails the exact comparison, a duplicate too.
    let mut counted = 0;
    for _ in 0..120 {
        counted = sink.count().await.unwrap_or(0);
        if counted >= N as u64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let stored: HashMap<String, Vec<f32>> = sink.all_vectors().await.unwrap().into_iter().collect();
    let missing: Vec<&(i32, i64)> = landed
        .iter()
        .filter(|(p, o)| !stored.contains_key(&offset_id("crash", *p, *o)))
        .collect();
    assert_eq!(
        counted,
        N as u64,
        "exactly the records; missing (partition, offset): {} from {:?} to {:?}; the \
         connector's warnings:\n{}",
        missing.len(),
        missing.first(),
        missing.last(),
        warnings(&connect_log)
    );
    assert_eq!(stored.len(), N);
    for (i, (p, o)) in landed.iter().enumerate() {
        let v = &stored[&offset_id("crash", *p, *o)];
        assert!(
            v.iter()
                .zip(&data.docs[i])
                .all(|(a, b)| (a - b).abs() <= 1e-6),
            "record {i}: wrong vector"
        );
    }
}

/// One `strom connect` with three Weaviate connectors: a tenant per topic (two topics into
/// one class), a tenant per key prefix (tombstones delete in their tenant), and a JSON
/// Schema from the TOML (every declared property created; a record breaking it, a new
/// optional field, and an incompatible type change). Auto-schema is off on the server, so
/// every property the objects carry was declared by the connector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_multi_tenancy_and_a_json_schema_when_sinking_then_tenants_properties_and_dlq() {
    if !enabled("weaviate tenants and schema mapping") {
        return;
    }
    let dir = TestDir::new();
    let (_strom, bootstrap) = start_strom(dir.path());
    let (_server, url, _) = start_weaviate(dir.path());
    create_topics(
        &bootstrap,
        &[
            ("tenant_a", 1),
            ("tenant_b", 1),
            ("tenants-dlq", 1),
            ("prefixed", 1),
            ("prefixed-dlq", 1),
            ("mapped", 1),
            ("mapped-dlq", 1),
        ],
    )
    .await;
    let schema = r#"{
      "type": "object",
      "properties": {
        "doc_id": {"type": "string"},
        "embedding": {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4},
        "title": {"type": "string"},
        "year": {"type": "integer"},
        "score": {"type": ["number", "null"]},
        "meta": {"type": "object"}
      },
      "required": ["doc_id", "embedding", "title"]
    }"#;
    let toml = format!(
        r#"
admin_listen = "127.0.0.1:{admin}"

[[connectors]]
name = "by-topic"
[connectors.source]
bootstrap = "{bootstrap}"
topics = ["tenant_a", "tenant_b"]
group_id = "by-topic"
dlq_topic = "tenants-dlq"
[connectors.sink]
type = "weaviate"
url = "{url}"
collection = "ByTopic"
linger_ms = 20
multi_tenancy = "topic"
consistency_level = "ONE"

[[connectors]]
name = "by-prefix"
[connectors.source]
bootstrap = "{bootstrap}"
topics = ["prefixed"]
group_id = "by-prefix"
[connectors.sink]
type = "weaviate"
url = "{url}"
collection = "ByPrefix"
linger_ms = 20
id = "key"
multi_tenancy = "key_prefix"
tenant_separator = ":"
consistency_level = "QUORUM"

[[connectors]]
name = "mapped"
[connectors.source]
bootstrap = "{bootstrap}"
topics = ["mapped"]
group_id = "mapped"
[connectors.sink]
type = "weaviate"
url = "{url}"
collection = "Mapped"
linger_ms = 20
id = "doc_id"
schema_mapping = "json_schema"
json_schema = '''{schema}'''
"#,
        admin = free_port()
    );
    let v = |x: f32| json!([x, 1.0, 0.0, 0.5]);
    let rec = |value: Value| Some(serde_json::to_vec(&value).unwrap());
    produce(
        &bootstrap,
        "tenant_a",
        (0..30)
            .map(|i| (0, None, rec(json!({"embedding": v(i as f32), "n": i}))))
            .collect(),
    )
    .await;
    produce(
        &bootstrap,
        "tenant_b",
        (0..20)
            .map(|i| (0, None, rec(json!({"embedding": v(i as f32), "n": i}))))
            .collect(),
    )
    .await;
    let key = |k: &str| Some(k.as_bytes().to_vec());
    produce(
        &bootstrap,
        "prefixed",
        vec![
            (0, key("acme:1"), rec(json!({"embedding": v(1.0)}))),
            (0, key("acme:2"), rec(json!({"embedding": v(2.0)}))),
            (0, key("globex:1"), rec(json!({"embedding": v(3.0)}))),
            (0, key("no-prefix"), rec(json!({"embedding": v(4.0)}))),
            (0, key("acme:1"), None),
        ],
    )
    .await;
    let mapped = vec![
        // Follows the schema (no score, no meta: optional).
        rec(json!({"doc_id": "d1", "embedding": v(1.0), "title": "one", "year": 2024})),
        // Breaks it: no title.
        rec(json!({"doc_id": "d2", "embedding": v(2.0), "year": 2024})),
        // Breaks it: year is a string.
        rec(json!({"doc_id": "d3", "embedding": v(3.0), "title": "three", "year": "2024"})),
        // A new optional field: becomes a property.
        rec(
            json!({"doc_id": "d4", "embedding": v(4.0), "title": "four", "lang": "en", "meta": {"k": [1, 2]}}),
        ),
        // Then the new field changes type: incompatible, to the DLQ.
        rec(json!({"doc_id": "d5", "embedding": v(5.0), "title": "five", "lang": 5})),
        // A vector of another dimension.
        rec(json!({"doc_id": "d6", "embedding": [1.0, 2.0], "title": "six"})),
    ];
    produce(
        &bootstrap,
        "mapped",
        mapped.into_iter().map(|r| (0, None, r)).collect(),
    )
    .await;

    let mut run = start_connector(dir.path(), &toml, 1);
    eventually(300, "every connector caught up", || async {
        group_caught_up(&bootstrap, "by-topic", "tenant_a", 1)
            && group_caught_up(&bootstrap, "by-topic", "tenant_b", 1)
            && group_caught_up(&bootstrap, "by-prefix", "prefixed", 1)
            && group_caught_up(&bootstrap, "mapped", "mapped", 1)
    })
    .await;

    // A tenant per topic.
    let by_topic = weaviate(&connector(&toml, "by-topic")).await;
    let tenants: BTreeSet<Option<String>> = by_topic.tenants().await.unwrap().into_iter().collect();
    assert_eq!(
        tenants,
        BTreeSet::from([Some("tenant_a".to_string()), Some("tenant_b".to_string())])
    );
    assert_eq!(by_topic.count_in(Some("tenant_a")).await.unwrap(), 30);
    assert_eq!(by_topic.count_in(Some("tenant_b")).await.unwrap(), 20);
    let c = class(&url, "ByTopic").await;
    assert_eq!(c["multiTenancyConfig"]["enabled"], true, "{c}");
    assert_eq!(properties(&c), BTreeMap::from([("n".into(), "int".into())]));

    // A tenant per key prefix; the tombstone deleted acme:1 in acme; no prefix: DLQ.
    let by_prefix = weaviate(&connector(&toml, "by-prefix")).await;
    let ids = |objects: Vec<(String, Vec<f32>, Value)>| -> BTreeSet<String> {
        objects.into_iter().map(|(id, _, _)| id).collect()
    };
    assert_eq!(
        ids(by_prefix.objects_in(Some("acme")).await.unwrap()),
        BTreeSet::from([object_id("acme:2")])
    );
    assert_eq!(
        ids(by_prefix.objects_in(Some("globex")).await.unwrap()),
        BTreeSet::from([object_id("globex:1")])
    );
    let dlq = read_all(&bootstrap, "prefixed-dlq", 1, Duration::from_secs(30));
    assert_eq!(dlq.len(), 1);
    assert_eq!(
        dlq[0].0["__connect.errors.exception.class.name"],
        "no_tenant"
    );

    // The JSON Schema: declared properties created up front, `lang` added when it came.
    let c = class(&url, "Mapped").await;
    assert_eq!(
        properties(&c),
        BTreeMap::from([
            ("lang".into(), "text".into()),
            ("meta".into(), "text".into()),
            ("score".into(), "number".into()),
            ("title".into(), "text".into()),
            ("year".into(), "int".into()),
        ])
    );
    let mapped = weaviate(&connector(&toml, "mapped")).await;
    let objects: HashMap<String, Value> = mapped
        .objects_in(None)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _, props)| (id, props))
        .collect();
    assert_eq!(
        objects.keys().cloned().collect::<BTreeSet<_>>(),
        BTreeSet::from([object_id("d1"), object_id("d4")])
    );
    assert_eq!(objects[&object_id("d4")]["lang"], "en");
    assert_eq!(objects[&object_id("d4")]["meta"], "{\"k\":[1,2]}");
    let dlq = read_all(&bootstrap, "mapped-dlq", 4, Duration::from_secs(30));
    let kinds: BTreeMap<String, (String, String)> = dlq
        .iter()
        .map(|(h, _)| {
            (
                h["__connect.errors.offset"].clone(),
                (
                    h["__connect.errors.exception.class.name"].clone(),
                    h["__connect.errors.exception.message"].clone(),
                ),
            )
        })
        .collect();
    assert_eq!(kinds.len(), 4, "{kinds:?}");
    assert_eq!(kinds["1"].0, "schema_violation");
    assert!(kinds["1"].1.contains("`title` is required"), "{kinds:?}");
    assert_eq!(kinds["2"].0, "schema_violation");
    assert!(
        kinds["2"]
            .1
            .contains("`year` is text, the schema says integer"),
        "{kinds:?}"
    );
    assert_eq!(kinds["4"].0, "type_conflict", "{kinds:?}");
    assert!(kinds["4"].1.contains("lang"), "{kinds:?}");
    assert_eq!(kinds["5"].0, "wrong_dimension", "{kinds:?}");
    run.terminate();
}

/// The sink without Kafka against the real server: every consistency level is accepted and
/// passed through (write, delete); a class made elsewhere holding 4-dimension vectors
/// refuses the connector's 3-dimension objects one by one, and those refusals are the
/// records' rejections (to the DLQ), not a failed batch; JSON-marked properties are known
/// again when the sink reopens the class.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_real_weaviate_then_consistency_levels_pass_and_server_refusals_are_per_record() {
    if !enabled("weaviate sink without kafka") {
        return;
    }
    let dir = TestDir::new();
    let (_server, url, _) = start_weaviate(dir.path());
    let cfg = |class: &str, level: &str| {
        connector(
            &format!(
                "[[connectors]]\nname = \"w\"\n[connectors.source]\nbootstrap = \"127.0.0.1:1\"\n\
                 topics = [\"t\"]\ngroup_id = \"g\"\n[connectors.sink]\ntype = \"weaviate\"\n\
                 url = \"{url}\"\ncollection = \"{class}\"\nembedding_field = \"e\"\n\
                 consistency_level = \"{level}\"\n"
            ),
            "w",
        )
    };
    let doc = |id: &str, vector: Vec<f32>, fields: Value| {
        Op::Upsert(Doc {
            id: id.into(),
            vector,
            fields: fields.as_object().unwrap().clone(),
            tenant: None,
        })
    };
    for level in ["ONE", "QUORUM", "ALL"] {
        let class = format!("Level{level}");
        let mut s = Sink::connect(&cfg(&class, level)).await.expect("connect");
        let first = Doc {
            id: "a".into(),
            vector: vec![1.0, 0.0, 0.0],
            fields: json!({"title": "a", "meta": {"x": 1}})
                .as_object()
                .unwrap()
                .clone(),
            tenant: None,
        };
        s.prepare(&Schema::infer(&first))
            .await
            .expect("create class");
        let ops = [
            Op::Upsert(first.clone()),
            doc("b", vec![0.0, 1.0, 0.0], json!({"title": "b"})),
        ];
        assert!(
            s.write(&ops, None).await.expect("write").is_empty(),
            "{level}"
        );
        s.write(&[Op::Delete("b".into(), None)], None)
            .await
            .expect("delete");
        assert_eq!(s.count().await.unwrap(), 1, "{level}");
        // Reopened: `meta` is known as JSON (a text property marked so), `title` as text.
        let mut again = Sink::connect(&cfg(&class, level)).await.expect("reopen");
        let schema = again
            .prepare(&Schema::infer(&first))
            .await
            .expect("reopen prepare");
        assert_eq!(schema.fields, Schema::infer(&first).fields, "{level}");
    }

    // Someone else's class, holding 4-dimension vectors.
    let http = reqwest::Client::new();
    let made = http
        .post(format!("{url}/v1/schema"))
        .json(&json!({"class": "Foreign", "vectorizer": "none",
            "vectorIndexConfig": {"distance": "cosine"},
            "properties": [{"name": "title", "dataType": ["text"]}]}))
        .send()
        .await
        .unwrap();
    assert!(made.status().is_success(), "{:?}", made.text().await);
    let put = http
        .post(format!("{url}/v1/objects"))
        .json(
            &json!({"class": "Foreign", "id": object_id("x"), "vector": [1.0, 0.0, 0.0, 0.0],
            "properties": {"title": "x"}}),
        )
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{:?}", put.text().await);
    let mut s = Sink::connect(&cfg("Foreign", "QUORUM"))
        .await
        .expect("connect");
    s.prepare(&Schema {
        dimension: 3,
        fields: Default::default(),
    })
    .await
    .expect("existing class fits");
    let ops = [
        doc("y", vec![1.0, 0.0, 0.0], json!({"title": "y"})),
        doc("z", vec![0.0, 1.0, 0.0], json!({"title": "z"})),
    ];
    let rejected = s
        .write(&ops, None)
        .await
        .expect("batch answered per object");
    assert_eq!(
        rejected.iter().map(|r| r.0).collect::<Vec<_>>(),
        [0, 1],
        "{rejected:?}"
    );
    assert!(
        rejected[0].1.contains("length"),
        "the server's reason: {rejected:?}"
    );
    assert_eq!(s.count().await.unwrap(), 1);
}
