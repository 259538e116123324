//! One remote-enabled partition: its manifest (durable copy in the partition dir, mirrored
//! to the object store) and the transfers that move it through Kafka's states. Everything
//! async here runs on the remote runtime; shards only read [`RemotePartition::view`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use storage::remote::manifest::{Manifest, ManifestError, RemoteSegment, SegmentState};
use storage::remote::transfer::{self, SegmentUpload, TransferError};
use storage::remote::ObjectStore;

use super::RemoteMetrics;

#[derive(Debug, thiserror::Error)]
pub enum RemotePartitionError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Transfer(#[from] TransferError),
    #[error("the partition was deleted")]
    Deleted,
}

pub struct RemotePartition {
    pub key: (Arc<str>, i32),
    dir: PathBuf,
    pub prefix: String,
    store: Arc<dyn ObjectStore>,
    metrics: Arc<RemoteMetrics>,
    /// The manifest as it is on disk: only ever replaced after a successful `store`, so a
    /// shard deciding from it (local deletion) decides from durable state.
    durable: Mutex<Manifest>,
    /// Serialises manifest writers (copy, cleanup, expiry) of this partition.
    writer: tokio::sync::Mutex<()>,
    /// A copy is in flight (one at a time per partition keeps the remote log contiguous).
    pub copying: AtomicBool,
    /// A cleanup or expiry is in flight.
    pub cleaning: AtomicBool,
    /// Orphans of interrupted copies were handled once since open; copies wait for it.
    pub recovered: AtomicBool,
    /// Its topic was deleted: no manifest change any more (`deletion.rs` owns the objects).
    pub deleted: AtomicBool,
    /// The durable manifest's remote log start, -1 without served segments: read on every
    /// fetch and ListOffsets of the partition, so without taking the manifest's lock.
    remote_start: AtomicI64,
}

impl RemotePartition {
    /// Loads the manifest (blocking read of one small file; done once per partition).
    pub fn open(
        key: (Arc<str>, i32),
        dir: PathBuf,
        prefix: String,
        store: Arc<dyn ObjectStore>,
        metrics: Arc<RemoteMetrics>,
    ) -> Result<RemotePartition, ManifestError> {
        let manifest = Manifest::load(&dir)?;
        let start = manifest.remote_log_start().unwrap_or(-1);
        Ok(RemotePartition {
            key,
            dir,
            prefix,
            store,
            metrics,
            durable: Mutex::new(manifest),
            writer: tokio::sync::Mutex::new(()),
            copying: AtomicBool::new(false),
            cleaning: AtomicBool::new(false),
            recovered: AtomicBool::new(false),
            deleted: AtomicBool::new(false),
            remote_start: AtomicI64::new(start),
        })
    }

    /// The durable manifest, for the shard's decisions.
    pub fn view(&self) -> Manifest {
        self.durable.lock().expect("not poisoned").clone()
    }

    /// Kafka's remote log start: the first offset a served remote segment holds.
    pub fn remote_log_start(&self) -> Option<i64> {
        Some(self.remote_start.load(Ordering::Acquire)).filter(|&s| s >= 0)
    }

    /// The served segment holding `offset` (a fetch below the local log start).
    pub fn serving(&self, offset: i64) -> Option<RemoteSegment> {
        let m = self.durable.lock().expect("not poisoned");
        m.covering(offset).cloned()
    }

