//! Runtime log levels (KIP-412's BROKER_LOGGER config resource): Kafka's loggers are log4j
//! logger names, Strom's are tracing targets (module paths) written with dots as Kafka's
//! are (`strom.handlers` is the target `strom::handlers`: Kafka's kafka-configs tool refuses
//! `:` in a config key), with `root` for the default level. The levels live here; a change rebuilds the `EnvFilter` and
//! swaps it in through tracing-subscriber's reload layer, so it takes effect at once, for the
//! life of the process (Kafka's changes are not persisted either).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use tracing_subscriber::EnvFilter;

/// The levels of the subscriber `init_subscriber` installed, if it ran.
static INSTALLED: OnceLock<Arc<Loggers>> = OnceLock::new();

/// The process's loggers: those of the installed subscriber, else detached ones from
/// `RUST_LOG` (a broker embedded in tests or tools changes nothing but its own view).
pub fn process() -> Arc<Loggers> {
    INSTALLED.get().cloned().unwrap_or_else(|| {
        Arc::new(Loggers::detached(
            &std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
        ))
    })
}

/// Kafka's name for the default logger.
pub const ROOT_LOGGER: &str = "root";

/// The loggers every broker lists even without a level of their own: Strom's modules
/// (tracing targets are module paths) and the storage crate, in Kafka's dotted form.
pub const KNOWN_LOGGERS: &[&str] = &[
    "strom",
    "strom.config",
    "strom.coordinator",
    "strom.fetch_session",
    "strom.handlers",
    "strom.metadata",
    "strom.metrics",
    "strom.migrate",
    "strom.partition",
    "strom.schema_registry",
    "strom.server",
    "strom.shard",
    "storage",
];

/// Kafka's log levels (`LogLevelConfig.VALID_LOG_LEVELS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Off,
    Fatal,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl Level {
    /// Kafka's list as its error message prints it (sorted by name).
    pub const VALID: &'static str = "DEBUG, ERROR, FATAL, INFO, OFF, TRACE, WARN";

    /// Kafka compares the names exactly (upper case).
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "OFF" => Level::Off,
            "FATAL" => Level::Fatal,
            "ERROR" => Level::Error,
            "WARN" => Level::Warn,
            "INFO" => Level::Info,
            "DEBUG" => Level::Debug,
            "TRACE" => Level::Trace,
            _ => return None,
        })
    }

    /// From a tracing directive's level (any case).
    fn from_directive(s: &str) -> Option<Level> {
        Some(match s.to_ascii_lowercase().as_str() {
            "off" => Level::Off,
            "error" => Level::Error,
            "warn" => Level::Warn,
            "info" => Level::Info,
            "debug" => Level::Debug,
            "trace" => Level::Trace,
            _ => return None,
        })
    }

    pub fn kafka_name(self) -> &'static str {
        match self {
            Level::Off => "OFF",
            Level::Fatal => "FATAL",
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        }
    }

    /// tracing has no FATAL: Kafka's FATAL keeps only the most severe events, ERROR.
    fn directive(self) -> &'static str {
        match self {
            Level::Off => "off",
            Level::Fatal | Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
            Level::Trace => "trace",
        }
    }
}

/// A tracing target's logger name (`a::b` → `a.b`).
fn logger_name(target: &str) -> String {
    target.replace("::", ".")
}

/// Installs a new filter (the reload handle of the running subscriber).
type Apply = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

struct State {
    root: Level,
    levels: BTreeMap<String, Level>,
    /// Directives we do not model as logger levels (span or field filters): kept verbatim.
    other: Vec<String>,
}

/// The process's log levels.
pub struct Loggers {
    state: Mutex<State>,
    apply: Option<Apply>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoggerError {
    #[error("Logger {0} does not exist!")]
    UnknownLogger(String),
    #[error(
        "Cannot set the log level of {0} to {1} as it is not a supported log level. Valid log levels are {valid}",
        valid = Level::VALID
    )]
    InvalidLevel(String, String),
    #[error("Removing the log level of the root logger is not allowed")]
    RemoveRoot,
    #[error("failed to install the log filter: {0}")]
    Install(String),
}

