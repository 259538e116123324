//! Schema mapping from a JSON Schema in the TOML (`schema_mapping = "json_schema"`), through a
//! real `strom serve` and `strom connect`, into real pgvector, Chroma and milvus-lite (Weaviate:
//! e2e_weaviate.rs; Pinecone and Qdrant: the same connector-side checks, contract-tested).
//! The same six records go to each: one that follows the schema, two that break it (a
//! missing required field, a field of the wrong type), one with a new optional field, one
//! that changes that new field's type, one with a vector of another dimension. Declared
//! properties are columns from the start; the new field becomes a column where the sink has
//! typed columns (pgvector), lands in the dynamic field (Milvus) or the schemaless metadata
//! (Chroma); the type change is incompatible where the column is typed (pgvector: DLQ).
//! Runs when `STROM_CONNECTOR_E2E=1`, like e2e.rs.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use serde_json::json;
use strom_connectors::config;
use strom_connectors::record::FieldType;
use strom_connectors::sink::Sink;

const SCHEMA: &str = r#"{
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

fn records() -> Vec<Outgoing> {
    let v = |x: f32| json!([x, 1.0, 0.0, 0.5]);
    [
        json!({"doc_id": "d1", "embedding": v(1.0), "title": "one", "year": 2024}),
        json!({"doc_id": "d2", "embedding": v(2.0), "year": 2024}),
        json!({"doc_id": "d3", "embedding": v(3.0), "title": "three", "year": "2024"}),
        json!({"doc_id": "d4", "embedding": v(4.0), "title": "four", "lang": "en", "meta": {"k": [1, 2]}}),
        json!({"doc_id": "d5", "embedding": v(5.0), "title": "five", "lang": 5}),
        json!({"doc_id": "d6", "embedding": [1.0, 2.0], "title": "six"}),
    ]
    .into_iter()
    .map(|r| (0, None, Some(serde_json::to_vec(&r).unwrap())))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_json_schema_in_the_toml_when_sinking_then_every_sink_maps_evolves_and_dead_letters(
) {
    if !enabled("schema mapping from a JSON Schema") {
        return;
    }
    let dir = TestDir::new();
    let (_strom, bootstrap) = start_strom(dir.path());
    let (_pg, pg_url) = start_postgres(dir.path());
    let (_chroma, chroma_url) = start_chroma(dir.path());
    let (_milvus, milvus_url) = start_milvus(dir.path());
    let sinks = [
        ("pgvector", &pg_url),
        ("chroma", &chroma_url),
        ("milvus", &milvus_url),
    ];
    let mut toml = format!("admin_listen = \"127.0.0.1:{}\"\n", free_port());
    for (kind, url) in sinks {
        create_topics(&bootstrap, &[(kind, 1), (&format!("{kind}-dlq"), 1)]).await;
        produce(&bootstrap, kind, records()).await;
        toml.push_str(&format!(
            r#"
[[connectors]]
name = "{kind}"
[connectors.source]
bootstrap = "{bootstrap}"
topics = ["{kind}"]
group_id = "{kind}-mapped"
[connectors.sink]
type = "{kind}"
url = "{url}"
collection = "mapped"
linger_ms = 20
id = "doc_id"
schema_mapping = "json_schema"
json_schema = '''{SCHEMA}'''
"#
        ));
    }
    let mut run = start_connector(dir.path(), &toml, 1);
    eventually(300, "every connector caught up", || async {
        sinks
            .iter()
            .all(|(kind, _)| group_caught_up(&bootstrap, &format!("{kind}-mapped"), kind, 1))
    })
    .await;
    run.terminate();

    let file = config::parse(&toml).unwrap();
    for (kind, _) in sinks {
        let cfg = file.connectors.iter().find(|c| c.name == kind).unwrap();
        let mut sink = Sink::connect(cfg).await.expect("sink");
        let ids: BTreeSet<String> = sink
            .all_vectors()
            .await
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        // The type change of the new field is refused only by typed columns.
        let (written, dead): (&[&str], &[(&str, &str)]) = match kind {
            "pgvector" => (
                &["d1", "d4"],
                &[
                    ("1", "schema_violation"),
                    ("2", "schema_violation"),
                    ("4", "type_conflict"),
                    ("5", "wrong_dimension"),
                ],
            ),
            _ => (
                &["d1", "d4", "d5"],
                &[
                    ("1", "schema_violation"),
                    ("2", "schema_violation"),
                    ("5", "wrong_dimension"),
                ],
            ),
        };
        let want: BTreeSet<String> = written.iter().map(|s| s.to_string()).collect();
        assert_eq!(ids, want, "{kind}: objects written");
        let dlq = read_all(
            &bootstrap,
            &format!("{kind}-dlq"),
            dead.len(),
            Duration::from_secs(30),
        );
        let got: BTreeMap<String, String> = dlq
            .iter()
            .map(|(h, _)| {
                (
                    h["__connect.errors.offset"].clone(),
                    h["__connect.errors.exception.class.name"].clone(),
                )
            })
            .collect();
        let want: BTreeMap<String, String> = dead
            .iter()
            .map(|(o, k)| (o.to_string(), k.to_string()))
            .collect();
        assert_eq!(got, want, "{kind}: dead-lettered records and their kinds");
        let message = |offset: &str| {
            dlq.iter()
                .find(|(h, _)| h["__connect.errors.offset"] == offset)
                .map(|(h, _)| h["__connect.errors.exception.message"].clone())
                .unwrap_or_default()
        };
        assert!(
            message("1").contains("`title` is required by the schema"),
            "{kind}"
        );
        assert!(
            message("2").contains("`year` is text, the schema says integer"),
            "{kind}"
        );
        // The collection's typed fields: every declared one from the start, `lang` added.
        let fields = sink
            .existing_schema()
            .map(|s| s.fields.clone())
            .unwrap_or_default();
        match kind {
            "pgvector" => assert_eq!(
                fields,
                BTreeMap::from([
                    ("lang".to_string(), FieldType::Text),
                    ("meta".to_string(), FieldType::Json),
                    ("score".to_string(), FieldType::Float),
                    ("title".to_string(), FieldType::Text),
                    ("year".to_string(), FieldType::Int),
                ]),
                "pgvector columns"
            ),
            "milvus" => assert_eq!(
                fields.keys().cloned().collect::<BTreeSet<_>>(),
                BTreeSet::from(["meta", "score", "title", "year"].map(String::from)),
                "milvus typed fields (`lang` is in the dynamic field)"
            ),
            _ => {}
        }
    }
}
