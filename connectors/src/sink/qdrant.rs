//! Qdrant over its REST API (API reference v1.20.x), with reqwest. Not the `qdrant-client`
//! crate: it speaks gRPC through tonic 0.14 / prost 0.14, a second major of each next to the
//! Milvus SDK's 0.13 (and a second TLS setup), for six calls. No Qdrant server can run here
//! (not on crates.io — the `qdrant` crate is an empty placeholder — nor on PyPI or npm, and
//! release downloads are out), so the sink is contract-tested against fixtures from the API
//! reference (tests/contract_qdrant.rs), like Pinecone.
//!
//! The collection is one unnamed dense vector (`size` = the records' dimension, `distance`
//! from `metric`) with the records' fields as payload (schemaless: any field, any type).
//! Point ids are unsigned integers or UUIDs: an id that is neither becomes its uuid5 in the
//! connector's namespace (as with Weaviate), so ids stay deterministic. Writes wait for the
//! operation to be applied (`wait=true`); `consistency_level` is Qdrant's write `ordering`
//! (`weak`, `medium`, `strong`). A refused batch (HTTP 400, e.g. a wrong dimension) is written
//! again record by record by the runner, so only the culprits go to the DLQ.

use serde_json::{json, Value};

use super::http::{floats, JsonApi};
use super::{dedup_last, http_error, runs, Rejections, SinkError};
use crate::config::{ConnectorConfig, Metric};
use crate::record::{Op, Schema, ID_NAMESPACE};

/// Points per request: Qdrant's REST body limit is 32 MiB; 1000 384-float points are ~8 MB.
const MAX_PER_REQUEST: usize = 1000;

pub struct QdrantSink {
    api: JsonApi,
    collection: String,
    metric: Metric,
    ordering: Option<String>,
    schema: Option<Schema>,
}

/// Qdrant's point id for a connector id: an unsigned integer or a UUID as they are, anything
/// else its uuid5.
pub fn point_id(id: &str) -> Value {
    if let Ok(n) = id.parse::<u64>() {
        return json!(n);
    }
    match uuid::Uuid::parse_str(id) {
        Ok(u) => json!(u.to_string()),
        Err(_) => json!(uuid::Uuid::new_v5(&ID_NAMESPACE, id.as_bytes()).to_string()),
    }
}

fn distance(m: Metric) -> &'static str {
    match m {
        Metric::Cosine => "Cosine",
        Metric::L2 => "Euclid",
        Metric::Ip => "Dot",
    }
}

