//! The admin HTTP port behind TLS and authentication, over real sockets with an HTTPS
//! client (reqwest on rustls): `/health` open to anyone, everything else only with a SCRAM
//! user's password (basic) or a client certificate (mTLS) whose principal is in
//! `admin_principals`; wrong passwords, unknown users and other principals refused; plain
//! HTTP on the port gets no HTTP answer.

mod common;

use std::path::Path;

use common::pki::Pki;
use common::start_with;
use rcgen::DnType;

struct Setup {
    _dir: tempfile::TempDir,
    server: strom::Server,
    pki: Pki,
}

fn add_user(dir: &Path, user: &str, password: &str) {
    use strom::metadata::scram::*;
    std::fs::create_dir_all(dir).unwrap();
    let store = FileCredentialStore::open(dir).unwrap();
    let m = ScramMechanism::Sha512;
    store
        .apply(&[CredentialChange::Upsert {
            user: user.into(),
            mechanism: m,
            credential: strom::security::scram::credential_from_password(m, password, 4096),
        }])
        .unwrap();
}

fn start() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("strom-admin-ca");
    let keystore = dir.path().join("broker.pem");
    std::fs::write(&keystore, pki.server("broker").keystore_pem()).unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let data = dir.path().join("data");
    add_user(&data, "alice", "alice-secret");
    add_user(&data, "bob", "bob-secret");
    let server = start_with(&data, 1, |c| {
        c.ssl_keystore_location = keystore.display().to_string();
        c.ssl_truststore_location = ca.display().to_string();
        c.admin_ssl_enable = true;
        c.admin_ssl_client_auth = "requested".into();
        c.admin_authentication = "basic,mtls".into();
        c.admin_principals = "User:alice;User:CN=ops".into();
        c.connection_failed_authentication_delay_ms = 10;
    });
    Setup {
        _dir: dir,
        server,
        pki,
    }
}

/// (status, body) of GET `path` over HTTPS; `identity` a client certificate (PEM key+cert).
fn get(
    s: &Setup,
    path: &str,
    basic: Option<(&str, &str)>,
    identity: Option<String>,
) -> Result<(u16, String), reqwest::Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = format!("https://127.0.0.1:{}{path}", s.server.metrics_addr.port());
    let ca = reqwest::Certificate::from_pem(s.pki.ca_pem.as_bytes()).unwrap();
    rt.block_on(async {
        let mut b = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca);
        if let Some(pem) = identity {
            b = b.identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap());
        }
        let mut req = b.build()?.get(url);
        if let Some((u, p)) = basic {
            req = req.basic_auth(u, Some(p));
        }
        let r = req.send().await?;
        let status = r.status().as_u16();
        let challenge = r.headers().contains_key("www-authenticate");
        let body = r.text().await?;
        Ok((
            status,
            if challenge {
                format!("[challenge] {body}")
            } else {
                body
            },
        ))
    })
}

#[test]
fn given_a_secured_admin_port_when_requests_come_then_only_allowed_principals_get_past_health() {
    let s = start();
    // /health is open; the rest asks for credentials.
    assert_eq!(get(&s, "/health", None, None).unwrap().0, 200);
    let (status, body) = get(&s, "/metrics", None, None).unwrap();
    assert_eq!(status, 401);
    assert!(body.starts_with("[challenge]"), "{body}");
    // A SCRAM user's password, checked as PLAIN checks it.
    let (status, body) = get(&s, "/metrics", Some(("alice", "alice-secret")), None).unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("strom_"), "{}", &body[..body.len().min(200)]);
    assert_eq!(
        get(&s, "/ready", Some(("alice", "alice-secret")), None)
            .unwrap()
            .0,
        200
    );
    // Wrong password, unknown user: the same 401.
    assert_eq!(
        get(&s, "/metrics", Some(("alice", "nope")), None)
            .unwrap()
            .0,
        401
    );
    assert_eq!(
        get(&s, "/metrics", Some(("mallory", "x")), None).unwrap().0,
        401
    );
    // A real user that admin_principals does not name.
    assert_eq!(
        get(&s, "/metrics", Some(("bob", "bob-secret")), None)
            .unwrap()
            .0,
        403
    );
    // mTLS: the certificate's principal decides, no password needed.
    let ops = s.pki.client(&[(DnType::CommonName, "ops")]);
    assert_eq!(
        get(&s, "/metrics", None, Some(ops.keystore_pem()))
            .unwrap()
            .0,
        200
    );
    let dev = s.pki.client(&[(DnType::CommonName, "dev")]);
    assert_eq!(
        get(&s, "/metrics", None, Some(dev.keystore_pem()))
            .unwrap()
            .0,
        403
    );
    // A certificate from another CA does not complete the handshake.
    let foreign = Pki::new("other-ca").client(&[(DnType::CommonName, "ops")]);
    assert!(get(&s, "/health", None, Some(foreign.keystore_pem())).is_err());
}

#[test]
fn given_a_tls_admin_port_when_a_plain_http_client_asks_then_no_http_answer() {
    use std::io::{Read, Write};
    let s = start();
    let mut c = std::net::TcpStream::connect(s.server.metrics_addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(15)))
        .unwrap();
    c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    assert!(
        !got.starts_with(b"HTTP/"),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
}
