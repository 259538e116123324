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
//!
//! The header parsing and the exporter's setup are `strom_connectors::trace`'s, shared with
//! the vector sinks; when `strom serve` runs `[[connectors]]` they get this node's tracer
//! ([`Otel::tracer`]), so their `sink {collection}` spans go out through the same exporter.

use std::time::{Duration, SystemTime};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::trace::{Span as _, SpanContext, SpanKind, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
pub use strom_connectors::trace::{context, OtelError};

use crate::config::BrokerConfig;
use crate::partition::read_committed::AbortedFilter;
use crate::partition::record_view;
use crate::partition::records::RecordFields;

/// The trace a record carries (its headers, read in place), `traceparent` first.
pub fn of_record(r: &RecordFields<'_>) -> Option<SpanContext> {
    if r.header_count() == 0 {
        return None;
    }
    context::of_headers(r.headers())
}

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
        let Some(provider) = strom_connectors::trace::provider(
            &config.otel_exporter_otlp_endpoint,
            config.otel_traces_sampler_ratio,
            "strom",
            config.node_id as i64,
        )?
        else {
            return Ok(None);
        };
        let tracer = provider.tracer("strom");
        Ok(Some(Otel { provider, tracer }))
    }

    /// This node's tracer, for the connectors `strom serve` runs beside it.
    pub fn tracer(&self) -> SdkTracer {
        self.tracer.clone()
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
            if let Some(parent) = of_record(r) {
                let size = r.value.map_or(0, <[u8]>::len) + r.key.map_or(0, <[u8]>::len);
                self.span("send", at, parent, base_offset + rel, size, started, ended);
            }
        });
    }

    /// Spans for the traced records a consumer's fetch delivers: `chunks` are the batches
    /// sent (a partial last batch is not read). For a read_committed fetch `aborted` is the
    /// response's aborted transactions, `(producer id, first offset)`: the records the client
    /// drops for them are not delivered, so they get no span (docs/ai-features.md).
    pub fn delivered(
        &self,
        at: &Place<'_>,
        chunks: &[bytes::Bytes],
        aborted: Option<&[(i64, i64)]>,
        max_decompressed: usize,
        started: SystemTime,
    ) {
        let ended = SystemTime::now();
        let mut filter = aborted.map(|list| AbortedFilter::new(list.iter().copied()));
        for chunk in chunks {
            for (h, batch) in storage::batch::BatchIter::new(chunk).map_while(Result::ok) {
                if filter.as_mut().is_some_and(|f| !f.delivers(&h, batch)) {
                    continue;
                }
                let _ =
                    record_view::for_each_record(batch, 0, max_decompressed, |_h, off, _ts, r| {
                        if let Some(parent) = of_record(r) {
                            let size =
                                r.value.map_or(0, <[u8]>::len) + r.key.map_or(0, <[u8]>::len);
                            self.span("receive", at, parent, off, size, started, ended);
                        }
                    });
            }
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

impl Otel {
    /// Sends what the batch processor still holds and stops it, so a clean stop loses no
    /// span. `Server::shutdown` calls it once the shards and the admin port have stopped
    /// making spans: the exporter lives in the shared `BrokerContext`, which a detached task
    /// may still hold when the process exits, so `Drop` alone may never run. A second call
    /// (then `Drop`'s) is a no-op.
    pub fn shutdown(&self) {
        let _ = self.provider.shutdown();
    }
}

impl Drop for Otel {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// When a request read `elapsed` ago started, on the wall clock spans are stamped with.
pub fn started_at(elapsed: Duration) -> SystemTime {
    SystemTime::now()
        .checked_sub(elapsed)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}
