//! Tests of `security::oauthbearer`: Kafka's client-first-message grammar and the token
//! checks, with ES256 and EdDSA keys made per test (RS256 is covered by
//! `compat-tests/python/test_oauthbearer.py`, whose keys openssl makes).

use super::*;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{EncodingKey, Header};
use proptest::prelude::*;
use serde_json::json;

fn now() -> i64 {
    jsonwebtoken::get_current_timestamp() as i64
}

struct Signer {
    key: EncodingKey,
    jwk: Jwk,
    alg: Algorithm,
}

fn es256(kid: &str) -> Signer {
    let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let raw = kp.public_key_raw();
    let jwk = serde_json::from_value(json!({
        "kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
        "x": URL_SAFE_NO_PAD.encode(&raw[1..33]),
        "y": URL_SAFE_NO_PAD.encode(&raw[33..65]),
    }))
    .unwrap();
    Signer {
        key: EncodingKey::from_ec_der(&kp.serialize_der()),
        jwk,
        alg: Algorithm::ES256,
    }
}

fn ed25519(kid: &str) -> Signer {
    use ring::signature::KeyPair;
    let pkcs8 =
        ring::signature::Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
    let kp = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let jwk = serde_json::from_value(json!({
        "kty": "OKP", "crv": "Ed25519", "kid": kid,
        "x": URL_SAFE_NO_PAD.encode(kp.public_key().as_ref()),
    }))
    .unwrap();
    Signer {
        key: EncodingKey::from_ed_der(pkcs8.as_ref()),
        jwk,
        alg: Algorithm::EdDSA,
    }
}

impl Signer {
    fn sign(&self, claims: serde_json::Value) -> String {
        let mut h = Header::new(self.alg);
        h.kid = self.jwk.common.key_id.clone();
        jsonwebtoken::encode(&h, &claims, &self.key).unwrap()
    }
}

fn rules() -> TokenRules {
    TokenRules {
        audience: vec!["strom".into()],
        issuer: Some("https://idp.test".into()),
        sub_claim: "sub".into(),
        scope_claim: "scope".into(),
        clock_skew_s: 30,
    }
}

fn good_claims() -> serde_json::Value {
    json!({"sub": "alice", "aud": "strom", "iss": "https://idp.test",
           "iat": now(), "exp": now() + 300, "scope": "produce"})
}

fn with(mut c: serde_json::Value, key: &str, v: serde_json::Value) -> serde_json::Value {
    if v.is_null() {
        c.as_object_mut().unwrap().remove(key);
    } else {
        c[key] = v;
    }
    c
}

#[test]
fn given_kafka_client_messages_when_parsing_then_token_authzid_and_extensions() {
    let m = parse_client_first(b"n,,\x01auth=Bearer abc.def.ghi\x01\x01").unwrap();
    assert_eq!(m.token, "abc.def.ghi");
    assert_eq!(m.authzid, "");
    assert!(m.extensions.is_empty());
    let m =
        parse_client_first(b"n,a=alice,\x01traceId=42\x01auth=bearer t-_.~+/==\x01\x01").unwrap();
    assert_eq!(
        (m.authzid.as_str(), m.token.as_str()),
        ("alice", "t-_.~+/==")
    );
    assert_eq!(m.extensions["traceId"], "42");
}

#[test]
fn given_bad_client_messages_when_parsing_then_kafkas_errors() {
    use FirstMessageError::*;
    for (msg, want) in [
        (&b""[..], Invalid),
        (b"n,,auth=Bearer t\x01\x01", Invalid),
        (b"n,,\x01auth=Bearer t\x01", Invalid),
        (b"y,,\x01auth=Bearer t\x01\x01", Invalid),
        (b"n,a=a,b,\x01auth=Bearer t\x01\x01", Invalid),
        (b"n,,\x01auth=Bearer t\xc3\xa9\x01\x01", Invalid),
        (b"n,,\x01x=y\x01\x01", NoAuth),
        (b"n,,\x01auth=Bearer\x01\x01", AuthFormat),
        (b"n,,\x01auth=Bearer a b\x01\x01", AuthFormat),
        (b"\x01", Invalid),
    ] {
        assert_eq!(
            parse_client_first(msg),
            Err(want),
            "{:?}",
            String::from_utf8_lossy(msg)
        );
    }
    assert_eq!(
        parse_client_first(b"n,,\x01auth=Basic dXNlcg==\x01\x01"),
        Err(Scheme("Basic".into()))
    );
}

#[test]
fn given_good_es256_and_eddsa_tokens_when_validating_then_principal_and_expiry() {
    for s in [es256("k1"), ed25519("k2")] {
        let exp = now() + 300;
        let t = s.sign(with(good_claims(), "exp", json!(exp)));
        let v = validate(&t, std::slice::from_ref(&s.jwk), &rules()).unwrap();
        assert_eq!(v.principal, "alice");
        assert_eq!(v.expires_at_ms, exp * 1000);
        assert_eq!(v.scopes, ["produce"]);
    }
}

#[test]
fn given_a_configured_sub_claim_when_validating_then_principal_from_it() {
    let s = es256("k");
    let r = TokenRules {
        sub_claim: "preferred_username".into(),
        ..rules()
    };
    let t = s.sign(with(good_claims(), "preferred_username", json!("bob")));
    assert_eq!(
        validate(&t, std::slice::from_ref(&s.jwk), &r)
            .unwrap()
            .principal,
        "bob"
    );
    let t = s.sign(good_claims());
    assert_eq!(
        validate(&t, &[s.jwk], &r),
        Err(TokenError::Claim("preferred_username".into()))
    );
}

