//! `schema_mapping = "registry"` end to end: a real `strom serve` running its schema registry,
//! schemas registered over its REST API, values produced in the Confluent wire format (AVRO
//! v1, v2 with a new optional field, v3 changing a field's type under compatibility NONE;
//! PROTOBUF and JSON Schema beside them; an unknown schema id; a plain JSON value), into real
//! pgvector and Weaviate servers. The new field becomes a column/property; the type change,
//! the unknown id and the plain value go to the DLQ with their reasons. The connector runs in
//! this process (`strom_connectors::start`, as `strom serve` runs `[[connectors]]`). Beside
//! them, confluent-kafka-python's AvroSerializer produces v1 and v2 into pgvector.
//! Runs when `STROM_CONNECTOR_E2E=1`, like e2e.rs.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use apache_avro::types::{Record, Value as Avro};
use common::*;
use prost_reflect::prost::Message;
use prost_reflect::{DynamicMessage, Value as Proto};
use serde_json::{json, Value};
use strom_connectors::config;
use strom_connectors::record::FieldType;
use strom_connectors::registry::{protobuf, wire};
use strom_connectors::sink::weaviate::object_id;
use strom_connectors::sink::Sink;

const AVRO_V1: &str = r#"{"type": "record", "name": "Doc", "fields": [
  {"name": "doc_id", "type": "string"},
  {"name": "embedding", "type": {"type": "array", "items": "float"}},
  {"name": "title", "type": "string"},
  {"name": "year", "type": "int"}]}"#;
/// v1 plus an optional field (BACKWARD compatible).
const AVRO_V2: &str = r#"{"type": "record", "name": "Doc", "fields": [
  {"name": "doc_id", "type": "string"},
  {"name": "embedding", "type": {"type": "array", "items": "float"}},
  {"name": "title", "type": "string"},
  {"name": "year", "type": "int"},
  {"name": "lang", "type": ["null", "string"], "default": null}]}"#;
/// `year` as a string: registered only because the subject's compatibility is NONE.
const AVRO_V3: &str = r#"{"type": "record", "name": "Doc", "fields": [
  {"name": "doc_id", "type": "string"},
  {"name": "embedding", "type": {"type": "array", "items": "float"}},
  {"name": "title", "type": "string"},
  {"name": "year", "type": "string"}]}"#;
const PROTO: &str = r#"syntax = "proto3";
message Doc { string doc_id = 1; repeated float embedding = 2; string title = 3; int64 year = 4; }"#;
const JSON_SCHEMA: &str = r#"{"type": "object", "properties": {
  "doc_id": {"type": "string"}, "embedding": {"type": "array", "items": {"type": "number"}},
  "title": {"type": "string"}, "year": {"type": "integer"}}, "required": ["doc_id", "title"]}"#;

async fn register(registry: &str, subject: &str, schema_type: &str, schema: &str) -> u32 {
    let resp: Value = reqwest::Client::new()
        .post(format!("{registry}/subjects/{subject}/versions"))
        .header("content-type", "application/vnd.schemaregistry.v1+json")
        .json(&json!({"schemaType": schema_type, "schema": schema}))
        .send()
        .await
        .expect("register")
        .json()
        .await
        .expect("register answer");
    resp["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no id: {resp}")) as u32
}

#[allow(deprecated)] // to_avro_datum: the one-call encoder is what a test wants
fn avro(schema: &str, id: u32, doc: &str, x: f32, set: &[(&str, Avro)]) -> Vec<u8> {
    let s = apache_avro::Schema::parse_str(schema).unwrap();
    let mut r = Record::new(&s).unwrap();
    r.put("doc_id", doc);
    r.put(
        "embedding",
        Avro::Array([x, 1.0, 0.0, 0.5].map(Avro::Float).to_vec()),
    );
    r.put("title", format!("title {doc}"));
    for (k, v) in set {
        r.put(k, v.clone());
    }
    wire::frame(id, None, &apache_avro::to_avro_datum(&s, r).unwrap())
}

