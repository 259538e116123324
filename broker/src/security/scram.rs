//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the server side, as Kafka speaks
//! them: the crypto (ring's PBKDF2 and HMAC, `subtle` for the constant-time compare), the
//! three client/server messages, and the exchange's state machine.
//!
//! Kafka's dialect: the GS2 header is `n,,` or `n,a=<authzid>,` (no channel binding; the
//! authzid, if any, must be the user), user names escape `,` and `=` as `=2C` and `=3D`,
//! extensions after the nonce are `key=value` pairs (`tokenauth=true` is delegation tokens,
//! refused here). The client-final's channel binding must be the GS2 header it sent.
//!
//! A user without a credential gets a server-first message like any other (salt derived from
//! a per-process secret and the name, 4096 iterations) and fails at the client-final, with
//! the same message and after the same delay as a wrong password: the answer never says
//! whether the user exists. A replayed client-final fails because the server's nonce is new
//! on every exchange.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::{digest, hmac, pbkdf2, rand::SecureRandom};
use std::num::NonZeroU32;
use subtle::ConstantTimeEq;

use crate::metadata::scram::{ScramMechanism, StoredCredential};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScramError {
    #[error("invalid SCRAM client-first message: {0}")]
    ClientFirst(&'static str),
    #[error("invalid SCRAM client-final message: {0}")]
    ClientFinal(&'static str),
    #[error("authorization id `{0}` is not the user")]
    Authzid(String),
    #[error("delegation tokens (tokenauth) are not supported")]
    TokenAuth,
    #[error("nonce of the client-final message is not the exchange's")]
    Nonce,
    #[error("channel binding of the client-final message is not the client-first's GS2 header")]
    ChannelBinding,
    #[error("unknown user `{0}`")]
    UnknownUser(String),
    #[error("client proof does not match the stored key of `{0}`")]
    BadProof(String),
    #[error("the exchange is already over")]
    Finished,
}

fn hmac_alg(m: ScramMechanism) -> hmac::Algorithm {
    match m {
        ScramMechanism::Sha256 => hmac::HMAC_SHA256,
        ScramMechanism::Sha512 => hmac::HMAC_SHA512,
    }
}

pub fn hmac(m: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac_alg(m), key), data)
        .as_ref()
        .to_vec()
}

pub fn hash(m: ScramMechanism, data: &[u8]) -> Vec<u8> {
    let alg = match m {
        ScramMechanism::Sha256 => &digest::SHA256,
        ScramMechanism::Sha512 => &digest::SHA512,
    };
    digest::digest(alg, data).as_ref().to_vec()
}

/// RFC 5802's `Hi(password, salt, i)`: PBKDF2 with the mechanism's HMAC.
pub fn salted_password(
    m: ScramMechanism,
    password: &[u8],
    salt: &[u8],
    iterations: i32,
) -> Vec<u8> {
    let (alg, len) = match m {
        ScramMechanism::Sha256 => (pbkdf2::PBKDF2_HMAC_SHA256, 32),
        ScramMechanism::Sha512 => (pbkdf2::PBKDF2_HMAC_SHA512, 64),
    };
    let mut out = vec![0u8; len];
    let n = NonZeroU32::new(iterations.max(1) as u32).expect("at least one iteration");
    pbkdf2::derive(alg, n, salt, password, &mut out);
    out
}

/// The stored form of a salted password (what AlterUserScramCredentials sends).
pub fn credential_from_salted(
    m: ScramMechanism,
    salted: &[u8],
    salt: Vec<u8>,
    iterations: i32,
) -> StoredCredential {
    let client_key = hmac(m, salted, b"Client Key");
    StoredCredential {
        salt,
        stored_key: hash(m, &client_key),
        server_key: hmac(m, salted, b"Server Key"),
        iterations,
    }
}

/// A new credential for `password` with a fresh random salt.
pub fn credential_from_password(
    m: ScramMechanism,
    password: &str,
    iterations: i32,
) -> StoredCredential {
    let mut salt = vec![0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut salt)
        .expect("system randomness");
    let salted = salted_password(m, password.as_bytes(), &salt, iterations);
    credential_from_salted(m, &salted, salt, iterations)
}

