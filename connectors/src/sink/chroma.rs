//! Chroma over its HTTP API v2 (`/api/v2/tenants/{tenant}/databases/{database}/collections`).
//! Chroma has no transactions: the Kafka group's commit, made only after Chroma acknowledged
//! a batch, is the resume point, and deterministic ids make the re-sent tail an overwrite.
//! Chroma is schemaless for metadata; the collection fixes only the dimension (on its first
//! vector) and the HNSW space.

use serde_json::{json, Map, Value};

use super::http::{floats, JsonApi};
use super::{dedup_last, http_error, runs, Rejections, SinkError};
use crate::config::{ConnectorConfig, Metric};
use crate::record::{Op, Schema};

pub struct ChromaSink {
    /// Rooted at `.../tenants/{t}/databases/{d}/collections`.
    api: JsonApi,
    name: String,
    metric: Metric,
    /// Collection id once known.
    id: Option<String>,
    schema: Option<Schema>,
}

fn space(m: Metric) -> &'static str {
    match m {
        Metric::Cosine => "cosine",
        Metric::L2 => "l2",
        Metric::Ip => "ip",
    }
}

impl ChromaSink {
    pub async fn connect(cfg: &ConnectorConfig) -> Result<ChromaSink, SinkError> {
        let s = &cfg.sink;
        let mut sink = ChromaSink {
            api: JsonApi::new(
                format!(
                    "{}/api/v2/tenants/{}/databases/{}/collections",
                    s.url.trim_end_matches('/'),
                    s.tenant,
                    s.database
                ),
                &[],
            )?,
            name: s.collection.clone(),
            metric: s.metric,
            id: None,
            schema: None,
        };
        // An existing collection: its id, and its dimension if it holds vectors.
        let (status, body) = sink
            .api
            .call(reqwest::Method::GET, &format!("/{}", sink.name), None)
            .await?;
        if status.is_success() {
            sink.adopt(&body)?;
        } else if status.as_u16() != 404 && !body.to_string().contains("does not exist") {
            return Err(http_error("get collection", Some(status), body.to_string()));
        }
        Ok(sink)
    }

    /// Takes the id, dimension and space of a collection description.
    fn adopt(&mut self, c: &Value) -> Result<(), SinkError> {
        let id = c["id"]
            .as_str()
            .ok_or_else(|| SinkError::Permanent(format!("collection without id: {c}")))?;
        self.id = Some(id.to_string());
        if let Some(have) = c["configuration_json"]["hnsw"]["space"].as_str() {
            if have != space(self.metric) {
                return Err(SinkError::Schema(format!(
                    "collection {} uses the {have} space, the config says metric = {}",
                    self.name,
                    space(self.metric)
                )));
            }
        }
        if let Some(d) = c["dimension"].as_u64() {
            self.schema = Some(Schema {
                dimension: d as usize,
                fields: Default::default(),
            });
        }
        Ok(())
    }

    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    pub async fn create(&mut self, wanted: &Schema) -> Result<Schema, SinkError> {
        if self.id.is_none() {
            let c = self
                .api
                .send(
                    reqwest::Method::POST,
                    "",
                    json!({
                        "name": self.name,
                        "get_or_create": true,
                        "configuration": {"hnsw": {"space": space(self.metric)}},
                    }),
                )
                .await?;
            self.adopt(&c)?;
            tracing::info!(collection = %self.name, "created chroma collection");
        }
        // Chroma fixes the dimension with the first vector; until then ours is the rule.
        let schema = match &self.schema {
            Some(s) if s.dimension != wanted.dimension => {
                return Err(SinkError::Schema(format!(
                "dimension mismatch: the collection's vectors have {} dimensions, the records {}",
                s.dimension, wanted.dimension
            )))
            }
            _ => Schema {
                dimension: wanted.dimension,
                fields: Default::default(),
            },
        };
        self.schema = Some(schema.clone());
        Ok(schema)
    }

    fn collection_path(&self, verb: &str) -> Result<String, SinkError> {
        let id = self
            .id
            .as_ref()
            .ok_or_else(|| SinkError::Permanent("collection not created yet".into()))?;
        Ok(format!("/{id}/{verb}"))
    }

