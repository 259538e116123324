//! Weaviate over its REST API (`/v1`), with reqwest rather than the `weaviate-community`
//! crate: the connector needs four calls (class get/create, batch objects, object delete,
//! GraphQL count/nearVector), and the crate would bring its own reqwest/TLS stack and object
//! model to convert to and from. Written to the OpenAPI spec of weaviate/weaviate
//! (`openapi-specs/schema.json`, info.version 1.40.0-dev); see tests/contract_weaviate.rs.
//!
//! Weaviate ids are UUIDs: an id that is not one (a key, a field) becomes its uuid5 in the
//! connector's namespace, so it stays deterministic. Batch writes report errors per object
//! (HTTP 200 with `result.errors`): those records go to the DLQ, the rest are written.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::http::{floats, JsonApi};
use super::{http_error, runs, Rejections, SinkError};
use crate::config::{ConnectorConfig, Metric};
use crate::record::{FieldType, Op, Schema, ID_NAMESPACE};

pub struct WeaviateSink {
    api: JsonApi,
    class: String,
    metric: Metric,
    consistency: Option<String>,
    /// The class's properties when it exists.
    existing: Option<BTreeMap<String, FieldType>>,
    schema: Option<Schema>,
}

/// Weaviate's object id for a connector id.
pub fn object_id(id: &str) -> String {
    match uuid::Uuid::parse_str(id) {
        Ok(u) => u.to_string(),
        Err(_) => uuid::Uuid::new_v5(&ID_NAMESPACE, id.as_bytes()).to_string(),
    }
}

fn distance(m: Metric) -> &'static str {
    match m {
        Metric::Cosine => "cosine",
        Metric::L2 => "l2-squared",
        Metric::Ip => "dot",
    }
}

/// Nested values are stored as JSON text (Weaviate's `object` type needs declared nested
/// properties), so a Json field is a text property.
fn data_type(t: FieldType) -> &'static str {
    match t {
        FieldType::Text | FieldType::Json => "text",
        FieldType::Int => "int",
        FieldType::Float => "number",
        FieldType::Bool => "boolean",
    }
}

fn field_type(data_type: &str) -> Option<FieldType> {
    Some(match data_type {
        "text" | "string" => FieldType::Text,
        "int" => FieldType::Int,
        "number" => FieldType::Float,
        "boolean" => FieldType::Bool,
        _ => return None,
    })
}

