//! `strom schema subject list|delete`, `compatibility-level get|set`, `mode get|set`.

use serde::Serialize;
use serde_json::{json, Value};

use super::super::error::CliError;
use super::super::output::{or_dash, Render, Table};
use super::super::registry::{seg, Registry};
use super::{ItemError, LevelCmd, ModeCmd, GLOBAL};

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Subjects(pub Vec<String>);

impl Render for Subjects {
    fn table(&self, t: &mut Table) {
        t.header(&["SUBJECT"]);
        for s in &self.0 {
            t.row([s.clone()]);
        }
    }
}

#[derive(Debug, Serialize, PartialEq)]
pub struct SubjectDeleted {
    pub subject: String,
    /// The versions deleted.
    pub versions: Vec<i32>,
    pub permanent: bool,
    pub error: Option<ItemError>,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct SubjectsDeleted(pub Vec<SubjectDeleted>);

impl Render for SubjectsDeleted {
    fn table(&self, t: &mut Table) {
        t.header(&["SUBJECT", "VERSIONS", "DELETED", "ERROR"]);
        for s in &self.0 {
            let versions: Vec<String> = s.versions.iter().map(i32::to_string).collect();
            t.row([
                s.subject.clone(),
                if versions.is_empty() {
                    "-".into()
                } else {
                    versions.join(",")
                },
                if s.error.is_some() {
                    "-"
                } else if s.permanent {
                    "permanent"
                } else {
                    "soft"
                }
                .to_string(),
                ItemError::cell(&s.error),
            ]);
        }
    }
}

pub(super) async fn delete_subject(r: &Registry, subject: &str, permanent: bool) -> SubjectDeleted {
    let ctx = format!("deleting subject {subject}");
    let pq = if permanent { "?permanent=true" } else { "" };
    let got = r
        .delete(&format!("/subjects/{}{pq}", seg(subject)), &ctx)
        .await;
    let (versions, error) = match got {
        Ok(v) => (serde_json::from_value(v).unwrap_or_default(), None),
        Err(e) => (Vec::new(), Some(ItemError::of(e))),
    };
    SubjectDeleted {
        subject: subject.to_string(),
        versions,
        permanent,
        error,
    }
}

/// A subject's (or the global) compatibility level or mode.
#[derive(Debug, Serialize, PartialEq)]
pub struct Setting {
    /// The subject, or `{GLOBAL}`.
    pub subject: String,
    /// The level or mode; absent on error.
    pub value: Option<String>,
    pub error: Option<ItemError>,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Settings(pub Vec<Setting>);

impl Render for Settings {
    fn table(&self, t: &mut Table) {
        t.header(&["SUBJECT", "VALUE", "ERROR"]);
        for s in &self.0 {
            t.row([
                s.subject.clone(),
                or_dash(s.value.as_ref()),
                ItemError::cell(&s.error),
            ]);
        }
    }
}

/// The targets of a get/set: the global one when no subject is named, or with --global.
pub(super) fn targets(subjects: Vec<String>, global: bool) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = Vec::new();
    if global || subjects.is_empty() {
        out.push(None);
    }
    out.extend(subjects.into_iter().map(Some));
    out
}

fn setting(target: &Option<String>, got: Result<Value, CliError>, field: &[&str]) -> Setting {
    let subject = target.clone().unwrap_or_else(|| GLOBAL.to_string());
    match got {
        Ok(v) => Setting {
            subject,
            value: field
                .iter()
                .find_map(|f| v.get(*f).and_then(Value::as_str))
                .map(str::to_string),
            error: None,
        },
        Err(e) => Setting {
            subject,
            value: None,
            error: Some(ItemError::of(e)),
        },
    }
}

pub(super) async fn levels(r: &Registry, cmd: LevelCmd) -> Vec<Setting> {
    let mut out = Vec::new();
    match cmd {
        LevelCmd::Get { subjects, global } => {
            for t in targets(subjects, global) {
                let (path, ctx) = match &t {
                    None => (
                        "/config".to_string(),
                        "getting the global level".to_string(),
                    ),
                    Some(s) => (
                        format!("/config/{}?defaultToGlobal=true", seg(s)),
                        format!("getting the level of {s}"),
                    ),
                };
                let got = r.get(&path, &ctx).await;
                out.push(setting(&t, got, &["compatibilityLevel", "compatibility"]));
            }
        }
        LevelCmd::Set {
            subjects,
            level,
            global,
        } => {
            let body = json!({"compatibility": level.to_ascii_uppercase()});
            for t in targets(subjects, global) {
                let (path, ctx) = match &t {
                    None => (
                        "/config".to_string(),
                        "setting the global level".to_string(),
                    ),
                    Some(s) => (
                        format!("/config/{}", seg(s)),
                        format!("setting the level of {s}"),
                    ),
                };
                let got = r.put(&path, &body, &ctx).await;
                out.push(setting(&t, got, &["compatibility", "compatibilityLevel"]));
            }
        }
    }
    out
}

pub(super) async fn modes(r: &Registry, cmd: ModeCmd) -> Vec<Setting> {
    let mut out = Vec::new();
    match cmd {
        ModeCmd::Get { subjects, global } => {
            for t in targets(subjects, global) {
                let (path, ctx) = match &t {
                    None => ("/mode".to_string(), "getting the global mode".to_string()),
                    Some(s) => (
                        format!("/mode/{}?defaultToGlobal=true", seg(s)),
                        format!("getting the mode of {s}"),
                    ),
                };
                let got = r.get(&path, &ctx).await;
                out.push(setting(&t, got, &["mode"]));
            }
        }
        ModeCmd::Set {
            subjects,
            mode,
            global,
            force,
        } => {
            let body = json!({"mode": mode.to_ascii_uppercase()});
            let fq = if force { "?force=true" } else { "" };
            for t in targets(subjects, global) {
                let (path, ctx) = match &t {
                    None => (format!("/mode{fq}"), "setting the global mode".to_string()),
                    Some(s) => (
                        format!("/mode/{}{fq}", seg(s)),
                        format!("setting the mode of {s}"),
                    ),
                };
                let got = r.put(&path, &body, &ctx).await;
                out.push(setting(&t, got, &["mode"]));
            }
        }
    }
    out
}
