//! The records of the `_schemas` topic, byte for byte as Confluent's `KafkaStore` writes them
//! (Jackson with `@JsonPropertyOrder` and `Include.NON_EMPTY`: absent and empty fields are
//! left out, the rest in Confluent's order), so a `_schemas` topic mirrored from a Kafka
//! cluster replays here with the same ids, and one written here replays in Confluent's.
//!
//! Keys (`SchemaRegistryKey` and subclasses):
//! - `{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}`
//! - `{"keytype":"CONFIG","subject":"s","magic":0}` (global: no `subject`)
//! - `{"keytype":"MODE","subject":"s","magic":0}` (global: no `subject`)
//! - `{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}`
//! - `{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}`
//! - `{"keytype":"NOOP","magic":0}`
//!
//! Values: `SchemaValue`, `ConfigValue`, `ModeValue`, `DeleteSubjectValue`,
//! `ClearSubjectValue` below; a null value is a tombstone. Keys of other types (Confluent's
//! `CONTEXT`, `ASSOC`) are kept as `Other` and ignored: this registry has no contexts.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A `_schemas` key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryKey {
    Schema { subject: String, version: i32 },
    Config { subject: Option<String> },
    Mode { subject: Option<String> },
    DeleteSubject { subject: String },
    ClearSubject { subject: String },
    Noop,
    Other(String),
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("_schemas key is not JSON: {0}")]
    KeyJson(#[source] serde_json::Error),
    #[error("_schemas key has no keytype")]
    NoKeyType,
    #[error("_schemas key of type {keytype} lacks {field}")]
    MissingField {
        keytype: &'static str,
        field: &'static str,
    },
    #[error("_schemas value for {key:?} is not valid: {source}")]
    Value {
        key: RegistryKey,
        #[source]
        source: serde_json::Error,
    },
    #[error("unsupported SCHEMA key magic {0}")]
    Magic(i64),
}

/// Key fields in Confluent's order. `subject` and `version` are omitted when absent.
#[derive(Serialize)]
struct KeyOut<'a> {
    keytype: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    subject: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<i32>,
    magic: i32,
}

impl RegistryKey {
    pub fn encode(&self) -> Vec<u8> {
        let (keytype, subject, version, magic) = match self {
            RegistryKey::Schema { subject, version } => {
                ("SCHEMA", Some(subject.as_str()), Some(*version), 1)
            }
            RegistryKey::Config { subject } => ("CONFIG", subject.as_deref(), None, 0),
            RegistryKey::Mode { subject } => ("MODE", subject.as_deref(), None, 0),
            RegistryKey::DeleteSubject { subject } => {
                ("DELETE_SUBJECT", Some(subject.as_str()), None, 0)
            }
            RegistryKey::ClearSubject { subject } => {
                ("CLEAR_SUBJECT", Some(subject.as_str()), None, 0)
            }
            RegistryKey::Noop => ("NOOP", None, None, 0),
            RegistryKey::Other(raw) => return raw.as_bytes().to_vec(),
        };
        serde_json::to_vec(&KeyOut {
            keytype,
            subject,
            version,
            magic,
        })
        .expect("a key of strings and numbers always serializes")
    }

    pub fn decode(bytes: &[u8]) -> Result<RegistryKey, RecordError> {
        let v: Value = serde_json::from_slice(bytes).map_err(RecordError::KeyJson)?;
        let keytype = v
            .get("keytype")
            .and_then(Value::as_str)
            .ok_or(RecordError::NoKeyType)?;
        // Confluent's older versions wrote `"subject":null` for the global config and mode.
        let subject = v.get("subject").and_then(Value::as_str).map(str::to_string);
        let need_subject = |keytype: &'static str| {
            subject.clone().ok_or(RecordError::MissingField {
                keytype,
                field: "subject",
            })
        };
        Ok(match keytype {
            "SCHEMA" => {
                let magic = v.get("magic").and_then(Value::as_i64).unwrap_or(0);
                // SchemaRegistrySerializer.validateMagicByte: 0 and 1 are readable.
                if magic != 0 && magic != 1 {
                    return Err(RecordError::Magic(magic));
                }
                let version =
                    v.get("version")
                        .and_then(Value::as_i64)
                        .ok_or(RecordError::MissingField {
                            keytype: "SCHEMA",
                            field: "version",
                        })?;
                RegistryKey::Schema {
                    subject: need_subject("SCHEMA")?,
                    version: version as i32,
                }
            }
            "CONFIG" => RegistryKey::Config { subject },
            "MODE" => RegistryKey::Mode { subject },
            "DELETE_SUBJECT" => RegistryKey::DeleteSubject {
                subject: need_subject("DELETE_SUBJECT")?,
            },
            "CLEAR_SUBJECT" => RegistryKey::ClearSubject {
                subject: need_subject("CLEAR_SUBJECT")?,
            },
            "NOOP" => RegistryKey::Noop,
            _ => RegistryKey::Other(String::from_utf8_lossy(bytes).into_owned()),
        })
    }
}

