//! Listeners and TLS over real sockets: a PLAINTEXT and an SSL listener side by side, each
//! advertised in Metadata to the clients that came in on it; produce and fetch over TLS;
//! client certificates required (none, or from another CA, is refused and counted); TLS 1.2
//! refused when only 1.3 is enabled; a plaintext client on the TLS port gets no Kafka answer;
//! a renewed certificate file is served to new connections without a restart.

mod common;

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use common::pki::{connect_tls, Issued, Pki, TlsStream};
use common::{batch, create_topic, produce, start_with, Client};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, MetadataRequest, MetadataResponse};
use rcgen::DnType;

struct Setup {
    _dir: tempfile::TempDir,
    server: strom::Server,
    pki: Pki,
    keystore: std::path::PathBuf,
}

impl Setup {
    fn addr(&self, name: &str) -> std::net::SocketAddr {
        self.server
            .listeners
            .iter()
            .find(|l| l.name == name)
            .unwrap_or_else(|| panic!("listener {name}"))
            .bound
    }
}

/// A broker with `PLAINTEXT` and `SSL` listeners on free ports, its key and chain in one PEM
/// file, the CA as truststore; `tune` adjusts the rest.
fn start_tls(tune: impl FnOnce(&mut strom::config::BrokerConfig)) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("strom-test-ca");
    let keystore = dir.path().join("broker.pem");
    std::fs::write(&keystore, pki.server("broker").keystore_pem()).unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let data = dir.path().join("data");
    let server = start_with(&data, 1, |c| {
        c.listeners = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0".into();
        c.ssl_keystore_location = keystore.display().to_string();
        c.ssl_truststore_location = ca.display().to_string();
        tune(c);
    });
    Setup {
        _dir: dir,
        server,
        pki,
        keystore,
    }
}

fn metadata_port<S: std::io::Read + std::io::Write>(c: &mut Client<S>) -> i32 {
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert_eq!(r.brokers.len(), 1);
    r.brokers[0].port
}

fn tls_client(s: &Setup, cert: Option<&Issued>) -> std::io::Result<Client<TlsStream>> {
    connect_tls(s.addr("SSL"), &s.pki.ca_pem, cert, &[]).map(Client::over)
}

