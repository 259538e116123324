//! SASL/OAUTHBEARER (RFC 7628) as Kafka's `OAuthBearerSaslServer` with its JWT validator
//! (`OAuthBearerValidatorCallbackHandler` → `BrokerJwtValidator`) serves it.
//!
//! The client's one message (KIP-255): `n,[a=authzid],` `\x01` then `key=value\x01` pairs,
//! one of them `auth=Bearer <token>`, then a final `\x01`; the other pairs are SASL
//! extensions (accepted, as Kafka's default validator does). A message that does not parse
//! fails with Kafka's generic answer (a `SaslException`). The token is a JWS checked
//! against the JWKS (`security::jwks`):
//!
//! - a signature by a key of the set (the header's `kid` picks it; without one each key
//!   whose type fits the `alg` is tried), `alg` an asymmetric one (RS*, PS*, ES256/384,
//!   EdDSA); `none` and HMAC are refused (jose4j's DISALLOW_NONE, and no `oct` keys);
//! - `exp` and `iat` present (jose4j's `setRequireExpirationTime`/`setRequireIssuedAt`),
//!   `exp` not past and `nbf` (if any) not ahead, both with `clock.skew.seconds` of slack;
//! - `aud` naming one of `expected.audience` when that is set, and absent when it is not
//!   (jose4j's default audience rule); `iss` equal to `expected.issuer` when that is set;
//! - the principal's name in the `sub.claim.name` claim, a non-empty string; the scope claim
//!   a string or a list of strings if present.
//!
//! A token that fails is answered as Kafka does: the server's message is
//! `{"status":"invalid_token"}`, the client answers `\x01`, and the exchange then fails with
//! SASL_AUTHENTICATION_FAILED whose message is that JSON (`server::sasl`). The reason is
//! only logged.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use regex::Regex;

/// What Kafka's validator answers for any token it refuses.
pub const INVALID_TOKEN: &str = r#"{"status":"invalid_token"}"#;

/// The client's first (and only) message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The GS2 authzid, as sent (empty when absent); it must equal the token's principal.
    pub authzid: String,
    pub token: String,
    pub extensions: BTreeMap<String, String>,
}

/// Why a client first message does not parse: Kafka's `SaslException` messages (logged;
/// the client gets the generic answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FirstMessageError {
    #[error("Invalid OAUTHBEARER client first message")]
    Invalid,
    #[error("Invalid OAUTHBEARER client first message: 'auth' not specified")]
    NoAuth,
    #[error("Invalid OAUTHBEARER client first message: invalid 'auth' format")]
    AuthFormat,
    #[error("Invalid scheme in OAUTHBEARER client first message: {0}")]
    Scheme(String),
}

fn first_message_pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // Kafka's OAuthBearerClientInitialResponse, with Java's class intersection written
        // as the regex crate's (same semantics).
        let saslname = r"(?:[\x01-\x7F&&[^=,]]|=2C|=3D)+";
        let kvpairs = r"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*";
        Regex::new(&format!(
            r"\An,(?:a=(?P<authzid>{saslname}))?,\x01(?P<kvpairs>{kvpairs})\x01\z"
        ))
        .expect("static pattern")
    })
}

fn auth_pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"\A(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)\z").expect("static pattern")
    })
}

/// Parses the client's first message.
pub fn parse_client_first(message: &[u8]) -> Result<ClientFirst, FirstMessageError> {
    // Every character the pattern allows is ASCII, so non-ASCII bytes cannot match (Java
    // decodes them to U+FFFD first, which does not match either).
    if !message.is_ascii() {
        return Err(FirstMessageError::Invalid);
    }
    let text = std::str::from_utf8(message).map_err(|_| FirstMessageError::Invalid)?;
    let caps = first_message_pattern()
        .captures(text)
        .ok_or(FirstMessageError::Invalid)?;
    let authzid = caps.name("authzid").map_or("", |m| m.as_str()).to_string();
    // Kafka's Utils.parseMap: split on \x01, then on the first '='; a later key wins.
    let mut pairs: BTreeMap<String, String> = caps
        .name("kvpairs")
        .map_or("", |m| m.as_str())
        .split('\x01')
        .filter(|kv| !kv.is_empty())
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let auth = pairs.remove("auth").ok_or(FirstMessageError::NoAuth)?;
    let a = auth_pattern()
        .captures(&auth)
        .ok_or(FirstMessageError::AuthFormat)?;
    if !a["scheme"].eq_ignore_ascii_case("bearer") {
        return Err(FirstMessageError::Scheme(a["scheme"].to_string()));
    }
    Ok(ClientFirst {
        authzid,
        token: a["token"].to_string(),
        extensions: pairs,
    })
}

/// The validator's settings (Kafka's `sasl.oauthbearer.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRules {
    pub audience: Vec<String>,
    pub issuer: Option<String>,
    pub sub_claim: String,
    pub scope_claim: String,
    pub clock_skew_s: u64,
}

impl TokenRules {
    pub fn from_config(c: &crate::config::BrokerConfig) -> TokenRules {
        TokenRules {
            audience: c
                .sasl_oauthbearer_expected_audience
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(String::from)
                .collect(),
            issuer: Some(c.sasl_oauthbearer_expected_issuer.trim())
                .filter(|i| !i.is_empty())
                .map(String::from),
            sub_claim: c.sasl_oauthbearer_sub_claim_name.trim().to_string(),
            scope_claim: c.sasl_oauthbearer_scope_claim_name.trim().to_string(),
            clock_skew_s: c.sasl_oauthbearer_clock_skew_seconds.max(0) as u64,
        }
    }
}

