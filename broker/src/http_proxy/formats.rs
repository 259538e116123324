//! Embedded data formats: a key's or value's `{"type", "data", …}` of a v3 produce request
//! turned into record bytes, and record bytes turned back into the JSON of a v2 consumer's
//! `format`.
//!
//! JSON is the data serialized as JSON text; BINARY is base64; STRING is UTF-8 text. AVRO
//! and JSONSCHEMA are serialized through Strom's own registry (`schema_registry::Service`)
//! into Confluent's wire format: magic byte 0, the 4-byte big-endian schema id, the payload
//! (Avro binary, JSON text). The schema is chosen as Confluent's v3 API chooses it:
//! `schema_id`, else `subject` (+ `schema_version`, default latest), else the topic name
//! strategy's subject (`{topic}-key` / `{topic}-value`), latest version.

use std::sync::Arc;

use apache_avro::types::Value as AvroValue;
use apache_avro::Schema;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;

use prost_reflect::prost::Message;
use prost_reflect::DynamicMessage;
use strom_connectors::registry::wire;

use super::error::{ProxyError, ProxyResult};
use crate::schema_registry::types::protobuf::ProtoSchema;
use crate::schema_registry::types::Parsed;
use crate::schema_registry::Service;

/// Confluent's wire format: magic byte, then the schema id.
pub const MAGIC: u8 = 0;

/// `type` of a v3 key or value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DataType {
    Json,
    Binary,
    String,
    Avro,
    Protobuf,
    Jsonschema,
}

impl DataType {
    pub fn as_str(self) -> &'static str {
        match self {
            DataType::Json => "JSON",
            DataType::Binary => "BINARY",
            DataType::String => "STRING",
            DataType::Avro => "AVRO",
            DataType::Protobuf => "PROTOBUF",
            DataType::Jsonschema => "JSONSCHEMA",
        }
    }

    fn of_schema(schema_type: &str) -> DataType {
        match schema_type {
            "PROTOBUF" => DataType::Protobuf,
            "JSON" => DataType::Jsonschema,
            _ => DataType::Avro,
        }
    }

    fn has_schema(self) -> bool {
        matches!(
            self,
            DataType::Avro | DataType::Protobuf | DataType::Jsonschema
        )
    }
}

/// A v3 key or value as requested.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProduceData {
    #[serde(rename = "type")]
    pub data_type: Option<DataType>,
    #[serde(default)]
    pub data: Value,
    pub schema_id: Option<i32>,
    pub subject: Option<String>,
    pub schema_version: Option<i32>,
    pub subject_name_strategy: Option<String>,
    /// A raw schema to register first: not offered (register it with the registry).
    pub schema: Option<String>,
}

/// The bytes of a key or value, and what the answer reports about them.
#[derive(Debug, Clone)]
pub struct Encoded {
    pub bytes: Option<Bytes>,
    pub data_type: DataType,
    pub schema: Option<SchemaRef>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaRef {
    pub subject: Option<String>,
    pub id: i32,
    pub version: Option<i32>,
}

impl Encoded {
    /// `{"type", "size", "subject"?, "schema_id"?, "schema_version"?}` of a produce answer.
    pub fn describe(&self) -> Value {
        let mut v = serde_json::json!({
            "type": self.data_type.as_str(),
            "size": self.bytes.as_ref().map_or(0, |b| b.len()),
        });
        if let Some(s) = &self.schema {
            v["subject"] = s.subject.clone().map_or(Value::Null, Value::String);
            v["schema_id"] = s.id.into();
            v["schema_version"] = s.version.map_or(Value::Null, Value::from);
        }
        v
    }
}

/// Which side of the record, for the subject name and the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Key,
    Value,
}

impl Side {
    fn suffix(self) -> &'static str {
        match self {
            Side::Key => "key",
            Side::Value => "value",
        }
    }
}