    pub async fn write(&mut self, ops: &[Op]) -> Result<Rejections, SinkError> {
        if self.id.is_none() {
            // Only deletes so far, and no collection: nothing to delete.
            return Ok(Vec::new());
        }
        // Runs of the same kind, in order, so a delete after an upsert of one id still wins.
        for (_, run) in runs(ops, usize::MAX) {
            let run = dedup_last(run);
            if matches!(run[0], Op::Upsert(_)) {
                let mut ids = Vec::new();
                let mut embeddings = Vec::new();
                let mut metadatas = Vec::new();
                for op in run {
                    let Op::Upsert(d) = op else { continue };
                    ids.push(d.id.clone());
                    embeddings.push(d.vector.clone());
                    metadatas.push(metadata(&d.fields));
                }
                let path = self.collection_path("upsert")?;
                self.api
                    .send(
                        reqwest::Method::POST,
                        &path,
                        json!({"ids": ids, "embeddings": embeddings, "metadatas": metadatas}),
                    )
                    .await?;
            } else {
                let ids: Vec<&str> = run.iter().map(|o| o.id()).collect();
                let path = self.collection_path("delete")?;
                self.api
                    .send(reqwest::Method::POST, &path, json!({"ids": ids}))
                    .await?;
            }
        }
        Ok(Vec::new())
    }

    pub async fn count(&mut self) -> Result<u64, SinkError> {
        let path = self.collection_path("count")?;
        let (status, v) = self.api.call(reqwest::Method::GET, &path, None).await?;
        if !status.is_success() {
            return Err(http_error("count", Some(status), v.to_string()));
        }
        v.as_u64()
            .ok_or_else(|| SinkError::Permanent(format!("count: unexpected answer {v}")))
    }

    pub async fn all_vectors(&mut self) -> Result<Vec<(String, Vec<f32>)>, SinkError> {
        let path = self.collection_path("get")?;
        let mut out = Vec::new();
        loop {
            let v = self
                .api
                .send(
                    reqwest::Method::POST,
                    &path,
                    json!({"limit": 1000, "offset": out.len(), "include": ["embeddings"]}),
                )
                .await?;
            let ids = v["ids"].as_array().cloned().unwrap_or_default();
            if ids.is_empty() {
                return Ok(out);
            }
            for (id, e) in ids
                .iter()
                .zip(v["embeddings"].as_array().into_iter().flatten())
            {
                out.push((id.as_str().unwrap_or_default().to_string(), floats(e)));
            }
        }
    }

    pub async fn nearest(&mut self, vector: &[f32], k: usize) -> Result<Vec<String>, SinkError> {
        let path = self.collection_path("query")?;
        // Chroma's HNSW search explores max(ef_search, n_results) candidates; after a replay
        // has upserted every id again, the graph is full of replaced nodes and a top-10
        // search missed 4 of 10 true neighbours (CI, Chroma 1.5.9). Asking for many more
        // candidates widens the search; their distances are exact and come sorted, so the
        // first k are the true top-k whenever they are among the candidates.
        let n = (k * 20).max(200);
        let v = self
            .api
            .send(
                reqwest::Method::POST,
                &path,
                json!({"query_embeddings": [vector], "n_results": n, "include": ["distances"]}),
            )
            .await?;
        let ids = v["ids"][0].as_array().cloned().unwrap_or_default();
        let distances = v["distances"][0].as_array().cloned().unwrap_or_default();
        let mut hits: Vec<(f64, String)> = ids
            .iter()
            .zip(distances.iter())
            .filter_map(|(id, d)| Some((d.as_f64()?, id.as_str()?.to_string())))
            .collect();
        hits.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(hits.into_iter().take(k).map(|(_, id)| id).collect())
    }
}

/// Chroma metadata values are scalars (or arrays of one scalar type): nested objects and mixed
/// arrays are stored as their JSON text. An empty map is sent as null (Chroma rejects `{}`).
fn metadata(fields: &Map<String, Value>) -> Value {
    if fields.is_empty() {
        return Value::Null;
    }
    let m: Map<String, Value> = fields
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Value::Object(_) => Value::String(v.to_string()),
                Value::Array(a) if !homogeneous_scalars(a) => Value::String(v.to_string()),
                v => v.clone(),
            };
            (k.clone(), v)
        })
        .collect();
    Value::Object(m)
}

fn homogeneous_scalars(a: &[Value]) -> bool {
    let kind = |v: &Value| match v {
        Value::Bool(_) => 1,
        Value::Number(n) if n.is_i64() => 2,
        Value::Number(_) => 3,
        Value::String(_) => 4,
        _ => 0,
    };
    !a.is_empty() && kind(&a[0]) != 0 && a.iter().all(|v| kind(v) == kind(&a[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_nested_fields_then_metadata_is_scalars() {
        let f: Map<String, Value> =
            serde_json::from_value(json!({"a": {"b": 1}, "t": ["x", "y"], "m": [1, "x"], "n": 2}))
                .unwrap();
        let m = metadata(&f);
        assert_eq!(m["a"], json!("{\"b\":1}"));
        assert_eq!(m["t"], json!(["x", "y"]));
        assert_eq!(m["m"], json!("[1,\"x\"]"));
        assert_eq!(m["n"], json!(2));
        assert_eq!(metadata(&Map::new()), Value::Null);
    }
}
