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
            let s = spec(&[(FORMAT, "json"), (FIELD, field), (NORMALIZED, normalized)]).unwrap();
            let (got, want) = (s.check_value(Some(doc)), reference(&s, doc));
            assert!(
                same(&got, &want),
                "{field} {}: {got:?} vs {want:?}",
                String::from_utf8_lossy(doc)
            );
        }
    }
}

/// What the fast path found, next to serde's answer for the same document: equal to the
/// bit when it answers (`{:?}` of an f64 is exact); `Ok(false)` when it leaves the
/// document to serde.
fn fast_agrees_with_serde(doc: &[u8], pointer: &str) -> Result<bool, String> {
    let fast = super::json_scan::vector_at(doc, pointer);
    let serde = super::json_pointer::vector_at(doc, pointer);
    match (&fast, &serde) {
        (None, _) => Ok(false),
        (Some(f), Ok(s)) if format!("{f:?}") == format!("{s:?}") => Ok(true),
        _ => Err(format!(
            "{pointer} {}: fast {fast:?}, serde {serde:?}",
            String::from_utf8_lossy(doc)
        )),
    }
}

/// A JSON number in one of the shapes producers write: Python's `repr` of an f64 or of an
/// f32 widened, rounded to a few decimals, exponent forms, integers, long digit strings.
fn number_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(|x| format!("{x:?}")),
        any::<f32>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(|x| format!("{:?}", x as f64)),
        (-1.0f64..1.0, 0usize..10).prop_map(|(x, d)| format!("{x:.d$}")),
        (-1.0f64..1.0, 0usize..18).prop_map(|(x, d)| format!("{x:.d$e}")),
        (-1.0f64..1.0, 0usize..18).prop_map(|(x, d)| format!("{x:.d$E}")),
        any::<i64>().prop_map(|x| x.to_string()),
        any::<u64>().prop_map(|x| format!("{x}{x}")),
        (1u64..1000, -340i32..340).prop_map(|(m, e)| format!("{m}e{e}")),
        (0u64..1 << 53, 0usize..30).prop_map(|(m, z)| format!("0.{}{m}", "0".repeat(z))),
    ]
}

#[test]
fn given_a_producers_document_when_checking_then_the_fast_path_answers_alike() {
    let docs: &[(&str, &[u8])] = &[
        (
            "/embedding",
            br#"{"id": "doc-1", "text": "caf\u00e9 \"quoted\"\n", "embedding": [0.6, -0.8, 0, 1e-3, 2.5E+1]}"#,
        ),
        ("", b" [0.6, 0.8] "),
        (
            "/a/1/v",
            br#"{"a": [{"v": [1]}, {"v": [0.5, 0.5]}], "n": null, "t": true}"#,
        ),
        (
            "/embedding",
            br#"{"embedding": [1, 0], "embedding": [0.6, 0.8]}"#,
        ),
        ("/embedding", br#"{"embedding": [1, "x", 2]}"#),
        ("/embedding", br#"{"embedding": {"0": 1}}"#),
        (
            "/embedding",
            "{\"embedding\": [1], \"t\": \"\u{e9}\u{4e2d}\"}".as_bytes(),
        ),
        ("/embedding", br#"{"embedding": [1e39, 1]}"#),
        ("x", br#"{"embedding": [1]}"#),
    ];
    for (pointer, doc) in docs {
        assert_eq!(fast_agrees_with_serde(doc, pointer), Ok(true), "{pointer}");
    }
    // Left to serde: its errors are the messages, and it pairs surrogates.
    for doc in [
        &br#"{"embedding": [1], "t": 1e400}"#[..],
        br#"{"embedding": [1],}"#,
        br#"{"embedding": [01]}"#,
        br#"{"embedding": [1]} x"#,
        br#"{"t": "\ud83d\ude00", "embedding": [1]}"#,
        b"{\"t\": \"\xff\", \"embedding\": [1]}",
        b"{\"t\": \"a\x01\", \"embedding\": [1]}",
    ] {
        assert_eq!(
            fast_agrees_with_serde(doc, "/embedding"),
            Ok(false),
            "{}",
            String::from_utf8_lossy(doc)
        );
    }
}

proptest! {
    #[test]
    fn prop_fast_path_numbers_are_serde_json_numbers(ns in proptest::collection::vec(number_text(), 1..12)) {
        let doc = format!("{{\"embedding\": [{}]}}", ns.join(", "));
        let agreed = fast_agrees_with_serde(doc.as_bytes(), "/embedding");
        prop_assert!(agreed.is_ok(), "{:?}", agreed);
        // Only a number beyond f64 (serde_json refuses it) is left to serde.
        let refused = serde_json::from_slice::<serde_json::Value>(doc.as_bytes()).is_err();
        prop_assert_eq!(agreed, Ok(!refused), "{}", doc);
    }

    #[test]
    fn prop_numbers_are_serde_json_numbers_to_the_bit(text in number_text()) {
        // The vector check rounds to f32, which hides a last-bit difference in f64: compare
        // the f64s themselves.
        let serde = serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| v.as_f64());
        let fast = super::json_scan::number_of(&text);
        prop_assert_eq!(fast.map(f64::to_bits), serde.map(f64::to_bits), "{}", text);
    }

    #[test]
    fn prop_fast_path_agrees_with_serde_on_any_document(
        doc in json_text(),
        field in prop_oneof![Just(""), Just("/embedding"), Just("/v/0"), Just("/a~1b"), Just("/0"), Just("/v/embedding/1")],
    ) {
        let agreed = fast_agrees_with_serde(doc.as_bytes(), field);
        prop_assert!(agreed.is_ok(), "{:?}", agreed);
    }

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
