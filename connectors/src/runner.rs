//! One connector's loop: consume a batch (up to `batch_size` records, or what came within
//! `linger_ms` of the first), decode it, write it to the sink with retries, send the records
//! that cannot be written to the dead-letter topic, and only then commit the batch's offsets.
//!
//! Consuming and decoding the next batch (a feeder task) overlaps writing the current one: in
//! a strictly serial loop the sink sat idle while the connector fetched and parsed JSON (the
//! vector-sink benchmark measured the sink busy 54% of the time; benches/README.md). The
//! feeder hands over one batch at a time through a channel of one slot, so at most two
//! batches are in memory, and batches are still written and committed in order.
//!
//! Nothing is committed before the sink acknowledged it, so a crash replays the tail; ids are
//! deterministic, so the replay overwrites instead of duplicating (exactly-once effect). The
//! pgvector sink also stores the offsets in its own transaction and the loop skips what the
//! table already holds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::trace::{Span as _, SpanContext};
use opentelemetry_sdk::trace::SdkTracer;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientContext, Offset, Statistics, TopicPartitionList};
use tokio::sync::watch;

use crate::config::{ConnectorConfig, SchemaMapping};
use crate::declared::Declared;
use crate::mapping::{self, Mapper};
use crate::metrics::Metrics;
use crate::record::{decode, tenant_of, FieldType, Op, RawRecord, RecordError, Schema};
use crate::registry::{Failure, Registry};
use crate::sink::{Offsets, Sink, SinkError};
use crate::trace::sink::{DeadLetter, Traced, Write};

#[derive(Debug, thiserror::Error)]
pub enum ConnectorError {
    #[error("connector {name}: kafka: {source}")]
    Kafka {
        name: String,
        #[source]
        source: KafkaError,
    },
    #[error("connector {name}: sink {sink}: {source}")]
    Sink {
        name: String,
        sink: &'static str,
        #[source]
        source: SinkError,
    },
    #[error("connector {name}: dead-letter topic {topic}: {message}")]
    Dlq {
        name: String,
        topic: String,
        message: String,
    },
}

/// Kafka Connect's dead-letter header names, so existing tooling reads our DLQ records.
pub const HEADER_TOPIC: &str = "__connect.errors.topic";
pub const HEADER_PARTITION: &str = "__connect.errors.partition";
pub const HEADER_OFFSET: &str = "__connect.errors.offset";
pub const HEADER_MESSAGE: &str = "__connect.errors.exception.message";
pub const HEADER_KIND: &str = "__connect.errors.exception.class.name";

/// Publishes librdkafka's per-partition consumer lag (from its statistics) as a gauge.
struct LagContext {
    connector: String,
    metrics: Metrics,
}

impl ClientContext for LagContext {
    fn stats(&self, s: Statistics) {
        for (topic, t) in s.topics {
            for (partition, p) in t.partitions {
                if partition >= 0 && p.consumer_lag >= 0 {
                    self.metrics
                        .consumer_lag
                        .with_label_values(&[&self.connector, &topic, &partition.to_string()])
                        .set(p.consumer_lag);
                }
            }
        }
    }
}

impl ConsumerContext for LagContext {}

pub struct Runner {
    cfg: ConnectorConfig,
    metrics: Metrics,
    /// Shared with the feeder task, which consumes; the loop commits.
    consumer: Arc<StreamConsumer<LagContext>>,
    producer: FutureProducer,
    sink: Sink,
    /// Where the field mapping comes from (`sink.schema_mapping`).
    mapper: Mapper,
    /// The schema records are checked against, once the first document prepared the sink.
    schema: Option<Schema>,
    /// What the sink already holds (pgvector's stored offsets): records below are skipped.
    stored: Offsets,
    /// Every offset the sink acknowledged, for the final synchronous commit.
    acknowledged: Offsets,
    /// The topics' `strom.embedding.*` rules (`topic_configs`), checked before a write.
    embedding: Arc<std::collections::HashMap<String, crate::embedding::EmbeddingSpec>>,
    /// Spans for the writes of traced records (`crate::trace::sink`); None: no header read.
    tracer: Option<SdkTracer>,
}

