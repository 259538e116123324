//! The sinks behind one interface. A sink opens (or later creates) its collection, writes
//! batches of upserts and deletes, and reports per-record rejections separately from
//! whole-batch failures so one bad record goes to the DLQ instead of stopping the pipeline.

pub mod chroma;
pub mod http;
pub mod milvus;
pub mod pgvector;
pub mod pinecone;
pub mod qdrant;
pub mod weaviate;

use std::collections::BTreeMap;

use crate::config::{ConnectorConfig, SinkType};
use crate::record::{FieldType, Fields, Op, Schema};

/// Next offset to consume per (topic, partition): what a batch's commit records.
pub type Offsets = BTreeMap<(String, i32), i64>;

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Worth retrying: connection lost, timeout, server overloaded or restarting.
    #[error("transient: {0}")]
    Transient(String),
    /// The server refused the whole batch for a reason a retry won't fix.
    #[error("rejected: {0}")]
    Permanent(String),
    /// The collection exists but does not fit the records; the connector stops.
    #[error("collection does not match the records: {0}")]
    Schema(String),
}

impl SinkError {
    pub fn is_transient(&self) -> bool {
        matches!(self, SinkError::Transient(_))
    }
}

/// A per-record rejection: the index into the batch's ops and the server's reason.
pub type Rejections = Vec<(usize, String)>;

pub enum Sink {
    Pgvector(pgvector::PgSink),
    Chroma(chroma::ChromaSink),
    Weaviate(weaviate::WeaviateSink),
    Pinecone(pinecone::PineconeSink),
    Milvus(milvus::MilvusSink),
    Qdrant(qdrant::QdrantSink),
}

