//! JSON Schema: validity against the draft's meta-schema (`jsonschema`), the canonical string,
//! and Confluent's compatibility rules (`io.confluent.kafka.schemaregistry.json.diff`), which
//! compare an original (the writer's, older) schema with an update (the reader's, newer):
//! every difference has a type, and the update can read the original's data when all of them
//! are in Confluent's strict `COMPATIBLE_CHANGES` set.
//!
//! Confluent diffs the everit object model; this works on the JSON values with the same
//! classification: a schema is empty (`true`, `{}`), false, a combination (`allOf`, `anyOf`,
//! `oneOf`, or a `type` array), `not`, `enum`, `const`, or typed (object, array, string,
//! number/integer, boolean, null; the type inferred from its keywords when `type` is absent).
//! `$ref`s are followed (local JSON pointers, and references to other subjects by name);
//! a pair of schemas already being compared counts as compatible, which ends cycles.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::Resolved;

#[derive(Debug)]
pub struct JsonSchema {
    pub canonical: String,
    pub root: Value,
    /// Referenced documents by the name the schema's `$ref`s use.
    pub refs: HashMap<String, Value>,
    /// The compiled validator, built on first use by deep validation at produce.
    validator: OnceLock<Result<jsonschema::Validator, String>>,
}

impl JsonSchema {
    /// Why `doc` is not valid under this schema (None: it is).
    pub fn violation(&self, doc: &Value) -> Option<String> {
        let validator = self.validator.get_or_init(|| {
            jsonschema::options()
                .with_retriever(References(Arc::new(self.refs.clone())))
                .build(&self.root)
                .map_err(|e| format!("the schema does not compile: {e}"))
        });
        match validator {
            Ok(v) => v.validate(doc).err().map(|e| {
                let at = e.instance_path().to_string();
                format!("{e} at {}", if at.is_empty() { "/" } else { &at })
            }),
            Err(e) => Some(e.clone()),
        }
    }
}

/// `$ref`s to other subjects' schemas: Confluent's references name them (`other.json`), and
/// a relative `$ref` resolves against the validator's default base, so the name is the URI's
/// last path segments. Nothing is fetched from the network.
struct References(Arc<HashMap<String, Value>>);

impl jsonschema::Retrieve for References {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let path = uri.path().as_str().trim_start_matches('/');
        self.0
            .iter()
            .find(|(name, _)| path == name.as_str() || path.ends_with(&format!("/{name}")))
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("no reference named {path}").into())
    }
}

const KNOWN_DRAFTS: &[&str] = &[
    "http://json-schema.org/draft-04/schema",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-07/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
];

pub fn parse(
    schema: &str,
    references: &[Resolved],
    _normalize: bool,
) -> Result<JsonSchema, String> {
    let root: Value = serde_json::from_str(schema).map_err(|e| e.to_string())?;
    check_meta(&root)?;
    let mut refs = HashMap::new();
    collect_refs(references, &mut refs)?;
    Ok(JsonSchema {
        canonical: minify(schema),
        root,
        refs,
        validator: OnceLock::new(),
    })
}

fn check_meta(root: &Value) -> Result<(), String> {
    if !(root.is_object() || root.is_boolean()) {
        return Err("a JSON schema must be an object or a boolean".into());
    }
    let declared = root.get("$schema").and_then(Value::as_str);
    let known = declared.is_none_or(|d| {
        let d = d.trim_end_matches('#');
        KNOWN_DRAFTS.contains(&d)
    });
    if known {
        jsonschema::meta::validate(root).map_err(|e| e.to_string())
    } else {
        // A custom meta-schema: Confluent's parser validates the keywords it knows.
        let mut copy = root.clone();
        if let Some(o) = copy.as_object_mut() {
            o.remove("$schema");
        }
        jsonschema::meta::validate(&copy).map_err(|e| e.to_string())
    }
}

fn collect_refs(references: &[Resolved], out: &mut HashMap<String, Value>) -> Result<(), String> {
    for r in references {
        let v: Value =
            serde_json::from_str(&r.schema).map_err(|e| format!("reference {}: {e}", r.name))?;
        out.insert(r.name.clone(), v);
        collect_refs(&r.references, out)?;
    }
    Ok(())
}

