//! SASL over real sockets, with a SCRAM client written here from RFC 5802 (ring's HMAC and
//! PBKDF2, not the broker's code): SCRAM-SHA-256/512 and PLAIN succeed and then serve
//! requests; the ways in that must fail fail with Kafka's code and message, after the delay,
//! and the connection closes — wrong password, unknown user (same message), a mechanism the
//! listener does not enable, a request before authentication, a replayed client-final, an
//! oversized frame; KIP-368 session lifetime, re-authentication, and the close of an expired
//! session; SaslHandshake v0's raw tokens; users made by `strom user add`.

mod common;

use std::num::NonZeroU32;
use std::path::Path;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bytes::Bytes;
use common::{batch, create_topic, produce, start_with, Client};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use ring::{digest, hmac, pbkdf2};

const ALL: &str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512";

/// A broker with one SASL_PLAINTEXT listener and users alice (SCRAM-SHA-512) and bob (both
/// mechanisms), added as `strom user add` does, before start.
fn start_sasl(
    dir: &Path,
    mechanisms: &str,
    tune: impl FnOnce(&mut strom::config::BrokerConfig),
) -> strom::Server {
    use strom::metadata::scram::*;
    std::fs::create_dir_all(dir).unwrap();
    let store = FileCredentialStore::open(dir).unwrap();
    for (user, m, pw) in [
        ("alice", ScramMechanism::Sha512, "alice-secret"),
        ("bob", ScramMechanism::Sha256, "bob-secret"),
        ("bob", ScramMechanism::Sha512, "bob-secret"),
    ] {
        store
            .apply(&[CredentialChange::Upsert {
                user: user.into(),
                mechanism: m,
                credential: strom::security::scram::credential_from_password(m, pw, 4096),
            }])
            .unwrap();
    }
    start_with(dir, 1, |c| {
        c.listeners = "SASL_PLAINTEXT://127.0.0.1:0".into();
        c.sasl_enabled_mechanisms = mechanisms.into();
        tune(c);
    })
}

fn handshake(c: &mut Client, mechanism: &str) -> SaslHandshakeResponse {
    let req =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into()));
    c.call(ApiKey::SaslHandshake, 1, &req)
}

fn authenticate(c: &mut Client, token: &[u8]) -> SaslAuthenticateResponse {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
    c.call(ApiKey::SaslAuthenticate, 2, &req)
}

fn closed(c: &mut Client) -> bool {
    c.read_frame().is_err()
}

/// The client side of SCRAM, from RFC 5802.
struct ScramClient {
    sha512: bool,
    user: String,
    password: String,
    nonce: String,
    first_bare: String,
    server_signature: Vec<u8>,
}

impl ScramClient {
    fn new(sha512: bool, user: &str, password: &str) -> ScramClient {
        ScramClient {
            sha512,
            user: user.into(),
            password: password.into(),
            nonce: format!("clientnonce{}", std::process::id()),
            first_bare: String::new(),
            server_signature: Vec::new(),
        }
    }

    fn hmac(&self, key: &[u8], data: &[u8]) -> Vec<u8> {
        let alg = if self.sha512 {
            hmac::HMAC_SHA512
        } else {
            hmac::HMAC_SHA256
        };
        hmac::sign(&hmac::Key::new(alg, key), data)
            .as_ref()
            .to_vec()
    }

    fn first(&mut self) -> Vec<u8> {
        self.first_bare = format!("n={},r={}", self.user, self.nonce);
        format!("n,,{}", self.first_bare).into_bytes()
    }

