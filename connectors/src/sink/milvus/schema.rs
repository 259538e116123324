//! The Milvus collection's shape: how record fields map to Milvus fields and back, and the
//! columns of an upsert.

use milvus::v2::prelude::{DataType, FieldData, FieldSchema};
use serde_json::{Map, Value};

use super::milvus_error;
use super::names::ID_FIELD;
use crate::record::{FieldType, Schema};
use crate::sink::SinkError;

/// Milvus's dynamic field: a JSON object holding the fields the schema does not name.
const DYNAMIC_FIELD: &str = "$meta";
/// Milvus's upper bound for a VarChar's `max_length` (bytes). Ids and text fields get it, so
/// only values Milvus cannot store at all are refused (per record, before the write).
pub(super) const MAX_VARCHAR: usize = 65_535;

/// The Milvus type a field of type `t` gets in a collection the connector creates.
pub fn data_type(t: FieldType) -> DataType {
    match t {
        FieldType::Text => DataType::VarChar,
        FieldType::Int => DataType::Int64,
        FieldType::Float => DataType::Double,
        FieldType::Bool => DataType::Bool,
        FieldType::Json => DataType::Json,
    }
}

/// The field type a Milvus scalar field holds, for the types the connector can feed; None for
/// the others (arrays, geometry, vectors...): such fields are left alone.
pub fn field_type(t: DataType) -> Option<FieldType> {
    Some(match t {
        DataType::VarChar | DataType::Text => FieldType::Text,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => FieldType::Int,
        DataType::Float | DataType::Double => FieldType::Float,
        DataType::Bool => FieldType::Bool,
        DataType::Json => FieldType::Json,
        _ => return None,
    })
}

/// A Milvus filter-expression string literal: double-quoted with the escapes Milvus's parser
/// knows. (The SDK's id-based delete uses expression templates, which milvus-lite lacks.)
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The schema of a described collection, or why the connector cannot use it.
pub fn schema_of(
    collection: &str,
    vector_field: &str,
    fields: &[FieldSchema],
) -> Result<Schema, SinkError> {
    let c = collection;
    match fields.iter().find(|f| f.is_primary_key()) {
        Some(pk) if pk.get_name() == ID_FIELD && pk.get_data_type() == DataType::VarChar => {}
        Some(pk) => {
            return Err(SinkError::Schema(format!(
                "collection {c}: the primary key is `{}` of type {:?}, the connector needs a VarChar `{ID_FIELD}`",
                pk.get_name(),
                pk.get_data_type()
            )))
        }
        None => {
            return Err(SinkError::Schema(format!(
                "collection {c} has no primary key"
            )))
        }
    }
    let dimension = match fields.iter().find(|f| f.get_name() == vector_field) {
        Some(f) if f.get_data_type() == DataType::FloatVector => f.get_dimension() as usize,
        Some(f) => {
            return Err(SinkError::Schema(format!(
                "collection {c}: field {vector_field} is {:?}, the connector needs FloatVector",
                f.get_data_type()
            )))
        }
        None => {
            return Err(SinkError::Schema(format!(
                "collection {c} has no field {vector_field} (embedding_field)"
            )))
        }
    };
    let fields = fields
        .iter()
        .filter(|f| !f.is_primary_key() && !f.is_dynamic() && f.get_name() != vector_field)
        .filter(|f| f.get_name() != DYNAMIC_FIELD)
        .filter_map(|f| field_type(f.get_data_type()).map(|t| (f.get_name().to_string(), t)))
        .collect();
    Ok(Schema { dimension, fields })
}

/// Why Milvus could not store this document, if so: a string over VarChar's bound, an
/// integer beyond Int64, or a value of another type than its typed field (the runner checks
/// types first; this keeps a column from ever carrying a converted value).
pub fn unstorable(schema: &Schema, d: &crate::record::Doc) -> Option<String> {
    if d.id.len() > MAX_VARCHAR {
        return Some(format!(
            "id of {} bytes: Milvus VarChar holds at most {MAX_VARCHAR}",
            d.id.len()
        ));
    }
    if d.fields.contains_key(ID_FIELD) {
        // It would land in `$meta` next to the primary key of that name, which milvus-lite
        // takes for the primary key and Milvus refuses.
        return Some(format!(
            "field `{ID_FIELD}` collides with the primary key (set the sink's `id = \"{ID_FIELD}\"` to make it the id)"
        ));
    }
    d.fields.iter().find_map(|(k, v)| {
        let want = schema.fields.get(k);
        let got = FieldType::of(v)?;
        match v {
            Value::String(s) if s.len() > MAX_VARCHAR && want.is_some() => Some(format!(
                "field `{k}` of {} bytes: Milvus VarChar holds at most {MAX_VARCHAR}",
                s.len()
            )),
            Value::Number(n)
                if want == Some(&FieldType::Int)
                    && got == FieldType::Int
                    && n.as_i64().is_none() =>
            {
                Some(format!("field `{k}`: {n} is beyond Int64"))
            }
            _ => match want {
                Some(&want) if !want.accepts(got) => Some(format!(
                    "type conflict: field `{k}` is {} in the collection, {} in the record",
                    want.name(),
                    got.name()
                )),
                _ => None,
            },
        }
    })
}

