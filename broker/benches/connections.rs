//! Connection steering through the real broker (issue 8's benchmark): the same workloads
//! under `steering = "ebpf"`, `"cbpf"` and `"hash"`, one broker (2 shards, in this process)
//! per mode, in one run:
//!
//! - short connections: client threads pinned to each CPU open a connection, make one
//!   ApiVersions call and close, over and over: accepts/s, connect() latency p50/p99,
//!   requests/s;
//! - long connections: each client thread holds `LONG_CONNS` connections and makes ApiVersions
//!   calls on them round-robin for a fixed time: requests/s.
//!
//! Per mode and workload it reports the shard threads' context switches per request
//! (voluntary + involuntary, from /proc/self/task/<tid>/status of the `shard-N` threads),
//! rescheduling IPIs per request (the `RES` row of /proc/interrupts: a wakeup of a thread on
//! another core; machine-wide, so other load adds to it), connections accepted by a shard
//! not on their SYN's CPU, and the program's load+attach time.
//!
//! `cargo bench -p strom --bench connections` (as root for eBPF; without it the ebpf row
//! falls back and says so). `STROM_BENCH_CONNS` (short connections per client thread,
//! default 2000) and `STROM_BENCH_SECS` (long-connection run, default 3) bound the run.
//! Loopback only.

#[path = "../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use strom_ebpf::harness::{online_cpus, pin_current_thread};

const SHARDS: usize = 2;
const LONG_CONNS: usize = 16;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Context switches of this process's `shard-*` threads.
fn shard_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| t.ok())
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("shard-"))
        })
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// Rescheduling interrupts summed over CPUs (cross-core wakeups, machine-wide).
fn resched_ipis() -> u64 {
    std::fs::read_to_string("/proc/interrupts")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.trim_start().starts_with("RES:"))
                .map(|l| {
                    l.split_whitespace()
                        .skip(1)
                        .map_while(|v| v.parse::<u64>().ok())
                        .sum()
                })
        })
        .unwrap_or(0)
}

fn api_versions(c: &mut common::Client) {
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(r.error_code, 0);
}

struct Costs {
    switches: u64,
    ipis: u64,
    started: Instant,
}

impl Costs {
    fn start() -> Costs {
        Costs {
            switches: shard_switches(),
            ipis: resched_ipis(),
            started: Instant::now(),
        }
    }
    /// (seconds, shard context switches per request, IPIs per request)
    fn per(&self, requests: usize) -> (f64, f64, f64) {
        let n = requests.max(1) as f64;
        (
            self.started.elapsed().as_secs_f64(),
            (shard_switches() - self.switches) as f64 / n,
            (resched_ipis().saturating_sub(self.ipis)) as f64 / n,
        )
    }
}

/// Client threads, one pinned to each CPU, each running `work` and returning connect()
/// latencies (if it measures them) and its request count.
fn on_every_cpu(
    work: impl Fn(usize) -> (Vec<Duration>, usize) + Send + Sync + Copy + 'static,
) -> (Vec<Duration>, usize) {
    let threads: Vec<_> = (0..online_cpus())
        .map(|cpu| {
            std::thread::spawn(move || {
                pin_current_thread(cpu).expect("pin client thread");
                work(cpu)
            })
        })
        .collect();
    let mut lat = Vec::new();
    let mut requests = 0;
    for t in threads {
        let (l, n) = t.join().expect("client thread");
        lat.extend(l);
        requests += n;
    }
    (lat, requests)
}

fn short_connections(addr: SocketAddr, per_thread: usize) -> (Vec<Duration>, usize) {
    on_every_cpu(move |_| {
        let mut lat = Vec::with_capacity(per_thread);
        for _ in 0..per_thread {
            let t = Instant::now();
            let mut c = common::Client::connect(addr);
            lat.push(t.elapsed());
            api_versions(&mut c);
        }
        (lat, per_thread)
    })
}

fn long_connections(addr: SocketAddr, secs: u64) -> usize {
    on_every_cpu(move |_| {
        let mut conns: Vec<_> = (0..LONG_CONNS)
            .map(|_| common::Client::connect(addr))
            .collect();
        let until = Instant::now() + Duration::from_secs(secs);
        let mut n = 0;
        while Instant::now() < until {
            for c in &mut conns {
                api_versions(c);
                n += 1;
            }
        }
        (Vec::new(), n)
    })
    .1
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)].as_secs_f64() * 1e6
}

fn main() {
    let per_thread = env("STROM_BENCH_CONNS", 2000) as usize;
    let secs = env("STROM_BENCH_SECS", 3);
    println!(
        "broker connection bench: {SHARDS} shards, {} CPUs; short: {per_thread} connections \
         per CPU thread; long: {LONG_CONNS} connections per CPU thread for {secs} s",
        online_cpus()
    );
    println!(
        "| steering | attach ms | short accepts/s | connect p50 us | connect p99 us | \
         short ctxsw/req | short IPIs/req | off-CPU accepts | long req/s | long ctxsw/req | long IPIs/req |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for mode in ["ebpf", "cbpf", "hash"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = strom::config::BrokerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            metrics_listen: "127.0.0.1:0".parse().unwrap(),
            schema_registry_listen: "127.0.0.1:0".parse().unwrap(),
            data_dir: dir.path().to_path_buf(),
            shards: SHARDS,
            steering: mode.into(),
            ..Default::default()
        };
        let server = strom::Server::start(config, Default::default()).expect("broker starts");
        let probe = server.ctx.steering.clone();
        let active = probe.mode().to_string();
        let attach_ms = probe.attach_time().as_secs_f64() * 1e3;
        // Warm-up: the shards' runtimes and the client code paths.
        short_connections(server.kafka_addr, 50);
        let off_before: u64 = (0..SHARDS).map(|s| probe.off_cpu(s)).sum();

        let costs = Costs::start();
        let (mut lat, requests) = short_connections(server.kafka_addr, per_thread);
        let (short_secs, short_sw, short_ipi) = costs.per(requests);
        let off_cpu: u64 = (0..SHARDS).map(|s| probe.off_cpu(s)).sum::<u64>() - off_before;
        lat.sort();

        let costs = Costs::start();
        let long = long_connections(server.kafka_addr, secs);
        let (long_secs, long_sw, long_ipi) = costs.per(long);

        let label = if active == mode {
            mode.to_string()
        } else {
            format!("{mode} (fell back to {active})")
        };
        println!(
            "| {label} | {attach_ms:.3} | {:.0} | {:.1} | {:.1} | {short_sw:.2} | {short_ipi:.2} | \
             {off_cpu} of {} | {:.0} | {long_sw:.2} | {long_ipi:.2} |",
            lat.len() as f64 / short_secs,
            pct(&lat, 0.50),
            pct(&lat, 0.99),
            lat.len(),
            long as f64 / long_secs,
        );
        server.shutdown().expect("broker shuts down");
    }
}
