//! Starting and stopping the broker: data dir, shards, listeners, checkpoints.
//!
//! `Server::start` returns once every shard has recovered its partitions and is accepting,
//! with the bound addresses (tests bind port 0). `Server::shutdown` stops accepting, lets
//! in-flight requests finish, closes every log, writes Kafka's checkpoint files and the
//! clean-shutdown marker, and releases the data-dir lock.

pub mod admin;
pub mod connection;
pub mod console;
pub mod listener;
pub mod steering;

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{mpsc, watch, Semaphore};

use crate::catalog::CatalogHandle;
use crate::config::{BrokerConfig, Origin};
use crate::shard::{self, BrokerContext, ShardMessage, ShardMetrics, ShardState};

const RECOVERY_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
const LOG_START_CHECKPOINT: &str = "log-start-offset-checkpoint";

/// What a shard hands back when it stops: per partition (topic, partition, recovery point,
/// log start offset).
type ShardReport = Vec<(String, i32, i64, i64)>;

/// Offsets by partition, as Kafka's checkpoint files hold them.
type Checkpoint = HashMap<(String, i32), i64>;

pub struct Server {
    pub kafka_addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub ctx: Arc<BrokerContext>,
    /// The connectors `strom serve` runs beside the broker, for the console to show.
    pub connectors: Arc<console::Connectors>,
    shutdown: watch::Sender<bool>,
    shards: Vec<JoinHandle<anyhow::Result<ShardReport>>>,
    admin: Option<JoinHandle<()>>,
    /// Holds the steering program's descriptors until shutdown.
    _steering: strom_ebpf::Steering,
    _lock: storage::logdir::DirLock,
}

