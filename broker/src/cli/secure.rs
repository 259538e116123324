//! Connecting to a secured broker, as rpk does: TLS (`--tls-ca`, `--tls-cert`, `--tls-key`)
//! and SASL (`--sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512`, `--user`, `--password`).
//!
//! The admin client (`client::Client`) runs each new connection through `Security::open`:
//! TCP, then the TLS handshake (rustls, the broker's own TLS stack), then SaslHandshake v1 and
//! SaslAuthenticate v1 with the mechanism's tokens, before its first request. Produce and
//! consume go through librdkafka, which is given the same settings by `librdkafka_config`
//! (its TLS and SCRAM run on OpenSSL: broker/Cargo.toml builds rdkafka with `ssl`).
//!
//! The SCRAM client (RFC 5802, Kafka's dialect: no channel binding, `n,,` GS2 header) shares
//! its crypto with the broker's server side (`security::scram`), and checks the server's
//! signature, so a broker that does not know the password cannot pass for one that does.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use ring::rand::SecureRandom;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::error::CliError;
use crate::metadata::scram::ScramMechanism;
use crate::security::scram::{hash, hmac, salted_password};

/// A connection to a broker, plain or TLS.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}
pub type Stream = Box<dyn Io>;

/// The connection flags every client command takes (docs/cli.md, "Connecting").
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SecurityArgs {
    /// Connect with TLS (implied by --tls-ca, --tls-cert, --tls-key); without --tls-ca the
    /// system's root certificates are trusted.
    #[arg(long, env = "STROM_TLS", global = true)]
    pub tls: bool,
    /// PEM file of the CA certificates the broker's certificate must chain to.
    #[arg(long, env = "STROM_TLS_CA", value_name = "FILE", global = true)]
    pub tls_ca: Option<PathBuf>,
    /// PEM file of the client certificate (chain, leaf first), for brokers asking for one.
    #[arg(long, env = "STROM_TLS_CERT", value_name = "FILE", global = true)]
    pub tls_cert: Option<PathBuf>,
    /// PEM file of the client certificate's unencrypted private key.
    #[arg(long, env = "STROM_TLS_KEY", value_name = "FILE", global = true)]
    pub tls_key: Option<PathBuf>,
    /// SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, env = "STROM_SASL_MECHANISM", global = true)]
    pub sasl_mechanism: Option<String>,
    /// SASL user name.
    #[arg(long, env = "STROM_USER", global = true)]
    pub user: Option<String>,
    /// SASL password (prefer STROM_PASSWORD: a flag shows in `ps`).
    #[arg(long, env = "STROM_PASSWORD", hide_env_values = true, global = true)]
    pub password: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
}

impl Mechanism {
    fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
        }
    }
}

#[derive(Clone)]
struct Sasl {
    mechanism: Mechanism,
    user: String,
    password: String,
}

/// How to open a connection: what `SecurityArgs` said, checked and loaded once.
#[derive(Clone, Default)]
pub struct Security {
    tls: Option<Arc<rustls::ClientConfig>>,
    sasl: Option<Sasl>,
}

impl SecurityArgs {
    fn tls_on(&self) -> bool {
        self.tls || self.tls_ca.is_some() || self.tls_cert.is_some() || self.tls_key.is_some()
    }

    fn sasl(&self) -> Result<Option<Sasl>, CliError> {
        match (&self.sasl_mechanism, &self.user, &self.password) {
            (None, None, None) => Ok(None),
            (Some(m), Some(u), Some(p)) => {
                let mechanism = match m.to_ascii_uppercase().as_str() {
                    "PLAIN" => Mechanism::Plain,
                    other => {
                        Mechanism::Scram(ScramMechanism::from_name(other).ok_or_else(|| {
                            CliError::Usage(format!(
                                "--sasl-mechanism {m:?}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
                            ))
                        })?)
                    }
                };
                Ok(Some(Sasl {
                    mechanism,
                    user: u.clone(),
                    password: p.clone(),
                }))
            }
            _ => Err(CliError::Usage(
                "SASL needs all three of --sasl-mechanism, --user and --password".into(),
            )),
        }
    }

    /// Loads the certificates and checks the flags.
    pub fn load(&self) -> Result<Security, CliError> {
        let sasl = self.sasl()?;
        let tls = if self.tls_on() {
            Some(Arc::new(self.tls_config()?))
        } else {
            None
        };
        Ok(Security { tls, sasl })
    }

