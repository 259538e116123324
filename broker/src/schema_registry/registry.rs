//! The registry's decisions (Confluent's `KafkaSchemaRegistry`/`AbstractSchemaRegistry`):
//! each write operation reads the store and returns the `_schemas` records to append, or
//! the error Confluent answers; reads answer from the store. No I/O: the caller appends the
//! records (acks=all) and replays them into the store before answering.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::compat::{self, Level};
use super::error::RegistryError;
use super::records::{
    ClearSubjectValue, ConfigValue, DeleteSubjectValue, ModeValue, RegistryKey, RegistryValue,
    SchemaReference, SchemaValue,
};
use super::store::{ContentKey, Store, Version};
use super::types::{self, Parsed, Resolved, SchemaType};

/// Records to append, in order.
pub type Records = Vec<(RegistryKey, Option<RegistryValue>)>;

/// Reference chains deeper than this are refused (and end cycles the visited set misses).
const MAX_REFERENCE_DEPTH: usize = 64;

/// The default compatibility level (`schema.compatibility.level`).
pub const DEFAULT_LEVEL: Level = Level::Backward;

/// A registration or lookup body (Confluent's `RegisterSchemaRequest`).
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct SchemaRequest {
    #[serde(default)]
    pub schema: Option<String>,
    #[serde(rename = "schemaType", default)]
    pub schema_type: Option<String>,
    #[serde(default)]
    pub references: Option<Vec<SchemaReference>>,
    #[serde(default)]
    pub version: Option<i32>,
    #[serde(default)]
    pub id: Option<i32>,
    #[serde(default)]
    pub metadata: Option<Value>,
    #[serde(rename = "ruleSet", default)]
    pub rule_set: Option<Value>,
}

/// Registry modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    ReadWrite,
    ReadOnly,
    ReadOnlyOverride,
    Import,
    Forward,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        Some(match s.to_ascii_uppercase().as_str() {
            "READWRITE" => Mode::ReadWrite,
            "READONLY" => Mode::ReadOnly,
            "READONLY_OVERRIDE" => Mode::ReadOnlyOverride,
            "IMPORT" => Mode::Import,
            "FORWARD" => Mode::Forward,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadWrite => "READWRITE",
            Mode::ReadOnly => "READONLY",
            Mode::ReadOnlyOverride => "READONLY_OVERRIDE",
            Mode::Import => "IMPORT",
            Mode::Forward => "FORWARD",
        }
    }

    fn import(self) -> bool {
        matches!(self, Mode::Import | Mode::Forward)
    }

    fn read_only(self) -> bool {
        matches!(self, Mode::ReadOnly | Mode::ReadOnlyOverride)
    }
}

/// A version selector in a path: a number in 1..=2^31-1, or `latest` / `-1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionId {
    Latest,
    Number(i32),
}

impl VersionId {
    pub fn parse(s: &str) -> Result<VersionId, RegistryError> {
        if s.eq_ignore_ascii_case("latest") {
            return Ok(VersionId::Latest);
        }
        match s.parse::<i32>() {
            Ok(-1) => Ok(VersionId::Latest),
            Ok(n) if n >= 1 => Ok(VersionId::Number(n)),
            _ => Err(RegistryError::InvalidVersion(s.to_string())),
        }
    }
}

/// Confluent's `QualifiedSubject.isValidSubject`: not empty, no control characters.
pub fn validate_subject(subject: &str) -> Result<(), RegistryError> {
    if subject.is_empty() || subject.chars().any(char::is_control) {
        return Err(RegistryError::InvalidSubject(subject.to_string()));
    }
    Ok(())
}

/// The store plus the schemas parsed so far (by content), so a compatibility check does not
/// parse every earlier version on every registration.
#[derive(Default)]
pub struct Registry {
    pub store: Store,
    parsed: HashMap<ContentKey, Arc<Parsed>>,
}

/// What a registration or lookup found or made.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub value: SchemaValue,
    /// Records to write (empty when the schema was registered already).
    pub records: Records,
}