    fn finish(&mut self, server_first: &[u8]) -> Vec<u8> {
        let sf = std::str::from_utf8(server_first).unwrap();
        let mut parts = sf.split(',');
        let nonce = parts.next().unwrap().strip_prefix("r=").unwrap();
        assert!(
            nonce.starts_with(&self.nonce),
            "server nonce extends the client's"
        );
        let salt = B64
            .decode(parts.next().unwrap().strip_prefix("s=").unwrap())
            .unwrap();
        let iterations: u32 = parts
            .next()
            .unwrap()
            .strip_prefix("i=")
            .unwrap()
            .parse()
            .unwrap();
        let (alg, len, dig) = if self.sha512 {
            (pbkdf2::PBKDF2_HMAC_SHA512, 64, &digest::SHA512)
        } else {
            (pbkdf2::PBKDF2_HMAC_SHA256, 32, &digest::SHA256)
        };
        let mut salted = vec![0u8; len];
        pbkdf2::derive(
            alg,
            NonZeroU32::new(iterations).unwrap(),
            &salt,
            self.password.as_bytes(),
            &mut salted,
        );
        let client_key = self.hmac(&salted, b"Client Key");
        let stored_key = digest::digest(dig, &client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{},{sf},{without_proof}", self.first_bare);
        let signature = self.hmac(stored_key.as_ref(), auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = self.hmac(&salted, b"Server Key");
        self.server_signature = self.hmac(&server_key, auth.as_bytes());
        format!("{without_proof},p={}", B64.encode(proof)).into_bytes()
    }
}

/// A full SCRAM exchange; the final SaslAuthenticate answer.
fn scram(
    c: &mut Client,
    sha512: bool,
    user: &str,
    password: &str,
) -> (SaslAuthenticateResponse, ScramClient) {
    let mech = if sha512 {
        "SCRAM-SHA-512"
    } else {
        "SCRAM-SHA-256"
    };
    assert_eq!(handshake(c, mech).error_code, 0);
    let mut sc = ScramClient::new(sha512, user, password);
    let first = authenticate(c, &sc.first());
    assert_eq!(first.error_code, 0, "{:?}", first.error_message);
    let fin = sc.finish(&first.auth_bytes);
    (authenticate(c, &fin), sc)
}

fn generic(mech: &str) -> String {
    format!("Authentication failed during authentication due to invalid credentials with SASL mechanism {mech}")
}

#[test]
fn given_scram_users_when_authenticating_then_server_proves_itself_and_requests_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_sasl(dir.path(), ALL, |_| {});
    for (sha512, user, pw) in [
        (true, "alice", "alice-secret"),
        (false, "bob", "bob-secret"),
    ] {
        let mut c = Client::connect(s.kafka_addr);
        // ApiVersions is served before authentication.
        let v: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        assert!(v
            .api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::SaslAuthenticate as i16));
        let (done, sc) = scram(&mut c, sha512, user, pw);
        assert_eq!(done.error_code, 0, "{:?}", done.error_message);
        assert_eq!(
            done.auth_bytes,
            format!("v={}", B64.encode(&sc.server_signature)).into_bytes()
        );
        create_topic(&mut c, &format!("sasl-{user}"), 1);
        assert_eq!(
            produce(&mut c, &format!("sasl-{user}"), 0, batch(3, "x")),
            (0, 0)
        );
    }
}

#[test]
fn given_wrong_password_or_unknown_user_when_authenticating_then_same_error_after_the_delay_and_closed(
) {
    let dir = tempfile::tempdir().unwrap();
    let s = start_sasl(dir.path(), ALL, |c| {
        c.connection_failed_authentication_delay_ms = 300
    });
    let mut messages = Vec::new();
    for (user, pw) in [("alice", "wrong"), ("mallory", "anything")] {
        let mut c = Client::connect(s.kafka_addr);
        let started = Instant::now();
        let (r, _) = scram(&mut c, true, user, pw);
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "answered before the delay"
        );
        assert_eq!(r.error_code, 58);
        assert!(r.auth_bytes.is_empty());
        messages.push(r.error_message.map(|m| m.to_string()));
        assert!(
            closed(&mut c),
            "connection open after a failed authentication"
        );
    }
    assert_eq!(messages[0], Some(generic("SCRAM-SHA-512")));
    assert_eq!(
        messages[0], messages[1],
        "the answer tells an unknown user apart"
    );
    let metrics = common::metrics_text(s.metrics_addr);
    let failures: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("strom_authentications_total{")
                && l.contains("mechanism=\"SCRAM-SHA-512\"")
                && l.contains("result=\"failure\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(failures, 2.0);
}