/// Whether a request on `c` gets an answer: false when the broker closed the connection
/// (a refused client certificate shows here under TLS 1.3).
fn answers<S: std::io::Read + std::io::Write>(c: &mut Client<S>) -> bool {
    let frame = c.encode(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    c.send_raw(&frame).is_ok() && c.read_frame().is_ok()
}

fn handshake_failures(s: &Setup) -> f64 {
    let body = common::metrics_text(s.server.metrics_addr);
    body.lines()
        .filter(|l| {
            l.starts_with("strom_tls_handshake_failures_total{") && l.contains("listener=\"SSL\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn given_plaintext_and_ssl_listeners_when_asking_metadata_then_each_advertises_its_own_port() {
    let s = start_tls(|_| {});
    let (plain, ssl) = (s.addr("PLAINTEXT"), s.addr("SSL"));
    assert_ne!(plain.port(), ssl.port());
    let mut p = Client::connect(plain);
    assert_eq!(metadata_port(&mut p), plain.port() as i32);
    let mut t = tls_client(&s, None).unwrap();
    assert_eq!(metadata_port(&mut t), ssl.port() as i32);
}

#[test]
fn given_ssl_listener_when_producing_and_fetching_large_batches_then_bytes_come_back_whole() {
    let s = start_tls(|_| {});
    let mut t = tls_client(&s, None).unwrap();
    create_topic(&mut t, "tls-data", 1);
    // Batches well past one TLS record (16 KiB) and one socket buffer: the writer must
    // flush what TLS keeps buffered.
    let big = "x".repeat(60_000);
    for i in 0..3 {
        assert_eq!(produce(&mut t, "tls-data", 0, batch(5, &big)), (0, i * 5));
    }
    let mut p = Client::connect(s.addr("PLAINTEXT"));
    let over_tls = common::fetch_all(&mut t, "tls-data", 0);
    let over_plain = common::fetch_all(&mut p, "tls-data", 0);
    assert_eq!(over_tls.len(), 15);
    assert_eq!(over_tls, over_plain);
}

#[test]
fn given_client_auth_required_when_connecting_then_only_certificates_of_the_truststore_get_in() {
    let s = start_tls(|c| c.ssl_client_auth = "required".into());
    let before = handshake_failures(&s);
    // No certificate.
    let refused = tls_client(&s, None).map(|mut c| answers(&mut c));
    assert!(
        !matches!(refused, Ok(true)),
        "a client without a certificate was served"
    );
    // A certificate from another CA.
    let stranger = Pki::new("other-ca").client(&[(DnType::CommonName, "mallory")]);
    let refused = tls_client(&s, Some(&stranger)).map(|mut c| answers(&mut c));
    assert!(
        !matches!(refused, Ok(true)),
        "a foreign certificate was served"
    );
    // One the truststore's CA issued.
    let alice = s.pki.client(&[
        (DnType::OrganizationName, "acme"),
        (DnType::CommonName, "alice"),
    ]);
    let mut c = tls_client(&s, Some(&alice)).unwrap();
    assert!(answers(&mut c));
    let deadline = Instant::now() + Duration::from_secs(5);
    while handshake_failures(&s) < before + 2.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(handshake_failures(&s), before + 2.0);
}

#[test]
fn given_only_tls13_enabled_when_a_tls12_client_connects_then_handshake_fails() {
    let s = start_tls(|c| c.ssl_enabled_protocols = "TLSv1.3".into());
    let r = connect_tls(
        s.addr("SSL"),
        &s.pki.ca_pem,
        None,
        &[&rustls::version::TLS12],
    );
    assert!(r.is_err(), "a TLS 1.2 handshake succeeded");
    let ok = connect_tls(
        s.addr("SSL"),
        &s.pki.ca_pem,
        None,
        &[&rustls::version::TLS13],
    );
    assert!(answers(&mut Client::over(ok.unwrap())));
}

#[test]
fn given_plaintext_client_on_tls_port_when_it_sends_a_request_then_no_kafka_answer_and_closed() {
    let s = start_tls(|_| {});
    let mut c = Client::connect(s.addr("SSL"));
    let frame = c.encode(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    c.send_raw(&frame).unwrap();
    let mut got = Vec::new();
    // The broker answers with at most a TLS alert record (content type 21) and closes.
    let _ = c.stream.read_to_end(&mut got);
    assert!(
        got.is_empty() || got[0] == 21,
        "plaintext client got {} bytes starting {:?}",
        got.len(),
        &got[..got.len().min(8)]
    );
}

fn peer_cert(c: &Client<TlsStream>) -> Vec<u8> {
    c.stream.conn.peer_certificates().unwrap()[0].to_vec()
}

fn rewrite(path: &Path, pem: &str) {
    // As a renewal tool does: a new file moved over the old one.
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, pem).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn given_renewed_certificate_file_when_reload_runs_then_new_connections_get_it_and_old_ones_live() {
    let s = start_tls(|c| c.ssl_reload_interval_ms = 100);
    let mut old = tls_client(&s, None).unwrap();
    let first = peer_cert(&old);
    // A broken file first: the broker keeps serving the previous certificate.
    rewrite(&s.keystore, "-----BEGIN PRIVATE KEY-----\nnot a key\n");
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(peer_cert(&tls_client(&s, None).unwrap()), first);
    let renewed = s.pki.server("broker-renewed");
    rewrite(&s.keystore, &renewed.keystore_pem());
    let deadline = Instant::now() + Duration::from_secs(10);
    let new = loop {
        let c = tls_client(&s, None).unwrap();
        if peer_cert(&c) != first {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "the renewed certificate was not served within 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut new = new;
    let want = rustls::pki_types::pem::PemObject::pem_slice_iter(renewed.cert_pem.as_bytes())
        .next()
        .map(|c: Result<rustls::pki_types::CertificateDer, _>| c.unwrap().to_vec())
        .unwrap();
    assert_eq!(peer_cert(&new), want);
    assert!(answers(&mut new));
    assert!(
        answers(&mut old),
        "the connection made before the renewal was dropped"
    );
}
