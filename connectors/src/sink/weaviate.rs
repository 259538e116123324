//! Weaviate over its REST API (`/v1`), with reqwest rather than the `weaviate-community`
//! crate (0.2.2): its calls return `Box<dyn Error>` carrying only the status line, so a 503
//! (retry) cannot be told from a 422 (to the DLQ) and the server's message is lost; it also
//! brings reqwest 0.11 (a second hyper/TLS stack) with `blocking` and tokio's `full`. The
//! connector needs a handful of calls: class get/create/add-property, batch objects, object
//! delete, tenants, GraphQL count/nearVector. REST rather than gRPC batch: there is no
//! maintained Rust client of Weaviate's gRPC API (its `.proto` files would have to be copied
//! in and compiled), and the REST batch reports errors per object the same way.
//! Checked against a real Weaviate 1.35 in connectors/tests/e2e_weaviate.rs, and against
//! fixtures from Weaviate's OpenAPI spec in tests/contract_weaviate.rs.
//!
//! The class is created with explicit properties (the server may run with auto-schema off),
//! and a field that appears later is added as a property (schema evolution). Nested values
//! are stored as JSON text: their property is `text` with [`JSON_MARK`] as its description,
//! so a restarted connector knows the records' field is an object, not a string.
//!
//! Weaviate ids are UUIDs: an id that is not one (a key, a field) becomes its uuid5 in the
//! connector's namespace, so it stays deterministic. Batch writes report errors per object
//! (HTTP 200 with `result.errors`): those records go to the DLQ, the rest are written, unless
//! an error says the server is not ready (then the batch is retried: ids make it idempotent).
//!
//! Multi-tenancy (`multi_tenancy = "topic" | "key_prefix"`): the class is created with
//! multi-tenancy and automatic tenant creation and activation; each object and delete names
//! its tenant.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::http::{floats, JsonApi};
use super::{http_error, runs, Rejections, SinkError};
use crate::config::{ConnectorConfig, Metric};
use crate::record::{FieldType, Op, Schema, ID_NAMESPACE};

/// The description of a `text` property that holds JSON (nested values).
pub const JSON_MARK: &str = "JSON text (strom connector)";

