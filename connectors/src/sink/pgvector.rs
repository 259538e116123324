//! PostgreSQL + pgvector. The table is `id text primary key`, the vector column (named after
//! `embedding_field`, type `vector(N)`) and one typed column per scalar field. Each batch is one
//! transaction that also upserts the batch's next offsets into `strom_connector_offsets`, so
//! the table and the offsets move together: after a crash the connector resumes from what the
//! table holds, whatever the Kafka group committed.

use std::collections::BTreeMap;

use pgvector::Vector;
use serde_json::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Statement};

use super::{Offsets, Rejections, SinkError};
use crate::config::{ConnectorConfig, Metric};
use crate::record::{Doc, FieldType, Op, Schema};

const OFFSETS_TABLE: &str = "strom_connector_offsets";

pub struct PgSink {
    url: String,
    client: Client,
    table: String,
    vector_column: String,
    metric: Metric,
    group_id: String,
    schema: Option<Schema>,
    stored: Offsets,
    /// Prepared for the current connection and schema; dropped when either changes. Boxed:
    /// it would make `Sink`'s pgvector variant twice the size of the others.
    statements: Option<Box<Statements>>,
}

#[derive(Clone)]
struct Statements {
    /// None while the table does not exist (then a batch holds only deletes, which delete
    /// nothing, and offsets).
    upsert: Option<Statement>,
    delete: Option<Statement>,
    store_offsets: Statement,
    /// The scalar columns, in the upsert's parameter order.
    fields: Vec<(String, FieldType)>,
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

fn sql_type(t: FieldType) -> &'static str {
    match t {
        FieldType::Text => "text",
        FieldType::Int => "bigint",
        FieldType::Float => "double precision",
        FieldType::Bool => "boolean",
        FieldType::Json => "jsonb",
    }
}

/// The field type a column can hold, for the types the connector creates or can feed.
fn field_type(sql: &str) -> Option<FieldType> {
    Some(match sql {
        "text" | "character varying" => FieldType::Text,
        "bigint" | "integer" | "smallint" => FieldType::Int,
        "double precision" | "real" | "numeric" => FieldType::Float,
        "boolean" => FieldType::Bool,
        "jsonb" | "json" => FieldType::Json,
        _ => return None,
    })
}

fn ops_class(m: Metric) -> &'static str {
    match m {
        Metric::Cosine => "vector_cosine_ops",
        Metric::L2 => "vector_l2_ops",
        Metric::Ip => "vector_ip_ops",
    }
}

fn distance_op(m: Metric) -> &'static str {
    match m {
        Metric::Cosine => "<=>",
        Metric::L2 => "<->",
        Metric::Ip => "<#>",
    }
}

/// Transient: the connection is gone, or the server says try again (class 08 connection
/// exception, 40 transaction rollback, 53 insufficient resources, 57 operator intervention).
fn pg_error(what: &str, e: tokio_postgres::Error) -> SinkError {
    let transient = match e.code() {
        None => true,
        Some(code) => ["08", "40", "53", "57"]
            .iter()
            .any(|class| code.code().starts_with(class)),
    };
    let msg = match e.as_db_error() {
        Some(db) => format!("{what}: {} ({})", db.message(), db.code().code()),
        None => format!("{what}: {e}"),
    };
    if transient {
        SinkError::Transient(msg)
    } else {
        SinkError::Permanent(msg)
    }
}

/// DDL run by several connectors at once (`IF NOT EXISTS` is not atomic in Postgres): the
/// loser's duplicate errors are retried, and the retry finds the object there.
fn ddl_error(what: &str, e: tokio_postgres::Error) -> SinkError {
    let race = e
        .code()
        .is_some_and(|c| ["23505", "42P07", "42710"].contains(&c.code()));
    match pg_error(what, e) {
        SinkError::Permanent(m) if race => SinkError::Transient(m),
        other => other,
    }
}

