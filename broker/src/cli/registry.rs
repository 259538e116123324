//! A small client of Confluent's Schema Registry REST API (what `strom schema` speaks), so the
//! commands work against Strom's built-in registry (docs/schema-registry.md) and Confluent's
//! alike. Only Confluent's paths, bodies and `{"error_code", "message"}` errors are used.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::error::CliError;

/// The media type Confluent's clients send and its registry answers with.
const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

pub struct Registry {
    base: String,
    http: reqwest::Client,
    timeout: Duration,
}

impl Registry {
    /// `url` is the registry's base URL (`http://127.0.0.1:8081`); a bare `HOST:PORT` means
    /// plain HTTP.
    pub fn new(url: &str, timeout: Duration) -> Registry {
        let url = url.trim().trim_end_matches('/');
        let base = if url.contains("://") {
            url.to_string()
        } else {
            format!("http://{url}")
        };
        Registry {
            base,
            http: reqwest::Client::new(),
            timeout,
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub async fn get(&self, path: &str, context: &str) -> Result<Value, CliError> {
        self.call(Method::GET, path, None, context).await
    }

    pub async fn post(&self, path: &str, body: &Value, context: &str) -> Result<Value, CliError> {
        self.call(Method::POST, path, Some(body), context).await
    }

    pub async fn put(&self, path: &str, body: &Value, context: &str) -> Result<Value, CliError> {
        self.call(Method::PUT, path, Some(body), context).await
    }

    pub async fn delete(&self, path: &str, context: &str) -> Result<Value, CliError> {
        self.call(Method::DELETE, path, None, context).await
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        context: &str,
    ) -> Result<Value, CliError> {
        let url = format!("{}{path}", self.base);
        let mut req = self
            .http
            .request(method, &url)
            .timeout(self.timeout)
            .header(reqwest::header::ACCEPT, CONTENT_TYPE);
        if let Some(b) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
                .body(b.to_string());
        }
        let unreachable = |e: reqwest::Error| CliError::RegistryUnreachable {
            url: self.base.clone(),
            reason: error_chain(&e),
        };
        let resp = req.send().await.map_err(unreachable)?;
        let status = resp.status();
        let text = resp.text().await.map_err(unreachable)?;
        if status.is_success() {
            return serde_json::from_str(&text).map_err(|e| {
                CliError::Client(format!("{context}: the registry's answer is not JSON: {e}"))
            });
        }
        Err(registry_error(context, status, &text))
    }
}

/// Confluent's error body `{"error_code": 40401, "message": "Subject 'x' not found."}`; a body
/// of another shape (a proxy's HTML page) keeps the HTTP status as the code.
pub fn registry_error(context: &str, status: StatusCode, body: &str) -> CliError {
    let parsed: Option<(i64, String)> = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        Some((
            v.get("error_code")?.as_i64()?,
            v.get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        ))
    });
    let (code, message) = parsed.unwrap_or_else(|| {
        let mut m: String = body.trim().chars().take(200).collect();
        if m.is_empty() {
            m = status
                .canonical_reason()
                .unwrap_or("no message")
                .to_string();
        }
        (i64::from(status.as_u16()), m)
    });
    CliError::Registry {
        context: context.to_string(),
        status: status.as_u16(),
        code,
        message,
    }
}

/// reqwest's top-level message ("error sending request") hides the cause (connection
/// refused): show the chain.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// A path segment (subject names may hold `/`, `:`, spaces).
pub fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_confluent_error_body_when_read_then_its_code_and_message() {
        let e = registry_error(
            "getting s",
            StatusCode::NOT_FOUND,
            r#"{"error_code":40401,"message":"Subject 's' not found."}"#,
        );
        assert_eq!(
            e.to_string(),
            "getting s: Subject 's' not found. (error_code 40401, HTTP 404)"
        );
        assert_eq!(e.exit_code(), super::super::error::EXIT_KAFKA);
    }

    #[test]
    fn given_other_error_body_when_read_then_http_status_is_the_code() {
        let e = registry_error("x", StatusCode::BAD_GATEWAY, "<html>bad gateway</html>");
        assert_eq!(
            e.to_string(),
            "x: <html>bad gateway</html> (error_code 502, HTTP 502)"
        );
        let e = registry_error("x", StatusCode::SERVICE_UNAVAILABLE, "");
        assert_eq!(
            e.to_string(),
            "x: Service Unavailable (error_code 503, HTTP 503)"
        );
    }

    #[test]
    fn given_urls_when_made_then_scheme_defaults_and_segments_are_escaped() {
        let r = Registry::new("127.0.0.1:8081/", Duration::from_secs(1));
        assert_eq!(r.base(), "http://127.0.0.1:8081");
        let r = Registry::new("https://sr.example:443", Duration::from_secs(1));
        assert_eq!(r.base(), "https://sr.example:443");
        assert_eq!(seg("a/b c:d"), "a%2Fb%20c%3Ad");
        assert_eq!(seg("users-value"), "users-value");
    }
}
