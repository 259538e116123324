//! Strom: a Kafka-protocol broker, thread-per-core.
//!
//! Data path, as the folders show it:
//! `server/` (per-shard reuseport listeners, connections, framing, backpressure) →
//! `handlers/` (one module per Kafka API, derived ApiVersions) →
//! `shard/` (home shards, cross-shard `frontend` calls) → `partition/` (Kafka semantics on a
//! log: idempotence, high watermark) → the `storage` crate (Kafka's on-disk format).
//!
//! The topic catalog (`catalog`) and the config (`config`) are the only state every shard
//! reads; they are immutable snapshots behind an `Arc`.

pub mod cli;
pub mod cluster;
pub mod codec;
pub mod config;
pub mod coordinator;
pub mod fetch_session;
pub mod handlers;
pub mod http_proxy;
pub mod kafka_conn;
pub mod logging;
pub mod metadata;
pub mod metrics;
pub mod migrate;
pub mod otel;
pub mod partition;
pub mod quota;
pub mod redact;
pub mod schema_registry;
pub mod security;
pub mod server;
pub mod shard;
pub mod telemetry;
#[doc(hidden)]
pub mod test_support;
pub mod tiered;

pub use server::Server;

/// Milliseconds since the Unix epoch (Kafka's timestamp unit).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
