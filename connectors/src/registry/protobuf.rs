//! PROTOBUF: a `.proto` schema (text, or the base64 `FileDescriptorProto` some serializers
//! register) compiled by `protox`; the message the wire format's index path names gives the
//! columns, and its binary payload the JSON object the rest of the connector decodes (enums
//! by name, bytes as base64, 64-bit integers as numbers, unset fields without presence as
//! their default, as the reading application would see them).

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use prost_reflect::prost::Message;
use prost_reflect::prost_types::FileDescriptorProto;
use prost_reflect::{
    Cardinality, DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor,
    ReflectMessage, Value as Proto,
};
use protox::file::{File, FileResolver, GoogleFileResolver};
use serde_json::{Map, Number, Value};

use crate::declared::Declared;
use crate::record::FieldType;

/// The name the schema's own file gets in its pool.
const FILE: &str = "schema.proto";

/// One compiled schema.
#[derive(Debug)]
pub struct ProtoSchema {
    pool: DescriptorPool,
}

struct Resolver {
    schema: String,
    google: GoogleFileResolver,
}

impl FileResolver for Resolver {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        if name != FILE {
            return self.google.open_file(name);
        }
        match File::from_source(name, &self.schema) {
            Ok(f) => Ok(f),
            Err(text_err) => {
                let fd = base64::engine::general_purpose::STANDARD
                    .decode(self.schema.trim())
                    .ok()
                    .and_then(|b| FileDescriptorProto::decode(b.as_slice()).ok())
                    .ok_or(text_err)?;
                Ok(File::from_file_descriptor_proto(FileDescriptorProto {
                    name: Some(name.into()),
                    ..fd
                }))
            }
        }
    }
}

/// Compiles a schema without references (imports of `google/protobuf/*.proto` are built in).
pub fn parse(schema: &str) -> Result<ProtoSchema, String> {
    let mut compiler = protox::Compiler::with_file_resolver(Resolver {
        schema: schema.to_string(),
        google: GoogleFileResolver::new(),
    });
    compiler.include_imports(true);
    compiler
        .open_file(FILE)
        .map_err(|e| format!("the PROTOBUF schema does not compile: {e}"))?;
    Ok(ProtoSchema {
        pool: compiler.descriptor_pool(),
    })
}

impl ProtoSchema {
    /// The message at `path` (top-level index, then nested indexes), as the wire format names it.
    pub fn message(&self, path: &[i32]) -> Result<MessageDescriptor, String> {
        let missing = || format!("the schema has no message at index path {path:?}");
        let file = self.pool.get_file_by_name(FILE).ok_or_else(missing)?;
        let (first, rest) = path.split_first().ok_or_else(missing)?;
        let nth = |i: i32| usize::try_from(i).ok();
        let mut m = file.messages().nth(nth(*first).ok_or_else(missing)?);
        for &i in rest {
            m = m.and_then(|m| m.child_messages().nth(nth(i)?));
        }
        m.ok_or_else(missing)
    }
}

/// The column rule of a message: proto2 `required` fields are required; the rest may be
/// absent (proto3 scalars read as their default).
pub fn declared(
    m: &MessageDescriptor,
    vector_field: &str,
    id_field: Option<&str>,
) -> Result<Declared, String> {
    let mut fields = BTreeMap::new();
    let mut required = BTreeSet::new();
    for f in m.fields() {
        let name = f.name().to_string();
        if name == vector_field {
            let ok = match f.kind() {
                Kind::Float | Kind::Double => f.is_list(),
                Kind::Bytes => !f.is_list(),
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "the vector field `{name}` must be `repeated float`/`repeated double` or `bytes`"
                ));
            }
            continue;
        }
        if Some(name.as_str()) == id_field {
            continue;
        }
        if f.cardinality() == Cardinality::Required {
            required.insert(name.clone());
        }
        fields.insert(name, column_type(&f));
    }
    Ok(Declared {
        fields,
        required,
        // A message holds only its descriptor's fields (unknown ones are not read).
        closed: true,
        dimension: None,
    })
}

fn column_type(f: &FieldDescriptor) -> FieldType {
    if f.is_list() || f.is_map() {
        return FieldType::Json;
    }
    match f.kind() {
        Kind::Double | Kind::Float => FieldType::Float,
        Kind::Int32
        | Kind::Int64
        | Kind::Uint32
        | Kind::Uint64
        | Kind::Sint32
        | Kind::Sint64
        | Kind::Fixed32
        | Kind::Fixed64
        | Kind::Sfixed32
        | Kind::Sfixed64 => FieldType::Int,
        Kind::Bool => FieldType::Bool,
        Kind::String | Kind::Bytes | Kind::Enum(_) => FieldType::Text,
        Kind::Message(_) => FieldType::Json,
    }
}

/// One binary message of type `m` as JSON.
pub fn decode(m: MessageDescriptor, payload: &[u8]) -> Result<Value, String> {
    let msg = DynamicMessage::decode(m, payload)
        .map_err(|e| format!("not a PROTOBUF message of its schema: {e}"))?;
    Ok(Value::Object(object(&msg)))
}

