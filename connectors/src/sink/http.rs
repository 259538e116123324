//! The JSON-over-HTTP client the HTTP sinks (Chroma, Weaviate, Pinecone) share: one reqwest
//! client with the sink's fixed headers, answers parsed as JSON (or kept as text), and HTTP
//! failures classified transient or permanent by [`super::http_error`].

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::{http_error, SinkError};

pub struct JsonApi {
    http: reqwest::Client,
    base: String,
}

impl JsonApi {
    /// `base` is prefixed to every path; `headers` go on every request (auth, API version).
    pub fn new(base: String, headers: &[(&'static str, String)]) -> Result<JsonApi, SinkError> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let value = HeaderValue::from_str(value)
                .map_err(|e| SinkError::Permanent(format!("header {name}: {e}")))?;
            map.insert(HeaderName::from_static(name), value);
        }
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .default_headers(map)
            .build()
            .map_err(|e| SinkError::Permanent(format!("http client: {e}")))?;
        Ok(JsonApi { http, base })
    }

    /// The status and the body (JSON, or the text as a JSON string); only transport failures
    /// are errors.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(StatusCode, Value), SinkError> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| http_error(path, None, e.to_string()))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| http_error(path, None, e.to_string()))?;
        Ok((
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        ))
    }

    /// The body of a 2xx answer; anything else is an error carrying the server's message.
    pub async fn ok(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, SinkError> {
        let (status, v) = self.call(method, path, body).await?;
        if status.is_success() {
            return Ok(v);
        }
        // Pinecone's rpcStatus has a `message`; other bodies are quoted whole.
        let msg = v["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string());
        Err(http_error(path, Some(status), msg))
    }
}

impl JsonApi {
    /// [`JsonApi::ok`] with a JSON body.
    pub async fn send(&self, method: Method, path: &str, body: Value) -> Result<Value, SinkError> {
        self.ok(method, path, Some(body)).await
    }
}

/// A JSON array of numbers as f32s (vectors read back for verification).
pub fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_f64().map(|f| f as f32))
                .collect()
        })
        .unwrap_or_default()
}