/// A schema reference (Confluent's `SchemaReference`: `name`, `subject`, `version`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SchemaReference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

fn avro() -> String {
    "AVRO".to_string()
}

/// Confluent's `SchemaValue`, fields in its (creator) order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaValue {
    pub subject: String,
    pub version: i32,
    pub id: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    #[serde(rename = "schemaType", default = "avro")]
    pub schema_type: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<SchemaReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    #[serde(rename = "ruleSet", default, skip_serializing_if = "Option::is_none")]
    pub rule_set: Option<Value>,
    pub schema: String,
    #[serde(default)]
    pub deleted: bool,
}

/// Confluent's `ConfigValue` (the fields this registry acts on, plus whatever else the
/// record carried, kept so a read-modify-write does not drop it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigValue {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalize: Option<bool>,
    #[serde(
        rename = "validateFields",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub validate_fields: Option<bool>,
    #[serde(
        rename = "compatibilityLevel",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub compatibility_level: Option<String>,
    #[serde(
        rename = "compatibilityGroup",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub compatibility_group: Option<String>,
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

/// Confluent's `ModeValue`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeValue {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub mode: String,
}

/// Confluent's `DeleteSubjectValue`: every version up to `version` is soft-deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeleteSubjectValue {
    pub subject: String,
    pub version: i32,
}

/// Confluent's `ClearSubjectValue`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClearSubjectValue {
    pub subject: String,
}

/// A decoded value; `None` from `decode_value` is a tombstone.
#[derive(Debug, Clone, PartialEq)]
pub enum RegistryValue {
    Schema(SchemaValue),
    Config(ConfigValue),
    Mode(ModeValue),
    DeleteSubject(DeleteSubjectValue),
    ClearSubject(ClearSubjectValue),
    /// NOOP markers and keys of types this registry does not use.
    Ignored,
}

impl RegistryValue {
    pub fn encode(&self) -> Option<Vec<u8>> {
        let v = match self {
            RegistryValue::Schema(v) => serde_json::to_vec(v),
            RegistryValue::Config(v) => serde_json::to_vec(v),
            RegistryValue::Mode(v) => serde_json::to_vec(v),
            RegistryValue::DeleteSubject(v) => serde_json::to_vec(v),
            RegistryValue::ClearSubject(v) => serde_json::to_vec(v),
            RegistryValue::Ignored => return None,
        };
        Some(v.expect("registry values always serialize"))
    }
}

