//! OAUTHBEARER client messages, as an unauthenticated client sends them: the KIP-255 first
//! message parser on the raw input, then the token it carries (or, when it does not parse,
//! the input itself) through the JWT checks against a fixed JWKS of an RSA, a P-256 and an
//! Ed25519 key. Any input must end in a token or an error, never a panic (a JWS header
//! naming an algorithm that does not fit the key must not reach jsonwebtoken's
//! unreachable!() paths).
#![no_main]

use libfuzzer_sys::fuzz_target;
use strom::security::oauthbearer::{self, TokenRules};

fn keys() -> Vec<jsonwebtoken::jwk::Jwk> {
    serde_json::from_str(
        r#"[
        {"kty":"RSA","kid":"r","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":"AQAB"},
        {"kty":"EC","kid":"e","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
        {"kty":"OKP","kid":"d","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
    ]"#,
    )
    // A key the JWKS parser would skip only shrinks what the target exercises.
    .unwrap_or_default()
}

fuzz_target!(|data: &[u8]| {
    let rules = TokenRules {
        audience: vec!["strom".into()],
        issuer: Some("https://idp".into()),
        sub_claim: "sub".into(),
        scope_claim: "scope".into(),
        clock_skew_s: 30,
    };
    let keys = keys();
    match oauthbearer::parse_client_first(data) {
        Ok(m) => {
            let _ = oauthbearer::validate(&m.token, &keys, &rules);
        }
        Err(_) => {
            let _ = oauthbearer::validate(&String::from_utf8_lossy(data), &keys, &rules);
        }
    }
});
