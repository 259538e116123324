//! AVRO: parsing with `apache-avro`, the canonical string, reader/writer compatibility.
//!
//! References are named types (records, enums, fixed) defined by other subjects: they are
//! parsed first, and the schema may use their full names. The canonical string keeps them
//! as names (as Confluent's `AvroSchema.canonicalString()` does); the compatibility check
//! works on the schema with every reference inlined.

use apache_avro::schema_compatibility::{Compatibility, SchemaCompatibility};
use apache_avro::Schema;

use super::Resolved;

#[derive(Debug)]
pub struct AvroSchema {
    pub canonical: String,
    /// The schema with every named reference inlined (what resolution compares).
    pub resolved: Schema,
}

/// Every referenced schema string, dependencies before dependents, each once.
fn flatten_refs<'a>(refs: &'a [Resolved], out: &mut Vec<&'a str>) {
    for r in refs {
        flatten_refs(&r.references, out);
        if !out.contains(&r.schema.as_str()) {
            out.push(&r.schema);
        }
    }
}

pub fn parse(
    schema: &str,
    references: &[Resolved],
    _normalize: bool,
) -> Result<AvroSchema, String> {
    let mut list = Vec::new();
    flatten_refs(references, &mut list);
    let (parsed, named) = if list.is_empty() {
        (
            Schema::parse_str(schema).map_err(|e| e.to_string())?,
            Vec::new(),
        )
    } else {
        Schema::parse_str_with_list(schema, list.iter().copied()).map_err(|e| e.to_string())?
    };
    let canonical = serde_json::to_string(&parsed).map_err(|e| e.to_string())?;
    let mut resolved = parsed;
    if !named.is_empty() {
        resolved.denormalize(&named).map_err(|e| e.to_string())?;
    }
    Ok(AvroSchema {
        canonical,
        resolved,
    })
}

/// Why `reader` cannot read what `writer` wrote, in Confluent's message shape.
pub fn read_errors(reader: &AvroSchema, writer: &AvroSchema) -> Vec<String> {
    match SchemaCompatibility::can_read(&writer.resolved, &reader.resolved) {
        Ok(Compatibility::Full) => Vec::new(),
        // Partial: some writer enum symbols or union branches have no match in the reader, so
        // reading some data fails. Avro's Java checker (Confluent's) calls that incompatible.
        Ok(Compatibility::Partial) => vec![
            "{errorType:'MISSING_UNION_BRANCH_OR_ENUM_SYMBOL', description:'The new schema cannot read every enum symbol or union branch of the old schema'}".to_string(),
        ],
        Err(e) => vec![format!(
            "{{errorType:'{}', description:'{}'}}",
            error_type(&e),
            e.to_string().replace('\'', "\"")
        )],
    }
}

/// Avro Java's `SchemaIncompatibilityType` closest to the crate's error.
fn error_type(e: &apache_avro::error::CompatibilityError) -> &'static str {
    use apache_avro::error::CompatibilityError as E;
    match e {
        E::WrongType { .. } | E::TypeExpected { .. } | E::Inconclusive(_) => "TYPE_MISMATCH",
        E::FieldTypeMismatch(..) => "TYPE_MISMATCH",
        E::MissingDefaultValue(_) => "READER_FIELD_MISSING_DEFAULT_VALUE",
        E::MissingSymbols => "MISSING_ENUM_SYMBOLS",
        E::MissingUnionElements | E::SchemaMismatchAllUnionElements => "MISSING_UNION_BRANCH",
        E::FixedMismatch => "FIXED_SIZE_MISMATCH",
        E::DecimalMismatch { .. } => "TYPE_MISMATCH",
        E::NameMismatch { .. } => "NAME_MISMATCH",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> AvroSchema {
        parse(s, &[], false).unwrap()
    }

    const V1: &str =
        r#"{"type":"record","name":"User","namespace":"t","fields":[{"name":"id","type":"long"}]}"#;

    #[test]
    fn given_equivalent_spellings_when_parsing_then_same_canonical() {
        assert_eq!(
            p(r#"{"type": "string"}"#).canonical,
            p(r#""string""#).canonical
        );
        let spaced = "{ \"type\" : \"record\", \"name\": \"User\", \"namespace\": \"t\",\n \"fields\": [ {\"name\": \"id\", \"type\": \"long\"} ] }";
        assert_eq!(p(spaced).canonical, p(V1).canonical);
    }

    #[test]
    fn given_bad_schemas_when_parsing_then_error() {
        for bad in [
            "",
            "{",
            "\"nosuchtype\"",
            r#"{"type":"record","name":"x"}"#,
            "[1]",
        ] {
            assert!(parse(bad, &[], false).is_err(), "{bad}");
        }
    }

    #[test]
    fn given_field_added_with_default_when_checking_backward_then_compatible() {
        let v2 = p(
            r#"{"type":"record","name":"User","namespace":"t","fields":[{"name":"id","type":"long"},{"name":"email","type":"string","default":""}]}"#,
        );
        assert!(v2.read_errors_with(&p(V1)).is_empty());
        // and forward: old readers ignore the new field
        assert!(p(V1).read_errors_with(&v2).is_empty());
    }

    #[test]
    fn given_field_added_without_default_when_checking_backward_then_incompatible() {
        let v2 = p(
            r#"{"type":"record","name":"User","namespace":"t","fields":[{"name":"id","type":"long"},{"name":"email","type":"string"}]}"#,
        );
        let errs = v2.read_errors_with(&p(V1));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].contains("READER_FIELD_MISSING_DEFAULT_VALUE"),
            "{errs:?}"
        );
    }

    #[test]
    fn given_type_promotion_when_checking_then_only_widening_reads() {
        let int = p(r#"{"type":"record","name":"R","fields":[{"name":"n","type":"int"}]}"#);
        let long = p(r#"{"type":"record","name":"R","fields":[{"name":"n","type":"long"}]}"#);
        assert!(long.read_errors_with(&int).is_empty());
        assert!(!int.read_errors_with(&long).is_empty());
    }

    #[test]
    fn given_enum_symbol_removed_when_checking_backward_then_incompatible() {
        let e2 = p(r#"{"type":"enum","name":"E","symbols":["A","B"]}"#);
        let e1 = p(r#"{"type":"enum","name":"E","symbols":["A"]}"#);
        assert!(!e1.read_errors_with(&e2).is_empty());
        assert!(e2.read_errors_with(&e1).is_empty());
    }

    #[test]
    fn given_reference_when_parsing_then_name_kept_and_compat_inlines_it() {
        let address = Resolved {
            name: "t.Address".into(),
            subject: "address".into(),
            version: 1,
            schema: r#"{"type":"record","name":"Address","namespace":"t","fields":[{"name":"city","type":"string"}]}"#.into(),
            references: vec![],
        };
        let user = r#"{"type":"record","name":"User","namespace":"t","fields":[{"name":"home","type":"t.Address"}]}"#;
        let parsed = parse(user, std::slice::from_ref(&address), false).unwrap();
        assert!(
            parsed.canonical.contains("\"type\":\"t.Address\""),
            "{}",
            parsed.canonical
        );
        assert!(
            parse(user, &[], false).is_err(),
            "unresolvable name must not parse"
        );
        assert!(parsed.read_errors_with(&parsed).is_empty());
    }

    impl AvroSchema {
        fn read_errors_with(&self, writer: &AvroSchema) -> Vec<String> {
            read_errors(self, writer)
        }
    }
}