/// A key or value of a produce request as record bytes.
pub fn encode(
    registry: Option<&Arc<Service>>,
    topic: &str,
    side: Side,
    data: &ProduceData,
) -> ProxyResult<Encoded> {
    if data.schema.is_some() {
        return Err(ProxyError::BadRequest(
            "a raw `schema` is not accepted: register it with the schema registry and send its schema_id".into(),
        ));
    }
    let chosen = data.schema_id.is_some() || data.subject.is_some();
    let plain = |t: DataType| -> ProxyResult<Encoded> {
        Ok(Encoded {
            bytes: plain_bytes(t, &data.data)?,
            data_type: t,
            schema: None,
        })
    };
    match data.data_type {
        Some(t) if !t.has_schema() => return plain(t),
        None if !chosen => {
            // No type and no schema: the topic's subject if it has one, else JSON.
            let subject = format!("{topic}-{}", side.suffix());
            let has = registry.is_some_and(|r| {
                r.read(|r| Ok(r.store.latest(&subject, false).is_some()))
                    .unwrap_or(false)
            });
            if !has {
                return plain(DataType::Json);
            }
        }
        _ => {}
    }
    if data.data.is_null() {
        // A null key or value stays null (a tombstone), whatever its schema.
        return Ok(Encoded {
            bytes: None,
            data_type: data.data_type.unwrap_or(DataType::Avro),
            schema: None,
        });
    }
    let registry = registry.ok_or_else(|| {
        ProxyError::BadRequest("the schema registry is not running (schema_registry.enable)".into())
    })?;
    let (schema_ref, schema_type, parsed) = pick_schema(registry, topic, side, data)?;
    let data_type = DataType::of_schema(&schema_type);
    if let Some(t) = data.data_type {
        if t != data_type {
            return Err(ProxyError::BadRequest(format!(
                "type {} does not match schema {} of type {schema_type}",
                t.as_str(),
                schema_ref.id
            )));
        }
    }
    let payload = match parsed.as_ref() {
        Parsed::Avro(a) => avro_encode(&a.resolved, &data.data)?,
        Parsed::Json(_) => {
            serde_json::to_vec(&data.data).map_err(|e| ProxyError::BadRequest(e.to_string()))?
        }
        Parsed::Protobuf(p) => protobuf_encode(p, &data.data)?,
    };
    let mut bytes = Vec::with_capacity(5 + payload.len());
    bytes.push(MAGIC);
    bytes.extend_from_slice(&schema_ref.id.to_be_bytes());
    bytes.extend_from_slice(&payload);
    Ok(Encoded {
        bytes: Some(Bytes::from(bytes)),
        data_type,
        schema: Some(schema_ref),
    })
}

/// JSON, BINARY and STRING data as bytes; JSON null is a null key or value.
pub fn plain_bytes(t: DataType, data: &Value) -> ProxyResult<Option<Bytes>> {
    if data.is_null() {
        return Ok(None);
    }
    Ok(Some(match t {
        DataType::Binary => {
            let s = data.as_str().ok_or_else(|| {
                ProxyError::BadRequest("BINARY data must be a base64 string".into())
            })?;
            Bytes::from(
                B64.decode(s).map_err(|e| {
                    ProxyError::BadRequest(format!("BINARY data is not base64: {e}"))
                })?,
            )
        }
        DataType::String => {
            let s = data
                .as_str()
                .ok_or_else(|| ProxyError::BadRequest("STRING data must be a string".into()))?;
            Bytes::copy_from_slice(s.as_bytes())
        }
        _ => Bytes::from(
            serde_json::to_vec(data).map_err(|e| ProxyError::BadRequest(e.to_string()))?,
        ),
    }))
}

