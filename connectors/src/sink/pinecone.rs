//! Pinecone's data plane (REST, API version 2025-04: pinecone-io/pinecone-api
//! `2025-04/db_data_2025-04.oas.yaml`). `url` is the index host; `collection` is the
//! namespace, created implicitly by the first upsert. The index itself is not created here:
//! that is the control plane's job and needs a cloud, a region and a billing plan, so the
//! connector checks the existing index's dimension instead. See tests/contract_pinecone.rs.

use serde_json::{json, Map, Value};

use super::http::{floats, JsonApi};
use super::{dedup_last, runs, Rejections, SinkError};
use crate::config::ConnectorConfig;
use crate::record::{Op, Schema};

const API_VERSION: &str = "2025-04";
/// The spec's batch limit for upserts and deletes.
const MAX_PER_REQUEST: usize = 1000;

pub struct PineconeSink {
    api: JsonApi,
    namespace: String,
    schema: Option<Schema>,
}

impl PineconeSink {
    pub async fn connect(cfg: &ConnectorConfig) -> Result<PineconeSink, SinkError> {
        let mut headers = vec![("x-pinecone-api-version", API_VERSION.to_string())];
        if let Some(key) = &cfg.sink.api_key {
            headers.push(("api-key", key.clone()));
        }
        let mut sink = PineconeSink {
            api: JsonApi::new(cfg.sink.url.trim_end_matches('/').to_string(), &headers)?,
            namespace: cfg.sink.collection.clone(),
            schema: None,
        };
        let stats = sink.post("/describe_index_stats", json!({})).await?;
        let dimension = stats["dimension"].as_u64().ok_or_else(|| {
            SinkError::Permanent(format!("describe_index_stats without a dimension: {stats}"))
        })?;
        sink.schema = Some(Schema {
            dimension: dimension as usize,
            fields: Default::default(),
        });
        Ok(sink)
    }

    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, SinkError> {
        self.api.ok(method, path, body).await
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value, SinkError> {
        self.request(reqwest::Method::POST, path, Some(body)).await
    }

    /// The index exists with a fixed dimension; nothing to create.
    pub async fn create(&mut self, wanted: &Schema) -> Result<Schema, SinkError> {
        let s = Schema {
            dimension: wanted.dimension,
            fields: Default::default(),
        };
        self.schema = Some(s.clone());
        Ok(s)
    }

    pub async fn write(&mut self, ops: &[Op]) -> Result<Rejections, SinkError> {
        for (_, run) in runs(ops, MAX_PER_REQUEST) {
            let upsert = matches!(run[0], Op::Upsert(_));
            let run = dedup_last(run);
            if upsert {
                let vectors: Vec<Value> = run
                    .iter()
                    .filter_map(|op| match op {
                        Op::Upsert(d) => {
                            let mut v = json!({"id": d.id, "values": d.vector});
                            if !d.fields.is_empty() {
                                v["metadata"] = metadata(&d.fields);
                            }
                            Some(v)
                        }
                        Op::Delete(..) => None,
                    })
                    .collect();
                self.post(
                    "/vectors/upsert",
                    json!({"vectors": vectors, "namespace": self.namespace}),
                )
                .await?;
            } else {
                let ids: Vec<&str> = run.iter().map(|o| o.id()).collect();
                self.post(
                    "/vectors/delete",
                    json!({"ids": ids, "namespace": self.namespace}),
                )
                .await?;
            }
        }
        Ok(Vec::new())
    }

    pub async fn count(&mut self) -> Result<u64, SinkError> {
        let stats = self.post("/describe_index_stats", json!({})).await?;
        Ok(stats["namespaces"][&self.namespace]["vectorCount"]
            .as_u64()
            .unwrap_or(0))
    }

    pub async fn nearest(&mut self, vector: &[f32], k: usize) -> Result<Vec<String>, SinkError> {
        let v = self
            .post(
                "/query",
                json!({"vector": vector, "topK": k, "namespace": self.namespace}),
            )
            .await?;
        Ok(v["matches"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["id"].as_str().map(str::to_string))
            .collect())
    }

    /// `GET /vectors/list` pages of ids (serverless indexes), then `GET /vectors/fetch`.
    pub async fn all_vectors(&mut self) -> Result<Vec<(String, Vec<f32>)>, SinkError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut path = format!("/vectors/list?namespace={}&limit=100", self.namespace);
            if let Some(t) = &token {
                path.push_str(&format!("&paginationToken={t}"));
            }
            let page = self.request(reqwest::Method::GET, &path, None).await?;
            let ids: Vec<String> = page["vectors"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v["id"].as_str().map(str::to_string))
                .collect();
            if !ids.is_empty() {
                let q: Vec<String> = ids.iter().map(|id| format!("ids={id}")).collect();
                let fetched = self
                    .request(
                        reqwest::Method::GET,
                        &format!(
                            "/vectors/fetch?namespace={}&{}",
                            self.namespace,
                            q.join("&")
                        ),
                        None,
                    )
                    .await?;
                for (id, v) in fetched["vectors"].as_object().into_iter().flatten() {
                    let values = floats(&v["values"]);
                    out.push((id.clone(), values));
                }
            }
            token = page["pagination"]["next"].as_str().map(str::to_string);
            if token.is_none() || ids.is_empty() {
                return Ok(out);
            }
        }
    }
}

/// Pinecone metadata: strings, numbers, booleans, lists of strings; anything else as JSON text.
fn metadata(fields: &Map<String, Value>) -> Value {
    Value::Object(
        fields
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::Array(a) if a.iter().all(Value::is_string) => v.clone(),
                    Value::Array(_) | Value::Object(_) => Value::String(v.to_string()),
                    v => v.clone(),
                };
                (k.clone(), v)
            })
            .collect(),
    )
}
