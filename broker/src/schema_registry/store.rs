//! The registry's state: what replaying `_schemas` in offset order gives, as Confluent's
//! `KafkaStoreMessageHandler` + `InMemoryCache` build it. `apply` is the only way it changes;
//! the read side answers the REST queries. Pure: no I/O, no clock.
//!
//! - A SCHEMA record puts (subject, version) → value (a soft delete is the same value with
//!   `deleted: true`); its tombstone removes it (a hard delete). Ids: the largest id seen is
//!   kept, the next registration takes the one after it (Confluent's
//!   `IncrementalIdGenerator`); an id names the schema of every key that carries it.
//! - DELETE_SUBJECT soft-deletes the subject's versions up to its `version`; CLEAR_SUBJECT
//!   forgets the subject's versions.
//! - CONFIG and MODE put or (tombstone) remove the global or a subject's setting.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::records::{
    ConfigValue, ModeValue, RegistryKey, RegistryValue, SchemaReference, SchemaValue,
};

/// One stored version of a subject.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub value: SchemaValue,
    /// Timestamp of the record that wrote it (`ts` in answers).
    pub ts: i64,
}

/// The content that makes two registrations the same schema (Confluent's MD5 over the
/// schema string, references, metadata and rule set), with the type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContentKey(String);

impl ContentKey {
    pub fn of(v: &SchemaValue) -> ContentKey {
        ContentKey(
            serde_json::json!([
                v.schema_type,
                v.schema,
                v.references,
                v.metadata,
                v.rule_set
            ])
            .to_string(),
        )
    }
}

#[derive(Debug, Default)]
pub struct Store {
    versions: BTreeMap<(String, i32), Version>,
    /// id → the keys currently carrying it.
    by_id: HashMap<i32, BTreeSet<(String, i32)>>,
    /// content → id, for every id with a key.
    by_content: HashMap<ContentKey, i32>,
    max_id: i32,
    configs: HashMap<Option<String>, ConfigValue>,
    modes: HashMap<Option<String>, ModeValue>,
    /// Offset of the next `_schemas` record to apply.
    pub next_offset: i64,
}

impl Store {
    /// Applies the record at `offset` (records below `next_offset` were applied already and
    /// are skipped, so a replay after a write is harmless).
    pub fn apply(&mut self, offset: i64, ts: i64, key: &RegistryKey, value: Option<RegistryValue>) {
        if offset < self.next_offset {
            return;
        }
        self.next_offset = offset + 1;
        match (key, value) {
            (RegistryKey::Schema { subject, version }, Some(RegistryValue::Schema(mut v))) => {
                // The key is the truth (Confluent looks values up by key).
                v.subject = subject.clone();
                v.version = *version;
                self.max_id = self.max_id.max(v.id);
                self.remove_version(subject, *version);
                let k = (subject.clone(), *version);
                self.by_id.entry(v.id).or_default().insert(k.clone());
                self.by_content.entry(ContentKey::of(&v)).or_insert(v.id);
                self.versions.insert(k, Version { value: v, ts });
            }
            (RegistryKey::Schema { subject, version }, None) => {
                self.remove_version(subject, *version);
            }
            (RegistryKey::DeleteSubject { subject }, Some(RegistryValue::DeleteSubject(d))) => {
                for ((s, v), entry) in self.versions.range_mut(subject_range(subject)) {
                    debug_assert_eq!(s, subject);
                    if *v <= d.version {
                        entry.value.deleted = true;
                    }
                }
            }
            (RegistryKey::ClearSubject { subject }, Some(RegistryValue::ClearSubject(_))) => {
                let keys: Vec<i32> = self
                    .versions
                    .range(subject_range(subject))
                    .map(|((_, v), _)| *v)
                    .collect();
                for v in keys {
                    self.remove_version(subject, v);
                }
            }
            (RegistryKey::Config { subject }, Some(RegistryValue::Config(c))) => {
                self.configs.insert(subject.clone(), c);
            }
            (RegistryKey::Config { subject }, None) => {
                self.configs.remove(subject);
            }
            (RegistryKey::Mode { subject }, Some(RegistryValue::Mode(m))) => {
                self.modes.insert(subject.clone(), m);
            }
            (RegistryKey::Mode { subject }, None) => {
                self.modes.remove(subject);
            }
            _ => {}
        }
    }

    fn remove_version(&mut self, subject: &str, version: i32) {
        let k = (subject.to_string(), version);
        let Some(old) = self.versions.remove(&k) else {
            return;
        };
        let id = old.value.id;
        if let Some(keys) = self.by_id.get_mut(&id) {
            keys.remove(&k);
            if keys.is_empty() {
                self.by_id.remove(&id);
                self.by_content.retain(|_, v| *v != id);
            }
        }
    }

    pub fn max_id(&self) -> i32 {
        self.max_id
    }