impl Registry {
    pub fn level(&self, subject: Option<&str>) -> Level {
        subject
            .and_then(|s| self.store.config(Some(s)))
            .and_then(|c| c.compatibility_level.as_deref())
            .or_else(|| {
                self.store
                    .config(None)
                    .and_then(|c| c.compatibility_level.as_deref())
            })
            .and_then(Level::parse)
            .unwrap_or(DEFAULT_LEVEL)
    }

    pub fn mode(&self, subject: Option<&str>) -> Mode {
        subject
            .and_then(|s| self.store.mode(Some(s)))
            .or_else(|| self.store.mode(None))
            .and_then(|m| Mode::parse(&m.mode))
            .unwrap_or(Mode::ReadWrite)
    }

    fn normalize_default(&self, subject: &str) -> bool {
        self.store
            .config(Some(subject))
            .and_then(|c| c.normalize)
            .or_else(|| self.store.config(None).and_then(|c| c.normalize))
            .unwrap_or(false)
    }

    fn check_writable(&self, subject: &str) -> Result<(), RegistryError> {
        if self.mode(Some(subject)).read_only() {
            return Err(RegistryError::OperationNotPermitted(format!(
                "Subject {subject} in context . is in read-only mode"
            )));
        }
        Ok(())
    }

    /// A reference list resolved against the store, recursively; a cycle or a missing
    /// target is an invalid schema.
    fn resolve(
        &self,
        refs: &[SchemaReference],
        chain: &mut Vec<(String, i32)>,
    ) -> Result<Vec<Resolved>, RegistryError> {
        let mut out = Vec::with_capacity(refs.len());
        for r in refs {
            let target = if r.version == -1 {
                self.store.latest(&r.subject, false)
            } else {
                self.store.version(&r.subject, r.version)
            }
            .ok_or_else(|| {
                RegistryError::InvalidSchema(format!(
                    "Invalid schema, details: reference {} (subject {}, version {}) not found",
                    r.name, r.subject, r.version
                ))
            })?;
            let key = (r.subject.clone(), target.value.version);
            if chain.contains(&key) || chain.len() >= MAX_REFERENCE_DEPTH {
                return Err(RegistryError::InvalidSchema(format!(
                    "Invalid schema, details: circular or too deep reference to subject {} version {}",
                    key.0, key.1
                )));
            }
            chain.push(key);
            let nested = self.resolve(&target.value.references, chain)?;
            chain.pop();
            out.push(Resolved {
                name: r.name.clone(),
                subject: r.subject.clone(),
                version: target.value.version,
                schema: target.value.schema.clone(),
                references: nested,
            });
        }
        Ok(out)
    }

    /// Parses a request's schema (Confluent's `canonicalizeSchema`): the canonical value it
    /// would be stored as, and the parsed form.
    fn canonicalize(
        &self,
        subject: &str,
        req: &SchemaRequest,
        normalize: bool,
    ) -> Result<(SchemaValue, Arc<Parsed>), RegistryError> {
        let text = req.schema.as_deref().unwrap_or("");
        if text.trim().is_empty() {
            return Err(RegistryError::InvalidSchema("Empty schema".into()));
        }
        let type_name = req.schema_type.as_deref().unwrap_or("AVRO");
        let kind = SchemaType::parse(type_name).ok_or_else(|| {
            RegistryError::InvalidSchema(format!("Invalid schema type {type_name}"))
        })?;
        let references = req.references.clone().unwrap_or_default();
        let resolved = self.resolve(&references, &mut vec![(subject.to_string(), 0)])?;
        let parsed = types::parse(kind, text, &resolved, normalize).map_err(|e| {
            RegistryError::InvalidSchema(format!("Invalid schema of type {kind}, details: {e}"))
        })?;
        let value = SchemaValue {
            subject: subject.to_string(),
            version: req.version.unwrap_or(0),
            id: req.id.unwrap_or(-1),
            md5: None,
            schema_type: kind.as_str().to_string(),
            references,
            metadata: req.metadata.clone(),
            rule_set: req.rule_set.clone(),
            schema: parsed.canonical().to_string(),
            deleted: false,
        };
        Ok((value, Arc::new(parsed)))
    }

