//! The connector config: one typed struct per file, validated at load so a bad file stops the
//! process at start with an error that names the key (`sink.batch_size`), never mid-stream.
//!
//! A `strom connect` file holds either one connector (`[source]` + `[sink]`) or several
//! (`[[connectors]]`, each with its own `name`, `[connectors.source]`, `[connectors.sink]`).
//! `strom serve` reads the same `[[connectors]]` entries from its own config file.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::declared::Declared;
// Defined with the records they shape; named here too, where the TOML chooses them.
pub use crate::record::{IdMode, TenantMode};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid `{key}`: {message}")]
    Invalid { key: String, message: String },
}

/// A `strom connect --config FILE`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectFile {
    /// Admin HTTP listener (`/metrics`, `/health`). Default 127.0.0.1:9645.
    pub admin_listen: SocketAddr,
    pub connectors: Vec<ConnectorConfig>,
    /// `otel_exporter_otlp_endpoint`: where the sinks' spans go (the broker's key and
    /// meaning, `crate::trace`). Empty: no spans, no header read. `strom serve` ignores it
    /// and hands the connectors the broker's own exporter.
    pub otel_exporter_otlp_endpoint: String,
    /// `otel_traces_sampler_ratio`: the share of traces (by trace id) that get spans.
    pub otel_traces_sampler_ratio: f64,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConnectorConfig {
    /// Names the connector in logs, metrics and (pgvector) the stored offsets. Default
    /// `<sink.type>-<sink.collection>`.
    #[serde(default)]
    pub name: String,
    pub source: SourceConfig,
    pub sink: SinkConfig,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Kafka bootstrap servers, `host:port[,host:port]`. Required.
    pub bootstrap: String,
    /// Topics to consume. Required, at least one.
    pub topics: Vec<String>,
    /// Consumer group id. Required. Kafka commits (and pgvector's stored offsets) are keyed by it.
    pub group_id: String,
    /// Dead-letter topic for records that cannot be written. Default `<source topic>-dlq`.
    #[serde(default)]
    pub dlq_topic: Option<String>,
    /// Where a group without committed offsets starts: "earliest" (default) or "latest".
    #[serde(default = "default_offset_reset")]
    pub auto_offset_reset: String,
    /// Extra librdkafka properties for the consumer and the DLQ producer (e.g.
    /// `"security.protocol" = "SASL_SSL"`). Cannot override the delivery settings the connector
    /// depends on (auto commit, offset store).
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

fn default_offset_reset() -> String {
    "earliest".into()
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SinkType {
    Pgvector,
    Chroma,
    Milvus,
    Weaviate,
    Pinecone,
    Qdrant,
}

impl SinkType {
    pub fn as_str(self) -> &'static str {
        match self {
            SinkType::Pgvector => "pgvector",
            SinkType::Chroma => "chroma",
            SinkType::Milvus => "milvus",
            SinkType::Weaviate => "weaviate",
            SinkType::Pinecone => "pinecone",
            SinkType::Qdrant => "qdrant",
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    Cosine,
    L2,
    Ip,
}

/// Where the field mapping (record fields → typed columns / properties) comes from.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum SchemaMapping {
    /// From the records: the first record decides, later fields are added (default).
    #[default]
    Infer,
    /// From the JSON Schema in `json_schema` / `json_schema_file`.
    JsonSchema,
    /// From the schema registry the records were written with (Confluent wire format: the
    /// schema id in each value's header, looked up at `schema_registry_url`; crate::registry).
    Registry,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    /// weaviate | milvus | chroma | pgvector | pinecone | qdrant. Required.
    #[serde(rename = "type")]
    pub kind: SinkType,
    /// Server address: `postgres://user@host:port/db` for pgvector, `http://host:port` otherwise.
    pub url: String,
    /// Collection / class / table / index; created on first use when missing. Required.
    pub collection: String,
    /// Records per sink write, 1..=10000. Default 128.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// How long a partial batch waits for more records before it is written, ms, 0..=60000.
    /// Default 100.
    #[serde(default = "default_linger_ms")]
    pub linger_ms: u64,
    /// Passed through to sinks with the notion (Weaviate, Milvus); ignored by the others.
    #[serde(default)]
    pub consistency_level: Option<String>,
    /// JSON field holding the vector: an array of numbers, or base64 of little-endian f32.
    /// Default "embedding".
    #[serde(default = "default_embedding_field")]
    pub embedding_field: String,
    /// "offset" (default) | "key" | the name of a JSON field.
    #[serde(default = "default_id")]
    pub id: String,
    /// Distance metric of a collection the connector creates: cosine (default) | l2 | ip.
    #[serde(default = "default_metric")]
    pub metric: Metric,
    /// Vector dimension; default: taken from the first record. Records of another dimension go
    /// to the DLQ.
    #[serde(default)]
    pub dimension: Option<usize>,
    /// Attempts of a batch on transient sink errors before the connector stops (without
    /// committing, so a restart retries). 1..=1000, default 30.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// First retry delay, ms, doubled per attempt up to 10 s. 1..=60000, default 100.
    #[serde(default = "default_retry_backoff_ms")]
    pub retry_backoff_ms: u64,
    /// API key (Pinecone `Api-Key`, Weaviate bearer token). Default none.
    #[serde(default)]
    pub api_key: Option<String>,
    /// Chroma tenant and database. Defaults `default_tenant` / `default_database`.
    #[serde(default = "default_tenant")]
    pub tenant: String,
    #[serde(default = "default_database")]
    pub database: String,
    /// Multi-tenancy (Weaviate): a tenant per topic or per key prefix. Default none.
    #[serde(default)]
    pub multi_tenancy: Option<TenantMode>,
    /// What ends the tenant prefix of a key with `multi_tenancy = "key_prefix"`. Default "/".
    #[serde(default = "default_tenant_separator")]
    pub tenant_separator: String,
    /// infer (default) | json_schema | registry.
    #[serde(default)]
    pub schema_mapping: SchemaMapping,
    /// The records' JSON Schema (text) for `schema_mapping = "json_schema"`.
    #[serde(default)]
    pub json_schema: Option<String>,
    /// Or a file holding it (relative to the working directory).
    #[serde(default)]
    pub json_schema_file: Option<PathBuf>,
    /// The schema registry's REST address for `schema_mapping = "registry"`.
    #[serde(default = "default_schema_registry_url")]
    pub schema_registry_url: String,
}

fn default_schema_registry_url() -> String {
    "http://127.0.0.1:8081".into()
}

fn default_batch_size() -> usize {
    128
}
fn default_linger_ms() -> u64 {
    100
}
fn default_embedding_field() -> String {
    "embedding".into()
}
fn default_id() -> String {
    "offset".into()
}
fn default_metric() -> Metric {
    Metric::Cosine
}
fn default_max_attempts() -> u32 {
    30
}
fn default_retry_backoff_ms() -> u64 {
    100
}
fn default_tenant() -> String {
    "default_tenant".into()
}
fn default_database() -> String {
    "default_database".into()
}
fn default_tenant_separator() -> String {
    "/".into()
}

impl SinkConfig {
    /// The sink's JSON Schema (`json_schema` text or `json_schema_file`) as a rule; the error names the
    /// key it comes from.
    pub fn declared(&self) -> Result<Declared, (&'static str, String)> {
        let (key, text) = match (&self.json_schema, &self.json_schema_file) {
            (Some(t), None) => ("sink.json_schema", t.clone()),
            (None, Some(path)) => (
                "sink.json_schema_file",
                std::fs::read_to_string(path).map_err(|e| {
                    (
                        "sink.json_schema_file",
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?,
            ),
            (Some(_), Some(_)) => {
                return Err((
                    "sink.json_schema",
                    "give json_schema or json_schema_file, not both".into(),
                ))
            }
            (None, None) => {
                return Err((
                    "sink.json_schema",
                    "schema_mapping = \"json_schema\" needs json_schema or json_schema_file".into(),
                ))
            }
        };
        let id_field = match self.id_mode() {
            IdMode::Field(f) => Some(f),
            IdMode::Offset | IdMode::Key => None,
        };
        let d = Declared::parse(&text, &self.embedding_field, id_field.as_deref())
            .map_err(|m| (key, m))?;
        if let (Some(a), Some(b)) = (d.dimension, self.dimension) {
            if a != b {
                return Err((
                    key,
                    format!("the vector property has {a} items, self.dimension says {b}"),
                ));
            }
        }
        Ok(d)
    }

    pub fn id_mode(&self) -> IdMode {
        match self.id.as_str() {
            "offset" => IdMode::Offset,
            "key" => IdMode::Key,
            field => IdMode::Field(field.to_string()),
        }
    }
}

impl SourceConfig {
    pub fn dlq_topic_for(&self, topic: &str) -> String {
        self.dlq_topic
            .clone()
            .unwrap_or_else(|| format!("{topic}-dlq"))
    }
}

/// The on-disk shape of a connect file (either form).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    admin_listen: Option<SocketAddr>,
    #[serde(default)]
    otel_exporter_otlp_endpoint: String,
    otel_traces_sampler_ratio: Option<f64>,
    name: Option<String>,
    source: Option<SourceConfig>,
    sink: Option<SinkConfig>,
    #[serde(default)]
    connectors: Vec<ConnectorConfig>,
}

/// Loads and validates a `strom connect` file.
pub fn load(path: &Path) -> Result<ConnectFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text).map_err(|e| match e {
        ConfigError::Parse { message, .. } => ConfigError::Parse {
            path: path.to_path_buf(),
            message,
        },
        e => e,
    })
}

/// Parses a connect file's text (see [`load`]).
pub fn parse(text: &str) -> Result<ConnectFile, ConfigError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: PathBuf::from("<config>"),
        message: e.to_string(),
    })?;
    let mut connectors = raw.connectors;
    match (raw.source, raw.sink) {
        (Some(source), Some(sink)) => connectors.push(ConnectorConfig {
            name: raw.name.unwrap_or_default(),
            source,
            sink,
        }),
        (None, None) => {}
        (Some(_), None) => return Err(invalid("sink", "missing: [source] needs a [sink]")),
        (None, Some(_)) => return Err(invalid("source", "missing: [sink] needs a [source]")),
    }
    if connectors.is_empty() {
        return Err(invalid(
            "connectors",
            "no connector: give [source] and [sink], or [[connectors]]",
        ));
    }
    validate_all(&mut connectors)?;
    let otel_traces_sampler_ratio = raw.otel_traces_sampler_ratio.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&otel_traces_sampler_ratio) {
        return Err(invalid(
            "otel_traces_sampler_ratio",
            format!("{otel_traces_sampler_ratio}: expected 0.0 to 1.0"),
        ));
    }
    let otel_exporter_otlp_endpoint = raw.otel_exporter_otlp_endpoint.trim().to_string();
    if !otel_exporter_otlp_endpoint.is_empty() {
        crate::trace::traces_url(&otel_exporter_otlp_endpoint)
            .map_err(|e| invalid("otel_exporter_otlp_endpoint", e.to_string()))?;
    }
    Ok(ConnectFile {
        admin_listen: raw
            .admin_listen
            .unwrap_or_else(|| "127.0.0.1:9645".parse().expect("static address")),
        connectors,
        otel_exporter_otlp_endpoint,
        otel_traces_sampler_ratio,
    })
}

