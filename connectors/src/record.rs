//! From a Kafka record to a sink operation: JSON decoding, the vector out of
//! `embedding_field`, the deterministic id, and the scalar fields with their inferred types.
//! Everything that can be wrong with one record is a [`RecordError`]: the record goes to the
//! dead-letter topic with that error, and the pipeline goes on.

use std::collections::BTreeMap;

use base64::Engine;
use serde::Deserialize;
use serde_json::{Map, Value};

/// Namespace of the `id = "offset"` uuid5s. Fixed forever: changing it would make a replay
/// write new ids next to the old ones.
pub const ID_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x6f0c_1a52_9d1e_4b7a_8a3e_2b5c_7d9e_0f11);

/// Which tenant a record goes to, for sinks with multi-tenancy (Weaviate).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TenantMode {
    /// The record's topic is its tenant.
    Topic,
    /// The record key up to the first `tenant_separator` is its tenant.
    KeyPrefix,
}

/// How a record's id is made; ids are deterministic so a replay overwrites, never duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdMode {
    /// uuid5 of `topic/partition/offset` (default).
    Offset,
    /// The record key as UTF-8.
    Key,
    /// The value of this JSON field (string or integer).
    Field(String),
}

/// One consumed record, owned (detached from the consumer).
#[derive(Debug, Clone)]
pub struct RawRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// Produce (or log-append) time, ms since the epoch, when the broker gave one.
    pub timestamp_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Upsert(Doc),
    /// A tombstone: delete this id (in this tenant, with multi-tenancy).
    Delete(String, Option<String>),
}

impl Op {
    pub fn id(&self) -> &str {
        match self {
            Op::Upsert(d) => &d.id,
            Op::Delete(id, _) => id,
        }
    }

    /// The tenant the op goes to (sinks with multi-tenancy; see [`tenant_of`]).
    pub fn tenant(&self) -> Option<&str> {
        match self {
            Op::Upsert(d) => d.tenant.as_deref(),
            Op::Delete(_, t) => t.as_deref(),
        }
    }

    pub fn set_tenant(&mut self, tenant: Option<String>) {
        match self {
            Op::Upsert(d) => d.tenant = tenant,
            Op::Delete(_, t) => *t = tenant,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    pub id: String,
    pub vector: Vec<f32>,
    /// The record's other fields (not the vector, not the id field), nulls dropped.
    pub fields: Map<String, Value>,
    /// The tenant (sinks with multi-tenancy), None otherwise.
    pub tenant: Option<String>,
}

/// Scalar column types the sinks map fields to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FieldType {
    Text,
    Int,
    Float,
    Bool,
    /// Objects and arrays.
    Json,
}

impl FieldType {
    pub fn of(v: &Value) -> Option<FieldType> {
        Some(match v {
            Value::Null => return None,
            Value::Bool(_) => FieldType::Bool,
            Value::Number(n) if n.is_i64() || n.is_u64() => FieldType::Int,
            Value::Number(_) => FieldType::Float,
            Value::String(_) => FieldType::Text,
            Value::Array(_) | Value::Object(_) => FieldType::Json,
        })
    }

    /// Whether a value of type `got` may be stored in a column of this type (integers widen
    /// to floats; nothing else converts).
    pub fn accepts(self, got: FieldType) -> bool {
        self == got || (self == FieldType::Float && got == FieldType::Int)
    }

    /// The name error messages use.
    pub fn name(self) -> &'static str {
        match self {
            FieldType::Text => "text",
            FieldType::Int => "integer",
            FieldType::Float => "float",
            FieldType::Bool => "boolean",
            FieldType::Json => "json",
        }
    }
}

/// How a sink's collection holds the records' scalar fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fields {
    /// Schemaless metadata: any field, any type (Chroma, Weaviate, Pinecone).
    Free,
    /// Typed fields keep their type; fields the collection lacks go elsewhere (Milvus's
    /// dynamic field).
    Typed,
    /// Typed columns only: a field the collection lacks is refused (pgvector).
    Closed,
}

