//! A local HTTP/1.1 fake for the contract tests: it records every request and answers each
//! from a script of fixtures (`tests/fixtures/<vendor>/*.json`, each citing the vendor spec
//! it was taken from). Keep-alive, Content-Length bodies only: what reqwest sends.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One scripted answer: the request it expects (method and path) and the response.
pub struct Answer {
    pub method: &'static str,
    pub path: String,
    pub status: u16,
    pub body: Value,
}

/// A fixture file: `{"_source": "...", "status": N, "body": ...}`; `{{KEY}}` placeholders in
/// string values are replaced from `vars`.
pub fn fixture(vendor: &str, name: &str, vars: &[(&str, &str)]) -> (u16, Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(vendor)
        .join(name);
    let mut text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for (k, v) in vars {
        text = text.replace(&format!("{{{{{k}}}}}"), v);
    }
    let v: Value = serde_json::from_str(&text).expect("fixture JSON");
    assert!(
        v["_source"].as_str().is_some_and(|s| !s.is_empty()),
        "{name} must cite its source"
    );
    (
        v["status"].as_u64().expect("status") as u16,
        v["body"].clone(),
    )
}

pub struct Fake {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
    script: Arc<Mutex<VecDeque<Answer>>>,
}

impl Fake {
    pub async fn start() -> Fake {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Mutex<VecDeque<Answer>>> = Arc::new(Mutex::new(VecDeque::new()));
        let (reqs, scr) = (requests.clone(), script.clone());
        tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(serve(conn, reqs.clone(), scr.clone()));
            }
        });
        Fake {
            url,
            requests,
            script,
        }
    }

    pub fn expect(
        &self,
        method: &'static str,
        path: impl Into<String>,
        (status, body): (u16, Value),
    ) {
        self.script.lock().unwrap().push_back(Answer {
            method,
            path: path.into(),
            status,
            body,
        });
    }

    pub fn take_requests(&self) -> Vec<Request> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }

    pub fn assert_script_done(&self) {
        let left: Vec<String> = self
            .script
            .lock()
            .unwrap()
            .iter()
            .map(|a| format!("{} {}", a.method, a.path))
            .collect();
        assert!(left.is_empty(), "requests never made: {left:?}");
    }
}

async fn serve(
    mut conn: tokio::net::TcpStream,
    requests: Arc<Mutex<Vec<Request>>>,
    script: Arc<Mutex<VecDeque<Answer>>>,
) {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 8192];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let mut first = lines.next().unwrap_or("").split_whitespace();
        let method = first.next().unwrap_or("").to_string();
        let path = first.next().unwrap_or("").to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let len: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let mut chunk = [0u8; 8192];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Value =
            serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or(Value::Null);
        buf.drain(..head_end + len);
        let answer = script.lock().unwrap().pop_front();
        let (status, reply) = match answer {
            Some(a) if a.method == method && a.path == path => (a.status, a.body),
            Some(a) => (
                599,
                Value::String(format!(
                    "fake expected {} {}, got {method} {path}",
                    a.method, a.path
                )),
            ),
            None => (
                599,
                Value::String(format!("fake has no answer for {method} {path}")),
            ),
        };
        requests.lock().unwrap().push(Request {
            method,
            path,
            headers,
            body,
        });
        let text = if reply.is_null() {
            String::new()
        } else {
            reply.to_string()
        };
        let resp = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
            text.len()
        );
        if conn.write_all(resp.as_bytes()).await.is_err() {
            return;
        }
    }
}