/// Decodes the value of `key`; `Ok(None)` is a tombstone.
pub fn decode_value(
    key: &RegistryKey,
    bytes: Option<&[u8]>,
) -> Result<Option<RegistryValue>, RecordError> {
    let Some(bytes) = bytes else { return Ok(None) };
    let err = |source| RecordError::Value {
        key: key.clone(),
        source,
    };
    Ok(Some(match key {
        RegistryKey::Schema { .. } => {
            RegistryValue::Schema(serde_json::from_slice(bytes).map_err(err)?)
        }
        RegistryKey::Config { subject } => {
            let mut v: ConfigValue = serde_json::from_slice(bytes).map_err(err)?;
            // KafkaStoreMessageHandler: legacy values have no subject; the key's counts.
            if v.subject.is_none() {
                v.subject = subject.clone();
            }
            RegistryValue::Config(v)
        }
        RegistryKey::Mode { subject } => {
            let mut v: ModeValue = serde_json::from_slice(bytes).map_err(err)?;
            if v.subject.is_none() {
                v.subject = subject.clone();
            }
            RegistryValue::Mode(v)
        }
        RegistryKey::DeleteSubject { .. } => {
            RegistryValue::DeleteSubject(serde_json::from_slice(bytes).map_err(err)?)
        }
        RegistryKey::ClearSubject { .. } => {
            RegistryValue::ClearSubject(serde_json::from_slice(bytes).map_err(err)?)
        }
        RegistryKey::Noop | RegistryKey::Other(_) => RegistryValue::Ignored,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_keys_when_encoding_then_confluent_bytes() {
        let k = RegistryKey::Schema {
            subject: "orders-value".into(),
            version: 3,
        };
        assert_eq!(
            String::from_utf8(k.encode()).unwrap(),
            r#"{"keytype":"SCHEMA","subject":"orders-value","version":3,"magic":1}"#
        );
        assert_eq!(
            String::from_utf8(RegistryKey::Config { subject: None }.encode()).unwrap(),
            r#"{"keytype":"CONFIG","magic":0}"#
        );
        assert_eq!(
            String::from_utf8(
                RegistryKey::DeleteSubject {
                    subject: "s".into()
                }
                .encode()
            )
            .unwrap(),
            r#"{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}"#
        );
        for k in [
            k,
            RegistryKey::Mode {
                subject: Some("m".into()),
            },
            RegistryKey::ClearSubject {
                subject: "c".into(),
            },
            RegistryKey::Noop,
        ] {
            assert_eq!(RegistryKey::decode(&k.encode()).unwrap(), k);
        }
    }

    #[test]
    fn given_confluent_legacy_global_config_key_when_decoding_then_global() {
        let k = RegistryKey::decode(br#"{"keytype":"CONFIG","subject":null,"magic":0}"#).unwrap();
        assert_eq!(k, RegistryKey::Config { subject: None });
        let v = decode_value(&k, Some(br#"{"compatibilityLevel":"FULL"}"#))
            .unwrap()
            .unwrap();
        let RegistryValue::Config(c) = v else {
            panic!("{v:?}")
        };
        assert_eq!(c.compatibility_level.as_deref(), Some("FULL"));
    }

    #[test]
    fn given_schema_value_when_encoding_then_confluent_field_order() {
        let v = SchemaValue {
            subject: "t-value".into(),
            version: 1,
            id: 7,
            md5: None,
            schema_type: "PROTOBUF".into(),
            references: vec![SchemaReference {
                name: "dep.proto".into(),
                subject: "dep".into(),
                version: 2,
            }],
            metadata: None,
            rule_set: None,
            schema: "syntax = \"proto3\";".into(),
            deleted: false,
        };
        let bytes = RegistryValue::Schema(v.clone()).encode().unwrap();
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            r#"{"subject":"t-value","version":1,"id":7,"schemaType":"PROTOBUF","references":[{"name":"dep.proto","subject":"dep","version":2}],"schema":"syntax = \"proto3\";","deleted":false}"#
        );
        let key = RegistryKey::Schema {
            subject: "t-value".into(),
            version: 1,
        };
        assert_eq!(
            decode_value(&key, Some(&bytes)).unwrap(),
            Some(RegistryValue::Schema(v))
        );
        // Confluent before 5.5 wrote no schemaType: Avro.
        let old = decode_value(
            &key,
            Some(br#"{"subject":"t-value","version":1,"id":1,"schema":"\"string\"","deleted":false}"#),
        )
        .unwrap();
        let Some(RegistryValue::Schema(old)) = old else {
            panic!()
        };
        assert_eq!(old.schema_type, "AVRO");
        assert_eq!(decode_value(&key, None).unwrap(), None);
    }

    #[test]
    fn given_garbage_when_decoding_then_error_not_panic() {
        assert!(RegistryKey::decode(b"\xff").is_err());
        assert!(RegistryKey::decode(b"{}").is_err());
        assert!(RegistryKey::decode(br#"{"keytype":"SCHEMA","subject":"s"}"#).is_err());
        let k = RegistryKey::Schema {
            subject: "s".into(),
            version: 1,
        };
        assert!(decode_value(&k, Some(b"[1]")).is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            if let Ok(k) = RegistryKey::decode(&bytes) {
                let _ = decode_value(&k, Some(&bytes));
            }
        }

        #[test]
        fn schema_keys_round_trip(subject in ".{0,40}", version in 1i32..i32::MAX) {
            let k = RegistryKey::Schema { subject, version };
            proptest::prop_assert_eq!(RegistryKey::decode(&k.encode()).unwrap(), k);
        }
    }
}