/// The connectors of a `strom serve` config file: its `[[connectors]]` entries and
/// `connectors_admin_listen` (default 127.0.0.1:9645, bound only when there are connectors).
/// The broker's own keys are left to the broker's loader.
pub fn from_serve_table(table: &toml::Table) -> Result<Option<ConnectFile>, ConfigError> {
    let Some(value) = table.get("connectors") else {
        return Ok(None);
    };
    let mut connectors: Vec<ConnectorConfig> = value
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| invalid("connectors", e.message().trim_end()))?;
    validate_all(&mut connectors)?;
    let admin_listen = match table.get("connectors_admin_listen") {
        None => "127.0.0.1:9645".parse().expect("static address"),
        Some(v) => v.as_str().and_then(|s| s.parse().ok()).ok_or_else(|| {
            invalid(
                "connectors_admin_listen",
                format!("{v}: expected \"host:port\""),
            )
        })?,
    };
    Ok(Some(ConnectFile {
        admin_listen,
        connectors,
        // The broker's exporter serves them (`strom serve` passes its tracer to `start`).
        otel_exporter_otlp_endpoint: String::new(),
        otel_traces_sampler_ratio: 1.0,
    }))
}

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        message: message.into(),
    }
}

fn validate_all(connectors: &mut [ConnectorConfig]) -> Result<(), ConfigError> {
    let many = connectors.len() > 1;
    let mut names = std::collections::BTreeSet::new();
    for (i, c) in connectors.iter_mut().enumerate() {
        let prefix = if many {
            format!("connectors[{i}].")
        } else {
            String::new()
        };
        if c.name.is_empty() {
            c.name = format!("{}-{}", c.sink.kind.as_str(), c.sink.collection);
        }
        c.validate(&prefix)?;
        if !names.insert(c.name.clone()) {
            return Err(invalid(
                &format!("{prefix}name"),
                format!("`{}` names two connectors", c.name),
            ));
        }
    }
    Ok(())
}