fn records(ids: &BTreeMap<&str, u32>) -> Vec<Outgoing> {
    let proto = protobuf::parse(PROTO).unwrap();
    let mut m = DynamicMessage::new(proto.message(&[0]).unwrap());
    m.set_field_by_name("doc_id", Proto::String("d6".into()));
    m.set_field_by_name(
        "embedding",
        Proto::List([6.0, 1.0, 0.0, 0.5].map(Proto::F32).to_vec()),
    );
    m.set_field_by_name("title", Proto::String("six".into()));
    m.set_field_by_name("year", Proto::I64(2026));
    let json_value =
        json!({"doc_id": "d7", "embedding": [7.0, 1.0, 0.0, 0.5], "title": "seven", "year": 1});
    [
        avro(AVRO_V1, ids["v1"], "d1", 1.0, &[("year", Avro::Int(2024))]),
        avro(
            AVRO_V2,
            ids["v2"],
            "d2",
            2.0,
            &[
                ("year", Avro::Int(2025)),
                ("lang", Avro::Union(1, Box::new(Avro::String("en".into())))),
            ],
        ),
        // 2: `year` is text now; the collection's column is an integer.
        avro(
            AVRO_V3,
            ids["v3"],
            "d3",
            3.0,
            &[("year", Avro::String("2024".into()))],
        ),
        // 3: an id nobody registered.
        wire::frame(999_999, None, b"\x02x"),
        // 4: no wire-format header.
        serde_json::to_vec(&json!({"doc_id": "d5", "embedding": [1.0, 1.0, 0.0, 0.5]})).unwrap(),
        wire::frame(ids["proto"], Some(&[0]), &m.encode_to_vec()),
        wire::frame(ids["json"], None, &serde_json::to_vec(&json_value).unwrap()),
    ]
    .into_iter()
    .map(|v| (0, None, Some(v)))
    .collect()
}

/// confluent-kafka-python's AvroSerializer (compat-tests/.venv): v1, then v2 with a new
/// optional field, each registered by the serializer itself under `{topic}-value`.
const PYTHON_PRODUCER: &str = r#"
import sys
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
bootstrap, registry, topic, v1, v2 = sys.argv[1:]
sr = SchemaRegistryClient({"url": registry})
ctx = SerializationContext(topic, MessageField.VALUE)
p = Producer({"bootstrap.servers": bootstrap})
for schema, rec in [
    (v1, {"doc_id": "p1", "embedding": [1.0, 1.0, 0.0, 0.5], "title": "a", "year": 1}),
    (v2, {"doc_id": "p2", "embedding": [2.0, 1.0, 0.0, 0.5], "title": "b", "year": 2, "lang": "de"}),
]:
    p.produce(topic, value=AvroSerializer(sr, schema)(rec, ctx))
assert p.flush(30) == 0
"#;

