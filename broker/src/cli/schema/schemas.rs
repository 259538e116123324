//! `strom schema create|get|list|delete|check-compatibility`.

use serde::Serialize;
use serde_json::{json, Value};

use super::super::error::CliError;
use super::super::output::{or_dash, Render, Table};
use super::super::registry::{seg, Registry};
use super::{SchemaFile, SchemaType};

/// A schema under a subject; `subject`/`version` are absent for an id no subject holds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SchemaInfo {
    pub subject: Option<String>,
    pub version: Option<i32>,
    pub id: i32,
    /// AVRO, PROTOBUF or JSON.
    #[serde(rename = "type")]
    pub schema_type: String,
    pub schema: String,
    pub references: Vec<Reference>,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Reference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

/// Confluent leaves `schemaType` out for Avro.
fn type_of(v: &Value) -> String {
    v.get("schemaType")
        .and_then(Value::as_str)
        .unwrap_or("AVRO")
        .to_string()
}

fn references_of(v: &Value) -> Vec<Reference> {
    v.get("references")
        .and_then(|r| serde_json::from_value(r.clone()).ok())
        .unwrap_or_default()
}

fn int(v: &Value, field: &str, context: &str) -> Result<i32, CliError> {
    v.get(field)
        .and_then(Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| CliError::Client(format!("{context}: no `{field}` in the answer {v}")))
}

fn text(v: &Value, field: &str) -> String {
    v.get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Schemas(pub Vec<SchemaInfo>);

impl Render for Schemas {
    fn table(&self, t: &mut Table) {
        t.header(&["SUBJECT", "VERSION", "ID", "TYPE"]);
        for s in &self.0 {
            t.row([
                or_dash(s.subject.as_ref()),
                or_dash(s.version),
                s.id.to_string(),
                s.schema_type.clone(),
            ]);
        }
    }
}

impl Render for SchemaInfo {
    fn table(&self, t: &mut Table) {
        Schemas(vec![self.clone()]).table(t)
    }
}

/// `NAME:SUBJECT:VERSION` → a reference.
pub fn parse_reference(s: &str) -> Result<Reference, CliError> {
    let bad = || CliError::Usage(format!("a reference is NAME:SUBJECT:VERSION, got {s:?}"));
    // NAME may hold `:` (a URL as a JSON `$ref`): split from the right.
    let (rest, version) = s.rsplit_once(':').ok_or_else(bad)?;
    let (name, subject) = rest.rsplit_once(':').ok_or_else(bad)?;
    let version: i32 = version.parse().map_err(|_| bad())?;
    if name.is_empty() || subject.is_empty() || version < 1 {
        return Err(bad());
    }
    Ok(Reference {
        name: name.to_string(),
        subject: subject.to_string(),
        version,
    })
}

/// The request body Confluent's register, lookup and compatibility calls take.
pub fn schema_body(file: &SchemaFile, schema: String) -> Result<Value, CliError> {
    let t = file
        .schema_type
        .or_else(|| SchemaType::from_path(&file.path))
        .ok_or_else(|| {
            CliError::Usage(format!(
                "cannot tell the schema type of {}: give --type avro|protobuf|json",
                file.path.display()
            ))
        })?;
    let refs = file
        .references
        .iter()
        .map(|r| parse_reference(r))
        .collect::<Result<Vec<_>, _>>()?;
    let mut body = json!({"schema": schema, "schemaType": t.name()});
    if !refs.is_empty() {
        body["references"] = json!(refs);
    }
    Ok(body)
}

fn read_schema(file: &SchemaFile) -> Result<Value, CliError> {
    let text = if file.path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(&file.path)
            .map_err(|e| CliError::Usage(format!("reading {}: {e}", file.path.display())))?
    };
    schema_body(file, text)
}

fn version_path(v: &str) -> Result<String, CliError> {
    if v == "latest" || v.parse::<i32>().is_ok_and(|n| n >= 1) {
        Ok(v.to_string())
    } else {
        Err(CliError::Usage(format!(
            "a version is 1, 2, … or `latest`, got {v:?}"
        )))
    }
}

