//! A record schema declared as JSON Schema ([`Declared`]): the rule a sink's collection is
//! made from and its records are checked against, whether it comes from the TOML
//! (`schema_mapping = "json_schema"`) or from the schema registry (Avro and Protobuf schemas
//! convert to one, crate::registry). Below both the config (which checks a TOML schema at
//! load) and the mapping (which applies it), so neither imports the other's layer.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::record::{Doc, FieldType, RecordError, Schema};

/// A record schema given as JSON Schema: the object's properties with their types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    /// Scalar properties (not the vector, not the id field) and their column types.
    pub fields: BTreeMap<String, FieldType>,
    /// Properties a record must carry (non-null).
    pub required: BTreeSet<String>,
    /// `additionalProperties: false`: a field the schema does not declare is refused.
    pub closed: bool,
    /// From the vector property's `minItems` = `maxItems`, when it says.
    pub dimension: Option<usize>,
}

impl Declared {
    /// Parses a JSON Schema of the record object. Supported: `properties` with a `type`
    /// each (one type, optionally with "null"), `required`, `additionalProperties` (boolean).
    pub fn parse(
        text: &str,
        vector_field: &str,
        id_field: Option<&str>,
    ) -> Result<Declared, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        if !root.is_object() {
            return Err("the schema is not a JSON object".into());
        }
        if let Some(t) = root.get("type") {
            if t != "object" {
                return Err(format!("the record schema's type is {t}, not \"object\""));
            }
        }
        let props = match root.get("properties") {
            None => serde_json::Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => return Err("`properties` is not an object".into()),
        };
        let closed = match root.get("additionalProperties") {
            None | Some(Value::Bool(true)) | Some(Value::Object(_)) => false,
            Some(Value::Bool(false)) => true,
            Some(other) => return Err(format!("`additionalProperties` is {other}, not a boolean")),
        };
        let mut required = BTreeSet::new();
        match root.get("required") {
            None => {}
            Some(Value::Array(names)) => {
                for n in names {
                    let n = n
                        .as_str()
                        .ok_or_else(|| format!("`required` holds {n}, not a name"))?;
                    required.insert(n.to_string());
                }
            }
            Some(_) => return Err("`required` is not an array".into()),
        }
        let mut fields = BTreeMap::new();
        let mut dimension = None;
        for (name, schema) in &props {
            let ty = property_type(name, schema)?;
            if name == vector_field {
                if !matches!(ty, FieldType::Json | FieldType::Text) {
                    return Err(format!(
                        "the vector property `{name}` must be an array (of numbers) or a string (base64)"
                    ));
                }
                let (min, max) = (schema.get("minItems"), schema.get("maxItems"));
                if let (Some(a), Some(b)) =
                    (min.and_then(Value::as_u64), max.and_then(Value::as_u64))
                {
                    if a == b && a > 0 {
                        dimension = Some(a as usize);
                    }
                }
                continue;
            }
            if Some(name.as_str()) == id_field {
                continue;
            }
            fields.insert(name.clone(), ty);
        }
        for r in &required {
            if r != vector_field && Some(r.as_str()) != id_field && !fields.contains_key(r) {
                return Err(format!(
                    "`required` names `{r}`, which `properties` does not declare"
                ));
            }
        }
        required.remove(vector_field);
        if let Some(id) = id_field {
            required.remove(id);
        }
        Ok(Declared {
            fields,
            required,
            closed,
            dimension,
        })
    }

    /// Whether `doc` follows the schema: every required field there, every declared field of
    /// its declared type (integers are numbers), nothing undeclared if the schema is closed.
    pub fn check(&self, doc: &Doc) -> Result<(), RecordError> {
        for r in &self.required {
            if !doc.fields.contains_key(r) {
                return Err(RecordError::SchemaViolation(format!(
                    "field `{r}` is required by the schema"
                )));
            }
        }
        for (k, v) in &doc.fields {
            let Some(got) = FieldType::of(v) else {
                continue;
            };
            match self.fields.get(k) {
                Some(&want) if !want.accepts(got) => {
                    return Err(RecordError::SchemaViolation(format!(
                        "field `{k}` is {}, the schema says {}",
                        got.name(),
                        want.name()
                    )))
                }
                Some(_) => {}
                None if self.closed => {
                    return Err(RecordError::SchemaViolation(format!(
                        "field `{k}` is not in the schema (additionalProperties is false)"
                    )))
                }
                None => {}
            }
        }
        Ok(())
    }

    /// Every declared field, plus `doc`'s undeclared ones (inferred), at the declared
    /// dimension or `doc`'s.
    pub fn schema_for(&self, doc: &Doc) -> Schema {
        let mut fields = self.fields.clone();
        for (k, v) in &doc.fields {
            if let (false, Some(t)) = (fields.contains_key(k), FieldType::of(v)) {
                fields.insert(k.clone(), t);
            }
        }
        Schema {
            dimension: self.dimension.unwrap_or(doc.vector.len()),
            fields,
        }
    }
}

/// The column type of one property schema.
fn property_type(name: &str, schema: &Value) -> Result<FieldType, String> {
    if schema.get("$ref").is_some() {
        return Err(format!(
            "property `{name}`: $ref is not supported; inline the type"
        ));
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return Err(format!("property `{name}` has no `type`")),
    };
    let non_null: Vec<&str> = types.into_iter().filter(|t| *t != "null").collect();
    let [t] = non_null[..] else {
        return Err(format!(
            "property `{name}`: one type (besides \"null\") is needed, it has {non_null:?}"
        ));
    };
    Ok(match t {
        "string" => FieldType::Text,
        "integer" => FieldType::Int,
        "number" => FieldType::Float,
        "boolean" => FieldType::Bool,
        "object" | "array" => FieldType::Json,
        other => return Err(format!("property `{name}`: unknown type \"{other}\"")),
    })
}