fn python_produce(bootstrap: &str, registry: &str, topic: &str) {
    let python = std::env::var_os("STROM_COMPAT_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace().join("compat-tests/.venv"))
        .join("bin/python");
    let out = std::process::Command::new(&python)
        .args([
            "-c",
            PYTHON_PRODUCER,
            bootstrap,
            registry,
            topic,
            AVRO_V1,
            AVRO_V2,
        ])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (scripts/test-all.sh setup makes the venv)",
                python.display()
            )
        });
    assert!(
        out.status.success(),
        "python producer: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_registry_schemas_when_sinking_then_columns_follow_versions_and_bad_records_dead_letter(
) {
    if !enabled("schema mapping from the schema registry") {
        return;
    }
    let dir = TestDir::new();
    let registry_port = free_port();
    let (_strom, bootstrap) = start_strom_on(
        dir.path(),
        free_port(),
        Some(&format!(
            "schema_registry_enable = true\nschema_registry_listen = \"127.0.0.1:{registry_port}\"\n"
        )),
    );
    wait_port(
        registry_port,
        "schema registry",
        &dir.path().join("strom.log"),
    );
    let registry = format!("http://127.0.0.1:{registry_port}");
    let (_pg, pg_url) = start_postgres(dir.path());
    let (_weaviate, weaviate_url, _) = start_weaviate(dir.path());
    let sinks = [
        ("pgvector", &pg_url, "registry"),
        ("weaviate", &weaviate_url, "Registry"),
    ];
    let mut toml = String::new();
    for (kind, url, collection) in sinks {
        create_topics(&bootstrap, &[(kind, 1), (&format!("{kind}-dlq"), 1)]).await;
        let subject = format!("{kind}-value");
        let mut ids = BTreeMap::new();
        ids.insert("v1", register(&registry, &subject, "AVRO", AVRO_V1).await);
        ids.insert("v2", register(&registry, &subject, "AVRO", AVRO_V2).await);
        let none = reqwest::Client::new()
            .put(format!("{registry}/config/{subject}"))
            .json(&json!({"compatibility": "NONE"}))
            .send()
            .await
            .unwrap();
        assert!(none.status().is_success(), "compatibility NONE");
        ids.insert("v3", register(&registry, &subject, "AVRO", AVRO_V3).await);
        let other = |t: &str| format!("{kind}-{t}-value");
        ids.insert(
            "proto",
            register(&registry, &other("proto"), "PROTOBUF", PROTO).await,
        );
        ids.insert(
            "json",
            register(&registry, &other("json"), "JSON", JSON_SCHEMA).await,
        );
        assert_eq!(ids.values().collect::<BTreeSet<_>>().len(), 5, "{ids:?}");
        produce(&bootstrap, kind, records(&ids)).await;
        toml.push_str(&format!(
            r#"
[[connectors]]
name = "{kind}"
[connectors.source]
bootstrap = "{bootstrap}"
topics = ["{kind}"]
group_id = "{kind}-registry"
[connectors.sink]
type = "{kind}"
url = "{url}"
collection = "{collection}"
linger_ms = 20
id = "doc_id"
schema_mapping = "registry"
schema_registry_url = "{registry}"
"#
        ));
    }
    // Values from confluent-kafka-python's serializer, into pgvector.
    create_topics(&bootstrap, &[("python", 1), ("python-dlq", 1)]).await;
    python_produce(&bootstrap, &registry, "python");
    toml.push_str(&format!(
        r#"
[[connectors]]
name = "python"
[connectors.source]
bootstrap = "{bootstrap}"
topics = ["python"]
group_id = "python-registry"
[connectors.sink]
type = "pgvector"
url = "{pg_url}"
collection = "from_python"
linger_ms = 20
id = "doc_id"
schema_mapping = "registry"
schema_registry_url = "{registry}"
"#
    ));
    let file = config::parse(&toml).expect("connector config");
    let running = strom_connectors::start(
        file.connectors.clone(),
        None,
        strom_connectors::Metrics::new(),
        None,
    )
    .expect("connectors");
    eventually(300, "every connector caught up", || async {
        sinks
            .iter()
            .all(|(kind, _, _)| group_caught_up(&bootstrap, &format!("{kind}-registry"), kind, 1))
            && group_caught_up(&bootstrap, "python-registry", "python", 1)
    })
    .await;
    running.stop();

    let cfg = file.connectors.iter().find(|c| c.name == "python").unwrap();
    let mut sink = Sink::connect(cfg).await.expect("sink");
    let ids: BTreeSet<String> = sink
        .all_vectors()
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        ids,
        BTreeSet::from(["p1".into(), "p2".into()]),
        "python's records"
    );
    let columns = &sink.existing_schema().expect("table").fields;
    assert_eq!(
        columns.keys().cloned().collect::<BTreeSet<_>>(),
        BTreeSet::from(["lang", "title", "year"].map(String::from)),
        "python's v2 added `lang`"
    );

    for (kind, url, collection) in sinks {
        let cfg = file.connectors.iter().find(|c| c.name == kind).unwrap();
        let mut sink = Sink::connect(cfg).await.expect("sink");
        let ids: BTreeSet<String> = sink
            .all_vectors()
            .await
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        // Weaviate's object ids are uuid5s of the record ids.
        let id = |d: &str| match kind {
            "weaviate" => object_id(d),
            _ => d.to_string(),
        };
        assert_eq!(
            ids,
            ["d1", "d2", "d6", "d7"].map(id).into_iter().collect(),
            "{kind}: objects written"
        );
        let dlq = read_all(
            &bootstrap,
            &format!("{kind}-dlq"),
            3,
            Duration::from_secs(30),
        );
        let dead: BTreeMap<String, (String, String)> = dlq
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
        let kinds: BTreeMap<&str, &str> = dead
            .iter()
            .map(|(o, (k, _))| (o.as_str(), k.as_str()))
            .collect();
        assert_eq!(
            kinds,
            BTreeMap::from([
                ("2", "type_conflict"),
                ("3", "unknown_schema"),
                ("4", "not_wire_format")
            ]),
            "{kind}: dead letters {dead:?}"
        );
        assert!(dead["2"].1.contains("`year`"), "{kind}: {dead:?}");
        assert!(dead["3"].1.contains("999999"), "{kind}: {dead:?}");
        // v1's fields from the start, v2's `lang` added when a record brought it.
        let fields: BTreeSet<String> = match kind {
            "pgvector" => {
                let s = sink.existing_schema().expect("table");
                assert_eq!(s.fields["year"], FieldType::Int);
                assert_eq!(s.fields["lang"], FieldType::Text);
                s.fields.keys().cloned().collect()
            }
            _ => {
                let class: Value = reqwest::get(format!("{url}/v1/schema/{collection}"))
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                class["properties"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| p["name"].as_str().unwrap().to_string())
                    .collect()
            }
        };
        assert_eq!(
            fields,
            BTreeSet::from(["lang", "title", "year"].map(String::from)),
            "{kind}: columns/properties"
        );
    }
}
