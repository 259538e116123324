//! Milvus over its gRPC API, with the official Rust SDK (`milvus-sdk-rust`, ClientV2).
//!
//! The collection is `id` (VarChar primary key holding our deterministic ids), the vector
//! field (named after `embedding_field`, FloatVector of the records' dimension), one nullable
//! typed field per scalar field of the first record, and Milvus's dynamic field (`$meta`, a
//! JSON object) for every other field: later records may carry new fields, but a field the
//! collection types must keep its type. An HNSW index for `metric` is built and the collection
//! loaded, so it is searchable from the first write.
//!
//! Milvus has no transactions: like Chroma, the Kafka group's commit (made only after Milvus
//! acknowledged the batch) is the resume point, and upserts by id make the re-sent tail an
//! overwrite. `consistency_level` becomes the collection's default consistency level; the
//! verification reads (count, all_vectors, nearest) ask for Strong.

use std::collections::HashMap;
use std::time::Duration;

use milvus::v2::prelude::{
    ClientV2, CollectionSchema, ConnectConfig, ConsistencyLevel, CreateCollectionRequest,
    CreateIndexRequest, DataType, DeleteRequest, DescribeCollectionRequest, DescribeIndexRequest,
    FieldData, FieldSchema, HasCollectionRequest, Ids, IndexParam, IndexStateCode, IndexType,
    InsertRequest, LoadCollectionRequest, MetricType, QueryRequest, RetryConfig, SearchRequest,
    SearchVectors, TelemetryConfig, UpsertRequest,
};
pub mod names;
mod schema;

use names::ID_FIELD;
pub use names::{consistency_level, typed_field_name, valid_name};
use schema::MAX_VARCHAR;
pub use schema::{columns, data_type, field_type, quote, schema_of, unstorable};

use super::{dedup_last, runs, Rejections, SinkError};
use crate::config::{ConnectorConfig, Metric};
use crate::record::{FieldType, Op, Schema};

/// Rows per read page for `all_vectors`.
const PAGE: usize = 1000;

pub struct MilvusSink {
    client: ClientV2,
    collection: String,
    vector_field: String,
    metric: Metric,
    consistency: Option<ConsistencyLevel>,
    /// The collection's schema once it exists (Milvus fixes the dimension at creation).
    schema: Option<Schema>,
}

fn metric_type(m: Metric) -> MetricType {
    match m {
        Metric::Cosine => MetricType::Cosine,
        Metric::L2 => MetricType::L2,
        Metric::Ip => MetricType::Ip,
    }
}

/// Milvus status codes (`Status.code`, milvus pkg/util/merr) worth retrying: service not
/// ready or unavailable, memory/disk/quota limits, request and rate limits, time-tick lag,
/// resources short, collection or partition still loading or recovering, replica or channel
/// not available, unexpected EOF, the REST rate limiter, an inconsistent requery, and the
/// canceled/timeout codes.
const TRANSIENT_CODES: &[i32] = &[
    2, 3, 4, 7, 8, 9, 11, 12, 103, 106, 202, 305, 401, 503, 1002, 1807, 2200, 10000, 10001,
];
/// Legacy `Status.error_code` values (common.proto ErrorCode) worth retrying: NotShardLeader,
/// NoReplicaAvailable, RateLimit, InsufficientMemoryToLoad, Memory/DiskQuotaExhausted,
/// TimeTickLongDelay, NotReadyServe, NotReadyCoordActivating, DdRequestRace. (Code 1,
/// UnexpectedError, is milvus-lite's answer to any failed request, and Milvus's merr code 1
/// "service not ready" comes with the legacy NotReadyServe: 1 alone is not retried.)
const TRANSIENT_LEGACY: &[i32] = &[45, 46, 49, 52, 53, 54, 55, 56, 57, 1000];

/// Whether a server status is worth retrying.
pub fn transient_status(code: i32, legacy: i32) -> bool {
    TRANSIENT_CODES.contains(&code) || TRANSIENT_LEGACY.contains(&legacy)
}

