//! Broker-side schema id validation (Confluent Server's `confluent.key.schema.validation` /
//! `confluent.value.schema.validation`, Redpanda's `redpanda.key.schema.id.validation` /
//! `redpanda.value.schema.id.validation`): a record whose key or value does not start with
//! the wire format's magic byte 0 and a 4-byte id registered for the subject the topic's
//! naming strategy gives is rejected (INVALID_RECORD, KIP-467 record errors naming it); the
//! other records of the batch are unaffected.
//!
//! A pure function of the topic's settings, the records and a view of the registry, so the
//! produce path can call it on the partition's home shard without I/O (the view is a
//! snapshot the shard keeps). Wiring it into `handlers/produce.rs` is the produce path's job.

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

/// What to validate on one topic, read from its configs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicValidation {
    pub key: bool,
    pub value: bool,
    pub key_strategy: Strategy,
    pub value_strategy: Strategy,
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
        }
    }

    pub fn enabled(&self) -> bool {
        self.key || self.value
    }
}

/// What validation needs of the registry.
pub trait RegistryView {
    /// Whether schema `id` is registered (live) under `subject`.
    fn id_in_subject(&self, id: i32, subject: &str) -> bool;
    /// The fully-qualified record name of schema `id` (Avro's named type, Protobuf's first
    /// message, JSON's `title`), for the record-name strategies.
    fn record_name(&self, id: i32) -> Option<String>;
}

/// Why one record was rejected: its index in the batch and the message for KIP-467's
/// `record_errors`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