    fn tls_config(&self) -> Result<rustls::ClientConfig, CliError> {
        let read = |what: &str, p: &PathBuf| {
            std::fs::read(p).map_err(|e| CliError::Usage(format!("{what} {}: {e}", p.display())))
        };
        let bad_pem = |what: &str, p: &PathBuf, e: String| {
            CliError::Usage(format!("{what} {}: {e}", p.display()))
        };
        let mut roots = rustls::RootCertStore::empty();
        match &self.tls_ca {
            Some(p) => {
                let pem = read("--tls-ca", p)?;
                for c in CertificateDer::pem_slice_iter(&pem) {
                    let c = c.map_err(|e| bad_pem("--tls-ca", p, e.to_string()))?;
                    roots
                        .add(c)
                        .map_err(|e| bad_pem("--tls-ca", p, e.to_string()))?;
                }
                if roots.is_empty() {
                    return Err(bad_pem("--tls-ca", p, "no CERTIFICATE in the PEM".into()));
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| CliError::Client(format!("TLS: {e}")))?
            .with_root_certificates(roots);
        match (&self.tls_cert, &self.tls_key) {
            (None, None) => Ok(builder.with_no_client_auth()),
            (Some(c), Some(k)) => {
                let pem = read("--tls-cert", c)?;
                let chain = CertificateDer::pem_slice_iter(&pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| bad_pem("--tls-cert", c, e.to_string()))?;
                if chain.is_empty() {
                    return Err(bad_pem("--tls-cert", c, "no CERTIFICATE in the PEM".into()));
                }
                let key = PrivateKeyDer::from_pem_slice(&read("--tls-key", k)?)
                    .map_err(|e| bad_pem("--tls-key", k, format!("{e} (an unencrypted key)")))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| bad_pem("--tls-cert", c, e.to_string()))
            }
            _ => Err(CliError::Usage(
                "a client certificate needs both --tls-cert and --tls-key".into(),
            )),
        }
    }

    /// The same settings for librdkafka (produce, consume); `-X` properties come after and
    /// may override them.
    pub fn librdkafka_config(&self, c: &mut rdkafka::config::ClientConfig) -> Result<(), CliError> {
        let sasl = self.sasl()?;
        let protocol = match (self.tls_on(), sasl.is_some()) {
            (false, false) => return Ok(()),
            (true, false) => "ssl",
            (false, true) => "sasl_plaintext",
            (true, true) => "sasl_ssl",
        };
        c.set("security.protocol", protocol);
        let path = |p: &PathBuf| p.to_string_lossy().into_owned();
        if let Some(p) = &self.tls_ca {
            c.set("ssl.ca.location", path(p));
        }
        if let Some(p) = &self.tls_cert {
            c.set("ssl.certificate.location", path(p));
        }
        if let Some(p) = &self.tls_key {
            c.set("ssl.key.location", path(p));
        }
        if let Some(s) = sasl {
            c.set("sasl.mechanism", s.mechanism.name())
                .set("sasl.username", s.user)
                .set("sasl.password", s.password);
        }
        Ok(())
    }
}

impl Security {
    /// Opens an authenticated connection to `addr`.
    pub async fn open(
        &self,
        addr: &str,
        tcp: TcpStream,
        timeout: Duration,
    ) -> Result<Stream, CliError> {
        let unreachable = |reason: String| CliError::Unreachable {
            addr: addr.to_string(),
            reason,
        };
        let mut stream: Stream = match &self.tls {
            None => Box::new(tcp),
            Some(config) => {
                let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let name = ServerName::try_from(host.to_string())
                    .map_err(|e| CliError::Usage(format!("TLS server name {host:?}: {e}")))?;
                let connector = tokio_rustls::TlsConnector::from(config.clone());
                let tls = tokio::time::timeout(timeout, connector.connect(name, tcp))
                    .await
                    .map_err(|_| unreachable(format!("no TLS handshake within {timeout:?}")))?
                    .map_err(|e| unreachable(format!("TLS handshake failed: {e}")))?;
                Box::new(tls)
            }
        };
        if let Some(sasl) = &self.sasl {
            tokio::time::timeout(timeout, authenticate(&mut stream, addr, sasl))
                .await
                .map_err(|_| unreachable(format!("no SASL answer within {timeout:?}")))??;
        }
        Ok(stream)
    }
}

async fn authenticate(stream: &mut Stream, addr: &str, sasl: &Sasl) -> Result<(), CliError> {
    let mech = sasl.mechanism.name();
    let req = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mech));
    let resp: SaslHandshakeResponse =
        super::exchange::exchange(stream, addr, ApiKey::SaslHandshake, 1, 1, &req).await?;
    if resp.error_code != 0 {
        let enabled: Vec<String> = resp.mechanisms.iter().map(|m| m.to_string()).collect();
        return Err(CliError::kafka(
            format!("SASL {mech}"),
            resp.error_code,
            Some(format!("the broker enables {}", enabled.join(", "))),
        ));
    }
    let context = format!("authenticating as {:?} with {mech}", sasl.user);
    match sasl.mechanism {
        Mechanism::Plain => {
            let token = format!("\0{}\0{}", sasl.user, sasl.password).into_bytes();
            step(stream, addr, &context, 1, token).await?;
        }
        Mechanism::Scram(m) => {
            let client = ScramClient::new(m, &sasl.user, &sasl.password);
            let server_first = step(stream, addr, &context, 1, client.first().into_bytes()).await?;
            let (fin, signature) = client
                .last(&server_first)
                .map_err(|e| CliError::Client(format!("{context}: {e}")))?;
            let server_final = step(stream, addr, &context, 2, fin.into_bytes()).await?;
            ScramClient::verify(&server_final, &signature)
                .map_err(|e| CliError::Client(format!("{context}: {e}")))?;
        }
    }
    Ok(())
}

/// One SaslAuthenticate round trip: our token, the broker's.
async fn step(
    stream: &mut Stream,
    addr: &str,
    context: &str,
    n: i32,
    token: Vec<u8>,
) -> Result<Bytes, CliError> {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    let resp: SaslAuthenticateResponse =
        super::exchange::exchange(stream, addr, ApiKey::SaslAuthenticate, 1, 1 + n, &req).await?;
    if resp.error_code != 0 {
        return Err(CliError::kafka(
            context,
            resp.error_code,
            resp.error_message.map(|m| m.to_string()),
        ));
    }
    Ok(resp.auth_bytes)
}

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
