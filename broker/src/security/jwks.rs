//! The keys OAUTHBEARER tokens are checked against: a JWKS (RFC 7517) read from Kafka's
//! `sasl.oauthbearer.jwks.endpoint.url`, kept in memory and read again every
//! `sasl.oauthbearer.jwks.endpoint.refresh.ms`, and soon after a token names a key id the
//! set does not have (a rotated key; Kafka's `RefreshingHttpsJwks` does the same).
//!
//! The URL is a `file://` path or an `http(s)://` URL whose host is this machine (127.0.0.1,
//! ::1 or localhost): the broker does not call out to other hosts to authenticate a client.
//! The first read happens at start, and a JWKS that cannot be read stops the broker; a later
//! read that fails is logged and the previous keys stay in use.
//!
//! Keys the validator cannot use (symmetric `oct` keys, unknown key types, P-521) are
//! skipped with a log line rather than failing the whole set, as jose4j's selector ignores
//! keys that do not fit.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk};

#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error("`{0}` is not a file://, http:// or https:// URL")]
    Scheme(String),
    #[error("`{0}`: the JWKS host must be this machine (127.0.0.1, ::1 or localhost)")]
    Host(String),
    #[error("reading the JWKS {0}: {1}")]
    Read(String, String),
    #[error("the JWKS {0} is not a JSON key set: {1}")]
    Parse(String, String),
}

/// Where the JWKS comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    File(PathBuf),
    Http(String),
}

impl JwksSource {
    pub fn parse(url: &str) -> Result<JwksSource, JwksError> {
        let url = url.trim();
        if let Some(path) = url.strip_prefix("file://") {
            // file:///abs/path (Kafka's form) and file:/abs/path both name an absolute path.
            return Ok(JwksSource::File(PathBuf::from(path)));
        }
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or_else(|| JwksError::Scheme(url.into()))?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = match authority.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
        };
        let local = host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if !local {
            return Err(JwksError::Host(url.into()));
        }
        Ok(JwksSource::Http(url.into()))
    }

    fn describe(&self) -> String {
        match self {
            JwksSource::File(p) => p.display().to_string(),
            JwksSource::Http(u) => u.clone(),
        }
    }

    /// The JWKS document's bytes.
    fn fetch(&self) -> Result<Vec<u8>, JwksError> {
        match self {
            JwksSource::File(p) => {
                std::fs::read(p).map_err(|e| JwksError::Read(self.describe(), e.to_string()))
            }
            JwksSource::Http(url) => {
                // On a thread of its own: the caller may be inside a runtime (start) or not
                // (the refresher), and a blocking fetch must not run on a runtime's thread.
                let url = url.clone();
                let run = move || -> Result<Vec<u8>, String> {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| e.to_string())?;
                    rt.block_on(async {
                        let client = reqwest::Client::builder()
                            .timeout(Duration::from_secs(10))
                            .build()
                            .map_err(|e| e.to_string())?;
                        let resp = client.get(&url).send().await.map_err(|e| e.to_string())?;
                        if !resp.status().is_success() {
                            return Err(format!("HTTP {}", resp.status()));
                        }
                        resp.bytes()
                            .await
                            .map(|b| b.to_vec())
                            .map_err(|e| e.to_string())
                    })
                };
                std::thread::spawn(run)
                    .join()
                    .map_err(|_| "the fetch thread panicked".to_string())
                    .and_then(|r| r)
                    .map_err(|e| JwksError::Read(self.describe(), e))
            }
        }
    }
}

/// The usable keys of a JWKS document.
pub fn parse_jwks(source: &str, bytes: &[u8]) -> Result<Vec<Jwk>, JwksError> {
    #[derive(serde::Deserialize)]
    struct Doc {
        keys: Vec<serde_json::Value>,
    }
    let doc: Doc = serde_json::from_slice(bytes)
        .map_err(|e| JwksError::Parse(source.into(), e.to_string()))?;
    let mut keys = Vec::new();
    for (i, raw) in doc.keys.into_iter().enumerate() {
        match serde_json::from_value::<Jwk>(raw) {
            Ok(k) if usable(&k) => keys.push(k),
            Ok(k) => {
                tracing::warn!(jwks = source, kid = ?k.common.key_id, "JWKS key skipped: not an RSA, P-256/P-384 or Ed25519 public key")
            }
            Err(e) => {
                tracing::warn!(jwks = source, index = i, error = %e, "JWKS key skipped: not a key this broker can read")
            }
        }
    }
    Ok(keys)
}

/// Asymmetric signature keys only: an `oct` key in a published JWKS would let anyone who
/// reads it sign tokens.
fn usable(k: &Jwk) -> bool {
    match &k.algorithm {
        AlgorithmParameters::RSA(_) => true,
        AlgorithmParameters::OctetKeyPair(p) => {
            p.curve == jsonwebtoken::jwk::EllipticCurve::Ed25519
        }
        AlgorithmParameters::EllipticCurve(p) => !matches!(
            p.curve,
            jsonwebtoken::jwk::EllipticCurve::P521 | jsonwebtoken::jwk::EllipticCurve::Ed25519
        ),
        AlgorithmParameters::OctetKey(_) => false,
    }
}

/// The current keys of one JWKS source.
pub struct Jwks {
    source: JwksSource,
    keys: RwLock<Arc<Vec<Jwk>>>,
    /// Set when a token named a key id the set lacks: the refresher reads the JWKS soon.
    wanted: AtomicBool,
}

