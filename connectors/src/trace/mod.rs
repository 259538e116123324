//! Trace propagation shared by the broker and the sinks (issue 21, docs/ai-features.md "Trace
//! propagation"): the W3C trace context a record's headers carry ([`context`]), the OTLP/HTTP
//! exporter both build the same way ([`provider`]), and the sinks' span for a database write
//! ([`sink`]). It lives here because the broker already depends on this crate and this crate
//! must not depend on the broker.

pub mod context;
pub mod sink;

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider,
};
use opentelemetry_sdk::Resource;

#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    #[error("otel.exporter.otlp.endpoint `{0}` is not an http:// or https:// URL")]
    Endpoint(String),
    #[error("building the OTLP exporter: {0}")]
    Exporter(String),
}

/// How often the batch processor sends what it holds (the SDK's default is 5 s; traces of
/// LLM calls are read while the call is still being debugged).
const EXPORT_INTERVAL: Duration = Duration::from_secs(1);

/// The tracer provider exporting over OTLP/HTTP (protobuf) to `endpoint`, sampled by trace id
/// with `ratio` (so every hop keeps or drops a trace alike), as `service` with `instance`;
/// `None` for an empty endpoint. The SDK's batch processor runs on its own thread behind a
/// bounded queue (2048 spans; beyond it spans are dropped and counted, never buffered).
pub fn provider(
    endpoint: &str,
    ratio: f64,
    service: &'static str,
    instance: i64,
) -> Result<Option<SdkTracerProvider>, OtelError> {
    let endpoint = endpoint.trim();
    if endpoint.is_empty() {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(traces_url(endpoint)?)
        .with_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| OtelError::Exporter(e.to_string()))?;
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_scheduled_delay(EXPORT_INTERVAL)
                .build(),
        )
        .build();
    Ok(Some(
        SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(Sampler::TraceIdRatioBased(ratio.clamp(0.0, 1.0)))
            .with_resource(
                Resource::builder()
                    .with_service_name(service)
                    .with_attribute(KeyValue::new("service.instance.id", instance))
                    .build(),
            )
            .build(),
    ))
}

/// The OTLP/HTTP traces URL of a base endpoint (`http://host:4318` → `…/v1/traces`), as
/// OpenTelemetry's `OTEL_EXPORTER_OTLP_ENDPOINT` is read; a URL with a path is used as is.
pub fn traces_url(endpoint: &str) -> Result<String, OtelError> {
    let path = endpoint_path(endpoint)?;
    Ok(if path.is_empty() {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    } else {
        endpoint.to_string()
    })
}

/// The OTLP/HTTP metrics URL beside the traces of `endpoint`: `…/v1/metrics` on the base
/// endpoint, or in place of a given `/v1/traces` (another path gets `/v1/metrics` appended).
pub fn metrics_url(endpoint: &str) -> Result<String, OtelError> {
    endpoint_path(endpoint)?;
    let base = endpoint.trim_end_matches('/');
    let base = base.strip_suffix("/v1/traces").unwrap_or(base);
    Ok(format!("{base}/v1/metrics"))
}

/// The path of an `http(s)://host[:port][/path]` endpoint ("" for none or `/`).
fn endpoint_path(endpoint: &str) -> Result<&str, OtelError> {
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
        .filter(|r| !r.is_empty() && !r.starts_with('/'))
        .ok_or_else(|| OtelError::Endpoint(endpoint.to_string()))?;
    Ok(rest.split_once('/').map_or("", |(_, path)| path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_endpoints_when_resolved_then_traces_url_or_refused() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://127.0.0.1:4318/").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://collector/custom/traces").unwrap(),
            "https://collector/custom/traces"
        );
        assert!(traces_url("127.0.0.1:4318").is_err());
        for (endpoint, metrics) in [
            ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/metrics"),
            ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/metrics"),
            ("http://c:4318/v1/traces", "http://c:4318/v1/metrics"),
            ("https://c/otlp", "https://c/otlp/v1/metrics"),
        ] {
            assert_eq!(metrics_url(endpoint).unwrap(), metrics);
        }
        assert!(metrics_url("c:4318").is_err());
        assert!(traces_url("http://").is_err());
    }
}