impl Sink {
    /// Connects and reads the collection's schema if it exists.
    pub async fn connect(cfg: &ConnectorConfig) -> Result<Sink, SinkError> {
        Ok(match cfg.sink.kind {
            SinkType::Pgvector => Sink::Pgvector(pgvector::PgSink::connect(cfg).await?),
            SinkType::Chroma => Sink::Chroma(chroma::ChromaSink::connect(cfg).await?),
            SinkType::Weaviate => Sink::Weaviate(weaviate::WeaviateSink::connect(cfg).await?),
            SinkType::Pinecone => Sink::Pinecone(pinecone::PineconeSink::connect(cfg).await?),
            SinkType::Milvus => Sink::Milvus(milvus::MilvusSink::connect(cfg).await?),
            SinkType::Qdrant => Sink::Qdrant(qdrant::QdrantSink::connect(cfg).await?),
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Sink::Pgvector(_) => "pgvector",
            Sink::Chroma(_) => "chroma",
            Sink::Weaviate(_) => "weaviate",
            Sink::Pinecone(_) => "pinecone",
            Sink::Milvus(_) => "milvus",
            Sink::Qdrant(_) => "qdrant",
        }
    }

    /// How the collection holds scalar fields: what a record is checked against.
    pub fn fields(&self) -> Fields {
        match self {
            Sink::Pgvector(_) => Fields::Closed,
            Sink::Milvus(_) | Sink::Weaviate(_) => Fields::Typed,
            Sink::Chroma(_) | Sink::Pinecone(_) | Sink::Qdrant(_) => Fields::Free,
        }
    }

    /// Whether a field the collection lacks is added to it ([`Sink::add_fields`]): the sinks
    /// with declared columns or properties. Milvus keeps undeclared fields in its dynamic
    /// field, Chroma and Pinecone have schemaless metadata.
    pub fn evolves(&self) -> bool {
        matches!(self, Sink::Pgvector(_) | Sink::Weaviate(_))
    }

    /// Schema evolution: adds `new` (fields the collection lacks) as nullable columns /
    /// properties; returns the collection's schema after it.
    pub async fn add_fields(
        &mut self,
        new: &BTreeMap<String, FieldType>,
    ) -> Result<Schema, SinkError> {
        match self {
            Sink::Pgvector(s) => s.add_fields(new).await,
            Sink::Weaviate(s) => s.add_fields(new).await,
            Sink::Chroma(_) | Sink::Pinecone(_) | Sink::Milvus(_) | Sink::Qdrant(_) => Err(
                SinkError::Permanent(format!("the {} sink adds no fields", self.name())),
            ),
        }
    }

    /// The collection's schema, if it exists and says (Chroma knows its dimension only once
    /// it holds a vector).
    pub fn existing_schema(&self) -> Option<&Schema> {
        match self {
            Sink::Pgvector(s) => s.schema(),
            Sink::Chroma(s) => s.schema(),
            Sink::Weaviate(s) => s.schema(),
            Sink::Pinecone(s) => s.schema(),
            Sink::Milvus(s) => s.schema(),
            Sink::Qdrant(s) => s.schema(),
        }
    }

    /// Offsets the sink stored with its data (pgvector, in the same transaction), to resume
    /// from; empty for sinks without transactions (they rely on the group's commits).
    pub fn stored_offsets(&self) -> Offsets {
        match self {
            Sink::Pgvector(s) => s.stored_offsets().clone(),
            Sink::Chroma(_)
            | Sink::Weaviate(_)
            | Sink::Pinecone(_)
            | Sink::Milvus(_)
            | Sink::Qdrant(_) => Offsets::new(),
        }
    }

    /// Creates the collection for `wanted`, or checks the existing one against it; returns
    /// the schema records are checked against from now on.
    pub async fn prepare(&mut self, wanted: &Schema) -> Result<Schema, SinkError> {
        if let Some(existing) = self.existing_schema().cloned() {
            let strict = self.fields() == Fields::Closed && !self.evolves();
            let diffs = mismatches(&existing, wanted, strict);
            if !diffs.is_empty() {
                return Err(SinkError::Schema(diffs.join("; ")));
            }
            let missing: BTreeMap<String, FieldType> = wanted
                .fields
                .iter()
                .filter(|(k, _)| !existing.fields.contains_key(*k))
                .map(|(k, &t)| (k.clone(), t))
                .collect();
            if self.evolves() && !missing.is_empty() {
                return self.add_fields(&missing).await;
            }
            return Ok(existing);
        }
        match self {
            Sink::Pgvector(s) => s.create(wanted).await,
            Sink::Chroma(s) => s.create(wanted).await,
            Sink::Weaviate(s) => s.create(wanted).await,
            Sink::Pinecone(s) => s.create(wanted).await,
            Sink::Milvus(s) => s.create(wanted).await,
            Sink::Qdrant(s) => s.create(wanted).await,
        }
    }

    /// Applies `ops` in order; `offsets` (when given) are stored atomically with them by sinks
    /// with transactions.
    pub async fn write(
        &mut self,
        ops: &[Op],
        offsets: Option<&Offsets>,
    ) -> Result<Rejections, SinkError> {
        match self {
            Sink::Pgvector(s) => s.write(ops, offsets).await,
            Sink::Chroma(s) => s.write(ops).await,
            Sink::Weaviate(s) => s.write(ops).await,
            Sink::Pinecone(s) => s.write(ops).await,
            Sink::Milvus(s) => s.write(ops).await,
            Sink::Qdrant(s) => s.write(ops).await,
        }
    }

    /// Objects in the collection (for tests and the benchmark).
    pub async fn count(&mut self) -> Result<u64, SinkError> {
        match self {
            Sink::Pgvector(s) => s.count().await,
            Sink::Chroma(s) => s.count().await,
            Sink::Weaviate(s) => s.count().await,
            Sink::Pinecone(s) => s.count().await,
            Sink::Milvus(s) => s.count().await,
            Sink::Qdrant(s) => s.count().await,
        }
    }

    /// Every object's id and vector: for verification (the end-to-end tests, the benchmark),
    /// not for large collections.
    pub async fn all_vectors(&mut self) -> Result<Vec<(String, Vec<f32>)>, SinkError> {
        match self {
            Sink::Pgvector(s) => s.all_vectors().await,
            Sink::Chroma(s) => s.all_vectors().await,
            Sink::Weaviate(s) => s.all_vectors().await,
            Sink::Pinecone(s) => s.all_vectors().await,
            Sink::Milvus(s) => s.all_vectors().await,
            Sink::Qdrant(s) => s.all_vectors().await,
        }
    }

    /// Ids of the `k` nearest objects to `vector` under the collection's metric.
    pub async fn nearest(&mut self, vector: &[f32], k: usize) -> Result<Vec<String>, SinkError> {
        match self {
            Sink::Pgvector(s) => s.nearest(vector, k).await,
            Sink::Chroma(s) => s.nearest(vector, k).await,
            Sink::Weaviate(s) => s.nearest(vector, k).await,
            Sink::Pinecone(s) => s.nearest(vector, k).await,
            Sink::Milvus(s) => s.nearest(vector, k).await,
            Sink::Qdrant(s) => s.nearest(vector, k).await,
        }
    }
}

/// The ops in maximal runs of one kind (upserts or deletes), in order, each at most `max`
/// long, with the index of its first op: sinks that write each kind in its own request keep
/// the stream's order this way.
pub(crate) fn runs(ops: &[Op], max: usize) -> Vec<(usize, &[Op])> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < ops.len() {
        let upsert = matches!(ops[i], Op::Upsert(_));
        let mut j = i;
        while j < ops.len() && j - i < max && matches!(ops[j], Op::Upsert(_)) == upsert {
            j += 1;
        }
        out.push((i, &ops[i..j]));
        i = j;
    }
    out
}

