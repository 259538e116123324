//! TLS for SSL and SASL_SSL listeners, with rustls (no OpenSSL in the broker).
//!
//! `TlsAcceptors` holds the current rustls server configs, one per protocol: SSL listeners
//! ask for client certificates as `ssl.client.auth` says; SASL_SSL listeners never do (Kafka's
//! KIP-684: a SASL_SSL listener takes `ssl.client.auth` only from a listener-prefixed config,
//! which Strom does not have). Both are built from the same key, chain and truststore and
//! allow only TLS 1.2/1.3 (`ssl.enabled.protocols`).
//!
//! **Inter-broker client.** From the same material, the config this broker connects to its
//! peers' TLS listeners with (`cluster::inter_broker`): the keystore is its client
//! certificate (sent when the peer asks, on an SSL listener with `ssl.client.auth`), the
//! truststore checks the peer's certificate and its name (the peer's advertised host; without
//! a truststore, the system's roots).
//!
//! **Reload.** A thread checks the key and truststore files every `ssl_reload_interval_ms`;
//! when their contents change it builds new configs and swaps them in. New connections get the
//! new certificate, open ones keep theirs. A change that does not load (a half-written file, a
//! key that does not match the certificate) is logged and the previous configs stay, so a
//! botched renewal never takes the listener down.
//!
//! **Principal.** On an SSL listener the client certificate's subject, in Java's RFC 2253
//! form, goes through `ssl.principal.mapping.rules` (`security::ssl_principal`); no
//! certificate (client auth none or requested) is `User:ANONYMOUS`, as in Kafka. A subject no
//! rule maps refuses the connection.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::config::listeners::SecurityProtocol;
use crate::config::security::{ClientAuth, KeySource, TlsSettings, TlsVersion, TrustSource};
use crate::security::ssl_principal::{self, PrincipalMapper, SslPrincipalError};
use crate::security::Principal;

/// How long a client may take to complete the TLS handshake before it is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: {message}")]
    Pem { what: &'static str, message: String },
    #[error("TLS config: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("truststore: {0}")]
    Verifier(String),
    #[error("ssl.principal.mapping.rules: {0}")]
    Mapping(#[from] SslPrincipalError),
}

/// The file contents the configs were built from, to notice a change.
#[derive(Debug, Default, PartialEq, Eq)]
struct Material {
    key_pem: Vec<u8>,
    chain_pem: Vec<u8>,
    trust_pem: Vec<u8>,
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

impl Material {
    fn load(settings: &TlsSettings) -> Result<Material, TlsError> {
        let (key_pem, chain_pem) = match &settings.key {
            KeySource::File(p) => {
                let b = read("ssl.keystore.location", p)?;
                (b.clone(), b)
            }
            KeySource::Inline { key, chain } => (key.clone().into(), chain.clone().into()),
        };
        let trust_pem = match &settings.trust {
            TrustSource::None => Vec::new(),
            TrustSource::File(p) => read("ssl.truststore.location", p)?,
            TrustSource::Inline(s) => s.clone().into(),
        };
        Ok(Material {
            key_pem,
            chain_pem,
            trust_pem,
        })
    }
}

fn certs(what: &'static str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            what,
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            what,
            message: "no CERTIFICATE in the PEM".into(),
        });
    }
    Ok(certs)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The configs built from one material.
struct Configs {
    /// SSL listeners (client certificates as `ssl.client.auth` says).
    ssl: Arc<ServerConfig>,
    /// SASL_SSL listeners (no client certificate).
    sasl_ssl: Arc<ServerConfig>,
    /// This broker calling its peers.
    client: Arc<ClientConfig>,
}