impl Server {
    pub fn start(
        config: BrokerConfig,
        origins: std::collections::BTreeMap<String, Origin>,
    ) -> anyhow::Result<Server> {
        let data_dir = config.data_dir.clone();
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("creating data dir {}", data_dir.display()))?;
        let lock = storage::logdir::lock(&data_dir)
            .with_context(|| format!("locking data dir {}", data_dir.display()))?;
        let meta = storage::logdir::ensure_meta_properties(&data_dir, config.node_id)
            .context("reading meta.properties")?;
        let cluster_id = if config.cluster_id.is_empty() {
            meta.cluster_id.clone()
        } else {
            config.cluster_id.clone()
        };
        let marker = storage::logdir::clean_shutdown_marker(&data_dir);
        let clean = marker.exists();
        if clean {
            std::fs::remove_file(&marker).context("removing clean-shutdown marker")?;
        } else {
            tracing::info!(
                "no clean-shutdown marker: logs are recovered from their recovery points"
            );
        }
        let recovery_points: HashMap<(String, i32), i64> =
            storage::logdir::read_checkpoint(&data_dir.join(RECOVERY_CHECKPOINT))
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "unreadable recovery checkpoint; recovering every log fully");
                    HashMap::new()
                });
        let log_starts: HashMap<(String, i32), i64> =
            storage::logdir::read_checkpoint(&data_dir.join(LOG_START_CHECKPOINT)).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "unreadable log-start checkpoint; log start offsets come from the segments");
                HashMap::new()
            });
        let catalog = CatalogHandle::open(&data_dir, config.clone(), origins)?;
        let producer_ids = crate::producer_ids::ProducerIdAllocator::open(&data_dir)?;

        let shard_count = config.shard_count();
        let first = listener::bind_reuseport(config.listen)
            .with_context(|| format!("binding Kafka listener {}", config.listen))?;
        let kafka_addr = first.local_addr()?;
        let mut listeners = vec![first];
        for _ in 1..shard_count {
            listeners.push(listener::bind_reuseport(kafka_addr)?);
        }
        let (steer, steering_probe) = steering::attach(&config, &listeners);
        let metrics_std = std::net::TcpListener::bind(config.metrics_listen)
            .with_context(|| format!("binding admin listener {}", config.metrics_listen))?;
        let metrics_addr = metrics_std.local_addr()?;

        let mut senders = Vec::new();
        let mut receivers = Vec::new();
        for _ in 0..shard_count {
            let (tx, rx) = mpsc::channel::<ShardMessage>(shard::SHARD_QUEUE_DEPTH);
            senders.push(tx);
            receivers.push(rx);
        }
        let ctx = Arc::new(BrokerContext {
            config: config.clone(),
            catalog,
            cluster_id,
            shard_senders: senders,
            producer_ids,
            started_ms: crate::now_ms(),
            steering: steering_probe,
            cleaner_checkpoints: Arc::new(crate::cleaner::Checkpoints::load(&data_dir)),
        });
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let ready_flag = Arc::new(AtomicBool::new(false));
        let connectors = Arc::new(console::Connectors::default());
        let admin = {
            let ready = ready_flag.clone();
            let ctx = ctx.clone();
            let shutdown = shutdown_rx.clone();
            let router = admin::broker_router(ready, ctx, connectors.clone());
            admin::spawn_thread("admin", metrics_std, router, shutdown)?
        };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<usize, String>>();
        let recovery_points = Arc::new((recovery_points, log_starts));
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let mut shards = Vec::new();
        for (id, (listener, rx)) in listeners.into_iter().zip(receivers).enumerate() {
            let ctx = ctx.clone();
            let shutdown = shutdown_rx.clone();
            let ready = ready_tx.clone();
            let points = recovery_points.clone();

            let handle = std::thread::Builder::new()
                .name(format!("shard-{id}"))
                .spawn(move || {
                    shard::pin_to_cpu(id % cpus);
                    run_shard(id, ctx, listener, rx, shutdown, ready, points)
                })?;
            shards.push(handle);
        }
        drop(ready_tx);
        for _ in 0..shard_count {
            match ready_rx.recv() {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    let _ = shutdown_tx.send(true);
                    anyhow::bail!("shard failed to start: {e}");
                }
                Err(_) => anyhow::bail!("a shard thread died during start"),
            }
        }
        ready_flag.store(true, std::sync::atomic::Ordering::Release);
        tracing::info!(%kafka_addr, %metrics_addr, shards = shard_count, clean_start = clean,
            "strom is serving");
        Ok(Server {
            kafka_addr,
            metrics_addr,
            ctx,
            connectors,
            shutdown: shutdown_tx,
            shards,
            admin: Some(admin),
            _steering: steer,
            _lock: lock,
        })
    }

    /// Clean shutdown: stop accepting, finish in-flight requests, close logs, write the
    /// checkpoints and the clean-shutdown marker.
    pub fn shutdown(mut self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        let mut entries = Vec::new();
        let mut failed = false;
        for h in self.shards.drain(..) {
            match h.join() {
                Ok(Ok(report)) => entries.extend(report),
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "shard stopped with an error");
                    failed = true;
                }
                Err(_) => failed = true,
            }
        }
        if let Some(a) = self.admin.take() {
            let _ = a.join();
        }
        let dir = &self.ctx.config.data_dir;
        write_checkpoints(dir, &entries)?;
        if !failed {
            crate::catalog::write_atomically(&storage::logdir::clean_shutdown_marker(dir), b"")?;
        }
        tracing::info!("shut down cleanly");
        Ok(())
    }
}

fn write_checkpoints(
    dir: &std::path::Path,
    entries: &[(String, i32, i64, i64)],
) -> anyhow::Result<()> {
    let recovery: Vec<(String, i32, i64)> = entries
        .iter()
        .map(|(t, p, r, _)| (t.clone(), *p, *r))
        .collect();
    let starts: Vec<(String, i32, i64)> = entries
        .iter()
        .map(|(t, p, _, s)| (t.clone(), *p, *s))
        .collect();
    storage::logdir::write_checkpoint(&dir.join(RECOVERY_CHECKPOINT), &recovery)?;
    storage::logdir::write_checkpoint(&dir.join(LOG_START_CHECKPOINT), &starts)?;
    Ok(())
}

