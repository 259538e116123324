//! `strom`'s client commands, in rpk's spirit: `topic`, `produce`, `consume`, `group`,
//! `cluster`, `acl`, `user`, `schema`, `connect status`, `completion`, `man` (docs/cli.md). They are Kafka clients
//! and work against Strom and any Apache Kafka broker.
//!
//! Produce and consume go through librdkafka (the same build the connectors link); the admin
//! commands through `client::Client`, a small kafka-protocol client whose calls librdkafka
//! lacks. The read and write operations (`topic::describe`, `group::seek`, …) return serde
//! structs: the CLI prints them as tables or JSON, and the console on the admin port serves
//! the same structs from the same functions, run in-process (`Client::local`).

pub mod acl;
pub mod client;
pub mod cluster;
pub mod connect;
pub mod consume;
pub mod error;
mod exchange;
mod fail_fast;
pub mod group;
pub mod messages;
pub mod offsets;
pub mod output;
pub mod produce;
pub mod registry;
pub mod schema;
pub mod secure;
pub mod template;
pub mod topic;
pub mod user;

use std::io::{IsTerminal, Write};
use std::time::Duration;

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

pub use error::CliError;
use output::Format;

/// Where the brokers are; every client command takes these.
#[derive(clap::Args, Clone, Debug)]
pub struct ConnArgs {
    /// Bootstrap brokers, HOST:PORT[,HOST:PORT...].
    #[arg(
        short = 'b',
        long,
        env = "STROM_BROKERS",
        default_value = "127.0.0.1:9092",
        global = true
    )]
    pub brokers: String,
    /// Timeout of each request (and of connecting), in milliseconds.
    #[arg(
        long = "timeout-ms",
        env = "STROM_TIMEOUT_MS",
        default_value_t = 30_000,
        global = true
    )]
    pub timeout_ms: u64,
    #[command(flatten)]
    pub security: secure::SecurityArgs,
}

impl ConnArgs {
    /// The admin client, connected (and authenticated) as the flags say.
    pub async fn client(&self) -> Result<client::Client, CliError> {
        client::Client::connect_secure(&self.brokers, self.timeout(), self.security.load()?).await
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.max(1))
    }
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }
}

/// `strom topic …`, `strom group …`, `strom cluster …`: admin commands with table/JSON output.
#[derive(clap::Args)]
pub struct AdminArgs<C: clap::Subcommand> {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Output: table (for people) or json (stable field names, for scripts).
    #[arg(long, value_enum, default_value_t = Format::Table, global = true)]
    pub format: Format,
    #[command(subcommand)]
    pub cmd: C,
}

#[derive(clap::Args)]
pub struct ProduceCmd {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub args: produce::ProduceArgs,
}

#[derive(clap::Args)]
pub struct ConsumeCmd {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub args: consume::ConsumeArgs,
}

/// The client commands, for `main` to dispatch.
pub enum Command {
    Topic(AdminArgs<topic::TopicCmd>),
    Group(AdminArgs<group::GroupCmd>),
    Cluster(AdminArgs<cluster::ClusterCmd>),
    Produce(ProduceCmd),
    Consume(ConsumeCmd),
    ConnectStatus(connect::StatusArgs),
    Schema(schema::SchemaArgs),
    Acl(AdminArgs<acl::AclCmd>),
    User(AdminArgs<user::UserCmd>),
}

/// Runs a client command; returns the process exit code (error::EXIT_*), after printing the
/// error and what to do about it.
pub fn run(cmd: Command) -> i32 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("strom: error: starting the runtime: {e}");
            return error::EXIT_KAFKA;
        }
    };
    let r = rt.block_on(async move {
        match cmd {
            Command::Topic(a) => {
                let mut c = a.conn.client().await?;
                topic::run(&mut c, a.cmd, a.format).await
            }
            Command::Group(a) => {
                let mut c = a.conn.client().await?;
                group::run(&mut c, a.cmd, a.format).await
            }
            Command::Cluster(a) => {
                let mut c = a.conn.client().await?;
                cluster::run(&mut c, a.cmd, a.format).await
            }
            Command::Acl(a) => {
                let mut c = a.conn.client().await?;
                acl::run(&mut c, a.cmd, a.format).await
            }
            Command::User(AdminArgs {
                cmd: user::UserCmd::Add(add),
                conn,
                ..
            }) => user::add(add, conn.security.password),
            Command::User(a) => {
                let mut c = a.conn.client().await?;
                user::run(&mut c, a.cmd, a.format).await
            }
            Command::Produce(p) => produce::run(&p.conn, p.args).await,
            Command::Consume(c) => consume::run(&c.conn, c.args).await,
            Command::ConnectStatus(a) => connect::status(a).await,
            Command::Schema(a) => schema::run(a).await,
        }
    });
    // librdkafka's threads and pending blocking reads (stdin) must not hold the exit.
    rt.shutdown_timeout(Duration::from_millis(100));
    match r {
        Ok(()) => error::EXIT_OK,
        Err(e) => report(&e),
    }
}

fn report(e: &CliError) -> i32 {
    let code = e.exit_code();
    if code == error::EXIT_OK {
        return code;
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "strom: error: {e}");
    if let Some(h) = e.hint() {
        let _ = writeln!(err, "hint: {h}");
    }
    code
}

/// Shell completions for `strom` (`strom completion bash > /etc/bash_completion.d/strom`).
pub fn completion(shell: clap_complete::Shell, mut cmd: clap::Command) {
    clap_complete::generate(shell, &mut cmd, "strom", &mut std::io::stdout());
}

/// Man pages: `strom.1` to stdout, or one page per command (`strom-topic-create.1`, …) into
/// `dir`.
pub fn man(cmd: clap::Command, dir: Option<&std::path::Path>) -> std::io::Result<()> {
    match dir {
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout()),
        Some(d) => {
            std::fs::create_dir_all(d)?;
            clap_mangen::generate_to(cmd, d)
        }
    }
}

pub fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// `KEY=VALUE` → (KEY, VALUE).
pub fn split_kv(s: &str) -> Result<(String, String), CliError> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| CliError::Usage(format!("expected KEY=VALUE, got {s:?}")))?;
    if k.trim().is_empty() {
        return Err(CliError::Usage(format!("empty key in {s:?}")));
    }
    Ok((k.trim().to_string(), v.to_string()))
}

/// Asks on the terminal; without one there is nobody to ask, so the answer is no.
pub fn confirm(question: &str) -> Result<bool, CliError> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_key_value_pairs_when_split_then_value_may_hold_equals() {
        assert_eq!(split_kv("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert_eq!(
            split_kv("retention.ms=").unwrap(),
            ("retention.ms".into(), String::new())
        );
        assert!(split_kv("novalue").is_err());
        assert!(split_kv("=x").is_err());
    }
}