/// A token that passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    pub principal: String,
    /// `exp`, milliseconds since the epoch: the session ends then (KIP-368).
    pub expires_at_ms: i64,
    pub scopes: Vec<String>,
}

/// Why a token is refused (logged; the client sees `INVALID_TOKEN`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("not a JWS: {0}")]
    Malformed(String),
    #[error("algorithm {0:?} is not accepted")]
    Algorithm(Algorithm),
    #[error("no key in the JWKS for kid {kid:?} and alg {alg:?}")]
    NoKey { kid: Option<String>, alg: Algorithm },
    #[error("{0}")]
    Rejected(String),
    #[error("the '{0}' claim is missing or not a valid value")]
    Claim(String),
}

impl TokenError {
    /// Whether a fresh read of the JWKS might help (a rotated key).
    pub fn unknown_key(&self) -> bool {
        matches!(self, TokenError::NoKey { kid: Some(_), .. })
    }
}

/// The algorithms a key may verify, from its type (and its `alg`, if it names one).
fn algorithms_for(k: &Jwk) -> Vec<Algorithm> {
    use Algorithm::*;
    let by_type = match &k.algorithm {
        AlgorithmParameters::RSA(_) => vec![RS256, RS384, RS512, PS256, PS384, PS512],
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => vec![ES256],
            EllipticCurve::P384 => vec![ES384],
            _ => vec![],
        },
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => vec![EdDSA],
        _ => vec![],
    };
    match k.common.key_algorithm {
        Some(named) => by_type
            .into_iter()
            .filter(|a| format!("{a:?}") == format!("{named:?}"))
            .collect(),
        None => by_type,
    }
}

/// Checks `token` against `keys` and `rules`.
pub fn validate(token: &str, keys: &[Jwk], rules: &TokenRules) -> Result<ValidToken, TokenError> {
    let header =
        jsonwebtoken::decode_header(token).map_err(|e| TokenError::Malformed(e.to_string()))?;
    if matches!(
        header.alg,
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
    ) {
        return Err(TokenError::Algorithm(header.alg));
    }
    let mut validation = Validation::new(header.alg);
    validation.leeway = rules.clock_skew_s;
    validation.validate_nbf = true;
    let mut required = vec!["exp"];
    if !rules.audience.is_empty() {
        validation.set_audience(&rules.audience);
        required.push("aud");
    }
    if let Some(iss) = &rules.issuer {
        validation.set_issuer(&[iss]);
        required.push("iss");
    }
    validation.set_required_spec_claims(&required);
    let candidates = keys.iter().filter(|k| {
        header
            .kid
            .as_ref()
            .is_none_or(|kid| k.common.key_id.as_ref() == Some(kid))
            && algorithms_for(k).contains(&header.alg)
    });
    let mut last = None;
    for k in candidates {
        let Ok(key) = DecodingKey::from_jwk(k) else {
            continue;
        };
        match jsonwebtoken::decode::<serde_json::Value>(token, &key, &validation) {
            Ok(data) => return claims(data.claims, rules),
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => Err(TokenError::Rejected(e.to_string())),
        None => Err(TokenError::NoKey {
            kid: header.kid,
            alg: header.alg,
        }),
    }
}

/// The checks jsonwebtoken leaves to the caller: `iat`, the subject and scope claims.
fn claims(c: serde_json::Value, rules: &TokenRules) -> Result<ValidToken, TokenError> {
    let num = |name: &str| c.get(name).and_then(serde_json::Value::as_f64);
    let exp = num("exp").ok_or_else(|| TokenError::Claim("exp".into()))?;
    if num("iat").is_none_or(|iat| iat < 0.0) {
        return Err(TokenError::Claim("iat".into()));
    }
    let principal = c
        .get(&rules.sub_claim)
        .and_then(serde_json::Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| TokenError::Claim(rules.sub_claim.clone()))?
        .to_string();
    // Kafka: a string is one scope, a list several; each non-empty once trimmed, no
    // duplicates; any other type is no scope at all.
    let raw: Vec<Option<&str>> = match c.get(&rules.scope_claim) {
        Some(serde_json::Value::String(s)) => vec![Some(s)],
        Some(serde_json::Value::Array(a)) => a.iter().map(serde_json::Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut scopes: Vec<String> = Vec::new();
    for s in raw {
        match s.map(str::trim).filter(|s| !s.is_empty()) {
            Some(s) if !scopes.iter().any(|x| x == s) => scopes.push(s.to_string()),
            _ => return Err(TokenError::Claim(rules.scope_claim.clone())),
        }
    }
    Ok(ValidToken {
        principal,
        expires_at_ms: (exp * 1000.0) as i64,
        scopes,
    })
}

/// The broker's validator: the rules and the JWKS they check signatures against.
pub struct OAuthValidator {
    pub rules: TokenRules,
    pub jwks: std::sync::Arc<super::jwks::Jwks>,
}

impl OAuthValidator {
    pub fn check(&self, token: &str) -> Result<ValidToken, TokenError> {
        let r = validate(token, &self.jwks.keys(), &self.rules);
        if r.as_ref().is_err_and(TokenError::unknown_key) {
            self.jwks.want_refresh();
        }
        r
    }
}

#[cfg(test)]
#[path = "oauthbearer_tests.rs"]
mod tests;
