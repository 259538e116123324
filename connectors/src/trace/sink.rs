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

/// A traced record the sink did not write: what its dead-letter span says.
pub struct DeadLetter<'a> {
    pub system: &'static str,
    pub collection: &'a str,
    pub connector: &'a str,
    pub group: &'a str,
    /// The record as consumed.
    pub record: &'a Traced,
    pub dlq_topic: &'a str,
    /// Why it was not written: the error's kind (`missing_vector`, `rejected`, …) and text.
    pub kind: &'static str,
    pub message: &'a str,
}

/// The span of a record's trip to the dead-letter topic, started now; the caller ends it
/// when the DLQ record is acknowledged ([`end_dead_letter`]). Kind PRODUCER (the connector
/// sends the record on), a child of the record's context, with error status: the record did
/// not reach the database, and this is where its trace says why. Its context goes into the
/// DLQ record's `traceparent`, so the broker's span for that produce, and whoever reads the
/// DLQ, stay in the trace.
pub fn dead_letter_span(tracer: &SdkTracer, d: &DeadLetter<'_>) -> opentelemetry_sdk::trace::Span {
    let r = d.record;
    let attributes = vec![
        KeyValue::new("messaging.system", "kafka"),
        KeyValue::new("messaging.operation.name", "send"),
        KeyValue::new("messaging.destination.name", d.dlq_topic.to_string()),
        // The record the sink consumed (the DLQ record's `__connect.errors.*` headers).
        KeyValue::new("strom.source.topic", r.topic.clone()),
        KeyValue::new("strom.source.partition", r.partition.to_string()),
        KeyValue::new("strom.source.offset", r.offset),
        KeyValue::new("messaging.consumer.group.name", d.group.to_string()),
        KeyValue::new("db.system.name", d.system),
        KeyValue::new("db.collection.name", d.collection.to_string()),
        KeyValue::new("strom.connector", d.connector.to_string()),
        // OpenTelemetry's `error.type`: a low-cardinality class; the text is the status's.
        KeyValue::new("error.type", d.kind),
        KeyValue::new("strom.dlq.reason", d.message.to_string()),
    ];
    let cx = Context::new().with_remote_span_context(r.context.clone());
    let mut span = tracer
        .span_builder(format!("dead-letter {}", d.dlq_topic))
        .with_kind(SpanKind::Producer)
        .with_attributes(attributes)
        .start_with_context(tracer, &cx);
    span.set_status(Status::error(d.message.to_string()));
    span
}

/// Ends a dead-letter span with where the DLQ record landed, or why it was not sent.
pub fn end_dead_letter(mut span: opentelemetry_sdk::trace::Span, sent: Result<(i32, i64), String>) {
    match sent {
        Ok((partition, offset)) => {
            span.set_attribute(KeyValue::new(
                "messaging.destination.partition.id",
                partition.to_string(),
            ));
            span.set_attribute(KeyValue::new("messaging.kafka.offset", offset));
        }
        Err(e) => span.set_attribute(KeyValue::new("strom.dlq.send_error", e)),
    }
    span.end();
}
