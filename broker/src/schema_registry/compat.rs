//! Compatibility levels and which earlier versions a new schema is checked against
//! (Confluent's `CompatibilityChecker`): the latest one for BACKWARD/FORWARD/FULL, every one
//! for the `_TRANSITIVE` levels; BACKWARD means the new schema reads data written with the
//! old, FORWARD the old reads the new, FULL both.

use super::types::Parsed;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    None,
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
}

impl Level {
    /// Confluent's `CompatibilityLevel.forName`: case-insensitive.
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s.to_ascii_uppercase().as_str() {
            "NONE" => Level::None,
            "BACKWARD" => Level::Backward,
            "BACKWARD_TRANSITIVE" => Level::BackwardTransitive,
            "FORWARD" => Level::Forward,
            "FORWARD_TRANSITIVE" => Level::ForwardTransitive,
            "FULL" => Level::Full,
            "FULL_TRANSITIVE" => Level::FullTransitive,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "NONE",
            Level::Backward => "BACKWARD",
            Level::BackwardTransitive => "BACKWARD_TRANSITIVE",
            Level::Forward => "FORWARD",
            Level::ForwardTransitive => "FORWARD_TRANSITIVE",
            Level::Full => "FULL",
            Level::FullTransitive => "FULL_TRANSITIVE",
        }
    }

    fn transitive(self) -> bool {
        matches!(
            self,
            Level::BackwardTransitive | Level::ForwardTransitive | Level::FullTransitive
        )
    }

    fn backward(self) -> bool {
        matches!(
            self,
            Level::Backward | Level::BackwardTransitive | Level::Full | Level::FullTransitive
        )
    }

    fn forward(self) -> bool {
        matches!(
            self,
            Level::Forward | Level::ForwardTransitive | Level::Full | Level::FullTransitive
        )
    }
}

/// The messages of every incompatibility of `new` with `previous` (versions ascending, each
/// with its version number) under `level`; empty means compatible. As Confluent's verbose
/// answer, each failing version adds `{oldSchemaVersion: N}`, `{oldSchema: '...'}` and the
/// level after its errors.
pub fn check(level: Level, new: &Parsed, previous: &[(i32, &Parsed)]) -> Vec<String> {
    if level == Level::None || previous.is_empty() {
        return Vec::new();
    }
    let against: &[(i32, &Parsed)] = if level.transitive() {
        previous
    } else {
        &previous[previous.len() - 1..]
    };
    let mut messages = Vec::new();
    // Newest first, as Confluent iterates.
    for (version, old) in against.iter().rev() {
        let mut errors = Vec::new();
        if level.backward() {
            errors.extend(new.read_errors(old));
        }
        if level.forward() {
            errors.extend(old.read_errors(new));
        }
        if !errors.is_empty() {
            messages.extend(errors);
            messages.push(format!("{{oldSchemaVersion: {version}}}"));
            messages.push(format!("{{oldSchema: '{}'}}", old.canonical()));
            messages.push(format!("{{compatibility: '{}'}}", level.as_str()));
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema_registry::types::{parse, SchemaType};

    fn avro(s: &str) -> Parsed {
        parse(SchemaType::Avro, s, &[], false).unwrap()
    }

    fn record(fields: &str) -> Parsed {
        avro(&format!(
            r#"{{"type":"record","name":"R","fields":[{fields}]}}"#
        ))
    }

    #[test]
    fn given_levels_when_parsing_then_case_insensitive_and_unknown_rejected() {
        assert_eq!(Level::parse("full_transitive"), Some(Level::FullTransitive));
        assert_eq!(Level::parse("Backward"), Some(Level::Backward));
        assert_eq!(Level::parse("sideways"), None);
    }

    #[test]
    fn given_each_level_when_checking_then_direction_and_transitivity_apply() {
        let v1 = record(r#"{"name":"a","type":"int"}"#);
        // v2 drops `a` (old readers need it: not forward) and adds `b` without a default
        // (cannot read v1 data: not backward).
        let v2 = record(r#"{"name":"b","type":"int"}"#);
        // v3 = v1 plus `c` with a default: backward and forward compatible with v1 ...
        let v3 = record(r#"{"name":"a","type":"int"},{"name":"c","type":"int","default":0}"#);
        for (level, prev, ok) in [
            (Level::None, vec![(1, &v1)], true),
            (Level::Backward, vec![(1, &v1)], true),
            (Level::Forward, vec![(1, &v1)], true),
            (Level::Full, vec![(1, &v1)], true),
            // ... but not with v2, which only the transitive levels look at when v1 is latest.
            (Level::Backward, vec![(1, &v2), (2, &v1)], true),
            (Level::BackwardTransitive, vec![(1, &v2), (2, &v1)], false),
            (Level::FullTransitive, vec![(1, &v2), (2, &v1)], false),
            (Level::Forward, vec![(1, &v2)], false),
        ] {
            let msgs = check(level, &v3, &prev);
            assert_eq!(msgs.is_empty(), ok, "{level:?}: {msgs:?}");
        }
        let msgs = check(Level::Backward, &v2, &[(1, &v1)]);
        assert!(
            msgs.iter().any(|m| m == "{oldSchemaVersion: 1}"),
            "{msgs:?}"
        );
        assert!(
            msgs.iter().any(|m| m == "{compatibility: 'BACKWARD'}"),
            "{msgs:?}"
        );
    }
}
