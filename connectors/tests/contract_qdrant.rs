//! Contract tests of the Qdrant sink against a local HTTP fake answering with fixtures from
//! Qdrant's REST API reference v1.20.x (tests/fixtures/qdrant, each citing it). Not
//! integration tests: no Qdrant server can run here (see src/sink/qdrant.rs).
//! `given_a_real_qdrant_...` runs against a real server when STROM_QDRANT_URL is set.

mod fake_http;

use fake_http::{fixture, Fake};
use serde_json::{json, Map, Value};
use strom_connectors::config::{self, ConnectorConfig};
use strom_connectors::record::{Doc, Op, Schema};
use strom_connectors::sink::qdrant::point_id;
use strom_connectors::sink::{Sink, SinkError};

fn cfg(url: &str, collection: &str) -> ConnectorConfig {
    let text = format!(
        "[source]\nbootstrap = \"127.0.0.1:1\"\ntopics = [\"t\"]\ngroup_id = \"g\"\n\
         [sink]\ntype = \"qdrant\"\nurl = \"{url}\"\ncollection = \"{collection}\"\n\
         api_key = \"test-key\"\nconsistency_level = \"strong\"\nembedding_field = \"e\"\n"
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

fn info(dim: &str, distance: &str) -> (u16, Value) {
    fixture(
        "qdrant",
        "collection_info.json",
        &[("DIM", dim), ("DISTANCE", distance)],
    )
}

/// Connected to a collection of 3 cosine dimensions.
async fn connected(fake: &Fake) -> Sink {
    fake.expect("GET", "/collections/docs", info("3", "Cosine"));
    Sink::connect(&cfg(&fake.url, "docs"))
        .await
        .expect("connect")
}

#[tokio::test]
async fn given_missing_collection_when_preparing_then_created_with_size_distance_and_api_key() {
    let fake = Fake::start().await;
    fake.expect(
        "GET",
        "/collections/docs",
        fixture("qdrant", "collection_missing.json", &[]),
    );
    fake.expect(
        "PUT",
        "/collections/docs",
        fixture("qdrant", "collection_created.json", &[]),
    );
    fake.expect("GET", "/collections/docs", info("4", "Cosine"));
    let mut sink = Sink::connect(&cfg(&fake.url, "docs"))
        .await
        .expect("connect");
    assert!(sink.existing_schema().is_none());
    let s = sink.prepare(&dim(4)).await.expect("create");
    assert_eq!(s.dimension, 4);
    fake.assert_script_done();
    let reqs = fake.take_requests();
    assert_eq!(
        reqs[1].body,
        json!({"vectors": {"size": 4, "distance": "Cosine"}})
    );
    assert!(reqs.iter().all(|r| r.header("api-key") == Some("test-key")));
}

#[tokio::test]
async fn given_collection_of_other_dimension_or_distance_then_mismatch_said() {
    let fake = Fake::start().await;
    let mut sink = connected(&fake).await;
    let err = sink.prepare(&dim(4)).await.expect_err("mismatch");
    assert!(matches!(err, SinkError::Schema(_)), "{err}");
    assert!(
        err.to_string()
            .contains("vectors have 3 dimensions, the records 4"),
        "{err}"
    );
    fake.expect("GET", "/collections/docs", info("3", "Euclid"));
    let err = Sink::connect(&cfg(&fake.url, "docs"))
        .await
        .err()
        .expect("distance mismatch");
    assert!(
        err.to_string()
            .contains("uses the Euclid distance, the config says Cosine"),
        "{err}"
    );
}

#[tokio::test]
async fn given_ops_when_writing_then_points_upserted_and_deleted_in_order_waiting_strong() {
    let fake = Fake::start().await;
    let mut sink = connected(&fake).await;
    sink.prepare(&dim(3)).await.unwrap();
    let ok = || fixture("qdrant", "update_completed.json", &[]);
    fake.expect(
        "PUT",
        "/collections/docs/points?wait=true&ordering=strong",
        ok(),
    );
    fake.expect(
        "POST",
        "/collections/docs/points/delete?wait=true&ordering=strong",
        ok(),
    );
    let ops = vec![
        doc(
            "a",
            vec![0.25, -0.5, 1.0],
            json!({"title": "a", "meta": {"k": 1}}),
        ),
        doc("7", vec![1.0, 0.0, 0.0], json!({})),
        doc("a", vec![0.0, 0.0, 1.0], json!({"title": "a2"})),
        Op::Delete("c".into(), None),
    ];
    assert!(sink.write(&ops, None).await.expect("write").is_empty());
    fake.assert_script_done();
    let reqs = fake.take_requests();
    let points = reqs[1].body["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "the later op of `a` replaced the earlier");
    assert_eq!(points[0]["id"], json!(7), "an integer id stays an integer");
    assert_eq!(points[1]["id"], point_id("a"));
    assert_eq!(points[1]["vector"], json!([0.0, 0.0, 1.0]));
    assert_eq!(points[1]["payload"], json!({"title": "a2"}));
    assert_eq!(reqs[2].body, json!({"points": [point_id("c")]}));
}

#[tokio::test]
async fn given_refusals_then_400_permanent_and_503_transient() {
    let fake = Fake::start().await;
    let mut sink = connected(&fake).await;
    sink.prepare(&dim(3)).await.unwrap();
    fake.expect(
        "PUT",
        "/collections/docs/points?wait=true&ordering=strong",
        fixture("qdrant", "upsert_bad_dimension.json", &[]),
    );
    let err = sink
        .write(&[doc("a", vec![1.0; 4], json!({}))], None)
        .await
        .expect_err("400");
    assert!(matches!(err, SinkError::Permanent(_)), "{err}");
    assert!(err.to_string().contains("expected dim: 3, got 4"), "{err}");
    fake.expect(
        "PUT",
        "/collections/docs/points?wait=true&ordering=strong",
        fixture("qdrant", "upsert_unavailable.json", &[]),
    );
    let err = sink
        .write(&[doc("a", vec![1.0; 3], json!({}))], None)
        .await
        .expect_err("503");
    assert!(err.is_transient(), "{err}");
}

#[tokio::test]
async fn given_reads_then_count_query_and_scroll_pages() {
    let fake = Fake::start().await;
    let mut sink = connected(&fake).await;
    let u = point_id("a");
    let u = u.as_str().unwrap();
    fake.expect(
        "POST",
        "/collections/docs/points/count",
        fixture("qdrant", "count.json", &[]),
    );
    assert_eq!(sink.count().await.unwrap(), 2);
    fake.expect(
        "POST",
        "/collections/docs/points/query",
        fixture("qdrant", "query.json", &[("ID0", u)]),
    );
    assert_eq!(sink.nearest(&[1.0, 0.0, 0.0], 2).await.unwrap(), [u, "42"]);
    fake.expect(
        "POST",
        "/collections/docs/points/scroll",
        fixture("qdrant", "scroll_page1.json", &[("ID0", u)]),
    );
    fake.expect(
        "POST",
        "/collections/docs/points/scroll",
        fixture("qdrant", "scroll_page2.json", &[("ID0", u)]),
    );
    let all = sink.all_vectors().await.unwrap();
    assert_eq!(
        all,
        vec![
            ("42".to_string(), vec![0.25, -0.5, 1.0]),
            (u.to_string(), vec![1.0, 0.0, 0.0])
        ]
    );
    let reqs = fake.take_requests();
    assert_eq!(reqs[1].body, json!({"exact": true}));
    assert_eq!(reqs[2].body["limit"], 2);
    assert_eq!(
        reqs[4].body["offset"],
        json!(u),
        "the second page starts at the offset"
    );
}

/// Against a real Qdrant (STROM_QDRANT_URL, e.g. http://127.0.0.1:6333): creates a
/// collection, writes, counts, queries, deletes, and drops it.
#[tokio::test]
async fn given_a_real_qdrant_when_set_then_write_count_query_delete() {
    let Ok(url) = std::env::var("STROM_QDRANT_URL") else {
        eprintln!("SKIPPED real Qdrant test: set STROM_QDRANT_URL");
        return;
    };
    let name = format!("strom_contract_{}", std::process::id());
    let mut c = cfg(&url, &name);
    c.sink.api_key = std::env::var("STROM_QDRANT_API_KEY").ok();
    let mut sink = Sink::connect(&c).await.expect("connect");
    sink.prepare(&dim(3)).await.expect("create");
    let ops = vec![
        doc("a", vec![1.0, 0.0, 0.0], json!({"title": "a"})),
        doc("b", vec![0.0, 1.0, 0.0], json!({"title": "b"})),
    ];
    assert!(sink.write(&ops, None).await.expect("write").is_empty());
    assert_eq!(sink.count().await.unwrap(), 2);
    assert_eq!(
        sink.nearest(&[1.0, 0.0, 0.0], 1).await.unwrap()[0],
        point_id("a").as_str().unwrap()
    );
    sink.write(&[Op::Delete("a".into(), None)], None)
        .await
        .expect("delete");
    assert_eq!(sink.count().await.unwrap(), 1);
    let _ = reqwest::Client::new()
        .delete(format!("{url}/collections/{name}"))
        .send()
        .await;
}
