//! Broker-side schema id validation (Confluent Server's `confluent.key.schema.validation` /
//! `confluent.value.schema.validation`, Redpanda's `redpanda.key.schema.id.validation` /
//! `redpanda.value.schema.id.validation`): a record whose key or value does not start with
//! the wire format's magic byte 0 and a 4-byte id registered for the subject the topic's
//! naming strategy gives is rejected (INVALID_RECORD, KIP-467 record errors naming it); the
//! other records of the batch are unaffected.
//!
//! A pure function of the topic's settings, the records and a view of the registry
//! (`SchemaView`, implemented by `schema_registry` and handed to the broker context at start),
//! called where the produce path reads a batch's records (`validate_produce_records`).

pub use crate::config::schema_validation::{Strategy, TopicValidation};

/// What validation needs of the registry.
pub trait SchemaView: Send + Sync {
    /// Whether schema `id` is registered (live) under `subject`.
    fn id_in_subject(&self, id: i32, subject: &str) -> bool;
    /// The fully-qualified record name of schema `id` (Avro's named type, Protobuf's first
    /// message, JSON's `title`), for the record-name strategies.
    fn record_name(&self, id: i32) -> Option<String>;
    /// `payload` read through its schema, when it is in the wire format (None otherwise):
    /// the console's message browser shows records so.
    fn decode(&self, _payload: &[u8]) -> Option<Decoded> {
        None
    }
    /// Deep validation (`strom.schema.validation.deep`): why the wire-format `payload` is not
    /// what its schema describes (it does not decode, or a JSON document breaks its schema).
    fn conforms(&self, _payload: &[u8]) -> Result<(), String> {
        Ok(())
    }
}

/// A wire-format payload read through the schema its id names.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub schema_id: i32,
    /// AVRO, PROTOBUF or JSON; None when the registry does not know the id.
    pub schema_type: Option<&'static str>,
    /// The payload as JSON, or why it could not be read.
    pub json: Result<serde_json::Value, String>,
}

/// Why one record was rejected: its index in the batch and the message for KIP-467's
/// `record_errors`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

/// The view when no registry runs: no schema id is registered.
pub struct NoRegistry;

impl SchemaView for NoRegistry {
    fn id_in_subject(&self, _: i32, _: &str) -> bool {
        false
    }
    fn record_name(&self, _: i32) -> Option<String> {
        None
    }
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
    (strategy, deep): (Strategy, bool),
    view: &(impl SchemaView + ?Sized),
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
    if !view.id_in_subject(id, &subject) {
        return Err(format!(
            "schema id {id} of the record's {part} is not registered under subject {subject}"
        ));
    }
    if deep {
        view.conforms(payload)
            .map_err(|e| format!("the record's {part} does not match schema id {id}: {e}"))?;
    }
    Ok(())
}

/// One record's check: `Err` with the message for KIP-467's `record_errors`.
pub fn check_record(
    topic: &str,
    settings: &TopicValidation,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    view: &(impl SchemaView + ?Sized),
) -> Result<(), String> {
    if settings.key {
        check(
            topic,
            "key",
            key,
            (settings.key_strategy, settings.deep),
            view,
        )?;
    }
    if settings.value {
        check(
            topic,
            "value",
            value,
            (settings.value_strategy, settings.deep),
            view,
        )?;
    }
    Ok(())
}

/// A record's key and value (None: null).
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Validates `(key, value)` of each record of a batch; returns the rejected ones.
pub fn validate<'a>(
    topic: &str,
    settings: &TopicValidation,
    records: impl IntoIterator<Item = KeyValue<'a>>,
    view: &(impl SchemaView + ?Sized),
) -> Vec<RecordError> {
    let mut errors = Vec::new();
    if !settings.enabled() {
        return errors;
    }
    for (i, (key, value)) in records.into_iter().enumerate() {
        if let Err(message) = check_record(topic, settings, key, value, view) {
            errors.push(RecordError {
                batch_index: i as i32,
                message,
            });
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::collections::HashMap;

    struct View(HashMap<i32, (&'static str, &'static str)>);

    impl SchemaView for View {
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

    /// A view whose schema reads only payloads that end in "ok".
    struct Picky(View);

    impl SchemaView for Picky {
        fn id_in_subject(&self, id: i32, subject: &str) -> bool {
            self.0.id_in_subject(id, subject)
        }
        fn record_name(&self, id: i32) -> Option<String> {
            self.0.record_name(id)
        }
        fn conforms(&self, payload: &[u8]) -> Result<(), String> {
            payload
                .ends_with(b"ok")
                .then_some(())
                .ok_or_else(|| "unreadable".into())
        }
    }

    #[test]
    fn given_deep_validation_when_a_payload_does_not_decode_then_only_it_is_rejected() {
        let view = Picky(View(HashMap::from([(1, ("orders-value", "shop.Order"))])));
        let mut settings = TopicValidation::from_configs(&BTreeMap::from([
            ("confluent.value.schema.validation".into(), "true".into()),
            (crate::config::schema_validation::DEEP.into(), "true".into()),
        ]));
        assert!(settings.deep);
        let (mut good, bad) = (framed(1), framed(1));
        good.extend(b"ok");
        let batch = || -> Vec<KeyValue> { vec![(None, Some(&good)), (None, Some(&bad))] };
        let errors = validate("orders", &settings, batch(), &view);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].batch_index, 1);
        assert!(
            errors[0]
                .message
                .contains("does not match schema id 1: unreadable"),
            "{errors:?}"
        );
        settings.deep = false;
        assert!(validate("orders", &settings, batch(), &view).is_empty());
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
    fn given_wire_format_payloads_then_schema_ids() {
        assert_eq!(schema_id(&[0, 0, 0, 1, 2]), Some(258));
        assert_eq!(schema_id(&[1, 0, 0, 0, 1]), None);
        assert_eq!(schema_id(&[0, 0, 0]), None);
    }
}
