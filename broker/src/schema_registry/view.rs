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

    fn conforms(&self, payload: &[u8]) -> Result<(), String> {
        let (id, rest) = wire::header(payload)?;
        let id = i32::try_from(id).map_err(|_| format!("schema id {id} is out of range"))?;
        let parsed = self.read(|r| Ok(r.parsed_by_id(id))).ok().flatten();
        conforms_with(id, parsed, rest)
    }
}

/// Deep validation of the rest of a wire-format payload against `parsed`, the schema of `id`.
fn conforms_with(id: i32, parsed: Option<Arc<Parsed>>, rest: &[u8]) -> Result<(), String> {
    let parsed = parsed.ok_or_else(|| format!("schema id {id} is not registered"))?;
    let json = decode_with(id, Some(parsed.clone()), rest).json?;
    // Avro and Protobuf payloads that decode are what their schema says; a JSON document is
    // only JSON until it is validated against its schema.
    match &*parsed {
        Parsed::Json(s) => s.violation(&json).map_or(Ok(()), Err),
        Parsed::Avro(_) | Parsed::Protobuf(_) => Ok(()),
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
    use crate::schema_registry::types::{parse, SchemaType};

    fn schema(kind: SchemaType, text: &str) -> Option<Arc<Parsed>> {
        Some(Arc::new(parse(kind, text, &[], false).expect("parses")))
    }

    #[test]
    fn given_payloads_when_deeply_validated_then_only_what_the_schema_reads_passes() {
        let json = schema(
            SchemaType::Json,
            r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#,
        );
        assert_eq!(conforms_with(1, json.clone(), br#"{"n": 3}"#), Ok(()));
        let missing = conforms_with(1, json.clone(), br#"{"m": 3}"#).unwrap_err();
        assert!(
            missing.contains("\"n\" is a required property"),
            "{missing}"
        );
        let wrong = conforms_with(1, json.clone(), br#"{"n": "three"}"#).unwrap_err();
        assert!(wrong.contains("/n"), "the path is named: {wrong}");
        assert!(conforms_with(1, json, b"not json").is_err());

        let avro = schema(
            SchemaType::Avro,
            r#"{"type":"record","name":"U","fields":[{"name":"id","type":"long"}]}"#,
        );
        assert_eq!(conforms_with(2, avro.clone(), &[0x04]), Ok(())); // id = 2 (zigzag)
        assert!(
            conforms_with(2, avro.clone(), &[0xff]).is_err(),
            "a torn varint"
        );
        let named = schema(
            SchemaType::Avro,
            r#"{"type":"record","name":"U","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}"#,
        );
        assert_eq!(
            conforms_with(2, named.clone(), &[0x02, 0x04, b'o', b'k']),
            Ok(())
        );
        assert!(
            conforms_with(2, named, &[0x02, 0x04]).is_err(),
            "a string cut short"
        );
        assert!(
            conforms_with(2, avro, &[0x04, 0x00]).is_err(),
            "trailing bytes"
        );
        let unknown = conforms_with(9, None, b"x").unwrap_err();
        assert!(unknown.contains("not registered"), "{unknown}");
    }

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