impl ConnectorConfig {
    fn validate(&self, prefix: &str) -> Result<(), ConfigError> {
        let bad = |key: &str, message: String| invalid(&format!("{prefix}{key}"), message);
        let (src, sink) = (&self.source, &self.sink);
        if src.bootstrap.trim().is_empty() {
            return Err(bad("source.bootstrap", "must not be empty".into()));
        }
        if src.topics.is_empty() || src.topics.iter().any(|t| t.trim().is_empty()) {
            return Err(bad(
                "source.topics",
                "needs at least one non-empty topic".into(),
            ));
        }
        if src.group_id.trim().is_empty() {
            return Err(bad("source.group_id", "must not be empty".into()));
        }
        if !matches!(src.auto_offset_reset.as_str(), "earliest" | "latest") {
            return Err(bad(
                "source.auto_offset_reset",
                format!("`{}`: expected earliest or latest", src.auto_offset_reset),
            ));
        }
        for key in ["enable.auto.commit", "enable.auto.offset.store", "group.id"] {
            if src.properties.contains_key(key) {
                return Err(bad(
                    &format!("source.properties.{key}"),
                    "is set by the connector (offsets are committed only after the sink acknowledged)"
                        .into(),
                ));
            }
        }
        if let Some(dlq) = &src.dlq_topic {
            if src.topics.contains(dlq) {
                return Err(bad(
                    "source.dlq_topic",
                    format!("`{dlq}` is also a source topic"),
                ));
            }
        }
        if sink.url.trim().is_empty() {
            return Err(bad("sink.url", "must not be empty".into()));
        }
        let scheme_ok = match sink.kind {
            SinkType::Pgvector => {
                sink.url.starts_with("postgres://") || sink.url.starts_with("postgresql://")
            }
            _ => sink.url.starts_with("http://") || sink.url.starts_with("https://"),
        };
        if !scheme_ok {
            return Err(bad(
                "sink.url",
                format!(
                    "`{}`: a {} sink needs a {} URL",
                    sink.url,
                    sink.kind.as_str(),
                    if sink.kind == SinkType::Pgvector {
                        "postgres://"
                    } else {
                        "http(s)://"
                    }
                ),
            ));
        }
        if sink.collection.is_empty() {
            return Err(bad("sink.collection", "must not be empty".into()));
        }
        if sink.kind == SinkType::Pgvector && !is_sql_identifier(&sink.collection) {
            return Err(bad(
                "sink.collection",
                format!(
                    "`{}`: a pgvector table name must be letters, digits and _ (not starting with a digit), at most 63 bytes",
                    sink.collection
                ),
            ));
        }
        let weaviate_class = |c: &str| {
            c.as_bytes()[0].is_ascii_uppercase()
                && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        };
        if sink.kind == SinkType::Weaviate && !weaviate_class(&sink.collection) {
            return Err(bad(
                "sink.collection",
                format!(
                    "`{}`: a Weaviate class name starts with an upper-case letter, then letters, digits, _",
                    sink.collection
                ),
            ));
        }
        if sink.kind == SinkType::Milvus
            && !crate::sink::milvus::names::valid_name(&sink.collection)
        {
            return Err(bad(
                "sink.collection",
                format!(
                    "`{}`: a Milvus collection name starts with a letter or _, then letters, digits, _ (at most 255)",
                    sink.collection
                ),
            ));
        }
        if sink.kind == SinkType::Milvus
            && !crate::sink::milvus::names::typed_field_name(&sink.embedding_field, "")
        // (`typed_field_name` refuses `id`, the primary key, and checks the syntax.)
        {
            return Err(bad(
                "sink.embedding_field",
                format!(
                    "`{}`: a Milvus field name starts with a letter or _, then letters, digits, _ (at most 255), and is not `id`",
                    sink.embedding_field
                ),
            ));
        }
        if let (SinkType::Milvus, Some(level)) = (sink.kind, &sink.consistency_level) {
            if crate::sink::milvus::names::consistency_level(level).is_none() {
                return Err(bad(
                    "sink.consistency_level",
                    format!("`{level}`: Milvus has Strong, Session, Bounded, Eventually"),
                ));
            }
        }
        if let (SinkType::Weaviate, Some(level)) = (sink.kind, &sink.consistency_level) {
            if !matches!(level.as_str(), "ONE" | "QUORUM" | "ALL") {
                return Err(bad(
                    "sink.consistency_level",
                    format!("`{level}`: Weaviate has ONE, QUORUM, ALL"),
                ));
            }
        }
        if let (SinkType::Qdrant, Some(level)) = (sink.kind, &sink.consistency_level) {
            if !matches!(level.as_str(), "weak" | "medium" | "strong") {
                return Err(bad(
                    "sink.consistency_level",
                    format!("`{level}`: Qdrant's write ordering is weak, medium or strong"),
                ));
            }
        }
        if sink.kind == SinkType::Qdrant
            && (sink.collection.len() > 255 || sink.collection.contains(['/', '?', '#', '%', ' ']))
        {
            return Err(bad(
                "sink.collection",
                format!(
                    "`{}`: a Qdrant collection name has no / ? # % or space, at most 255 bytes",
                    sink.collection
                ),
            ));
        }
        if sink.multi_tenancy.is_some() && sink.kind != SinkType::Weaviate {
            return Err(bad(
                "sink.multi_tenancy",
                format!(
                    "not supported by the {} sink (Weaviate only)",
                    sink.kind.as_str()
                ),
            ));
        }
        if sink.tenant_separator.is_empty() {
            return Err(bad("sink.tenant_separator", "must not be empty".into()));
        }
        self.validate_schema_mapping(prefix)?;
        if !(1..=10_000).contains(&sink.batch_size) {
            return Err(bad(
                "sink.batch_size",
                format!("{}: must be 1..=10000", sink.batch_size),
            ));
        }
        if sink.linger_ms > 60_000 {
            return Err(bad(
                "sink.linger_ms",
                format!("{}: must be 0..=60000", sink.linger_ms),
            ));
        }
        if sink.embedding_field.is_empty() {
            return Err(bad("sink.embedding_field", "must not be empty".into()));
        }
        if sink.id.is_empty() || sink.id == sink.embedding_field {
            return Err(bad(
                "sink.id",
                "must be offset, key, or a field other than embedding_field".into(),
            ));
        }
        if let Some(d) = sink.dimension {
            if !(1..=65_535).contains(&d) {
                return Err(bad("sink.dimension", format!("{d}: must be 1..=65535")));
            }
        }
        if !(1..=1000).contains(&sink.max_attempts) {
            return Err(bad(
                "sink.max_attempts",
                format!("{}: must be 1..=1000", sink.max_attempts),
            ));
        }
        if !(1..=60_000).contains(&sink.retry_backoff_ms) {
            return Err(bad(
                "sink.retry_backoff_ms",
                format!("{}: must be 1..=60000", sink.retry_backoff_ms),
            ));
        }
        Ok(())
    }
}