#[test]
fn given_plain_when_enabled_then_password_checked_against_scram_and_kafkas_message_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_sasl(dir.path(), ALL, |_| {});
    let mut c = Client::connect(s.kafka_addr);
    assert_eq!(handshake(&mut c, "PLAIN").error_code, 0);
    let ok = authenticate(&mut c, b"\0alice\0alice-secret");
    assert_eq!((ok.error_code, ok.error_message), (0, None));
    let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert_eq!(md.brokers.len(), 1);
    for token in [&b"\0alice\0nope"[..], b"\0nobody\0nope"] {
        let mut c = Client::connect(s.kafka_addr);
        assert_eq!(handshake(&mut c, "PLAIN").error_code, 0);
        let r = authenticate(&mut c, token);
        assert_eq!(r.error_code, 58);
        assert_eq!(
            r.error_message.as_deref(),
            Some("Authentication failed: Invalid username or password")
        );
        assert!(closed(&mut c));
    }
}

#[test]
fn given_plain_not_enabled_when_handshaking_then_unsupported_mechanism_with_the_enabled_ones() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_sasl(dir.path(), "SCRAM-SHA-512,SCRAM-SHA-256", |_| {});
    let mut c = Client::connect(s.kafka_addr);
    let r = handshake(&mut c, "PLAIN");
    assert_eq!(r.error_code, 33);
    let names: Vec<_> = r.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(names, ["SCRAM-SHA-512", "SCRAM-SHA-256"]);
    assert!(closed(&mut c));
}

#[test]
fn given_unauthenticated_connection_when_sending_other_requests_or_huge_frames_then_closed_unanswered(
) {
    let dir = tempfile::tempdir().unwrap();
    let s = start_sasl(dir.path(), ALL, |c| c.sasl_server_max_receive_size = 4096);
    let mut c = Client::connect(s.kafka_addr);
    let frame = c.encode(ApiKey::Metadata, 12, &MetadataRequest::default());
    c.send_raw(&frame).unwrap();
    assert!(closed(&mut c), "Metadata answered before authentication");
    // Nothing was created by a request that could not be served.
    let mut c = Client::connect(s.kafka_addr);
    let frame = c.encode(
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default().with_topics(vec![
            create_topics_request::CreatableTopic::default()
                .with_name(common::topic_name("sneaky"))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ]),
    );
    c.send_raw(&frame).unwrap();
    assert!(closed(&mut c));
    assert!(s.ctx.catalog.snapshot().get("sneaky").is_none());
    // A frame above sasl.server.max.receive.size.
    let mut c = Client::connect(s.kafka_addr);
    let mut big = 5000i32.to_be_bytes().to_vec();
    big.extend(vec![0u8; 5000]);
    let _ = c.send_raw(&big);
    assert!(closed(&mut c));
}

#[test]
fn given_replayed_client_final_when_sent_on_a_new_exchange_then_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_sasl(dir.path(), ALL, |_| {});
    let mut a = Client::connect(s.kafka_addr);
    assert_eq!(handshake(&mut a, "SCRAM-SHA-512").error_code, 0);
    let mut sc = ScramClient::new(true, "alice", "alice-secret");
    let first = authenticate(&mut a, &sc.first());
    let recorded = sc.finish(&first.auth_bytes);
    assert_eq!(authenticate(&mut a, &recorded).error_code, 0);
    // An eavesdropper replays the recorded client-final on its own exchange.
    let mut b = Client::connect(s.kafka_addr);
    assert_eq!(handshake(&mut b, "SCRAM-SHA-512").error_code, 0);
    let mut eve = ScramClient::new(true, "alice", "unknown-to-eve");
    let r = authenticate(&mut b, &eve.first());
    assert_eq!(r.error_code, 0);
    let replay = authenticate(&mut b, &recorded);
    assert_eq!(replay.error_code, 58);
    assert_eq!(
        replay.error_message,
        Some(StrBytes::from_string(generic("SCRAM-SHA-512")))
    );
    assert!(closed(&mut b));
}

