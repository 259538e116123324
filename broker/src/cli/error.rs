//! What can go wrong in a CLI command, and the exit code each means (docs/cli.md, "Exit
//! codes"): scripts branch on the code, people read the message and the hint.

use kafka_protocol::error::ResponseError;

/// The command did what it was asked.
pub const EXIT_OK: i32 = 0;
/// The broker answered with a Kafka error code (for one item or the whole request).
pub const EXIT_KAFKA: i32 = 1;
/// The command line or its input is wrong (clap's own usage errors exit 2 too).
pub const EXIT_USAGE: i32 = 2;
/// No broker could be reached or talked to (connection refused, timeout, broken answer).
pub const EXIT_UNREACHABLE: i32 = 3;
/// The check answered no: `cluster health` not healthy, `schema check-compatibility`
/// incompatible.
pub const EXIT_UNHEALTHY: i32 = 4;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("cannot reach {addr}: {reason}")]
    Unreachable { addr: String, reason: String },
    #[error("{context}: {}{}", kafka_error_name(*code), message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Kafka {
        context: String,
        code: i16,
        message: Option<String>,
    },
    #[error("{0}")]
    Usage(String),
    /// Some items of a command failed; each was reported in the output already.
    #[error("{failed} of {total} failed")]
    Partial { failed: usize, total: usize },
    #[error("the cluster is not healthy")]
    Unhealthy,
    /// The schema registry answered with a Confluent error (`{"error_code", "message"}`).
    #[error("{context}: {message} (error_code {code}, HTTP {status})")]
    Registry {
        context: String,
        status: u16,
        code: i64,
        message: String,
    },
    #[error("cannot reach the schema registry at {url}: {reason}")]
    RegistryUnreachable { url: String, reason: String },
    /// `schema check-compatibility`: the schema could not be registered; the reasons were
    /// printed.
    #[error("the schema is not compatible with {0}")]
    Incompatible(String),
    #[error("{0}")]
    Client(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl CliError {
    pub fn kafka(context: impl Into<String>, code: i16, message: Option<String>) -> CliError {
        CliError::Kafka {
            context: context.into(),
            code,
            message: message.filter(|m| !m.is_empty()),
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Kafka { .. }
            | CliError::Partial { .. }
            | CliError::Client(_)
            | CliError::Registry { .. } => EXIT_KAFKA,
            CliError::Usage(_) => EXIT_USAGE,
            CliError::Unreachable { .. } | CliError::RegistryUnreachable { .. } => EXIT_UNREACHABLE,
            CliError::Unhealthy | CliError::Incompatible(_) => EXIT_UNHEALTHY,
            CliError::Io(e) if e.kind() == std::io::ErrorKind::BrokenPipe => EXIT_OK,
            CliError::Io(_) => EXIT_KAFKA,
        }
    }

    /// What the user can do about it, when we know.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            CliError::Kafka { code, .. } => hint(*code),
            CliError::Unreachable { .. } => Some(
                "is the broker running? Set --brokers HOST:PORT or STROM_BROKERS (default 127.0.0.1:9092)",
            ),
            CliError::Registry { code, .. } => registry_hint(*code),
            CliError::RegistryUnreachable { .. } => Some(
                "is the schema registry running? Set --registry-url URL or STROM_REGISTRY_URL (default http://127.0.0.1:8081)",
            ),
            _ => None,
        }
    }
}

/// Kafka's name for an error code, as its docs and logs write it: `TOPIC_ALREADY_EXISTS (36)`.
pub fn kafka_error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE (0)".to_string(),
        Some(ResponseError::Unknown(c)) => format!("UNKNOWN_ERROR_CODE ({c})"),
        Some(e) => format!("{} ({code})", screaming_snake(&e.to_string())),
    }
}

/// `TopicAlreadyExists` → `TOPIC_ALREADY_EXISTS`.
fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// The error as the JSON output carries it for one item.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ItemError {
    pub code: i16,
    pub name: String,
    pub message: Option<String>,
}

impl ItemError {
    pub fn from_code(code: i16, message: Option<String>) -> Option<ItemError> {
        (code != 0).then(|| ItemError {
            code,
            name: kafka_error_name(code)
                .split(' ')
                .next()
                .unwrap_or_default()
                .to_string(),
            message: message.filter(|m| !m.is_empty()),
        })
    }
}

