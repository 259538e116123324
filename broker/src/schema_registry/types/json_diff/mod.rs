//! Confluent's JSON Schema compatibility rules (`io.confluent.kafka.schemaregistry.json.diff`)
//! on JSON values: the differences from an original (older) schema to an update (newer),
//! each of one of Confluent's `Difference.Type`s; `Diff::compatible` is Confluent's strict
//! `COMPATIBLE_CHANGES` set. See `json.rs` for how schemas are classified.

use std::collections::HashSet;

use serde_json::Value;

use super::json::JsonSchema;

mod containers;

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
        super::confluent_name(&format!("{self:?}"))
    }
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
}
