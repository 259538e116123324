//! What a valid embedding is on a topic that carries vectors (issue 20): the topic configs
//! `strom.embedding.*`, read the same way by the broker (which refuses a bad vector at
//! produce, KIP-467 record errors) and by the sinks here (which never write one). One
//! definition, so the produce path and the sinks can never disagree on what "bad" means.
//!
//! - `strom.embedding.format`: empty (no check), `f32le` (the value is the raw vector,
//!   little-endian f32s) or `json` (the value is JSON; the vector is the array of numbers at
//!   `strom.embedding.field`, an RFC 6901 JSON pointer, empty = the whole value).
//! - `strom.embedding.dimension`: 0 = any, else exactly this many elements.
//! - every element finite (no NaN, no ±Inf, no JSON number beyond f32's range).
//! - `strom.embedding.normalized` = true: |‖v‖₂ − 1| ≤ `strom.embedding.normalized.epsilon`.

use serde_json::Value;

pub const FORMAT: &str = "strom.embedding.format";
pub const FIELD: &str = "strom.embedding.field";
pub const DIMENSION: &str = "strom.embedding.dimension";
pub const NORMALIZED: &str = "strom.embedding.normalized";
pub const EPSILON: &str = "strom.embedding.normalized.epsilon";

/// Every `strom.embedding.*` key with its default.
pub const KEYS: &[(&str, &str)] = &[
    (FORMAT, ""),
    (FIELD, ""),
    (DIMENSION, "0"),
    (NORMALIZED, "false"),
    (EPSILON, "0.001"),
];

/// Largest dimension accepted (pgvector's and Milvus's limits are below it).
pub const MAX_DIMENSION: u32 = 65_535;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Raw little-endian f32s, the whole record value.
    F32Le,
    /// A JSON document; the vector is the array at the field pointer.
    Json,
}

/// A topic's embedding rules; `None` from [`EmbeddingSpec::from_configs`] means no check.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingSpec {
    pub format: Format,
    /// JSON pointer (RFC 6901) to the vector in a `json` value; empty = the whole value.
    pub field: String,
    /// Exact number of elements; None = any (but at least one).
    pub dimension: Option<u32>,
    /// The allowed |‖v‖ − 1| when vectors must be unit length.
    pub normalized: Option<f32>,
}

/// Why a record's vector is refused: the message goes into the KIP-467 record error and
/// the sinks' dead-letter reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EmbeddingError {
    #[error("record has no value (strom.embedding.format requires a vector)")]
    NoValue,
    #[error("f32le vector of {0} bytes is not a whole number of f32s")]
    Ragged(usize),
    #[error("value is not JSON: {0}")]
    NotJson(String),
    #[error("no vector at JSON pointer {0:?}")]
    Missing(String),
    #[error("{0}")]
    NotVector(String),
    #[error("vector is empty")]
    Empty,
    #[error("vector has dimension {found}, topic requires {expected}")]
    Dimension { expected: u32, found: usize },
    #[error("vector element {0} is NaN or infinite")]
    NotFinite(usize),
    #[error("vector norm {norm} is not 1 within {epsilon}")]
    NotNormalized { norm: f32, epsilon: f32 },
}

/// A bad value for one of the keys: the key and why (the INVALID_CONFIG message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid value {value} for configuration {key}: {reason}")]
pub struct ConfigError {
    pub key: String,
    pub value: String,
    pub reason: String,
}

/// Checks one `strom.embedding.*` value (`Ok` for keys that are not ours).
pub fn validate_config(key: &str, value: &str) -> Result<(), ConfigError> {
    let v = value.trim();
    let bad = |reason: &str| ConfigError {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    };
    match key {
        FORMAT if !matches!(v, "" | "f32le" | "json") => Err(bad(
            "String must be one of: f32le, json (or empty for none)",
        )),
        FIELD if !v.is_empty() && !v.starts_with('/') => Err(bad(
            "Expected a JSON pointer (RFC 6901): empty for the whole value, or starting with /",
        )),
        DIMENSION => match v.parse::<u32>() {
            Ok(d) if d <= MAX_DIMENSION => Ok(()),
            _ => Err(bad(&format!(
                "Value must be between 0 (any) and {MAX_DIMENSION}"
            ))),
        },
        NORMALIZED if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") => {
            Err(bad("Expected value to be either true or false"))
        }
        EPSILON => match v.parse::<f32>() {
            Ok(e) if e.is_finite() && e > 0.0 && e < 1.0 => Ok(()),
            _ => Err(bad("Value must be a number above 0 and below 1")),
        },
        _ => Ok(()),
    }
}