/// Whether a gRPC status is worth retrying: the connection or the server is in trouble
/// (unavailable, overloaded, timed out, aborted, cancelled, unknown transport failures);
/// not a request the server understood and refused.
pub fn transient_grpc(code: tonic::Code) -> bool {
    use tonic::Code;
    matches!(
        code,
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::ResourceExhausted
            | Code::Aborted
            | Code::Cancelled
            | Code::Unknown
    )
}

/// Maps an SDK error to transient (retried with backoff) or permanent.
pub fn milvus_error(what: &str, e: milvus::v2::error::Error) -> SinkError {
    use milvus::v2::error::Error as E;
    let transient = match &e {
        E::Grpc(status) => transient_grpc(status.code()),
        E::Server(s) => transient_status(s.code(), s.legacy_code()),
        E::Timeout(_) | E::Cancelled(_) => true,
        E::RetryExhausted { source, .. } => milvus_error(what, (**source).clone()).is_transient(),
        _ => false,
    };
    let msg = format!("{what}: {e}");
    if transient {
        SinkError::Transient(msg)
    } else {
        SinkError::Permanent(msg)
    }
}

fn request<T>(what: &str, r: milvus::v2::error::Result<T>) -> Result<T, SinkError> {
    r.map_err(|e| milvus_error(what, e))
}

/// `call!(sink, method, Request.setter(args)...)`: builds `Request` for the sink's collection
/// with the setters given and sends it with `method`; the SDK's result, unclassified (callers
/// match some server errors before [`request`] classifies the rest).
macro_rules! call {
    ($sink:expr, $method:ident, $req:ident $(.$m:ident($($a:expr),*))*) => {
        async {
            let r = $req::builder()
                .collection_name(&$sink.collection)
                $(.$m($($a),*))*
                .build()?;
            $sink.client.$method(r).await
        }
    };
}

impl MilvusSink {
    pub async fn connect(cfg: &ConnectorConfig) -> Result<MilvusSink, SinkError> {
        let s = &cfg.sink;
        let mut config = ConnectConfig::new()
            .uri(s.url.clone())
            .connect_timeout(Duration::from_secs(10))
            .rpc_timeout(Duration::from_secs(60))
            // The runner retries with its own backoff and attempt budget, and upserts by id are
            // safe to repeat: one attempt per call here.
            .retry(RetryConfig::new().max_attempts(1))
            // No client heartbeats to the server: nothing for a sink to report.
            .telemetry(TelemetryConfig::new().enabled(false));
        if let Some(token) = &s.api_key {
            config = config.token(token.clone());
        }
        let client = request("connect", ClientV2::new(&config).await)?;
        let mut sink = MilvusSink {
            client,
            collection: s.collection.clone(),
            vector_field: s.embedding_field.clone(),
            metric: s.metric,
            consistency: s.consistency_level.as_deref().and_then(consistency_level),
            schema: None,
        };
        sink.schema = sink.read_schema().await?;
        if sink.schema.is_some() {
            sink.ensure_index_and_load().await?;
        }
        Ok(sink)
    }

    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    /// The collection's schema, or None when it does not exist. Errors when it exists but
    /// cannot hold the records at all (no VarChar `id` primary key, no FloatVector field
    /// named like `embedding_field`).
    async fn read_schema(&self) -> Result<Option<Schema>, SinkError> {
        let has = request(
            "has collection",
            call!(self, has_collection, HasCollectionRequest).await,
        )?;
        if !has.exists() {
            return Ok(None);
        }
        let d = request(
            "describe collection",
            call!(self, describe_collection, DescribeCollectionRequest).await,
        )?;
        schema_of(
            &self.collection,
            &self.vector_field,
            d.description().get_schema().get_fields(),
        )
        .map(Some)
    }