impl Runner {
    pub async fn start(
        cfg: ConnectorConfig,
        metrics: Metrics,
        tracer: Option<SdkTracer>,
    ) -> Result<Runner, ConnectorError> {
        let name = cfg.name.clone();
        let kafka = |source| ConnectorError::Kafka {
            name: name.clone(),
            source,
        };
        let mut base = ClientConfig::new();
        for (k, v) in &cfg.source.properties {
            base.set(k, v);
        }
        base.set("bootstrap.servers", &cfg.source.bootstrap);
        let mut cc = base.clone();
        cc.set("group.id", &cfg.source.group_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", &cfg.source.auto_offset_reset)
            .set("statistics.interval.ms", "5000");
        // Bound what librdkafka prefetches per partition (default 64 MiB): the sink, not the
        // consumer, is the bottleneck, so a big queue is only memory.
        if !cfg
            .source
            .properties
            .contains_key("queued.max.messages.kbytes")
        {
            cc.set("queued.max.messages.kbytes", "16384");
        }
        // Once that queue is full librdkafka waits `fetch.queue.backoff.ms` (default 1 s)
        // before it looks again: the connector drained the 16 MiB and then starved for the
        // rest of the second, which capped it at 16 MiB/s of records whatever the sink could
        // take (3.8k/s of 4.4 KB embeddings in the vector-sink benchmark,
        // benches/README.md). Looking again after 10 ms costs nothing measurable.
        if !cfg.source.properties.contains_key("fetch.queue.backoff.ms") {
            cc.set("fetch.queue.backoff.ms", "10");
        }
        let consumer: StreamConsumer<LagContext> = cc
            .create_with_context(LagContext {
                connector: cfg.name.clone(),
                metrics: metrics.clone(),
            })
            .map_err(kafka)?;
        let topics: Vec<&str> = cfg.source.topics.iter().map(String::as_str).collect();
        consumer.subscribe(&topics).map_err(kafka)?;
        let base_for_admin = base.clone();
        let mut pc = base;
        pc.set("acks", "all").set("enable.idempotence", "true");
        let producer: FutureProducer = pc.create().map_err(kafka)?;
        let mapper = Mapper::from_config(&cfg.sink).map_err(|m| ConnectorError::Sink {
            name: name.clone(),
            sink: cfg.sink.kind.as_str(),
            source: SinkError::Schema(m),
        })?;
        let embedding = Arc::new(
            crate::topic_configs::embedding_specs(&base_for_admin, &cfg.source.topics).await,
        );
        let sink = connect_sink(&cfg, &metrics).await?;
        let stored = sink.stored_offsets();
        if !stored.is_empty() {
            tracing::info!(connector = %cfg.name, ?stored, "resuming from the offsets stored in the sink");
        }
        Ok(Runner {
            cfg,
            metrics,
            consumer: Arc::new(consumer),
            producer,
            sink,
            mapper,
            schema: None,
            stored,
            acknowledged: Offsets::new(),
            embedding,
            tracer,
        })
    }

    fn sink_error(&self, source: SinkError) -> ConnectorError {
        ConnectorError::Sink {
            name: self.cfg.name.clone(),
            sink: self.sink.name(),
            source,
        }
    }

    /// Runs until `shutdown` turns true (then commits what was written and returns) or a fatal
    /// error (sink gone past its retries, collection mismatch, DLQ unreachable).
    pub async fn run(mut self, shutdown: watch::Receiver<bool>) -> Result<(), ConnectorError> {
        tracing::info!(connector = %self.cfg.name, sink = self.sink.name(), "connector running");
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let feeder = Feeder {
            consumer: self.consumer.clone(),
            cfg: self.cfg.clone(),
            metrics: self.metrics.clone(),
            embedding: self.embedding.clone(),
            traced: self.tracer.is_some(),
        };
        // Aborted when the loop ends either way (it may be waiting on an idle topic).
        let _feeder = AbortOnDrop(tokio::spawn(feeder.run(tx, shutdown.clone())));
        while let Some(batch) = rx.recv().await {
            if *shutdown.borrow() {
                break; // not written, not committed: the next run consumes it again
            }
            self.process(batch).await?;
        }
        // Commits were asynchronous; make the last one stick before leaving the group.
        if !self.acknowledged.is_empty() {
            if let Err(e) = self
                .consumer
                .commit(&offset_list(&self.acknowledged), CommitMode::Sync)
            {
                tracing::warn!(connector = %self.cfg.name, error = %e, "final offset commit failed");
            }
        }
        tracing::info!(connector = %self.cfg.name, "connector stopped");
        Ok(())
    }

    async fn process(&mut self, decoded: Vec<Decoded>) -> Result<(), ConnectorError> {
        let mut offsets = Offsets::new();
        let mut ops: Vec<Op> = Vec::new();
        let mut op_record: Vec<usize> = Vec::new();
        let mut dead: Vec<(usize, RecordError)> = Vec::new();
        let sink_cfg = self.cfg.sink.clone();
        let mut batch = Vec::with_capacity(decoded.len());
        let mut traced: Vec<Traced> = Vec::new();
        // Each record's trace, by its index in `batch`, for the spans of those that go to the DLQ.
        let mut contexts: Vec<Option<SpanContext>> = Vec::with_capacity(decoded.len());
        for (i, d) in decoded.into_iter().enumerate() {
            let Decoded {
                rec,
                op,
                declared,
                trace,
            } = d;
            let key = (rec.topic.clone(), rec.partition);
            let next = offsets.entry(key.clone()).or_insert(rec.offset + 1);
            *next = (*next).max(rec.offset + 1);
            let skip = self.stored.get(&key).is_some_and(|&n| rec.offset < n);
            batch.push(rec);
            contexts.push(trace.clone());
            if skip {
                continue; // already in the sink (stored with its data)
            }
            let op = match op {
                Ok(op) => op,
                Err(e) => {
                    dead.push((i, e));
                    continue;
                }
            };
            if let Op::Upsert(doc) = &op {
                let rule = self.mapper.rule(declared.as_ref());
                if let Err(e) = mapping::check(rule.as_deref(), doc) {
                    dead.push((i, e));
                    continue;
                }
                if self.schema.is_none() {
                    let mut wanted = mapping::schema_for(rule.as_deref(), doc);
                    if let Some(d) = sink_cfg.dimension {
                        wanted.dimension = d;
                    }
                    let schema = self.prepare(&wanted).await?;
                    self.schema = Some(schema);
                }
                if let Err(e) = self.evolve(doc, rule.as_deref()).await {
                    dead.push((i, e));
                    continue;
                }
                let schema = self.schema.as_ref().expect("prepared above");
                if let Err(e) = schema.check(doc, self.sink.fields()) {
                    dead.push((i, e));
                    continue;
                }
            }
            if let Some(context) = trace {
                let rec = &batch[i];
                traced.push(Traced {
                    context,
                    topic: rec.topic.clone(),
                    partition: rec.partition,
                    offset: rec.offset,
                });
            }
            ops.push(op);
            op_record.push(i);
        }
        let started = Instant::now();
        let wall = std::time::SystemTime::now();
        let written = self.write(&ops, &offsets).await;
        if let (Some(tracer), false) = (&self.tracer, traced.is_empty()) {
            let write = Write {
                system: self.sink.name(),
                collection: &self.cfg.sink.collection,
                connector: &self.cfg.name,
                group: &self.cfg.source.group_id,
                batch_size: ops.len(),
                started: wall,
                ended: std::time::SystemTime::now(),
                error: written.as_ref().err().map(ToString::to_string),
            };
            crate::trace::sink::write_spans(tracer, &write, &traced);
        }
        let rejected = written?;
        self.metrics
            .sink_latency
            .with_label_values(&[&self.cfg.name])
            .observe(started.elapsed().as_secs_f64());
        self.metrics
            .records_written
            .with_label_values(&[&self.cfg.name])
            .inc_by((ops.len() - rejected.len()) as u64);
        self.metrics
            .batches_written
            .with_label_values(&[&self.cfg.name])
            .inc();
        for (op_index, reason) in rejected {
            dead.push((op_record[op_index], RecordError::Rejected(reason)));
        }
        self.send_to_dlq(&batch, &contexts, dead).await?;
        self.commit(&offsets);
        self.acknowledged.extend(offsets);
        Ok(())
    }

    /// Schema evolution: fields of `doc` the collection lacks are added to it (sinks that
    /// declare their fields; see [`Sink::evolves`]). A field of a type the collection's
    /// column cannot hold is an incompatible change: the record goes to the DLQ (the check
    /// after this says which field and both types); columns are never retyped.
    async fn evolve(
        &mut self,
        doc: &crate::record::Doc,
        rule: Option<&Declared>,
    ) -> Result<(), RecordError> {
        if !self.sink.evolves() {
            return Ok(());
        }
        let schema = self.schema.as_ref().expect("prepared");
        let new: std::collections::BTreeMap<String, FieldType> = mapping::field_types(rule, doc)
            .into_iter()
            .filter(|(k, _)| !schema.fields.contains_key(k))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let mut attempt = 0;
        loop {
            match self.sink.add_fields(&new).await {
                Ok(mut s) => {
                    // The dimension is the runner's (Weaviate's schema does not say one).
                    s.dimension = schema.dimension;
                    tracing::info!(connector = %self.cfg.name, fields = ?new, "collection evolved: new fields added");
                    self.schema = Some(s);
                    return Ok(());
                }
                Err(e) if e.is_transient() && attempt + 1 < self.cfg.sink.max_attempts => {
                    attempt += 1;
                    self.retry_pause(attempt, &e).await;
                }
                // The collection refused the new field: this record goes to the DLQ.
                Err(e) => {
                    return Err(RecordError::SchemaViolation(format!(
                        "adding fields {:?}: {e}",
                        new.keys().collect::<Vec<_>>()
                    )))
                }
            }
        }
    }

    async fn prepare(&mut self, wanted: &Schema) -> Result<Schema, ConnectorError> {
        let mut attempt = 0;
        loop {
            match self.sink.prepare(wanted).await {
                Ok(s) => return Ok(s),
                Err(e) if e.is_transient() && attempt + 1 < self.cfg.sink.max_attempts => {
                    attempt += 1;
                    self.retry_pause(attempt, &e).await;
                }
                Err(e) => return Err(self.sink_error(e)),
            }
        }
    }

    async fn retry_pause(&self, attempt: u32, e: &SinkError) {
        let delay = backoff(self.cfg.sink.retry_backoff_ms, attempt);
        tracing::warn!(connector = %self.cfg.name, attempt, ?delay, error = %e, "sink write failed; retrying");
        self.metrics
            .errors
            .with_label_values(&[&self.cfg.name, "sink_retry"])
            .inc();
        tokio::time::sleep(delay).await;
    }

    /// One attempt loop for a write; transient errors retried with backoff.
    async fn write_retrying(
        &mut self,
        ops: &[Op],
        offsets: Option<&Offsets>,
    ) -> Result<crate::sink::Rejections, SinkError> {
        let mut attempt = 0;
        loop {
            match self.sink.write(ops, offsets).await {
                Err(e) if e.is_transient() && attempt + 1 < self.cfg.sink.max_attempts => {
                    attempt += 1;
                    self.retry_pause(attempt, &e).await;
                }
                other => return other,
            }
        }
    }

    /// Writes the batch with its offsets. When the sink refuses the batch as a whole, the ops
    /// are written one at a time so only the culprits are rejected (to the DLQ).
    async fn write(
        &mut self,
        ops: &[Op],
        offsets: &Offsets,
    ) -> Result<crate::sink::Rejections, ConnectorError> {
        match self.write_retrying(ops, Some(offsets)).await {
            Ok(r) => {
                self.stored_advance(offsets);
                Ok(r)
            }
            Err(SinkError::Permanent(reason)) if ops.len() > 1 => {
                tracing::warn!(connector = %self.cfg.name, %reason, "batch refused; writing its records one by one");
                let mut rejected = Vec::new();
                for (i, op) in ops.iter().enumerate() {
                    match self.write_retrying(std::slice::from_ref(op), None).await {
                        Ok(r) if r.is_empty() => {}
                        Ok(mut r) => rejected.extend(r.drain(..).map(|(_, why)| (i, why))),
                        Err(SinkError::Permanent(why)) => rejected.push((i, why)),
                        Err(e) => return Err(self.sink_error(e)),
                    }
                }
                self.write_retrying(&[], Some(offsets))
                    .await
                    .map_err(|e| self.sink_error(e))?;
                self.stored_advance(offsets);
                Ok(rejected)
            }
            Err(SinkError::Permanent(reason)) if ops.len() == 1 => {
                self.stored_advance(offsets);
                // Store the offsets anyway: the record goes to the DLQ, not back to the sink.
                self.write_retrying(&[], Some(offsets))
                    .await
                    .map_err(|e| self.sink_error(e))?;
                Ok(vec![(0, reason)])
            }
            Err(e) => Err(self.sink_error(e)),
        }
    }

    fn stored_advance(&mut self, offsets: &Offsets) {
        if self.stored.is_empty() {
            return; // only sinks that store offsets filter by them
        }
        for (k, &v) in offsets {
            let e = self.stored.entry(k.clone()).or_insert(v);
            *e = (*e).max(v);
        }
    }

    /// Sends the `dead` records of `batch` to their DLQ topics; a traced one (`contexts`, by
    /// batch index) gets a dead-letter span, which its DLQ record names as its parent.
    async fn send_to_dlq(
        &self,
        batch: &[RawRecord],
        contexts: &[Option<SpanContext>],
        dead: Vec<(usize, RecordError)>,
    ) -> Result<(), ConnectorError> {
        if dead.is_empty() {
            return Ok(());
        }
        let mut sends = Vec::with_capacity(dead.len());
        for (i, err) in &dead {
            let rec = &batch[*i];
            let topic = self.cfg.source.dlq_topic_for(&rec.topic);
            let partition = rec.partition.to_string();
            let offset = rec.offset.to_string();
            let message = err.to_string();
            tracing::debug!(connector = %self.cfg.name, topic = %rec.topic, partition = rec.partition, offset = rec.offset, error = %message, "record to the DLQ");
            let span = match (&self.tracer, &contexts[*i]) {
                (Some(tracer), Some(context)) => {
                    let record = Traced {
                        context: context.clone(),
                        topic: rec.topic.clone(),
                        partition: rec.partition,
                        offset: rec.offset,
                    };
                    let d = DeadLetter {
                        system: self.sink.name(),
                        collection: &self.cfg.sink.collection,
                        connector: &self.cfg.name,
                        group: &self.cfg.source.group_id,
                        record: &record,
                        dlq_topic: &topic,
                        kind: err.kind(),
                        message: &message,
                    };
                    Some(crate::trace::sink::dead_letter_span(tracer, &d))
                }
                _ => None,
            };
            let mut headers = OwnedHeaders::new()
                .insert(Header {
                    key: HEADER_TOPIC,
                    value: Some(&rec.topic),
                })
                .insert(Header {
                    key: HEADER_PARTITION,
                    value: Some(&partition),
                })
                .insert(Header {
                    key: HEADER_OFFSET,
                    value: Some(&offset),
                })
                .insert(Header {
                    key: HEADER_MESSAGE,
                    value: Some(&message),
                })
                .insert(Header {
                    key: HEADER_KIND,
                    value: Some(err.kind()),
                });
            if let Some(span) = &span {
                let cx = span.span_context();
                let parent = crate::trace::context::traceparent(cx);
                headers = headers.insert(Header {
                    key: crate::trace::context::TRACEPARENT,
                    value: Some(&parent),
                });
                // The vendors' state travels with the trace (W3C: kept by every hop).
                let state = cx.trace_state().header();
                if !state.is_empty() {
                    headers = headers.insert(Header {
                        key: crate::trace::context::TRACESTATE,
                        value: Some(&state),
                    });
                }
            }
            self.metrics
                .errors
                .with_label_values(&[&self.cfg.name, err.kind()])
                .inc();
            let producer = self.producer.clone();
            let key = rec.key.clone();
            let value = rec.value.clone();
            sends.push(async move {
                let mut r: FutureRecord<'_, Vec<u8>, Vec<u8>> =
                    FutureRecord::to(&topic).headers(headers);
                if let Some(k) = &key {
                    r = r.key(k);
                }
                if let Some(v) = &value {
                    r = r.payload(v);
                }
                let sent = producer
                    .send(r, Duration::from_secs(60))
                    .await
                    .map(|d| (d.partition, d.offset))
                    .map_err(|(e, _)| e.to_string());
                if let Some(span) = span {
                    crate::trace::sink::end_dead_letter(span, sent.clone());
                }
                sent.map_err(|e| (topic.clone(), e))
            });
        }
        // Every DLQ record must be acknowledged before the batch's offsets are committed.
        for r in futures::future::join_all(sends).await {
            if let Err((topic, message)) = r {
                return Err(ConnectorError::Dlq {
                    name: self.cfg.name.clone(),
                    topic,
                    message,
                });
            }
        }
        self.metrics
            .dlq_records
            .with_label_values(&[&self.cfg.name])
            .inc_by(dead.len() as u64);
        Ok(())
    }

    /// Commits asynchronously: a lost commit only replays records the sink already holds.
    fn commit(&self, offsets: &Offsets) {
        if let Err(e) = self
            .consumer
            .commit(&offset_list(offsets), CommitMode::Async)
        {
            tracing::warn!(connector = %self.cfg.name, error = %e, "offset commit failed");
            self.metrics
                .errors
                .with_label_values(&[&self.cfg.name, "commit"])
                .inc();
        }
    }
}

/// A consumed record and its decoding (parsing the JSON is most of the connector's CPU time).
struct Decoded {
    rec: RawRecord,
    op: Result<Op, RecordError>,
    /// The rule of the record's registry schema (`schema_mapping = "registry"`).
    declared: Option<Arc<Declared>>,
    /// The record's trace context, read from its headers only when tracing is on.
    trace: Option<SpanContext>,
}

/// Consumes and decodes batches ahead of the loop that writes them.
struct Feeder {
    consumer: Arc<StreamConsumer<LagContext>>,
    cfg: ConnectorConfig,
    metrics: Metrics,
    embedding: Arc<std::collections::HashMap<String, crate::embedding::EmbeddingSpec>>,
    /// Whether to read records' trace headers (a tracer is configured).
    traced: bool,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Feeder {
    /// Until shutdown, or until the loop is gone (`tx` closed).
    async fn run(
        self,
        tx: tokio::sync::mpsc::Sender<Vec<Decoded>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let id_mode = self.cfg.sink.id_mode();
        let sink = &self.cfg.sink;
        let mut registry =
            (sink.schema_mapping == SchemaMapping::Registry).then(|| Registry::new(sink));
        while let Some(batch) = self.next_batch(&mut shutdown).await {
            let mut decoded = Vec::with_capacity(batch.len());
            for (rec, trace) in batch {
                let (mut op, declared) = match registry.as_mut() {
                    None => (decode(&rec, &sink.embedding_field, &id_mode), None),
                    Some(r) => match self.through_registry(r, &rec, &mut shutdown).await {
                        Some(Ok((op, d))) => (Ok(op), d),
                        Some(Err(e)) => (Err(e), None),
                        None => return,
                    },
                };
                // The topic's embedding rules, as the broker applies them at produce.
                if let (Ok(Op::Upsert(doc)), Some(spec)) = (&op, self.embedding.get(&rec.topic)) {
                    if let Err(e) = spec.check(&doc.vector) {
                        op = Err(RecordError::BadVector {
                            field: sink.embedding_field.clone(),
                            reason: e.to_string(),
                        });
                    }
                }
                if let (Ok(o), Some(mode)) = (&mut op, sink.multi_tenancy) {
                    match tenant_of(&rec, mode, &sink.tenant_separator) {
                        Ok(t) => o.set_tenant(Some(t)),
                        Err(e) => op = Err(e),
                    }
                }
                decoded.push(Decoded {
                    rec,
                    op,
                    declared,
                    trace,
                });
            }
            if tx.send(decoded).await.is_err() {
                return;
            }
        }
    }

    /// Decodes `rec` through the schema registry, waiting out a registry that does not answer
    /// (the records wait, nothing goes to the DLQ for it). None when shutting down.
    async fn through_registry(
        &self,
        registry: &mut Registry,
        rec: &RawRecord,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<Result<(Op, Option<Arc<Declared>>), RecordError>> {
        let mut attempt = 0;
        loop {
            match registry.decode(rec).await {
                Ok(d) => return Some(Ok(d)),
                Err(Failure::Record(e)) => return Some(Err(e)),
                Err(Failure::Unavailable(e)) => {
                    attempt += 1;
                    tracing::warn!(connector = %self.cfg.name, error = %e, attempt, "schema registry unavailable; retrying");
                    self.metrics
                        .errors
                        .with_label_values(&[&self.cfg.name, "schema_registry"])
                        .inc();
                    let pause = backoff(self.cfg.sink.retry_backoff_ms, attempt);
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = shutdown.changed() => return None,
                    }
                    if *shutdown.borrow() {
                        return None;
                    }
                }
            }
        }
    }

    /// Up to `batch_size` records: waits for the first, then at most `linger_ms` for more.
    /// None when shutting down.
    async fn next_batch(
        &self,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<Vec<(RawRecord, Option<SpanContext>)>> {
        let max = self.cfg.sink.batch_size;
        let mut batch = Vec::with_capacity(max);
        let mut deadline: Option<tokio::time::Instant> = None;
        while batch.len() < max {
            let recv = async {
                match deadline {
                    Some(d) => tokio::time::timeout_at(d, self.consumer.recv()).await.ok(),
                    None => Some(self.consumer.recv().await),
                }
            };
            let got = tokio::select! {
                r = recv => r,
                _ = shutdown.changed() => return None,
            };
            match got {
                None => break, // linger elapsed
                Some(Ok(m)) => {
                    let trace = if self.traced {
                        m.headers().and_then(|h| {
                            crate::trace::context::of_headers(
                                h.iter().map(|h| (h.key.as_bytes(), h.value)),
                            )
                        })
                    } else {
                        None
                    };
                    let rec = RawRecord {
                        topic: m.topic().to_string(),
                        partition: m.partition(),
                        offset: m.offset(),
                        key: m.key().map(<[u8]>::to_vec),
                        value: m.payload().map(<[u8]>::to_vec),
                        timestamp_ms: m.timestamp().to_millis(),
                    };
                    batch.push((rec, trace));
                    if deadline.is_none() {
                        deadline = Some(
                            tokio::time::Instant::now()
                                + Duration::from_millis(self.cfg.sink.linger_ms),
                        );
                    }
                }
                Some(Err(e)) => {
                    // librdkafka retries connections itself; these are reports, not ends.
                    tracing::warn!(connector = %self.cfg.name, error = %e, "consume error");
                    self.metrics
                        .errors
                        .with_label_values(&[&self.cfg.name, "consume"])
                        .inc();
                    if batch.is_empty() {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
            if *shutdown.borrow() {
                return None;
            }
        }
        Some(batch)
    }
}

fn offset_list(offsets: &Offsets) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for ((topic, partition), &next) in offsets {
        if let Err(e) = tpl.add_partition_offset(topic, *partition, Offset::Offset(next)) {
            tracing::warn!(error = %e, "bad offset in commit");
        }
    }
    tpl
}

/// Connects to the sink, retrying transient failures (the database may start after us).
async fn connect_sink(cfg: &ConnectorConfig, metrics: &Metrics) -> Result<Sink, ConnectorError> {
    let mut attempt = 0;
    loop {
        match Sink::connect(cfg).await {
            Ok(s) => return Ok(s),
            Err(e) if e.is_transient() && attempt + 1 < cfg.sink.max_attempts => {
                attempt += 1;
                let delay = backoff(cfg.sink.retry_backoff_ms, attempt);
                tracing::warn!(connector = %cfg.name, attempt, ?delay, error = %e, "sink connect failed; retrying");
                metrics
                    .errors
                    .with_label_values(&[&cfg.name, "sink_connect"])
                    .inc();
                tokio::time::sleep(delay).await;
            }
            Err(source) => {
                return Err(ConnectorError::Sink {
                    name: cfg.name.clone(),
                    sink: cfg.sink.kind.as_str(),
                    source,
                })
            }
        }
    }
}

/// `first * 2^(attempt-1)`, capped at 10 s.
pub fn backoff(first_ms: u64, attempt: u32) -> Duration {
    let ms = first_ms.saturating_mul(1u64 << attempt.saturating_sub(1).min(20));
    Duration::from_millis(ms.min(10_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_attempts_then_backoff_doubles_and_caps() {
        assert_eq!(backoff(100, 1), Duration::from_millis(100));
        assert_eq!(backoff(100, 2), Duration::from_millis(200));
        assert_eq!(backoff(100, 4), Duration::from_millis(800));
        assert_eq!(backoff(100, 30), Duration::from_secs(10));
    }
}