/// What a collection holds: the vector dimension and the scalar fields' types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    pub dimension: usize,
    pub fields: BTreeMap<String, FieldType>,
}

impl Schema {
    /// The schema a collection created for this document gets.
    pub fn infer(doc: &Doc) -> Schema {
        Schema {
            dimension: doc.vector.len(),
            fields: doc
                .fields
                .iter()
                .filter_map(|(k, v)| FieldType::of(v).map(|t| (k.clone(), t)))
                .collect(),
        }
    }

    /// Checks a document against the collection: always the dimension; with typed fields the
    /// type of each field the collection has; closed collections also refuse fields they lack.
    pub fn check(&self, doc: &Doc, rule: Fields) -> Result<(), RecordError> {
        if doc.vector.len() != self.dimension {
            return Err(RecordError::WrongDimension {
                expected: self.dimension,
                got: doc.vector.len(),
            });
        }
        if rule != Fields::Free {
            for (k, v) in &doc.fields {
                let Some(got) = FieldType::of(v) else {
                    continue;
                };
                match self.fields.get(k) {
                    None if rule == Fields::Closed => {
                        return Err(RecordError::UnknownField(k.clone()))
                    }
                    None => {}
                    Some(&want) if !want.accepts(got) => {
                        return Err(RecordError::TypeConflict {
                            field: k.clone(),
                            want,
                            got,
                        })
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordError {
    #[error("value is not JSON: {0}")]
    NotJson(String),
    #[error("value is JSON but not an object")]
    NotObject,
    #[error("no vector: field `{0}` is missing or null")]
    MissingVector(String),
    #[error("field `{field}` is not a vector: {reason}")]
    BadVector { field: String, reason: String },
    #[error("wrong dimension: the collection has {expected}, the record {got}")]
    WrongDimension { expected: usize, got: usize },
    #[error("no id: field `{0}` is missing, or not a string or integer")]
    MissingId(String),
    #[error("no id: the record has no key, or a key that is not UTF-8")]
    BadKey,
    #[error("tombstone without a usable key (with id = \"offset\" a tombstone names no record)")]
    TombstoneWithoutId,
    #[error("field `{0}` is not in the collection's schema")]
    UnknownField(String),
    #[error("type conflict: field `{field}` is {want:?} in the collection, {got:?} in the record")]
    TypeConflict {
        field: String,
        want: FieldType,
        got: FieldType,
    },
    #[error("rejected by the sink: {0}")]
    Rejected(String),
    #[error("does not follow the schema: {0}")]
    SchemaViolation(String),
    #[error("no tenant: {0}")]
    NoTenant(String),
    #[error("not in the Confluent wire format: {0}")]
    NotWireFormat(String),
    #[error("schema id {id} is not in the schema registry: {reason}")]
    UnknownSchema { id: u32, reason: String },
    #[error("schema id {id} does not map to the collection: {reason}")]
    UnusableSchema { id: u32, reason: String },
    #[error("value does not decode with its schema (id {id}): {reason}")]
    Undecodable { id: u32, reason: String },
}

impl RecordError {
    /// A short stable name for the DLQ header and the error metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            RecordError::NotJson(_) => "not_json",
            RecordError::NotObject => "not_object",
            RecordError::MissingVector(_) => "missing_vector",
            RecordError::BadVector { .. } => "bad_vector",
            RecordError::WrongDimension { .. } => "wrong_dimension",
            RecordError::MissingId(_) | RecordError::BadKey => "no_id",
            RecordError::TombstoneWithoutId => "tombstone_without_id",
            RecordError::UnknownField(_) => "unknown_field",
            RecordError::TypeConflict { .. } => "type_conflict",
            RecordError::Rejected(_) => "rejected",
            RecordError::SchemaViolation(_) => "schema_violation",
            RecordError::NoTenant(_) => "no_tenant",
            RecordError::NotWireFormat(_) => "not_wire_format",
            RecordError::UnknownSchema { .. } => "unknown_schema",
            RecordError::UnusableSchema { .. } => "unusable_schema",
            RecordError::Undecodable { .. } => "undecodable",
        }
    }
}

/// The deterministic id of a record.
pub fn offset_id(topic: &str, partition: i32, offset: i64) -> String {
    uuid::Uuid::new_v5(
        &ID_NAMESPACE,
        format!("{topic}/{partition}/{offset}").as_bytes(),
    )
    .to_string()
}

fn key_id(rec: &RawRecord) -> Result<String, RecordError> {
    rec.key
        .as_deref()
        .and_then(|k| std::str::from_utf8(k).ok())
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .ok_or(RecordError::BadKey)
}

/// The tenant of a record under `mode`: its topic, or its key up to `separator`. Tenant names
/// are Weaviate's: 1 to 64 ASCII letters, digits, `-` and `_`.
pub fn tenant_of(
    rec: &RawRecord,
    mode: TenantMode,
    separator: &str,
) -> Result<String, RecordError> {
    let tenant = match mode {
        TenantMode::Topic => rec.topic.clone(),
        TenantMode::KeyPrefix => {
            let key = key_id(rec).map_err(|_| {
                RecordError::NoTenant("the record has no UTF-8 key to take a tenant from".into())
            })?;
            match key.split_once(separator) {
                Some((t, _)) => t.to_string(),
                None => {
                    return Err(RecordError::NoTenant(format!(
                        "key `{key}` has no `{separator}` ending a tenant prefix"
                    )))
                }
            }
        }
    };
    let valid = (1..=64).contains(&tenant.len())
        && tenant
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid {
        return Err(RecordError::NoTenant(format!(
            "`{tenant}` is not a tenant name (1-64 letters, digits, - and _)"
        )));
    }
    Ok(tenant)
}

/// Decodes one record into the operation the sink applies.
pub fn decode(rec: &RawRecord, embedding_field: &str, id: &IdMode) -> Result<Op, RecordError> {
    let Some(value) = rec.value.as_deref() else {
        // Tombstone: delete by the id the record key names (with id = a field, the key carries
        // that field's value, as with Kafka Connect's key-based deletes).
        return match id {
            IdMode::Offset => Err(RecordError::TombstoneWithoutId),
            IdMode::Key | IdMode::Field(_) => key_id(rec)
                .map(|id| Op::Delete(id, None))
                .map_err(|_| RecordError::TombstoneWithoutId),
        };
    };
    let json: Value =
        serde_json::from_slice(value).map_err(|e| RecordError::NotJson(e.to_string()))?;
    decode_value(rec, json, embedding_field, id)
}

/// The operation for a record whose value is already `json` (decoded from JSON, or from Avro
/// or Protobuf through the schema registry).
pub fn decode_value(
    rec: &RawRecord,
    json: Value,
    embedding_field: &str,
    id: &IdMode,
) -> Result<Op, RecordError> {
    let Value::Object(mut fields) = json else {
        return Err(RecordError::NotObject);
    };
    let vector = match fields.remove(embedding_field) {
        None | Some(Value::Null) => {
            return Err(RecordError::MissingVector(embedding_field.to_string()))
        }
        Some(v) => parse_vector(&v).map_err(|reason| RecordError::BadVector {
            field: embedding_field.to_string(),
            reason,
        })?,
    };
    let id = match id {
        IdMode::Offset => offset_id(&rec.topic, rec.partition, rec.offset),
        IdMode::Key => key_id(rec)?,
        IdMode::Field(f) => match fields.remove(f) {
            Some(Value::String(s)) if !s.is_empty() => s,
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
            _ => return Err(RecordError::MissingId(f.clone())),
        },
    };
    fields.retain(|_, v| !v.is_null());
    Ok(Op::Upsert(Doc {
        id,
        vector,
        fields,
        tenant: None,
    }))
}

/// A vector is a JSON array of finite numbers, or a base64 string of little-endian f32s.
pub fn parse_vector(v: &Value) -> Result<Vec<f32>, String> {
    let out: Vec<f32> = match v {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_f64()
                    .map(|f| f as f32)
                    .ok_or_else(|| format!("element {i} is not a number"))
            })
            .collect::<Result<_, _>>()?,
        Value::String(s) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s.trim())
                .map_err(|e| format!("not base64: {e}"))?;
            if bytes.len() % 4 != 0 {
                return Err(format!(
                    "base64 decodes to {} bytes, not a whole number of f32s",
                    bytes.len()
                ));
            }
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        }
        _ => return Err("expected an array of numbers or a base64 string".into()),
    };
    if out.is_empty() {
        return Err("empty".into());
    }
    if let Some(i) = out.iter().position(|f| !f.is_finite()) {
        return Err(format!("element {i} is not finite as f32"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(key: Option<&str>, value: Option<Value>) -> RawRecord {
        RawRecord {
            topic: "t".into(),
            partition: 2,
            offset: 7,
            key: key.map(|k| k.as_bytes().to_vec()),
            value: value.map(|v| serde_json::to_vec(&v).unwrap()),
            timestamp_ms: None,
        }
    }

    #[test]
    fn given_float_array_when_decoded_then_vector_id_and_fields() {
        let r = rec(
            None,
            Some(json!({"embedding": [1, 0.5, -2], "title": "a", "n": 3, "x": null})),
        );
        let Op::Upsert(d) = decode(&r, "embedding", &IdMode::Offset).unwrap() else {
            panic!("upsert expected")
        };
        assert_eq!(d.vector, vec![1.0, 0.5, -2.0]);
        assert_eq!(d.id, offset_id("t", 2, 7));
        assert_eq!(d.fields.len(), 2, "vector removed, null dropped");
        let s = Schema::infer(&d);
        assert_eq!(s.fields["title"], FieldType::Text);
        assert_eq!(s.fields["n"], FieldType::Int);
    }

    #[test]
    fn given_base64_le_f32_when_decoded_then_same_vector() {
        let floats = [1.5f32, -0.25, 3.0];
        let bytes: Vec<u8> = floats.iter().flat_map(|f| f.to_le_bytes()).collect();
        let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        assert_eq!(parse_vector(&json!(b64)).unwrap(), floats.to_vec());
        assert!(parse_vector(&json!("AAAA=")).is_err());
    }

    #[test]
    fn given_offset_ids_then_deterministic_and_distinct() {
        assert_eq!(offset_id("t", 0, 1), offset_id("t", 0, 1));
        assert_ne!(offset_id("t", 0, 1), offset_id("t", 1, 0));
        assert_ne!(offset_id("t", 0, 1), offset_id("u", 0, 1));
    }

    #[test]
    fn given_id_modes_when_decoded_then_key_or_field_used() {
        let r = rec(Some("doc-1"), Some(json!({"embedding": [1], "id": 42})));
        assert_eq!(decode(&r, "embedding", &IdMode::Key).unwrap().id(), "doc-1");
        let op = decode(&r, "embedding", &IdMode::Field("id".into())).unwrap();
        assert_eq!(op.id(), "42");
        let Op::Upsert(d) = op else { panic!() };
        assert!(d.fields.is_empty(), "the id field is not a scalar column");
        let no_key = rec(None, Some(json!({"embedding": [1]})));
        assert_eq!(
            decode(&no_key, "embedding", &IdMode::Key),
            Err(RecordError::BadKey)
        );
    }

    #[test]
    fn given_tombstone_when_decoded_then_delete_by_key_or_error() {
        let t = rec(Some("doc-1"), None);
        assert_eq!(
            decode(&t, "e", &IdMode::Key),
            Ok(Op::Delete("doc-1".into(), None))
        );
        assert_eq!(
            decode(&t, "e", &IdMode::Offset),
            Err(RecordError::TombstoneWithoutId)
        );
    }

    #[test]
    fn given_tenant_modes_then_topic_or_key_prefix_and_bad_names_refused() {
        let r = rec(Some("acme/doc-1"), None);
        assert_eq!(tenant_of(&r, TenantMode::Topic, "/").unwrap(), "t");
        assert_eq!(tenant_of(&r, TenantMode::KeyPrefix, "/").unwrap(), "acme");
        for (key, sep) in [
            (Some("acme-doc"), "/"),
            (None, "/"),
            (Some("a.b/x"), "/"),
            (Some("/x"), "/"),
        ] {
            let e = tenant_of(&rec(key, None), TenantMode::KeyPrefix, sep).unwrap_err();
            assert_eq!(e.kind(), "no_tenant", "{key:?}: {e}");
        }
        let dotted = RawRecord {
            topic: "a.b".into(),
            ..rec(None, None)
        };
        assert!(tenant_of(&dotted, TenantMode::Topic, "/").is_err());
    }

    proptest::proptest! {
        /// A key or topic from the network: a tenant or a `no_tenant` error, never a panic,
        /// and a tenant is always a valid name.
        #[test]
        fn given_any_key_when_taking_a_tenant_then_valid_name_or_error(
            key in proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80)),
            topic in "[a-zA-Z0-9._-]{1,70}",
            sep in "[/:|]{1,2}",
        ) {
            let r = RawRecord { topic, key, ..rec(None, None) };
            for mode in [TenantMode::Topic, TenantMode::KeyPrefix] {
                match tenant_of(&r, mode, &sep) {
                    Ok(t) => proptest::prop_assert!(
                        (1..=64).contains(&t.len())
                            && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                    ),
                    Err(e) => proptest::prop_assert_eq!(e.kind(), "no_tenant"),
                }
            }
        }
    }

    #[test]
    fn given_bad_records_when_decoded_then_each_error_kind() {
        let cases: Vec<(RawRecord, &str)> = vec![
            (
                RawRecord {
                    value: Some(b"{not json".to_vec()),
                    ..rec(None, None)
                },
                "not_json",
            ),
            (rec(None, Some(json!([1, 2]))), "not_object"),
            (rec(None, Some(json!({"title": "x"}))), "missing_vector"),
            (rec(None, Some(json!({"embedding": ["a"]}))), "bad_vector"),
            (rec(None, Some(json!({"embedding": []}))), "bad_vector"),
            (rec(None, Some(json!({"embedding": 5}))), "bad_vector"),
        ];
        for (r, kind) in cases {
            let e = decode(&r, "embedding", &IdMode::Offset).unwrap_err();
            assert_eq!(e.kind(), kind, "{e}");
        }
    }

    #[test]
    fn given_schema_when_checking_then_dimension_and_types_enforced() {
        let d = |v: Value| Doc {
            id: "1".into(),
            vector: vec![0.0; 3],
            fields: v.as_object().unwrap().clone(),
            tenant: None,
        };
        let s = Schema::infer(&d(json!({"score": 1.5, "title": "a"})));
        assert!(
            s.check(&d(json!({"score": 2, "title": "b"})), Fields::Closed)
                .is_ok(),
            "int widens"
        );
        for rule in [Fields::Closed, Fields::Typed] {
            let e = s.check(&d(json!({"title": 3})), rule).unwrap_err();
            assert_eq!(e.kind(), "type_conflict");
        }
        assert!(s.check(&d(json!({"title": 3})), Fields::Free).is_ok());
        assert_eq!(
            s.check(&d(json!({"other": 1})), Fields::Closed)
                .unwrap_err()
                .kind(),
            "unknown_field"
        );
        assert!(s.check(&d(json!({"other": 1})), Fields::Typed).is_ok());
        assert!(s.check(&d(json!({"other": 1})), Fields::Free).is_ok());
        let mut short = d(json!({}));
        short.vector.pop();
        assert_eq!(
            s.check(&short, Fields::Free),
            Err(RecordError::WrongDimension {
                expected: 3,
                got: 2
            })
        );
    }
}
