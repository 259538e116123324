//! The client side of a SCRAM exchange (RFC 5802 in Kafka's dialect: no channel binding, the
//! `n,,` GS2 header). It shares its crypto with the broker's server side (`security::scram`)
//! and checks the server's signature, so a broker that does not know the password cannot pass
//! for one that does.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::rand::SecureRandom;

use crate::metadata::scram::ScramMechanism;
use crate::security::scram::{hash, hmac, salted_password};

/// The client side of one SCRAM exchange.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    nonce: String,
    first_bare: String,
}

impl ScramClient {
    pub fn new(mechanism: ScramMechanism, user: &str, password: &str) -> ScramClient {
        let mut raw = [0u8; 24];
        ring::rand::SystemRandom::new()
            .fill(&mut raw)
            .expect("system randomness");
        Self::with_nonce(mechanism, user, password, B64.encode(raw))
    }

    pub fn with_nonce(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
        nonce: String,
    ) -> ScramClient {
        let name = user.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            mechanism,
            password: password.to_string(),
            first_bare: format!("n={name},r={nonce}"),
            nonce,
        }
    }

    /// The client-first message.
    pub fn first(&self) -> String {
        format!("n,,{}", self.first_bare)
    }

    /// The client-final message for `server_first`, and the server signature to expect.
    pub fn last(&self, server_first: &[u8]) -> Result<(String, Vec<u8>), String> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| "the server-first message is not UTF-8".to_string())?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in server_first.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(v),
                Some(("i", v)) => iterations = Some(v),
                Some(("e", v)) => return Err(format!("the server said {v}")),
                Some(("m", _)) => return Err("the server asks for an unknown extension".into()),
                _ => {}
            }
        }
        let bad = |what: &str| format!("server-first message {server_first:?}: {what}");
        let nonce = nonce.ok_or_else(|| bad("no nonce"))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(bad("the nonce does not extend ours"));
        }
        let salt = B64
            .decode(salt.ok_or_else(|| bad("no salt"))?)
            .map_err(|_| bad("the salt is not base64"))?;
        let iterations: i32 = iterations
            .ok_or_else(|| bad("no iteration count"))?
            .parse()
            .map_err(|_| bad("the iteration count is not a number"))?;
        // Kafka's clients refuse fewer than 4096; a huge count would hang us.
        if !(ScramMechanism::MIN_ITERATIONS..=1_000_000).contains(&iterations) {
            return Err(bad("iteration count out of range"));
        }
        let m = self.mechanism;
        let salted = salted_password(m, self.password.as_bytes(), &salt, iterations);
        let client_key = hmac(m, &salted, b"Client Key");
        let stored_key = hash(m, &client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.first_bare);
        let signature = hmac(m, &stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = hmac(m, &salted, b"Server Key");
        let server_signature = hmac(m, &server_key, auth_message.as_bytes());
        Ok((
            format!("{without_proof},p={}", B64.encode(proof)),
            server_signature,
        ))
    }

    /// Checks the server-final message against the signature `last` expected.
    pub fn verify(server_final: &[u8], expected: &[u8]) -> Result<(), String> {
        let text = String::from_utf8_lossy(server_final);
        for attr in text.split(',') {
            match attr.split_once('=') {
                Some(("e", v)) => return Err(format!("the server said {v}")),
                Some(("v", v)) => {
                    return match B64.decode(v) {
                        Ok(sig) if sig == expected => Ok(()),
                        _ => Err(
                            "the server's signature is wrong: it does not know the password".into(),
                        ),
                    }
                }
                _ => {}
            }
        }
        Err(format!("server-final message {text:?} has no signature"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::scram::{credential_from_password, ScramServer, Step};

    #[test]
    fn given_rfc7677_example_when_client_answers_then_proof_and_signature_match() {
        // RFC 7677 section 3, SCRAM-SHA-256, user "user", password "pencil".
        let c = ScramClient::with_nonce(
            ScramMechanism::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        assert_eq!(c.first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first =
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let (fin, sig) = c.last(server_first).unwrap();
        assert_eq!(
            fin,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        ScramClient::verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", &sig).unwrap();
        assert!(ScramClient::verify(b"v=AAAA", &sig).is_err());
        assert!(ScramClient::verify(b"e=invalid-proof", &sig).is_err());
    }

    #[test]
    fn given_strom_server_when_client_exchanges_then_both_agree() {
        for m in ScramMechanism::ALL {
            let cred = credential_from_password(m, "s3cret", 4096);
            let mut server = ScramServer::new(m, [7; 32]);
            let client = ScramClient::new(m, "a,b=c", "s3cret");
            let lookup = |u: &str| (u == "a,b=c").then(|| cred.clone());
            let Step::Continue(first) = server.step(client.first().as_bytes(), lookup).unwrap()
            else {
                panic!("server-first expected")
            };
            let (fin, sig) = client.last(&first).unwrap();
            let Step::Done { response, .. } = server.step(fin.as_bytes(), lookup).unwrap() else {
                panic!("server-final expected")
            };
            ScramClient::verify(&response, &sig).unwrap();
        }
    }

    #[test]
    fn given_hostile_server_first_when_client_answers_then_refused() {
        let c = ScramClient::with_nonce(ScramMechanism::Sha256, "u", "p", "abc".into());
        for bad in [
            &b"r=xyz,s=AAAA,i=4096"[..],   // nonce not ours
            b"r=abc,s=AAAA,i=4096",        // not extended
            b"r=abcd,s=!!,i=4096",         // salt not base64
            b"r=abcd,s=AAAA,i=10",         // too few iterations
            b"r=abcd,s=AAAA,i=2000000000", // too many
            b"r=abcd,s=AAAA",              // none
            b"m=ext,r=abcd,s=AAAA,i=4096", // mandatory extension
            b"\xff",
        ] {
            assert!(c.last(bad).is_err(), "{bad:?}");
        }
    }
}