/// Whether `password` is the one `c` was made from (PLAIN), compared in constant time.
pub fn password_matches(m: ScramMechanism, c: &StoredCredential, password: &str) -> bool {
    let salted = salted_password(m, password.as_bytes(), &c.salt, c.iterations);
    let stored = hash(m, &hmac(m, &salted, b"Client Key"));
    bool::from(stored.ct_eq(&c.stored_key))
}

/// A parsed client-first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// `n,,` or `n,a=...,`: the channel binding the client-final must repeat.
    pub gs2_header: String,
    pub authzid: Option<String>,
    pub user: String,
    pub nonce: String,
    pub extensions: Vec<(String, String)>,
    /// Everything after the GS2 header (part of the AuthMessage).
    pub bare: String,
}

/// RFC 5802's `saslname`: `=2C` is `,` and `=3D` is `=`; any other `=` is an error.
fn decode_saslname(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i + 1..i + 3) {
            Some("2C") => out.push(','),
            Some("3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

fn valid_nonce(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

pub fn parse_client_first(msg: &[u8]) -> Result<ClientFirst, ScramError> {
    let bad = ScramError::ClientFirst;
    let s = std::str::from_utf8(msg).map_err(|_| bad("not UTF-8"))?;
    let rest = s
        .strip_prefix("n,")
        .ok_or(bad("GS2 header must be `n,` (no channel binding)"))?;
    let (authz, bare) = rest.split_once(',').ok_or(bad("no GS2 header end"))?;
    let authzid = match authz {
        "" => None,
        a => Some(
            a.strip_prefix("a=")
                .and_then(decode_saslname)
                .ok_or(bad("bad authzid"))?,
        ),
    };
    let gs2_header = format!("n,{authz},");
    let mut parts = bare.split(',');
    let user = parts
        .next()
        .and_then(|p| p.strip_prefix("n="))
        .and_then(decode_saslname)
        .ok_or(bad("no n=<user>"))?;
    let nonce = parts
        .next()
        .and_then(|p| p.strip_prefix("r="))
        .filter(|n| valid_nonce(n))
        .ok_or(bad("no r=<nonce>"))?
        .to_string();
    let mut extensions = Vec::new();
    for p in parts {
        let (k, v) = p.split_once('=').ok_or(bad("extension without `=`"))?;
        if k.is_empty() {
            return Err(bad("empty extension name"));
        }
        extensions.push((k.to_string(), v.to_string()));
    }
    Ok(ClientFirst {
        gs2_header,
        authzid,
        user,
        nonce,
        extensions,
        bare: bare.to_string(),
    })
}

/// A parsed client-final message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFinal {
    pub channel_binding: Vec<u8>,
    pub nonce: String,
    pub proof: Vec<u8>,
    /// The message up to `,p=` (part of the AuthMessage).
    pub without_proof: String,
}

pub fn parse_client_final(msg: &[u8]) -> Result<ClientFinal, ScramError> {
    let bad = ScramError::ClientFinal;
    let s = std::str::from_utf8(msg).map_err(|_| bad("not UTF-8"))?;
    let (without_proof, proof) = s.rsplit_once(",p=").ok_or(bad("no p=<proof>"))?;
    let proof = B64.decode(proof).map_err(|_| bad("proof is not base64"))?;
    let mut parts = without_proof.split(',');
    let channel_binding = parts
        .next()
        .and_then(|p| p.strip_prefix("c="))
        .and_then(|c| B64.decode(c).ok())
        .ok_or(bad("no c=<channel binding>"))?;
    let nonce = parts
        .next()
        .and_then(|p| p.strip_prefix("r="))
        .filter(|n| valid_nonce(n))
        .ok_or(bad("no r=<nonce>"))?
        .to_string();
    for p in parts {
        if !p.contains('=') {
            return Err(bad("extension without `=`"));
        }
    }
    Ok(ClientFinal {
        channel_binding,
        nonce,
        proof,
        without_proof: without_proof.to_string(),
    })
}

/// Where the exchange is.
enum State {
    First,
    Final {
        // Boxed: the state lives in every SASL connection, mostly in the small variants.
        first: Box<ClientFirst>,
        server_first: String,
        nonce: String,
        credential: Option<StoredCredential>,
    },
    Done,
}

/// What a step of the exchange answers.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The server-first message; the client's final comes next.
    Continue(Vec<u8>),
    /// The server-final message: `user` is authenticated.
    Done { response: Vec<u8>, user: String },
}

/// One SCRAM exchange on one connection.
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
    /// Keys the fake salts of unknown users (per process, random).
    secret: [u8; 32],
    nonce: Box<dyn FnMut() -> String>,
}

