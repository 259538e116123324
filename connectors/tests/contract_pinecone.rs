//! Contract tests of the Pinecone sink against a local HTTP fake that answers with fixtures
//! taken from Pinecone's published OpenAPI spec, API version 2025-04 (tests/fixtures/pinecone,
//! each citing it). Not integration tests. `given_a_real_pinecone_...` runs against a real
//! index when STROM_PINECONE_URL (the index host) and STROM_PINECONE_API_KEY are set.

mod fake_http;

use fake_http::{fixture, Fake};
use serde_json::{json, Map, Value};
use strom_connectors::config::{self, ConnectorConfig};
use strom_connectors::record::{Doc, Op, Schema};
use strom_connectors::sink::{Sink, SinkError};

fn cfg(url: &str, namespace: &str) -> ConnectorConfig {
    let text = format!(
        "[source]\nbootstrap = \"127.0.0.1:1\"\ntopics = [\"t\"]\ngroup_id = \"g\"\n\
         [sink]\ntype = \"pinecone\"\nurl = \"{url}\"\ncollection = \"{namespace}\"\n\
         api_key = \"test-key\"\nembedding_field = \"e\"\n"
    );
    config::parse(&text).unwrap().connectors.remove(0)
}

fn doc(id: &str, vector: Vec<f32>, fields: Value) -> Op {
    let fields: Map<String, Value> = fields.as_object().unwrap().clone();
    Op::Upsert(Doc {
        id: id.into(),
        vector,
        fields,
        tenant: None,
    })
}

fn dim(d: usize) -> Schema {
    Schema {
        dimension: d,
        fields: Default::default(),
    }
}

async fn connected(fake: &Fake) -> Sink {
    fake.expect(
        "POST",
        "/describe_index_stats",
        fixture("pinecone", "describe_index_stats.json", &[]),
    );
    Sink::connect(&cfg(&fake.url, "docs"))
        .await
        .expect("connect")
}

#[tokio::test]
async fn given_index_of_other_dimension_when_preparing_then_dimension_mismatch_said() {
    let fake = Fake::start().await;
    let mut sink = connected(&fake).await;
    let err = sink.prepare(&dim(4)).await.expect_err("mismatch");
    assert!(matches!(err, SinkError::Schema(_)), "{err}");
    assert!(
        err.to_string()
            .contains("vectors have 3 dimensions, the records 4"),
        "{err}"
    );
    sink.prepare(&dim(3)).await.expect("same dimension");
}

#[tokio::test]
async fn given_upserts_and_a_delete_when_writing_then_namespace_headers_and_bodies_per_spec() {
    let fake = Fake::start().await;
    let mut sink = connected(&fake).await;
    sink.prepare(&dim(3)).await.unwrap();
    fake.expect(
        "POST",
        "/vectors/upsert",
        fixture("pinecone", "upsert_ok.json", &[]),
    );
    fake.expect(
        "POST",
        "/vectors/delete",
        fixture("pinecone", "delete_ok.json", &[]),
    );
    let ops = vec![
        doc(
            "a",
            vec![0.1, 0.2, 0.3],
            json!({"title": "a", "tags": ["x"], "meta": {"k": 1}}),
        ),
        doc("b", vec![0.3, 0.2, 0.1], json!({})),
        Op::Delete("c".into(), None),
    ];
    assert!(sink.write(&ops, None).await.expect("write").is_empty());
    fake.assert_script_done();
    let reqs = fake.take_requests();
    for r in &reqs {
        assert_eq!(r.header("Api-Key"), Some("test-key"));
        assert_eq!(r.header("X-Pinecone-API-Version"), Some("2025-04"));
    }
    let up = &reqs[1].body;
    assert_eq!(up["namespace"], "docs");
    assert_eq!(up["vectors"][0]["id"], "a");
    assert_eq!(up["vectors"][0]["values"], json!([0.1f32, 0.2f32, 0.3f32]));
    assert_eq!(
        up["vectors"][0]["metadata"]["tags"],
        json!(["x"]),
        "string lists stay lists"
    );
    assert_eq!(
        up["vectors"][0]["metadata"]["meta"], "{\"k\":1}",
        "objects as JSON text"
    );
    assert!(
        up["vectors"][1].get("metadata").is_none(),
        "no empty metadata"
    );
    assert_eq!(reqs[2].body, json!({"ids": ["c"], "namespace": "docs"}));
}

#[tokio::test]
async fn given_400_and_429_when_writing_then_permanent_and_transient() {
    let fake = Fake::start().await;
    let mut sink = connected(&fake).await;
    sink.prepare(&dim(3)).await.unwrap();
    fake.expect(
        "POST",
        "/vectors/upsert",
        fixture("pinecone", "upsert_bad_dimension.json", &[]),
    );
    fake.expect(
        "POST",
        "/vectors/upsert",
        fixture("pinecone", "upsert_rate_limited.json", &[]),
    );
    let op = [doc("a", vec![0.1, 0.2, 0.3, 0.4], json!({}))];
    let bad = sink.write(&op, None).await.expect_err("400");
    assert!(
        !bad.is_transient() && bad.to_string().contains("does not match the dimension"),
        "{bad}"
    );
    let busy = sink.write(&op, None).await.expect_err("429");
    assert!(busy.is_transient(), "{busy}");
}

#[tokio::test]
async fn given_query_and_stats_then_matches_and_namespace_count_read() {
    let fake = Fake::start().await;
    let mut sink = connected(&fake).await;
    fake.expect("POST", "/query", fixture("pinecone", "query.json", &[]));
    fake.expect(
        "POST",
        "/describe_index_stats",
        fixture("pinecone", "describe_index_stats.json", &[]),
    );
    assert_eq!(
        sink.nearest(&[0.1, 0.2, 0.3], 2).await.unwrap(),
        vec!["b", "a"]
    );
    assert_eq!(
        sink.count().await.unwrap(),
        2,
        "the namespace's count, not the index's"
    );
    let q = &fake.take_requests()[1].body;
    assert_eq!(q["topK"], 2);
    assert_eq!(q["namespace"], "docs");
}

/// Against a real index (STROM_PINECONE_URL = its host, STROM_PINECONE_API_KEY): writes two
/// vectors of the index's dimension into a fresh namespace, deletes one, and cleans up.
#[tokio::test]
async fn given_a_real_pinecone_when_set_then_write_and_delete() {
    let (Ok(url), Ok(key)) = (
        std::env::var("STROM_PINECONE_URL"),
        std::env::var("STROM_PINECONE_API_KEY"),
    ) else {
        eprintln!("SKIPPED real Pinecone test: set STROM_PINECONE_URL and STROM_PINECONE_API_KEY");
        return;
    };
    let ns = format!("strom-contract-{}", std::process::id());
    let mut c = cfg(&url, &ns);
    c.sink.api_key = Some(key);
    let mut sink = Sink::connect(&c).await.expect("connect");
    let d = sink.existing_schema().expect("index dimension").dimension;
    sink.prepare(&dim(d)).await.unwrap();
    let ops = vec![
        doc("a", vec![0.5; d], json!({"n": 1})),
        doc("b", vec![0.25; d], json!({})),
    ];
    sink.write(&ops, None).await.expect("upsert");
    sink.write(
        &[Op::Delete("a".into(), None), Op::Delete("b".into(), None)],
        None,
    )
    .await
    .expect("delete");
}