/// Every config for `material`.
fn build(settings: &TlsSettings, material: &Material) -> Result<Configs, TlsError> {
    let key = PrivateKeyDer::from_pem_slice(&material.key_pem).map_err(|e| TlsError::Pem {
        what: "private key",
        message: format!(
            "{e}: expected an unencrypted PKCS#8 (`PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`) \
             or SEC1 (`EC PRIVATE KEY`) key; encrypted keys are not supported"
        ),
    })?;
    let chain = certs("certificate chain", &material.chain_pem)?;
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = settings
        .protocols
        .iter()
        .map(|v| match v {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        })
        .collect();
    let builder =
        || ServerConfig::builder_with_provider(provider()).with_protocol_versions(&versions);
    let roots = match settings.trust {
        TrustSource::None => None,
        _ => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs("truststore", &material.trust_pem)? {
                roots
                    .add(c)
                    .map_err(|e| TlsError::Verifier(format!("bad CA certificate: {e}")))?;
            }
            Some(Arc::new(roots))
        }
    };
    let verifier = match (&roots, settings.client_auth) {
        (_, ClientAuth::None) | (None, _) => None,
        (Some(roots), auth) => {
            let b = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider());
            let b = if auth == ClientAuth::Requested {
                b.allow_unauthenticated()
            } else {
                b
            };
            Some(b.build().map_err(|e| TlsError::Verifier(e.to_string()))?)
        }
    };
    let ssl = match verifier {
        Some(v) => builder()?
            .with_client_cert_verifier(v)
            .with_single_cert(chain.clone(), key.clone_key())?,
        None => builder()?
            .with_no_client_auth()
            .with_single_cert(chain.clone(), key.clone_key())?,
    };
    let sasl_ssl = builder()?
        .with_no_client_auth()
        .with_single_cert(chain.clone(), key.clone_key())?;
    let client_roots = roots.unwrap_or_else(|| {
        let mut system = rustls::RootCertStore::empty();
        system.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        Arc::new(system)
    });
    let client = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&versions)?
        .with_root_certificates(client_roots)
        .with_client_auth_cert(chain, key)?;
    Ok(Configs {
        ssl: Arc::new(ssl),
        sasl_ssl: Arc::new(sasl_ssl),
        client: Arc::new(client),
    })
}

/// The TLS side of every TLS listener; shared by all shards.
pub struct TlsAcceptors {
    settings: TlsSettings,
    mapper: PrincipalMapper,
    current: RwLock<Configs>,
    material: Mutex<Material>,
}

impl TlsAcceptors {
    pub fn load(settings: TlsSettings, mapping_rules: &str) -> Result<TlsAcceptors, TlsError> {
        let mapper = PrincipalMapper::parse(mapping_rules)?;
        let material = Material::load(&settings)?;
        let configs = build(&settings, &material)?;
        Ok(TlsAcceptors {
            settings,
            mapper,
            current: RwLock::new(configs),
            material: Mutex::new(material),
        })
    }

    /// The acceptor for a new connection on a listener of `protocol` (SSL or SASL_SSL).
    pub fn acceptor(&self, protocol: SecurityProtocol) -> TlsAcceptor {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        let config = match protocol {
            SecurityProtocol::SaslSsl => current.sasl_ssl.clone(),
            _ => current.ssl.clone(),
        };
        TlsAcceptor::from(config)
    }

    /// The config a new connection to a peer broker's TLS listener uses.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        current.client.clone()
    }

    /// Re-reads the files; builds and swaps in new configs when they changed. `Ok(true)` when
    /// new configs are in use.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let fresh = Material::load(&self.settings)?;
        let mut last = self.material.lock().unwrap_or_else(|e| e.into_inner());
        if *last == fresh {
            return Ok(false);
        }
        // Remember what was tried, so a broken file is reported once, not every interval.
        let built = build(&self.settings, &fresh);
        *last = fresh;
        let configs = built?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = configs;
        Ok(true)
    }

    /// The principal of a connection on an SSL listener, from its client certificate chain.
    pub fn principal(
        &self,
        peer: Option<&[CertificateDer<'_>]>,
    ) -> Result<Principal, SslPrincipalError> {
        match peer.and_then(|c| c.first()) {
            None => Ok(Principal::anonymous()),
            Some(cert) => {
                let dn = ssl_principal::subject_rfc2253(cert)?;
                Ok(Principal::user(self.mapper.name(&dn)?))
            }
        }
    }
}

