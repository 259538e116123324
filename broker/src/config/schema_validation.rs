//! Which records of a topic must carry a registered schema id, read from the topic's
//! configs (Confluent Server's `confluent.*.schema.validation` and Redpanda's
//! `redpanda.*.schema.id.validation` names, with their subject name strategies). The check
//! itself is `partition::schema_ids`.

use std::collections::BTreeMap;

/// Confluent's subject name strategies (`confluent.value.subject.name.strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// `{topic}-key` / `{topic}-value`.
    #[default]
    TopicName,
    /// The schema's fully-qualified record name.
    RecordName,
    /// `{topic}-{record name}`.
    TopicRecordName,
}

impl Strategy {
    /// Confluent's class names (with or without the package) and Redpanda's short names.
    pub fn parse(s: &str) -> Option<Strategy> {
        let short = s.rsplit('.').next().unwrap_or(s);
        match short {
            "TopicNameStrategy" | "topic_name" => Some(Strategy::TopicName),
            "RecordNameStrategy" | "record_name" => Some(Strategy::RecordName),
            "TopicRecordNameStrategy" | "topic_record_name" => Some(Strategy::TopicRecordName),
            _ => None,
        }
    }
}

/// Strom's topic config for deep validation (the payload decoded with its schema).
pub const DEEP: &str = "strom.schema.validation.deep";

/// What to validate on one topic, read from its configs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicValidation {
    pub key: bool,
    pub value: bool,
    pub key_strategy: Strategy,
    pub value_strategy: Strategy,
    /// `strom.schema.validation.deep`: also decode each validated key/value with its schema.
    pub deep: bool,
}

impl TopicValidation {
    /// From a topic's config overrides (Confluent's and Redpanda's names).
    pub fn from_configs(configs: &BTreeMap<String, String>) -> TopicValidation {
        let on = |names: &[&str]| {
            names.iter().any(|n| {
                configs
                    .get(*n)
                    .is_some_and(|v| v.eq_ignore_ascii_case("true"))
            })
        };
        let strategy = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| configs.get(*n).and_then(|v| Strategy::parse(v)))
                .unwrap_or_default()
        };
        TopicValidation {
            key: on(&[
                "confluent.key.schema.validation",
                "redpanda.key.schema.id.validation",
            ]),
            value: on(&[
                "confluent.value.schema.validation",
                "redpanda.value.schema.id.validation",
            ]),
            key_strategy: strategy(&[
                "confluent.key.subject.name.strategy",
                "redpanda.key.subject.name.strategy",
            ]),
            value_strategy: strategy(&[
                "confluent.value.subject.name.strategy",
                "redpanda.value.subject.name.strategy",
            ]),
            deep: on(&[DEEP]),
        }
    }

    pub fn enabled(&self) -> bool {
        self.key || self.value
    }
}
