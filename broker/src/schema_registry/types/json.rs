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

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::Resolved;

#[derive(Debug)]
pub struct JsonSchema {
    pub canonical: String,
    pub root: Value,
    /// Referenced documents by the name the schema's `$ref`s use.
    pub refs: HashMap<String, Value>,
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

/// Confluent's `Difference.Type`s that this comparison reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Diff {
    TypeChanged,
    TypeExtended,
    TypeNarrowed,
    SchemaAdded,
    SchemaRemoved,
    IdChanged,
    TitleChanged,
    DescriptionChanged,
    DefaultChanged,
    MaxLengthAdded,
    MaxLengthRemoved,
    MaxLengthIncreased,
    MaxLengthDecreased,
    MinLengthAdded,
    MinLengthRemoved,
    MinLengthIncreased,
    MinLengthDecreased,
    PatternAdded,
    PatternRemoved,
    PatternChanged,
    MaximumAdded,
    MaximumRemoved,
    MaximumIncreased,
    MaximumDecreased,
    MinimumAdded,
    MinimumRemoved,
    MinimumIncreased,
    MinimumDecreased,
    ExclusiveMaximumAdded,
    ExclusiveMaximumRemoved,
    ExclusiveMaximumIncreased,
    ExclusiveMaximumDecreased,
    ExclusiveMinimumAdded,
    ExclusiveMinimumRemoved,
    ExclusiveMinimumIncreased,
    ExclusiveMinimumDecreased,
    MultipleOfAdded,
    MultipleOfRemoved,
    MultipleOfExpanded,
    MultipleOfReduced,
    MultipleOfChanged,
    RequiredAttributeAdded,
    RequiredAttributeWithDefaultAdded,
    RequiredAttributeRemoved,
    MaxPropertiesAdded,
    MaxPropertiesRemoved,
    MaxPropertiesIncreased,
    MaxPropertiesDecreased,
    MinPropertiesAdded,
    MinPropertiesRemoved,
    MinPropertiesIncreased,
    MinPropertiesDecreased,
    AdditionalPropertiesAdded,
    AdditionalPropertiesRemoved,
    AdditionalPropertiesExtended,
    AdditionalPropertiesNarrowed,
    PropertyWithEmptySchemaAddedToOpenContentModel,
    RequiredPropertyAddedToOpenContentModel,
    RequiredPropertyWithDefaultAddedToOpenContentModel,
    OptionalPropertyAddedToOpenContentModel,
    RequiredPropertyAddedToUnopenContentModel,
    RequiredPropertyWithDefaultAddedToUnopenContentModel,
    OptionalPropertyAddedToUnopenContentModel,
    PropertyRemovedFromOpenContentModel,
    PropertyWithFalseRemovedFromClosedContentModel,
    PropertyRemovedFromClosedContentModel,
    PropertyAddedIsCoveredByPartiallyOpenContentModel,
    PropertyAddedNotCoveredByPartiallyOpenContentModel,
    PropertyRemovedIsCoveredByPartiallyOpenContentModel,
    PropertyRemovedNotCoveredByPartiallyOpenContentModel,
    MaxItemsAdded,
    MaxItemsRemoved,
    MaxItemsIncreased,
    MaxItemsDecreased,
    MinItemsAdded,
    MinItemsRemoved,
    MinItemsIncreased,
    MinItemsDecreased,
    UniqueItemsAdded,
    UniqueItemsRemoved,
    ItemAddedToOpenContentModel,
    ItemAddedToClosedContentModel,
    ItemRemovedFromOpenContentModel,
    ItemRemovedFromClosedContentModel,
    EnumArrayExtended,
    EnumArrayNarrowed,
    EnumArrayChanged,
    CombinedTypeChanged,
    CombinedTypeExtended,
    ProductTypeExtended,
    ProductTypeNarrowed,
    SumTypeExtended,
    SumTypeNarrowed,
    CombinedTypeSubschemasChanged,
    NotTypeExtended,
    NotTypeNarrowed,
}