    /// The parsed form of a stored version (cached by content).
    fn parsed(&mut self, v: &SchemaValue) -> Result<Arc<Parsed>, RegistryError> {
        let key = ContentKey::of(v);
        if let Some(p) = self.parsed.get(&key) {
            return Ok(p.clone());
        }
        let kind = SchemaType::parse(&v.schema_type).unwrap_or(SchemaType::Avro);
        let resolved = self.resolve(&v.references, &mut vec![(v.subject.clone(), v.version)])?;
        let p = Arc::new(
            types::parse(kind, &v.schema, &resolved, false).map_err(|e| {
                RegistryError::InvalidSchema(format!(
                    "stored schema {} version {} does not parse: {e}",
                    v.subject, v.version
                ))
            })?,
        );
        self.parsed.insert(key, p.clone());
        Ok(p)
    }

    /// The parsed schema of id `id` (for format=serialized and validation).
    pub fn parsed_by_id(&mut self, id: i32) -> Option<Arc<Parsed>> {
        let v = self.store.keys_of_id(id).next()?.value.clone();
        self.parsed(&v).ok()
    }

    /// Errors of `new` against the live versions of `subject` under its level.
    fn incompatibilities(
        &mut self,
        subject: &str,
        new: &Parsed,
        only: Option<i32>,
    ) -> Result<Vec<String>, RegistryError> {
        let level = self.level(Some(subject));
        let live: Vec<SchemaValue> = self
            .store
            .versions(subject)
            .filter(|v| !v.value.deleted)
            .filter(|v| only.is_none_or(|o| v.value.version == o))
            .map(|v| v.value.clone())
            .collect();
        let mut previous = Vec::with_capacity(live.len());
        for v in &live {
            previous.push((v.version, self.parsed(v)?));
        }
        let refs: Vec<(i32, &Parsed)> = previous.iter().map(|(n, p)| (*n, p.as_ref())).collect();
        Ok(compat::check(level, new, &refs))
    }

    /// The live version of `subject` that already holds this schema, if any: Confluent's
    /// `registerOrForward` answers it before taking the write path (so even a READONLY
    /// subject answers a serializer's register call for a known schema).
    pub fn registered_already(
        &self,
        subject: &str,
        req: &SchemaRequest,
        normalize: bool,
    ) -> Option<SchemaValue> {
        if req.version.is_some_and(|v| v > 0) {
            return None;
        }
        let normalize = normalize || self.normalize_default(subject);
        let (value, _) = self.canonicalize(subject, req, normalize).ok()?;
        let content = ContentKey::of(&value);
        let requested_id = req.id.filter(|id| *id >= 0);
        self.store
            .versions(subject)
            .find(|v| {
                !v.value.deleted
                    && ContentKey::of(&v.value) == content
                    && requested_id.is_none_or(|id| id == v.value.id)
            })
            .map(|v| v.value.clone())
    }

