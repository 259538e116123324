//! Steering benchmark: the same short-connection workload under eBPF, classic BPF and the
//! kernel's hash, in one run. Two acceptor threads (one per shard, pinned like shards) and
//! two client threads (pinned to CPU 0 and 1); each client opens connections one after
//! another, sends a 64-byte request, reads the 64-byte answer and closes.
//!
//! Reports per mode: accepts/s, connect() latency p50/p99, context switches per request
//! (voluntary + involuntary, all threads of this process, from /proc/self/task/*/status),
//! connections accepted off their SYN's CPU; and the program's load+attach time.
//!
//! Run: `cargo bench -p strom-ebpf --bench steering` (as root for eBPF).
//! `STROM_BENCH_CONNS` sets connections per client thread (default 2000).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strom_ebpf::harness::{fds, online_cpus, pin_current_thread, reuseport_group};
use strom_ebpf::{Steering, SteeringMode, SteeringOptions, SteeringProbe};

const SHARDS: usize = 2;
const MSG: usize = 64;

fn context_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

fn serve(listener: TcpListener, shard: usize, probe: Arc<SteeringProbe>) {
    pin_current_thread(shard % online_cpus()).ok();
    listener.set_nonblocking(false).unwrap();
    let mut buf = [0u8; MSG];
    // Returns when the listener is shut down (accept fails with EINVAL).
    while let Ok((mut s, _)) = listener.accept() {
        probe.on_accept(shard, s.as_fd());
        if s.read_exact(&mut buf).is_ok() {
            let _ = s.write_all(&buf);
        }
    }
}

struct Run {
    mode: String,
    conns: usize,
    secs: f64,
    p50_us: f64,
    p99_us: f64,
    switches_per_req: f64,
    off_cpu: u64,
}

fn run(mode: SteeringMode, per_client: usize) -> Run {
    let listeners = reuseport_group(SHARDS).unwrap();
    let steering = Steering::attach(&fds(&listeners), SteeringOptions::new(mode, online_cpus()));
    let addr = listeners[0].local_addr().unwrap();
    let probe = Arc::new(SteeringProbe::new(SHARDS, online_cpus()));
    let raw: Vec<_> = listeners.iter().map(|l| l.as_raw_fd()).collect();
    let acceptors: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let p = probe.clone();
            std::thread::spawn(move || serve(l, i, p))
        })
        .collect();
    let switches = context_switches();
    let start = Instant::now();
    let clients: Vec<_> = (0..SHARDS.min(online_cpus()))
        .map(|cpu| {
            std::thread::spawn(move || {
                pin_current_thread(cpu).unwrap();
                let mut lat = Vec::with_capacity(per_client);
                let msg = [7u8; MSG];
                let mut buf = [0u8; MSG];
                for _ in 0..per_client {
                    let t = Instant::now();
                    let mut s = TcpStream::connect(addr).unwrap();
                    lat.push(t.elapsed());
                    s.write_all(&msg).unwrap();
                    s.read_exact(&mut buf).unwrap();
                }
                lat
            })
        })
        .collect();
    let mut lat: Vec<Duration> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    let secs = start.elapsed().as_secs_f64();
    let switched = context_switches() - switches;
    for fd in raw {
        // SAFETY: the listener fds are still open (owned by the acceptor threads, which
        // only return after this); shutdown wakes their blocked accept().
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
    }
    for a in acceptors {
        a.join().unwrap();
    }
    lat.sort();
    let pct =
        |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)].as_secs_f64() * 1e6;
    Run {
        mode: steering.mode().to_string(),
        conns: lat.len(),
        secs,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        switches_per_req: switched as f64 / lat.len() as f64,
        off_cpu: (0..SHARDS).map(|s| probe.off_cpu(s)).sum(),
    }
}

fn main() {
    let per_client: usize = std::env::var("STROM_BENCH_CONNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    println!(
        "steering bench: {SHARDS} shards, {} CPUs, {per_client} connections per client thread",
        online_cpus()
    );
    println!(
        "{:<6} {:>7} {:>11} {:>10} {:>10} {:>13} {:>8}",
        "mode", "conns", "accepts/s", "p50 us", "p99 us", "ctxsw/req", "off-cpu"
    );
    for mode in [SteeringMode::Ebpf, SteeringMode::Cbpf, SteeringMode::Hash] {
        let r = run(mode, per_client);
        println!(
            "{:<6} {:>7} {:>11.0} {:>10.1} {:>10.1} {:>13.2} {:>8}",
            r.mode,
            r.conns,
            r.conns as f64 / r.secs,
            r.p50_us,
            r.p99_us,
            r.switches_per_req,
            r.off_cpu
        );
    }
    // Load + attach time of the eBPF program, repeated on fresh groups.
    let mut times = Vec::new();
    for _ in 0..20 {
        let listeners = reuseport_group(SHARDS).unwrap();
        let s = Steering::attach(
            &fds(&listeners),
            SteeringOptions::new(SteeringMode::Ebpf, online_cpus()),
        );
        if s.mode() != strom_ebpf::ActiveMode::Ebpf {
            println!("eBPF load+attach: unavailable here (see the log)");
            return;
        }
        times.push(s.attach_time());
    }
    times.sort();
    println!(
        "eBPF load+attach over {} runs: median {:.3} ms, max {:.3} ms",
        times.len(),
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3
    );
}