fn pick_schema(
    registry: &Arc<Service>,
    topic: &str,
    side: Side,
    data: &ProduceData,
) -> ProxyResult<(SchemaRef, String, Arc<Parsed>)> {
    let missing = || match side {
        Side::Key => ProxyError::KeySchemaMissing,
        Side::Value => ProxyError::ValueSchemaMissing,
    };
    registry
        .read(|r| {
            let (id, subject, version) = if let Some(id) = data.schema_id {
                let v = r
                    .store
                    .keys_of_id(id)
                    .find(|v| data.subject.as_ref().is_none_or(|s| &v.value.subject == s));
                (
                    id,
                    v.map(|v| v.value.subject.clone()),
                    v.map(|v| v.value.version),
                )
            } else {
                if let Some(s) = data.subject_name_strategy.as_deref() {
                    if !s.eq_ignore_ascii_case("TOPIC_NAME") {
                        return Ok(None);
                    }
                }
                let subject = data
                    .subject
                    .clone()
                    .unwrap_or_else(|| format!("{topic}-{}", side.suffix()));
                let v = match data.schema_version {
                    Some(n) => r.store.version(&subject, n).filter(|v| !v.value.deleted),
                    None => r.store.latest(&subject, false),
                };
                let Some(v) = v else { return Ok(None) };
                (v.value.id, Some(subject), Some(v.value.version))
            };
            let Some(parsed) = r.parsed_by_id(id) else {
                return Ok(None);
            };
            let schema_type = parsed.schema_type().as_str().to_string();
            Ok(Some((
                SchemaRef {
                    subject,
                    id,
                    version,
                },
                schema_type,
                parsed,
            )))
        })
        .map_err(|e| ProxyError::Internal(e.to_string()))?
        .ok_or_else(missing)
}

/// JSON data in Avro's JSON encoding as Avro binary: a union's value may be wrapped as
/// `{"branch": value}` (Avro's JSON encoding, what Confluent's proxy expects) or given bare.
pub fn avro_encode(schema: &Schema, data: &Value) -> ProxyResult<Vec<u8>> {
    let fail = |e: String| ProxyError::Conversion {
        kind: "Avro",
        reason: e,
    };
    let unwrapped = unwrap_unions(schema, data.clone());
    let value = AvroValue::try_from(unwrapped).map_err(|e| fail(e.to_string()))?;
    let value = value.resolve(schema).map_err(|e| fail(e.to_string()))?;
    apache_avro::writer::datum::GenericDatumWriter::builder(schema)
        .build()
        .map_err(|e| fail(e.to_string()))?
        .write_value_to_vec(value)
        .map_err(|e| fail(e.to_string()))
}

/// The name a union branch is selected by in Avro's JSON encoding.
fn branch_name(s: &Schema) -> Option<String> {
    Some(match s {
        Schema::Null => "null".into(),
        Schema::Boolean => "boolean".into(),
        Schema::Int => "int".into(),
        Schema::Long => "long".into(),
        Schema::Float => "float".into(),
        Schema::Double => "double".into(),
        Schema::Bytes => "bytes".into(),
        Schema::String => "string".into(),
        Schema::Array(_) => "array".into(),
        Schema::Map(_) => "map".into(),
        other => other.name()?.fullname(None),
    })
}

fn unwrap_unions(schema: &Schema, data: Value) -> Value {
    match (schema, data) {
        (Schema::Union(u), Value::Object(m)) if m.len() == 1 => {
            let (k, v) = m.iter().next().expect("one entry");
            let branch = u.variants().iter().find(|b| {
                branch_name(b).is_some_and(|n| &n == k || n.rsplit('.').next() == Some(k.as_str()))
            });
            match branch {
                Some(b) => unwrap_unions(b, v.clone()),
                None => Value::Object(m),
            }
        }
        (Schema::Record(r), Value::Object(mut m)) => {
            for f in &r.fields {
                if let Some(v) = m.remove(&f.name) {
                    m.insert(f.name.clone(), unwrap_unions(&f.schema, v));
                }
            }
            Value::Object(m)
        }
        (Schema::Array(a), Value::Array(items)) => Value::Array(
            items
                .into_iter()
                .map(|i| unwrap_unions(&a.items, i))
                .collect(),
        ),
        (Schema::Map(mp), Value::Object(m)) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (k, unwrap_unions(&mp.types, v)))
                .collect(),
        ),
        (_, d) => d,
    }
}