    /// POST /subjects/{subject}/versions.
    pub fn register(
        &mut self,
        subject: &str,
        req: &SchemaRequest,
        normalize: bool,
    ) -> Result<Outcome, RegistryError> {
        validate_subject(subject)?;
        self.check_writable(subject)?;
        let mode = self.mode(Some(subject));
        let requested_id = req.id.filter(|id| *id >= 0);
        if requested_id.is_some() && !mode.import() {
            return Err(RegistryError::OperationNotPermitted(format!(
                "Subject {subject} in context . is not in import mode"
            )));
        }
        if requested_id.is_none() && mode != Mode::ReadWrite {
            return Err(RegistryError::OperationNotPermitted(format!(
                "Subject {subject} in context . is not in read-write mode"
            )));
        }
        let normalize = normalize || self.normalize_default(subject);
        let (mut value, parsed) = self.canonicalize(subject, req, normalize)?;
        let content = ContentKey::of(&value);
        let existing_id = self.store.id_of_content(&content);
        let requested_version = req.version.filter(|v| *v > 0);
        // Registered under this subject already (and live): answer it, write nothing.
        if requested_version.is_none() {
            if let Some(v) = self.store.versions(subject).find(|v| {
                !v.value.deleted
                    && ContentKey::of(&v.value) == content
                    && requested_id.is_none_or(|id| id == v.value.id)
            }) {
                return Ok(Outcome {
                    value: v.value.clone(),
                    records: Vec::new(),
                });
            }
        }
        if !mode.import() {
            let errors = self.incompatibilities(subject, &parsed, None)?;
            if !errors.is_empty() {
                return Err(RegistryError::Incompatible(format!(
                    "Schema being registered is incompatible with an earlier schema for subject \"{subject}\", details: [{}]",
                    errors.join(", ")
                )));
            }
        }
        let next_version = self
            .store
            .versions(subject)
            .map(|v| v.value.version + 1)
            .max()
            .unwrap_or(1);
        value.version = match requested_version {
            Some(v) if mode.import() => v,
            Some(v) if v != next_version => {
                return Err(RegistryError::InvalidSchema(
                    "Version is not one more than previous version".into(),
                ))
            }
            Some(v) => v,
            None => next_version,
        };
        value.id = match requested_id {
            Some(id) => {
                if let Some(other) = self.store.keys_of_id(id).next() {
                    if ContentKey::of(&other.value) != content {
                        return Err(RegistryError::OperationNotPermitted(format!(
                            "Overwrite new schema with id {id} in context . is not permitted."
                        )));
                    }
                }
                id
            }
            None => existing_id.unwrap_or(self.store.max_id() + 1),
        };
        let mut records = Records::new();
        // An older soft-deleted version with the same id is tombstoned (Confluent does so
        // that re-registering a deleted schema does not leave two keys for it), unless a
        // schema references it.
        for v in self.store.versions(subject) {
            if v.value.deleted
                && v.value.id == value.id
                && v.value.version < value.version
                && self
                    .store
                    .referenced_by(subject, v.value.version, true)
                    .is_empty()
            {
                records.push((
                    RegistryKey::Schema {
                        subject: subject.to_string(),
                        version: v.value.version,
                    },
                    None,
                ));
            }
        }
        records.push((
            RegistryKey::Schema {
                subject: subject.to_string(),
                version: value.version,
            },
            Some(RegistryValue::Schema(value.clone())),
        ));
        self.parsed.insert(content, parsed);
        Ok(Outcome { value, records })
    }

    /// POST /subjects/{subject}: the version of `subject` holding this schema.
    pub fn lookup(
        &self,
        subject: &str,
        req: &SchemaRequest,
        normalize: bool,
        deleted: bool,
    ) -> Result<Version, RegistryError> {
        if !self.store.has_subject(subject, deleted) {
            return Err(RegistryError::SubjectNotFound(subject.to_string()));
        }
        let normalize = normalize || self.normalize_default(subject);
        let (value, _) = self.canonicalize(subject, req, normalize)?;
        let content = ContentKey::of(&value);
        self.store
            .versions(subject)
            .filter(|v| deleted || !v.value.deleted)
            .filter(|v| ContentKey::of(&v.value) == content)
            .last()
            .cloned()
            .ok_or(RegistryError::SchemaNotFoundAny)
    }

    /// POST /compatibility/subjects/{subject}/versions[/{version}]: (compatible, messages).
    pub fn test_compatibility(
        &mut self,
        subject: &str,
        version: Option<VersionId>,
        req: &SchemaRequest,
        normalize: bool,
    ) -> Result<(bool, Vec<String>), RegistryError> {
        let (_, parsed) = self.canonicalize(subject, req, normalize)?;
        let only = match version {
            None => None,
            Some(v) => {
                let found = self.get_version(subject, v, false)?;
                Some(found.value.version)
            }
        };
        // Against one given version the level's transitivity does not widen the check.
        let errors = match only {
            Some(n) => {
                let level = self.level(Some(subject));
                let old = self.store.version(subject, n).map(|v| v.value.clone());
                match old {
                    Some(old) => {
                        let old_parsed = self.parsed(&old)?;
                        compat::check(level, &parsed, &[(n, old_parsed.as_ref())])
                    }
                    None => Vec::new(),
                }
            }
            None => self.incompatibilities(subject, &parsed, None)?,
        };
        Ok((errors.is_empty(), errors))
    }

