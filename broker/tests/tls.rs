//! Listeners and TLS over real sockets: a PLAINTEXT and an SSL listener side by side, each
//! advertised in Metadata to the clients that came in on it; produce and fetch over TLS;
//! client certificates required (none, or from another CA, is refused and counted); TLS 1.2
//! refused when only 1.3 is enabled; a plaintext client on the TLS port gets no Kafka answer;
//! a renewed certificate file is served to new connections without a restart.
//!
//! Principals, seen through what the StandardAuthorizer lets each client do: with
//! `ssl.client.auth=requested` a client without a certificate is `User:ANONYMOUS` and one
//! with a certificate its mapped subject, while a SASL_SSL client is its SASL name; a key and
//! chain given inline as config values (`ssl.keystore.key`, `ssl.keystore.certificate.chain`)
//! are served; `ssl.principal.mapping.rules` decide whose topic ACLs apply to a certificate.

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

// ---- Principals: `ssl.client.auth=requested`, `ssl.principal.mapping.rules`, ACLs ----

const AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
/// `CN=<name>,O=acme` (RFC 2253 order) becomes the lower-cased CN; any other subject stays
/// the whole DN.
const MAPPING: &str = "RULE:^CN=([^,]+),O=acme$/$1/L,DEFAULT";
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;

/// A client certificate of the test CA with subject `CN=<cn>,O=<org>` as the broker reads it.
fn cert(s: &Setup, org: &str, cn: &str) -> Issued {
    s.pki
        .client(&[(DnType::OrganizationName, org), (DnType::CommonName, cn)])
}

/// `start_tls` with the StandardAuthorizer, `User:admin` its super user, and the mapping.
fn start_secured(tune: impl FnOnce(&mut strom::config::BrokerConfig)) -> Setup {
    start_tls(|c| {
        c.authorizer_class_name = AUTHORIZER.into();
        c.super_users = "User:admin".into();
        c.ssl_principal_mapping_rules = MAPPING.into();
        tune(c);
    })
}

/// CreateAcls v3: ALLOW `ops` on the literal topic `topic` for `principal`.
fn allow_topic<S: std::io::Read + std::io::Write>(
    c: &mut Client<S>,
    principal: &str,
    topic: &str,
    ops: &[i8],
) {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
    use kafka_protocol::protocol::StrBytes;
    let s = |v: &str| StrBytes::from_string(v.into());
    let creations = ops
        .iter()
        .map(|op| {
            AclCreation::default()
                .with_resource_type(2) // TOPIC
                .with_resource_name(s(topic))
                .with_resource_pattern_type(3) // LITERAL
                .with_principal(s(principal))
                .with_host(s("*"))
                .with_operation(*op)
                .with_permission_type(3) // ALLOW
        })
        .collect();
    let r: CreateAclsResponse = c.call(
        ApiKey::CreateAcls,
        3,
        &CreateAclsRequest::default().with_creations(creations),
    );
    assert!(r.results.iter().all(|r| r.error_code == 0), "{r:?}");
}

const READ: i8 = 3;
const WRITE: i8 = 4;
const DESCRIBE: i8 = 8;

/// The topics a Metadata request for all topics shows this client (only those its
/// principal may DESCRIBE), sorted.
fn visible_topics<S: std::io::Read + std::io::Write>(c: &mut Client<S>) -> Vec<String> {
    let r: MetadataResponse = c.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
    );
    let mut names: Vec<String> = r
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    names.sort();
    names
}

/// Topics `<who>-visible`, each described only by the principal `User:<who>`: what Metadata
/// shows a client names its principal.
fn topic_per_principal(s: &Setup, admin: &Issued, who: &[&str]) {
    let mut a = tls_client(s, Some(admin)).unwrap();
    for w in who {
        let t = format!("{w}-visible");
        create_topic(&mut a, &t, 1);
        allow_topic(&mut a, &format!("User:{w}"), &t, &[DESCRIBE]);
    }
}

/// A SCRAM credential for `user`, as `strom user add` stores it before the broker starts
/// (PLAIN checks its password against it).
fn add_user(data_dir: &Path, user: &str, password: &str) {
    use strom::metadata::scram::*;
    std::fs::create_dir_all(data_dir).unwrap();
    let m = ScramMechanism::Sha512;
    FileCredentialStore::open(data_dir)
        .unwrap()
        .apply(&[CredentialChange::Upsert {
            user: user.into(),
            mechanism: m,
            credential: strom::security::scram::credential_from_password(m, password, 4096),
        }])
        .unwrap();
}

/// SaslHandshake v1 + SaslAuthenticate v2 with PLAIN; panics unless both succeed.
fn plain_login<S: std::io::Read + std::io::Write>(c: &mut Client<S>, user: &str, password: &str) {
    use kafka_protocol::messages::*;
    let h: SaslHandshakeResponse = c.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default()
            .with_mechanism(kafka_protocol::protocol::StrBytes::from_static_str("PLAIN")),
    );
    assert_eq!(h.error_code, 0, "{h:?}");
    let token = format!("\0{user}\0{password}");
    let a: SaslAuthenticateResponse = c.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(token.into_bytes().into()),
    );
    assert_eq!(a.error_code, 0, "{a:?}");
}

