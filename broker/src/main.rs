//! The `strom` binary: parse flags, load config, run. Everything else lives in the library.

use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};
use strom::cli::{self, cluster::ClusterCmd, group::GroupCmd, topic::TopicCmd, AdminArgs};

#[derive(Parser)]
#[command(
    name = "strom",
    version,
    about = "A Kafka-compatible streaming broker, thread-per-core"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker (embedded defaults; no config file needed).
    Serve(ServeArgs),
    /// Move topics and group offsets from a Kafka cluster, offsets preserved (docs/migration.md).
    #[command(subcommand)]
    Migrate(strom::migrate::MigrateCommand),
    /// Run sink connectors (Kafka topics into vector databases) as a standalone process, or
    /// show their status.
    Connect(ConnectArgs),
    /// Topics: create, list, describe, alter-config, add-partitions, delete, trim-prefix.
    Topic(AdminArgs<TopicCmd>),
    /// Produce records read from stdin.
    Produce(cli::ProduceCmd),
    /// Consume records to stdout.
    Consume(cli::ConsumeCmd),
    /// Consumer groups: list, describe (lag), seek, delete.
    Group(AdminArgs<GroupCmd>),
    /// The cluster: info, health, broker configs.
    Cluster(AdminArgs<ClusterCmd>),
    /// Schema Registry (Confluent's REST API): schemas, subjects, compatibility levels, modes.
    Schema(cli::schema::SchemaArgs),
    /// Shell completions: `strom completion bash > /etc/bash_completion.d/strom`.
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Man pages: strom.1 to stdout, or one page per command into --dir.
    Man {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// ACLs: create, list, delete (CreateAcls, DescribeAcls, DeleteAcls).
    Acl(AdminArgs<cli::acl::AclCmd>),
    /// SASL/SCRAM users of a running broker (list, create, update, delete), or `add` into a
    /// stopped broker's data dir (Kafka 4's `kafka-storage format --add-scram`).
    User(AdminArgs<cli::user::UserCmd>),
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct ConnectArgs {
    /// Connector TOML file (see connectors/README.md).
    #[arg(long, required = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<ConnectCommand>,
}

#[derive(Subcommand)]
enum ConnectCommand {
    /// Each connector's records written, DLQ records, errors and lag (from its admin port).
    Status(cli::connect::StatusArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML config file (see deploy/strom.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Kafka listener, HOST:PORT (default 127.0.0.1:9092).
    #[arg(long)]
    listen: Option<String>,
    /// Address advertised to clients, HOST:PORT (default: the listener).
    #[arg(long)]
    advertised_listener: Option<String>,
    /// Data directory (default ./strom-data).
    #[arg(long)]
    data_dir: Option<String>,
    /// Shards (threads pinned to cores); 0 = cores available.
    #[arg(long)]
    shards: Option<String>,
    /// Kafka node id (default 0).
    #[arg(long)]
    node_id: Option<String>,
    /// Admin/metrics HTTP listener, HOST:PORT (default 127.0.0.1:9644).
    #[arg(long)]
    metrics_listen: Option<String>,
    /// Any other config key, KEY=VALUE (Kafka names with dots or underscores), repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Topic(a) => client_command(cli::Command::Topic(a)),
        Command::Group(a) => client_command(cli::Command::Group(a)),
        Command::Cluster(a) => client_command(cli::Command::Cluster(a)),
        Command::Produce(a) => client_command(cli::Command::Produce(a)),
        Command::Consume(a) => client_command(cli::Command::Consume(a)),
        Command::Schema(a) => client_command(cli::Command::Schema(a)),
        Command::Connect(ConnectArgs {
            command: Some(ConnectCommand::Status(a)),
            ..
        }) => client_command(cli::Command::ConnectStatus(a)),
        Command::Completion { shell } => {
            cli::completion(shell, Cli::command());
            Ok(())
        }
        Command::Man { dir } => {
            cli::man(Cli::command(), dir.as_deref())?;
            Ok(())
        }
        Command::Acl(a) => client_command(cli::Command::Acl(a)),
        Command::User(a) => client_command(cli::Command::User(a)),
        command => run_server(command),
    }
}

/// A client command (docs/cli.md) exits with a code that says what happened.
fn client_command(c: cli::Command) -> ! {
    std::process::exit(cli::run(c))
}

/// The long-running commands: the broker, migration, connectors.
fn run_server(command: Command) -> anyhow::Result<()> {
    // Levels changeable at runtime (BROKER_LOGGER configs, `strom::logging`).
    strom::logging::Loggers::init_subscriber();
    match command {
        Command::Serve(args) => serve(args),
        Command::Migrate(cmd) => {
            raise_fd_limit();
            let code = strom::migrate::run(cmd)?;
            std::process::exit(code);
        }
        Command::Connect(args) => connect(args),
        _ => unreachable!("client commands are dispatched by main"),
    }
}

fn connect(args: ConnectArgs) -> anyhow::Result<()> {
    let path = args
        .config
        .ok_or_else(|| anyhow::anyhow!("strom connect needs --config FILE"))?;
    let file = strom_connectors::config::load(&path)?;
    strom_connectors::run_connect(file, async {
        if let Err(e) = shutdown_signal().await {
            tracing::warn!(error = %e, "no signal handler; stop with kill -9");
            std::future::pending::<()>().await;
        }
        tracing::info!("signal received; stopping connectors");
    })?;
    Ok(())
}

/// The connectors of the serve config file (`[[connectors]]`), if any.
fn serve_connectors(
    path: Option<&std::path::Path>,
) -> anyhow::Result<Option<strom_connectors::ConnectFile>> {
    let Some(path) = path else { return Ok(None) };
    let text = std::fs::read_to_string(path)?;
    let table: toml::Table = toml::from_str(&text)?;
    Ok(strom_connectors::config::from_serve_table(&table)?)
}

/// The named redaction rule sets of the serve config file (`[redact.rule_sets.NAME]`), made
/// known before any topic's `strom.redact.rules` is compiled.
fn install_redaction_rules(path: Option<&std::path::Path>) -> anyhow::Result<()> {
    let Some(path) = path else { return Ok(()) };
    let table: toml::Table = toml::from_str(&std::fs::read_to_string(path)?)?;
    if let Some(config) = strom::redact::config::from_serve_table(&table)? {
        strom::redact::config::install(&config)
            .map_err(|e| anyhow::anyhow!("[redact] in {}: {e}", path.display()))?;
    }
    Ok(())
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut flags: Vec<(String, String)> = Vec::new();
    let named = [
        ("listen", &args.listen),
        ("advertised_listener", &args.advertised_listener),
        ("data_dir", &args.data_dir),
        ("shards", &args.shards),
        ("node_id", &args.node_id),
        ("metrics_listen", &args.metrics_listen),
    ];
    for (key, value) in named {
        if let Some(v) = value {
            flags.push((key.to_string(), v.clone()));
        }
    }
    for kv in &args.set {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--set expects KEY=VALUE, got `{kv}`"))?;
        flags.push((k.to_string(), v.to_string()));
    }
    let (config, origins) = strom::config::load(args.config.as_deref(), std::env::vars(), &flags)?;
    let connectors = serve_connectors(args.config.as_deref())?;
    install_redaction_rules(args.config.as_deref())?;
    raise_fd_limit();
    let server = strom::Server::start(config, origins)?;
    println!(
        "strom listening on {} (admin {})",
        server.kafka_addr, server.metrics_addr
    );
    // Connectors are Kafka clients of this broker on their own thread and runtime, never on a
    // shard: they reach the shards over TCP like any consumer.
    let connectors = match connectors {
        Some(file) => {
            // The console's connectors page reads the same metrics the connectors' port serves.
            let metrics = strom_connectors::Metrics::new();
            server.connectors.set(metrics.clone());
            // Their sink spans go out through this node's exporter, when it has one.
            let tracer = server.ctx.otel.as_ref().map(|o| o.tracer());
            Some(strom_connectors::start(
                file.connectors,
                Some(file.admin_listen),
                metrics,
                tracer,
            )?)
        }
        None => None,
    };
    wait_for_signal()?;
    tracing::info!("signal received; shutting down");
    if let Some(c) = connectors {
        c.stop();
    }
    server.shutdown()
}

async fn shutdown_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

fn wait_for_signal() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(shutdown_signal())?;
    Ok(())
}

/// Every connection and every segment file is a descriptor; the usual soft limit of 1024 is
/// far below what a broker needs, so take the hard limit (Kafka's docs ask operators to).
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the rlimit struct we own.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            let from = l.rlim_cur;
            l.rlim_cur = l.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &l) == 0 {
                tracing::debug!(from, to = l.rlim_cur, "raised the open-file limit");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap's own checks of the whole tree: no two arguments of a command share an id (a
    /// positional `user` would shadow the global `--user`), every default parses.
    #[test]
    fn given_the_command_tree_when_clap_checks_it_then_consistent() {
        Cli::command().debug_assert();
    }
}
