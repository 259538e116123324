//! Certificates made in the test (rcgen): a CA, a server certificate for 127.0.0.1 and
//! localhost, client certificates with a chosen subject; and a blocking TLS client (rustls)
//! for `Client::over`. No key is ever written outside the test's temp dir.

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

pub struct Pki {
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate and its key, PEM.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Issued {
    /// Key then chain in one PEM, as `ssl.keystore.location` takes it.
    pub fn keystore_pem(&self) -> String {
        format!("{}{}", self.key_pem, self.cert_pem)
    }
}

impl Pki {
    pub fn new(ca_cn: &str) -> Pki {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, ca_cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).unwrap();
        Pki {
            ca_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    fn issue(&self, sans: Vec<String>, dn: DistinguishedName) -> Issued {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name = dn;
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// The broker's certificate: valid for 127.0.0.1 and localhost, subject `CN=<cn>`.
    pub fn server(&self, cn: &str) -> Issued {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, cn);
        self.issue(vec!["127.0.0.1".into(), "localhost".into()], dn)
    }

    /// A client certificate with the subject given in the certificate's order (the broker's
    /// RFC 2253 form shows it reversed).
    pub fn client(&self, subject: &[(DnType, &str)]) -> Issued {
        let mut dn = DistinguishedName::new();
        for (t, v) in subject {
            dn.push(t.clone(), *v);
        }
        self.issue(Vec::new(), dn)
    }
}

pub type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A TLS connection to `addr` trusting `ca_pem`, with a client certificate when given,
/// offering only `versions` (both when empty). The handshake is completed before return
/// (as far as the client can tell: under TLS 1.3 a refused client certificate shows on the
/// first read).
pub fn connect_tls(
    addr: SocketAddr,
    ca_pem: &str,
    client: Option<&Issued>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> std::io::Result<TlsStream> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let versions = if versions.is_empty() {
        rustls::ALL_VERSIONS.to_vec()
    } else {
        versions.to_vec()
    };
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&versions)
    .unwrap()
    .with_root_certificates(roots);
    let config = match client {
        Some(c) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(c.cert_pem.as_bytes())
                    .map(|c| c.unwrap())
                    .collect(),
                PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut sock = TcpStream::connect(addr)?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    sock.set_nodelay(true)?;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock)?;
    }
    Ok(rustls::StreamOwned::new(conn, sock))
}