impl Diff {
    /// Confluent's `COMPATIBLE_CHANGES_STRICT` (its default).
    pub fn compatible(self) -> bool {
        use Diff::*;
        matches!(
            self,
            IdChanged
                | DescriptionChanged
                | TitleChanged
                | DefaultChanged
                | SchemaRemoved
                | TypeExtended
                | MaxLengthIncreased
                | MaxLengthRemoved
                | MinLengthDecreased
                | MinLengthRemoved
                | PatternRemoved
                | MaximumIncreased
                | MaximumRemoved
                | MinimumDecreased
                | MinimumRemoved
                | ExclusiveMaximumIncreased
                | ExclusiveMaximumRemoved
                | ExclusiveMinimumDecreased
                | ExclusiveMinimumRemoved
                | MultipleOfReduced
                | MultipleOfRemoved
                | RequiredAttributeWithDefaultAdded
                | RequiredAttributeRemoved
                | MaxPropertiesIncreased
                | MaxPropertiesRemoved
                | MinPropertiesDecreased
                | MinPropertiesRemoved
                | AdditionalPropertiesAdded
                | AdditionalPropertiesExtended
                | PropertyWithEmptySchemaAddedToOpenContentModel
                | RequiredPropertyWithDefaultAddedToUnopenContentModel
                | OptionalPropertyAddedToUnopenContentModel
                | PropertyWithFalseRemovedFromClosedContentModel
                | PropertyRemovedFromOpenContentModel
                | PropertyAddedIsCoveredByPartiallyOpenContentModel
                | PropertyRemovedIsCoveredByPartiallyOpenContentModel
                | MaxItemsIncreased
                | MaxItemsRemoved
                | MinItemsDecreased
                | MinItemsRemoved
                | UniqueItemsRemoved
                | ItemAddedToClosedContentModel
                | ItemRemovedFromOpenContentModel
                | EnumArrayExtended
                | CombinedTypeExtended
                | ProductTypeNarrowed
                | SumTypeExtended
                | NotTypeNarrowed
        )
    }

    /// Confluent's name (`TYPE_CHANGED`).
    pub fn name(self) -> String {
        let debug = format!("{self:?}");
        let mut out = String::new();
        for (i, c) in debug.chars().enumerate() {
            if c.is_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_uppercase());
        }
        out
    }
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

/// Every difference from `original` to `update`, with its path (`#/properties/a`).
pub fn differences(original: &JsonSchema, update: &JsonSchema) -> Vec<(Diff, String)> {
    let mut ctx = Ctx {
        original,
        update,
        diffs: Vec::new(),
        on_stack: HashSet::new(),
    };
    ctx.compare(Some(&original.root), Some(&update.root), "#");
    ctx.diffs
}

struct Ctx<'a> {
    original: &'a JsonSchema,
    update: &'a JsonSchema,
    diffs: Vec<(Diff, String)>,
    /// Pairs being compared (by address): meeting one again ends a `$ref` cycle.
    on_stack: HashSet<(usize, usize)>,
}

/// What a schema is, for comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Empty,
    False,
    Combined,
    Not,
    Enum,
    Const,
    Object,
    Array,
    String,
    Number,
    Boolean,
    Null,
}

fn kind(v: &Value) -> Kind {
    let o = match v {
        Value::Bool(true) => return Kind::Empty,
        Value::Bool(false) => return Kind::False,
        Value::Object(o) => o,
        _ => return Kind::Empty,
    };
    if ["allOf", "anyOf", "oneOf"]
        .iter()
        .any(|k| o.contains_key(*k))
    {
        return Kind::Combined;
    }
    match o.get("type") {
        Some(Value::Array(types)) if types.len() != 1 => return Kind::Combined,
        Some(Value::Array(types)) => return type_kind(types[0].as_str().unwrap_or("")),
        Some(Value::String(t)) => return type_kind(t),
        _ => {}
    }
    if o.contains_key("not") {
        return Kind::Not;
    }
    if o.contains_key("enum") {
        return Kind::Enum;
    }
    if o.contains_key("const") {
        return Kind::Const;
    }
    let has = |keys: &[&str]| keys.iter().any(|k| o.contains_key(*k));
    if has(&[
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "dependencies",
    ]) {
        Kind::Object
    } else if has(&[
        "items",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "prefixItems",
    ]) {
        Kind::Array
    } else if has(&["minLength", "maxLength", "pattern", "format"]) {
        Kind::String
    } else if has(&[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    ]) {
        Kind::Number
    } else {
        Kind::Empty
    }
}

