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

    /// Checks a record value: the vector is extracted by the format, then checked as
    /// [`Self::check`] checks a decoded one. This runs on every produced record of the
    /// topic, so neither format builds the vector: raw f32s are read in place, and a JSON
    /// value is parsed without a value tree, the vector's elements folded as they are read
    /// (`json_scan`, with serde_json's parser in `json_pointer` for what it leaves). The verdicts are those of decoding then `check` (tests below).
    pub fn check_value(&self, value: Option<&[u8]>) -> Result<(), EmbeddingError> {
        let value = value.ok_or(EmbeddingError::NoValue)?;
        match self.format {
            Format::F32Le => {
                if value.len() % 4 != 0 {
                    return Err(EmbeddingError::Ragged(value.len()));
                }
                let stats = Stats::of_f32le(value);
                self.verdict(&stats, || {
                    value
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .position(|x| !x.is_finite())
                })
            }
            Format::Json => {
                let found = match json_scan::vector_at(value, &self.field) {
                    Some(found) => found,
                    None => json_pointer::vector_at(value, &self.field)
                        .map_err(|e| EmbeddingError::NotJson(e.to_string()))?,
                };
                let stats = match found {
                    json_pointer::Found::Vector(stats) => stats,
                    json_pointer::Found::Missing => {
                        return Err(EmbeddingError::Missing(self.field.clone()))
                    }
                    json_pointer::Found::NotArray => {
                        return Err(EmbeddingError::NotVector(
                            "expected a JSON array of numbers".into(),
                        ))
                    }
                    json_pointer::Found::NotNumber(i) => {
                        return Err(EmbeddingError::NotVector(format!(
                            "element {i} is not a number"
                        )))
                    }
                };
                self.verdict(&stats, || stats.first_non_finite)
            }
        }
    }

    /// Checks a decoded vector: dimension, finiteness, unit norm.
    pub fn check(&self, v: &[f32]) -> Result<(), EmbeddingError> {
        let stats = Stats::of_f32(v);
        self.verdict(&stats, || v.iter().position(|x| !x.is_finite()))
    }

    /// The rules on a vector's length and sum of squares. `first_non_finite` is asked only
    /// when the sum is not finite, which is exactly when an element is not: a finite f32
    /// squared in f64 is at most ~1.2e77, and 65 535 of them stay far inside f64's range.
    fn verdict(
        &self,
        stats: &Stats,
        first_non_finite: impl FnOnce() -> Option<usize>,
    ) -> Result<(), EmbeddingError> {
        if stats.len == 0 {
            return Err(EmbeddingError::Empty);
        }
        if let Some(d) = self.dimension {
            if stats.len != d as usize {
                return Err(EmbeddingError::Dimension {
                    expected: d,
                    found: stats.len,
                });
            }
        }
        if !stats.sum_squares.is_finite() {
            if let Some(i) = first_non_finite() {
                return Err(EmbeddingError::NotFinite(i));
            }
        }
        if let Some(epsilon) = self.normalized {
            let norm = stats.sum_squares.sqrt();
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

/// What the rules need of a vector: its length and the sum of its squares. Summed in f64
/// (a 4096-dimension f32 sum loses the precision epsilon asks for); raw vectors over 8
/// independent lanes, so the loop has no dependency chain and vectorises. The order of
/// the additions differs from a left-to-right sum by rounding only (~1e-16 relative).
#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    len: usize,
    sum_squares: f64,
    /// JSON only (elements are folded as they are read): the first one not finite.
    first_non_finite: Option<usize>,
}

const LANES: usize = 8;

impl Stats {
    fn of_f32le(bytes: &[u8]) -> Stats {
        let mut acc = [0f64; LANES];
        let mut chunks = bytes.chunks_exact(4 * LANES);
        for c in &mut chunks {
            let c: &[u8; 4 * LANES] = c.try_into().expect("chunks_exact");
            for (i, a) in acc.iter_mut().enumerate() {
                let x = f32::from_le_bytes([c[4 * i], c[4 * i + 1], c[4 * i + 2], c[4 * i + 3]]);
                *a += x as f64 * x as f64;
            }
        }
        let rest: f64 = chunks
            .remainder()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .map(|x| x * x)
            .sum();
        Stats {
            len: bytes.len() / 4,
            sum_squares: acc.iter().sum::<f64>() + rest,
            first_non_finite: None,
        }
    }

    fn of_f32(v: &[f32]) -> Stats {
        let mut acc = [0f64; LANES];
        let mut chunks = v.chunks_exact(LANES);
        for c in &mut chunks {
            for (a, &x) in acc.iter_mut().zip(c) {
                *a += x as f64 * x as f64;
            }
        }
        let rest: f64 = chunks
            .remainder()
            .iter()
            .map(|&x| x as f64 * x as f64)
            .sum();
        Stats {
            len: v.len(),
            sum_squares: acc.iter().sum::<f64>() + rest,
            first_non_finite: None,
        }
    }
}

mod json_pointer;
mod json_scan;

#[cfg(test)]
mod tests;