/// A v2 consumer's embedded format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Binary,
    Json,
    Avro,
    Protobuf,
    Jsonschema,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        Some(match s.to_ascii_lowercase().as_str() {
            "binary" => Format::Binary,
            "json" => Format::Json,
            "avro" => Format::Avro,
            "protobuf" => Format::Protobuf,
            "jsonschema" => Format::Jsonschema,
            _ => return None,
        })
    }

    /// The `Accept` media type of its records: `application/vnd.kafka.FORMAT.v2+json`.
    pub fn media_type(self) -> &'static str {
        match self {
            Format::Binary => "application/vnd.kafka.binary.v2+json",
            Format::Json => "application/vnd.kafka.json.v2+json",
            Format::Avro => "application/vnd.kafka.avro.v2+json",
            Format::Protobuf => "application/vnd.kafka.protobuf.v2+json",
            Format::Jsonschema => "application/vnd.kafka.jsonschema.v2+json",
        }
    }
}

/// Record bytes as the JSON of `format`: base64 for binary, parsed JSON for json, the
/// decoded schema'd payload for avro/jsonschema. A record that does not decode is an error
/// of the whole poll (Confluent's proxy fails the request with the deserializer's error).
pub fn decode(
    registry: Option<&Arc<Service>>,
    format: Format,
    bytes: Option<&[u8]>,
) -> ProxyResult<Value> {
    let Some(b) = bytes else {
        return Ok(Value::Null);
    };
    match format {
        Format::Binary => Ok(Value::String(B64.encode(b))),
        Format::Json => serde_json::from_slice(b).map_err(|e| {
            ProxyError::Internal(format!(
                "a record is not JSON (consume with format binary): {e}"
            ))
        }),
        Format::Avro | Format::Jsonschema | Format::Protobuf => {
            let (id, payload) = split_wire(b).ok_or_else(|| {
                ProxyError::Internal(
                    "a record does not start with the schema registry's magic byte".into(),
                )
            })?;
            let registry = registry
                .ok_or_else(|| ProxyError::Internal("the schema registry is not running".into()))?;
            let parsed = registry
                .read(|r| Ok(r.parsed_by_id(id)))
                .ok()
                .flatten()
                .ok_or_else(|| ProxyError::Internal(format!("schema {id} not found")))?;
            match (format, parsed.as_ref()) {
                (Format::Avro, Parsed::Avro(a)) => avro_decode(&a.resolved, payload),
                (Format::Jsonschema, Parsed::Json(_)) => serde_json::from_slice(payload)
                    .map_err(|e| ProxyError::Internal(format!("a record is not JSON: {e}"))),
                (Format::Protobuf, Parsed::Protobuf(p)) => protobuf_decode(p, payload),
                _ => Err(ProxyError::Internal(format!(
                    "schema {id} is {}, not {format:?}",
                    parsed.schema_type().as_str()
                ))),
            }
        }
    }
}

/// The schema's first message (what Confluent's proxy writes) from Protobuf's JSON mapping
/// (proto3 JSON: field names or their json_name, int64 as string or number, enums by name),
/// behind the message-index path of that message (the single byte 0).
fn protobuf_encode(p: &ProtoSchema, data: &Value) -> ProxyResult<Vec<u8>> {
    let conversion = |reason: String| ProxyError::Conversion {
        kind: "Protobuf",
        reason,
    };
    let m = p
        .message(&[0])
        .ok_or_else(|| conversion("the schema has no message".into()))?;
    let msg = DynamicMessage::deserialize(m, data).map_err(|e| conversion(e.to_string()))?;
    let mut out = wire::encode_indexes(&[0]);
    msg.encode(&mut out)
        .map_err(|e| conversion(e.to_string()))?;
    Ok(out)
}

