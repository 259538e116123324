//! Objects and arrays in Confluent's JSON Schema diff: properties (required, dependencies,
//! open and partially open content models) and items (tuples, additional items). Split from
//! `mod.rs`, which holds the walk and the scalar rules.

use serde_json::Value;

use super::{kind, Ctx, Diff, Kind};

impl<'a> Ctx<'a> {
    pub(super) fn compare_object<'b>(&mut self, o: &'b Value, u: &'b Value, path: &str)
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

    pub(super) fn compare_array<'b>(&mut self, o: &'b Value, u: &'b Value, path: &str)
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