impl EmbeddingSpec {
    /// From a topic's configs (`get` answers the value of a key, None when unset). Values
    /// were validated when set ([`validate_config`]); one that does not parse falls back to
    /// its default here.
    pub fn from_configs<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Option<EmbeddingSpec> {
        let format = match get(FORMAT).map(str::trim) {
            Some("f32le") => Format::F32Le,
            Some("json") => Format::Json,
            _ => return None,
        };
        let dimension = get(DIMENSION)
            .and_then(|d| d.trim().parse::<u32>().ok())
            .filter(|d| *d > 0);
        let normalized = get(NORMALIZED)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            .then(|| {
                get(EPSILON)
                    .and_then(|e| e.trim().parse::<f32>().ok())
                    .filter(|e| e.is_finite() && *e > 0.0)
                    .unwrap_or(1e-3)
            });
        Some(EmbeddingSpec {
            format,
            field: get(FIELD).unwrap_or("").trim().to_string(),
            dimension,
            normalized,
        })
    }

    /// Checks a record value: the vector is extracted by the format, then [`Self::check`].
    pub fn check_value(&self, value: Option<&[u8]>) -> Result<(), EmbeddingError> {
        let value = value.ok_or(EmbeddingError::NoValue)?;
        match self.format {
            Format::F32Le => {
                if value.len() % 4 != 0 {
                    return Err(EmbeddingError::Ragged(value.len()));
                }
                let v: Vec<f32> = value
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                self.check(&v)
            }
            Format::Json => {
                let doc: Value = serde_json::from_slice(value)
                    .map_err(|e| EmbeddingError::NotJson(e.to_string()))?;
                let at = doc
                    .pointer(&self.field)
                    .ok_or_else(|| EmbeddingError::Missing(self.field.clone()))?;
                self.check(&json_vector(at)?)
            }
        }
    }

    /// Checks a decoded vector: dimension, finiteness, unit norm.
    pub fn check(&self, v: &[f32]) -> Result<(), EmbeddingError> {
        if v.is_empty() {
            return Err(EmbeddingError::Empty);
        }
        if let Some(d) = self.dimension {
            if v.len() != d as usize {
                return Err(EmbeddingError::Dimension {
                    expected: d,
                    found: v.len(),
                });
            }
        }
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(EmbeddingError::NotFinite(i));
        }
        if let Some(epsilon) = self.normalized {
            // Summed in f64: a 4096-dimension f32 sum loses the precision epsilon asks for.
            let norm = v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
            if (norm - 1.0).abs() > epsilon as f64 {
                return Err(EmbeddingError::NotNormalized {
                    norm: norm as f32,
                    epsilon,
                });
            }
        }
        Ok(())
    }
}