fn random_nonce() -> String {
    let mut b = [0u8; 24];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .expect("system randomness");
    B64.encode(b)
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism, secret: [u8; 32]) -> ScramServer {
        Self::with_nonce(mechanism, secret, Box::new(random_nonce))
    }

    /// With the server nonce chosen by `nonce` (tests use RFC 7677's).
    pub fn with_nonce(
        mechanism: ScramMechanism,
        secret: [u8; 32],
        nonce: Box<dyn FnMut() -> String>,
    ) -> ScramServer {
        ScramServer {
            mechanism,
            state: State::First,
            secret,
            nonce,
        }
    }

    /// Feeds the client's next message; `lookup` finds the user's credential.
    pub fn step(
        &mut self,
        msg: &[u8],
        lookup: impl FnOnce(&str) -> Option<StoredCredential>,
    ) -> Result<Step, ScramError> {
        let m = self.mechanism;
        match std::mem::replace(&mut self.state, State::Done) {
            State::First => {
                let first = parse_client_first(msg)?;
                if let Some(a) = &first.authzid {
                    if *a != first.user {
                        return Err(ScramError::Authzid(a.clone()));
                    }
                }
                if first
                    .extensions
                    .iter()
                    .any(|(k, v)| k == "tokenauth" && v.eq_ignore_ascii_case("true"))
                {
                    return Err(ScramError::TokenAuth);
                }
                let credential = lookup(&first.user);
                let (salt, iterations) = match &credential {
                    Some(c) => (c.salt.clone(), c.iterations),
                    None => (
                        hmac(m, &self.secret, first.user.as_bytes())[..32].to_vec(),
                        ScramMechanism::MIN_ITERATIONS,
                    ),
                };
                let nonce = format!("{}{}", first.nonce, (self.nonce)());
                let server_first = format!("r={nonce},s={},i={iterations}", B64.encode(&salt));
                let out = server_first.clone().into_bytes();
                self.state = State::Final {
                    first: Box::new(first),
                    server_first,
                    nonce,
                    credential,
                };
                Ok(Step::Continue(out))
            }
            State::Final {
                first,
                server_first,
                nonce,
                credential,
            } => {
                let fin = parse_client_final(msg)?;
                if fin.nonce != nonce {
                    return Err(ScramError::Nonce);
                }
                if fin.channel_binding != first.gs2_header.as_bytes() {
                    return Err(ScramError::ChannelBinding);
                }
                let Some(c) = credential else {
                    return Err(ScramError::UnknownUser(first.user));
                };
                let auth_message = format!("{},{server_first},{}", first.bare, fin.without_proof);
                let client_signature = hmac(m, &c.stored_key, auth_message.as_bytes());
                if fin.proof.len() != client_signature.len() {
                    return Err(ScramError::BadProof(first.user));
                }
                let client_key: Vec<u8> = fin
                    .proof
                    .iter()
                    .zip(&client_signature)
                    .map(|(p, s)| p ^ s)
                    .collect();
                if !bool::from(hash(m, &client_key).ct_eq(&c.stored_key)) {
                    return Err(ScramError::BadProof(first.user));
                }
                let server_signature = hmac(m, &c.server_key, auth_message.as_bytes());
                Ok(Step::Done {
                    response: format!("v={}", B64.encode(server_signature)).into_bytes(),
                    user: first.user,
                })
            }
            State::Done => Err(ScramError::Finished),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 7677 section 3's example exchange, with the server's nonce and credential fixed.
    #[test]
    fn given_rfc7677_exchange_when_serving_then_the_rfcs_server_signature() {
        let m = ScramMechanism::Sha256;
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let cred =
            credential_from_salted(m, &salted_password(m, b"pencil", &salt, 4096), salt, 4096);
        let mut s = ScramServer::with_nonce(
            m,
            [0; 32],
            Box::new(|| "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into()),
        );
        let first = s
            .step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", |u| {
                (u == "user").then(|| cred.clone())
            })
            .unwrap();
        assert_eq!(
            first,
            Step::Continue(
                b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".to_vec()
            )
        );
        let fin = s
            .step(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                |_| unreachable!(),
            )
            .unwrap();
        assert_eq!(
            fin,
            Step::Done {
                response: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec(),
                user: "user".into()
            }
        );
        assert_eq!(s.step(b"again", |_| None), Err(ScramError::Finished));
    }

    #[test]
    fn given_wrong_proof_or_unknown_user_when_finishing_then_refused() {
        let m = ScramMechanism::Sha512;
        let cred = credential_from_password(m, "secret", 4096);
        let mut s = ScramServer::new(m, [7; 32]);
        let Step::Continue(sf) = s.step(b"n,,n=alice,r=abc", |_| Some(cred.clone())).unwrap()
        else {
            panic!()
        };
        let nonce = std::str::from_utf8(&sf)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .to_string();
        let fin = format!("c=biws,{nonce},p={}", B64.encode([0u8; 64]));
        assert_eq!(
            s.step(fin.as_bytes(), |_| None),
            Err(ScramError::BadProof("alice".into()))
        );
        // Unknown user: a server-first all the same (same shape, minimum iterations).
        let mut s = ScramServer::new(m, [7; 32]);
        let Step::Continue(sf) = s.step(b"n,,n=nobody,r=abc", |_| None).unwrap() else {
            panic!()
        };
        let sf = String::from_utf8(sf).unwrap();
        assert!(sf.ends_with(",i=4096") && sf.contains(",s="), "{sf}");
        let nonce = sf.split(',').next().unwrap().to_string();
        let fin = format!("c=biws,{nonce},p={}", B64.encode([0u8; 64]));
        assert_eq!(
            s.step(fin.as_bytes(), |_| None),
            Err(ScramError::UnknownUser("nobody".into()))
        );
    }

    #[test]
    fn given_kafka_client_first_variants_when_parsing_then_fields_or_errors() {
        let f = parse_client_first(b"n,a=al=2Cice,n=al=2Cice,r=xyz,tokenauth=true").unwrap();
        assert_eq!(f.authzid.as_deref(), Some("al,ice"));
        assert_eq!(f.user, "al,ice");
        assert_eq!(f.extensions, vec![("tokenauth".into(), "true".into())]);
        assert_eq!(f.gs2_header, "n,a=al=2Cice,");
        for bad in [
            &b"y,,n=a,r=b"[..],
            b"p=tls,,n=a,r=b",
            b"n,,n=a",
            b"n,,n=a=x,r=b",
            b"n,,r=b",
            b"\xff",
        ] {
            assert!(parse_client_first(bad).is_err(), "{bad:?}");
        }
        let mut s = ScramServer::new(ScramMechanism::Sha256, [0; 32]);
        assert_eq!(
            s.step(b"n,a=bob,n=alice,r=x", |_| None),
            Err(ScramError::Authzid("bob".into()))
        );
        let mut s = ScramServer::new(ScramMechanism::Sha256, [0; 32]);
        assert_eq!(
            s.step(b"n,,n=alice,r=x,tokenauth=true", |_| None),
            Err(ScramError::TokenAuth)
        );
    }

    #[test]
    fn given_password_when_checking_plain_then_only_the_right_one_matches() {
        let c = credential_from_password(ScramMechanism::Sha256, "right", 4096);
        assert!(password_matches(ScramMechanism::Sha256, &c, "right"));
        assert!(!password_matches(ScramMechanism::Sha256, &c, "wrong"));
    }

    proptest! {
        #[test]
        fn given_any_bytes_when_parsing_scram_messages_then_no_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_client_first(&b);
            let _ = parse_client_final(&b);
            let mut s = ScramServer::new(ScramMechanism::Sha512, [1; 32]);
            if s.step(&b, |_| None).is_ok() {
                let _ = s.step(&b, |_| None);
            }
        }

        #[test]
        fn given_any_user_and_nonce_when_formatted_then_parsed_back(user in "[ -~]{1,20}", nonce in "[!-+--~]{1,30}") {
            let esc = user.replace('=', "=3D").replace(',', "=2C");
            let f = parse_client_first(format!("n,,n={esc},r={nonce}").as_bytes()).unwrap();
            prop_assert_eq!(f.user, user);
            prop_assert_eq!(f.nonce, nonce);
        }
    }
}
