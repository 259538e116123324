//! The vector at a JSON pointer, read by serde_json's parser without building a value tree:
//! the pointer's path is followed, every other value is parsed and dropped (so a document
//! is refused exactly when `serde_json::Value` parsing refuses it: UTF-8, escapes, number
//! ranges, nesting depth, trailing characters), and the vector's numbers are folded into
//! [`Stats`] as they are read. RFC 6901 as `Value::pointer` reads it: `~1` is `/`, `~0` is
//! `~`, an array index is decimal without sign or leading zero, and of duplicate keys the
//! last one counts (a `Value` map keeps the last).

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
pub(super) fn index(token: &str) -> Option<usize> {
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