/// The schema id of a payload in Confluent's wire format (magic 0, id big-endian).
pub fn schema_id(payload: &[u8]) -> Option<i32> {
    match payload {
        [0, a, b, c, d, ..] => Some(i32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

fn check(
    topic: &str,
    part: &str,
    payload: Option<&[u8]>,
    strategy: Strategy,
    view: &impl RegistryView,
) -> Result<(), String> {
    let payload = payload.ok_or_else(|| format!("the record has no {part}"))?;
    let id = schema_id(payload).ok_or_else(|| {
        format!("the record's {part} does not start with the schema registry's magic byte and id")
    })?;
    let subject = match strategy {
        Strategy::TopicName => format!("{topic}-{part}"),
        Strategy::RecordName | Strategy::TopicRecordName => {
            let name = view.record_name(id).ok_or_else(|| {
                format!("schema id {id} of the record's {part} is not registered")
            })?;
            if strategy == Strategy::RecordName {
                name
            } else {
                format!("{topic}-{name}")
            }
        }
    };
    if view.id_in_subject(id, &subject) {
        Ok(())
    } else {
        Err(format!(
            "schema id {id} of the record's {part} is not registered under subject {subject}"
        ))
    }
}

/// A record's key and value (None: null).
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Validates `(key, value)` of each record of a batch; returns the rejected ones.
pub fn validate<'a>(
    topic: &str,
    settings: &TopicValidation,
    records: impl IntoIterator<Item = KeyValue<'a>>,
    view: &impl RegistryView,
) -> Vec<RecordError> {
    let mut errors = Vec::new();
    if !settings.enabled() {
        return errors;
    }
    for (i, (key, value)) in records.into_iter().enumerate() {
        let mut result = Ok(());
        if settings.key {
            result = check(topic, "key", key, settings.key_strategy, view);
        }
        if result.is_ok() && settings.value {
            result = check(topic, "value", value, settings.value_strategy, view);
        }
        if let Err(message) = result {
            errors.push(RecordError {
                batch_index: i as i32,
                message,
            });
        }
    }
    errors
}

/// The view over the registry's store.
impl RegistryView for super::store::Store {
    fn id_in_subject(&self, id: i32, subject: &str) -> bool {
        self.keys_of_id(id)
            .any(|v| v.value.subject == subject && !v.value.deleted)
    }

    fn record_name(&self, id: i32) -> Option<String> {
        let v = self.keys_of_id(id).next()?;
        record_name_of(&v.value.schema_type, &v.value.schema)
    }
}

/// The record name of a stored (canonical) schema string.
pub fn record_name_of(schema_type: &str, schema: &str) -> Option<String> {
    match schema_type {
        "AVRO" => {
            let v: serde_json::Value = serde_json::from_str(schema).ok()?;
            let name = v.get("name")?.as_str()?;
            match v.get("namespace").and_then(|n| n.as_str()) {
                Some(ns) if !ns.is_empty() && !name.contains('.') => Some(format!("{ns}.{name}")),
                _ => Some(name.to_string()),
            }
        }
        "JSON" => {
            let v: serde_json::Value = serde_json::from_str(schema).ok()?;
            v.get("title")?.as_str().map(str::to_string)
        }
        "PROTOBUF" => {
            // The canonical text: `package p;` then the first top-level `message M {`.
            let package = schema
                .lines()
                .find_map(|l| l.strip_prefix("package ")?.strip_suffix(';'));
            let message = schema
                .lines()
                .find_map(|l| l.strip_prefix("message ")?.strip_suffix(" {"))?;
            Some(match package {
                Some(p) => format!("{p}.{message}"),
                None => message.to_string(),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct View(HashMap<i32, (&'static str, &'static str)>);

    impl RegistryView for View {
        fn id_in_subject(&self, id: i32, subject: &str) -> bool {
            self.0.get(&id).is_some_and(|(s, _)| *s == subject)
        }
        fn record_name(&self, id: i32) -> Option<String> {
            self.0.get(&id).map(|(_, n)| n.to_string())
        }
    }

    fn framed(id: i32) -> Vec<u8> {
        let mut v = vec![0];
        v.extend(id.to_be_bytes());
        v.extend(b"payload");
        v
    }

    #[test]
    fn given_value_validation_when_records_vary_then_only_bad_ones_rejected() {
        let view = View(HashMap::from([
            (1, ("orders-value", "shop.Order")),
            (2, ("users-value", "shop.User")),
        ]));
        let settings = TopicValidation::from_configs(&BTreeMap::from([(
            "confluent.value.schema.validation".to_string(),
            "true".to_string(),
        )]));
        let good = framed(1);
        let other_subject = framed(2);
        let unknown = framed(99);
        let records: Vec<KeyValue> = vec![
            (None, Some(&good)),
            (None, Some(b"no magic")),
            (None, Some(&other_subject)),
            (None, Some(&unknown)),
            (None, None),
            (Some(b"keys are not checked"), Some(&good)),
        ];
        let errors = validate("orders", &settings, records, &view);
        let rejected: Vec<i32> = errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(rejected, vec![1, 2, 3, 4], "{errors:?}");
        assert!(errors[1].message.contains("orders-value"), "{errors:?}");
    }

    #[test]
    fn given_record_name_strategies_then_subject_is_the_record_name() {
        let view = View(HashMap::from([
            (1, ("shop.Order", "shop.Order")),
            (2, ("orders-shop.User", "shop.User")),
        ]));
        let mut settings = TopicValidation {
            value: true,
            value_strategy: Strategy::RecordName,
            ..Default::default()
        };
        let (one, two) = (framed(1), framed(2));
        let batch = || -> Vec<KeyValue> {
            vec![(None, Some(one.as_slice())), (None, Some(two.as_slice()))]
        };
        assert_eq!(validate("orders", &settings, batch(), &view).len(), 1);
        settings.value_strategy = Strategy::TopicRecordName;
        let errors = validate("orders", &settings, batch(), &view);
        assert_eq!(
            errors.iter().map(|e| e.batch_index).collect::<Vec<_>>(),
            vec![0]
        );
    }

    #[test]
    fn given_redpanda_names_and_strategy_classes_then_parsed() {
        let s = TopicValidation::from_configs(&BTreeMap::from([
            (
                "redpanda.key.schema.id.validation".to_string(),
                "TRUE".to_string(),
            ),
            (
                "confluent.key.subject.name.strategy".to_string(),
                "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy".to_string(),
            ),
        ]));
        assert!(s.key && !s.value);
        assert_eq!(s.key_strategy, Strategy::TopicRecordName);
        assert!(!TopicValidation::from_configs(&BTreeMap::new()).enabled());
    }

    #[test]
    fn given_canonical_schemas_then_record_names() {
        assert_eq!(
            record_name_of(
                "AVRO",
                r#"{"type":"record","namespace":"a.b","name":"C","fields":[]}"#
            )
            .as_deref(),
            Some("a.b.C")
        );
        assert_eq!(
            record_name_of(
                "PROTOBUF",
                "syntax = \"proto3\";\npackage p;\n\nmessage M {\n}\n"
            )
            .as_deref(),
            Some("p.M")
        );
        assert_eq!(
            record_name_of("JSON", r#"{"title":"T"}"#).as_deref(),
            Some("T")
        );
        assert_eq!(schema_id(&[0, 0, 0, 1, 2]), Some(258));
        assert_eq!(schema_id(&[1, 0, 0, 0, 1]), None);
        assert_eq!(schema_id(&[0, 0, 0]), None);
    }
}
