//! AVRO: a record schema's fields as columns, and a binary datum as the JSON object the rest of
//! the connector decodes (unions unwrapped, bytes as base64, enums by symbol, logical types by
//! their underlying number or string).

use std::collections::{BTreeMap, BTreeSet};

use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::schema::UnionSchema;
use apache_avro::types::Value as Avro;
use apache_avro::Schema;
use base64::Engine;
use serde_json::{Map, Number, Value};

use crate::declared::Declared;
use crate::record::FieldType;

/// The writer schema of one id.
pub fn parse(text: &str) -> Result<Schema, String> {
    Schema::parse_str(text).map_err(|e| format!("the AVRO schema does not parse: {e}"))
}

/// The column rule of a record schema. Fields of a non-union type are required; `[null, T]`
/// is an optional T; a union of several non-null types has no single column type.
pub fn declared(
    schema: &Schema,
    vector_field: &str,
    id_field: Option<&str>,
) -> Result<Declared, String> {
    let Schema::Record(rec) = schema else {
        return Err("the AVRO schema is not a record".into());
    };
    let mut fields = BTreeMap::new();
    let mut required = BTreeSet::new();
    for f in &rec.fields {
        let (inner, nullable) = match &f.schema {
            Schema::Union(u) => match non_null(u).as_slice() {
                [] => continue, // always null: nothing to store
                [one] => (*one, true),
                _ => {
                    return Err(format!(
                        "field `{}`: a union of several non-null types has no column type",
                        f.name
                    ))
                }
            },
            other => (other, false),
        };
        if f.name == vector_field {
            let ok = match inner {
                Schema::Array(a) => matches!(*a.items, Schema::Float | Schema::Double),
                Schema::Bytes | Schema::Fixed(_) => true,
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "the vector field `{}` must be an array of float/double or bytes",
                    f.name
                ));
            }
            continue;
        }
        if Some(f.name.as_str()) == id_field {
            continue;
        }
        let Some(ty) = column_type(inner) else {
            continue;
        };
        if !nullable {
            required.insert(f.name.clone());
        }
        fields.insert(f.name.clone(), ty);
    }
    Ok(Declared {
        fields,
        required,
        // A datum holds exactly its schema's fields.
        closed: true,
        dimension: None,
    })
}

fn non_null(u: &UnionSchema) -> Vec<&Schema> {
    u.variants()
        .iter()
        .filter(|s| !matches!(s, Schema::Null))
        .collect()
}

fn column_type(s: &Schema) -> Option<FieldType> {
    Some(match s {
        Schema::Null => return None,
        Schema::Boolean => FieldType::Bool,
        Schema::Int
        | Schema::Long
        | Schema::Date
        | Schema::TimeMillis
        | Schema::TimeMicros
        | Schema::TimestampMillis
        | Schema::TimestampMicros
        | Schema::TimestampNanos
        | Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => FieldType::Int,
        Schema::Float | Schema::Double => FieldType::Float,
        Schema::String
        | Schema::Bytes
        | Schema::Fixed(_)
        | Schema::Enum(_)
        | Schema::Uuid(_)
        | Schema::Decimal(_)
        | Schema::BigDecimal => FieldType::Text,
        Schema::Array(_)
        | Schema::Map(_)
        | Schema::Record(_)
        | Schema::Union(_)
        | Schema::Duration(_)
        | Schema::Ref { .. } => FieldType::Json,
    })
}

/// One binary datum (the whole payload: trailing bytes are an error) as JSON.
pub fn decode(schema: &Schema, mut payload: &[u8]) -> Result<Value, String> {
    let reader = GenericDatumReader::builder(schema)
        .build()
        .map_err(|e| format!("the AVRO schema cannot read: {e}"))?;
    let v = reader
        .read_value(&mut payload)
        .map_err(|e| format!("not an AVRO datum of its schema: {e}"))?;
    if !payload.is_empty() {
        return Err(format!("{} bytes after the AVRO datum", payload.len()));
    }
    // apache-avro reads a string or bytes cut short by the end of the payload as a null
    // instead of failing; the datum then no longer matches its schema.
    if !v.validate(schema) {
        return Err("not an AVRO datum of its schema: it ends inside a value".into());
    }
    Ok(to_json(v))
}

fn b64(b: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(b))
}

