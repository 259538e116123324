//! `strom schema …`: a Schema Registry's schemas, subjects, compatibility levels and modes, in
//! the shape of `rpk registry` (docs/cli.md). Only Confluent's REST API is used (`registry`),
//! so the commands work against Strom's built-in registry and Confluent's.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

mod schemas;
mod settings;
#[cfg(test)]
mod tests;

use super::error::CliError;
use super::output::{self, Format, Render};
use super::registry::Registry;
use schemas::{check, create, delete, get, list};
use settings::{delete_subject, levels, modes, Settings, Subjects, SubjectsDeleted};

#[derive(clap::Args)]
pub struct SchemaArgs {
    /// The schema registry's base URL.
    #[arg(
        long = "registry-url",
        env = "STROM_REGISTRY_URL",
        default_value = "http://127.0.0.1:8081",
        global = true
    )]
    pub registry_url: String,
    /// Timeout of each request, in milliseconds.
    #[arg(
        long = "timeout-ms",
        env = "STROM_TIMEOUT_MS",
        default_value_t = 30_000,
        global = true
    )]
    pub timeout_ms: u64,
    /// Output: table (for people) or json (stable field names, for scripts).
    #[arg(long, value_enum, default_value_t = Format::Table, global = true)]
    pub format: Format,
    #[command(subcommand)]
    pub cmd: SchemaCmd,
}

#[derive(clap::Subcommand)]
pub enum SchemaCmd {
    /// Register a schema from a file under a subject (a new version, or the existing one if
    /// the same schema is there).
    Create {
        subject: String,
        #[command(flatten)]
        schema: SchemaFile,
        /// Normalize the schema before registering (Confluent's `?normalize=true`).
        #[arg(long)]
        normalize: bool,
    },
    /// A schema by id (every subject and version that has it), or a subject's version.
    Get {
        /// The subject (with --id: only this subject's versions of the id).
        subject: Option<String>,
        /// The schema's global id.
        #[arg(long, conflicts_with = "version")]
        id: Option<i32>,
        /// The subject's version: 1, 2, … or `latest`.
        #[arg(long = "schema-version", default_value = "latest")]
        version: String,
        /// Soft-deleted versions too.
        #[arg(long)]
        deleted: bool,
        /// Print only the schema text.
        #[arg(long)]
        print_schema: bool,
    },
    /// The schemas (subject, version, id, type) of the given subjects, or of all.
    List {
        subjects: Vec<String>,
        /// Soft-deleted versions too.
        #[arg(long)]
        deleted: bool,
    },
    /// Delete a subject's version: a soft delete, then --permanent removes it.
    Delete {
        subject: String,
        /// The version: 1, 2, … or `latest`.
        #[arg(long = "schema-version")]
        version: String,
        #[arg(long)]
        permanent: bool,
    },
    /// Whether a schema could be registered under a subject (exit 4 if not, with the reasons).
    CheckCompatibility {
        subject: String,
        #[command(flatten)]
        schema: SchemaFile,
        /// The version to check against: 1, 2, …, `latest`, or `all` (every version, as the
        /// transitive levels do).
        #[arg(long = "schema-version", default_value = "latest")]
        version: String,
    },
    /// Subjects: list, delete.
    #[command(subcommand)]
    Subject(SubjectCmd),
    /// The compatibility level, global or per subject: get, set.
    #[command(subcommand)]
    CompatibilityLevel(LevelCmd),
    /// The registry's mode (READWRITE, READONLY, READONLY_OVERRIDE, IMPORT): get, set.
    #[command(subcommand)]
    Mode(ModeCmd),
}

/// A schema to send: its file, type and references.
#[derive(clap::Args)]
pub struct SchemaFile {
    /// The schema file (`-` for stdin).
    #[arg(long = "schema", value_name = "FILE")]
    pub path: PathBuf,
    /// The schema's type; by default from the file's extension (.avsc/.avro, .proto, .json).
    #[arg(long = "type", value_enum)]
    pub schema_type: Option<SchemaType>,
    /// References, NAME:SUBJECT:VERSION (comma-separated or repeated): NAME is how the
    /// schema refers to it (Avro full name, .proto import path, JSON `$ref`).
    #[arg(long, value_delimiter = ',', value_name = "NAME:SUBJECT:VERSION")]
    pub references: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchemaType {
    Avro,
    Protobuf,
    Json,
}

impl SchemaType {
    pub fn name(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Protobuf => "PROTOBUF",
            SchemaType::Json => "JSON",
        }
    }

    pub(super) fn from_path(p: &std::path::Path) -> Option<SchemaType> {
        match p.extension()?.to_str()? {
            "avsc" | "avro" => Some(SchemaType::Avro),
            "proto" => Some(SchemaType::Protobuf),
            "json" => Some(SchemaType::Json),
            _ => None,
        }
    }
}

#[derive(clap::Subcommand)]
pub enum SubjectCmd {
    /// The subjects.
    List {
        /// Soft-deleted subjects too.
        #[arg(long)]
        deleted: bool,
    },
    /// Delete subjects (all their versions): a soft delete, then --permanent removes them.
    Delete {
        #[arg(required = true)]
        subjects: Vec<String>,
        #[arg(long)]
        permanent: bool,
    },
}