pub struct WeaviateSink {
    api: JsonApi,
    class: String,
    metric: Metric,
    consistency: Option<String>,
    multi_tenancy: bool,
    /// The class's properties when it exists (JSON-marked text properties as Json).
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

fn property(name: &str, t: FieldType) -> Value {
    let mut p = json!({"name": name, "dataType": [data_type(t)]});
    if t == FieldType::Json {
        p["description"] = json!(JSON_MARK);
    }
    p
}

fn field_type(p: &Value) -> Option<FieldType> {
    Some(match p["dataType"][0].as_str()? {
        "text" | "string" if p["description"] == JSON_MARK => FieldType::Json,
        "text" | "string" => FieldType::Text,
        "int" => FieldType::Int,
        "number" => FieldType::Float,
        "boolean" => FieldType::Bool,
        _ => return None,
    })
}

/// Errors Weaviate reports while a shard loads or the node starts or stops, or when a disk
/// limit made it read-only: worth a retry, never a reason to dead-letter a record.
///
/// "class 'X' not present in schema", "could not find class" and "could not find index for
/// class" belong here too: the connector declared the class before its first write, so a
/// batch that says the class or its index is missing met a node just restarted whose schema
/// cache is still being filled from its Raft log, or whose index is not loaded yet
/// (Weaviate's own chaos tests retry those for that reason). Dead-lettering them lost the
/// first batch after a kill -9, 50 records, every time (e2e_weaviate.rs). A class an operator really deleted makes the
/// retries run out and the connector stop with the error, which is what should happen.
pub fn transient_message(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    [
        "not present in schema",
        "could not find class",
        "could not find index for class",
        "not ready",
        "shutting down",
        "read-only",
        "readonly",
        "context deadline exceeded",
        "context canceled",
        "connection refused",
        "no leader",
        "not the leader",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// [`http_error`], with Weaviate's 422 "shard is not ready" (and the like) transient.
fn weaviate_error(what: &str, status: reqwest::StatusCode, body: &Value) -> SinkError {
    let text = body.to_string();
    if status.is_client_error() && transient_message(&text) {
        return SinkError::Transient(format!("{what}: HTTP {status}: {text}"));
    }
    http_error(what, Some(status), text)
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
            multi_tenancy: cfg.sink.multi_tenancy.is_some(),
            existing: None,
            schema: None,
        };
        sink.read_class().await?;
        Ok(sink)
    }

    /// Reads the class (None: it does not exist) and checks what cannot be changed later.
    async fn read_class(&mut self) -> Result<Option<Value>, SinkError> {
        let (status, class) = self
            .api
            .call(
                reqwest::Method::GET,
                &format!("/schema/{}", self.class),
                None,
            )
            .await?;
        match status.as_u16() {
            200 => {
                self.adopt(&class)?;
                Ok(Some(class))
            }
            404 => Ok(None),
            _ => Err(weaviate_error("get class", status, &class)),
        }
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
        let mt = class["multiTenancyConfig"]["enabled"].as_bool() == Some(true);
        if mt != self.multi_tenancy {
            return Err(SinkError::Schema(format!(
                "class {} has multi-tenancy {}, the config {}",
                self.class,
                if mt { "enabled" } else { "disabled" },
                if self.multi_tenancy {
                    "sets multi_tenancy"
                } else {
                    "none"
                }
            )));
        }
        let props = class["properties"].as_array().cloned().unwrap_or_default();
        self.existing = Some(
            props
                .iter()
                .filter_map(|p| Some((p["name"].as_str()?.to_string(), field_type(p)?)))
                .collect(),
        );
        Ok(())
    }

    /// Weaviate knows no dimension until it holds vectors; the schema is set by `create`.
    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    /// `?consistency_level=...` and `tenant=...` as the request's query string.
    fn query(&self, tenant: Option<&str>) -> String {
        let mut q: Vec<String> = Vec::new();
        if let Some(c) = &self.consistency {
            q.push(format!("consistency_level={c}"));
        }
        if let Some(t) = tenant {
            q.push(format!("tenant={t}"));
        }
        if q.is_empty() {
            String::new()
        } else {
            format!("?{}", q.join("&"))
        }
    }

    pub async fn create(&mut self, wanted: &Schema) -> Result<Schema, SinkError> {
        match self.existing.clone() {
            Some(have) => {
                let existing = Schema {
                    dimension: wanted.dimension,
                    fields: have.clone(),
                };
                let diffs = super::mismatches(&existing, wanted, false);
                if !diffs.is_empty() {
                    return Err(SinkError::Schema(diffs.join("; ")));
                }
                let missing: BTreeMap<String, FieldType> = wanted
                    .fields
                    .iter()
                    .filter(|(k, _)| !have.contains_key(*k))
                    .map(|(k, &t)| (k.clone(), t))
                    .collect();
                if !missing.is_empty() {
                    self.add_fields(&missing).await?;
                }
            }
            None => {
                let properties: Vec<Value> = wanted
                    .fields
                    .iter()
                    .map(|(name, &t)| property(name, t))
                    .collect();
                let mut class = json!({
                    "class": self.class,
                    "vectorizer": "none",
                    "vectorIndexConfig": {"distance": distance(self.metric)},
                    "properties": properties,
                });
                if self.multi_tenancy {
                    class["multiTenancyConfig"] = json!({
                        "enabled": true,
                        "autoTenantCreation": true,
                        "autoTenantActivation": true,
                    });
                }
                let (status, created) = self
                    .api
                    .call(reqwest::Method::POST, "/schema", Some(class))
                    .await?;
                if status.is_success() {
                    self.adopt(&created)?;
                    tracing::info!(class = %self.class, "created weaviate class");
                } else if status.as_u16() == 422 && created.to_string().contains("already exists") {
                    // Another connector created it first: check theirs.
                    self.read_class().await?;
                    return Box::pin(self.create(wanted)).await;
                } else {
                    return Err(weaviate_error("create class", status, &created));
                }
            }
        }
        let schema = Schema {
            dimension: wanted.dimension,
            fields: self.existing.clone().unwrap_or_default(),
        };
        self.schema = Some(schema.clone());
        Ok(schema)
    }

    /// Schema evolution: one property per new field (`POST /schema/{class}/properties`).
    pub async fn add_fields(
        &mut self,
        new: &BTreeMap<String, FieldType>,
    ) -> Result<Schema, SinkError> {
        for (name, &t) in new {
            let (status, v) = self
                .api
                .call(
                    reqwest::Method::POST,
                    &format!("/schema/{}/properties", self.class),
                    Some(property(name, t)),
                )
                .await?;
            // 422 "already exists": added concurrently; the class read below says its type.
            let exists = status.as_u16() == 422 && v.to_string().contains("exist");
            if !status.is_success() && !exists {
                return Err(weaviate_error("add property", status, &v));
            }
        }
        self.read_class().await?;
        let have = self.existing.clone().unwrap_or_default();
        for (name, &t) in new {
            match have.get(name) {
                Some(&h) if h.accepts(t) => {}
                Some(&h) => {
                    return Err(SinkError::Schema(format!(
                        "property {name} is {} in the class, the records need {}",
                        h.name(),
                        t.name()
                    )))
                }
                None => {
                    return Err(SinkError::Schema(format!(
                        "property {name} is of a type the connector cannot write"
                    )))
                }
            }
        }
        tracing::info!(class = %self.class, properties = ?new.keys().collect::<Vec<_>>(), "added weaviate properties");
        let schema = Schema {
            dimension: self.schema.as_ref().map_or(0, |s| s.dimension),
            fields: have,
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
                    self.query(op.tenant())
                );
                let (status, v) = self.api.call(reqwest::Method::DELETE, &path, None).await?;
                if !status.is_success() && status.as_u16() != 404 {
                    return Err(weaviate_error("delete object", status, &v));
                }
            }
        }
        Ok(rejected)
    }

    /// One batch request for a run of upserts (`offset` is the run's index in the batch).
    async fn upsert_run(&self, run: &[Op], offset: usize) -> Result<Rejections, SinkError> {
        // The last op of an object wins; remember each object's index for its error.
        let key = |op: &Op| (object_id(op.id()), op.tenant().map(str::to_string));
        let mut index: BTreeMap<(String, Option<String>), usize> = BTreeMap::new();
        for (k, op) in run.iter().enumerate() {
            index.insert(key(op), offset + k);
        }
        let objects: Vec<Value> = run
            .iter()
            .enumerate()
            .filter(|(k, op)| index[&key(op)] == offset + k)
            .filter_map(|(_, op)| match op {
                Op::Upsert(d) => {
                    let mut o = json!({
                        "class": self.class,
                        "id": object_id(&d.id),
                        "properties": properties(&d.fields),
                        "vector": d.vector,
                    });
                    if let Some(t) = &d.tenant {
                        o["tenant"] = json!(t);
                    }
                    Some(o)
                }
                Op::Delete(..) => None,
            })
            .collect();
        let path = format!("/batch/objects{}", self.query(None));
        let (status, answer) = self
            .api
            .call(
                reqwest::Method::POST,
                &path,
                Some(json!({"objects": objects})),
            )
            .await?;
        if !status.is_success() {
            return Err(weaviate_error("batch objects", status, &answer));
        }
        // Weaviate answers one entry per object sent. Anything else (a body that is not that
        // array, e.g. from a server still starting) proves nothing was written: retry the run
        // (upserts by deterministic id, so a retry never duplicates) instead of counting it done.
        let listed = answer.as_array().map_or(0, Vec::len);
        if listed != objects.len() {
            return Err(SinkError::Transient(format!(
                "batch objects: {listed} results for {} objects sent",
                objects.len()
            )));
        }
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
            let message = errors.join("; ");
            if transient_message(&message) {
                return Err(SinkError::Transient(format!("batch object: {message}")));
            }
            let id = obj["id"].as_str().unwrap_or_default().to_string();
            let tenant = obj["tenant"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            match index.get(&(id, tenant)) {
                Some(&at) => rejected.push((at, message)),
                // An error we cannot pin on a record fails the batch (retried, not dropped).
                None => return Err(SinkError::Permanent(format!("batch error: {message}"))),
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
            let text = Value::Array(e.clone()).to_string();
            return Err(if transient_message(&text) {
                SinkError::Transient(format!("graphql: {text}"))
            } else {
                SinkError::Permanent(format!("graphql: {text}"))
            });
        }
        Ok(v)
    }

    /// The class's tenants (multi-tenancy), or `[None]` for a class without.
    pub async fn tenants(&self) -> Result<Vec<Option<String>>, SinkError> {
        if !self.multi_tenancy {
            return Ok(vec![None]);
        }
        let (status, v) = self
            .api
            .call(
                reqwest::Method::GET,
                &format!("/schema/{}/tenants", self.class),
                None,
            )
            .await?;
        if status.as_u16() == 404 {
            return Ok(Vec::new());
        }
        if !status.is_success() {
            return Err(weaviate_error("list tenants", status, &v));
        }
        Ok(v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(|n| Some(n.to_string())))
            .collect())
    }

    /// `(tenant: "...")` GraphQL arguments, or nothing.
    fn tenant_arg(tenant: Option<&str>, more: &str) -> String {
        match (tenant, more.is_empty()) {
            (None, true) => String::new(),
            (None, false) => format!("({more})"),
            (Some(t), true) => format!("(tenant: {})", Value::from(t)),
            (Some(t), false) => format!("(tenant: {}, {more})", Value::from(t)),
        }
    }

    /// Objects in one tenant (None: a class without multi-tenancy).
    pub async fn count_in(&self, tenant: Option<&str>) -> Result<u64, SinkError> {
        let c = &self.class;
        let args = Self::tenant_arg(tenant, "");
        let v = self
            .graphql(format!(
                "{{ Aggregate {{ {c}{args} {{ meta {{ count }} }} }} }}"
            ))
            .await?;
        v["data"]["Aggregate"][c][0]["meta"]["count"]
            .as_u64()
            .ok_or_else(|| SinkError::Permanent(format!("count: unexpected answer {v}")))
    }

    pub async fn count(&mut self) -> Result<u64, SinkError> {
        let mut n = 0;
        for t in self.tenants().await? {
            n += self.count_in(t.as_deref()).await?;
        }
        Ok(n)
    }

    /// The `k` nearest in one tenant, with their distances.
    pub async fn nearest_in(
        &self,
        tenant: Option<&str>,
        vector: &[f32],
        k: usize,
    ) -> Result<Vec<(String, f64)>, SinkError> {
        let c = &self.class;
        // A wide HNSW search, as the Chroma and Milvus sinks do: after a replay has upserted
        // every id again the graph holds many replaced nodes, and a top-10 search missed 2 of
        // 10 true neighbours (CI, Weaviate 1.35). Weaviate's dynamic ef grows with the limit
        // (8 × limit, capped at 500), and the distances it returns are exact and sorted, so
        // the first k of many candidates are the true top k whenever they are among them.
        let wide = (k * 20).max(200);
        let near = format!(
            "nearVector: {{vector: {}}}, limit: {wide}",
            Value::from(vector.to_vec())
        );
        let args = Self::tenant_arg(tenant, &near);
        let v = self
            .graphql(format!(
                "{{ Get {{ {c}{args} {{ _additional {{ id distance }} }} }} }}"
            ))
            .await?;
        let mut found: Vec<(String, f64)> = v["data"]["Get"][c]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| {
                let a = &o["_additional"];
                Some((
                    a["id"].as_str()?.to_string(),
                    a["distance"].as_f64().unwrap_or(0.0),
                ))
            })
            .collect();
        found.sort_by(|a, b| a.1.total_cmp(&b.1));
        found.truncate(k);
        Ok(found)
    }

    /// Across every tenant: each tenant's top `k`, merged by distance.
    pub async fn nearest(&mut self, vector: &[f32], k: usize) -> Result<Vec<String>, SinkError> {
        let mut all = Vec::new();
        for t in self.tenants().await? {
            all.extend(self.nearest_in(t.as_deref(), vector, k).await?);
        }
        all.sort_by(|a, b| a.1.total_cmp(&b.1));
        Ok(all.into_iter().take(k).map(|(id, _)| id).collect())
    }

    /// Every object of one tenant: id, vector, properties.
    pub async fn objects_in(
        &self,
        tenant: Option<&str>,
    ) -> Result<Vec<(String, Vec<f32>, Value)>, SinkError> {
        let mut out = Vec::new();
        let mut after = String::new();
        loop {
            let mut path = format!("/objects?class={}&limit=100&include=vector", self.class);
            if let Some(t) = tenant {
                path.push_str(&format!("&tenant={t}"));
            }
            if !after.is_empty() {
                path.push_str(&format!("&after={after}"));
            }
            let (status, v) = self.api.call(reqwest::Method::GET, &path, None).await?;
            if !status.is_success() {
                return Err(weaviate_error("list objects", status, &v));
            }
            let objects = v["objects"].as_array().cloned().unwrap_or_default();
            if objects.is_empty() {
                return Ok(out);
            }
            for o in &objects {
                let id = o["id"].as_str().unwrap_or_default().to_string();
                after = id.clone();
                out.push((id, floats(&o["vector"]), o["properties"].clone()));
            }
        }
    }

    pub async fn all_vectors(&mut self) -> Result<Vec<(String, Vec<f32>)>, SinkError> {
        let mut out = Vec::new();
        for t in self.tenants().await? {
            out.extend(
                self.objects_in(t.as_deref())
                    .await?
                    .into_iter()
                    .map(|(id, v, _)| (id, v)),
            );
        }
        Ok(out)
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

    #[test]
    fn given_json_fields_then_marked_text_properties_read_back_as_json() {
        let p = property("meta", FieldType::Json);
        assert_eq!(
            (p["dataType"][0].as_str(), field_type(&p)),
            (Some("text"), Some(FieldType::Json))
        );
        assert_eq!(
            field_type(&property("t", FieldType::Text)),
            Some(FieldType::Text)
        );
        assert_eq!(
            field_type(&property("n", FieldType::Int)),
            Some(FieldType::Int)
        );
    }

    #[test]
    fn given_weaviate_messages_then_not_ready_is_transient_and_the_rest_not() {
        assert!(transient_message("local documents_abc shard is not ready"));
        assert!(transient_message("store is read-only"));
        assert!(transient_message("class 'Crash' not present in schema"));
        assert!(transient_message(
            "could not find index for class Crash. It might have been deleted in the meantime"
        ));
        assert!(transient_message(
            "update inverted indices: analyze next object: could not find class Crash in schema"
        ));
        assert!(!transient_message(
            "new node has a vector with length 4. Existing nodes have vectors with length 384"
        ));
        assert!(!transient_message("invalid text property 'title'"));
    }
}