/// The JSON text without insignificant whitespace, keys in their order (Jackson's compact
/// output of the parsed tree, which Confluent stores). `text` is valid JSON.
pub fn minify(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

/// Why `reader` cannot read documents valid under `writer`.
pub fn read_errors(reader: &JsonSchema, writer: &JsonSchema) -> Vec<String> {
    differences(writer, reader)
        .into_iter()
        .filter(|(d, _)| !d.compatible())
        .map(|(d, path)| {
            format!(
                "{{errorType:\"{}\", description:\"Found incompatible change at path '{}'\"}}",
                d.name(),
                if path.is_empty() { "#/" } else { &path }
            )
        })
        .collect()
}

pub use super::json_diff::{differences, Diff};

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> JsonSchema {
        parse(s, &[], false).unwrap_or_else(|e| panic!("{e}: {s}"))
    }

    fn errors(new: &str, old: &str) -> Vec<String> {
        read_errors(&p(new), &p(old))
    }

    const OPEN: &str = r#"{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id"]}"#;
    const CLOSED: &str = r#"{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id"],"additionalProperties":false}"#;

    #[test]
    fn given_json_when_parsing_then_compact_with_key_order_and_meta_checked() {
        let s = p("{ \"type\" : \"object\",\n \"title\": \"a b\" }");
        assert_eq!(s.canonical, r#"{"type":"object","title":"a b"}"#);
        for bad in [
            "{",
            "12",
            r#"{"type": 12}"#,
            r#"{"minLength": -1}"#,
            r#"{"$schema":"http://json-schema.org/draft-07/schema#","required":"x"}"#,
        ] {
            assert!(parse(bad, &[], false).is_err(), "{bad}");
        }
        for draft in KNOWN_DRAFTS {
            p(&format!(r#"{{"$schema":"{draft}#","type":"string"}}"#));
        }
    }

    #[test]
    fn given_closed_content_model_when_adding_optional_property_then_compatible() {
        let new = CLOSED.replace(
            r#""name":{"type":"string"}"#,
            r#""name":{"type":"string"},"email":{"type":"string"}"#,
        );
        assert!(
            errors(&new, CLOSED).is_empty(),
            "{:?}",
            errors(&new, CLOSED)
        );
    }

    #[test]
    fn given_open_content_model_when_adding_property_then_incompatible_under_strict() {
        let new = OPEN.replace(
            r#""name":{"type":"string"}"#,
            r#""name":{"type":"string"},"email":{"type":"string"}"#,
        );
        let errs = errors(&new, OPEN);
        assert!(
            errs.iter()
                .any(|e| e.contains("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")),
            "{errs:?}"
        );
    }

    #[test]
    fn given_changes_then_confluents_classification() {
        for (old, new, compatible) in [
            (r#"{"type":"string"}"#, r#"{"type":"integer"}"#, false),
            (r#"{"type":"integer"}"#, r#"{"type":"number"}"#, true),
            (r#"{"type":"number"}"#, r#"{"type":"integer"}"#, false),
            (
                r#"{"type":"string","maxLength":5}"#,
                r#"{"type":"string","maxLength":9}"#,
                true,
            ),
            (
                r#"{"type":"string","maxLength":9}"#,
                r#"{"type":"string","maxLength":5}"#,
                false,
            ),
            (
                r#"{"type":"string"}"#,
                r#"{"type":"string","pattern":"^a"}"#,
                false,
            ),
            (r#"{"enum":["a","b"]}"#, r#"{"enum":["a","b","c"]}"#, true),
            (r#"{"enum":["a","b"]}"#, r#"{"enum":["a"]}"#, false),
            (
                r#"{"type":"string"}"#,
                r#"{"oneOf":[{"type":"string"},{"type":"integer"}]}"#,
                true,
            ),
            (
                r#"{"oneOf":[{"type":"string"},{"type":"integer"}]}"#,
                r#"{"type":"string"}"#,
                false,
            ),
            (
                r#"{"type":"array","items":{"type":"string"}}"#,
                r#"{"type":"array","items":{"type":"integer"}}"#,
                false,
            ),
            (
                r#"{"type":"array","items":{"type":"integer"}}"#,
                r#"{"type":"array","items":{"type":"number"}}"#,
                true,
            ),
            (
                OPEN,
                &OPEN.replace(r#""required":["id"]"#, r#""required":["id","name"]"#),
                false,
            ),
            (
                &OPEN.replace(r#""required":["id"]"#, r#""required":["id","name"]"#),
                OPEN,
                true,
            ),
            (r#"{"type":"string"}"#, "true", true),
            (
                r#"{"type":"string","description":"a"}"#,
                r#"{"type":"string","description":"b"}"#,
                true,
            ),
        ] {
            let errs = errors(new, old);
            assert_eq!(errs.is_empty(), compatible, "{old} -> {new}: {errs:?}");
        }
    }

    #[test]
    fn given_recursive_refs_when_comparing_then_terminates() {
        let tree = r##"{"$defs":{"node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}"##;
        assert!(errors(tree, tree).is_empty());
        let self_ref = r##"{"$ref":"#"}"##;
        let _ = errors(self_ref, self_ref);
    }

    #[test]
    fn given_external_reference_then_resolved_by_name() {
        let address = Resolved {
            name: "address.json".into(),
            subject: "address".into(),
            version: 1,
            schema: r#"{"type":"object","properties":{"city":{"type":"string"}}}"#.into(),
            references: vec![],
        };
        let user = r#"{"type":"object","properties":{"home":{"$ref":"address.json"}}}"#;
        let a = parse(user, std::slice::from_ref(&address), false).unwrap();
        let changed = Resolved {
            schema: r#"{"type":"object","properties":{"city":{"type":"integer"}}}"#.into(),
            ..address
        };
        let b = parse(user, &[changed], false).unwrap();
        let errs = read_errors(&b, &a);
        assert!(
            errs.iter()
                .any(|e| e.contains("TYPE_CHANGED") && e.contains("city")),
            "{errs:?}"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_json_text_parses_or_errors_without_panic(s in ".{0,200}") {
            let _ = parse(&s, &[], false);
        }

        #[test]
        fn minify_keeps_json_equal(v in proptest_json()) {
            let pretty = serde_json::to_string_pretty(&v).unwrap();
            let back: Value = serde_json::from_str(&minify(&pretty)).unwrap();
            proptest::prop_assert_eq!(back, v);
        }
    }

    fn proptest_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(Value::from),
            "[ a-z\"\\\\\n]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z ]{0,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
