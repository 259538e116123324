//! Trace propagation to OpenTelemetry (issue 21, docs/ai-features.md "Trace propagation").
//!
//! A record whose headers carry a W3C `traceparent` (with `tracestate`), or the requirements
//! document's `x-trace-id`, gets broker spans in that trace: one for its produce (from the
//! request's read to its answer: append, replication to the ISR and the fdatasync wait for
//! acks=all) and one for each consumer fetch that delivers it, as children of the record's
//! context, with the topic, partition, offset and sizes as attributes. They are exported
//! over OTLP/HTTP (protobuf) to `otel.exporter.otlp.endpoint` by the opentelemetry SDK's batch
//! processor, on its own thread, through a bounded queue (2048 spans; beyond it spans are
//! dropped and counted by the SDK, never buffered without bound), and sampled by trace id
//! with `otel.traces.sampler.ratio`, so a trace's produce and fetch spans are kept or
//! dropped together.
//!
//! Without an endpoint nothing here runs: `BrokerContext::otel` is `None` and the handlers
//! check that before looking at a single header. With one, each produced and fetched batch
//! is scanned for the headers (decompressed when compressed — the cost of turning it on).

pub mod context;

use std::time::{Duration, SystemTime};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::trace::{Span as _, SpanKind, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider,
};
use opentelemetry_sdk::Resource;

use crate::config::BrokerConfig;
use crate::partition::record_view;

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

/// One node's span exporter (module overview).
pub struct Otel {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

/// Where a span's record was: topic, partition, and the client that sent or fetched it.
pub struct Place<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub client_id: &'a str,
}

impl Otel {
    /// The exporter `config` asks for; `None` without an endpoint.
    pub fn from_config(config: &BrokerConfig) -> Result<Option<Otel>, OtelError> {
        let endpoint = config.otel_exporter_otlp_endpoint.trim();
        if endpoint.is_empty() {
            return Ok(None);
        }
        let url = traces_url(endpoint)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
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
        let ratio = config.otel_traces_sampler_ratio.clamp(0.0, 1.0);
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(Sampler::TraceIdRatioBased(ratio))
            .with_resource(
                Resource::builder()
                    .with_service_name("strom")
                    .with_attribute(KeyValue::new("service.instance.id", config.node_id as i64))
                    .build(),
            )
            .build();
        let tracer = provider.tracer("strom");
        Ok(Some(Otel { provider, tracer }))
    }

    /// Spans for the traced records of one appended batch: `records` is the batch as
    /// produced (its offsets relative), `base_offset` where the log put it, `started` when
    /// the request was read.
    pub fn produced(
        &self,
        at: &Place<'_>,
        records: &[u8],
        base_offset: i64,
        max_decompressed: usize,
        started: SystemTime,
    ) {
        let ended = SystemTime::now();
        let _ = record_view::for_each_record(records, 0, max_decompressed, |_h, rel, _ts, r| {
            if let Some(parent) = context::of_record(r) {
                let size = r.value.map_or(0, <[u8]>::len) + r.key.map_or(0, <[u8]>::len);
                self.span("send", at, parent, base_offset + rel, size, started, ended);
            }
        });
    }

    /// Spans for the traced records a consumer's fetch delivers: `chunks` are the batches
    /// sent (a partial last batch is not read).
    pub fn delivered(
        &self,
        at: &Place<'_>,
        chunks: &[bytes::Bytes],
        max_decompressed: usize,
        started: SystemTime,
    ) {
        let ended = SystemTime::now();
        for chunk in chunks {
            let _ = record_view::for_each_record(chunk, 0, max_decompressed, |_h, off, _ts, r| {
                if let Some(parent) = context::of_record(r) {
                    let size = r.value.map_or(0, <[u8]>::len) + r.key.map_or(0, <[u8]>::len);
                    self.span("receive", at, parent, off, size, started, ended);
                }
            });
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn span(
        &self,
        operation: &'static str,
        at: &Place<'_>,
        parent: opentelemetry::trace::SpanContext,
        offset: i64,
        size: usize,
        started: SystemTime,
        ended: SystemTime,
    ) {
        // OpenTelemetry's messaging conventions: `{operation} {destination}`, kafka attributes.
        let attributes = vec![
            KeyValue::new("messaging.system", "kafka"),
            KeyValue::new("messaging.operation.name", operation),
            KeyValue::new("messaging.destination.name", at.topic.to_string()),
            KeyValue::new(
                "messaging.destination.partition.id",
                at.partition.to_string(),
            ),
            KeyValue::new("messaging.kafka.offset", offset),
            KeyValue::new("messaging.message.body.size", size as i64),
            KeyValue::new("messaging.client.id", at.client_id.to_string()),
        ];
        let cx = Context::new().with_remote_span_context(parent);
        let mut span = self
            .tracer
            .span_builder(format!("{operation} {}", at.topic))
            .with_kind(SpanKind::Server)
            .with_start_time(started)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &cx);
        span.end_with_timestamp(ended);
    }
}

impl Drop for Otel {
    fn drop(&mut self) {
        // Sends what the batch processor still holds (a clean stop loses no span).
        let _ = self.provider.shutdown();
    }
}

/// The OTLP/HTTP traces URL of a base endpoint (`http://host:4318` → `…/v1/traces`), as
/// OpenTelemetry's `OTEL_EXPORTER_OTLP_ENDPOINT` is read; a URL with a path is used as is.
fn traces_url(endpoint: &str) -> Result<String, OtelError> {
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
        .filter(|r| !r.is_empty() && !r.starts_with('/'))
        .ok_or_else(|| OtelError::Endpoint(endpoint.to_string()))?;
    Ok(match rest.split_once('/') {
        Some((_, path)) if !path.is_empty() => endpoint.to_string(),
        _ => format!("{}/v1/traces", endpoint.trim_end_matches('/')),
    })
}

/// When a request read `elapsed` ago started, on the wall clock spans are stamped with.
pub fn started_at(elapsed: Duration) -> SystemTime {
    SystemTime::now()
        .checked_sub(elapsed)
        .unwrap_or(SystemTime::UNIX_EPOCH)
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
        assert!(traces_url("http://").is_err());
    }
}
