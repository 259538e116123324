//! Pinecone's data plane (REST, API version 2025-04: pinecone-io/pinecone-api
//! `2025-04/db_data_2025-04.oas.yaml`). `url` is the index host; `collection` is the
//! namespace, created implicitly by the first upsert. The index itself is not created here:
//! that is the control plane's job and needs a cloud, a region and a billing plan, so the
//! connector checks the existing index's dimension instead. See tests/contract_pinecone.rs.

use serde_json::{json, Map, Value};

use super::{http_error, Rejections, SinkError};
use crate::config::ConnectorConfig;
use crate::record::{Op, Schema};

const API_VERSION: &str = "2025-04";
/// The spec's batch limit for upserts and deletes.
const MAX_PER_REQUEST: usize = 1000;

pub struct PineconeSink {
    http: reqwest::Client,
    base: String,
    namespace: String,
    api_key: Option<String>,
    schema: Option<Schema>,
}

impl PineconeSink {
    pub async fn connect(cfg: &ConnectorConfig) -> Result<PineconeSink, SinkError> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .map_err(|e| SinkError::Permanent(format!("http client: {e}")))?;
        let mut sink = PineconeSink {
            http,
            base: cfg.sink.url.trim_end_matches('/').to_string(),
            namespace: cfg.sink.collection.clone(),
            api_key: cfg.sink.api_key.clone(),
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
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("X-Pinecone-API-Version", API_VERSION);
        if let Some(key) = &self.api_key {
            req = req.header("Api-Key", key);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| http_error(path, None, e.to_string()))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| http_error(path, None, e.to_string()))?;
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status.is_success() {
            Ok(v)
        } else {
            // rpcStatus: {code, message}
            let msg = v["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            Err(http_error(path, Some(status), msg))
        }
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
        let mut i = 0;
        while i < ops.len() {
            let upsert = matches!(ops[i], Op::Upsert(_));
            let mut j = i;
            while j < ops.len()
                && j - i < MAX_PER_REQUEST
                && matches!(ops[j], Op::Upsert(_)) == upsert
            {
                j += 1;
            }
            // Last op of an id wins within a request.
            let mut seen = std::collections::HashSet::new();
            let mut run: Vec<&Op> = ops[i..j]
                .iter()
                .rev()
                .filter(|o| seen.insert(o.id()))
                .collect();
            run.reverse();
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
                        Op::Delete(_) => None,
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
            i = j;
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
                    let values = v["values"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|x| x.as_f64().map(|f| f as f32))
                                .collect()
                        })
                        .unwrap_or_default();
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