impl Jwks {
    /// Reads the JWKS once; an unreadable one is an error (the broker does not start).
    pub fn load(source: JwksSource) -> Result<Jwks, JwksError> {
        let keys = parse_jwks(&source.describe(), &source.fetch()?)?;
        if keys.is_empty() {
            tracing::warn!(jwks = %source.describe(), "the JWKS has no usable key: every OAUTHBEARER token will be refused");
        }
        Ok(Jwks {
            source,
            keys: RwLock::new(Arc::new(keys)),
            wanted: AtomicBool::new(false),
        })
    }

    pub fn keys(&self) -> Arc<Vec<Jwk>> {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Asks the refresher to read the JWKS again soon (a token named an unknown key id).
    pub fn want_refresh(&self) {
        self.wanted.store(true, Ordering::Relaxed);
    }

    /// Reads the JWKS again; the keys are replaced only by a set that parses.
    pub fn refresh(&self) -> Result<usize, JwksError> {
        let keys = parse_jwks(&self.source.describe(), &self.source.fetch()?)?;
        let n = keys.len();
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
        Ok(n)
    }
}

/// The refresh thread; dropping it stops the thread.
pub struct Refresher {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Refresher {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads `jwks` again every `every`, and within a second of `want_refresh` (at most once a
/// second, so a client sending made-up key ids cannot make the broker fetch in a loop).
pub fn spawn_refresher(jwks: Arc<Jwks>, every: Duration) -> std::io::Result<Refresher> {
    let (stop, stopped) = mpsc::channel::<()>();
    let tick = every.min(Duration::from_secs(1));
    let thread = std::thread::Builder::new()
        .name("jwks-refresh".into())
        .spawn(move || {
            let mut last = Instant::now();
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(tick) {
                let wanted = jwks.wanted.swap(false, Ordering::Relaxed);
                if !wanted && last.elapsed() < every {
                    continue;
                }
                last = Instant::now();
                match jwks.refresh() {
                    Ok(n) => tracing::debug!(keys = n, "JWKS read"),
                    Err(e) => {
                        tracing::warn!(error = %e, "JWKS refresh failed; the previous keys stay in use")
                    }
                }
            }
        })?;
    Ok(Refresher {
        stop: Some(stop),
        thread: Some(thread),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_urls_when_parsing_then_files_and_local_hosts_only() {
        assert_eq!(
            JwksSource::parse("file:///etc/jwks.json").unwrap(),
            JwksSource::File("/etc/jwks.json".into())
        );
        for ok in [
            "http://127.0.0.1:8080/jwks",
            "https://localhost/keys",
            "http://[::1]:9/x",
            "http://127.0.0.1",
        ] {
            assert!(
                matches!(JwksSource::parse(ok), Ok(JwksSource::Http(_))),
                "{ok}"
            );
        }
        for bad in [
            "https://idp.example.com/jwks",
            "http://10.0.0.1/jwks",
            "http://127.0.0.1.example.com/x",
        ] {
            assert!(
                matches!(JwksSource::parse(bad), Err(JwksError::Host(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            JwksSource::parse("/etc/jwks.json"),
            Err(JwksError::Scheme(_))
        ));
    }

    #[test]
    fn given_a_jwks_with_symmetric_and_unknown_keys_when_parsing_then_only_public_keys_kept() {
        let doc = br#"{"keys":[
            {"kty":"RSA","kid":"r","n":"sXch","e":"AQAB"},
            {"kty":"oct","kid":"h","k":"c2VjcmV0"},
            {"kty":"XYZ","kid":"?"},
            {"kty":"EC","kid":"e","crv":"P-256","x":"AA","y":"AA"}
        ]}"#;
        let keys = parse_jwks("t", doc).unwrap();
        let kids: Vec<_> = keys
            .iter()
            .map(|k| k.common.key_id.clone().unwrap())
            .collect();
        assert_eq!(kids, ["r", "e"]);
        assert!(matches!(
            parse_jwks("t", b"{\"nokeys\":1}"),
            Err(JwksError::Parse(..))
        ));
    }

    #[test]
    fn given_a_changed_file_when_refreshing_then_new_keys_and_a_broken_file_keeps_old() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwks.json");
        std::fs::write(
            &path,
            br#"{"keys":[{"kty":"RSA","kid":"a","n":"sXch","e":"AQAB"}]}"#,
        )
        .unwrap();
        let jwks = Jwks::load(JwksSource::File(path.clone())).unwrap();
        assert_eq!(jwks.keys()[0].common.key_id.as_deref(), Some("a"));
        std::fs::write(
            &path,
            br#"{"keys":[{"kty":"RSA","kid":"b","n":"sXch","e":"AQAB"}]}"#,
        )
        .unwrap();
        assert_eq!(jwks.refresh().unwrap(), 1);
        assert_eq!(jwks.keys()[0].common.key_id.as_deref(), Some("b"));
        std::fs::write(&path, b"{half").unwrap();
        assert!(jwks.refresh().is_err());
        assert_eq!(jwks.keys()[0].common.key_id.as_deref(), Some("b"));
        assert!(matches!(
            Jwks::load(JwksSource::File(dir.path().join("missing"))),
            Err(JwksError::Read(..))
        ));
    }
}