/// Qdrant's error body is `{"status": {"error": "..."}}`.
fn message(v: &Value) -> String {
    v["status"]["error"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

impl QdrantSink {
    pub async fn connect(cfg: &ConnectorConfig) -> Result<QdrantSink, SinkError> {
        let headers: Vec<(&'static str, String)> = cfg
            .sink
            .api_key
            .iter()
            .map(|k| ("api-key", k.clone()))
            .collect();
        let mut sink = QdrantSink {
            api: JsonApi::new(cfg.sink.url.trim_end_matches('/').to_string(), &headers)?,
            collection: cfg.sink.collection.clone(),
            metric: cfg.sink.metric,
            ordering: cfg.sink.consistency_level.clone(),
            schema: None,
        };
        sink.read_collection().await?;
        Ok(sink)
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), SinkError> {
        let (status, v) = self.api.call(method, path, body).await?;
        Ok((status.as_u16(), v))
    }

    fn fail(what: &str, status: u16, v: &Value) -> SinkError {
        http_error(what, reqwest::StatusCode::from_u16(status).ok(), message(v))
    }

    /// Reads the collection's vector size and distance; None when it does not exist.
    async fn read_collection(&mut self) -> Result<(), SinkError> {
        let c = &self.collection;
        let (status, v) = self
            .call(reqwest::Method::GET, &format!("/collections/{c}"), None)
            .await?;
        match status {
            200 => {}
            404 => return Ok(()),
            _ => return Err(Self::fail("get collection", status, &v)),
        }
        let params = &v["result"]["config"]["params"]["vectors"];
        let (Some(size), Some(dist)) = (params["size"].as_u64(), params["distance"].as_str())
        else {
            return Err(SinkError::Schema(format!(
                "collection {c} has no single unnamed vector (named vectors are not supported): {params}"
            )));
        };
        if dist != distance(self.metric) {
            return Err(SinkError::Schema(format!(
                "collection {c} uses the {dist} distance, the config says {}",
                distance(self.metric)
            )));
        }
        self.schema = Some(Schema {
            dimension: size as usize,
            fields: Default::default(),
        });
        Ok(())
    }

    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    pub async fn create(&mut self, wanted: &Schema) -> Result<Schema, SinkError> {
        let c = self.collection.clone();
        let body =
            json!({"vectors": {"size": wanted.dimension, "distance": distance(self.metric)}});
        let (status, v) = self
            .call(
                reqwest::Method::PUT,
                &format!("/collections/{c}"),
                Some(body),
            )
            .await?;
        if status == 200 {
            tracing::info!(collection = %c, dimension = wanted.dimension, "created qdrant collection");
        } else if !(matches!(status, 400 | 409) && message(&v).contains("already exists")) {
            return Err(Self::fail("create collection", status, &v));
        }
        // Read back: another connector may have created it first, with another shape.
        self.read_collection().await?;
        let have = self.schema.clone().ok_or_else(|| {
            SinkError::Transient(format!("collection {c} missing after creation"))
        })?;
        let diffs = super::mismatches(&have, wanted, false);
        if !diffs.is_empty() {
            return Err(SinkError::Schema(diffs.join("; ")));
        }
        Ok(have)
    }

    fn write_query(&self) -> String {
        match &self.ordering {
            Some(o) => format!("?wait=true&ordering={o}"),
            None => "?wait=true".into(),
        }
    }

    pub async fn write(&mut self, ops: &[Op]) -> Result<Rejections, SinkError> {
        let c = self.collection.clone();
        let q = self.write_query();
        for (_, run) in runs(ops, MAX_PER_REQUEST) {
            let upsert = matches!(run[0], Op::Upsert(_));
            let run = dedup_last(run);
            let (method, path, body) = if upsert {
                let points: Vec<Value> = run
                    .iter()
                    .filter_map(|op| match op {
                        Op::Upsert(d) => Some(json!({
                            "id": point_id(&d.id),
                            "vector": d.vector,
                            "payload": d.fields,
                        })),
                        Op::Delete(..) => None,
                    })
                    .collect();
                (
                    reqwest::Method::PUT,
                    format!("/collections/{c}/points{q}"),
                    json!({"points": points}),
                )
            } else {
                let ids: Vec<Value> = run.iter().map(|o| point_id(o.id())).collect();
                (
                    reqwest::Method::POST,
                    format!("/collections/{c}/points/delete{q}"),
                    json!({"points": ids}),
                )
            };
            let (status, v) = self.call(method, &path, Some(body)).await?;
            if status != 200 {
                return Err(Self::fail(
                    if upsert {
                        "upsert points"
                    } else {
                        "delete points"
                    },
                    status,
                    &v,
                ));
            }
        }
        // Qdrant refuses a batch as a whole: the runner finds the culprits one by one.
        Ok(Vec::new())
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value, SinkError> {
        let (status, v) = self.call(reqwest::Method::POST, path, Some(body)).await?;
        if status != 200 {
            return Err(Self::fail(path, status, &v));
        }
        Ok(v)
    }

    pub async fn count(&mut self) -> Result<u64, SinkError> {
        let v = self
            .post(
                &format!("/collections/{}/points/count", self.collection),
                json!({"exact": true}),
            )
            .await?;
        v["result"]["count"]
            .as_u64()
            .ok_or_else(|| SinkError::Permanent(format!("count: unexpected answer {v}")))
    }

    pub async fn nearest(&mut self, vector: &[f32], k: usize) -> Result<Vec<String>, SinkError> {
        let v = self
            .post(
                &format!("/collections/{}/points/query", self.collection),
                json!({"query": vector, "limit": k, "with_payload": false}),
            )
            .await?;
        Ok(v["result"]["points"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| id_text(&p["id"]))
            .collect())
    }

    pub async fn all_vectors(&mut self) -> Result<Vec<(String, Vec<f32>)>, SinkError> {
        let mut out = Vec::new();
        let mut offset = Value::Null;
        loop {
            let mut body = json!({"limit": 256, "with_vector": true, "with_payload": false});
            if !offset.is_null() {
                body["offset"] = offset.clone();
            }
            let v = self
                .post(
                    &format!("/collections/{}/points/scroll", self.collection),
                    body,
                )
                .await?;
            for p in v["result"]["points"].as_array().into_iter().flatten() {
                out.push((id_text(&p["id"]), floats(&p["vector"])));
            }
            offset = v["result"]["next_page_offset"].clone();
            if offset.is_null() {
                return Ok(out);
            }
        }
    }
}

/// A point id (number or UUID string) as text.
fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_ids_then_integers_and_uuids_kept_and_others_mapped() {
        assert_eq!(point_id("42"), json!(42));
        let u = "0b6c6b8e-2d0c-4a57-9a1b-3a3c2d1e0f00";
        assert_eq!(point_id(u), json!(u));
        assert_eq!(point_id("doc-1"), point_id("doc-1"));
        assert_ne!(point_id("doc-1"), point_id("doc-2"));
        assert!(uuid::Uuid::parse_str(point_id("-1").as_str().unwrap()).is_ok());
    }
}