#[test]
fn given_reauth_ms_when_session_ends_then_reauthenticated_connections_live_and_others_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_sasl(dir.path(), ALL, |c| c.connections_max_reauth_ms = 1500);
    let mut stays = Client::connect(s.kafka_addr);
    let (r, _) = scram(&mut stays, true, "alice", "alice-secret");
    assert_eq!((r.error_code, r.session_lifetime_ms), (0, 1500));
    let mut lapses = Client::connect(s.kafka_addr);
    assert_eq!(
        scram(&mut lapses, true, "alice", "alice-secret")
            .0
            .error_code,
        0
    );
    std::thread::sleep(Duration::from_millis(1000));
    // Re-authentication on the same connection, as KIP-368 clients do before the end.
    let (again, _) = scram(&mut stays, true, "alice", "alice-secret");
    assert_eq!((again.error_code, again.session_lifetime_ms), (0, 1500));
    std::thread::sleep(Duration::from_millis(700));
    let md: MetadataResponse = stays.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert_eq!(md.brokers.len(), 1);
    let frame = lapses.encode(ApiKey::Metadata, 12, &MetadataRequest::default());
    lapses.send_raw(&frame).unwrap();
    assert!(
        closed(&mut lapses),
        "a request on an expired session was served"
    );
    // Nor may the mechanism change (Kafka refuses that too).
    let mut switches = Client::connect(s.kafka_addr);
    assert_eq!(
        scram(&mut switches, true, "alice", "alice-secret")
            .0
            .error_code,
        0
    );
    assert_eq!(handshake(&mut switches, "SCRAM-SHA-256").error_code, 34);
    assert!(closed(&mut switches));
    // A different principal may not take over the connection.
    let (other, _) = scram(&mut stays, true, "bob", "bob-secret");
    assert_eq!(other.error_code, 58);
    assert!(
        other
            .error_message
            .as_deref()
            .unwrap()
            .starts_with("Cannot change principals during re-authentication"),
        "{:?}",
        other.error_message
    );
}

#[test]
fn given_v0_handshake_when_sending_a_raw_plain_token_then_authenticated() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_sasl(dir.path(), ALL, |_| {});
    let mut c = Client::connect(s.kafka_addr);
    let req = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let r: SaslHandshakeResponse = c.call(ApiKey::SaslHandshake, 0, &req);
    assert_eq!(r.error_code, 0);
    let token = b"\0bob\0bob-secret";
    let mut raw = (token.len() as i32).to_be_bytes().to_vec();
    raw.extend_from_slice(token);
    c.send_raw(&raw).unwrap();
    assert_eq!(
        c.read_frame().unwrap().len(),
        0,
        "the raw answer to PLAIN is empty"
    );
    let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert_eq!(md.brokers.len(), 1);
}

#[test]
fn given_strom_user_add_when_broker_starts_then_the_user_authenticates_and_a_running_broker_refuses_it(
) {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_strom");
    let add = |name: &str, pw: &str| {
        std::process::Command::new(bin)
            .args([
                "user",
                "add",
                name,
                "--password",
                pw,
                "--mechanism",
                "SCRAM-SHA-256",
                "--data-dir",
            ])
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let out = add("carol", "carol-secret");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = std::fs::read_to_string(dir.path().join("strom-scram-credentials.json")).unwrap();
    assert!(!file.contains("carol-secret"));
    let s = start_with(dir.path(), 1, |c| {
        c.listeners = "SASL_PLAINTEXT://127.0.0.1:0".into()
    });
    let mut c = Client::connect(s.kafka_addr);
    assert_eq!(
        scram(&mut c, false, "carol", "carol-secret").0.error_code,
        0
    );
    let busy = add("dave", "x");
    assert!(!busy.status.success());
    assert!(String::from_utf8_lossy(&busy.stderr).contains("is the broker running"));
}
