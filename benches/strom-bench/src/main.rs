//! strom-bench: the same librdkafka workloads against any Kafka-protocol broker, next to the
//! machine's own limits, with the broker's CPU and memory cost read from /proc.
//!
//!   strom-bench run --bootstrap 127.0.0.1:9092 --name strom [--pid PID] --out strom.json
//!   strom-bench limits --dir /path/on/the/data/disk --out limits.json
//!   strom-bench report limits.json strom.json kafka.json > table.md
//!   strom-bench plot --dir results/ limits.json strom.json kafka.json   # SVG charts
//!
//! Every workload is bounded in time (`--seconds`); progress goes to stderr. benches/run.sh
//! starts the brokers and runs all three steps.

mod limits;
mod plot;
mod proc;
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
    /// Renders result files (from `run` and `limits`) as markdown tables.
    Report { files: Vec<PathBuf> },
    /// Draws result files as SVG charts (throughput.svg, latency.svg) into `--dir`.
    Plot {
        #[arg(long)]
        dir: PathBuf,
        files: Vec<PathBuf>,
    },
}

/// Broker runs (in the order given) and the limits, from result files.
fn load(files: &[PathBuf]) -> anyhow::Result<(Vec<BrokerRun>, Option<LimitsRun>)> {
    let mut brokers = Vec::new();
    let mut lims = None;
    for f in files {
        match serde_json::from_slice::<ResultFile>(&std::fs::read(f)?)? {
            ResultFile::Broker(b) => brokers.push(b),
            ResultFile::Limits(l) => lims = Some(l),
        }
    }
    Ok((brokers, lims))
}

#[derive(Parser)]
struct RunArgs {
    #[arg(long)]
    bootstrap: String,
    /// Name of the broker in the tables.
    #[arg(long)]
    name: String,
    /// The broker's process id, for CPU seconds and RSS from /proc.
    #[arg(long)]
    pid: Option<u32>,
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
    /// Fixed rates (messages/s) of the end-to-end latency runs.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,50000")]
    rates: Vec<u64>,
    /// Rate of the embedding workload (384 float32 = 1536 B per record).
    #[arg(long, default_value_t = 10000)]
    embedding_rate: u64,
    /// Runs only the workloads whose name contains this (e.g. "acks=all 1 part"), to profile
    /// one of them; the consume row needs its source, "produce 1 KiB acks=1 N part".
    #[arg(long)]
    only: Option<String>,
    #[arg(long)]
    out: PathBuf,
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
        Cmd::Report { files } => {
            let (brokers, lims) = load(&files)?;
            print!("{}", report(&brokers, lims.as_ref()));
            Ok(())
        }
        Cmd::Plot { dir, files } => {
            let (brokers, lims) = load(&files)?;
            plot::write(&dir, &brokers, lims.as_ref())
        }
    }
}