/// A Protobuf payload (message-index path, then the message) as Protobuf's JSON mapping, as
/// Confluent's proxy prints it (`JsonFormat`).
fn protobuf_decode(p: &ProtoSchema, rest: &[u8]) -> ProxyResult<Value> {
    let bad =
        |e: String| ProxyError::Internal(format!("a record does not decode with its schema: {e}"));
    let (path, payload) = wire::message_indexes(rest).map_err(bad)?;
    let m = p
        .message(&path)
        .ok_or_else(|| bad(format!("no message at index path {path:?}")))?;
    let msg = DynamicMessage::decode(m, payload).map_err(|e| bad(e.to_string()))?;
    serde_json::to_value(&msg).map_err(|e| bad(e.to_string()))
}

/// `(schema id, payload)` of Confluent's wire format.
pub fn split_wire(b: &[u8]) -> Option<(i32, &[u8])> {
    if b.len() < 5 || b[0] != MAGIC {
        return None;
    }
    Some((i32::from_be_bytes([b[1], b[2], b[3], b[4]]), &b[5..]))
}

/// The connectors' Avro decoder (the console's and the sinks' too): a datum that does not
/// decode whole, or ends inside a value, is an error.
fn avro_decode(schema: &Schema, payload: &[u8]) -> ProxyResult<Value> {
    strom_connectors::registry::avro::decode(schema, payload)
        .map_err(|e| ProxyError::Internal(format!("a record does not decode with its schema: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::parse_str(
            r#"{"type":"record","name":"R","namespace":"n","fields":[
                {"name":"id","type":"long"},
                {"name":"note","type":["null","string"],"default":null}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn given_avro_json_when_encoded_then_decodes_back() {
        let s = schema();
        let wrapped = serde_json::json!({"id": 7, "note": {"string": "hi"}});
        let bytes = avro_encode(&s, &wrapped).unwrap();
        assert_eq!(
            avro_decode(&s, &bytes).unwrap(),
            serde_json::json!({"id": 7, "note": "hi"})
        );
        let bare = serde_json::json!({"id": 7, "note": "hi"});
        assert_eq!(avro_encode(&s, &bare).unwrap(), bytes);
        let null = serde_json::json!({"id": 1, "note": null});
        assert!(avro_encode(&s, &null).is_ok());
    }

    #[test]
    fn given_data_that_does_not_fit_when_encoded_then_conversion_error() {
        let e = avro_encode(&schema(), &serde_json::json!({"id": "seven"})).unwrap_err();
        assert_eq!(e.status_and_code().1, 42203);
    }

    #[test]
    fn given_plain_types_then_bytes() {
        let b = |t, v: Value| plain_bytes(t, &v).unwrap().map(|b| b.to_vec());
        assert_eq!(b(DataType::Binary, "aGk=".into()), Some(b"hi".to_vec()));
        assert_eq!(b(DataType::String, "hi".into()), Some(b"hi".to_vec()));
        assert_eq!(
            b(DataType::Json, serde_json::json!({"a": 1})),
            Some(br#"{"a":1}"#.to_vec())
        );
        assert_eq!(b(DataType::Json, Value::Null), None);
        assert!(plain_bytes(DataType::Binary, &"!!".into()).is_err());
        assert!(plain_bytes(DataType::String, &serde_json::json!(1)).is_err());
    }

    #[test]
    fn given_wire_format_then_id_and_payload() {
        assert_eq!(split_wire(&[0, 0, 0, 1, 2, 9]), Some((258, &[9u8][..])));
        assert_eq!(split_wire(&[1, 0, 0, 0, 1]), None);
        assert_eq!(split_wire(&[0, 0]), None);
        assert_eq!(
            decode(None, Format::Binary, Some(b"hi")).unwrap(),
            Value::String("aGk=".into())
        );
        assert_eq!(decode(None, Format::Json, None).unwrap(), Value::Null);
    }
}
