//! `schema_mapping = "registry"`: record values in the Confluent wire format ([`wire`]), their
//! schema looked up by id over the schema registry's REST API (`GET /schemas/ids/{id}`, the
//! answer cached per id: ids are never reused), decoded from AVRO ([`avro`]), PROTOBUF
//! ([`protobuf`]) or JSON Schema (a JSON payload) into the JSON object the rest of the
//! connector maps, with the schema's [`Declared`] rule beside it.
//!
//! What a record can get wrong goes to the DLQ with the reason: no wire-format header, an id
//! the registry does not know (404), a schema that does not map (no vector field, a union of
//! several types, references), a payload its schema does not read. A registry that does not
//! answer (connection refused, 5xx) is not the record's fault: the caller retries.

pub mod avro;
pub mod protobuf;
pub mod wire;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::config::{IdMode, SinkConfig};
use crate::declared::Declared;
use crate::record::{decode, decode_value, Op, RawRecord, RecordError};

/// A record decoded through the registry: its operation and the rule of its schema (None for
/// tombstones).
pub type Decoded = (Op, Option<Arc<Declared>>);

/// Why a record could not be decoded.
#[derive(Debug)]
pub enum Failure {
    /// The record's fault: to the DLQ.
    Record(RecordError),
    /// The registry did not answer: try again later.
    Unavailable(String),
}

impl From<RecordError> for Failure {
    fn from(e: RecordError) -> Failure {
        Failure::Record(e)
    }
}

/// The body of `GET /schemas/ids/{id}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaById {
    schema: String,
    /// Absent for AVRO.
    #[serde(default)]
    schema_type: Option<String>,
    #[serde(default)]
    references: Vec<Value>,
}

/// One schema id, parsed.
#[derive(Debug)]
enum Parsed {
    /// With the rule of its record schema.
    Avro(apache_avro::Schema, Arc<Declared>),
    Json(Arc<Declared>),
    /// Rules per message-index path, as records name them.
    Protobuf(protobuf::ProtoSchema),
}

/// A Protobuf message of a schema and its rule.
type Message = (prost_reflect::MessageDescriptor, Arc<Declared>);

/// The registry client and its caches (one per connector, used by its feeder task).
pub struct Registry {
    http: reqwest::Client,
    base: String,
    embedding_field: String,
    id: IdMode,
    schemas: HashMap<u32, Result<Arc<Parsed>, String>>,
    messages: HashMap<(u32, Vec<i32>), Result<Message, String>>,
}

impl Registry {
    pub fn new(sink: &SinkConfig) -> Registry {
        Registry {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("a client with rustls and a timeout builds"),
            base: sink.schema_registry_url.trim_end_matches('/').to_string(),
            embedding_field: sink.embedding_field.clone(),
            id: sink.id_mode(),
            schemas: HashMap::new(),
            messages: HashMap::new(),
        }
    }

    fn id_field(&self) -> Option<&str> {
        match &self.id {
            IdMode::Field(f) => Some(f),
            IdMode::Offset | IdMode::Key => None,
        }
    }

    /// The operation for `rec` and the rule its schema gives.
    pub async fn decode(&mut self, rec: &RawRecord) -> Result<Decoded, Failure> {
        let Some(value) = rec.value.as_deref() else {
            // A tombstone has no schema; the key names what to delete.
            return Ok((decode(rec, &self.embedding_field, &self.id)?, None));
        };
        let (id, rest) = wire::header(value).map_err(RecordError::NotWireFormat)?;
        let parsed = self.schema(id).await?;
        let undecodable = |reason| RecordError::Undecodable { id, reason };
        let (json, rule) = match &*parsed {
            Parsed::Avro(schema, rule) => (
                avro::decode(schema, rest).map_err(undecodable)?,
                rule.clone(),
            ),
            Parsed::Json(rule) => {
                let json = serde_json::from_slice(rest)
                    .map_err(|e| undecodable(format!("not JSON: {e}")))?;
                (json, rule.clone())
            }
            Parsed::Protobuf(schema) => {
                let (path, payload) = wire::message_indexes(rest).map_err(undecodable)?;
                let (m, rule) = self.message(id, schema, path)?;
                (protobuf::decode(m, payload).map_err(undecodable)?, rule)
            }
        };
        let op = decode_value(rec, json, &self.embedding_field, &self.id)?;
        Ok((op, Some(rule)))
    }

    fn message(
        &mut self,
        id: u32,
        schema: &protobuf::ProtoSchema,
        path: Vec<i32>,
    ) -> Result<Message, RecordError> {
        let (embedding, id_field) = (
            self.embedding_field.clone(),
            self.id_field().map(str::to_string),
        );
        self.messages
            .entry((id, path))
            .or_insert_with_key(|(_, path)| {
                let m = schema.message(path)?;
                let d = protobuf::declared(&m, &embedding, id_field.as_deref())?;
                Ok((m, Arc::new(d)))
            })
            .clone()
            .map_err(|reason| RecordError::UnusableSchema { id, reason })
    }

    /// The schema of `id`, from the cache or the registry.
    async fn schema(&mut self, id: u32) -> Result<Arc<Parsed>, Failure> {
        if let Some(cached) = self.schemas.get(&id) {
            return cached
                .clone()
                .map_err(|reason| Failure::Record(RecordError::UnusableSchema { id, reason }));
        }
        let url = format!("{}/schemas/ids/{id}", self.base);
        let unavailable = |e: String| Failure::Unavailable(format!("GET {url}: {e}"));
        let resp = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let status = resp.status();
        let body = resp.text().await.map_err(|e| unavailable(e.to_string()))?;
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            return Err(unavailable(format!("{status}: {body}")));
        }
        if !status.is_success() {
            // 404 (error code 40403) or another refusal: ids are immutable, so is this answer.
            return Err(RecordError::UnknownSchema {
                id,
                reason: format!("{status}: {body}"),
            }
            .into());
        }
        let by_id: SchemaById = serde_json::from_str(&body)
            .map_err(|e| unavailable(format!("unexpected answer {body}: {e}")))?;
        let parsed = self.parse(by_id).map(Arc::new);
        self.schemas.insert(id, parsed.clone());
        tracing::info!(
            schema_id = id,
            ok = parsed.is_ok(),
            "schema read from the registry"
        );
        parsed.map_err(|reason| Failure::Record(RecordError::UnusableSchema { id, reason }))
    }

    fn parse(&self, s: SchemaById) -> Result<Parsed, String> {
        if !s.references.is_empty() {
            return Err("schemas with references are not supported by the sink".into());
        }
        let (vector, id) = (&self.embedding_field, self.id_field());
        match s.schema_type.as_deref().unwrap_or("AVRO") {
            "AVRO" => {
                let schema = avro::parse(&s.schema)?;
                let d = avro::declared(&schema, vector, id)?;
                Ok(Parsed::Avro(schema, Arc::new(d)))
            }
            "JSON" => Ok(Parsed::Json(Arc::new(Declared::parse(
                &s.schema, vector, id,
            )?))),
            "PROTOBUF" => Ok(Parsed::Protobuf(protobuf::parse(&s.schema)?)),
            other => Err(format!("schema type {other} is not AVRO, PROTOBUF or JSON")),
        }
    }
}