#[test]
fn given_client_auth_requested_when_connecting_with_and_without_a_certificate_then_its_principal_or_anonymous(
) {
    let s = start_secured(|c| {
        c.ssl_client_auth = "requested".into();
        c.listeners = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0".into();
        c.sasl_enabled_mechanisms = "PLAIN".into();
        add_user(&c.data_dir, "carol", "carol-secret");
    });
    let admin = cert(&s, "acme", "admin");
    topic_per_principal(&s, &admin, &["ANONYMOUS", "alice", "carol"]);

    // No certificate: served, as User:ANONYMOUS.
    let mut anonymous = tls_client(&s, None).unwrap();
    assert_eq!(visible_topics(&mut anonymous), ["ANONYMOUS-visible"]);
    // A certificate of the truststore: its mapped subject.
    let mut alice = tls_client(&s, Some(&cert(&s, "acme", "Alice"))).unwrap();
    assert_eq!(visible_topics(&mut alice), ["alice-visible"]);
    // Requested is not optional verification: a certificate the truststore did not issue
    // is refused, not taken as anonymous.
    let stranger = Pki::new("other-ca").client(&[(DnType::CommonName, "mallory")]);
    let refused = tls_client(&s, Some(&stranger)).map(|mut c| answers(&mut c));
    assert!(
        !matches!(refused, Ok(true)),
        "a foreign certificate was served"
    );

    // SASL_SSL never asks for a certificate (KIP-684): the SASL name is the principal, even
    // from a client that has one to offer.
    let sasl = s.addr("SASL_SSL");
    let offered = cert(&s, "acme", "Alice");
    let tls = connect_tls(sasl, &s.pki.ca_pem, Some(&offered), &[]).unwrap();
    assert!(tls.conn.peer_certificates().is_some());
    let mut carol = Client::over(tls);
    plain_login(&mut carol, "carol", "carol-secret");
    assert_eq!(visible_topics(&mut carol), ["carol-visible"]);
}

#[test]
fn given_inline_pem_keystore_in_the_config_when_a_client_connects_then_it_is_served_that_certificate(
) {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("inline-ca");
    let issued = pki.server("broker-inline");
    // Kafka's names, as an operator sets them from a secret: the PEM text itself, no file.
    let env = vec![
        ("STROM_SSL_KEYSTORE_KEY".to_string(), issued.key_pem.clone()),
        (
            "STROM_SSL_KEYSTORE_CERTIFICATE_CHAIN".to_string(),
            issued.cert_pem.clone(),
        ),
    ];
    let flags = vec![
        ("ssl.keystore.type".to_string(), "PEM".to_string()),
        ("listeners".to_string(), "SSL://127.0.0.1:0".to_string()),
    ];
    let (mut config, _) = strom::config::load(None, env, &flags).expect("config loads");
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.metrics_listen = "127.0.0.1:0".parse().unwrap();
    config.schema_registry_listen = "127.0.0.1:0".parse().unwrap();
    config.data_dir = dir.path().join("data");
    config.shards = 1;
    let server = strom::Server::start(config, Default::default()).expect("broker starts");
    let addr = server
        .listeners
        .iter()
        .find(|l| l.name == "SSL")
        .unwrap()
        .bound;
    let mut c = Client::over(connect_tls(addr, &pki.ca_pem, None, &[]).unwrap());
    let want = rustls::pki_types::pem::PemObject::pem_slice_iter(issued.cert_pem.as_bytes())
        .next()
        .map(|c: Result<rustls::pki_types::CertificateDer, _>| c.unwrap().to_vec())
        .unwrap();
    assert_eq!(peer_cert(&c), want);
    assert!(answers(&mut c));

    // The inline key and a keystore file together are refused: which one would win?
    let both = strom::config::load(
        None,
        vec![("STROM_SSL_KEYSTORE_KEY".to_string(), issued.key_pem.clone())],
        &[
            ("listeners".into(), "SSL://127.0.0.1:0".into()),
            ("ssl.keystore.location".into(), "broker.pem".into()),
        ],
    );
    let err = both.expect_err("refused").to_string();
    assert!(err.contains("ssl_keystore_location"), "{err}");
}

#[test]
fn given_mapping_rules_and_topic_acls_when_certificate_clients_produce_then_the_mapped_principal_decides(
) {
    let s = start_secured(|c| c.ssl_client_auth = "required".into());
    let admin = cert(&s, "acme", "admin");
    let mut a = tls_client(&s, Some(&admin)).unwrap();
    create_topic(&mut a, "orders", 1);
    allow_topic(&mut a, "User:alice", "orders", &[READ, WRITE]);
    // An ACL on bob's unmapped subject: the rule maps him to `bob`, so it must not apply.
    allow_topic(&mut a, "User:CN=bob,O=acme", "orders", &[READ, WRITE]);

    // CN=Alice,O=acme maps to `alice`: allowed to write and read.
    let mut alice = tls_client(&s, Some(&cert(&s, "acme", "Alice"))).unwrap();
    assert_eq!(produce(&mut alice, "orders", 0, batch(3, "alice")), (0, 0));
    assert_eq!(common::fetch_all(&mut alice, "orders", 0).len(), 3);
    // CN=bob,O=acme maps to `bob`, who has no ACL: refused, nothing written.
    let mut bob = tls_client(&s, Some(&cert(&s, "acme", "bob"))).unwrap();
    assert_eq!(
        produce(&mut bob, "orders", 0, batch(3, "bob")).0,
        TOPIC_AUTHORIZATION_FAILED
    );
    // A subject no RULE matches keeps its whole DN (DEFAULT): not alice either.
    let mut other = tls_client(&s, Some(&cert(&s, "other", "alice"))).unwrap();
    assert_eq!(
        produce(&mut other, "orders", 0, batch(3, "other")).0,
        TOPIC_AUTHORIZATION_FAILED
    );
    let log = common::fetch_all(&mut a, "orders", 0);
    assert_eq!(log.len(), 3, "only alice's records are in the log");
}
