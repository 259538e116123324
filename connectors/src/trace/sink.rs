//! The sinks' span for a database write: a record consumed with a trace context (its
//! `traceparent` or `x-trace-id` header) gets `sink {collection}` in its trace, kind CLIENT
//! (OpenTelemetry's database conventions: the connector is the database's client), covering
//! the write of the batch that held it.
//!
//! One span per trace in the batch, a child of the trace's first record, with span links to
//! that trace's other records (their producers' spans), rather than OpenTelemetry's
//! batch-consumer shape (one span per batch, linked to every record): a link-only span lives
//! in a trace of its own, which trace UIs show apart from the request it served, and the
//! question an LLM service's trace answers is "when did this request's data reach the vector
//! store". A batch of `n` records costs at most `n` spans, through the exporter's bounded
//! queue. Without a tracer nothing here runs and no header is read.

use std::time::SystemTime;

use opentelemetry::trace::{
    Link, Span as _, SpanContext, SpanKind, Status, TraceContextExt, TraceId, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;

/// Links kept per span beyond its parent (the SDK's own default limit is 128).
const MAX_LINKS: usize = 128;

/// A traced record of a batch: its context and where it was read.
pub struct Traced {
    pub context: SpanContext,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// What one sink write was.
pub struct Write<'a> {
    /// `db.system.name`: the sink (`pgvector`, `chroma`, `weaviate`, …).
    pub system: &'static str,
    pub collection: &'a str,
    pub connector: &'a str,
    pub group: &'a str,
    /// Operations written in the batch (upserts and deletes).
    pub batch_size: usize,
    pub started: SystemTime,
    pub ended: SystemTime,
    /// The write's error, if it failed.
    pub error: Option<String>,
}

/// Emits one span per trace of `traced` (module overview).
pub fn write_spans(tracer: &SdkTracer, write: &Write<'_>, traced: &[Traced]) {
    let mut traces: Vec<(TraceId, Vec<&Traced>)> = Vec::new();
    for t in traced {
        let id = t.context.trace_id();
        match traces.iter_mut().find(|(k, _)| *k == id) {
            Some((_, v)) => v.push(t),
            None => traces.push((id, vec![t])),
        }
    }
    for (_, records) in traces {
        let first = records[0];
        let links: Vec<Link> = records[1..]
            .iter()
            .filter(|r| r.context.span_id() != first.context.span_id())
            .take(MAX_LINKS)
            .map(|r| Link::with_context(r.context.clone()))
            .collect();
        let system = write.system;
        let attributes = vec![
            // `db.system.name` is the current convention, `db.system` the one most backends
            // still index on.
            KeyValue::new("db.system.name", system),
            KeyValue::new("db.system", system),
            KeyValue::new("db.collection.name", write.collection.to_string()),
            KeyValue::new("db.operation.name", "upsert"),
            KeyValue::new("db.operation.batch.size", write.batch_size as i64),
            KeyValue::new("messaging.system", "kafka"),
            KeyValue::new("messaging.destination.name", first.topic.clone()),
            KeyValue::new(
                "messaging.destination.partition.id",
                first.partition.to_string(),
            ),
            KeyValue::new("messaging.kafka.offset", first.offset),
            KeyValue::new("messaging.consumer.group.name", write.group.to_string()),
            KeyValue::new("strom.connector", write.connector.to_string()),
        ];
        let cx = Context::new().with_remote_span_context(first.context.clone());
        let mut span = tracer
            .span_builder(format!("sink {}", write.collection))
            .with_kind(SpanKind::Client)
            .with_start_time(write.started)
            .with_attributes(attributes)
            .with_links(links)
            .start_with_context(tracer, &cx);
        if let Some(e) = &write.error {
            span.set_status(Status::error(e.clone()));
        }
        span.end_with_timestamp(write.ended);
    }
}