    /// A version of a subject (Confluent's 40401 / 40402 distinction).
    pub fn get_version(
        &self,
        subject: &str,
        version: VersionId,
        deleted: bool,
    ) -> Result<&Version, RegistryError> {
        let found = match version {
            VersionId::Latest => self.store.latest(subject, deleted),
            VersionId::Number(n) => self
                .store
                .version(subject, n)
                .filter(|v| deleted || !v.value.deleted),
        };
        found.ok_or_else(|| {
            if !self.store.has_subject(subject, deleted) {
                RegistryError::SubjectNotFound(subject.to_string())
            } else {
                RegistryError::VersionNotFound(match version {
                    VersionId::Number(n) => n,
                    VersionId::Latest => -1,
                })
            }
        })
    }

    /// DELETE /subjects/{subject}/versions/{version}.
    pub fn delete_version(
        &self,
        subject: &str,
        version: VersionId,
        permanent: bool,
    ) -> Result<(i32, Records), RegistryError> {
        self.check_writable(subject)?;
        if let VersionId::Number(n) = version {
            if let Some(v) = self.store.version(subject, n) {
                if !permanent && v.value.deleted {
                    return Err(RegistryError::VersionSoftDeleted(subject.to_string(), n));
                }
            }
        }
        let v = self.get_version(subject, version, true)?.value.clone();
        if !self
            .store
            .referenced_by(subject, v.version, permanent)
            .is_empty()
        {
            return Err(RegistryError::ReferenceExists(format!(
                "{{magic=1,keytype=SCHEMA,subject={subject},version={}}}",
                v.version
            )));
        }
        let key = RegistryKey::Schema {
            subject: subject.to_string(),
            version: v.version,
        };
        if permanent {
            if !v.deleted {
                return Err(RegistryError::VersionNotSoftDeleted(
                    subject.to_string(),
                    v.version,
                ));
            }
            let mut records = vec![(key, None)];
            let last = self.store.versions(subject).count() == 1;
            if last {
                records.extend(self.forget_subject_settings(subject));
            }
            Ok((v.version, records))
        } else {
            let mut deleted = v.clone();
            deleted.deleted = true;
            Ok((v.version, vec![(key, Some(RegistryValue::Schema(deleted)))]))
        }
    }

    fn forget_subject_settings(&self, subject: &str) -> Records {
        let mut records = Records::new();
        if self.store.mode(Some(subject)).is_some() {
            records.push((
                RegistryKey::Mode {
                    subject: Some(subject.to_string()),
                },
                None,
            ));
        }
        if self.store.config(Some(subject)).is_some() {
            records.push((
                RegistryKey::Config {
                    subject: Some(subject.to_string()),
                },
                None,
            ));
        }
        records
    }

    /// DELETE /subjects/{subject}: the versions deleted.
    pub fn delete_subject(
        &self,
        subject: &str,
        permanent: bool,
    ) -> Result<(Vec<i32>, Records), RegistryError> {
        if !self.store.has_subject(subject, true) {
            return Err(RegistryError::SubjectNotFound(subject.to_string()));
        }
        if !permanent && !self.store.has_subject(subject, false) {
            return Err(RegistryError::SubjectSoftDeleted(subject.to_string()));
        }
        self.check_writable(subject)?;
        let mut versions = Vec::new();
        for v in self
            .store
            .versions(subject)
            .filter(|v| permanent || !v.value.deleted)
        {
            let others: Vec<_> = self
                .store
                .referenced_by(subject, v.value.version, permanent)
                .into_iter()
                .filter(|r| r.value.subject != subject)
                .collect();
            if !others.is_empty() {
                return Err(RegistryError::ReferenceExists(format!(
                    "{{magic=1,keytype=SCHEMA,subject={subject},version={}}}",
                    v.value.version
                )));
            }
            if permanent && !v.value.deleted {
                return Err(RegistryError::SubjectNotSoftDeleted(subject.to_string()));
            }
            versions.push(v.value.version);
        }
        let records = if permanent {
            let mut r: Records = versions
                .iter()
                .rev()
                .map(|n| {
                    (
                        RegistryKey::Schema {
                            subject: subject.to_string(),
                            version: *n,
                        },
                        None,
                    )
                })
                .collect();
            r.extend(self.forget_subject_settings(subject));
            r
        } else {
            vec![(
                RegistryKey::DeleteSubject {
                    subject: subject.to_string(),
                },
                Some(RegistryValue::DeleteSubject(DeleteSubjectValue {
                    subject: subject.to_string(),
                    version: *versions.last().unwrap_or(&0),
                })),
            )]
        };
        Ok((versions, records))
    }