pub(super) async fn create(
    r: &Registry,
    subject: &str,
    file: &SchemaFile,
    normalize: bool,
) -> Result<SchemaInfo, CliError> {
    let body = read_schema(file)?;
    let ctx = format!("registering a schema under {subject}");
    let q = if normalize { "?normalize=true" } else { "" };
    let path = format!("/subjects/{}/versions{q}", seg(subject));
    let answer = r.post(&path, &body, &ctx).await?;
    let id = int(&answer, "id", &ctx)?;
    // Confluent answers only `{"id"}`: its lookup gives the version.
    let version = match answer.get("version").and_then(Value::as_i64) {
        Some(v) => v as i32,
        None => {
            let path = format!("/subjects/{}{q}", seg(subject));
            int(&r.post(&path, &body, &ctx).await?, "version", &ctx)?
        }
    };
    Ok(SchemaInfo {
        subject: Some(subject.to_string()),
        version: Some(version),
        id,
        schema_type: text(&body, "schemaType"),
        schema: text(&body, "schema"),
        references: references_of(&body),
    })
}

pub(super) async fn get(
    r: &Registry,
    subject: Option<&str>,
    id: Option<i32>,
    version: &str,
    deleted: bool,
) -> Result<Schemas, CliError> {
    let dq = if deleted { "?deleted=true" } else { "" };
    if let Some(id) = id {
        let ctx = format!("getting schema id {id}");
        let s = r.get(&format!("/schemas/ids/{id}"), &ctx).await?;
        let at = r
            .get(&format!("/schemas/ids/{id}/versions{dq}"), &ctx)
            .await?;
        let mut out: Vec<SchemaInfo> = at
            .as_array()
            .into_iter()
            .flatten()
            .filter(|sv| subject.is_none_or(|want| text(sv, "subject") == want))
            .map(|sv| SchemaInfo {
                subject: Some(text(sv, "subject")),
                version: sv.get("version").and_then(Value::as_i64).map(|v| v as i32),
                id,
                schema_type: type_of(&s),
                schema: text(&s, "schema"),
                references: references_of(&s),
            })
            .collect();
        if out.is_empty() {
            if let Some(want) = subject {
                return Err(CliError::Usage(format!(
                    "schema id {id} is not under subject {want}"
                )));
            }
            out.push(SchemaInfo {
                subject: None,
                version: None,
                id,
                schema_type: type_of(&s),
                schema: text(&s, "schema"),
                references: references_of(&s),
            });
        }
        return Ok(Schemas(out));
    }
    let subject = subject
        .ok_or_else(|| CliError::Usage("give a SUBJECT (and --schema-version) or --id".into()))?;
    let ctx = format!("getting {subject} version {version}");
    let path = format!(
        "/subjects/{}/versions/{}{dq}",
        seg(subject),
        version_path(version)?
    );
    let v = r.get(&path, &ctx).await?;
    Ok(Schemas(vec![SchemaInfo {
        subject: Some(text(&v, "subject")),
        version: Some(int(&v, "version", &ctx)?),
        id: int(&v, "id", &ctx)?,
        schema_type: type_of(&v),
        schema: text(&v, "schema"),
        references: references_of(&v),
    }]))
}

/// One row per subject version, without the schema text (`get` shows it).
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Listed(pub Vec<ListedSchema>);

#[derive(Debug, Serialize, PartialEq)]
pub struct ListedSchema {
    pub subject: String,
    pub version: i32,
    pub id: i32,
    #[serde(rename = "type")]
    pub schema_type: String,
}

impl Render for Listed {
    fn table(&self, t: &mut Table) {
        t.header(&["SUBJECT", "VERSION", "ID", "TYPE"]);
        for s in &self.0 {
            t.row([
                s.subject.clone(),
                s.version.to_string(),
                s.id.to_string(),
                s.schema_type.clone(),
            ]);
        }
    }
}