    /// An existing collection needs a vector index of the configured metric and to be loaded
    /// before it can be searched; a collection made by someone else may lack either.
    async fn ensure_index_and_load(&self) -> Result<(), SinkError> {
        match self.describe_index().await {
            Ok(d) => {
                let want = metric_type(self.metric);
                if let Some(idx) = d.indexes().first() {
                    let have = idx.get_metric_type();
                    if have != want {
                        return Err(SinkError::Schema(format!(
                            "collection {}: the vector index uses the {have:?} metric, the config says metric = {want:?}",
                            self.collection
                        )));
                    }
                } else {
                    self.create_index().await?;
                }
            }
            // No index yet (Milvus: code 700 / legacy IndexNotExist 25; milvus-lite: 700 / 11).
            Err(milvus::v2::error::Error::Server(s))
                if s.code() == 700 || s.legacy_code() == 25 || s.legacy_code() == 11 =>
            {
                self.create_index().await?
            }
            Err(e) => return Err(milvus_error("describe index", e)),
        }
        request(
            "load collection",
            call!(self, load_collection, LoadCollectionRequest).await,
        )
    }

    async fn describe_index(
        &self,
    ) -> milvus::v2::error::Result<milvus::v2::prelude::DescribeIndexResponse> {
        call!(
            self,
            describe_index,
            DescribeIndexRequest.field_name(&self.vector_field)
        )
        .await
    }

