//! Connecting to a secured broker, as rpk does: TLS (`--tls-ca`, `--tls-cert`, `--tls-key`)
//! and SASL (`--sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512`, `--user`, `--password`).
//!
//! The admin client (`client::Client`) runs each new connection through `Security::open`,
//! which is the broker's own outbound connection (`kafka_conn`, also what its inter-broker
//! calls use): TCP, then the TLS handshake (rustls, the broker's own TLS stack), then
//! SaslHandshake v1 and SaslAuthenticate v1 with the mechanism's tokens, before its first
//! request. Produce and consume go through librdkafka, which is given the same settings by
//! `librdkafka_config` (its TLS and SCRAM run on OpenSSL: broker/Cargo.toml builds rdkafka
//! with `ssl`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;

use super::error::CliError;
pub use crate::kafka_conn::Stream;
use crate::kafka_conn::{ClientSecurity, ConnError, KafkaConn, Mechanism, SaslLogin};

/// The largest answer the CLI reads during authentication.
const MAX_AUTH_RESPONSE: usize = 1 << 20;

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

/// How to open a connection: what `SecurityArgs` said, checked and loaded once.
#[derive(Clone, Default)]
pub struct Security(ClientSecurity);

impl SecurityArgs {
    fn tls_on(&self) -> bool {
        self.tls || self.tls_ca.is_some() || self.tls_cert.is_some() || self.tls_key.is_some()
    }

    fn sasl(&self) -> Result<Option<SaslLogin>, CliError> {
        match (&self.sasl_mechanism, &self.user, &self.password) {
            (None, None, None) => Ok(None),
            (Some(m), Some(u), Some(p)) => {
                let mechanism = Mechanism::from_name(&m.to_ascii_uppercase()).ok_or_else(|| {
                    CliError::Usage(format!(
                        "--sasl-mechanism {m:?}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
                    ))
                })?;
                Ok(Some(SaslLogin {
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
            let config = Arc::new(self.tls_config()?);
            Some(Arc::new(move || config.clone()) as crate::kafka_conn::TlsClient)
        } else {
            None
        };
        Ok(Security(ClientSecurity { tls, sasl }))
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
        KafkaConn::open(addr, tcp, &self.0, timeout, "strom-cli", MAX_AUTH_RESPONSE)
            .await
            .map(KafkaConn::into_stream)
            .map_err(|e| match e {
                ConnError::Io { addr, what } => CliError::Unreachable { addr, reason: what },
                ConnError::Tls { addr, what } => CliError::Unreachable {
                    addr,
                    reason: format!("TLS handshake failed: {what}"),
                },
                ConnError::Refused {
                    context,
                    code,
                    message,
                    ..
                } => CliError::kafka(context, code, message),
                ConnError::Auth { what, .. } => CliError::Client(what),
                ConnError::Setup { what, .. } => CliError::Usage(what),
            })
    }
}