pub(super) async fn list(
    r: &Registry,
    subjects: &[String],
    deleted: bool,
) -> Result<Listed, CliError> {
    let ctx = "listing schemas";
    let dq = if deleted { "?deleted=true" } else { "" };
    let names: Vec<String> = if subjects.is_empty() {
        serde_json::from_value(r.get(&format!("/subjects{dq}"), ctx).await?)
            .map_err(|e| CliError::Client(format!("{ctx}: {e}")))?
    } else {
        subjects.to_vec()
    };
    let mut out = Vec::new();
    for s in names {
        let ctx = format!("listing the versions of {s}");
        let versions: Vec<i32> = serde_json::from_value(
            r.get(&format!("/subjects/{}/versions{dq}", seg(&s)), &ctx)
                .await?,
        )
        .map_err(|e| CliError::Client(format!("{ctx}: {e}")))?;
        for v in versions {
            let path = format!("/subjects/{}/versions/{v}{dq}", seg(&s));
            let got = r.get(&path, &ctx).await?;
            out.push(ListedSchema {
                subject: s.clone(),
                version: v,
                id: int(&got, "id", &ctx)?,
                schema_type: type_of(&got),
            });
        }
    }
    Ok(Listed(out))
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Deleted {
    pub subject: String,
    pub version: i32,
    pub permanent: bool,
}

impl Render for Deleted {
    fn table(&self, t: &mut Table) {
        t.header(&["SUBJECT", "VERSION", "DELETED"]);
        t.row([
            self.subject.clone(),
            self.version.to_string(),
            if self.permanent { "permanent" } else { "soft" }.into(),
        ]);
    }
}

pub(super) async fn delete(
    r: &Registry,
    subject: &str,
    version: &str,
    permanent: bool,
) -> Result<Deleted, CliError> {
    let ctx = format!("deleting {subject} version {version}");
    let pq = if permanent { "?permanent=true" } else { "" };
    let path = format!(
        "/subjects/{}/versions/{}{pq}",
        seg(subject),
        version_path(version)?
    );
    let v = r.delete(&path, &ctx).await?;
    let version = v
        .as_i64()
        .ok_or_else(|| CliError::Client(format!("{ctx}: the answer {v} is not a version")))?;
    Ok(Deleted {
        subject: subject.to_string(),
        version: version as i32,
        permanent,
    })
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Compatibility {
    pub compatible: bool,
    /// Why not (the registry's verbose messages); empty when compatible.
    pub messages: Vec<String>,
}

impl Render for Compatibility {
    fn table(&self, t: &mut Table) {
        t.header(&["COMPATIBLE"]);
        t.row([self.compatible.to_string()]);
        if !self.messages.is_empty() {
            t.section();
            t.header(&["REASON"]);
            for m in &self.messages {
                t.row([m.clone()]);
            }
        }
    }
}

pub(super) async fn check(
    r: &Registry,
    subject: &str,
    file: &SchemaFile,
    version: &str,
) -> Result<Compatibility, CliError> {
    let body = read_schema(file)?;
    let ctx = format!("checking compatibility with {subject} version {version}");
    let path = if version == "all" {
        format!(
            "/compatibility/subjects/{}/versions?verbose=true",
            seg(subject)
        )
    } else {
        format!(
            "/compatibility/subjects/{}/versions/{}?verbose=true",
            seg(subject),
            version_path(version)?
        )
    };
    let v = r.post(&path, &body, &ctx).await?;
    let compatible = v
        .get("is_compatible")
        .and_then(Value::as_bool)
        .ok_or_else(|| CliError::Client(format!("{ctx}: no `is_compatible` in {v}")))?;
    let messages = v
        .get("messages")
        .and_then(Value::as_array)
        .map(|m| {
            m.iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| x.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Compatibility {
        compatible,
        messages,
    })
}