impl Loggers {
    /// Levels from an `EnvFilter` directive string (`RUST_LOG` syntax), not connected to a
    /// subscriber (tests, tools).
    pub fn detached(directives: &str) -> Loggers {
        let mut state = State {
            root: Level::Info,
            levels: BTreeMap::new(),
            other: Vec::new(),
        };
        for d in directives
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
        {
            match d.split_once('=') {
                None => match Level::from_directive(d) {
                    Some(l) => state.root = l,
                    // A bare target enables everything from it.
                    None if !d.contains(['[', '{']) => {
                        state.levels.insert(logger_name(d), Level::Trace);
                    }
                    None => state.other.push(d.into()),
                },
                Some((target, level)) if !target.contains(['[', '{']) => {
                    match Level::from_directive(level) {
                        Some(l) => {
                            state.levels.insert(logger_name(target), l);
                        }
                        None => state.other.push(d.into()),
                    }
                }
                Some(_) => state.other.push(d.into()),
            }
        }
        Loggers {
            state: Mutex::new(state),
            apply: None,
        }
    }

    /// Installs the process-wide subscriber (stderr, `RUST_LOG` or `info`) with a reload
    /// layer and gives the handle to change its levels.
    pub fn init_subscriber() -> Arc<Loggers> {
        use tracing_subscriber::prelude::*;
        let directives = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into());
        let mut loggers = Loggers::detached(&directives);
        let filter = loggers.filter().unwrap_or_else(|_| EnvFilter::new("info"));
        let (layer, handle) = tracing_subscriber::reload::Layer::new(filter);
        tracing_subscriber::registry()
            .with(layer)
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
            .init();
        loggers.apply = Some(Box::new(move |f| {
            handle.reload(f).map_err(|e| e.to_string())
        }));
        let loggers = Arc::new(loggers);
        let _ = INSTALLED.set(loggers.clone());
        loggers
    }

    fn filter(&self) -> Result<EnvFilter, String> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut parts = vec![s.root.directive().to_string()];
        parts.extend(
            s.levels
                .iter()
                .map(|(t, l)| format!("{}={}", t.replace('.', "::"), l.directive())),
        );
        parts.extend(s.other.iter().cloned());
        EnvFilter::try_new(parts.join(",")).map_err(|e| e.to_string())
    }

    fn exists(&self, s: &State, name: &str) -> bool {
        name == ROOT_LOGGER || KNOWN_LOGGERS.contains(&name) || s.levels.contains_key(name)
    }

    /// Every logger with its effective level (its own, else its nearest ancestor's, else
    /// root's), `root` first, as Kafka's `Log4jController.loggers`.
    pub fn describe(&self) -> Vec<(String, &'static str)> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<&str> = KNOWN_LOGGERS.to_vec();
        names.extend(s.levels.keys().map(String::as_str));
        names.sort_unstable();
        names.dedup();
        let effective = |name: &str| {
            let mut cur = name;
            loop {
                if let Some(l) = s.levels.get(cur) {
                    return *l;
                }
                match cur.rsplit_once('.') {
                    Some((parent, _)) => cur = parent,
                    None => return s.root,
                }
            }
        };
        std::iter::once((ROOT_LOGGER.to_string(), s.root.kafka_name()))
            .chain(
                names
                    .into_iter()
                    .map(|n| (n.to_string(), effective(n).kafka_name())),
            )
            .collect()
    }

    /// Kafka's `RuntimeLoggerManager.validateLogLevelConfigs` for one SET (`Some(level)`) or
    /// DELETE (`None`); APPEND and SUBTRACT are refused by the caller.
    pub fn validate(&self, name: &str, level: Option<&str>) -> Result<(), LoggerError> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !self.exists(&s, name) {
            return Err(LoggerError::UnknownLogger(name.into()));
        }
        match level {
            Some(l) if Level::parse(l).is_none() => {
                Err(LoggerError::InvalidLevel(name.into(), l.into()))
            }
            None if name == ROOT_LOGGER => Err(LoggerError::RemoveRoot),
            _ => Ok(()),
        }
    }

    /// Applies validated changes (SET with a level, DELETE with `None`: the logger follows
    /// its ancestors again) and installs the new filter.
    pub fn apply(&self, changes: &[(String, Option<String>)]) -> Result<(), LoggerError> {
        for (name, level) in changes {
            self.validate(name, level.as_deref())?;
        }
        {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            for (name, level) in changes {
                match level.as_deref().and_then(Level::parse) {
                    Some(l) if name == ROOT_LOGGER => s.root = l,
                    Some(l) => {
                        s.levels.insert(name.clone(), l);
                    }
                    None => {
                        s.levels.remove(name);
                    }
                }
            }
        }
        if let Some(apply) = &self.apply {
            apply(self.filter().map_err(LoggerError::Install)?).map_err(LoggerError::Install)?;
        }
        for (name, level) in changes {
            match level {
                Some(l) => tracing::warn!(logger = %name, level = %l, "updated the log level"),
                None => tracing::warn!(logger = %name, "unset the log level"),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(l: &Loggers, name: &str) -> &'static str {
        l.describe()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("{name} listed"))
    }

    #[test]
    fn given_rust_log_when_described_then_levels_inherit_from_ancestors_and_root() {
        let l = Loggers::detached("warn,strom::handlers=debug,strom::handlers::produce=trace");
        assert_eq!(l.describe()[0], ("root".into(), "WARN"));
        assert_eq!(level(&l, "strom.handlers"), "DEBUG");
        assert_eq!(level(&l, "strom.handlers.produce"), "TRACE");
        assert_eq!(level(&l, "strom.server"), "WARN");
        assert!(l.filter().is_ok());
    }

    #[test]
    fn given_changes_when_applied_then_kafka_validation_and_inheritance() {
        let l = Loggers::detached("info");
        assert_eq!(
            l.validate("nope", Some("DEBUG")),
            Err(LoggerError::UnknownLogger("nope".into()))
        );
        assert_eq!(
            l.validate("strom", Some("debug")).unwrap_err().to_string(),
            "Cannot set the log level of strom to debug as it is not a supported log level. \
             Valid log levels are DEBUG, ERROR, FATAL, INFO, OFF, TRACE, WARN"
        );
        assert_eq!(l.validate("root", None), Err(LoggerError::RemoveRoot));
        l.apply(&[
            ("strom.handlers".into(), Some("DEBUG".into())),
            ("root".into(), Some("ERROR".into())),
        ])
        .unwrap();
        assert_eq!(level(&l, "strom.handlers"), "DEBUG");
        assert_eq!(level(&l, "strom.server"), "ERROR");
        let f = l.filter().unwrap().to_string();
        assert!(f.contains("strom::handlers=debug"), "{f}");
        l.apply(&[("strom.handlers".into(), None)]).unwrap();
        assert_eq!(level(&l, "strom.handlers"), "ERROR");
        // A rejected batch changes nothing.
        assert!(l
            .apply(&[
                ("strom".into(), Some("TRACE".into())),
                ("nope".into(), Some("TRACE".into()))
            ])
            .is_err());
        assert_eq!(level(&l, "strom"), "ERROR");
    }

    #[test]
    fn given_fatal_and_off_when_mapped_then_tracing_levels() {
        assert_eq!(Level::Fatal.directive(), "error");
        assert_eq!(Level::Off.directive(), "off");
        let l = Loggers::detached("info");
        l.apply(&[("storage".into(), Some("FATAL".into()))])
            .unwrap();
        assert_eq!(level(&l, "storage"), "FATAL");
        assert!(l.filter().unwrap().to_string().contains("storage=error"));
    }
}