async fn open(url: &str) -> Result<Client, SinkError> {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| pg_error("connect", e))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::warn!(error = %e, "pgvector connection closed");
        }
    });
    Ok(client)
}

impl PgSink {
    pub async fn connect(cfg: &ConnectorConfig) -> Result<PgSink, SinkError> {
        let client = open(&cfg.sink.url).await?;
        let mut sink = PgSink {
            url: cfg.sink.url.clone(),
            client,
            table: cfg.sink.collection.clone(),
            vector_column: cfg.sink.embedding_field.clone(),
            metric: cfg.sink.metric,
            group_id: cfg.source.group_id.clone(),
            schema: None,
            stored: Offsets::new(),
            statements: None,
        };
        sink.client
            .batch_execute(&format!(
                "CREATE EXTENSION IF NOT EXISTS vector;
                 CREATE TABLE IF NOT EXISTS {OFFSETS_TABLE} (
                     group_id text NOT NULL, topic text NOT NULL, partition integer NOT NULL,
                     next_offset bigint NOT NULL, PRIMARY KEY (group_id, topic, partition))"
            ))
            .await
            .map_err(|e| ddl_error("create the offsets table", e))?;
        sink.schema = sink.read_schema().await?;
        for row in sink
            .client
            .query(
                &format!(
                    "SELECT topic, partition, next_offset FROM {OFFSETS_TABLE} WHERE group_id = $1"
                ),
                &[&sink.group_id],
            )
            .await
            .map_err(|e| pg_error("read stored offsets", e))?
        {
            sink.stored.insert((row.get(0), row.get(1)), row.get(2));
        }
        Ok(sink)
    }

    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    pub fn stored_offsets(&self) -> &Offsets {
        &self.stored
    }

