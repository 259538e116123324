//! `strom migrate`: move topics, their data and consumer group offsets from a Kafka cluster
//! to Strom with every offset preserved (see docs/migration.md).
//!
//! The migrator owns the data dir while it runs (it holds the data-dir lock, so `strom serve`
//! cannot run on it at the same time): one writer per log is what makes "same offsets" a
//! simple invariant instead of a race with producers on Strom. It copies raw record batches
//! (no decompression) at their original offsets, so a consumer's committed offset means the
//! same record on both sides.
//!
//! `client` talks to the source, `target` writes Strom's data dir, `mirror` is the copy loop,
//! `import` adopts a stopped Kafka broker's log dirs offline (`source` reads them, `kraft`
//! its metadata log),
//! `state` the progress file that `strom migrate status` compares with the source,
//! `metrics` what mirror and import serve on the admin address while they run.

pub mod client;
pub mod import;
pub mod kraft;
pub mod metrics;
pub mod mirror;
pub mod source;
pub mod state;
pub mod target;

use std::path::PathBuf;

/// Why a migration step failed. `Refused` is the migrator declining to touch data that
/// does not match the source; nothing was written for it.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("source: {0}")]
    Source(String),
    #[error("target: {0}")]
    Target(String),
    #[error("refused: {0}")]
    Refused(String),
    #[error("storage: {0}")]
    Storage(#[from] storage::StorageError),
    #[error("{0}")]
    Usage(String),
}

#[derive(clap::Args, Debug, Clone)]
pub struct TargetArgs {
    /// Strom's data directory (default ./strom-data); `strom serve` must not be running on it.
    #[arg(long)]
    pub data_dir: Option<String>,
    /// Strom config file (for data_dir, offsets_topic_num_partitions, io_backend).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct AdminArgs {
    /// `/metrics` and `/health` while the migrator runs, HOST:PORT (default: the config's
    /// `metrics_listen`, where `strom serve` will serve; if that cannot be bound the
    /// migration goes on without metrics, while an address given here must bind).
    #[arg(long, value_name = "HOST:PORT")]
    pub admin_listen: Option<std::net::SocketAddr>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct MirrorArgs {
    /// Source Kafka bootstrap address, HOST:PORT.
    #[arg(long)]
    pub source: String,
    /// Topics to copy: a regular expression matching whole names (default: every topic
    /// except internal ones).
    #[arg(long, default_value = ".*")]
    pub topics: String,
    /// Consumer groups whose committed offsets are copied (whole-name regular expression).
    #[arg(long, default_value = ".*")]
    pub groups: String,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Stop once every partition has reached the source's high watermark (and group
    /// offsets were copied after that); without it the mirror runs until interrupted.
    #[arg(long)]
    pub until_caught_up: bool,
    /// Seconds between group offset copies.
    #[arg(long, default_value_t = 10)]
    pub group_interval_secs: u64,
    /// Request timeout towards the source, seconds.
    #[arg(long, default_value_t = 30)]
    pub timeout_secs: u64,
    /// Upper bound of one fetch answer, bytes (also bounds the migrator's memory).
    #[arg(long, default_value_t = 32 << 20)]
    pub fetch_max_bytes: i32,
}

#[derive(clap::Args, Debug, Clone)]
pub struct StatusArgs {
    /// Source bootstrap (default: the one the mirror recorded).
    #[arg(long)]
    pub source: Option<String>,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Request timeout towards the source, seconds.
    #[arg(long, default_value_t = 30)]
    pub timeout_secs: u64,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ImportArgs {
    /// The stopped Kafka broker's log dir; repeat it for each of its `log.dirs` (every
    /// partition must be in exactly one).
    #[arg(long, required = true)]
    pub from: Vec<PathBuf>,
    /// Where Kafka's KRaft metadata log is (its `metadata.log.dir`, or the
    /// `__cluster_metadata-0` dir itself) when it is not in one of the `--from` dirs. Topic
    /// configs are read from it when `--configs-from` is not given.
    #[arg(long)]
    pub metadata_dir: Option<PathBuf>,
    /// Hard-link Kafka's closed segments into Strom's data dir instead of copying them
    /// (same filesystem only; the last segment of each partition is always copied).
    #[arg(long)]
    pub link: bool,
    /// Topics to import (whole-name regular expression; internal topics never are).
    #[arg(long, default_value = ".*")]
    pub topics: String,
    /// Consumer groups whose committed offsets are carried over (whole-name regular expression).
    #[arg(long, default_value = ".*")]
    pub groups: String,
    /// A running Kafka cluster (HOST:PORT) to read the topics' configs from (DescribeConfigs);
    /// without it they are read from Kafka's KRaft metadata log.
    #[arg(long)]
    pub configs_from: Option<String>,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Request timeout towards `--configs-from`, seconds.
    #[arg(long, default_value_t = 30)]
    pub timeout_secs: u64,
}

#[derive(clap::Subcommand, Debug)]
pub enum MigrateCommand {
    /// Offline: adopt the partitions, producer state and group offsets of a stopped Kafka
    /// broker's log dir (every batch verified first).
    Import(ImportArgs),
    /// Copy topics, batches (at their original offsets) and group offsets from Kafka.
    Mirror(MirrorArgs),
    /// Per partition: source end, copied, lag; per group: offsets copied. Exit code 0
    /// only when everything is caught up.
    Status(StatusArgs),
}

/// Loads Strom's config the way `strom serve` does, with `--data-dir` on top.
pub fn broker_config(
    t: &TargetArgs,
) -> anyhow::Result<(
    crate::config::BrokerConfig,
    std::collections::BTreeMap<String, crate::config::Origin>,
)> {
    let mut flags = Vec::new();
    if let Some(d) = &t.data_dir {
        flags.push(("data_dir".to_string(), d.clone()));
    }
    Ok(crate::config::load(
        t.config.as_deref(),
        std::env::vars(),
        &flags,
    )?)
}

/// Starts the metrics listener on `--admin-listen` or the config's admin address.
fn serve_metrics(
    t: &TargetArgs,
    admin: &AdminArgs,
    registry: prometheus::Registry,
) -> anyhow::Result<Option<metrics::AdminServer>> {
    let (config, _) = broker_config(t)?;
    Ok(metrics::serve(admin, config.metrics_listen, registry)?)
}

/// Runs a migrate subcommand; returns the process exit code.
pub fn run(cmd: MigrateCommand) -> anyhow::Result<i32> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let registry = prometheus::Registry::new();
    match cmd {
        MigrateCommand::Mirror(args) => {
            let m = metrics::MirrorMetrics::new(&registry);
            let _admin = serve_metrics(&args.target, &args.admin, registry)?;
            local.block_on(&rt, mirror::run(args, m))?;
            Ok(0)
        }
        MigrateCommand::Import(args) => {
            let m = metrics::ImportMetrics::new(&registry);
            let _admin = serve_metrics(&args.target, &args.admin, registry)?;
            let report = local.block_on(&rt, import::run(args, &m))?;
            print!("{report}");
            Ok(0)
        }
        MigrateCommand::Status(args) => {
            let caught_up = local.block_on(&rt, state::status(args))?;
            Ok(if caught_up { 0 } else { 1 })
        }
    }
}