fn run_shard(
    id: usize,
    ctx: Arc<BrokerContext>,
    listener: std::net::TcpListener,
    mut inbox: mpsc::Receiver<ShardMessage>,
    mut shutdown: watch::Receiver<bool>,
    ready: std::sync::mpsc::Sender<Result<usize, String>>,
    checkpoints: Arc<(Checkpoint, Checkpoint)>,
) -> anyhow::Result<ShardReport> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let start = (|| -> anyhow::Result<(Rc<ShardState>, tokio::net::TcpListener)> {
            let io = storage::IoBackend::new(io_kind(&ctx.config.io_backend))?;
            let state = Rc::new(ShardState {
                id,
                ctx: ctx.clone(),
                io,
                partitions: Default::default(),
                offline: Default::default(),
                inflight_bytes: Arc::new(Semaphore::new(
                    ctx.config.queued_max_request_bytes.min(u32::MAX as u64) as usize,
                )),
                metrics: ShardMetrics::default(),
                fetch_sessions: RefCell::new(crate::fetch_session::FetchSessionCache::new(
                    id,
                    ctx.config.max_incremental_fetch_session_cache_slots / ctx.shard_count().max(1),
                )),
            });
            shard::set_current(Some(state.clone()));
            let catalog = ctx.catalog.snapshot();
            let shards = ctx.shard_count();
            for topic in catalog.topics.values() {
                for p in 0..topic.partitions {
                    if shard::home_shard(&topic.name, p, shards) != id {
                        continue;
                    }
                    let key = (topic.name.to_string(), p);
                    let point = checkpoints.0.get(&key).copied().unwrap_or(0);
                    let part = match shard::open_partition(&state, topic, p, Some(point)) {
                        Ok(part) => part,
                        Err(e) => {
                            // One bad log must not take the other partitions down with it.
                            tracing::error!(topic = %topic.name, partition = p, error = %e,
                                "cannot open partition; serving it as offline (KAFKA_STORAGE_ERROR)");
                            state.offline.borrow_mut().insert((topic.name.clone(), p), e.to_string());
                            continue;
                        }
                    };
                    // Storage does not persist the log start offset (DeleteRecords may have
                    // moved it inside a segment): Kafka's checkpoint file does.
                    if let Some(&start) = checkpoints.1.get(&key) {
                        if start > part.log.log_start_offset() && start <= part.log.log_end_offset() {
                            part.log.advance_log_start(start)?;
                        }
                    }
                }
            }
            Ok((state, tokio::net::TcpListener::from_std(listener)?))
        })();
        let (state, listener) = match start {
            Ok(s) => {
                let _ = ready.send(Ok(id));
                s
            }
            Err(e) => {
                let _ = ready.send(Err(format!("{e:#}")));
                return Err(e);
            }
        };
        tracing::debug!(shard = id, partitions = state.partitions.borrow().len(), io = ?state.io.kind(), "shard ready");

        let inbox_state = state.clone();
        tokio::task::spawn_local(async move {
            while let Some(msg) = inbox.recv().await {
                msg(inbox_state.clone());
            }
        });
        if id == 0 {
            tokio::task::spawn_local(checkpoint_loop(ctx.clone(), shutdown.clone()));
        }
        tokio::task::spawn_local(flush_timer(state.clone(), shutdown.clone()));
        tokio::task::spawn_local(crate::cleaner::run(state.clone(), shutdown.clone()));
        tokio::task::spawn_local(shard::housekeeping::run(state.clone(), shutdown.clone()));
        // Transactions left prepared by the last run complete now, open ones time out, without
        // waiting for a client to touch their coordinator.
        crate::txn::TxnShard::of(&state).load_all();
        let mut connections = Vec::new();
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        state.count_connection(1);
                        state.ctx.steering.on_accept(id, std::os::fd::AsFd::as_fd(&stream));
                        let st = state.clone();
                        let sd = shutdown.clone();
                        connections.push(tokio::task::spawn_local(async move {
                            connection::serve(stream, st.clone(), sd).await;
                            st.count_connection(-1);
                        }));
                        connections.retain(|c| !c.is_finished());
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }
        drop(listener);
        // In-flight requests finish (bounded), then the logs close.
        let _ = tokio::time::timeout(Duration::from_secs(10), futures::future::join_all(connections)).await;
        let partitions: Vec<_> = state.partitions.borrow_mut().drain().collect();
        let mut report = Vec::new();
        for ((topic, p), part) in partitions {
            let start = part.log.log_start_offset();
            match Rc::try_unwrap(part) {
                Ok(part) => {
                    if let Err(e) = part.write_producer_snapshot() {
                        tracing::warn!(topic = %topic, partition = p, error = %e,
                            "producer snapshot not written; the next start rebuilds it from the log");
                    }
                    let end = part.log.log_end_offset();
                    part.log.close().await.with_context(|| format!("closing {topic}-{p}"))?;
                    report.push((topic.to_string(), p, end, start));
                }
                Err(part) => {
                    // Still referenced by a task that outlived the grace period: flush what we
                    // can and report only what is durable.
                    part.log.flush().await?;
                    report.push((topic.to_string(), p, part.log.durable_end_offset(), start));
                }
            }
        }
        shard::set_current(None);
        Ok(report)
    })
}

