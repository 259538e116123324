//! The registry as the produce path sees it (`partition::schema_ids::SchemaView`): which
//! subjects a schema id is registered under, and a schema's record name.

use std::sync::Arc;

use strom_connectors::registry::{avro, protobuf, wire};

use super::types::Parsed;
use crate::partition::schema_ids::{Decoded, SchemaView};

/// The view over the registry's store.
impl SchemaView for super::store::Store {
    fn id_in_subject(&self, id: i32, subject: &str) -> bool {
        self.keys_of_id(id)
            .any(|v| v.value.subject == subject && !v.value.deleted)
    }

    fn record_name(&self, id: i32) -> Option<String> {
        let v = self.keys_of_id(id).next()?;
        record_name_of(&v.value.schema_type, &v.value.schema)
    }
}

/// The record name of a stored (canonical) schema string.
pub fn record_name_of(schema_type: &str, schema: &str) -> Option<String> {
    match schema_type {
        "AVRO" => {
            let v: serde_json::Value = serde_json::from_str(schema).ok()?;
            let name = v.get("name")?.as_str()?;
            match v.get("namespace").and_then(|n| n.as_str()) {
                Some(ns) if !ns.is_empty() && !name.contains('.') => Some(format!("{ns}.{name}")),
                _ => Some(name.to_string()),
            }
        }
        "JSON" => {
            let v: serde_json::Value = serde_json::from_str(schema).ok()?;
            v.get("title")?.as_str().map(str::to_string)
        }
        "PROTOBUF" => {
            // The canonical text: `package p;` then the first top-level `message M {`.
            let package = schema
                .lines()
                .find_map(|l| l.strip_prefix("package ")?.strip_suffix(';'));
            let message = schema
                .lines()
                .find_map(|l| l.strip_prefix("message ")?.strip_suffix(" {"))?;
            Some(match package {
                Some(p) => format!("{p}.{message}"),
                None => message.to_string(),
            })
        }
        _ => None,
    }
}

/// The running service's view: one lock of the registry per question (only on topics that
/// validate schema ids; the produce path of others never asks).
impl SchemaView for super::Service {
    fn id_in_subject(&self, id: i32, subject: &str) -> bool {
        self.read(|r| Ok(r.store.id_in_subject(id, subject)))
            .unwrap_or(false)
    }

    fn record_name(&self, id: i32) -> Option<String> {
        self.read(|r| Ok(r.store.record_name(id))).ok().flatten()
    }

    fn decode(&self, payload: &[u8]) -> Option<Decoded> {
        let (id, rest) = wire::header(payload).ok()?;
        let id = i32::try_from(id).ok()?;
        // The parsed schema is shared (cached per id): decoding runs outside the lock.
        let parsed = self.read(|r| Ok(r.parsed_by_id(id))).ok().flatten();
        Some(decode_with(id, parsed, rest))
    }
}

/// The rest of a wire-format payload (after magic byte and id) read through `parsed`, the
/// schema of `id`: the connectors' decoders (`strom_connectors::registry`) on the registry's
/// own parsed schemas, so the sinks and the console read a record alike.
fn decode_with(id: i32, parsed: Option<Arc<Parsed>>, rest: &[u8]) -> Decoded {
    let Some(parsed) = parsed else {
        return Decoded {
            schema_id: id,
            schema_type: None,
            json: Err(format!("schema id {id} is not registered")),
        };
    };
    let json = match &*parsed {
        Parsed::Avro(s) => avro::decode(&s.resolved, rest),
        Parsed::Json(_) => serde_json::from_slice(rest).map_err(|e| format!("not JSON: {e}")),
        Parsed::Protobuf(s) => wire::message_indexes(rest).and_then(|(path, payload)| {
            let m = s
                .message(&path)
                .ok_or_else(|| format!("no message at index path {path:?} in schema {id}"))?;
            protobuf::decode(m, payload)
        }),
    };
    Decoded {
        schema_id: id,
        schema_type: Some(parsed.schema_type().as_str()),
        json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_canonical_schemas_then_record_names() {
        assert_eq!(
            record_name_of(
                "AVRO",
                r#"{"type":"record","namespace":"a.b","name":"C","fields":[]}"#
            )
            .as_deref(),
            Some("a.b.C")
        );
        assert_eq!(
            record_name_of(
                "PROTOBUF",
                "syntax = \"proto3\";\npackage p;\n\nmessage M {\n}\n"
            )
            .as_deref(),
            Some("p.M")
        );
        assert_eq!(
            record_name_of("JSON", r#"{"title":"T"}"#).as_deref(),
            Some("T")
        );
    }
}