fn hint(code: i16) -> Option<&'static str> {
    Some(match code {
        1 => "the offset is outside the partition's range: see `strom topic describe TOPIC` for its start and end",
        3 => "check the name with `strom topic list`; topics may be created by `strom topic create`",
        7 => "the broker did not finish in time; check it with `strom cluster health` and retry",
        15 | 14 => "the group coordinator is starting up; retry in a few seconds",
        25 => "the group has active members: stop its consumers first (`strom group describe GROUP`)",
        29..=31 => "the principal is not allowed to do this: check the ACLs (`strom acl list` as a super user)",
        33 => "the broker enables other SASL mechanisms: set --sasl-mechanism",
        35 => "the broker does not support this request version",
        36 => "the topic exists: inspect it with `strom topic describe TOPIC`",
        37 => "partitions must be at least 1 (or -1 for the broker's num.partitions)",
        38 => "the replication factor cannot exceed the number of brokers (`strom cluster info`)",
        40 => "check the config name and value: `strom topic describe TOPIC` lists the valid names",
        44 => "the broker's policy refused it (e.g. a compact-only topic for trim-prefix)",
        54 => "the broker has no authorizer (authorizer.class.name), so it keeps no ACLs",
        58 => "check --user and --password (or STROM_USER, STROM_PASSWORD) and --sasl-mechanism",
        68 => "the group has active members: stop its consumers first",
        69 => "no such group: `strom group list` shows the groups",
        91 => "no such resource: `strom user list` shows the users and their mechanisms",
        _ => return None,
    })
}

/// What to do about Confluent's registry error codes (docs/schema-registry.md, "Errors").
fn registry_hint(code: i64) -> Option<&'static str> {
    Some(match code {
        40401 => "no such subject: `strom schema subject list` shows the subjects",
        40402 => "no such version: `strom schema list SUBJECT` shows the subject's versions",
        40403 => "no schema has this id: `strom schema list` shows the ids",
        40404 => "the subject is soft-deleted: `--deleted` shows it, `--permanent` removes it",
        40405 | 40407 => "delete it without --permanent first (a soft delete), then with --permanent",
        40406 => "the version is soft-deleted: `--deleted` shows it, `--permanent` removes it",
        409 | 40901 => "the schema breaks the subject's compatibility level: `strom schema check-compatibility` shows why, `strom schema compatibility-level get SUBJECT` shows the level",
        42201 => "check the schema file, its --type and its --references",
        42202 => "a version is 1..2147483647 or `latest`",
        42203 => "levels: NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE",
        42204 => "modes: READWRITE, READONLY, READONLY_OVERRIDE, IMPORT",
        42205 => "the registry's mode forbids it: `strom schema mode get SUBJECT`",
        42206 => "other schemas reference this version: delete them first",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_kafka_codes_when_named_then_as_kafka_writes_them() {
        assert_eq!(kafka_error_name(36), "TOPIC_ALREADY_EXISTS (36)");
        assert_eq!(kafka_error_name(3), "UNKNOWN_TOPIC_OR_PARTITION (3)");
        assert_eq!(kafka_error_name(-1), "UNKNOWN_SERVER_ERROR (-1)");
        assert_eq!(kafka_error_name(9999), "UNKNOWN_ERROR_CODE (9999)");
    }

    #[test]
    fn given_each_error_kind_when_exiting_then_its_documented_code() {
        let cases = [
            (CliError::kafka("x", 36, None), EXIT_KAFKA),
            (CliError::Usage("bad".into()), EXIT_USAGE),
            (
                CliError::Unreachable {
                    addr: "a".into(),
                    reason: "r".into(),
                },
                EXIT_UNREACHABLE,
            ),
            (CliError::Unhealthy, EXIT_UNHEALTHY),
            (CliError::Incompatible("s".into()), EXIT_UNHEALTHY),
            (
                CliError::Registry {
                    context: "c".into(),
                    status: 404,
                    code: 40401,
                    message: "m".into(),
                },
                EXIT_KAFKA,
            ),
            (
                CliError::RegistryUnreachable {
                    url: "u".into(),
                    reason: "r".into(),
                },
                EXIT_UNREACHABLE,
            ),
            (
                CliError::Partial {
                    failed: 1,
                    total: 2,
                },
                EXIT_KAFKA,
            ),
        ];
        for (e, code) in cases {
            assert_eq!(e.exit_code(), code, "{e}");
        }
    }

    #[test]
    fn given_item_codes_when_converted_then_zero_is_no_error() {
        assert!(ItemError::from_code(0, None).is_none());
        let e = ItemError::from_code(36, Some(String::new())).unwrap();
        assert_eq!((e.name.as_str(), e.message), ("TOPIC_ALREADY_EXISTS", None));
    }
}
