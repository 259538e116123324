//! Contract tests of the Weaviate sink against a local HTTP fake that answers with fixtures
//! taken from Weaviate's published OpenAPI spec (tests/fixtures/weaviate, each citing it).
//! They check what the adapter sends and how it reads the answers; they are not integration
//! tests. `given_a_real_weaviate_...` runs against a real server when STROM_WEAVIATE_URL is set.

mod fake_http;

use fake_http::{fixture, Fake};
use serde_json::{json, Map, Value};
use strom_connectors::config::{self, ConnectorConfig};
use strom_connectors::record::{Doc, FieldType, Op, Schema};
use strom_connectors::sink::weaviate::object_id;
use strom_connectors::sink::{Sink, SinkError};

fn cfg(url: &str, class: &str) -> ConnectorConfig {
    let text = format!(
        "[source]\nbootstrap = \"127.0.0.1:1\"\ntopics = [\"t\"]\ngroup_id = \"g\"\n\
         [sink]\ntype = \"weaviate\"\nurl = \"{url}\"\ncollection = \"{class}\"\n\
         consistency_level = \"QUORUM\"\nembedding_field = \"e\"\n"
    );
    config::parse(&text).unwrap().connectors.remove(0)
}

fn doc(id: &str, fields: Value) -> Op {
    let fields: Map<String, Value> = fields.as_object().unwrap().clone();
    Op::Upsert(Doc {
        id: id.into(),
        vector: vec![0.25, -0.5, 1.0],
        fields,
        tenant: None,
    })
}

/// Scripts the class lookup (missing) and its creation.
fn expect_created(fake: &Fake) {
    fake.expect(
        "GET",
        "/v1/schema/Document",
        fixture("weaviate", "schema_get_missing.json", &[]),
    );
    fake.expect(
        "POST",
        "/v1/schema",
        fixture("weaviate", "schema_post_created.json", &[]),
    );
}

fn schema() -> Schema {
    Schema {
        dimension: 3,
        fields: [
            ("title".to_string(), FieldType::Text),
            ("n".to_string(), FieldType::Int),
            ("meta".to_string(), FieldType::Json),
        ]
        .into_iter()
        .collect(),
    }
}

#[tokio::test]
async fn given_missing_class_when_preparing_then_created_with_vectorizer_none_distance_and_property_types(
) {
    let fake = Fake::start().await;
    expect_created(&fake);
    let mut sink = Sink::connect(&cfg(&fake.url, "Document"))
        .await
        .expect("connect");
    sink.prepare(&schema()).await.expect("prepare");
    fake.assert_script_done();
    let reqs = fake.take_requests();
    let class = &reqs[1].body;
    assert_eq!(class["class"], "Document");
    assert_eq!(
        class["vectorizer"], "none",
        "the connector brings its own vectors"
    );
    assert_eq!(class["vectorIndexConfig"]["distance"], "cosine");
    let props: Vec<(String, String)> = class["properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().into(),
                p["dataType"][0].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        props,
        vec![
            ("meta".into(), "text".into()),
            ("n".into(), "int".into()),
            ("title".into(), "text".into())
        ]
    );
}

#[tokio::test]
async fn given_existing_class_with_other_types_when_preparing_then_schema_error_names_the_field() {
    let fake = Fake::start().await;
    fake.expect(
        "GET",
        "/v1/schema/Document",
        fixture("weaviate", "schema_get_conflict.json", &[]),
    );
    let mut sink = Sink::connect(&cfg(&fake.url, "Document"))
        .await
        .expect("connect");
    let err = sink.prepare(&schema()).await.expect_err("type conflict");
    let msg = err.to_string();
    assert!(matches!(err, SinkError::Schema(_)), "{msg}");
    assert!(
        msg.contains("field `n` is text in the collection, integer in the records"),
        "{msg}"
    );
}