    async fn create_index(&self) -> Result<(), SinkError> {
        // HNSW, as the other sinks' indexes (pgvector, Chroma): M = 16, efConstruction = 200.
        let index = IndexParam::new()
            .field_name(&self.vector_field)
            .index_type(IndexType::Hnsw)
            .metric_type(metric_type(self.metric))
            .extra_params(HashMap::from([
                ("M".to_string(), "16".to_string()),
                ("efConstruction".to_string(), "200".to_string()),
            ]));
        // The SDK's own wait (sync) starts with AllocTimestamp, which milvus-lite lacks: we
        // poll the index state ourselves.
        let r = call!(
            self,
            create_index,
            CreateIndexRequest.index_param(index).sync(false)
        );
        match r.await {
            Ok(()) => {}
            // Another connector built it first (Milvus: IndexDuplicate 702; milvus-lite:
            // IndexAlreadyExists 35): the metric is checked on the next connect.
            Err(milvus::v2::error::Error::Server(s)) if s.code() == 702 || s.code() == 35 => {}
            Err(e) => return Err(milvus_error("create index", e)),
        }
        // Bounded: an index on a new (empty) collection is built at once; one on a collection
        // holding data takes its time, and the runner retries a transient timeout.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let d = request("describe index", self.describe_index().await)?;
            match d
                .indexes()
                .first()
                .map(|i| (i.get_state(), i.get_failure_reason()))
            {
                Some((IndexStateCode::Finished, _)) => return Ok(()),
                Some((IndexStateCode::Failed, why)) => {
                    return Err(SinkError::Permanent(format!("index build failed: {why}")))
                }
                _ if tokio::time::Instant::now() >= deadline => {
                    return Err(SinkError::Transient(
                        "the vector index is not built after 120 s".into(),
                    ))
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    pub async fn create(&mut self, wanted: &Schema) -> Result<Schema, SinkError> {
        let mut schema = CollectionSchema::new()
            .enable_dynamic_field(true)
            .add_field(
                FieldSchema::new()
                    .name(ID_FIELD)
                    .data_type(DataType::VarChar)
                    .max_length(MAX_VARCHAR as u32)
                    .primary_key(true)
                    .auto_id(false),
            )
            .add_field(
                FieldSchema::new()
                    .name(&self.vector_field)
                    .data_type(DataType::FloatVector)
                    .dimension(wanted.dimension as u32),
            );
        for (name, &t) in &wanted.fields {
            if !typed_field_name(name, &self.vector_field) {
                continue; // into the dynamic field
            }
            let mut f = FieldSchema::new()
                .name(name)
                .data_type(data_type(t))
                // Records may lack a field the first one had.
                .nullable(true);
            if t == FieldType::Text {
                f = f.max_length(MAX_VARCHAR as u32);
            }
            schema = schema.add_field(f);
        }
        let mut req = CreateCollectionRequest::builder()
            .collection_name(&self.collection)
            .schema(schema);
        if let Some(level) = self.consistency {
            req = req.consistency_level(level);
        }
        let created = self
            .client
            .create_collection(
                req.build()
                    .map_err(|e| milvus_error("create collection", e))?,
            )
            .await;
        if let Err(e) = created {
            // A concurrent creator may have won: read back what is there.
            if self.read_schema().await?.is_none() {
                return Err(milvus_error("create collection", e));
            }
        } else {
            tracing::info!(collection = %self.collection, dimension = wanted.dimension, "created milvus collection");
        }
        let schema = self
            .read_schema()
            .await?
            .ok_or_else(|| SinkError::Transient("collection vanished after create".into()))?;
        let diffs = super::mismatches(&schema, wanted, false);
        if !diffs.is_empty() {
            return Err(SinkError::Schema(diffs.join("; ")));
        }
        self.ensure_index_and_load().await?;
        self.schema = Some(schema.clone());
        Ok(schema)
    }

    pub async fn write(&mut self, ops: &[Op]) -> Result<Rejections, SinkError> {
        let Some(schema) = self.schema.clone() else {
            // Only deletes so far, and no collection: nothing to delete.
            return Ok(Vec::new());
        };
        let mut rejected = Vec::new();
        // Runs of one kind, in order, so a delete after an upsert of one id still wins.
        for (start, run) in runs(ops, usize::MAX) {
            if matches!(run[0], Op::Upsert(_)) {
                let mut docs = Vec::with_capacity(run.len());
                for (i, op) in run.iter().enumerate() {
                    let Op::Upsert(d) = op else { continue };
                    match unstorable(&schema, d) {
                        Some(why) => rejected.push((start + i, why)),
                        None => docs.push(d),
                    }
                }
                // One request must not name an id twice: the last of each id wins.
                let mut seen = std::collections::HashSet::new();
                let mut last: Vec<_> = docs
                    .into_iter()
                    .rev()
                    .filter(|d| seen.insert(&d.id))
                    .collect();
                last.reverse();
                if last.is_empty() {
                    continue;
                }
                let columns = columns(&schema, &self.vector_field, &last)?;
                let upsert = async {
                    let insert = InsertRequest::builder()
                        .collection_name(&self.collection)
                        .columns(columns)
                        .build()?;
                    let r = UpsertRequest::builder().insert(insert).build()?;
                    self.client.upsert(r).await
                };
                request("upsert", upsert.await)?;
            } else {
                let ids: Vec<String> = dedup_last(run).iter().map(|o| quote(o.id())).collect();
                let filter = format!("{ID_FIELD} in [{}]", ids.join(", "));
                request(
                    "delete",
                    call!(self, delete, DeleteRequest.filter(filter)).await,
                )?;
            }
        }
        Ok(rejected)
    }

    pub async fn count(&mut self) -> Result<u64, SinkError> {
        let count = call!(
            self,
            query,
            QueryRequest
                .output_fields(["count(*)"])
                .consistency_level(ConsistencyLevel::Strong)
        );
        let r = request("count", count.await)?;
        match r.results().get_output_field("count(*)") {
            Some(FieldData::Int64 { values, .. }) if values.len() == 1 => Ok(values[0] as u64),
            other => Err(SinkError::Permanent(format!(
                "count: unexpected answer {other:?}"
            ))),
        }
    }

    pub async fn all_vectors(&mut self) -> Result<Vec<(String, Vec<f32>)>, SinkError> {
        // Pages in id order with `id > last` as the cursor, as the SDK's query iterator does
        // (`iterator=true` asks Milvus, and milvus-lite, for primary-key order); no offset,
        // which Milvus bounds (offset + limit <= 16384). The SDK's iterator itself needs the
        // collection id, which milvus-lite does not report.
        let mut out = Vec::new();
        let mut filter = format!("{ID_FIELD} != \"\"");
        loop {
            let page = call!(
                self,
                query,
                QueryRequest
                    .filter(&filter)
                    .output_fields([ID_FIELD, self.vector_field.as_str()])
                    .limit(PAGE as i64)
                    .extra_params(HashMap::from([("iterator".into(), "true".into())]))
                    .consistency_level(ConsistencyLevel::Strong)
            );
            let r = request("read vectors", page.await)?;
            let ids = match r.results().get_output_field(ID_FIELD) {
                Some(FieldData::VarChar { values, .. }) => values.clone(),
                _ => Vec::new(),
            };
            let vectors = match r.results().get_output_field(&self.vector_field) {
                Some(FieldData::FloatVector { values, .. }) => values.clone(),
                _ => Vec::new(),
            };
            if ids.is_empty() {
                return Ok(out);
            }
            if ids.len() != vectors.len() {
                return Err(SinkError::Permanent(format!(
                    "read vectors: {} ids but {} vectors",
                    ids.len(),
                    vectors.len()
                )));
            }
            // The cursor skips everything up to the page's last id: a page out of order would
            // skip rows silently.
            if ids.windows(2).any(|w| w[0] >= w[1]) {
                return Err(SinkError::Permanent(
                    "read vectors: the server returned a page out of primary-key order".into(),
                ));
            }
            let max = ids.last().cloned().unwrap_or_default();
            let n = ids.len();
            out.extend(ids.into_iter().zip(vectors));
            if n < PAGE {
                return Ok(out);
            }
            filter = format!("{ID_FIELD} > {}", quote(&max));
        }
    }

    pub async fn nearest(&mut self, vector: &[f32], k: usize) -> Result<Vec<String>, SinkError> {
        // A wide HNSW search (ef well above k): after a replay has upserted every id again the
        // graph holds many replaced nodes (the Chroma sink found missed neighbours that way).
        let ef = (k * 20).max(200);
        let search = call!(
            self,
            search,
            SearchRequest
                .vector_field(&self.vector_field)
                .vectors(SearchVectors::Float(vec![vector.to_vec()]))
                .limit(k as i64)
                .metric_type(metric_type(self.metric))
                .extra_params(HashMap::from([("ef".into(), ef.to_string())]))
                .consistency_level(ConsistencyLevel::Strong)
        );
        let r = request("search", search.await)?;
        let Some(hits) = r.results().iter().next() else {
            return Ok(Vec::new());
        };
        Ok(match hits.get_ids() {
            Ids::VarChar(ids) => ids.clone(),
            Ids::Int64(ids) => ids.iter().map(i64::to_string).collect(),
            other => {
                return Err(SinkError::Permanent(format!(
                    "search: unexpected ids {other:?}"
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_milvus_errors_then_transient_or_permanent() {
        use milvus::proto::common::Status;
        use milvus::v2::error::Error as E;
        let server = |code: i32, legacy: i32| {
            #[allow(deprecated)]
            E::from(Status {
                code,
                error_code: legacy,
                reason: "r".into(),
                ..Default::default()
            })
        };
        for (e, transient) in [
            (E::Grpc(tonic::Status::unavailable("down")), true),
            (E::Grpc(tonic::Status::deadline_exceeded("slow")), true),
            (E::Grpc(tonic::Status::resource_exhausted("busy")), true),
            (E::Grpc(tonic::Status::invalid_argument("bad")), false),
            (E::Grpc(tonic::Status::unimplemented("no")), false),
            (E::Grpc(tonic::Status::unauthenticated("who")), false),
            (server(8, 49), true),    // rate limit
            (server(1, 56), true),    // service not ready (NotReadyServe)
            (server(2, 1), true),     // service unavailable
            (server(106, 1), true),   // collection recovering
            (server(0, 53), true),    // legacy: memory quota exhausted
            (server(1, 1), false),    // milvus-lite: unexpected error
            (server(1100, 5), false), // invalid parameter
            (server(100, 4), false),  // collection not found
            (E::Timeout("t".into()), true),
            (E::Unexpected("u".into()), false),
            (
                E::RetryExhausted {
                    attempts: 1,
                    source: Box::new(server(8, 49)),
                },
                true,
            ),
        ] {
            let what = format!("{e:?}");
            assert_eq!(milvus_error("x", e).is_transient(), transient, "{what}");
        }
    }
}