/// The reload thread; dropping it stops the thread.
pub struct Reloader {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Reloader {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn spawn_reloader(tls: Arc<TlsAcceptors>, every: Duration) -> std::io::Result<Reloader> {
    let (stop, stopped) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("tls-reload".into())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                match tls.reload_if_changed() {
                    Ok(true) => tracing::info!("TLS key, certificate or truststore changed: loaded for new connections"),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "TLS files changed but do not load; new connections keep the previous certificate"),
                }
            }
        })?;
    Ok(Reloader {
        stop: Some(stop),
        thread: Some(thread),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

    fn self_signed(dn: &[(DnType, &str)], sans: Vec<String>) -> (String, String, Vec<u8>) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name = DistinguishedName::new();
        for (t, v) in dn {
            params.distinguished_name.push(t.clone(), *v);
        }
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }

    fn settings(cert: &str, key: &str) -> TlsSettings {
        TlsSettings {
            key: KeySource::Inline {
                key: key.into(),
                chain: cert.into(),
            },
            trust: TrustSource::None,
            client_auth: ClientAuth::None,
            protocols: vec![TlsVersion::Tls12, TlsVersion::Tls13],
        }
    }

    #[test]
    fn given_client_certificate_when_mapping_then_kafka_principal() {
        let (cert, key, _) =
            self_signed(&[(DnType::CommonName, "broker")], vec!["localhost".into()]);
        let tls = TlsAcceptors::load(
            settings(&cert, &key),
            "RULE:^CN=([^,]+),O=acme$/$1/L,DEFAULT",
        )
        .unwrap();
        let (_, _, alice) = self_signed(
            &[
                (DnType::OrganizationName, "acme"),
                (DnType::CommonName, "Alice"),
            ],
            vec![],
        );
        let (_, _, bob) = self_signed(
            &[
                (DnType::OrganizationName, "other"),
                (DnType::CommonName, "bob"),
            ],
            vec![],
        );
        let der = |d: &Vec<u8>| vec![CertificateDer::from(d.clone())];
        assert_eq!(
            tls.principal(Some(&der(&alice))).unwrap().to_string(),
            "User:alice"
        );
        assert_eq!(
            tls.principal(Some(&der(&bob))).unwrap().to_string(),
            "User:CN=bob,O=other"
        );
        assert_eq!(tls.principal(None).unwrap().to_string(), "User:ANONYMOUS");
        let strict =
            TlsAcceptors::load(settings(&cert, &key), "RULE:^CN=([^,]+),O=acme$/$1/").unwrap();
        assert!(matches!(
            strict.principal(Some(&der(&bob))),
            Err(SslPrincipalError::NoMatchingRule(_))
        ));
    }

    /// A CA and a broker certificate it signed (CN=broker, valid for 127.0.0.1), PEM.
    fn signed_broker() -> (String, String, String) {
        use rcgen::{BasicConstraints, IsCa, Issuer};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name = DistinguishedName::new();
        ca.distinguished_name.push(DnType::CommonName, "test-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, "broker");
        let cert = params.signed_by(&key, &issuer).unwrap();
        (ca_pem, cert.pem(), key.serialize_pem())
    }

    #[test]
    fn given_ssl_listener_requiring_certificates_when_a_peer_broker_connects_then_its_keystore_is_its_identity(
    ) {
        let (ca, cert, key) = signed_broker();
        let settings = TlsSettings {
            trust: TrustSource::Inline(ca),
            client_auth: ClientAuth::Required,
            ..settings(&cert, &key)
        };
        let tls = Arc::new(TlsAcceptors::load(settings, "DEFAULT").unwrap());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let acceptor = tls.acceptor(SecurityProtocol::Ssl);
            // The broker's own client config: its certificate for the peer's required client
            // auth, its truststore and the peer's name checked.
            let connector = tokio_rustls::TlsConnector::from(tls.client_config());
            let dial = |host: &'static str| {
                let connector = connector.clone();
                async move {
                    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
                    let name = rustls::pki_types::ServerName::try_from(host).unwrap();
                    connector.connect(name, tcp).await
                }
            };
            let server = async {
                let (tcp, _) = listener.accept().await.unwrap();
                let stream = acceptor.accept(tcp).await.unwrap();
                let peer = stream.get_ref().1.peer_certificates().map(|c| c.to_vec());
                tls.principal(peer.as_deref()).unwrap().to_string()
            };
            let (principal, client) = tokio::join!(server, dial("127.0.0.1"));
            assert!(client.is_ok());
            assert_eq!(principal, "User:CN=broker");
            // A peer whose certificate does not name the host dialled is refused.
            let refused = async {
                let (tcp, _) = listener.accept().await.unwrap();
                acceptor.accept(tcp).await.is_err()
            };
            let (_, client) = tokio::join!(refused, dial("broker.example"));
            assert!(client.is_err());
        });
    }

    #[test]
    fn given_bad_key_material_when_loading_then_error_says_what() {
        let (cert, key, _) = self_signed(&[(DnType::CommonName, "a")], vec!["localhost".into()]);
        let (other_cert, _, _) =
            self_signed(&[(DnType::CommonName, "b")], vec!["localhost".into()]);
        let e = TlsAcceptors::load(settings(&cert, "garbage"), "DEFAULT")
            .err()
            .unwrap();
        assert!(e.to_string().contains("private key"), "{e}");
        let e = TlsAcceptors::load(settings("", &key), "DEFAULT")
            .err()
            .unwrap();
        assert!(e.to_string().contains("certificate chain"), "{e}");
        // A key that is not the certificate's.
        assert!(TlsAcceptors::load(settings(&other_cert, &key), "DEFAULT").is_err());
        let e = TlsAcceptors::load(settings(&cert, &key), "RULE:x")
            .err()
            .unwrap();
        assert!(e.to_string().contains("ssl.principal.mapping.rules"), "{e}");
    }
}