#[tokio::test]
async fn given_per_object_batch_errors_when_writing_then_only_those_records_rejected_and_deletes_sent(
) {
    let fake = Fake::start().await;
    let (a, b) = (object_id("a"), object_id("b"));
    expect_created(&fake);
    fake.expect(
        "POST",
        "/v1/batch/objects?consistency_level=QUORUM",
        fixture(
            "weaviate",
            "batch_objects_partial.json",
            &[("ID0", &a), ("ID1", &b)],
        ),
    );
    fake.expect(
        "DELETE",
        format!(
            "/v1/objects/Document/{}?consistency_level=QUORUM",
            object_id("c")
        ),
        (204, Value::Null),
    );
    let mut sink = Sink::connect(&cfg(&fake.url, "Document")).await.unwrap();
    sink.prepare(&schema()).await.unwrap();
    let ops = vec![
        doc("a", json!({"title": "a", "meta": {"k": 1}})),
        doc("b", json!({"title": "b"})),
        Op::Delete("c".into(), None),
    ];
    let rejected = sink.write(&ops, None).await.expect("write");
    fake.assert_script_done();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0].0, 1, "the second op is the failed object");
    assert!(
        rejected[0].1.contains("invalid text property"),
        "{}",
        rejected[0].1
    );
    let reqs = fake.take_requests();
    let objects = reqs[2].body["objects"].as_array().unwrap();
    assert_eq!(objects.len(), 2);
    assert_eq!(objects[0]["class"], "Document");
    assert_eq!(objects[0]["id"], a.as_str());
    assert_eq!(objects[0]["vector"], json!([0.25, -0.5, 1.0]));
    assert_eq!(
        objects[0]["properties"]["meta"], "{\"k\":1}",
        "nested values as JSON text"
    );
}

#[tokio::test]
async fn given_unavailable_server_when_writing_then_transient_error_to_retry() {
    let fake = Fake::start().await;
    expect_created(&fake);
    fake.expect(
        "POST",
        "/v1/batch/objects?consistency_level=QUORUM",
        fixture("weaviate", "batch_objects_unavailable.json", &[]),
    );
    let mut sink = Sink::connect(&cfg(&fake.url, "Document")).await.unwrap();
    sink.prepare(&schema()).await.unwrap();
    let err = sink
        .write(&[doc("a", json!({}))], None)
        .await
        .expect_err("503");
    assert!(err.is_transient(), "{err}");
}

#[tokio::test]
async fn given_graphql_aggregate_when_counting_then_count_read() {
    let fake = Fake::start().await;
    fake.expect(
        "GET",
        "/v1/schema/Document",
        fixture("weaviate", "schema_get_missing.json", &[]),
    );
    fake.expect(
        "POST",
        "/v1/graphql",
        fixture("weaviate", "graphql_aggregate.json", &[]),
    );
    let mut sink = Sink::connect(&cfg(&fake.url, "Document")).await.unwrap();
    assert_eq!(sink.count().await.unwrap(), 1);
    let q = fake.take_requests()[1].body["query"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        q.contains("Aggregate") && q.contains("Document") && q.contains("count"),
        "{q}"
    );
}

/// Against a real Weaviate (STROM_WEAVIATE_URL, e.g. http://127.0.0.1:8080): creates a class,
/// writes, counts, queries, deletes, and drops the class.
#[tokio::test]
async fn given_a_real_weaviate_when_set_then_write_count_query_delete() {
    let Ok(url) = std::env::var("STROM_WEAVIATE_URL") else {
        eprintln!("SKIPPED real Weaviate test: set STROM_WEAVIATE_URL");
        return;
    };
    let class = format!("StromContract{}", std::process::id());
    let mut c = cfg(&url, &class);
    c.sink.consistency_level = None;
    c.sink.api_key = std::env::var("STROM_WEAVIATE_API_KEY").ok();
    let mut sink = Sink::connect(&c).await.expect("connect");
    sink.prepare(&schema()).await.expect("create class");
    let ops = vec![
        doc("a", json!({"title": "a", "n": 1})),
        doc("b", json!({"title": "b", "n": 2})),
    ];
    assert!(sink.write(&ops, None).await.expect("write").is_empty());
    assert_eq!(sink.count().await.unwrap(), 2);
    assert_eq!(sink.nearest(&[0.25, -0.5, 1.0], 1).await.unwrap().len(), 1);
    sink.write(&[Op::Delete("a".into(), None)], None)
        .await
        .expect("delete");
    assert_eq!(sink.count().await.unwrap(), 1);
    let _ = reqwest::Client::new()
        .delete(format!("{url}/v1/schema/{class}"))
        .send()
        .await;
}
