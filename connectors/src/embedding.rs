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
    /// (`json_pointer`). The verdicts are those of decoding then `check` (tests below).
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
                let found = json_pointer::vector_at(value, &self.field)
                    .map_err(|e| EmbeddingError::NotJson(e.to_string()))?;
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

/// The vector at a JSON pointer, read by serde_json's parser without building a value tree:
/// the pointer's path is followed, every other value is parsed and dropped (so a document
/// is refused exactly when `serde_json::Value` parsing refuses it: UTF-8, escapes, number
/// ranges, nesting depth, trailing characters), and the vector's numbers are folded into
/// [`Stats`] as they are read. RFC 6901 as `Value::pointer` reads it: `~1` is `/`, `~0` is
/// `~`, an array index is decimal without sign or leading zero, and of duplicate keys the
/// last one counts (a `Value` map keeps the last).
mod json_pointer {
    use std::borrow::Cow;
    use std::fmt;

    use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

    use super::Stats;

    /// What the pointer found in a valid JSON document.
    #[derive(Debug, Clone, Copy)]
    pub(super) enum Found {
        Missing,
        NotArray,
        /// The array's first element that is not a number.
        NotNumber(usize),
        Vector(Stats),
    }

    pub(super) fn vector_at(value: &[u8], pointer: &str) -> Result<Found, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_slice(value);
        let found = if pointer.is_empty() {
            Path(&[]).deserialize(&mut de)?
        } else if let Some(path) = pointer.strip_prefix('/') {
            let tokens: Vec<Cow<'_, str>> = path
                .split('/')
                .map(|t| match t.contains('~') {
                    true => Cow::Owned(t.replace("~1", "/").replace("~0", "~")),
                    false => Cow::Borrowed(t),
                })
                .collect();
            Path(&tokens).deserialize(&mut de)?
        } else {
            // `Value::pointer` finds nothing there; the document must still be JSON.
            de::Deserialize::deserialize(&mut de).map(|Skip| Found::Missing)?
        };
        de.end()?;
        Ok(found)
    }

    /// `serde_json::Value::pointer`'s array index rule.
    fn index(token: &str) -> Option<usize> {
        if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
            return None;
        }
        token.parse().ok()
    }

    /// The visitor methods every JSON value may call (`deserialize_any`), each answering
    /// `$v` for a scalar; arrays and objects are drained with `Skip` unless the visitor
    /// defines them.
    macro_rules! scalars {
        ($t:ty, $v:expr) => {
            fn visit_bool<E>(self, _: bool) -> Result<$t, E> {
                Ok($v)
            }
            fn visit_i64<E>(self, _: i64) -> Result<$t, E> {
                Ok($v)
            }
            fn visit_u64<E>(self, _: u64) -> Result<$t, E> {
                Ok($v)
            }
            fn visit_f64<E>(self, _: f64) -> Result<$t, E> {
                Ok($v)
            }
            fn visit_str<E>(self, _: &str) -> Result<$t, E> {
                Ok($v)
            }
            fn visit_unit<E>(self) -> Result<$t, E> {
                Ok($v)
            }
        };
    }

    /// Any JSON value, parsed as `Value` parsing would (strings checked, numbers read,
    /// depth counted) and dropped. `IgnoredAny` would not do: serde_json skips strings and
    /// numbers without those checks.
    struct Skip;

    impl<'de> de::Deserialize<'de> for Skip {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Skip, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Skip;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("any JSON value")
                }
                scalars!(Skip, Skip);
                fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Skip, A::Error> {
                    drain_seq(seq).map(|()| Skip)
                }
                fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Skip, A::Error> {
                    drain_map(map).map(|()| Skip)
                }
            }
            d.deserialize_any(V)
        }
    }

    fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(())
    }

    fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(())
    }

    /// The value at the rest of the pointer, inside the value being read.
    struct Path<'a, 't>(&'a [Cow<'t, str>]);

    impl<'de> DeserializeSeed<'de> for Path<'_, '_> {
        type Value = Found;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Found, D::Error> {
            match self.0.split_first() {
                None => d.deserialize_any(VectorVisitor),
                Some((token, rest)) => d.deserialize_any(Step { token, rest }),
            }
        }
    }

    /// One pointer step: into the object member or array element named by `token`.
    struct Step<'a, 't> {
        token: &'a str,
        rest: &'a [Cow<'t, str>],
    }

    impl<'de> Visitor<'de> for Step<'_, '_> {
        type Value = Found;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        scalars!(Found, Found::Missing);
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Found, A::Error> {
            let Some(want) = index(self.token) else {
                return drain_seq(seq).map(|()| Found::Missing);
            };
            for _ in 0..want {
                if seq.next_element::<Skip>()?.is_none() {
                    return Ok(Found::Missing);
                }
            }
            let found = seq
                .next_element_seed(Path(self.rest))?
                .unwrap_or(Found::Missing);
            drain_seq(seq).map(|()| found)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
            let mut found = Found::Missing;
            while let Some(key) = map.next_key::<Key<'de>>()? {
                if key.0 == self.token {
                    found = map.next_value_seed(Path(self.rest))?;
                } else {
                    map.next_value::<Skip>()?;
                }
            }
            Ok(found)
        }
    }

    /// An object key, borrowed from the document unless it has escapes.
    struct Key<'de>(Cow<'de, str>);

    impl<'de> de::Deserialize<'de> for Key<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key<'de>, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Key<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a string key")
                }
                fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                    Ok(Key(Cow::Borrowed(s)))
                }
                fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                    Ok(Key(Cow::Owned(s.to_string())))
                }
            }
            d.deserialize_str(V)
        }
    }

    /// The value the pointer names: an array of numbers, folded into `Stats` in order, each
    /// as the decoded vector holds it (`Value::as_f64`, then `as f32`).
    struct VectorVisitor;

    impl<'de> Visitor<'de> for VectorVisitor {
        type Value = Found;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        scalars!(Found, Found::NotArray);
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Found, A::Error> {
            drain_map(map).map(|()| Found::NotArray)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Found, A::Error> {
            let mut stats = Stats::default();
            let mut not_number = None;
            while let Some(Number(x)) = seq.next_element()? {
                match x {
                    Some(f) if not_number.is_none() => {
                        let f = f as f32;
                        if !f.is_finite() && stats.first_non_finite.is_none() {
                            stats.first_non_finite = Some(stats.len);
                        }
                        stats.sum_squares += f as f64 * f as f64;
                    }
                    Some(_) => {}
                    None => {
                        not_number.get_or_insert(stats.len);
                    }
                }
                stats.len += 1;
            }
            Ok(match not_number {
                Some(i) => Found::NotNumber(i),
                None => Found::Vector(stats),
            })
        }
    }

    /// An array element: `Some` for a number (as f64), `None` for anything else.
    struct Number(Option<f64>);

    impl<'de> de::Deserialize<'de> for Number {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Number, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Number;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("any JSON value")
                }
                fn visit_i64<E>(self, v: i64) -> Result<Number, E> {
                    Ok(Number(Some(v as f64)))
                }
                fn visit_u64<E>(self, v: u64) -> Result<Number, E> {
                    Ok(Number(Some(v as f64)))
                }
                fn visit_f64<E>(self, v: f64) -> Result<Number, E> {
                    Ok(Number(Some(v)))
                }
                fn visit_bool<E>(self, _: bool) -> Result<Number, E> {
                    Ok(Number(None))
                }
                fn visit_str<E>(self, _: &str) -> Result<Number, E> {
                    Ok(Number(None))
                }
                fn visit_unit<E>(self) -> Result<Number, E> {
                    Ok(Number(None))
                }
                fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Number, A::Error> {
                    drain_seq(seq).map(|()| Number(None))
                }
                fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Number, A::Error> {
                    drain_map(map).map(|()| Number(None))
                }
            }
            d.deserialize_any(V)
        }
    }
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

    /// The check as it was before `check_value` stopped decoding: a `serde_json::Value`,
    /// `Value::pointer`, a `Vec<f32>`, a left-to-right sum. The new one must agree with it.
    fn reference(s: &EmbeddingSpec, value: &[u8]) -> Result<(), EmbeddingError> {
        let v: Vec<f32> = match s.format {
            Format::F32Le => {
                if !value.len().is_multiple_of(4) {
                    return Err(EmbeddingError::Ragged(value.len()));
                }
                value
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            }
            Format::Json => {
                let doc: serde_json::Value = serde_json::from_slice(value)
                    .map_err(|e| EmbeddingError::NotJson(e.to_string()))?;
                let at = doc
                    .pointer(&s.field)
                    .ok_or_else(|| EmbeddingError::Missing(s.field.clone()))?;
                let serde_json::Value::Array(items) = at else {
                    return Err(EmbeddingError::NotVector(
                        "expected a JSON array of numbers".into(),
                    ));
                };
                items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| {
                        x.as_f64().map(|f| f as f32).ok_or_else(|| {
                            EmbeddingError::NotVector(format!("element {i} is not a number"))
                        })
                    })
                    .collect::<Result<_, _>>()?
            }
        };
        if v.is_empty() {
            return Err(EmbeddingError::Empty);
        }
        if let Some(d) = s.dimension {
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
        if let Some(epsilon) = s.normalized {
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

    /// Two verdicts agree: same variant and fields, norms equal up to the summation order.
    fn same(a: &Result<(), EmbeddingError>, b: &Result<(), EmbeddingError>) -> bool {
        match (a, b) {
            (
                Err(EmbeddingError::NotNormalized { norm: x, .. }),
                Err(EmbeddingError::NotNormalized { norm: y, .. }),
            ) => (x - y).abs() <= 1e-5 * x.abs().max(1.0),
            _ => a == b,
        }
    }

    /// JSON text from a small grammar that reaches every branch of the pointer walk:
    /// nested objects and arrays, duplicate keys, escaped keys, numbers of every kind
    /// (integers beyond u64, exponents beyond f32 and f64), strings with escapes and
    /// lone surrogates, and now and then a syntax error.
    fn json_text() -> impl Strategy<Value = String> {
        let number = prop_oneof![
            (-1.0f64..1.0).prop_map(|x| format!("{x}")),
            any::<i64>().prop_map(|x| x.to_string()),
            Just("18446744073709551616".to_string()),
            Just("1e39".to_string()),
            Just("-1e39".to_string()),
            Just("1e400".to_string()),
            Just("0.5e-3".to_string()),
            Just("01".to_string()),
        ];
        let leaf = prop_oneof![
            number.clone(),
            Just("true".to_string()),
            Just("null".to_string()),
            Just(r#""a\u00e9\n""#.to_string()),
            Just(r#""\ud800""#.to_string()),
            Just(r#""x"#.to_string()),
        ];
        let key = prop_oneof![
            Just(r#""embedding""#),
            Just(r#""v""#),
            Just(r#""a/b""#),
            Just(r#""a\/b""#),
            Just(r#""m~n""#),
            Just(r#""0""#),
            Just(r#""""#),
        ];
        let vector =
            proptest::collection::vec(number, 0..6).prop_map(|ns| format!("[{}]", ns.join(",")));
        let leaf = prop_oneof![3 => vector, 2 => leaf];
        leaf.prop_recursive(4, 24, 4, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4)
                    .prop_map(|xs| format!("[{}]", xs.join(", "))),
                proptest::collection::vec((key.clone(), inner), 0..4).prop_map(|kvs| {
                    let members: Vec<String> =
                        kvs.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
                    format!("{{{}}}", members.join(", "))
                }),
            ]
        })
    }

    #[test]
    fn given_edge_cases_when_checking_json_then_verdicts_match_the_value_tree() {
        let deep = format!(
            r#"{{"embedding": [1], "d": {}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        // A function argument coerces each literal's array to a slice.
        fn b(s: &[u8]) -> &[u8] {
            s
        }
        let cases: Vec<(&str, &[u8])> = vec![
            (
                "/embedding",
                b(br#"{"embedding": [1, 0], "embedding": [0.6, 0.8]}"#),
            ),
            (
                "/embedding",
                b(br#"{"embedding": [0.6, 0.8], "embedding": "x"}"#),
            ),
            ("/a~1b/0", b(br#"{"a/b": [[0.6, 0.8]]}"#)),
            ("/m~0n", b(br#"{"m~n": [1]}"#)),
            ("/0", b(b"[[1], [2]]")),
            ("/01", b(b"[[1], [2]]")),
            ("/+1", b(b"[[1], [2]]")),
            ("/5", b(b"[[1]]")),
            ("", b(b"[0.6, 0.8]")),
            ("/", b(br#"{"": [1]}"#)),
            ("/embedding", b(br#"{"embedding": [1], "t": "\ud800"}"#)),
            ("/embedding", b(br#"{"embedding": [1], "t": 1e400}"#)),
            ("/embedding", b(br#"{"embedding": [1]} x"#)),
            ("/embedding", b(br#"{"embedding": [1, [2], "a"]}"#)),
            ("/embedding", b(br#"{"embedding": {"0": 1}}"#)),
            ("/embedding", b(br#"{"embedding": [1e39, 1]}"#)),
            ("/embedding", b(br#"{"embedding": []}"#)),
            ("/embedding/x", b(br#"{"embedding": [1]}"#)),
            ("/embedding", b(b"{\"embedding\": [1], \"t\": \"\xff\"}")),
            ("/embedding", b(deep.as_bytes())),
        ];
        for normalized in ["true", "false"] {
            for (field, doc) in &cases {
                let s =
                    spec(&[(FORMAT, "json"), (FIELD, field), (NORMALIZED, normalized)]).unwrap();
                let (got, want) = (s.check_value(Some(doc)), reference(&s, doc));
                assert!(
                    same(&got, &want),
                    "{field} {}: {got:?} vs {want:?}",
                    String::from_utf8_lossy(doc)
                );
            }
        }
    }

    proptest! {
        #[test]
        fn prop_arbitrary_values_never_panic(value in proptest::collection::vec(any::<u8>(), 0..200), json in any::<bool>()) {
            let s = spec(&[(FORMAT, if json { "json" } else { "f32le" }), (FIELD, "/v"), (NORMALIZED, "true")]).unwrap();
            let _ = s.check_value(Some(&value));
        }

        #[test]
        fn prop_json_verdicts_match_the_value_tree(
            doc in json_text(),
            field in prop_oneof![Just(""), Just("/embedding"), Just("/v/0"), Just("/a~1b"), Just("/m~0n/embedding"), Just("/0")],
            dim in 0u32..4,
            normalized in any::<bool>(),
        ) {
            let dim = dim.to_string();
            let s = spec(&[(FORMAT, "json"), (FIELD, field), (DIMENSION, dim.as_str()), (NORMALIZED, if normalized { "true" } else { "false" }), (EPSILON, "0.5")]).unwrap();
            let (got, want) = (s.check_value(Some(doc.as_bytes())), reference(&s, doc.as_bytes()));
            prop_assert!(same(&got, &want), "{} {}: {:?} vs {:?}", field, doc, got, want);
        }

        #[test]
        fn prop_f32le_verdicts_match_the_decoded_check(
            bits in proptest::collection::vec(prop_oneof![any::<u32>(), (-1.0f32..1.0).prop_map(f32::to_bits)], 0..40),
            extra in 0usize..4,
            dim in 0u32..40,
        ) {
            let mut value: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
            value.extend(std::iter::repeat_n(0u8, extra));
            let dim = dim.to_string();
            let s = spec(&[(FORMAT, "f32le"), (DIMENSION, dim.as_str()), (NORMALIZED, "true"), (EPSILON, "0.5")]).unwrap();
            let (got, want) = (s.check_value(Some(&value)), reference(&s, &value));
            prop_assert!(same(&got, &want), "{:?} vs {:?}", got, want);
            if value.len().is_multiple_of(4) {
                let v: Vec<f32> = value.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                prop_assert!(same(&s.check(&v), &want));
            }
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
