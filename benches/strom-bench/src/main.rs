//! strom-bench: the same librdkafka workloads against any Kafka-protocol broker, next to the
//! machine's own limits, with the broker's CPU and memory cost read from /proc.
//!
//!   strom-bench run --bootstrap 127.0.0.1:9092 --name strom [--pid PID] --out strom.json
//!   strom-bench limits --dir /path/on/the/data/disk --out limits.json
//!   strom-bench report limits.json strom.json kafka.json > table.md
//!   strom-bench report --tls strom.json strom+tls.json kafka.json kafka+tls.json
//!   strom-bench plot --dir results/ limits.json strom.json kafka.json   # SVG charts
//!
//! A cluster: `--bootstrap` lists its nodes, `--pid` takes every node's PID (repeated or
//! comma-separated; CPU and memory are summed), `--replication-factor 3` creates replicated
//! topics (`min.insync.replicas` 2, as a production cluster of 3 runs), `wait --brokers 3`
//! waits for the cluster to form, and `report --ratios` adds the first broker's ratio to each
//! other one.
//!
//! Every workload is bounded in time (`--seconds`); progress goes to stderr. benches/run.sh
//! (one node each) and benches/cluster.sh (three) start the brokers and run the steps.

mod limits;
mod plot;
mod proc;
mod report;
mod tls_report;
mod workloads;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use serde::{Deserialize, Serialize};

use workloads::Target;

#[derive(Parser)]
#[command(about = "Kafka-protocol broker benchmarks through librdkafka")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Runs the workload suite against one broker.
    Run(RunArgs),
    /// Measures the machine's limits (fdatasync writes, loopback TCP, memcpy).
    Limits {
        /// A directory on the disk the brokers write to.
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value_t = 3)]
        seconds: u64,
        #[arg(long)]
        out: PathBuf,
    },
    /// Renders result files (from `run`, `limits` and benches/quick/failover.py) as
    /// markdown tables.
    Report {
        /// Adds columns with the first broker's figures over each other broker's.
        #[arg(long)]
        ratios: bool,
        /// Instead: TLS against plaintext, pairing each run `B` with a run `B+tls`
        /// (benches/tls.sh).
        #[arg(long, conflicts_with = "ratios")]
        tls: bool,
        files: Vec<PathBuf>,
    },
    /// Waits until the brokers at `--bootstrap` list `--brokers` brokers in Metadata.
    Wait {
        #[arg(long)]
        bootstrap: String,
        #[arg(long, default_value_t = 1)]
        brokers: usize,
        #[arg(long, default_value_t = 180)]
        timeout: u64,
    },
    /// Draws result files as SVG charts (throughput.svg, latency.svg) into `--dir`.
    Plot {
        #[arg(long)]
        dir: PathBuf,
        files: Vec<PathBuf>,
    },
}

/// Everything the result files hold: broker runs (in the order given), the limits and the
/// failover measurements.
#[derive(Default)]
struct Loaded {
    brokers: Vec<BrokerRun>,
    limits: Option<LimitsRun>,
    failover: Vec<report::Failover>,
}

fn load(files: &[PathBuf]) -> anyhow::Result<Loaded> {
    let mut l = Loaded::default();
    for f in files {
        let bytes = std::fs::read(f)?;
        match serde_json::from_slice::<ResultFile>(&bytes)
            .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?
        {
            ResultFile::Broker(b) => l.brokers.push(b),
            ResultFile::Limits(x) => l.limits = Some(x),
            ResultFile::Failover(x) => l.failover.extend(x.failover),
        }
    }
    Ok(l)
}

#[derive(Parser)]
struct RunArgs {
    #[arg(long)]
    bootstrap: String,
    /// Name of the broker in the tables.
    #[arg(long)]
    name: String,
    /// The broker's process id, for CPU seconds and RSS from /proc; a cluster's nodes, as
    /// `--pid A --pid B` or `--pid A,B,C`: their figures are summed.
    #[arg(long, value_delimiter = ',')]
    pid: Vec<u32>,
    /// Replicas of each topic created (1: a single node).
    #[arg(long, default_value_t = 1)]
    replication_factor: i32,
    /// The topics' `min.insync.replicas`; default 2 from a replication factor of 3 up (what
    /// a production cluster sets, so acks=all survives one lost replica and no more), else
    /// the broker's default.
    #[arg(long)]
    min_insync_replicas: Option<u32>,
    /// Seconds per workload (each is also bounded by its flush/consume deadline).
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    #[arg(long, value_delimiter = ',', default_value = "100,1024,16384")]
    sizes: Vec<usize>,
    /// Partitions and producers of the "N" produce cases.
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    #[arg(long, default_value_t = 2)]
    producers: usize,
    /// The acks of the produce cases ("1", "all"). The consume case reads the 1 KiB
    /// N-partition topic of the first one.
    #[arg(long, value_delimiter = ',', default_value = "1,all")]
    acks: Vec<String>,
    /// Fixed rates (messages/s) of the end-to-end latency runs.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,50000")]
    rates: Vec<u64>,
    /// Rate of the embedding workload (384 float32 = 1536 B per record); 0 leaves it out.
    #[arg(long, default_value_t = 10000)]
    embedding_rate: u64,
    /// Runs only the workloads whose name contains this (e.g. "acks=all 1 part"), to profile
    /// one of them; the consume row needs its source, "produce 1 KiB acks=1 N part".
    #[arg(long)]
    only: Option<String>,
    /// A librdkafka property KEY=VALUE for every client of the run (repeated), e.g.
    /// `--client-config security.protocol=ssl --client-config ssl.ca.location=ca.pem` for a
    /// TLS listener (benches/tls.sh).
    #[arg(long, value_parser = key_value)]
    client_config: Vec<(String, String)>,
    #[arg(long)]
    out: PathBuf,
}

fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, not {s:?}")),
    }
}

/// One measured line of a broker's run.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
struct Row {
    workload: String,
    msgs_per_s: Option<f64>,
    mb_per_s: Option<f64>,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    p999_ms: Option<f64>,
    max_ms: Option<f64>,
    /// Broker CPU seconds during the workload.
    cpu_s: Option<f64>,
    /// Broker CPU seconds per GB moved (ingested or served).
    cpu_s_per_gb: Option<f64>,
    /// Broker resident memory at the end of the workload (file-backed pages included).
    rss_mb: Option<f64>,
    /// Broker resident anonymous memory at the end of the workload.
    #[serde(default)]
    rss_anon_mb: Option<f64>,
    /// Failures, shortfalls: anything that makes the figure not the whole story.
    note: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct BrokerRun {
    broker: String,
    bootstrap: String,
    date: String,
    machine: String,
    rows: Vec<Row>,
}

#[derive(Debug, Serialize, Deserialize)]
struct LimitsRun {
    date: String,
    machine: String,
    limits: Vec<limits::Limit>,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum ResultFile {
    Broker(BrokerRun),
    Limits(LimitsRun),
    Failover(report::FailoverFile),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Run(args) => run(args),
        Cmd::Limits { dir, seconds, out } => {
            let t = Duration::from_secs(seconds);
            let mut l = Vec::new();
            for block in [4 << 10, 64 << 10, 1 << 20] {
                eprintln!("limits: fdatasync writes of {}", limits::human_bytes(block));
                l.push(limits::fdatasync_write(&dir, block, t)?);
            }
            eprintln!("limits: loopback TCP");
            l.push(limits::loopback_tcp(t)?);
            eprintln!("limits: memcpy");
            l.push(limits::memcpy(t));
            let r = LimitsRun {
                date: today(),
                machine: proc::describe_machine(),
                limits: l,
            };
            std::fs::write(&out, serde_json::to_string_pretty(&r)?)?;
            Ok(())
        }
        Cmd::Report { ratios, tls, files } => {
            let l = load(&files)?;
            if tls {
                print!("{}", tls_report::report(&l.brokers));
                return Ok(());
            }
            let mut out = report::report(&l.brokers, l.limits.as_ref(), ratios);
            out += &report::failover(&l.failover);
            print!("{out}");
            Ok(())
        }
        Cmd::Plot { dir, files } => {
            let l = load(&files)?;
            plot::write(&dir, &l.brokers, l.limits.as_ref())
        }
        Cmd::Wait {
            bootstrap,
            brokers,
            timeout,
        } => {
            let target = Target {
                bootstrap,
                run_id: "wait".into(),
                replication_factor: 1,
                min_insync_replicas: None,
                client_config: Vec::new(),
            };
            target.wait_for_brokers(brokers, Duration::from_secs(timeout))
        }
    }
}

/// Measures `f` and the brokers' CPU and RSS around it (summed over `pids`).
fn measured(pids: &[u32], name: String, f: impl FnOnce() -> anyhow::Result<Row>) -> Row {
    eprintln!("  {name}");
    let before = proc::sample_all(pids);
    let started = Instant::now();
    let mut row = f().unwrap_or_else(|e| Row {
        note: format!("failed: {e:#}"),
        ..Default::default()
    });
    row.workload = name;
    if let (Some(b), Some(a)) = (before, proc::sample_all(pids)) {
        let cpu = a.cpu_seconds - b.cpu_seconds;
        row.cpu_s = Some(cpu);
        row.rss_mb = Some(a.rss_bytes as f64 / 1e6);
        row.rss_anon_mb = a.rss_anon_bytes.map(|b| b as f64 / 1e6);
        if let Some(mb) = row.mb_per_s {
            let gb = mb * started.elapsed().as_secs_f64() / 1e3;
            if gb > 0.0 {
                row.cpu_s_per_gb = Some(cpu / gb);
            }
        }
    }
    if let (Some(m), Some(mb)) = (row.msgs_per_s, row.mb_per_s) {
        eprintln!("    {m:.0} msg/s, {mb:.1} MB/s {}", row.note);
    }
    if let (Some(p50), Some(p99)) = (row.p50_ms, row.p99_ms) {
        eprintln!("    p50 {p50:.2} ms, p99 {p99:.2} ms {}", row.note);
    }
    row
}

fn throughput_row(t: &workloads::Throughput) -> Row {
    Row {
        msgs_per_s: Some(t.msgs_per_s()),
        mb_per_s: Some(t.mb_per_s()),
        note: if t.failed > 0 {
            format!("{} not delivered", t.failed)
        } else {
            String::new()
        },
        ..Default::default()
    }
}

fn latency_row(l: &workloads::Latency) -> Row {
    let ms = |us: u64| us as f64 / 1e3;
    Row {
        msgs_per_s: Some(l.received as f64),
        p50_ms: Some(ms(l.p50_us)),
        p99_ms: Some(ms(l.p99_us)),
        p999_ms: Some(ms(l.p999_us)),
        max_ms: Some(ms(l.max_us)),
        note: if l.received < l.sent || l.sent < l.rate {
            format!("sent {}, received {}", l.sent, l.received)
        } else {
            String::new()
        },
        ..Default::default()
    }
    .with_rate_as_msgs(l)
}

impl Row {
    /// For latency rows the throughput column shows the offered rate, not a count.
    fn with_rate_as_msgs(mut self, l: &workloads::Latency) -> Row {
        self.msgs_per_s = Some(l.rate as f64);
        self
    }
}

fn run(a: RunArgs) -> anyhow::Result<()> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    for acks in &a.acks {
        anyhow::ensure!(
            ["0", "1", "all"].contains(&acks.as_str()),
            "--acks takes 0, 1 or all, not {acks:?}"
        );
    }
    let target = Target {
        bootstrap: a.bootstrap.clone(),
        run_id: format!("{:x}", (nanos as u64) ^ std::process::id() as u64),
        replication_factor: a.replication_factor,
        min_insync_replicas: a
            .min_insync_replicas
            .or((a.replication_factor >= 3).then_some(2)),
        client_config: a.client_config.clone(),
    };
    let t = Duration::from_secs(a.seconds);
    let only = a.only.clone();
    let wanted = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    let mut rows = Vec::new();
    eprintln!("{}: produce", a.name);
    let mut consume_source = None;
    let consume_acks = a.acks.first().cloned().unwrap_or_default();
    for &size in &a.sizes {
        for acks in a.acks.iter().map(String::as_str) {
            for (parts, prods) in [(1, 1), (a.partitions, a.producers)] {
                let topic = target.topic(&format!("p-{size}-{acks}-{parts}x{prods}"));
                let name = format!(
                    "produce {} acks={acks} {parts} part / {prods} prod",
                    limits::human_bytes(size)
                );
                if !wanted(&name) {
                    continue;
                }
                let mut delivered = 0;
                rows.push(measured(&a.pid, name, || {
                    target.create_topic(&topic, parts)?;
                    let r = workloads::produce(&target, &topic, parts, prods, size, acks, t)?;
                    delivered = r.messages;
                    Ok(throughput_row(&r))
                }));
                if size == 1024 && acks == consume_acks && parts > 1 {
                    consume_source = Some((topic, parts, delivered));
                } else {
                    target.delete_topic(&topic);
                }
            }
        }
    }
    let consume_name = format!("consume 1 KiB, {} part", a.partitions);
    if let Some((topic, parts, n)) = consume_source {
        if wanted(&consume_name) {
            eprintln!("{}: consume", a.name);
            rows.push(measured(&a.pid, consume_name, || {
                let r = workloads::consume(&target, &topic, parts, n, t * 6)?;
                Ok(throughput_row(&r))
            }));
        }
        target.delete_topic(&topic);
    }
    eprintln!("{}: end-to-end latency", a.name);
    for &rate in &a.rates {
        let name = format!("e2e latency 100 B @ {rate}/s, acks=all");
        if !wanted(&name) {
            continue;
        }
        let topic = target.topic(&format!("lat-{rate}"));
        rows.push(measured(&a.pid, name, || {
            target.create_topic(&topic, 1)?;
            Ok(latency_row(&workloads::end_to_end(
                &target, &topic, rate, 100, t,
            )?))
        }));
    }
    let rate = a.embedding_rate;
    let name = format!("embeddings 384×f32 @ {rate}/s, acks=all");
    if rate > 0 && wanted(&name) {
        let topic = target.topic("embeddings");
        rows.push(measured(&a.pid, name, || {
            target.create_topic(&topic, 1)?;
            Ok(latency_row(&workloads::end_to_end(
                &target,
                &topic,
                rate,
                8 + 384 * 4,
                t,
            )?))
        }));
    }
    let run = BrokerRun {
        broker: a.name,
        bootstrap: a.bootstrap,
        date: today(),
        machine: proc::describe_machine(),
        rows,
    };
    std::fs::write(&a.out, serde_json::to_string_pretty(&run)?)?;
    Ok(())
}

/// Today's UTC date (YYYY-MM-DD) without a date library: civil-from-days (H. Hinnant).
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}
