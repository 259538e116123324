//! A Confluent-compatible Schema Registry inside the broker (docs/schema-registry.md).
//!
//! Data flow: an HTTP request (`http`, axum, on the registry's own thread and listener,
//! `schema_registry_listen`) → the registry's decision (`registry`, pure: reads the
//! `store`, returns the `_schemas` records to write or Confluent's error) → the records are
//! appended to the `_schemas` topic (`kafka_store`, acks=all, through the topic's home shard) →
//! replayed from the log into the `store` → the answer. The log is the source of truth: the
//! store only ever changes by replaying it, in offset order, so records written by anyone
//! else (a `_schemas` topic mirrored from Kafka by `strom migrate`, Confluent's own registry
//! pointed at this broker) are applied the same way; a tailing task follows the topic's
//! high watermark to pick those up while the broker runs.
//!
//! - `records`: the keys and values of `_schemas`, in Confluent's exact JSON.
//! - `types`: AVRO, PROTOBUF and JSON schemas: parsing, canonical form, compatibility.
//! - `compat`: compatibility levels and which versions a new schema is checked against.
//! - `validation`: broker-side schema-id validation of produced records (a pure function
//!   for the produce path).
//!
//! Writes are serialized by one lock (Confluent forwards them all to its one leader);
//! reads answer from memory and do not wait for the log.

pub mod compat;
pub mod error;
mod http;
pub mod kafka_store;
pub mod records;
pub mod registry;
pub mod store;
pub mod types;
pub mod view;

#[cfg(test)]
mod registry_tests;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use error::RegistryError;
use records::decode_value;
use registry::{Records, Registry};
use shard::BrokerContext;

use crate::shard;

/// The registry service shared by the HTTP handlers.
pub struct Service {
    log: kafka_store::SchemasLog,
    registry: Mutex<Registry>,
    /// One write at a time, from reading the store to replaying what was appended.
    writer: tokio::sync::Mutex<()>,
}

impl Service {
    pub fn new(ctx: Arc<BrokerContext>) -> Arc<Service> {
        Arc::new(Service {
            log: kafka_store::SchemasLog::new(ctx),
            registry: Mutex::new(Registry::default()),
            writer: tokio::sync::Mutex::new(()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        // A panic while holding it would be a bug; the state is still the replayed log.
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replays `_schemas` from where the store is up to the high watermark. Returns the
    /// partition's watermark receiver (None while the topic does not exist).
    pub async fn catch_up(&self) -> Result<Option<watch::Receiver<i64>>, RegistryError> {
        loop {
            let from = self.lock().store.next_offset;
            let read = self.log.read(from).await?;
            let done = read.next_offset >= read.high_watermark || read.next_offset <= from;
            {
                let mut r = self.lock();
                for rec in &read.records {
                    let Some(key) = kafka_store::decode_key(rec) else {
                        continue;
                    };
                    match decode_value(&key, rec.value.as_deref()) {
                        Ok(value) => r.store.apply(rec.offset, rec.timestamp, &key, value),
                        Err(e) => {
                            tracing::warn!(offset = rec.offset, error = %e,
                                "skipping an unreadable {} value", kafka_store::TOPIC);
                        }
                    }
                }
                // Offsets the read covered without records (compacted away, control batches).
                if read.next_offset > r.store.next_offset {
                    r.store.next_offset = read.next_offset;
                }
            }
            if done {
                return Ok(read.watch);
            }
        }
    }

    /// Runs a read against the current state.
    pub fn read<T>(
        &self,
        f: impl FnOnce(&mut Registry) -> Result<T, RegistryError>,
    ) -> Result<T, RegistryError> {
        f(&mut self.lock())
    }

    /// Runs a write: catch up, decide, append the records durably, replay them, answer.
    pub async fn write<T>(
        &self,
        f: impl FnOnce(&mut Registry) -> Result<(T, Records), RegistryError>,
    ) -> Result<T, RegistryError> {
        let _one = self.writer.lock().await;
        self.catch_up().await?;
        let (out, records) = f(&mut self.lock())?;
        if !records.is_empty() {
            self.log.append(&records).await?;
            self.catch_up().await?;
        }
        Ok(out)
    }

    /// Follows the topic until shutdown: records written by others show up within a poll.
    async fn tail(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            let watch = match self.catch_up().await {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(error = %e, "schema registry could not read {}", kafka_store::TOPIC);
                    None
                }
            };
            let wait = async {
                match watch {
                    Some(mut w) => {
                        let _ = tokio::time::timeout(Duration::from_secs(5), w.changed()).await;
                    }
                    // No topic yet: look again in a while.
                    None => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            };
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = wait => {}
            }
        }
    }
}

/// How the registry's router is served on its listener until the stop future ends: given by
/// the caller (`server`), which puts it behind the admin port's TLS and authentication.
pub type Serve = Box<
    dyn FnOnce(
            tokio::net::TcpListener,
            axum::Router,
            std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>>>>
        + Send,
>;

/// Starts the registry on its own thread (a current-thread runtime: axum's tasks need
/// `Send` futures, and the shards are reached by message). `listener` is bound already so
/// the caller knows the address; requests are served once `_schemas` has been replayed.
pub fn spawn(
    ctx: Arc<BrokerContext>,
    listener: std::net::TcpListener,
    shutdown: watch::Receiver<bool>,
    serve: Serve,
    published: Arc<std::sync::OnceLock<Arc<Service>>>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("schema-registry".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "schema registry runtime");
                    return;
                }
            };
            rt.block_on(run(ctx, listener, shutdown, serve, published));
        })
}

async fn run(
    ctx: Arc<BrokerContext>,
    listener: std::net::TcpListener,
    mut shutdown: watch::Receiver<bool>,
    serve: Serve,
    published: Arc<std::sync::OnceLock<Arc<Service>>>,
) {
    let service = Service::new(ctx.clone());
    let _ = ctx.schema_view.set(service.clone());
    let _ = published.set(service.clone());
    // The first replay; a failure (a shard still starting) is retried by the tailer, and
    // requests meanwhile answer from what was replayed.
    if let Err(e) = service.catch_up().await {
        tracing::warn!(error = %e, "schema registry: initial replay of {} failed", kafka_store::TOPIC);
    }
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "schema registry listener");
            return;
        }
    };
    tokio::spawn(service.clone().tail(shutdown.clone()));
    let app = http::router(service);
    let stop = async move {
        let _ = shutdown.changed().await;
    };
    if let Err(e) = serve(listener, app, Box::pin(stop)).await {
        tracing::error!(error = %e, "schema registry server stopped");
    }
}