/// The last op of each id, in order: one request must not name an id twice.
pub(crate) fn dedup_last(ops: &[Op]) -> Vec<&Op> {
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<&Op> = ops.iter().rev().filter(|o| seen.insert(o.id())).collect();
    out.reverse();
    out
}

/// Every way `existing` fails to hold documents of `wanted`, in words.
pub fn mismatches(existing: &Schema, wanted: &Schema, strict: bool) -> Vec<String> {
    let mut out = Vec::new();
    if existing.dimension != wanted.dimension {
        out.push(format!(
            "dimension mismatch: the collection's vectors have {} dimensions, the records {}",
            existing.dimension, wanted.dimension
        ));
    }
    for (name, &got) in &wanted.fields {
        match existing.fields.get(name) {
            Some(&have) if !have.accepts(got) => out.push(format!(
                "type conflict: field `{name}` is {} in the collection, {} in the records",
                have.name(),
                got.name()
            )),
            None if strict => out.push(format!("the collection has no field `{name}`")),
            _ => {}
        }
    }
    out
}

/// Maps an HTTP failure to transient (connection trouble, 408, 429, 5xx) or permanent.
pub(crate) fn http_error(
    what: &str,
    status: Option<reqwest::StatusCode>,
    body: String,
) -> SinkError {
    match status {
        None => SinkError::Transient(format!("{what}: {body}")),
        Some(s) if s.is_server_error() || s.as_u16() == 408 || s.as_u16() == 429 => {
            SinkError::Transient(format!("{what}: HTTP {s}: {body}"))
        }
        Some(s) => SinkError::Permanent(format!("{what}: HTTP {s}: {body}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(dim: usize, fields: &[(&str, FieldType)]) -> Schema {
        Schema {
            dimension: dim,
            fields: fields.iter().map(|(k, t)| (k.to_string(), *t)).collect(),
        }
    }

    #[test]
    fn given_mismatching_collection_then_every_difference_said() {
        let have = schema(768, &[("title", FieldType::Int)]);
        let want = schema(
            384,
            &[("title", FieldType::Text), ("lang", FieldType::Text)],
        );
        let d = mismatches(&have, &want, true).join("; ");
        assert!(d.contains("768 dimensions, the records 384"), "{d}");
        assert!(
            d.contains("field `title` is integer in the collection, text in the records"),
            "{d}"
        );
        assert!(d.contains("no field `lang`"), "{d}");
        assert_eq!(
            mismatches(&have, &schema(768, &[]), true),
            Vec::<String>::new()
        );
    }

    #[test]
    fn given_mixed_ops_then_runs_keep_order_and_dedup_keeps_the_last() {
        use crate::record::Doc;
        let up = |id: &str, x: f32| {
            Op::Upsert(Doc {
                id: id.into(),
                vector: vec![x],
                fields: Default::default(),
                tenant: None,
            })
        };
        let ops = [
            up("a", 1.0),
            up("b", 2.0),
            up("a", 3.0),
            Op::Delete("a".into(), None),
            up("c", 4.0),
        ];
        let r = runs(&ops, 2);
        let shape: Vec<(usize, usize)> = r.iter().map(|(i, run)| (*i, run.len())).collect();
        assert_eq!(shape, vec![(0, 2), (2, 1), (3, 1), (4, 1)]);
        assert_eq!(dedup_last(&ops[..3]), vec![&ops[1], &ops[2]]);
    }

    #[test]
    fn given_http_statuses_then_transient_or_permanent() {
        use reqwest::StatusCode as S;
        for (status, transient) in [
            (None, true),
            (Some(S::SERVICE_UNAVAILABLE), true),
            (Some(S::TOO_MANY_REQUESTS), true),
            (Some(S::REQUEST_TIMEOUT), true),
            (Some(S::BAD_REQUEST), false),
            (Some(S::UNPROCESSABLE_ENTITY), false),
        ] {
            assert_eq!(
                http_error("x", status, String::new()).is_transient(),
                transient,
                "{status:?}"
            );
        }
    }
}
