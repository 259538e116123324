//! Schema mapping: which record fields become which typed columns (pgvector, Milvus) or
//! properties (Weaviate), and which records a sink must refuse.
//!
//! Where the mapping comes from is `sink.schema_mapping`:
//! - `infer` (default): the first record decides the collection's fields and their types;
//!   a later record bringing a new field adds it (see [`crate::sink::Sink::add_fields`]).
//! - `json_schema`: the JSON Schema given in the TOML ([`Declared`]) is the rule: the
//!   collection is created with every declared property, records are checked against it
//!   (types, `required`, `additionalProperties: false`) before they reach the sink, and a
//!   field it allows but does not declare is a new optional field.
//! - `registry`: the schema each record was written with, looked up in the schema registry
//!   by the id in its Confluent wire-format header ([`crate::registry`]). Each schema id
//!   converts to a [`Declared`] (Avro record fields, Protobuf message fields, or the JSON
//!   Schema), handed along with the record, so evolution (a new optional field in a later
//!   version → a new column) and incompatible changes (a type the collection cannot hold →
//!   the DLQ, with the reason) work as for the other two.
//!
//! Either way an incompatible change (a field whose type the collection's column cannot
//! hold) sends the record to the DLQ naming the field and both types; it never alters a
//! column's type.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{SchemaMapping, SinkConfig};
use crate::declared::Declared;
use crate::record::{Doc, FieldType, RecordError, Schema};

/// The mapping a connector uses (built from its config by [`Mapper::from_config`]).
#[derive(Debug, Clone)]
pub enum Mapper {
    Infer,
    Declared(Arc<Declared>),
    /// Per record: the [`Declared`] of the schema id it was written with.
    Registry,
}

impl Mapper {
    /// The config was validated at load, so a schema that fails here fails as at load.
    pub fn from_config(sink: &SinkConfig) -> Result<Mapper, String> {
        match sink.schema_mapping {
            SchemaMapping::Infer => Ok(Mapper::Infer),
            SchemaMapping::JsonSchema => sink
                .declared()
                .map(|d| Mapper::Declared(Arc::new(d)))
                .map_err(|(key, m)| format!("{key}: {m}")),
            SchemaMapping::Registry => Ok(Mapper::Registry),
        }
    }

    /// The rule for a record: the TOML's schema, the record's registry schema
    /// (`per_record`), or None to infer from the record itself.
    pub fn rule(&self, per_record: Option<&Arc<Declared>>) -> Option<Arc<Declared>> {
        match self {
            Mapper::Infer => None,
            Mapper::Declared(d) => Some(d.clone()),
            Mapper::Registry => per_record.cloned(),
        }
    }
}

/// Checks `doc` against its rule (nothing to check when inferring).
pub fn check(rule: Option<&Declared>, doc: &Doc) -> Result<(), RecordError> {
    match rule {
        Some(d) => d.check(doc),
        None => Ok(()),
    }
}

/// The schema a collection created for `doc` gets.
pub fn schema_for(rule: Option<&Declared>, doc: &Doc) -> Schema {
    match rule {
        Some(d) => d.schema_for(doc),
        None => Schema::infer(doc),
    }
}