#[derive(clap::Subcommand)]
pub enum LevelCmd {
    /// The level of each subject (its own, or the global one it falls back to); the global
    /// level without subjects.
    Get {
        subjects: Vec<String>,
        /// The global level too.
        #[arg(long)]
        global: bool,
    },
    /// Set the level of subjects, or the global level without subjects.
    Set {
        subjects: Vec<String>,
        /// NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL,
        /// FULL_TRANSITIVE.
        #[arg(long)]
        level: String,
        /// The global level too.
        #[arg(long)]
        global: bool,
    },
}

#[derive(clap::Subcommand)]
pub enum ModeCmd {
    /// The mode of each subject (its own, or the global one); the global mode without subjects.
    Get {
        subjects: Vec<String>,
        /// The global mode too.
        #[arg(long)]
        global: bool,
    },
    /// Set the mode of subjects, or the global mode without subjects.
    Set {
        subjects: Vec<String>,
        /// READWRITE, READONLY, READONLY_OVERRIDE or IMPORT.
        #[arg(long)]
        mode: String,
        /// The global mode too.
        #[arg(long)]
        global: bool,
        /// IMPORT on a registry or subject that has schemas (Confluent's `?force=true`).
        #[arg(long)]
        force: bool,
    },
}

/// How tables name the global level and mode (as rpk does).
pub const GLOBAL: &str = "{GLOBAL}";

pub async fn run(a: SchemaArgs) -> Result<(), CliError> {
    let r = Registry::new(&a.registry_url, Duration::from_millis(a.timeout_ms.max(1)));
    let f = a.format;
    match a.cmd {
        SchemaCmd::Create {
            subject,
            schema,
            normalize,
        } => output::print(&create(&r, &subject, &schema, normalize).await?, f)?,
        SchemaCmd::Get {
            subject,
            id,
            version,
            deleted,
            print_schema,
        } => {
            let got = get(&r, subject.as_deref(), id, &version, deleted).await?;
            if print_schema {
                // One id is one schema text; a subject's version too.
                let text = got.0.first().map(|s| s.schema.as_str()).unwrap_or_default();
                println!("{}", text.trim_end());
            } else {
                output::print(&got, f)?;
            }
        }
        SchemaCmd::List { subjects, deleted } => {
            output::print(&list(&r, &subjects, deleted).await?, f)?
        }
        SchemaCmd::Delete {
            subject,
            version,
            permanent,
        } => output::print(&delete(&r, &subject, &version, permanent).await?, f)?,
        SchemaCmd::CheckCompatibility {
            subject,
            schema,
            version,
        } => {
            let c = check(&r, &subject, &schema, &version).await?;
            output::print(&c, f)?;
            if !c.compatible {
                return Err(CliError::Incompatible(format!("{subject} ({version})")));
            }
        }
        SchemaCmd::Subject(SubjectCmd::List { deleted }) => {
            let q = if deleted { "?deleted=true" } else { "" };
            let v = r.get(&format!("/subjects{q}"), "listing subjects").await?;
            let subjects: Vec<String> = serde_json::from_value(v)
                .map_err(|e| CliError::Client(format!("listing subjects: {e}")))?;
            output::print(&Subjects(subjects), f)?
        }
        SchemaCmd::Subject(SubjectCmd::Delete {
            subjects,
            permanent,
        }) => {
            let mut out = Vec::new();
            for s in subjects {
                out.push(delete_subject(&r, &s, permanent).await);
            }
            let failed = out.iter().filter(|x| x.error.is_some()).count();
            print_items(&SubjectsDeleted(out), f, failed)?
        }
        SchemaCmd::CompatibilityLevel(cmd) => {
            let out = levels(&r, cmd).await;
            let failed = out.iter().filter(|x| x.error.is_some()).count();
            print_items(&Settings(out), f, failed)?
        }
        SchemaCmd::Mode(cmd) => {
            let out = modes(&r, cmd).await;
            let failed = out.iter().filter(|x| x.error.is_some()).count();
            print_items(&Settings(out), f, failed)?
        }
    }
    Ok(())
}

/// Prints per-item results; some failed → `Partial` (exit 1), each error already shown.
fn print_items<T: Render>(v: &T, f: Format, failed: usize) -> Result<(), CliError> {
    output::print(v, f)?;
    let total = serde_json::to_value(v)
        .ok()
        .and_then(|j| j.as_array().map(Vec::len))
        .unwrap_or(failed);
    if failed > 0 {
        return Err(CliError::Partial { failed, total });
    }
    Ok(())
}

/// A registry error as the JSON output carries it for one item.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ItemError {
    /// Confluent's `error_code` (40401, …; the HTTP status when the body had none).
    pub code: i64,
    pub http_status: u16,
    pub message: String,
}

impl ItemError {
    pub(super) fn of(e: CliError) -> ItemError {
        match e {
            CliError::Registry {
                status,
                code,
                message,
                ..
            } => ItemError {
                code,
                http_status: status,
                message,
            },
            other => ItemError {
                code: 0,
                http_status: 0,
                message: other.to_string(),
            },
        }
    }

    pub(super) fn cell(e: &Option<ItemError>) -> String {
        match e {
            None => "-".into(),
            Some(e) => format!("{} ({})", e.message, e.code),
        }
    }
}