    /// The table's schema, or None when it does not exist. Errors when it exists but cannot
    /// hold the records at all (no text `id`, no vector column).
    async fn read_schema(&self) -> Result<Option<Schema>, SinkError> {
        let rows = self
            .client
            .query(
                "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                 WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped",
                &[&quote(&self.table)],
            )
            .await
            .map_err(|e| pg_error("read the table's columns", e))?;
        if rows.is_empty() {
            return Ok(None);
        }
        let columns: BTreeMap<String, String> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let t = &self.table;
        match columns.get("id").map(String::as_str) {
            Some("text") | Some("character varying") => {}
            Some(other) => {
                return Err(SinkError::Schema(format!(
                    "table {t}: column id is {other}, the connector needs text"
                )))
            }
            None => return Err(SinkError::Schema(format!("table {t} has no id column"))),
        }
        let vc = &self.vector_column;
        let dimension = match columns.get(vc) {
            Some(ty) => ty
                .strip_prefix("vector(")
                .and_then(|s| s.strip_suffix(')'))
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| {
                    SinkError::Schema(format!(
                        "table {t}: column {vc} is {ty}, the connector needs vector(N)"
                    ))
                })?,
            None => {
                return Err(SinkError::Schema(format!(
                    "table {t} has no column {vc} (embedding_field)"
                )))
            }
        };
        let fields = columns
            .iter()
            .filter(|(name, _)| *name != "id" && *name != vc)
            .filter_map(|(name, ty)| field_type(ty).map(|t| (name.clone(), t)))
            .collect();
        Ok(Some(Schema { dimension, fields }))
    }

    pub async fn create(&mut self, wanted: &Schema) -> Result<Schema, SinkError> {
        let mut cols = vec![
            "id text PRIMARY KEY".to_string(),
            format!(
                "{} vector({})",
                quote(&self.vector_column),
                wanted.dimension
            ),
        ];
        for (name, &t) in &wanted.fields {
            cols.push(format!("{} {}", quote(name), sql_type(t)));
        }
        let t = quote(&self.table);
        // HNSW indexes only up to 2000 dimensions (pgvector's limit); above that the table is
        // scanned exactly.
        let index = if wanted.dimension <= 2000 {
            format!(
                "CREATE INDEX IF NOT EXISTS {} ON {t} USING hnsw ({} {});",
                quote(&format!("{}_{}_hnsw", self.table, self.vector_column)),
                quote(&self.vector_column),
                ops_class(self.metric)
            )
        } else {
            String::new()
        };
        self.client
            .batch_execute(&format!(
                "BEGIN; CREATE TABLE IF NOT EXISTS {t} ({}); {index} COMMIT;",
                cols.join(", ")
            ))
            .await
            .map_err(|e| ddl_error("create table", e))?;
        tracing::info!(table = %self.table, dimension = wanted.dimension, "created pgvector table");
        // Read back: a concurrent creator may have won with another shape.
        let schema = self
            .read_schema()
            .await?
            .ok_or_else(|| SinkError::Transient("table vanished after CREATE".into()))?;
        let diffs = super::mismatches(&schema, wanted, true);
        if !diffs.is_empty() {
            return Err(SinkError::Schema(diffs.join("; ")));
        }
        self.schema = Some(schema.clone());
        self.statements = None;
        Ok(schema)
    }

    /// Schema evolution: a new field becomes a nullable column (`ADD COLUMN IF NOT EXISTS`,
    /// so connectors racing on it agree). Returns the table's schema read back.
    pub async fn add_fields(
        &mut self,
        new: &BTreeMap<String, FieldType>,
    ) -> Result<Schema, SinkError> {
        self.reconnect_if_closed().await?;
        let adds: Vec<String> = new
            .iter()
            .map(|(n, &ty)| format!("ADD COLUMN IF NOT EXISTS {} {}", quote(n), sql_type(ty)))
            .collect();
        self.client
            .batch_execute(&format!(
                "ALTER TABLE {} {}",
                quote(&self.table),
                adds.join(", ")
            ))
            .await
            .map_err(|e| ddl_error("add columns", e))?;
        let schema = self
            .read_schema()
            .await?
            .ok_or_else(|| SinkError::Transient("table vanished after ALTER".into()))?;
        for (name, &ty) in new {
            match schema.fields.get(name) {
                Some(&have) if have.accepts(ty) => {}
                Some(&have) => {
                    return Err(SinkError::Schema(format!(
                        "column {name} was added as {} by someone else, the records need {}",
                        have.name(),
                        ty.name()
                    )))
                }
                None => {
                    return Err(SinkError::Schema(format!(
                        "column {name} exists with a type the connector cannot write"
                    )))
                }
            }
        }
        tracing::info!(table = %self.table, columns = ?new.keys().collect::<Vec<_>>(), "added columns");
        self.schema = Some(schema.clone());
        self.statements = None;
        Ok(schema)
    }

    async fn reconnect_if_closed(&mut self) -> Result<(), SinkError> {
        if self.client.is_closed() {
            self.client = open(&self.url).await?;
            self.statements = None;
        }
        Ok(())
    }

    /// The statements a batch runs, prepared once per connection (a prepare is a round trip).
    async fn statements(&mut self) -> Result<Box<Statements>, SinkError> {
        if let Some(st) = &self.statements {
            return Ok(st.clone());
        }
        let t = quote(&self.table);
        let fields: Vec<(String, FieldType)> = self
            .schema
            .as_ref()
            .map(|s| s.fields.iter().map(|(n, &ty)| (n.clone(), ty)).collect())
            .unwrap_or_default();
        let mut cols = vec!["id".to_string(), quote(&self.vector_column)];
        cols.extend(fields.iter().map(|(n, _)| quote(n)));
        let mut arrays = vec!["$1::text[]".to_string(), "$2::vector[]".to_string()];
        arrays.extend(
            fields
                .iter()
                .enumerate()
                .map(|(i, (_, ty))| format!("${}::{}[]", i + 3, sql_type(*ty))),
        );
        let updates: Vec<String> = cols[1..]
            .iter()
            .map(|c| format!("{c} = EXCLUDED.{c}"))
            .collect();
        let prepare = |sql: String| {
            let client = &self.client;
            async move { client.prepare(&sql).await }
        };
        let (upsert, delete) = if self.schema.is_some() {
            let upsert = prepare(format!(
                "INSERT INTO {t} ({}) SELECT * FROM unnest({}) ON CONFLICT (id) DO UPDATE SET {}",
                cols.join(", "),
                arrays.join(", "),
                updates.join(", ")
            ))
            .await
            .map_err(|e| pg_error("prepare upsert", e))?;
            let delete = prepare(format!("DELETE FROM {t} WHERE id = ANY($1)"))
                .await
                .map_err(|e| pg_error("prepare delete", e))?;
            (Some(upsert), Some(delete))
        } else {
            (None, None)
        };
        let st = Statements {
            upsert,
            delete,
            store_offsets: prepare(format!(
                "INSERT INTO {OFFSETS_TABLE} (group_id, topic, partition, next_offset)
                 SELECT $1, * FROM unnest($2::text[], $3::integer[], $4::bigint[])
                 ON CONFLICT (group_id, topic, partition)
                 DO UPDATE SET next_offset = GREATEST({OFFSETS_TABLE}.next_offset, EXCLUDED.next_offset)"
            ))
            .await
            .map_err(|e| pg_error("prepare offsets", e))?,
            fields,
        };
        let st = Box::new(st);
        self.statements = Some(st.clone());
        Ok(st)
    }

    pub async fn write(
        &mut self,
        ops: &[Op],
        offsets: Option<&Offsets>,
    ) -> Result<Rejections, SinkError> {
        self.reconnect_if_closed().await?;
        let st = self.statements().await?;
        let tx = self
            .client
            .transaction()
            .await
            .map_err(|e| pg_error("begin", e))?;
        // One statement per run of upserts or deletes, in order (so a delete after an upsert
        // of the same id wins), each carrying its rows as arrays: a 128-record batch is one
        // statement instead of 128 (the vector-sink benchmark measured the per-row form at
        // about a third of binary COPY's rate; benches/README.md). Within a run each id
        // appears once, its last op: ON CONFLICT cannot touch a row twice in one statement.
        for (_, run) in super::runs(ops, usize::MAX) {
            let run = super::dedup_last(run);
            if let (Op::Upsert(_), Some(upsert)) = (run[0], &st.upsert) {
                let docs: Vec<&Doc> = run
                    .iter()
                    .filter_map(|op| match op {
                        Op::Upsert(d) => Some(d),
                        Op::Delete(..) => None,
                    })
                    .collect();
                let ids: Vec<&str> = docs.iter().map(|d| d.id.as_str()).collect();
                let vectors: Vec<Vector> = docs
                    .iter()
                    .map(|d| Vector::from(d.vector.clone()))
                    .collect();
                let columns: Vec<Box<dyn ToSql + Sync + Send>> = st
                    .fields
                    .iter()
                    .map(|(name, ty)| sql_column(&docs, name, *ty))
                    .collect();
                let mut params: Vec<&(dyn ToSql + Sync)> = vec![&ids, &vectors];
                params.extend(columns.iter().map(|b| b.as_ref() as &(dyn ToSql + Sync)));
                tx.execute(upsert, &params)
                    .await
                    .map_err(|e| pg_error("upsert", e))?;
            } else if let (Op::Delete(..), Some(delete)) = (run[0], &st.delete) {
                let ids: Vec<&str> = run.iter().map(|op| op.id()).collect();
                tx.execute(delete, &[&ids])
                    .await
                    .map_err(|e| pg_error("delete", e))?;
            }
            // (Deletes before the table exists delete nothing; upserts come only after the
            // runner prepared the table.)
        }
        if let Some(offsets) = offsets.filter(|o| !o.is_empty()) {
            let topics: Vec<&str> = offsets.keys().map(|(t, _)| t.as_str()).collect();
            let partitions: Vec<i32> = offsets.keys().map(|(_, p)| *p).collect();
            let nexts: Vec<i64> = offsets.values().copied().collect();
            tx.execute(
                &st.store_offsets,
                &[&self.group_id, &topics, &partitions, &nexts],
            )
            .await
            .map_err(|e| pg_error("store offsets", e))?;
        }
        tx.commit().await.map_err(|e| pg_error("commit", e))?;
        if let Some(offsets) = offsets {
            for (k, &v) in offsets {
                let e = self.stored.entry(k.clone()).or_insert(v);
                *e = (*e).max(v);
            }
        }
        // Postgres fails the transaction as a whole: a per-record culprit is found by the
        // runner writing the ops one by one after a permanent error.
        Ok(Vec::new())
    }

    pub async fn count(&mut self) -> Result<u64, SinkError> {
        self.reconnect_if_closed().await?;
        let row = self
            .client
            .query_one(&format!("SELECT count(*) FROM {}", quote(&self.table)), &[])
            .await
            .map_err(|e| pg_error("count", e))?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    pub async fn all_vectors(&mut self) -> Result<Vec<(String, Vec<f32>)>, SinkError> {
        self.reconnect_if_closed().await?;
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT id, {} FROM {}",
                    quote(&self.vector_column),
                    quote(&self.table)
                ),
                &[],
            )
            .await
            .map_err(|e| pg_error("read vectors", e))?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, Vector>(1).to_vec()))
            .collect())
    }

    pub async fn nearest(&mut self, vector: &[f32], k: usize) -> Result<Vec<String>, SinkError> {
        self.reconnect_if_closed().await?;
        let tx = self
            .client
            .transaction()
            .await
            .map_err(|e| pg_error("begin", e))?;
        // A verification query wants the true neighbours, not the HNSW index's
        // approximation: with 1,000 tight, far-apart clusters the index's greedy search can
        // settle in a wrong cluster even at ef_search 100 (seen in CI). Without index scans
        // the planner sorts every row by distance: exact, and fast enough at test sizes.
        tx.batch_execute("SET LOCAL enable_indexscan = off")
            .await
            .map_err(|e| pg_error("disable index scan", e))?;
        let rows = tx
            .query(
                &format!(
                    "SELECT id FROM {} ORDER BY {} {} $1 LIMIT $2",
                    quote(&self.table),
                    quote(&self.vector_column),
                    distance_op(self.metric)
                ),
                &[&Vector::from(vector.to_vec()), &(k as i64)],
            )
            .await
            .map_err(|e| pg_error("nearest", e))?;
        tx.commit().await.map_err(|e| pg_error("commit", e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}

/// One field of every document as the array parameter of its column (the schema check already
/// matched the types; a document without the field gives NULL).
fn sql_column(docs: &[&Doc], name: &str, ty: FieldType) -> Box<dyn ToSql + Sync + Send> {
    fn get<'a>(d: &'a Doc, name: &str) -> Option<&'a Value> {
        d.fields.get(name)
    }
    match ty {
        FieldType::Text => Box::new(
            docs.iter()
                .map(|d| get(d, name).and_then(Value::as_str).map(str::to_string))
                .collect::<Vec<_>>(),
        ),
        FieldType::Int => Box::new(
            docs.iter()
                .map(|d| get(d, name).and_then(Value::as_i64))
                .collect::<Vec<_>>(),
        ),
        FieldType::Float => Box::new(
            docs.iter()
                .map(|d| get(d, name).and_then(Value::as_f64))
                .collect::<Vec<_>>(),
        ),
        FieldType::Bool => Box::new(
            docs.iter()
                .map(|d| get(d, name).and_then(Value::as_bool))
                .collect::<Vec<_>>(),
        ),
        FieldType::Json => Box::new(
            docs.iter()
                .map(|d| get(d, name).cloned())
                .collect::<Vec<_>>(),
        ),
    }
}
