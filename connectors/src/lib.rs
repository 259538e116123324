//! Strom's sink connectors: Kafka topics of JSON records carrying embeddings, into vector
//! databases: pgvector, Chroma, Weaviate, Pinecone (see README.md for the config reference).
//!
//! Data flow, per connector: librdkafka consumer (group member, manual commits) →
//! [`record::decode`] (JSON, vector, deterministic id) → schema check → [`sink::Sink`] write
//! (batched, retried) → dead-letter records produced and acknowledged → offsets committed.
//! The crate consumes over the Kafka protocol like any client: it works against Strom or any
//! Kafka cluster, and never links Strom's storage.
//!
//! A record whose headers carry a trace context (`traceparent`, `x-trace-id`) gets a
//! `sink {collection}` span in its trace when a tracer is configured ([`trace`], shared with
//! the broker, which parses the same headers).
//!
//! [`start`] runs connectors on a dedicated thread with its own tokio runtime, so when
//! `strom serve` starts them they never run on a shard's thread.

pub mod config;
pub mod declared;
pub mod embedding;
pub mod mapping;
pub mod metrics;
pub mod record;
pub mod registry;
pub mod runner;
pub mod sink;
pub mod topic_configs;
pub mod trace;

use std::net::SocketAddr;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracer;
use tokio::sync::watch;

pub use config::{ConnectFile, ConnectorConfig};
pub use metrics::Metrics;
pub use runner::{ConnectorError, Runner};

/// How long a connector that failed waits before `start` restarts it.
const RESTART_DELAY: Duration = Duration::from_secs(10);

/// Connectors running on their own thread (see [`start`]).
pub struct Running {
    shutdown: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub admin_addr: Option<SocketAddr>,
}

impl Running {
    /// Asks every connector to finish its batch, commit and stop; waits for them.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Starts `connectors` on a dedicated thread (a two-worker tokio runtime), with `/metrics` on
/// `admin` when given (`metrics` may be shared with another admin endpoint), their sink spans
/// through `tracer` when given (`strom serve`'s own exporter). A connector that fails is
/// logged and restarted after [`RESTART_DELAY`]: inside `strom serve` nothing else would
/// restart it.
pub fn start(
    connectors: Vec<ConnectorConfig>,
    admin: Option<SocketAddr>,
    metrics: Metrics,
    tracer: Option<SdkTracer>,
) -> std::io::Result<Running> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("strom-connect")
        .enable_all()
        .build()?;
    let admin_listener = match admin {
        Some(addr) => Some(rt.block_on(metrics::bind_admin(addr))?),
        None => None,
    };
    let admin_addr = admin_listener.as_ref().and_then(|l| l.local_addr().ok());
    let (tx, rx) = watch::channel(false);
    let thread = std::thread::Builder::new()
        .name("strom-connectors".into())
        .spawn(move || {
            rt.block_on(async move {
                if let Some(l) = admin_listener {
                    tokio::spawn(metrics::serve_admin(l, metrics.clone()));
                }
                let tasks: Vec<_> = connectors
                    .into_iter()
                    .map(|cfg| {
                        let run = supervise(cfg, metrics.clone(), tracer.clone(), rx.clone());
                        tokio::spawn(run)
                    })
                    .collect();
                futures::future::join_all(tasks).await;
            });
        })?;
    Ok(Running {
        shutdown: tx,
        thread: Some(thread),
        admin_addr,
    })
}

async fn supervise(
    cfg: ConnectorConfig,
    metrics: Metrics,
    tracer: Option<SdkTracer>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let result = match Runner::start(cfg.clone(), metrics.clone(), tracer.clone()).await {
            Ok(r) => r.run(shutdown.clone()).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => return,
            Err(e) => {
                tracing::error!(error = %e, "connector failed; restarting in {RESTART_DELAY:?}");
                metrics
                    .errors
                    .with_label_values(&[&cfg.name, "connector_failed"])
                    .inc();
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RESTART_DELAY) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// `strom connect`: runs the file's connectors on the current thread until `shutdown`
/// resolves or one fails (then returns its error, so a supervisor sees a non-zero exit).
pub fn run_connect(
    file: ConnectFile,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), ConnectorError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    // Built outside the runtime: the exporter's blocking HTTP client must not be made (or
    // dropped) on a tokio worker.
    let provider = match trace::provider(
        &file.otel_exporter_otlp_endpoint,
        file.otel_traces_sampler_ratio,
        "strom-connect",
        0,
    ) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "no OpenTelemetry exporter; sink spans off");
            None
        }
    };
    let tracer = provider.as_ref().map(|p| p.tracer("strom-connect"));
    let result = rt.block_on(async move {
        let metrics = Metrics::new();
        match metrics::bind_admin(file.admin_listen).await {
            Ok(l) => {
                tracing::info!(admin = %file.admin_listen, "connector admin listening (/metrics, /health)");
                tokio::spawn(metrics::serve_admin(l, metrics.clone()));
            }
            Err(e) => tracing::warn!(admin = %file.admin_listen, error = %e, "admin listener not bound; no metrics"),
        }
        let (tx, rx) = watch::channel(false);
        let mut tasks = tokio::task::JoinSet::new();
        for cfg in file.connectors {
            let (metrics, rx) = (metrics.clone(), rx.clone());
            let tracer = tracer.clone();
            tasks.spawn(async move { Runner::start(cfg, metrics, tracer).await?.run(rx).await });
        }
        tokio::pin!(shutdown);
        let mut first_error = None;
        loop {
            tokio::select! {
                _ = &mut shutdown, if !*tx.borrow() => {
                    let _ = tx.send(true);
                }
                done = tasks.join_next() => match done {
                    None => break,
                    Some(Ok(Ok(()))) => {}
                    Some(Ok(Err(e))) => {
                        tracing::error!(error = %e, "connector failed; stopping the others");
                        first_error.get_or_insert(e);
                        let _ = tx.send(true);
                    }
                    Some(Err(join)) => {
                        tracing::error!(error = %join, "connector task panicked");
                        let _ = tx.send(true);
                    }
                },
            }
        }
        first_error.map_or(Ok(()), Err)
    });
    drop(rt);
    // Sends the spans the batch processor still holds.
    if let Some(p) = provider {
        let _ = p.shutdown();
    }
    result
}
