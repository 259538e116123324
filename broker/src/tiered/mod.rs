//! Tiered storage's broker half (docs/tiered-storage.md): the `RemoteLogManager` owns the
//! object store client and its own runtime (`strom-remote` threads), and one
//! [`RemotePartition`] per remote-enabled partition with its durable manifest. Shards decide
//! (`job.rs`, a housekeeping pass between requests); the remote runtime does the I/O
//! (`partition.rs`), including the reads of fetches below the local log start (`fetch.rs`). Built only when `remote.log.storage.system.enable` is on.

mod deletion;
pub mod fetch;
mod job;
mod metrics;
mod partition;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use storage::remote::store::StoreConfig;
use storage::remote::ObjectStore;

pub use fetch::{remote_of, RemoteFetch};
pub use job::{prefix_of, remote_log_pass};
pub use metrics::RemoteMetrics;
pub use partition::RemotePartition;

#[derive(Debug, thiserror::Error)]
pub enum TieredError {
    #[error("object store: {0}")]
    Store(#[from] storage::remote::object_store::Error),
    #[error("starting the remote runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Worker threads of the remote runtime: the transfers are network-bound; two keep one
/// upload from delaying a cleanup while staying off the shards' cores as much as possible.
const REMOTE_WORKERS: usize = 2;

type PartitionKey = (Arc<str>, i32);

pub struct RemoteLogManager {
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    handle: tokio::runtime::Handle,
    store: Arc<dyn ObjectStore>,
    /// `remote.log.manager.copier.thread.pool.size`: copies in flight across the broker.
    copy_slots: Arc<tokio::sync::Semaphore>,
    partitions: Mutex<HashMap<PartitionKey, Arc<RemotePartition>>>,
    pub metrics: Arc<RemoteMetrics>,
    /// Fetches below the local log start: its cache and `remote.log.reader.threads`.
    reader: Arc<storage::remote::read::RemoteReader>,
}

impl RemoteLogManager {
    /// `None` when tiered storage is off.
    pub fn start(
        config: &crate::config::BrokerConfig,
    ) -> Result<Option<Arc<RemoteLogManager>>, TieredError> {
        let Some(store_config) = crate::config::tiered::store_config(config) else {
            return Ok(None);
        };
        let store = store_config.build()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(REMOTE_WORKERS)
            .thread_name("strom-remote")
            .enable_all()
            .build()
            .map_err(TieredError::Runtime)?;
        let backend = match &store_config {
            StoreConfig::Local { .. } => "local",
            StoreConfig::S3 { .. } => "s3",
        };
        // The store's Display names bucket/root only; credentials never reach a log line.
        tracing::info!(backend, store = %store, "tiered storage enabled");
        let reader = storage::remote::read::RemoteReader::new(
            store.clone(),
            config.remote_fetch_cache_bytes,
            config.remote_log_reader_threads,
        );
        let manager = Arc::new(RemoteLogManager {
            reader: Arc::new(reader),
            handle: runtime.handle().clone(),
            runtime: Mutex::new(Some(runtime)),
            store,
            copy_slots: Arc::new(tokio::sync::Semaphore::new(
                config.remote_log_manager_copier_thread_pool_size.max(1),
            )),
            partitions: Mutex::new(HashMap::new()),
            metrics: Arc::new(RemoteMetrics::new()),
        });
        manager.resume_deletions(&config.data_dir);
        Ok(Some(manager))
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// Runs `f` on the remote runtime.
    pub fn spawn<F>(&self, f: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.handle.spawn(f);
    }

    pub fn partition(&self, topic: &Arc<str>, index: i32) -> Option<Arc<RemotePartition>> {
        let key = (topic.clone(), index);
        self.partitions
            .lock()
            .expect("not poisoned")
            .get(&key)
            .cloned()
    }

    fn insert(&self, rp: Arc<RemotePartition>) -> Arc<RemotePartition> {
        let key = rp.key.clone();
        self.partitions
            .lock()
            .expect("not poisoned")
            .entry(key)
            .or_insert(rp)
            .clone()
    }
}

impl Drop for RemoteLogManager {
    fn drop(&mut self) {
        // Dropping a runtime inside another runtime's context panics; this does not wait.
        if let Some(rt) = self.runtime.lock().ok().and_then(|mut r| r.take()) {
            rt.shutdown_background();
        }
    }
}