/// The upsert's columns: ids, vectors, one column per typed field (nullable: a record without
/// the field stores null), and `$meta` with every other field.
pub fn columns(
    schema: &Schema,
    vector_field: &str,
    docs: &[&crate::record::Doc],
) -> Result<Vec<FieldData>, SinkError> {
    let mut out = vec![
        FieldData::varchar(ID_FIELD, docs.iter().map(|d| d.id.clone()).collect()),
        FieldData::float_vector(
            vector_field,
            docs.iter().map(|d| d.vector.clone()).collect(),
        ),
    ];
    for (name, &t) in &schema.fields {
        let present: Vec<bool> = docs.iter().map(|d| d.fields.contains_key(name)).collect();
        let values = docs.iter().filter_map(|d| d.fields.get(name));
        let data = match t {
            FieldType::Text => FieldData::varchar(
                name,
                values
                    .map(|v| v.as_str().unwrap_or_default().to_string())
                    .collect(),
            ),
            FieldType::Int => FieldData::int64(
                name,
                values.map(|v| v.as_i64().unwrap_or_default()).collect(),
            ),
            FieldType::Float => FieldData::double(
                name,
                values.map(|v| v.as_f64().unwrap_or_default()).collect(),
            ),
            FieldType::Bool => FieldData::boolean(
                name,
                values.map(|v| v.as_bool().unwrap_or_default()).collect(),
            ),
            FieldType::Json => FieldData::json(name, values.cloned().collect()),
        };
        out.push(
            FieldData::nullable(data, present)
                .map_err(|e| milvus_error(&format!("column {name}"), e))?,
        );
    }
    let dynamic: Vec<Value> = docs
        .iter()
        .map(|d| {
            let rest: Map<String, Value> = d
                .fields
                .iter()
                .filter(|(k, _)| !schema.fields.contains_key(*k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Value::Object(rest)
        })
        .collect();
    out.push(FieldData::json(DYNAMIC_FIELD, dynamic));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Doc;
    use serde_json::json;

    fn doc(id: &str, fields: Value) -> Doc {
        Doc {
            id: id.into(),
            vector: vec![0.5, 1.0],
            fields: fields.as_object().unwrap().clone(),
            tenant: None,
        }
    }

    fn pk() -> FieldSchema {
        FieldSchema::new()
            .name(ID_FIELD)
            .data_type(DataType::VarChar)
            .max_length(64)
            .primary_key(true)
    }

    fn vector(dim: u32) -> FieldSchema {
        FieldSchema::new()
            .name("emb")
            .data_type(DataType::FloatVector)
            .dimension(dim)
    }

    #[test]
    fn given_field_types_then_milvus_types_map_both_ways() {
        for t in [
            FieldType::Text,
            FieldType::Int,
            FieldType::Float,
            FieldType::Bool,
            FieldType::Json,
        ] {
            assert_eq!(field_type(data_type(t)), Some(t), "{t:?}");
        }
        // Narrower types of someone else's collection still take our values.
        assert_eq!(field_type(DataType::Int32), Some(FieldType::Int));
        assert_eq!(field_type(DataType::Float), Some(FieldType::Float));
        // Types we cannot feed are left alone.
        assert_eq!(field_type(DataType::Array), None);
        assert_eq!(field_type(DataType::FloatVector), None);
    }

    #[test]
    fn given_described_collection_then_schema_or_what_does_not_fit() {
        let fields = [
            pk(),
            vector(384),
            FieldSchema::new()
                .name("title")
                .data_type(DataType::VarChar),
            FieldSchema::new().name("n").data_type(DataType::Int64),
            FieldSchema::new().name("tags").data_type(DataType::Array),
        ];
        let s = schema_of("c", "emb", &fields).unwrap();
        assert_eq!(s.dimension, 384);
        assert_eq!(
            s.fields.into_iter().collect::<Vec<_>>(),
            vec![
                ("n".to_string(), FieldType::Int),
                ("title".to_string(), FieldType::Text)
            ]
        );

        let int_pk = FieldSchema::new()
            .name("pk")
            .data_type(DataType::Int64)
            .primary_key(true);
        let e = schema_of("c", "emb", &[int_pk, vector(3)]).unwrap_err();
        assert!(
            e.to_string()
                .contains("the primary key is `pk` of type Int64"),
            "{e}"
        );
        let e = schema_of("c", "emb", &[pk()]).unwrap_err();
        assert!(
            e.to_string().contains("no field emb (embedding_field)"),
            "{e}"
        );
        let binary = FieldSchema::new()
            .name("emb")
            .data_type(DataType::BinaryVector);
        let e = schema_of("c", "emb", &[pk(), binary]).unwrap_err();
        assert!(
            e.to_string().contains("the connector needs FloatVector"),
            "{e}"
        );
        assert!(matches!(e, SinkError::Schema(_)));
    }

    #[test]
    fn given_existing_collection_of_other_shape_then_mismatch_is_said() {
        let fields = [
            pk(),
            vector(768),
            FieldSchema::new().name("title").data_type(DataType::Int64),
        ];
        let have = schema_of("c", "emb", &fields).unwrap();
        let want = Schema::infer(&Doc {
            id: "x".into(),
            vector: vec![0.0; 384],
            fields: json!({"title": "a", "lang": "en"})
                .as_object()
                .unwrap()
                .clone(),
            tenant: None,
        });
        // Milvus collections are not closed: `lang` goes into the dynamic field.
        let d = crate::sink::mismatches(&have, &want, false).join("; ");
        assert_eq!(
            d,
            "dimension mismatch: the collection's vectors have 768 dimensions, the records 384; \
             type conflict: field `title` is integer in the collection, text in the records"
        );
    }

    /// A collection typing `title` as text and `n` as integer.
    fn title_and_n() -> Schema {
        Schema {
            dimension: 2,
            fields: [
                ("title".to_string(), FieldType::Text),
                ("n".to_string(), FieldType::Int),
            ]
            .into(),
        }
    }

    #[test]
    fn given_docs_then_columns_are_typed_nullable_and_the_rest_dynamic() {
        let schema = title_and_n();
        let a = doc("a", json!({"title": "x", "n": 1, "bad-name": true}));
        let b = doc("b", json!({"n": 2, "extra": {"k": [1]}}));
        let cols = columns(&schema, "emb", &[&a, &b]).unwrap();
        let names: Vec<&str> = cols.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["id", "emb", "n", "title", "$meta"]);
        assert_eq!(cols[2].valid_data(), Some(&[true, true][..]));
        assert_eq!(cols[3].valid_data(), Some(&[true, false][..]));
        match cols[3].inner() {
            FieldData::VarChar { values, .. } => assert_eq!(values, &["x".to_string()]),
            other => panic!("{other:?}"),
        }
        match &cols[4] {
            FieldData::Json { values, .. } => assert_eq!(
                values,
                &vec![json!({"bad-name": true}), json!({"extra": {"k": [1]}})]
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn given_values_milvus_cannot_hold_then_the_record_is_refused() {
        let schema = title_and_n();
        assert_eq!(unstorable(&schema, &doc("a", json!({"title": "x"}))), None);
        let long = "x".repeat(MAX_VARCHAR + 1);
        for (d, want) in [
            (
                doc("a", json!({"title": long})),
                "Milvus VarChar holds at most",
            ),
            (doc(&long, json!({})), "id of 65536 bytes"),
            (doc("a", json!({"n": u64::MAX})), "beyond Int64"),
            (
                doc("a", json!({"n": 2.5})),
                "type conflict: field `n` is integer in the collection, float in the record",
            ),
            (
                doc("a", json!({"title": 3})),
                "type conflict: field `title`",
            ),
            (
                doc("a", json!({"id": "own"})),
                "collides with the primary key",
            ),
        ] {
            let why = unstorable(&schema, &d).expect("refused");
            assert!(why.contains(want), "{why}");
        }
        // Untyped fields are free: they go into `$meta`.
        assert_eq!(unstorable(&schema, &doc("a", json!({"other": long}))), None);
    }

    #[test]
    fn given_strings_then_quoted_for_milvus_expressions() {
        assert_eq!(quote("a\"b\\c\nd"), r#""a\"b\\c\nd""#);
    }
}