    /// Applies `f` to a copy of the manifest, makes the result durable, then publishes it.
    async fn update<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Manifest) -> Result<R, ManifestError> + Send + 'static,
    ) -> Result<R, RemotePartitionError> {
        let _w = self.writer.lock().await;
        // Checked under the writer lock: a deletion that set it has seen every entry made
        // before, and none is made after (so no copy starts PUTting objects it misses).
        if self.deleted.load(Ordering::Acquire) {
            return Err(RemotePartitionError::Deleted);
        }
        let mut next = self.view();
        let r = f(&mut next)?;
        let dir = self.dir.clone();
        let stored = next.clone();
        tokio::task::spawn_blocking(move || stored.store(&dir))
            .await
            .map_err(|e| TransferError::Task(e.to_string()))??;
        let json = next.to_json();
        self.remote_start
            .store(next.remote_log_start().unwrap_or(-1), Ordering::Release);
        *self.durable.lock().expect("not poisoned") = next;
        // The mirror is for rebuilding a lost disk; the local manifest is the authority, so
        // a failed mirror write only waits for the next change.
        if let Err(e) = transfer::put_manifest(&self.store, &self.prefix, json).await {
            tracing::debug!(topic = %self.key.0, partition = self.key.1, error = %e, "manifest mirror not written");
        }
        Ok(r)
    }

    /// DeleteRecords into the remote log: the log start moves to `offset`, durably, before
    /// the answer; the segments wholly below it go with the next expiry pass.
    pub async fn advance_log_start(&self, offset: i64) -> Result<(), RemotePartitionError> {
        if self.view().log_start().is_some_and(|s| s >= offset) {
            return Ok(());
        }
        self.update(move |m| Ok(m.advance_log_start(offset)))
            .await
            .map(drop)
    }

    /// Its topic was deleted: refuses every later manifest change, waits for the change in
    /// flight and for a copy's uploads to end, and answers the entries as they are then —
    /// every segment that may have objects in the store.
    pub async fn retire(&self) -> Manifest {
        self.deleted.store(true, Ordering::Release);
        drop(self.writer.lock().await);
        while self.copying.load(Ordering::Acquire) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        self.view()
    }

    /// At open: interrupted copies become deletions; then every pending deletion runs.
    pub async fn recover(self: Arc<Self>) {
        let now = crate::now_ms();
        match self.update(move |m| Ok(m.recover(now))).await {
            Ok(n) if n > 0 => {
                tracing::info!(topic = %self.key.0, partition = self.key.1, interrupted = n,
                "remote copies interrupted by a restart: deleting their objects")
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(topic = %self.key.0, partition = self.key.1, error = %e, "remote manifest recovery failed");
                return;
            }
        }
        self.recovered.store(true, Ordering::Release);
        self.clean().await;
    }

    /// Deletes the objects of every `DeleteSegmentStarted` entry and drops the entries.
    /// Failures (store down) leave the entries for the next pass.
    pub async fn clean(&self) {
        for seg in self.view().to_clean() {
            if seg.state != SegmentState::DeleteSegmentStarted {
                continue;
            }
            let r =
                transfer::delete_segment(&self.store, &self.prefix, seg.base_offset, &seg.id).await;
            if let Err(e) = r {
                tracing::warn!(topic = %self.key.0, partition = self.key.1, segment = %seg.id, error = %e,
                    "remote segment deletion failed; retrying later");
                return;
            }
            let id = seg.id.clone();
            if let Err(e) = self.update(move |m| m.finish_delete(&id)).await {
                tracing::warn!(topic = %self.key.0, partition = self.key.1, error = %e, "remote manifest write failed");
                return;
            }
            self.metrics.delete_segments.inc();
        }
    }

    /// Total retention: the segments move to `DeleteSegmentStarted` (no longer served),
    /// then their objects go.
    pub async fn expire(&self, ids: Vec<String>) {
        let now = crate::now_ms();
        let r = self
            .update(move |m| {
                for id in &ids {
                    m.start_delete(id, now)?;
                }
                Ok(())
            })
            .await;
        if let Err(e) = r {
            tracing::warn!(topic = %self.key.0, partition = self.key.1, error = %e, "remote retention failed");
            return;
        }
        self.clean().await;
    }

    /// Copies one segment: COPY_SEGMENT_STARTED durable, all objects PUT, then
    /// COPY_SEGMENT_FINISHED durable. A failed copy becomes a deletion of what it PUT.
    pub async fn copy(&self, seg: RemoteSegment, upload: SegmentUpload) {
        let id = seg.id.clone();
        let size = seg.size_bytes;
        if let Err(e) = self.update(move |m| m.start_copy(seg)).await {
            self.metrics.copy_errors.inc();
            tracing::warn!(topic = %self.key.0, partition = self.key.1, error = %e, "remote copy not started");
            return;
        }
        let started = std::time::Instant::now();
        match transfer::upload_segment(&self.store, &upload).await {
            Ok(bytes) => {
                let fid = id.clone();
                let now = crate::now_ms();
                match self.update(move |m| m.finish_copy(&fid, now)).await {
                    Ok(()) => {
                        self.metrics.copy_segments.inc();
                        self.metrics.copy_bytes.inc_by(bytes);
                        tracing::info!(topic = %self.key.0, partition = self.key.1, base_offset = upload.base_offset,
                            segment = %id, bytes, size, ms = started.elapsed().as_millis() as u64, "copied segment to remote storage");
                    }
                    Err(e) => {
                        self.metrics.copy_errors.inc();
                        tracing::warn!(topic = %self.key.0, partition = self.key.1, error = %e, "remote copy not finished");
                        self.abandon(&id).await;
                    }
                }
            }
            Err(e) => {
                self.metrics.copy_errors.inc();
                if e.is_local_file_gone() {
                    tracing::info!(topic = %self.key.0, partition = self.key.1, base_offset = upload.base_offset,
                        "segment deleted locally before its copy finished; not copied");
                } else {
                    tracing::warn!(topic = %self.key.0, partition = self.key.1, base_offset = upload.base_offset,
                        error = %e, "remote copy failed; retrying later");
                }
                self.abandon(&id).await;
            }
        }
    }

    async fn abandon(&self, id: &str) {
        let now = crate::now_ms();
        let id = id.to_string();
        if self.update(move |m| m.start_delete(&id, now)).await.is_ok() {
            self.clean().await;
        }
    }
}