/// Measures `f` and the broker's CPU and RSS around it.
fn measured(pid: Option<u32>, name: String, f: impl FnOnce() -> anyhow::Result<Row>) -> Row {
    eprintln!("  {name}");
    let before = pid.and_then(proc::sample);
    let started = Instant::now();
    let mut row = f().unwrap_or_else(|e| Row {
        note: format!("failed: {e:#}"),
        ..Default::default()
    });
    row.workload = name;
    if let (Some(b), Some(a)) = (before, pid.and_then(proc::sample)) {
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
    let target = Target {
        bootstrap: a.bootstrap.clone(),
        run_id: format!("{:x}", (nanos as u64) ^ std::process::id() as u64),
    };
    let t = Duration::from_secs(a.seconds);
    let only = a.only.clone();
    let wanted = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    let mut rows = Vec::new();
    eprintln!("{}: produce", a.name);
    let mut consume_source = None;
    for &size in &a.sizes {
        for acks in ["1", "all"] {
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
                rows.push(measured(a.pid, name, || {
                    target.create_topic(&topic, parts)?;
                    let r = workloads::produce(&target, &topic, parts, prods, size, acks, t)?;
                    delivered = r.messages;
                    Ok(throughput_row(&r))
                }));
                if size == 1024 && acks == "1" && parts > 1 {
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
            rows.push(measured(a.pid, consume_name, || {
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
        rows.push(measured(a.pid, name, || {
            target.create_topic(&topic, 1)?;
            Ok(latency_row(&workloads::end_to_end(
                &target, &topic, rate, 100, t,
            )?))
        }));
    }
    let rate = a.embedding_rate;
    let name = format!("embeddings 384×f32 @ {rate}/s, acks=all");
    if wanted(&name) {
        let topic = target.topic("embeddings");
        rows.push(measured(a.pid, name, || {
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

fn report(brokers: &[BrokerRun], lims: Option<&LimitsRun>) -> String {
    let mut out = String::new();
    let first = brokers.first();
    if let Some(b) = first {
        out += &format!("Run of {} on {}.\n\n", b.date, b.machine);
    }
    out += "| workload |";
    for b in brokers {
        out += &format!(" {} |", b.broker);
    }
    out += "\n|---|";
    for _ in brokers {
        out += "---|";
    }
    out += "\n";
    let workloads: Vec<&str> = first
        .map(|b| b.rows.iter().map(|r| r.workload.as_str()).collect())
        .unwrap_or_default();
    for w in workloads {
        out += &format!("| {w} |");
        for b in brokers {
            let cell = b
                .rows
                .iter()
                .find(|r| r.workload == w)
                .map(cell)
                .unwrap_or_default();
            out += &format!(" {cell} |");
        }
        out += "\n";
    }
    out += "\nThroughput cells: MB/s (messages/s). Latency cells: p50 / p99 / p99.9 / max in ms, \
            from the intended send time (coordinated-omission corrected).\n\n";
    out += "Broker cost over the whole suite (CPU seconds per GB produced or consumed; peak \
            resident memory: all of it, and the anonymous part, without the file pages a broker \
            that reads through mmap has mapped):\n\n| broker | CPU s / GB | peak RSS MB | peak anon RSS MB |\n|---|---|---|---|\n";
    for b in brokers {
        let (mut cpu, mut gb, mut rss) = (0.0, 0.0, 0.0f64);
        let anon = b
            .rows
            .iter()
            .filter_map(|r| r.rss_anon_mb)
            .fold(0.0f64, f64::max);
        for r in &b.rows {
            if let (Some(c), Some(per)) = (r.cpu_s, r.cpu_s_per_gb) {
                cpu += c;
                gb += c / per;
            }
            rss = rss.max(r.rss_mb.unwrap_or(0.0));
        }
        let per = if gb > 0.0 {
            format!("{:.1}", cpu / gb)
        } else {
            "–".into()
        };
        let rss = if rss > 0.0 {
            format!("{rss:.0}")
        } else {
            "–".into()
        };
        let anon = if anon > 0.0 {
            format!("{anon:.0}")
        } else {
            "–".into()
        };
        out += &format!("| {} | {per} | {rss} | {anon} |\n", b.broker);
    }
    if let Some(l) = lims {
        out += "\nMachine limits, same run:\n\n| limit | MB/s | ops/s |\n|---|---|---|\n";
        for x in &l.limits {
            let ops = x
                .ops_per_s
                .map(|o| format!("{o:.0}"))
                .unwrap_or_else(|| "–".into());
            out += &format!("| {} | {:.0} | {ops} |\n", x.name, x.mb_per_s);
        }
        out += &ratios(brokers, l);
    }
    out
}

/// Each broker's best figures as a share of the limit that bounds them: produce and consume
/// against one loopback TCP stream (every byte crosses it), acks=all produce against the
/// fdatasync write rate at 1 MiB per sync (a durable broker's ceiling on this disk when
/// group commit gathers ~1 MiB per sync).
fn ratios(brokers: &[BrokerRun], l: &LimitsRun) -> String {
    let limit = |prefix: &str| {
        l.limits
            .iter()
            .find(|x| x.name.starts_with(prefix))
            .map(|x| x.mb_per_s)
    };
    let (Some(tcp), Some(sync)) = (limit("loopback"), limit("fdatasync write, 1 MiB")) else {
        return String::new();
    };
    let best = |b: &BrokerRun, f: &dyn Fn(&str) -> bool| {
        b.rows
            .iter()
            .filter(|r| f(&r.workload))
            .filter_map(|r| r.mb_per_s)
            .fold(0.0f64, f64::max)
    };
    let mut out = format!(
        "\nBest figures as a share of the machine's limits (loopback {tcp:.0} MB/s, fdatasync \
         at 1 MiB per sync {sync:.0} MB/s):\n\n| broker | produce acks=1 / loopback | \
         produce acks=all / loopback | produce acks=all / fdatasync 1 MiB | consume / loopback |\n\
         |---|---|---|---|---|\n"
    );
    for b in brokers {
        let p1 = best(b, &|w| w.starts_with("produce") && w.contains("acks=1 "));
        let pall = best(b, &|w| w.starts_with("produce") && w.contains("acks=all"));
        let cons = best(b, &|w| w.starts_with("consume"));
        let pct = |v: f64, lim: f64| format!("{:.0}% ({v:.0} MB/s)", 100.0 * v / lim);
        out += &format!(
            "| {} | {} | {} | {} | {} |\n",
            b.broker,
            pct(p1, tcp),
            pct(pall, tcp),
            pct(pall, sync),
            pct(cons, tcp)
        );
    }
    out
}

fn cell(r: &Row) -> String {
    let mut s = match (r.p50_ms, r.mb_per_s, r.msgs_per_s) {
        (Some(p50), _, _) => format!(
            "{p50:.2} / {:.2} / {:.2} / {:.2}",
            r.p99_ms.unwrap_or(0.0),
            r.p999_ms.unwrap_or(0.0),
            r.max_ms.unwrap_or(0.0)
        ),
        (None, Some(mb), Some(m)) => format!("{mb:.1} ({m:.0}/s)"),
        _ => String::new(),
    };
    if !r.note.is_empty() {
        s += &format!(" [{}]", r.note.replace('|', "/"));
    }
    s
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