    /// The versions of `subject`, ascending, soft-deleted ones included.
    pub fn versions(&self, subject: &str) -> impl Iterator<Item = &Version> {
        self.versions.range(subject_range(subject)).map(|(_, v)| v)
    }

    pub fn version(&self, subject: &str, version: i32) -> Option<&Version> {
        self.versions.get(&(subject.to_string(), version))
    }

    /// Whether `subject` has a version (a live one unless `deleted`).
    pub fn has_subject(&self, subject: &str, deleted: bool) -> bool {
        self.versions(subject).any(|v| deleted || !v.value.deleted)
    }

    /// The latest live version (or the latest at all with `deleted`).
    pub fn latest(&self, subject: &str, deleted: bool) -> Option<&Version> {
        self.versions(subject)
            .filter(|v| deleted || !v.value.deleted)
            .last()
    }

    /// Every subject, sorted, with whether all its versions are soft-deleted.
    pub fn subjects(&self) -> Vec<(String, bool)> {
        let mut out: Vec<(String, bool)> = Vec::new();
        for ((s, _), v) in &self.versions {
            match out.last_mut() {
                Some((last, all_deleted)) if last == s => *all_deleted &= v.value.deleted,
                _ => out.push((s.clone(), v.value.deleted)),
            }
        }
        out
    }

    /// The keys carrying `id`, sorted.
    pub fn keys_of_id(&self, id: i32) -> impl Iterator<Item = &Version> {
        self.by_id
            .get(&id)
            .into_iter()
            .flatten()
            .filter_map(|k| self.versions.get(k))
    }

    pub fn id_of_content(&self, key: &ContentKey) -> Option<i32> {
        self.by_content.get(key).copied()
    }

    /// Versions whose references name (subject, version).
    pub fn referenced_by(&self, subject: &str, version: i32, deleted: bool) -> Vec<&Version> {
        self.versions
            .values()
            .filter(|v| deleted || !v.value.deleted)
            .filter(|v| {
                v.value
                    .references
                    .iter()
                    .any(|r: &SchemaReference| r.subject == subject && r.version == version)
            })
            .collect()
    }

    pub fn config(&self, subject: Option<&str>) -> Option<&ConfigValue> {
        self.configs.get(&subject.map(str::to_string))
    }

    pub fn mode(&self, subject: Option<&str>) -> Option<&ModeValue> {
        self.modes.get(&subject.map(str::to_string))
    }

    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }
}

fn subject_range(subject: &str) -> std::ops::RangeInclusive<(String, i32)> {
    (subject.to_string(), i32::MIN)..=(subject.to_string(), i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema_registry::records::DeleteSubjectValue;

    fn schema(
        subject: &str,
        version: i32,
        id: i32,
        text: &str,
    ) -> (RegistryKey, Option<RegistryValue>) {
        (
            RegistryKey::Schema {
                subject: subject.into(),
                version,
            },
            Some(RegistryValue::Schema(SchemaValue {
                subject: subject.into(),
                version,
                id,
                md5: None,
                schema_type: "AVRO".into(),
                references: vec![],
                metadata: None,
                rule_set: None,
                schema: text.into(),
                deleted: false,
            })),
        )
    }

    #[test]
    fn given_records_when_replayed_then_versions_ids_and_deletes_follow() {
        let mut s = Store::default();
        let records = vec![
            schema("a", 1, 1, "\"int\""),
            schema("a", 2, 2, "\"long\""),
            schema("b", 1, 1, "\"int\""),
            (
                RegistryKey::DeleteSubject {
                    subject: "a".into(),
                },
                Some(RegistryValue::DeleteSubject(DeleteSubjectValue {
                    subject: "a".into(),
                    version: 1,
                })),
            ),
        ];
        for (i, (k, v)) in records.into_iter().enumerate() {
            s.apply(i as i64, 0, &k, v);
        }
        assert_eq!(s.max_id(), 2);
        assert!(s.version("a", 1).unwrap().value.deleted);
        assert!(!s.version("a", 2).unwrap().value.deleted);
        assert_eq!(s.latest("a", false).unwrap().value.version, 2);
        assert_eq!(s.keys_of_id(1).count(), 2);
        assert_eq!(s.subjects(), vec![("a".into(), false), ("b".into(), false)]);
        // A replayed (older) offset changes nothing.
        let (k, v) = schema("c", 1, 9, "\"x\"");
        s.apply(1, 0, &k, v);
        assert!(!s.has_subject("c", true));
        // Hard delete of b-1: id 1 still carried by a-1.
        s.apply(
            4,
            0,
            &RegistryKey::Schema {
                subject: "b".into(),
                version: 1,
            },
            None,
        );
        assert_eq!(s.keys_of_id(1).count(), 1);
        s.apply(
            5,
            0,
            &RegistryKey::Schema {
                subject: "a".into(),
                version: 1,
            },
            None,
        );
        assert_eq!(s.keys_of_id(1).count(), 0);
        assert_eq!(s.max_id(), 2, "ids never go back");
    }
}