/// A JSON array of numbers as f32s; a number beyond f32's range becomes ±Inf (then refused
/// as not finite, which is what it would be in the database).
fn json_vector(v: &Value) -> Result<Vec<f32>, EmbeddingError> {
    let Value::Array(items) = v else {
        return Err(EmbeddingError::NotVector(
            "expected a JSON array of numbers".into(),
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_f64()
                .map(|f| f as f32)
                .ok_or_else(|| EmbeddingError::NotVector(format!("element {i} is not a number")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn spec(pairs: &[(&str, &str)]) -> Option<EmbeddingSpec> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        EmbeddingSpec::from_configs(|k| m.get(k).map(String::as_str))
    }

    fn f32le(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|f| f.to_le_bytes()).collect()
    }

    #[test]
    fn given_no_format_when_reading_configs_then_no_check() {
        assert_eq!(spec(&[(DIMENSION, "3")]), None);
        assert_eq!(spec(&[(FORMAT, "")]), None);
    }

    #[test]
    fn given_f32le_topic_when_checking_then_dimension_finite_and_norm_enforced() {
        let s = spec(&[
            (FORMAT, "f32le"),
            (DIMENSION, "2"),
            (NORMALIZED, "true"),
            (EPSILON, "0.01"),
        ])
        .unwrap();
        assert_eq!(s.check_value(Some(&f32le(&[0.6, 0.8]))), Ok(()));
        assert_eq!(
            s.check_value(Some(&f32le(&[1.0, 0.0, 0.0]))),
            Err(EmbeddingError::Dimension {
                expected: 2,
                found: 3
            })
        );
        assert_eq!(
            s.check_value(Some(&f32le(&[f32::NAN, 1.0]))),
            Err(EmbeddingError::NotFinite(0))
        );
        assert_eq!(
            s.check_value(Some(&f32le(&[1.0, f32::INFINITY]))),
            Err(EmbeddingError::NotFinite(1))
        );
        assert!(matches!(
            s.check_value(Some(&f32le(&[1.0, 1.0]))),
            Err(EmbeddingError::NotNormalized { .. })
        ));
        assert_eq!(
            s.check_value(Some(&[0, 0, 0])),
            Err(EmbeddingError::Ragged(3))
        );
        assert_eq!(s.check_value(None), Err(EmbeddingError::NoValue));
    }

    #[test]
    fn given_json_topic_when_checking_then_vector_found_by_pointer() {
        let s = spec(&[
            (FORMAT, "json"),
            (FIELD, "/doc/embedding"),
            (DIMENSION, "3"),
        ])
        .unwrap();
        let ok = br#"{"doc": {"embedding": [1, 2.5, -3]}, "title": "x"}"#;
        assert_eq!(s.check_value(Some(ok)), Ok(()));
        assert_eq!(
            s.check_value(Some(br#"{"doc": {}}"#)),
            Err(EmbeddingError::Missing("/doc/embedding".into()))
        );
        assert!(matches!(
            s.check_value(Some(br#"{"doc": {"embedding": [1, "a", 2]}}"#)),
            Err(EmbeddingError::NotVector(_))
        ));
        // Beyond f32: infinite once stored as f32.
        assert_eq!(
            s.check_value(Some(br#"{"doc": {"embedding": [1, 1e39, 2]}}"#)),
            Err(EmbeddingError::NotFinite(1))
        );
        assert!(matches!(
            s.check_value(Some(b"not json")),
            Err(EmbeddingError::NotJson(_))
        ));
        let whole = spec(&[(FORMAT, "json")]).unwrap();
        assert_eq!(whole.check_value(Some(b"[0.5]")), Ok(()));
        assert_eq!(whole.check_value(Some(b"[]")), Err(EmbeddingError::Empty));
    }

    #[test]
    fn given_each_bad_config_value_when_validating_then_error_names_the_key() {
        for (key, value) in [
            (FORMAT, "f16"),
            (FIELD, "embedding"),
            (DIMENSION, "-1"),
            (DIMENSION, "70000"),
            (NORMALIZED, "yes"),
            (EPSILON, "0"),
            (EPSILON, "NaN"),
            (EPSILON, "2"),
        ] {
            let e = validate_config(key, value).unwrap_err();
            assert_eq!(e.key, key);
            assert!(e.to_string().contains(key), "{e}");
        }
        for (key, value) in [
            (FORMAT, "json"),
            (FORMAT, ""),
            (FIELD, "/a/0"),
            (DIMENSION, "768"),
            (EPSILON, "0.05"),
        ] {
            assert_eq!(validate_config(key, value), Ok(()), "{key}={value}");
        }
    }

    proptest! {
        #[test]
        fn prop_arbitrary_values_never_panic(value in proptest::collection::vec(any::<u8>(), 0..200), json in any::<bool>()) {
            let s = spec(&[(FORMAT, if json { "json" } else { "f32le" }), (FIELD, "/v"), (NORMALIZED, "true")]).unwrap();
            let _ = s.check_value(Some(&value));
        }

        #[test]
        fn prop_unit_vectors_pass_and_scaled_ones_fail(v in proptest::collection::vec(-1000.0f32..1000.0, 1..64)) {
            let norm = v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
            prop_assume!(norm > 1e-3);
            let unit: Vec<f32> = v.iter().map(|&x| (x as f64 / norm) as f32).collect();
            let s = spec(&[(FORMAT, "f32le"), (NORMALIZED, "true"), (EPSILON, "0.001")]).unwrap();
            prop_assert_eq!(s.check(&unit), Ok(()));
            let doubled: Vec<f32> = unit.iter().map(|x| x * 2.0).collect();
            prop_assert!(s.check(&doubled).is_err());
        }
    }
}