fn object(msg: &DynamicMessage) -> Map<String, Value> {
    let mut out = Map::new();
    for f in msg.descriptor().fields() {
        if f.supports_presence() && !msg.has_field(&f) {
            continue;
        }
        let v = msg.get_field(&f);
        out.insert(f.name().to_string(), to_json(&f, &v));
    }
    out
}

fn to_json(f: &FieldDescriptor, v: &Proto) -> Value {
    match v {
        Proto::Bool(b) => Value::Bool(*b),
        Proto::I32(i) => Value::from(*i),
        Proto::I64(i) => Value::from(*i),
        Proto::U32(i) => Value::from(*i),
        Proto::U64(i) => Value::from(*i),
        Proto::F32(x) => Number::from_f64(f64::from(*x)).map_or(Value::Null, Value::Number),
        Proto::F64(x) => Number::from_f64(*x).map_or(Value::Null, Value::Number),
        Proto::String(s) => Value::String(s.clone()),
        Proto::Bytes(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        Proto::EnumNumber(n) => match f.kind() {
            Kind::Enum(e) => e
                .get_value(*n)
                .map_or(Value::from(*n), |v| Value::String(v.name().to_string())),
            _ => Value::from(*n),
        },
        Proto::Message(m) => Value::Object(object(m)),
        Proto::List(items) => Value::Array(items.iter().map(|x| to_json(f, x)).collect()),
        Proto::Map(entries) => {
            let value_field = match f.kind() {
                Kind::Message(entry) => entry.map_entry_value_field(),
                _ => f.clone(),
            };
            Value::Object(
                entries
                    .iter()
                    .map(|(k, x)| (map_key(k), to_json(&value_field, x)))
                    .collect(),
            )
        }
    }
}

fn map_key(k: &MapKey) -> String {
    match k {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(i) => i.to_string(),
        MapKey::I64(i) => i.to_string(),
        MapKey::U32(i) => i.to_string(),
        MapKey::U64(i) => i.to_string(),
        MapKey::String(s) => s.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub const PROTO: &str = r#"
        syntax = "proto3";
        package test;
        message Other { string x = 1; }
        message Doc {
            string doc_id = 1;
            repeated float embedding = 2;
            string title = 3;
            optional int64 year = 4;
            enum Kind { A = 0; B = 1; }
            Kind kind = 5;
            map<string, int32> counts = 6;
            message Inner { bool flag = 1; }
            Inner inner = 7;
        }
    "#;

    #[test]
    fn given_a_message_then_columns() {
        let s = parse(PROTO).unwrap();
        let m = s.message(&[1]).unwrap();
        assert_eq!(m.full_name(), "test.Doc");
        // Nested indexes count the descriptor's nested types, map entries included (as
        // Confluent's serializers do): CountsEntry is 0, Inner 1.
        assert_eq!(s.message(&[1, 1]).unwrap().full_name(), "test.Doc.Inner");
        assert!(s.message(&[2]).is_err());
        assert!(s.message(&[0, 5]).is_err());
        let d = declared(&m, "embedding", Some("doc_id")).unwrap();
        assert_eq!(
            d.fields,
            BTreeMap::from([
                ("counts".into(), FieldType::Json),
                ("inner".into(), FieldType::Json),
                ("kind".into(), FieldType::Text),
                ("title".into(), FieldType::Text),
                ("year".into(), FieldType::Int),
            ])
        );
        let e = declared(&s.message(&[0]).unwrap(), "x", None).unwrap_err();
        assert!(e.contains("vector field `x`"), "{e}");
        assert!(parse("message {").unwrap_err().contains("does not compile"));
    }

    #[test]
    fn given_a_payload_then_the_json_object() {
        let s = parse(PROTO).unwrap();
        let m = s.message(&[1]).unwrap();
        let mut msg = DynamicMessage::new(m.clone());
        msg.set_field_by_name("doc_id", Proto::String("d1".into()));
        msg.set_field_by_name(
            "embedding",
            Proto::List(vec![Proto::F32(0.5), Proto::F32(2.0)]),
        );
        msg.set_field_by_name("kind", Proto::EnumNumber(1));
        let bytes = msg.encode_to_vec();
        // Unset `year` (optional: has presence) is absent; unset `title` reads as "".
        assert_eq!(
            decode(m.clone(), &bytes).unwrap(),
            json!({"doc_id": "d1", "embedding": [0.5, 2.0], "title": "", "kind": "B", "counts": {}})
        );
        assert!(decode(m, &[0xff, 0xff]).is_err());
    }

    proptest::proptest! {
        /// Payload bytes from the network: a value or an error, never a panic.
        #[test]
        fn given_any_bytes_then_decoding_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let s = parse(PROTO).unwrap();
            let _ = decode(s.message(&[1]).unwrap(), &bytes);
        }
    }
}