    /// PUT /config[/{subject}] with `compatibility` (and `normalize`).
    pub fn set_config(
        &self,
        subject: Option<&str>,
        level: Option<&str>,
        normalize: Option<bool>,
    ) -> Result<(ConfigValue, Records), RegistryError> {
        if let Some(s) = subject {
            validate_subject(s)?;
        }
        let level = match level {
            Some(l) => Some(Level::parse(l).ok_or(RegistryError::InvalidCompatibility)?),
            None => None,
        };
        let mut value = self.store.config(subject).cloned().unwrap_or_default();
        value.subject = subject.map(str::to_string);
        if let Some(l) = level {
            value.compatibility_level = Some(l.as_str().to_string());
        }
        if normalize.is_some() {
            value.normalize = normalize;
        }
        let key = RegistryKey::Config {
            subject: subject.map(str::to_string),
        };
        Ok((
            value.clone(),
            vec![(key, Some(RegistryValue::Config(value)))],
        ))
    }

    /// DELETE /config[/{subject}]: the config removed.
    pub fn delete_config(
        &self,
        subject: Option<&str>,
    ) -> Result<(ConfigValue, Records), RegistryError> {
        let old = match (subject, self.store.config(subject)) {
            (_, Some(c)) => c.clone(),
            (Some(s), None) => return Err(RegistryError::SubjectNotFound(s.to_string())),
            (None, None) => ConfigValue {
                compatibility_level: Some(DEFAULT_LEVEL.as_str().into()),
                ..Default::default()
            },
        };
        let key = RegistryKey::Config {
            subject: subject.map(str::to_string),
        };
        Ok((old, vec![(key, None)]))
    }

    /// PUT /mode[/{subject}].
    pub fn set_mode(
        &self,
        subject: Option<&str>,
        mode: &str,
        force: bool,
    ) -> Result<(Mode, Records), RegistryError> {
        let mode = Mode::parse(mode).ok_or(RegistryError::InvalidMode)?;
        let mut records = Records::new();
        if mode == Mode::Import && self.mode(subject) != Mode::Import && !force {
            // Importing needs a registry (or subject) without schemas: ids would clash.
            let live = match subject {
                Some(s) => self.store.has_subject(s, false),
                None => self
                    .store
                    .subjects()
                    .iter()
                    .any(|(_, all_deleted)| !all_deleted),
            };
            if live {
                return Err(RegistryError::OperationNotPermitted(
                    "Cannot import since found existing subjects".into(),
                ));
            }
            let subjects: Vec<String> = match subject {
                Some(s) => vec![s.to_string()],
                None => self.store.subjects().into_iter().map(|(s, _)| s).collect(),
            };
            for s in &subjects {
                for v in self.store.versions(s) {
                    records.push((
                        RegistryKey::Schema {
                            subject: s.clone(),
                            version: v.value.version,
                        },
                        None,
                    ));
                }
                records.push((
                    RegistryKey::ClearSubject { subject: s.clone() },
                    Some(RegistryValue::ClearSubject(ClearSubjectValue {
                        subject: s.clone(),
                    })),
                ));
            }
        }
        records.push((
            RegistryKey::Mode {
                subject: subject.map(str::to_string),
            },
            Some(RegistryValue::Mode(ModeValue {
                subject: subject.map(str::to_string),
                mode: mode.as_str().to_string(),
            })),
        ));
        Ok((mode, records))
    }

    /// DELETE /mode/{subject}: the mode removed.
    pub fn delete_mode(&self, subject: &str) -> Result<(Mode, Records), RegistryError> {
        let old = self
            .store
            .mode(Some(subject))
            .and_then(|m| Mode::parse(&m.mode))
            .ok_or_else(|| RegistryError::SubjectNotFound(subject.to_string()))?;
        Ok((
            old,
            vec![(
                RegistryKey::Mode {
                    subject: Some(subject.to_string()),
                },
                None,
            )],
        ))
    }
}