impl ConnectorConfig {
    fn validate_schema_mapping(&self, prefix: &str) -> Result<(), ConfigError> {
        let bad = |key: &str, message: String| invalid(&format!("{prefix}{key}"), message);
        let sink = &self.sink;
        let given = sink.json_schema.is_some() || sink.json_schema_file.is_some();
        match sink.schema_mapping {
            SchemaMapping::Infer | SchemaMapping::Registry if given => Err(bad(
                "sink.json_schema",
                "given, but schema_mapping is not \"json_schema\"".into(),
            )),
            SchemaMapping::Infer => Ok(()),
            SchemaMapping::Registry => match reqwest::Url::parse(&sink.schema_registry_url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(()),
                Ok(u) => Err(bad(
                    "sink.schema_registry_url",
                    format!("scheme {} is not http or https", u.scheme()),
                )),
                Err(e) => Err(bad("sink.schema_registry_url", format!("not a URL: {e}"))),
            },
            SchemaMapping::JsonSchema => {
                sink.declared().map_err(|(key, m)| bad(key, m))?;
                Ok(())
            }
        }
    }
}

/// Letters, digits and `_`, not starting with a digit, at most Postgres' 63 bytes: such a
/// name needs no quoting rules beyond wrapping it in double quotes.
pub fn is_sql_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && !s.as_bytes()[0].is_ascii_digit()
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUE_EXAMPLE: &str = r#"
[source]
bootstrap = "127.0.0.1:9092"
topics = ["embeddings"]
group_id = "vector-sink"
[sink]
type = "weaviate"            # weaviate | milvus | chroma | pgvector | pinecone
url = "http://127.0.0.1:8080"
collection = "Document"
batch_size = 128
consistency_level = "QUORUM" # passed through where the DB has the notion
embedding_field = "embedding_vector"
id = "offset"                # uuid5 of topic/partition/offset (default) | "key" | a field name
"#;

    fn err(text: &str) -> String {
        parse(text).expect_err("must be rejected").to_string()
    }

    #[test]
    fn given_issue_example_when_parsed_then_defaults_filled() {
        let f = parse(ISSUE_EXAMPLE).unwrap();
        assert_eq!(f.connectors.len(), 1);
        let c = &f.connectors[0];
        assert_eq!(c.name, "weaviate-Document");
        assert_eq!(c.sink.kind, SinkType::Weaviate);
        assert_eq!(c.sink.id_mode(), IdMode::Offset);
        assert_eq!(c.sink.linger_ms, 100);
        assert_eq!(c.source.dlq_topic_for("embeddings"), "embeddings-dlq");
        assert_eq!(f.admin_listen.port(), 9645);
    }

    #[test]
    fn given_otel_keys_when_parsed_then_kept_or_refused_by_name() {
        assert_eq!(
            parse(ISSUE_EXAMPLE).unwrap().otel_exporter_otlp_endpoint,
            ""
        );
        let with = |top: &str| format!("{top}\n{ISSUE_EXAMPLE}");
        let f = parse(&with(
            "otel_exporter_otlp_endpoint = \"http://127.0.0.1:4318\"\notel_traces_sampler_ratio = 0.5",
        ))
        .unwrap();
        assert_eq!(f.otel_exporter_otlp_endpoint, "http://127.0.0.1:4318");
        assert_eq!(f.otel_traces_sampler_ratio, 0.5);
        for (top, key) in [
            (
                "otel_exporter_otlp_endpoint = \"127.0.0.1:4318\"",
                "otel_exporter_otlp_endpoint",
            ),
            (
                "otel_traces_sampler_ratio = 1.5",
                "otel_traces_sampler_ratio",
            ),
        ] {
            assert!(err(&with(top)).contains(key), "{}", err(&with(top)));
        }
    }

    #[test]
    fn given_readme_example_when_parsed_then_valid() {
        let readme = include_str!("../README.md");
        let start = readme.find("```toml\n").expect("README has a toml example") + 8;
        let end = start + readme[start..].find("```").unwrap();
        parse(&readme[start..end]).unwrap();
    }

    #[test]
    fn given_unknown_key_when_parsed_then_error_names_it() {
        let text = ISSUE_EXAMPLE.replace("batch_size = 128", "batch_sise = 128");
        assert!(err(&text).contains("batch_sise"), "{}", err(&text));
    }

    #[test]
    fn given_bad_values_when_parsed_then_error_names_the_key() {
        for (from, to, key) in [
            ("batch_size = 128", "batch_size = 0", "sink.batch_size"),
            ("topics = [\"embeddings\"]", "topics = []", "source.topics"),
            (
                "group_id = \"vector-sink\"",
                "group_id = \"\"",
                "source.group_id",
            ),
            ("id = \"offset\"", "id = \"embedding_vector\"", "sink.id"),
            ("type = \"weaviate\"", "type = \"faiss\"", "type"),
            ("type = \"weaviate\"", "type = \"pgvector\"", "sink.url"),
            (
                "collection = \"Document\"",
                "collection = \"\"",
                "sink.collection",
            ),
        ] {
            let text = ISSUE_EXAMPLE.replace(from, to);
            let e = err(&text);
            assert!(e.contains(key), "{to}: `{e}` does not name {key}");
        }
    }

    #[test]
    fn given_registry_mapping_then_the_url_defaults_and_is_checked() {
        let registry = |extra: &str| {
            ISSUE_EXAMPLE.replace(
                "type = \"weaviate\"",
                &format!("type = \"weaviate\"\nschema_mapping = \"registry\"\n{extra}"),
            )
        };
        let c = &parse(&registry("")).unwrap().connectors[0];
        assert_eq!(c.sink.schema_mapping, SchemaMapping::Registry);
        assert_eq!(c.sink.schema_registry_url, "http://127.0.0.1:8081");
        for bad in ["not a url", "ftp://127.0.0.1:8081"] {
            let e = err(&registry(&format!("schema_registry_url = \"{bad}\"")));
            assert!(e.contains("sink.schema_registry_url"), "{bad}: {e}");
        }
        let e = err(&registry("json_schema = '{}'"));
        assert!(e.contains("sink.json_schema"), "{e}");
    }

    #[test]
    fn given_milvus_sink_then_names_and_consistency_level_checked() {
        let milvus = ISSUE_EXAMPLE
            .replace("type = \"weaviate\"", "type = \"milvus\"")
            .replace("\"QUORUM\"", "\"Strong\"");
        let c = &parse(&milvus).unwrap().connectors[0];
        assert_eq!(
            (c.sink.kind, c.sink.consistency_level.as_deref()),
            (SinkType::Milvus, Some("Strong"))
        );
        for (from, to, key) in [
            ("\"Strong\"", "\"QUORUM\"", "sink.consistency_level"),
            ("\"Document\"", "\"my-docs\"", "sink.collection"),
            (
                "embedding_field = \"embedding_vector\"",
                "embedding_field = \"id\"",
                "sink.embedding_field",
            ),
        ] {
            let e = err(&milvus.replace(from, to));
            assert!(e.contains(key), "{to}: `{e}` does not name {key}");
        }
    }

    #[test]
    fn given_connectors_array_when_two_share_a_name_then_rejected() {
        let one = "[[connectors]]\nname = \"a\"\n[connectors.source]\nbootstrap = \"x:1\"\ntopics = [\"t\"]\ngroup_id = \"g\"\n[connectors.sink]\ntype = \"chroma\"\nurl = \"http://x\"\ncollection = \"c\"\n";
        let f = parse(one).unwrap();
        assert_eq!(f.connectors[0].name, "a");
        let e = err(&format!("{one}{one}"));
        assert!(e.contains("connectors[1].name"), "{e}");
    }

    #[test]
    fn given_serve_table_without_connectors_then_none() {
        let t: toml::Table = toml::from_str("listen = \"127.0.0.1:1\"").unwrap();
        assert!(from_serve_table(&t).unwrap().is_none());
        let with = format!("connectors_admin_listen = \"127.0.0.1:1\"\n{}", "[[connectors]]\n[connectors.source]\nbootstrap = \"x:1\"\ntopics = [\"t\"]\ngroup_id = \"g\"\n[connectors.sink]\ntype = \"chroma\"\nurl = \"http://x\"\ncollection = \"c\"\n");
        let f = from_serve_table(&toml::from_str(&with).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!((f.connectors.len(), f.admin_listen.port()), (1, 1));
    }
}