impl WeaviateSink {
    pub async fn connect(cfg: &ConnectorConfig) -> Result<WeaviateSink, SinkError> {
        let auth: Vec<(&'static str, String)> = cfg
            .sink
            .api_key
            .iter()
            .map(|k| ("authorization", format!("Bearer {k}")))
            .collect();
        let mut sink = WeaviateSink {
            api: JsonApi::new(format!("{}/v1", cfg.sink.url.trim_end_matches('/')), &auth)?,
            class: cfg.sink.collection.clone(),
            metric: cfg.sink.metric,
            consistency: cfg.sink.consistency_level.clone(),
            existing: None,
            schema: None,
        };
        let (status, class) = sink
            .api
            .call(
                reqwest::Method::GET,
                &format!("/schema/{}", sink.class),
                None,
            )
            .await?;
        match status.as_u16() {
            200 => sink.adopt(&class)?,
            404 => {}
            _ => return Err(http_error("get class", Some(status), class.to_string())),
        }
        Ok(sink)
    }

    fn adopt(&mut self, class: &Value) -> Result<(), SinkError> {
        if let Some(have) = class["vectorIndexConfig"]["distance"].as_str() {
            if have != distance(self.metric) {
                return Err(SinkError::Schema(format!(
                    "class {} uses the {have} distance, the config says {}",
                    self.class,
                    distance(self.metric)
                )));
            }
        }
        let props = class["properties"].as_array().cloned().unwrap_or_default();
        self.existing = Some(
            props
                .iter()
                .filter_map(|p| {
                    let name = p["name"].as_str()?;
                    let t = field_type(p["dataType"][0].as_str()?)?;
                    Some((name.to_string(), t))
                })
                .collect(),
        );
        Ok(())
    }

    /// Weaviate knows no dimension until it holds vectors; the schema is set by `create`.
    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    fn consistency_query(&self) -> String {
        self.consistency
            .as_ref()
            .map(|c| format!("?consistency_level={c}"))
            .unwrap_or_default()
    }

    pub async fn create(&mut self, wanted: &Schema) -> Result<Schema, SinkError> {
        let as_stored: BTreeMap<String, FieldType> = wanted
            .fields
            .iter()
            .map(|(k, &t)| (k.clone(), field_type(data_type(t)).expect("mapped")))
            .collect();
        match &self.existing {
            Some(have) => {
                let existing = Schema {
                    dimension: wanted.dimension,
                    fields: have.clone(),
                };
                let want = Schema {
                    dimension: wanted.dimension,
                    fields: as_stored,
                };
                // Weaviate adds missing properties itself (auto-schema): only types matter.
                let diffs = super::mismatches(&existing, &want, false);
                if !diffs.is_empty() {
                    return Err(SinkError::Schema(diffs.join("; ")));
                }
            }
            None => {
                let properties: Vec<Value> = as_stored
                    .iter()
                    .map(|(name, &t)| json!({"name": name, "dataType": [data_type(t)]}))
                    .collect();
                let class = json!({
                    "class": self.class,
                    "vectorizer": "none",
                    "vectorIndexConfig": {"distance": distance(self.metric)},
                    "properties": properties,
                });
                let created = self
                    .api
                    .send(reqwest::Method::POST, "/schema", class)
                    .await?;
                self.adopt(&created)?;
                tracing::info!(class = %self.class, "created weaviate class");
            }
        }
        let schema = Schema {
            dimension: wanted.dimension,
            fields: Default::default(),
        };
        self.schema = Some(schema.clone());
        Ok(schema)
    }

    pub async fn write(&mut self, ops: &[Op]) -> Result<Rejections, SinkError> {
        let mut rejected = Vec::new();
        for (start, run) in runs(ops, usize::MAX) {
            if matches!(run[0], Op::Upsert(_)) {
                rejected.extend(self.upsert_run(run, start).await?);
                continue;
            }
            for op in run {
                let path = format!(
                    "/objects/{}/{}{}",
                    self.class,
                    object_id(op.id()),
                    self.consistency_query()
                );
                let (status, v) = self.api.call(reqwest::Method::DELETE, &path, None).await?;
                if !status.is_success() && status.as_u16() != 404 {
                    return Err(http_error("delete object", Some(status), v.to_string()));
                }
            }
        }
        Ok(rejected)
    }

    /// One batch request for a run of upserts (`offset` is the run's index in the batch).
    async fn upsert_run(&self, run: &[Op], offset: usize) -> Result<Rejections, SinkError> {
        // The last op of an id wins; remember each object's index for its per-object error.
        let mut index: BTreeMap<String, usize> = BTreeMap::new();
        for (k, op) in run.iter().enumerate() {
            index.insert(object_id(op.id()), offset + k);
        }
        let objects: Vec<Value> = run
            .iter()
            .enumerate()
            .filter(|(k, op)| index[&object_id(op.id())] == offset + k)
            .filter_map(|(_, op)| match op {
                Op::Upsert(d) => Some(json!({
                    "class": self.class,
                    "id": object_id(&d.id),
                    "properties": properties(&d.fields),
                    "vector": d.vector,
                })),
                Op::Delete(_) => None,
            })
            .collect();
        let path = format!("/batch/objects{}", self.consistency_query());
        let answer = self
            .api
            .send(reqwest::Method::POST, &path, json!({"objects": objects}))
            .await?;
        let mut rejected = Vec::new();
        for obj in answer.as_array().into_iter().flatten() {
            let errors: Vec<&str> = obj["result"]["errors"]["error"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["message"].as_str())
                .collect();
            if errors.is_empty() {
                continue;
            }
            let at = obj["id"].as_str().and_then(|id| index.get(id)).copied();
            match at {
                Some(at) => rejected.push((at, errors.join("; "))),
                // An error we cannot pin on a record fails the batch (retried, not dropped).
                None => {
                    return Err(SinkError::Permanent(format!(
                        "batch error: {}",
                        errors.join("; ")
                    )))
                }
            }
        }
        Ok(rejected)
    }

    async fn graphql(&self, query: String) -> Result<Value, SinkError> {
        let v = self
            .api
            .send(reqwest::Method::POST, "/graphql", json!({"query": query}))
            .await?;
        if let Some(e) = v["errors"].as_array().filter(|e| !e.is_empty()) {
            return Err(SinkError::Permanent(format!(
                "graphql: {}",
                Value::Array(e.clone())
            )));
        }
        Ok(v)
    }

    pub async fn count(&mut self) -> Result<u64, SinkError> {
        let c = &self.class;
        let v = self
            .graphql(format!("{{ Aggregate {{ {c} {{ meta {{ count }} }} }} }}"))
            .await?;
        v["data"]["Aggregate"][c][0]["meta"]["count"]
            .as_u64()
            .ok_or_else(|| SinkError::Permanent(format!("count: unexpected answer {v}")))
    }

    pub async fn nearest(&mut self, vector: &[f32], k: usize) -> Result<Vec<String>, SinkError> {
        let c = &self.class;
        let v = self
            .graphql(format!(
                "{{ Get {{ {c}(nearVector: {{vector: {}}}, limit: {k}) {{ _additional {{ id }} }} }} }}",
                Value::from(vector.to_vec())
            ))
            .await?;
        Ok(v["data"]["Get"][c]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["_additional"]["id"].as_str().map(str::to_string))
            .collect())
    }

    pub async fn all_vectors(&mut self) -> Result<Vec<(String, Vec<f32>)>, SinkError> {
        let mut out = Vec::new();
        let mut after = String::new();
        loop {
            let mut path = format!("/objects?class={}&limit=100&include=vector", self.class);
            if !after.is_empty() {
                path.push_str(&format!("&after={after}"));
            }
            let (status, v) = self.api.call(reqwest::Method::GET, &path, None).await?;
            if !status.is_success() {
                return Err(http_error("list objects", Some(status), v.to_string()));
            }
            let objects = v["objects"].as_array().cloned().unwrap_or_default();
            if objects.is_empty() {
                return Ok(out);
            }
            for o in &objects {
                let id = o["id"].as_str().unwrap_or_default().to_string();
                let vector = floats(&o["vector"]);
                after = id.clone();
                out.push((id, vector));
            }
        }
    }
}

fn properties(fields: &Map<String, Value>) -> Value {
    Value::Object(
        fields
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::Object(_) | Value::Array(_) => Value::String(v.to_string()),
                    v => v.clone(),
                };
                (k.clone(), v)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_ids_then_uuids_kept_and_others_mapped_deterministically() {
        let u = "0b6c6b8e-2d0c-4a57-9a1b-3a3c2d1e0f00";
        assert_eq!(object_id(u), u);
        assert_eq!(object_id("doc-1"), object_id("doc-1"));
        assert!(uuid::Uuid::parse_str(&object_id("doc-1")).is_ok());
        assert_ne!(object_id("doc-1"), object_id("doc-2"));
    }
}