#[test]
fn given_bad_claims_when_validating_then_refused() {
    let s = es256("k");
    let keys = [s.jwk.clone()];
    let refused = |c: serde_json::Value| validate(&s.sign(c), &keys, &rules()).unwrap_err();
    // Past exp beyond the skew; within the skew is still fine.
    assert!(
        matches!(refused(with(good_claims(), "exp", json!(now() - 60))), TokenError::Rejected(m) if m.contains("Expired"))
    );
    assert!(validate(
        &s.sign(with(good_claims(), "exp", json!(now() - 5))),
        &keys,
        &rules()
    )
    .is_ok());
    assert!(
        matches!(refused(with(good_claims(), "nbf", json!(now() + 120))), TokenError::Rejected(m) if m.contains("Immature"))
    );
    assert!(
        matches!(refused(with(good_claims(), "aud", json!("other"))), TokenError::Rejected(m) if m.contains("Audience"))
    );
    assert!(validate(
        &s.sign(with(good_claims(), "aud", json!(["x", "strom"]))),
        &keys,
        &rules()
    )
    .is_ok());
    assert!(
        matches!(refused(with(good_claims(), "iss", json!("https://evil"))), TokenError::Rejected(m) if m.contains("Issuer"))
    );
    for missing in ["exp", "aud", "iss"] {
        assert!(
            matches!(refused(with(good_claims(), missing, json!(null))), TokenError::Rejected(m) if m.contains(missing)),
            "{missing}"
        );
    }
    assert_eq!(
        refused(with(good_claims(), "iat", json!(null))),
        TokenError::Claim("iat".into())
    );
    assert_eq!(
        refused(with(good_claims(), "sub", json!(" "))),
        TokenError::Claim("sub".into())
    );
    assert_eq!(
        refused(with(good_claims(), "scope", json!(["a", "a"]))),
        TokenError::Claim("scope".into())
    );
    // No expected audience configured: a token with an `aud` is refused (jose4j's rule).
    let no_aud = TokenRules {
        audience: vec![],
        ..rules()
    };
    assert!(validate(&s.sign(good_claims()), &keys, &no_aud).is_err());
    assert!(validate(
        &s.sign(with(good_claims(), "aud", json!(null))),
        &keys,
        &no_aud
    )
    .is_ok());
}

#[test]
fn given_bad_signatures_when_validating_then_refused() {
    let s = es256("k");
    let other = es256("k");
    let t = s.sign(good_claims());
    // Signed by another key under the same kid.
    assert!(matches!(
        validate(&t, std::slice::from_ref(&other.jwk), &rules()),
        Err(TokenError::Rejected(_))
    ));
    // A key id the set does not have: a refresh may help.
    let e = validate(&t, &[es256("k9").jwk], &rules()).unwrap_err();
    assert!(e.unknown_key(), "{e:?}");
    // alg none, and HS256 (a key confusion attempt against the public key).
    let body = URL_SAFE_NO_PAD.encode(good_claims().to_string());
    for header in [
        r#"{"alg":"none","typ":"JWT"}"#,
        r#"{"alg":"HS256","kid":"k"}"#,
    ] {
        let unsigned = format!("{}.{body}.", URL_SAFE_NO_PAD.encode(header));
        assert!(validate(&unsigned, std::slice::from_ref(&s.jwk), &rules()).is_err());
    }
    // The payload changed after signing.
    let mut parts: Vec<String> = t.split('.').map(String::from).collect();
    parts[1] = URL_SAFE_NO_PAD.encode(with(good_claims(), "sub", json!("admin")).to_string());
    assert!(matches!(
        validate(&parts.join("."), std::slice::from_ref(&s.jwk), &rules()),
        Err(TokenError::Rejected(_))
    ));
    // An ES256 token against an Ed25519 key of the same kid: no candidate key.
    let ed = ed25519("k");
    assert!(matches!(
        validate(&t, &[ed.jwk], &rules()),
        Err(TokenError::NoKey { .. })
    ));
    assert!(matches!(
        validate("not a token", &[s.jwk], &rules()),
        Err(TokenError::Malformed(_))
    ));
}

#[test]
fn given_no_kid_when_validating_then_each_fitting_key_tried() {
    let a = es256("a");
    let b = es256("b");
    let mut h = Header::new(Algorithm::ES256);
    h.kid = None;
    let t = jsonwebtoken::encode(&h, &good_claims(), &b.key).unwrap();
    let v = validate(&t, &[a.jwk, b.jwk], &rules()).unwrap();
    assert_eq!(v.principal, "alice");
}

proptest! {
    #[test]
    fn given_any_bytes_when_parsing_and_validating_then_no_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_client_first(&b);
        let _ = validate(&String::from_utf8_lossy(&b), &[], &rules());
    }

    #[test]
    fn given_well_formed_messages_when_parsing_then_token_round_trips(
        token in "[-_.a-zA-Z0-9]{1,60}",
        key in "[a-zA-Z]{1,8}",
        value in "[!-~]{1,20}",
    ) {
        prop_assume!(key != "auth");
        let msg = format!("n,,\x01{key}={value}\x01auth=Bearer {token}\x01\x01");
        let m = parse_client_first(msg.as_bytes()).unwrap();
        prop_assert_eq!(m.token, token);
        prop_assert_eq!(&m.extensions[&key], &value);
    }
}