fn type_kind(t: &str) -> Kind {
    match t {
        "object" => Kind::Object,
        "array" => Kind::Array,
        "string" => Kind::String,
        "number" | "integer" => Kind::Number,
        "boolean" => Kind::Boolean,
        "null" => Kind::Null,
        _ => Kind::Empty,
    }
}

fn is_integer(v: &Value) -> bool {
    match v.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(t)) => t.len() == 1 && t[0] == "integer",
        _ => false,
    }
}

/// The subschemas of a combination and its criterion (`type` arrays are `anyOf`).
fn combined(v: &Value) -> (&'static str, Vec<Value>) {
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(subs)) = v.get(key) {
            return (key, subs.clone());
        }
    }
    if let Some(Value::Array(types)) = v.get("type") {
        let mut subs = Vec::new();
        for t in types {
            let mut one = v.as_object().cloned().unwrap_or_default();
            one.insert("type".into(), t.clone());
            subs.push(Value::Object(one));
        }
        return ("anyOf", subs);
    }
    ("allOf", Vec::new())
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

impl<'a> Ctx<'a> {
    fn add(&mut self, d: Diff, path: &str) {
        self.diffs.push((d, path.to_string()));
    }

    /// Follows `$ref`s (bounded) to the schema they name, in the original or the update.
    fn deref<'b>(&self, v: &'b Value, in_original: bool) -> &'b Value
    where
        'a: 'b,
    {
        let doc = if in_original {
            self.original
        } else {
            self.update
        };
        let mut cur = v;
        for _ in 0..32 {
            let Some(r) = cur.get("$ref").and_then(Value::as_str) else {
                return cur;
            };
            let (base, pointer) = r.split_once('#').unwrap_or((r, ""));
            let target_doc = if base.is_empty() {
                &doc.root
            } else {
                match doc.refs.get(base) {
                    Some(d) => d,
                    None => return cur,
                }
            };
            match target_doc.pointer(pointer) {
                Some(t) => cur = t,
                None => return cur,
            }
        }
        cur
    }

    fn sub(&self) -> Ctx<'a> {
        Ctx {
            original: self.original,
            update: self.update,
            diffs: Vec::new(),
            on_stack: self.on_stack.clone(),
        }
    }

    fn compatible(&self) -> bool {
        self.diffs.iter().all(|(d, _)| d.compatible())
    }

    fn compare<'b>(&mut self, original: Option<&'b Value>, update: Option<&'b Value>, path: &str)
    where
        'a: 'b,
    {
        let (o, u) = match (original, update) {
            (None, None) => return,
            (None, Some(_)) => return self.add(Diff::SchemaAdded, path),
            (Some(_), None) => return self.add(Diff::SchemaRemoved, path),
            (Some(o), Some(u)) => (self.deref(o, true), self.deref(u, false)),
        };
        let pair = (o as *const Value as usize, u as *const Value as usize);
        if !self.on_stack.insert(pair) {
            return;
        }
        self.compare_types(o, u, path);
        self.on_stack.remove(&pair);
    }

    /// `compare` run in a fresh context: (compatible, its differences).
    fn trial<'b>(&self, o: &'b Value, u: &'b Value, path: &str) -> (bool, Vec<(Diff, String)>)
    where
        'a: 'b,
    {
        let mut sub = self.sub();
        sub.compare(Some(o), Some(u), path);
        (sub.compatible(), sub.diffs)
    }

    fn compare_types<'b>(&mut self, o: &'b Value, u: &'b Value, path: &str)
    where
        'a: 'b,
    {
        let (ko, ku) = (kind(o), kind(u));
        // A union on one side only: the special cases of Confluent's SchemaDiff.compareTypes.
        if ko != Kind::Combined && ku == Kind::Combined {
            let (criterion, subs) = combined(u);
            if subs.len() == 1 || criterion != "allOf" {
                for s in &subs {
                    let (ok, diffs) = self.trial(o, s, path);
                    if ok {
                        self.diffs.extend(diffs);
                        if subs.len() > 1 {
                            self.add(Diff::SumTypeExtended, path);
                        }
                        return;
                    }
                }
            }
        } else if ko == Kind::Combined && ku != Kind::Combined {
            let (criterion, subs) = combined(o);
            if subs.len() == 1 || criterion == "allOf" {
                for s in &subs {
                    let (ok, diffs) = self.trial(s, u, path);
                    if ok {
                        self.diffs.extend(diffs);
                        if subs.len() > 1 {
                            self.add(Diff::ProductTypeNarrowed, path);
                        }
                        return;
                    }
                }
            }
        }
        if ko != ku {
            // Anything reads into an empty (true) schema; nothing was written under false.
            if ko == Kind::False || ku == Kind::Empty {
                return;
            }
            return self.add(Diff::TypeChanged, path);
        }
        for (key, d) in [
            ("$id", Diff::IdChanged),
            ("title", Diff::TitleChanged),
            ("description", Diff::DescriptionChanged),
            ("default", Diff::DefaultChanged),
        ] {
            if o.get(key) != u.get(key) {
                self.add(d, path);
            }
        }
        match ko {
            Kind::String => self.compare_string(o, u, path),
            Kind::Number => self.compare_number(o, u, path),
            Kind::Enum => self.compare_enum(o, u, path),
            Kind::Const if o.get("const") != u.get("const") => {
                self.add(Diff::EnumArrayChanged, path);
            }
            Kind::Combined => self.compare_combined(o, u, path),
            Kind::Not => {
                // `not` reverses the direction: the update's excluded set must shrink.
                let (Some(no), Some(nu)) = (o.get("not"), u.get("not")) else {
                    return;
                };
                let (ok, _) = self.trial(nu, no, &format!("{path}/not"));
                self.add(
                    if ok {
                        Diff::NotTypeNarrowed
                    } else {
                        Diff::NotTypeExtended
                    },
                    path,
                );
            }
            Kind::Object => self.compare_object(o, u, path),
            Kind::Array => self.compare_array(o, u, path),
            _ => {}
        }
    }

    /// A numeric keyword: added, removed, increased or decreased (in that order in `diffs`).
    fn bound(&mut self, o: &Value, u: &Value, key: &str, path: &str, diffs: [Diff; 4]) {
        let [added, removed, increased, decreased] = diffs;
        let p = format!("{path}/{key}");
        match (num(o, key), num(u, key)) {
            (None, Some(_)) => self.add(added, &p),
            (Some(_), None) => self.add(removed, &p),
            (Some(a), Some(b)) if b > a => self.add(increased, &p),
            (Some(a), Some(b)) if b < a => self.add(decreased, &p),
            _ => {}
        }
    }

    fn compare_string(&mut self, o: &Value, u: &Value, path: &str) {
        use Diff::*;
        self.bound(
            o,
            u,
            "maxLength",
            path,
            [
                MaxLengthAdded,
                MaxLengthRemoved,
                MaxLengthIncreased,
                MaxLengthDecreased,
            ],
        );
        self.bound(
            o,
            u,
            "minLength",
            path,
            [
                MinLengthAdded,
                MinLengthRemoved,
                MinLengthIncreased,
                MinLengthDecreased,
            ],
        );
        let p = format!("{path}/pattern");
        match (o.get("pattern"), u.get("pattern")) {
            (None, Some(_)) => self.add(PatternAdded, &p),
            (Some(_), None) => self.add(PatternRemoved, &p),
            (Some(a), Some(b)) if a != b => self.add(PatternChanged, &p),
            _ => {}
        }
    }

    fn compare_number(&mut self, o: &Value, u: &Value, path: &str) {
        use Diff::*;
        match (is_integer(o), is_integer(u)) {
            (true, false) => self.add(TypeExtended, path),
            (false, true) => self.add(TypeNarrowed, path),
            _ => {}
        }
        self.bound(
            o,
            u,
            "maximum",
            path,
            [
                MaximumAdded,
                MaximumRemoved,
                MaximumIncreased,
                MaximumDecreased,
            ],
        );
        self.bound(
            o,
            u,
            "minimum",
            path,
            [
                MinimumAdded,
                MinimumRemoved,
                MinimumIncreased,
                MinimumDecreased,
            ],
        );
        self.bound(
            o,
            u,
            "exclusiveMaximum",
            path,
            [
                ExclusiveMaximumAdded,
                ExclusiveMaximumRemoved,
                ExclusiveMaximumIncreased,
                ExclusiveMaximumDecreased,
            ],
        );
        self.bound(
            o,
            u,
            "exclusiveMinimum",
            path,
            [
                ExclusiveMinimumAdded,
                ExclusiveMinimumRemoved,
                ExclusiveMinimumIncreased,
                ExclusiveMinimumDecreased,
            ],
        );
        let p = format!("{path}/multipleOf");
        match (num(o, "multipleOf"), num(u, "multipleOf")) {
            (None, Some(_)) => self.add(MultipleOfAdded, &p),
            (Some(_), None) => self.add(MultipleOfRemoved, &p),
            (Some(a), Some(b)) if a != b => {
                let divides = |x: f64, y: f64| y != 0.0 && (x / y).fract() == 0.0;
                if divides(a, b) {
                    self.add(MultipleOfReduced, &p)
                } else if divides(b, a) {
                    self.add(MultipleOfExpanded, &p)
                } else {
                    self.add(MultipleOfChanged, &p)
                }
            }
            _ => {}
        }
    }

    fn compare_enum(&mut self, o: &Value, u: &Value, path: &str) {
        let empty = Vec::new();
        let a = o.get("enum").and_then(Value::as_array).unwrap_or(&empty);
        let b = u.get("enum").and_then(Value::as_array).unwrap_or(&empty);
        if a == b {
            return;
        }
        let p = format!("{path}/enum");
        if a.iter().all(|x| b.contains(x)) {
            self.add(Diff::EnumArrayExtended, &p)
        } else if b.iter().all(|x| a.contains(x)) {
            self.add(Diff::EnumArrayNarrowed, &p)
        } else {
            self.add(Diff::EnumArrayChanged, &p)
        }
    }

    /// Confluent's `CombinedSchemaDiff`: the criterion, the number of subschemas, and a
    /// matching of compatible (original, update) subschema pairs that must cover the smaller
    /// side (greedy here; Confluent computes a maximum-cardinality matching).
    fn compare_combined<'b>(&mut self, o: &'b Value, u: &'b Value, path: &str)
    where
        'a: 'b,
    {
        let (co, mut so) = combined(o);
        let (cu, mut su) = combined(u);
        so.dedup();
        su.dedup();
        if co != cu {
            let extended = cu == "anyOf"
                || (so.len() == 1 && su.len() == 1)
                || (so.len() == 1 && cu == "oneOf")
                || (su.len() == 1 && co == "allOf");
            if !extended {
                return self.add(Diff::CombinedTypeChanged, path);
            }
            self.add(Diff::CombinedTypeExtended, path);
        }
        if so.len() < su.len() {
            self.add(
                if cu == "allOf" {
                    Diff::ProductTypeExtended
                } else {
                    Diff::SumTypeExtended
                },
                path,
            );
        } else if so.len() > su.len() {
            self.add(
                if co == "allOf" {
                    Diff::ProductTypeNarrowed
                } else {
                    Diff::SumTypeNarrowed
                },
                path,
            );
        }
        let mut used = vec![false; su.len()];
        let mut matched = 0;
        for (i, a) in so.iter().enumerate() {
            let p = format!("{path}/{co}/{i}");
            for (j, b) in su.iter().enumerate() {
                if used[j] {
                    continue;
                }
                let (ok, diffs) = self.trial(a, b, &p);
                if ok {
                    used[j] = true;
                    matched += 1;
                    self.diffs.extend(diffs);
                    break;
                }
            }
        }
        if matched < so.len().min(su.len()) {
            self.add(Diff::CombinedTypeSubschemasChanged, path);
        }
    }

    fn compare_object<'b>(&mut self, o: &'b Value, u: &'b Value, path: &str)
    where
        'a: 'b,
    {
        use Diff::*;
        let empty = serde_json::Map::new();
        let po = o
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let pu = u
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required = |v: &Value, k: &str| {
            v.get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|x| x == k))
        };
        let has_default = |v: &Value| v.get("default").is_some();
        for (k, us) in pu {
            if po.contains_key(k) {
                let p = format!("{path}/required/{k}");
                match (required(o, k), required(u, k)) {
                    (true, false) => self.add(RequiredAttributeRemoved, &p),
                    (false, true) if has_default(us) => {
                        self.add(RequiredAttributeWithDefaultAdded, &p)
                    }
                    (false, true) => self.add(RequiredAttributeAdded, &p),
                    _ => {}
                }
            }
        }
        let mut keys: Vec<&String> = po.keys().chain(pu.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let p = format!("{path}/properties/{k}");
            match (po.get(k), pu.get(k)) {
                (Some(os), None) => {
                    if open_content_model(u) {
                        self.add(PropertyRemovedFromOpenContentModel, &p);
                    } else if let Some(partial) = partially_open(u, k) {
                        let (ok, diffs) = self.trial(os, partial, &p);
                        self.diffs.extend(diffs);
                        self.add(
                            if ok {
                                PropertyRemovedIsCoveredByPartiallyOpenContentModel
                            } else {
                                PropertyRemovedNotCoveredByPartiallyOpenContentModel
                            },
                            &p,
                        );
                    } else if kind(self.deref(os, true)) == Kind::False {
                        self.add(PropertyWithFalseRemovedFromClosedContentModel, &p);
                    } else {
                        self.add(PropertyRemovedFromClosedContentModel, &p);
                    }
                }
                (None, Some(us)) => {
                    if open_content_model(o) {
                        if kind(self.deref(us, false)) == Kind::Empty {
                            self.add(PropertyWithEmptySchemaAddedToOpenContentModel, &p);
                        } else if required(u, k) {
                            self.add(
                                if has_default(us) {
                                    RequiredPropertyWithDefaultAddedToOpenContentModel
                                } else {
                                    RequiredPropertyAddedToOpenContentModel
                                },
                                &p,
                            );
                        } else {
                            self.add(OptionalPropertyAddedToOpenContentModel, &p);
                        }
                    } else {
                        if let Some(partial) = partially_open(o, k) {
                            let (ok, diffs) = self.trial(partial, us, &p);
                            self.diffs.extend(diffs);
                            self.add(
                                if ok {
                                    PropertyAddedIsCoveredByPartiallyOpenContentModel
                                } else {
                                    PropertyAddedNotCoveredByPartiallyOpenContentModel
                                },
                                &p,
                            );
                        }
                        if required(u, k) {
                            self.add(
                                if has_default(us) {
                                    RequiredPropertyWithDefaultAddedToUnopenContentModel
                                } else {
                                    RequiredPropertyAddedToUnopenContentModel
                                },
                                &p,
                            );
                        } else {
                            self.add(OptionalPropertyAddedToUnopenContentModel, &p);
                        }
                    }
                }
                (Some(os), Some(us)) => self.compare(Some(os), Some(us), &p),
                (None, None) => {}
            }
        }
        let p = format!("{path}/additionalProperties");
        let permits = |v: &Value| v.get("additionalProperties") != Some(&Value::Bool(false));
        let schema_of = |v: &'b Value| v.get("additionalProperties").filter(|a| a.is_object());
        if permits(o) != permits(u) {
            self.add(
                if permits(u) {
                    AdditionalPropertiesAdded
                } else {
                    AdditionalPropertiesRemoved
                },
                &p,
            );
        } else {
            match (schema_of(o), schema_of(u)) {
                (None, Some(_)) => self.add(AdditionalPropertiesNarrowed, &p),
                (Some(_), None) => self.add(AdditionalPropertiesExtended, &p),
                (Some(a), Some(b)) => self.compare(Some(a), Some(b), &p),
                (None, None) => {}
            }
        }
        self.bound(
            o,
            u,
            "maxProperties",
            path,
            [
                MaxPropertiesAdded,
                MaxPropertiesRemoved,
                MaxPropertiesIncreased,
                MaxPropertiesDecreased,
            ],
        );
        self.bound(
            o,
            u,
            "minProperties",
            path,
            [
                MinPropertiesAdded,
                MinPropertiesRemoved,
                MinPropertiesIncreased,
                MinPropertiesDecreased,
            ],
        );
    }

    fn compare_array<'b>(&mut self, o: &'b Value, u: &'b Value, path: &str)
    where
        'a: 'b,
    {
        use Diff::*;
        self.bound(
            o,
            u,
            "maxItems",
            path,
            [
                MaxItemsAdded,
                MaxItemsRemoved,
                MaxItemsIncreased,
                MaxItemsDecreased,
            ],
        );
        self.bound(
            o,
            u,
            "minItems",
            path,
            [
                MinItemsAdded,
                MinItemsRemoved,
                MinItemsIncreased,
                MinItemsDecreased,
            ],
        );
        let unique = |v: &Value| v.get("uniqueItems") == Some(&Value::Bool(true));
        match (unique(o), unique(u)) {
            (false, true) => self.add(UniqueItemsAdded, &format!("{path}/uniqueItems")),
            (true, false) => self.add(UniqueItemsRemoved, &format!("{path}/uniqueItems")),
            _ => {}
        }
        let tuple = |v: &'b Value| {
            v.get("prefixItems")
                .or_else(|| v.get("items").filter(|i| i.is_array()))
                .and_then(Value::as_array)
        };
        match (tuple(o), tuple(u)) {
            (Some(a), Some(b)) => {
                let open = |v: &Value| {
                    let extra = if v.get("prefixItems").is_some() {
                        v.get("items")
                    } else {
                        v.get("additionalItems")
                    };
                    extra != Some(&Value::Bool(false))
                };
                for i in 0..a.len().max(b.len()) {
                    let p = format!("{path}/items/{i}");
                    match (a.get(i), b.get(i)) {
                        (Some(x), Some(y)) => self.compare(Some(x), Some(y), &p),
                        (Some(_), None) => self.add(
                            if open(u) {
                                ItemRemovedFromOpenContentModel
                            } else {
                                ItemRemovedFromClosedContentModel
                            },
                            &p,
                        ),
                        (None, Some(_)) => self.add(
                            if open(o) {
                                ItemAddedToOpenContentModel
                            } else {
                                ItemAddedToClosedContentModel
                            },
                            &p,
                        ),
                        (None, None) => {}
                    }
                }
            }
            (None, None) => {
                let items = |v: &'b Value| v.get("items").filter(|i| !i.is_array());
                let p = format!("{path}/items");
                match (items(o), items(u)) {
                    (Some(a), Some(b)) => self.compare(Some(a), Some(b), &p),
                    (None, Some(b)) if kind(b) != Kind::Empty => self.add(TypeNarrowed, &p),
                    (Some(a), None) if kind(a) != Kind::Empty => self.add(TypeExtended, &p),
                    _ => {}
                }
            }
            _ => self.add(TypeChanged, &format!("{path}/items")),
        }
    }
}

/// Confluent's `isOpenContentModel`: no `additionalProperties` (or `true`), no pattern
/// properties, and `unevaluatedProperties` absent or `true`.
fn open_content_model(v: &Value) -> bool {
    match v.get("additionalProperties") {
        None | Some(Value::Bool(true)) => {}
        _ => return false,
    }
    if v.get("patternProperties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty())
    {
        return false;
    }
    matches!(
        v.get("unevaluatedProperties"),
        None | Some(Value::Bool(true))
    )
}

/// The schema a partially open content model gives property `key`, if any.
fn partially_open<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    if let Some(pp) = v.get("patternProperties").and_then(Value::as_object) {
        for (pattern, schema) in pp {
            if regex_lite_match(pattern, key) {
                return Some(schema);
            }
        }
    }
    if let Some(a) = v.get("additionalProperties").filter(|a| a.is_object()) {
        return Some(a);
    }
    v.get("unevaluatedProperties").filter(|a| a.is_object())
}

/// `patternProperties` patterns are ECMA regexes; one that `regex` cannot compile matches
/// nothing.
fn regex_lite_match(pattern: &str, key: &str) -> bool {
    regex::Regex::new(pattern).is_ok_and(|r| r.is_match(key))
}

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