fn io_kind(name: &str) -> storage::IoBackendKind {
    match name {
        "uring" => storage::IoBackendKind::Uring,
        "sync" => storage::IoBackendKind::Sync,
        _ => storage::IoBackendKind::Auto,
    }
}

/// Kafka's `flush.ms` per topic: every 100 ms, partitions whose unflushed data is older than
/// their `flush.ms` are fdatasync'd. (Appends also honour `flush.messages` and `flush.ms` as
/// they complete; this timer covers a partition that goes quiet.)
async fn flush_timer(state: Rc<ShardState>, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        let partitions: Vec<_> = state.partitions.borrow().values().cloned().collect();
        let now = std::time::Instant::now();
        for p in partitions {
            if let Err(e) = p.flush_if_due(now).await {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "flush.ms flush failed");
            }
        }
    }
}

/// Writes the recovery-point checkpoint periodically so a crash recovers only the tail.
async fn checkpoint_loop(ctx: Arc<BrokerContext>, mut shutdown: watch::Receiver<bool>) {
    let every = Duration::from_millis(
        ctx.config
            .log_flush_offset_checkpoint_interval_ms
            .clamp(100, i64::MAX) as u64,
    );
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Err(e) = checkpoint_now(&ctx).await {
            tracing::warn!(error = %e, "writing checkpoints failed");
        }
    }
}

/// Gathers every shard's recovery points and log start offsets and writes Kafka's two
/// checkpoint files. Besides the periodic loop, DeleteRecords calls it before answering, so
/// a log start offset it reported survives a crash. One writer at a time: a writer that
/// gathered earlier must not overwrite a newer file.
pub async fn checkpoint_now(ctx: &BrokerContext) -> anyhow::Result<()> {
    static WRITER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one = WRITER.lock().await;
    let mut entries = Vec::new();
    let mut txn_indexes = Vec::new();
    for s in 0..ctx.shard_count() {
        let (e, dirty) = shard::frontend::invoke_on(ctx, s, |state| async move {
            let parts = state.partitions.borrow();
            // Aborted-transaction index entries written so far lie below the log end; the
            // ones below the recovery point gathered here must be synced before it is
            // checkpointed (storage's txn_index: above it, reopening rebuilds them).
            let dirty: Vec<_> = parts
                .values()
                .flat_map(|part| part.log.take_dirty_txn_indexes())
                .collect();
            let e: Vec<_> = parts
                .iter()
                .map(|((t, p), part)| {
                    (
                        t.to_string(),
                        *p,
                        part.log.durable_end_offset(),
                        part.log.log_start_offset(),
                    )
                })
                .collect();
            (e, dirty)
        })
        .await?;
        entries.extend(e);
        txn_indexes.extend(dirty);
    }
    let dir = ctx.config.data_dir.clone();
    // fsyncs: off the shard thread.
    tokio::task::spawn_blocking(move || {
        for path in &txn_indexes {
            match std::fs::File::open(path).and_then(|f| f.sync_data()) {
                Ok(()) => {}
                // Deleted by retention or replaced by the cleaner (which syncs its output).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(anyhow::anyhow!("syncing {}: {e}", path.display()));
                }
            }
        }
        write_checkpoints(&dir, &entries)
    })
    .await?
}