fn float(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

fn to_json(v: Avro) -> Value {
    match v {
        Avro::Null => Value::Null,
        Avro::Boolean(b) => Value::Bool(b),
        Avro::Int(i) | Avro::Date(i) | Avro::TimeMillis(i) => Value::from(i),
        Avro::Long(i)
        | Avro::TimeMicros(i)
        | Avro::TimestampMillis(i)
        | Avro::TimestampMicros(i)
        | Avro::TimestampNanos(i)
        | Avro::LocalTimestampMillis(i)
        | Avro::LocalTimestampMicros(i)
        | Avro::LocalTimestampNanos(i) => Value::from(i),
        Avro::Float(f) => float(f64::from(f)),
        Avro::Double(f) => float(f),
        Avro::Bytes(b) | Avro::Fixed(_, b) => b64(&b),
        Avro::String(s) | Avro::Enum(_, s) => Value::String(s),
        Avro::Uuid(u) => Value::String(u.to_string()),
        Avro::Union(_, inner) => to_json(*inner),
        Avro::Array(items) => Value::Array(items.into_iter().map(to_json).collect()),
        Avro::Map(m) => Value::Object(m.into_iter().map(|(k, v)| (k, to_json(v))).collect()),
        Avro::Record(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k, to_json(v)))
                .collect::<Map<_, _>>(),
        ),
        Avro::Decimal(d) => {
            let bytes: Vec<u8> = d.try_into().unwrap_or_default();
            b64(&bytes)
        }
        Avro::BigDecimal(d) => Value::String(d.to_string()),
        Avro::Duration(d) => {
            let bytes: [u8; 12] = d.into();
            b64(&bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apache_avro::types::Record;
    use serde_json::json;

    pub const V1: &str = r#"{"type": "record", "name": "Doc", "fields": [
        {"name": "doc_id", "type": "string"},
        {"name": "embedding", "type": {"type": "array", "items": "float"}},
        {"name": "title", "type": "string"},
        {"name": "year", "type": ["null", "int"], "default": null},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}}
    ]}"#;

    #[test]
    fn given_a_record_schema_then_columns_and_required() {
        let s = parse(V1).unwrap();
        let d = declared(&s, "embedding", Some("doc_id")).unwrap();
        assert_eq!(
            d.fields,
            BTreeMap::from([
                ("kind".into(), FieldType::Text),
                ("tags".into(), FieldType::Json),
                ("title".into(), FieldType::Text),
                ("year".into(), FieldType::Int),
            ])
        );
        assert_eq!(
            d.required,
            BTreeSet::from(["kind".to_string(), "tags".into(), "title".into()])
        );
        for (bad, want) in [
            (r#""string""#, "not a record"),
            (
                r#"{"type":"record","name":"R","fields":[{"name":"embedding","type":"string"}]}"#,
                "vector field",
            ),
            (
                r#"{"type":"record","name":"R","fields":[{"name":"a","type":["int","string"]}]}"#,
                "several non-null",
            ),
        ] {
            let e = declared(&parse(bad).unwrap(), "embedding", None).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn given_a_datum_then_the_json_object() {
        let s = parse(V1).unwrap();
        let mut r = Record::new(&s).unwrap();
        r.put("doc_id", "d1");
        r.put(
            "embedding",
            Avro::Array(vec![Avro::Float(0.5), Avro::Float(-1.0)]),
        );
        r.put("title", "one");
        r.put("year", Avro::Union(1, Box::new(Avro::Int(2024))));
        r.put("tags", Avro::Array(vec![Avro::String("x".into())]));
        r.put("kind", Avro::Enum(1, "B".into()));
        #[allow(deprecated)]
        let bytes = apache_avro::to_avro_datum(&s, r).unwrap();
        assert_eq!(
            decode(&s, &bytes).unwrap(),
            json!({"doc_id": "d1", "embedding": [0.5, -1.0], "title": "one", "year": 2024, "tags": ["x"], "kind": "B"})
        );
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode(&s, &long).unwrap_err().contains("1 bytes after"));
        assert!(decode(&s, &bytes[..3]).is_err());
        // Cut inside a last string's bytes: apache-avro alone reads it as null.
        let last = parse(r#"{"type":"record","name":"T","fields":[{"name":"t","type":"string"}]}"#)
            .unwrap();
        assert_eq!(decode(&last, &[4, b'o', b'k']).unwrap(), json!({"t": "ok"}));
        let cut = decode(&last, &[4, b'o']).unwrap_err();
        assert!(cut.contains("ends inside a value"), "{cut}");
    }

    proptest::proptest! {
        /// Payload bytes from the network: a value or an error, never a panic.
        #[test]
        fn given_any_bytes_then_decoding_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let s = parse(V1).unwrap();
            let _ = decode(&s, &bytes);
        }
    }
}