/// The type each of `doc`'s fields is stored as: declared, else inferred.
pub fn field_types(rule: Option<&Declared>, doc: &Doc) -> BTreeMap<String, FieldType> {
    doc.fields
        .iter()
        .filter_map(|(k, v)| {
            let t = rule
                .and_then(|d| d.fields.get(k).copied())
                .or_else(|| FieldType::of(v))?;
            Some((k.clone(), t))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::*;
    use serde_json::json;

    const SCHEMA: &str = r#"{
        "type": "object",
        "properties": {
            "doc_id": {"type": "string"},
            "embedding": {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3},
            "title": {"type": "string"},
            "score": {"type": ["number", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "published": {"type": "boolean"}
        },
        "required": ["doc_id", "embedding", "title"]
    }"#;

    fn doc(fields: Value) -> Doc {
        Doc {
            id: "1".into(),
            vector: vec![0.0; 3],
            fields: fields.as_object().unwrap().clone(),
            tenant: None,
        }
    }

    #[test]
    fn given_json_schema_then_fields_types_required_and_dimension() {
        let d = Declared::parse(SCHEMA, "embedding", Some("doc_id")).unwrap();
        assert_eq!(d.dimension, Some(3));
        assert_eq!(
            d.fields,
            [
                ("published".to_string(), FieldType::Bool),
                ("score".to_string(), FieldType::Float),
                ("tags".to_string(), FieldType::Json),
                ("title".to_string(), FieldType::Text),
            ]
            .into_iter()
            .collect()
        );
        assert_eq!(d.required, BTreeSet::from(["title".to_string()]));
        assert!(!d.closed);
    }

    #[test]
    fn given_records_then_checked_against_the_declared_schema() {
        let d = Declared::parse(SCHEMA, "embedding", Some("doc_id")).unwrap();
        assert!(
            d.check(&doc(json!({"title": "a", "score": 2}))).is_ok(),
            "int is a number"
        );
        let e = d.check(&doc(json!({"score": 1.5}))).unwrap_err();
        assert_eq!(e.kind(), "schema_violation");
        assert!(e.to_string().contains("`title` is required"), "{e}");
        let e = d.check(&doc(json!({"title": 7}))).unwrap_err();
        assert!(
            e.to_string()
                .contains("`title` is integer, the schema says text"),
            "{e}"
        );
        // Not declared, schema open: a new optional field, stored with its inferred type.
        let new = doc(json!({"title": "a", "lang": "en"}));
        assert!(d.check(&new).is_ok());
        let m = Mapper::Declared(Arc::new(d.clone()));
        let s = schema_for(m.rule(None).as_deref(), &new);
        assert_eq!((s.dimension, s.fields.len()), (3, 5));
        assert_eq!(
            field_types(m.rule(None).as_deref(), &new)["lang"],
            FieldType::Text
        );
        let closed = Declared { closed: true, ..d };
        let e = closed.check(&new).unwrap_err();
        assert!(e.to_string().contains("`lang` is not in the schema"), "{e}");
    }

    /// JSON values of any shape, nested a few levels.
    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            prop_oneof![
                Just("type".to_string()),
                Just("object".to_string()),
                Just("string".to_string()),
                Just("properties".to_string()),
                Just("required".to_string()),
                "[a-z]{0,6}"
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("type".to_string()),
                        Just("properties".to_string()),
                        Just("required".to_string()),
                        Just("additionalProperties".to_string()),
                        Just("minItems".to_string()),
                        Just("maxItems".to_string()),
                        Just("embedding".to_string()),
                        "[a-z]{1,6}"
                    ],
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Whatever the TOML holds, parsing answers a schema or an error, and a parsed
        /// schema checks any record without panicking.
        #[test]
        fn given_any_json_when_parsed_as_a_schema_then_no_panic(schema in any_json(), record in any_json()) {
            if let Ok(d) = Declared::parse(&schema.to_string(), "embedding", Some("id")) {
                if let Value::Object(fields) = record {
                    let doc = Doc { id: "x".into(), vector: vec![0.0; 3], fields, tenant: None };
                    let _ = d.check(&doc);
                    let _ = d.schema_for(&doc);
                }
            }
        }
    }

    #[test]
    fn given_bad_schemas_then_errors_say_why() {
        for (text, want) in [
            ("[1]", "not a JSON object"),
            ("{\"type\": \"array\"}", "not \"object\""),
            ("{\"properties\": {\"a\": {}}}", "`a` has no `type`"),
            (
                "{\"properties\": {\"a\": {\"type\": [\"string\", \"integer\"]}}}",
                "one type",
            ),
            ("{\"properties\": {\"a\": {\"$ref\": \"#/x\"}}}", "$ref"),
            (
                "{\"properties\": {\"a\": {\"type\": \"date\"}}}",
                "unknown type",
            ),
            ("{\"required\": [\"b\"]}", "`b`"),
            (
                "{\"properties\": {\"embedding\": {\"type\": \"boolean\"}}}",
                "vector property",
            ),
        ] {
            let e = Declared::parse(text, "embedding", None).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
