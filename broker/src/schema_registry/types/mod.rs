//! The three schema types (Confluent's `SchemaProvider`s): parsing a schema string with its
//! resolved references into a canonical string (what the registry stores and compares), and
//! the compatibility check between two parsed schemas of one type.
//!
//! - AVRO: `apache-avro` parses; the canonical string is the crate's JSON rendering (compact,
//!   `{"type":"string"}` becomes `"string"`); compatibility is Avro's reader/writer resolution.
//! - PROTOBUF: `protox` parses `.proto` text (or the base64 `FileDescriptorProto` that
//!   confluent-kafka-python sends) and compiles it with its references; the canonical string
//!   is the `.proto` text printed from the descriptor; compatibility is Confluent's
//!   `protobuf.diff` rules.
//! - JSON: JSON Schema drafts 4, 6, 7, 2019-09 and 2020-12 (checked against its meta-schema by
//!   `jsonschema`); the canonical string is the compact JSON with the key order kept;
//!   compatibility is Confluent's `json.diff` rules.

pub mod avro;
pub mod json;
mod json_diff;
pub mod protobuf;
mod protobuf_print;

use std::fmt;

/// A schema type, as the API spells it (`schemaType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaType {
    Avro,
    Protobuf,
    Json,
}

impl SchemaType {
    pub const ALL: [SchemaType; 3] = [SchemaType::Json, SchemaType::Protobuf, SchemaType::Avro];

    pub fn parse(s: &str) -> Option<SchemaType> {
        match s {
            "AVRO" => Some(SchemaType::Avro),
            "PROTOBUF" => Some(SchemaType::Protobuf),
            "JSON" => Some(SchemaType::Json),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Protobuf => "PROTOBUF",
            SchemaType::Json => "JSON",
        }
    }
}

impl fmt::Display for SchemaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reference with its target looked up: `name` is how the referring schema names it (an
/// Avro full name, a `.proto` import path, a JSON `$ref` URL), `schema` the target's stored
/// (canonical) string, `references` the target's own references, resolved the same way.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub name: String,
    pub subject: String,
    pub version: i32,
    pub schema: String,
    pub references: Vec<Resolved>,
}

/// A schema that parsed: its canonical string and what its compatibility check needs.
#[derive(Debug)]
pub enum Parsed {
    Avro(avro::AvroSchema),
    Protobuf(protobuf::ProtoSchema),
    Json(json::JsonSchema),
}

impl Parsed {
    pub fn schema_type(&self) -> SchemaType {
        match self {
            Parsed::Avro(_) => SchemaType::Avro,
            Parsed::Protobuf(_) => SchemaType::Protobuf,
            Parsed::Json(_) => SchemaType::Json,
        }
    }

    pub fn canonical(&self) -> &str {
        match self {
            Parsed::Avro(s) => &s.canonical,
            Parsed::Protobuf(s) => &s.canonical,
            Parsed::Json(s) => &s.canonical,
        }
    }

    /// Why a reader with schema `self` cannot read data written with `writer` (empty: it
    /// can). This is Confluent's `isBackwardCompatible(previous)` with `writer` = previous.
    pub fn read_errors(&self, writer: &Parsed) -> Vec<String> {
        match (self, writer) {
            (Parsed::Avro(r), Parsed::Avro(w)) => avro::read_errors(r, w),
            (Parsed::Protobuf(r), Parsed::Protobuf(w)) => protobuf::read_errors(r, w),
            (Parsed::Json(r), Parsed::Json(w)) => json::read_errors(r, w),
            (r, w) => vec![format!(
                "{{errorType:'TYPE_MISMATCH', description:'Schema type {} cannot be compared with {}'}}",
                r.schema_type(),
                w.schema_type()
            )],
        }
    }
}

/// Parses `schema` of `kind` with its resolved references. The error is the detail of
/// Confluent's 42201 message.
pub fn parse(
    kind: SchemaType,
    schema: &str,
    references: &[Resolved],
    normalize: bool,
) -> Result<Parsed, String> {
    match kind {
        SchemaType::Avro => avro::parse(schema, references, normalize).map(Parsed::Avro),
        SchemaType::Protobuf => {
            protobuf::parse(schema, references, normalize).map(Parsed::Protobuf)
        }
        SchemaType::Json => json::parse(schema, references, normalize).map(Parsed::Json),
    }
}

/// Confluent's name of a difference type from its Rust variant name: `TypeChanged` →
/// `TYPE_CHANGED` (the JSON and Protobuf diffs both report them so).
fn confluent_name(variant: &str) -> String {
    let mut out = String::new();
    for (i, c) in variant.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fragments schemas are made of, so generated strings get past the first token often.
    fn schemaish() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let token = prop_oneof![
            Just("{".to_string()),
            Just("}".to_string()),
            Just("[".to_string()),
            Just("]".to_string()),
            Just(",".to_string()),
            Just(":".to_string()),
            Just("\"type\"".to_string()),
            Just("\"record\"".to_string()),
            Just("\"name\"".to_string()),
            Just("\"fields\"".to_string()),
            Just("\"string\"".to_string()),
            Just("\"$ref\"".to_string()),
            Just("\"#\"".to_string()),
            Just("message M {".to_string()),
            Just("syntax = \"proto3\";".to_string()),
            Just("string a = 1;".to_string()),
            Just("oneof o {".to_string()),
            Just("import \"x.proto\";".to_string()),
            "[a-z0-9 =;.\"]{0,6}".prop_map(|s| s),
        ];
        proptest::collection::vec(token, 0..24).prop_map(|v| v.concat())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        #[test]
        fn any_schema_text_parses_or_errors_and_canonical_is_stable(text in schemaish()) {
            for kind in SchemaType::ALL {
                if let Ok(parsed) = parse(kind, &text, &[], false) {
                    let again = parse(kind, parsed.canonical(), &[], false)
                        .unwrap_or_else(|e| panic!("{kind} canonical does not parse: {e}\n{}", parsed.canonical()));
                    proptest::prop_assert_eq!(again.canonical(), parsed.canonical());
                    proptest::prop_assert!(parsed.read_errors(&again).is_empty());
                }
            }
        }
    }
}
