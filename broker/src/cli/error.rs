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
/// `cluster health`: the cluster answered but is not healthy.
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
            CliError::Kafka { .. } | CliError::Partial { .. } | CliError::Client(_) => EXIT_KAFKA,
            CliError::Usage(_) => EXIT_USAGE,
            CliError::Unreachable { .. } => EXIT_UNREACHABLE,
            CliError::Unhealthy => EXIT_UNHEALTHY,
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
        29..=31 => "the principal is not allowed to do this: check the ACLs",
        35 => "the broker does not support this request version",
        36 => "the topic exists: inspect it with `strom topic describe TOPIC`",
        37 => "partitions must be at least 1 (or -1 for the broker's num.partitions)",
        38 => "the replication factor cannot exceed the number of brokers (`strom cluster info`)",
        40 => "check the config name and value: `strom topic describe TOPIC` lists the valid names",
        44 => "the broker's policy refused it (e.g. a compact-only topic for trim-prefix)",
        68 => "the group has active members: stop its consumers first",
        69 => "no such group: `strom group list` shows the groups",
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
