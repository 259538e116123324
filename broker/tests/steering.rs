//! Connection steering through the real broker: client threads pinned to each CPU in turn
//! connect and make an ApiVersions call on every connection; the per-shard counters in
//! `BrokerContext::steering` must show each connection accepted by the shard of its SYN's
//! CPU (eBPF and classic BPF), or the kernel's spread (`hash`). Restarting on the same
//! port re-attaches, and shutdown leaves no BPF object behind.
//!
//! The tests in this file run one at a time (TEST_LOCK): they count the process's BPF
//! descriptors and pin threads, which parallel tests would disturb.

mod common;

use std::net::SocketAddr;
use std::sync::Mutex;

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use strom_ebpf::harness::{online_cpus, pin_current_thread};
use strom_ebpf::{ebpf, shard_for_cpu, ActiveMode};

static TEST_LOCK: Mutex<()> = Mutex::new(());
const SHARDS: usize = 2;
const PER_CPU: usize = 100;

fn start(dir: &std::path::Path, steering: &str, listen: SocketAddr) -> strom::Server {
    let config = strom::config::BrokerConfig {
        listen,
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        schema_registry_listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.to_path_buf(),
        shards: SHARDS,
        steering: steering.into(),
        io_backend: "sync".into(),
        ..Default::default()
    };
    strom::Server::start(config, Default::default()).expect("broker starts")
}

/// GET /metrics from the admin listener.
fn scrape(addr: SocketAddr) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn ebpf_possible() -> bool {
    // SAFETY: geteuid has no preconditions.
    ebpf::BUILT_OBJECT.is_some() && unsafe { libc::geteuid() } == 0
}

/// PER_CPU connections from a thread pinned to `cpu`, each answered (ApiVersions) before
/// the next opens, so the accept has been counted when this returns.
fn connect_from_cpu(addr: SocketAddr, cpu: usize) {
    std::thread::spawn(move || {
        pin_current_thread(cpu).unwrap();
        for _ in 0..PER_CPU {
            let mut c = common::Client::connect(addr);
            let r: ApiVersionsResponse =
                c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
            assert_eq!(r.error_code, 0);
        }
    })
    .join()
    .expect("client thread");
}

/// Connects from every CPU and checks the broker's per-shard counters: all of CPU c's
/// connections on shard_for_cpu(c), none off-CPU.
fn assert_steered(server: &strom::Server) {
    let probe = &server.ctx.steering;
    let before: Vec<u64> = (0..SHARDS).map(|s| probe.accepted(s)).collect();
    for cpu in 0..online_cpus() {
        let shard = shard_for_cpu(cpu, SHARDS);
        let was = probe.accepted(shard);
        connect_from_cpu(server.kafka_addr, cpu);
        assert_eq!(
            probe.accepted(shard) - was,
            PER_CPU as u64,
            "CPU {cpu}'s connections all on shard {shard}"
        );
    }
    let total: u64 = (0..SHARDS).map(|s| probe.accepted(s) - before[s]).sum();
    assert_eq!(total, (PER_CPU * online_cpus()) as u64);
    for s in 0..SHARDS.min(online_cpus()) {
        assert_eq!(
            probe.off_cpu(s),
            0,
            "shard {s} accepted off-CPU connections"
        );
    }
}

#[test]
fn given_ebpf_steering_when_pinned_clients_connect_to_the_broker_then_each_shard_gets_its_cpus_connections(
) {
    let _serial = TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "ebpf", "127.0.0.1:0".parse().unwrap());
    if !ebpf_possible() {
        assert_eq!(server.ctx.steering.mode(), ActiveMode::Hash);
        server.shutdown().unwrap();
        return;
    }
    assert_eq!(server.ctx.steering.mode(), ActiveMode::Ebpf);
    assert_steered(&server);
    let text = scrape(server.metrics_addr);
    assert!(
        text.contains("strom_steering_mode{mode=\"ebpf\"} 1"),
        "{text}"
    );
    assert!(text.contains("strom_steering_off_cpu_total{shard=\"0\"} 0"));
    assert!(text.contains(&format!(
        "strom_steering_accepted_total{{shard=\"1\"}} {PER_CPU}"
    )));
    server.shutdown().unwrap();
}

#[test]
fn given_cbpf_steering_when_pinned_clients_connect_to_the_broker_then_each_shard_gets_its_cpus_connections(
) {
    let _serial = TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "cbpf", "127.0.0.1:0".parse().unwrap());
    assert_eq!(server.ctx.steering.mode(), ActiveMode::Cbpf);
    assert_steered(&server);
    server.shutdown().unwrap();
}

#[test]
fn given_hash_when_clients_on_one_cpu_connect_to_the_broker_then_the_kernel_spreads_them() {
    let _serial = TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "hash", "127.0.0.1:0".parse().unwrap());
    let probe = &server.ctx.steering;
    assert_eq!(probe.mode(), ActiveMode::Hash);
    connect_from_cpu(server.kafka_addr, 0);
    connect_from_cpu(server.kafka_addr, 0);
    // 200 connections hashed over 2 shards: each gets some (fewer than 20 has odds < 1e-30).
    for s in 0..SHARDS {
        assert!(probe.accepted(s) >= 20, "shard {s}: {}", probe.accepted(s));
    }
    if online_cpus() > 1 {
        assert!(probe.off_cpu(1) > 0, "the hash ignores the SYN's CPU");
    }
    server.shutdown().unwrap();
}

#[test]
fn given_ebpf_steering_when_the_broker_restarts_on_the_same_port_then_it_reattaches_and_leaks_no_bpf_objects(
) {
    let _serial = TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !ebpf_possible() {
        return;
    }
    let baseline = ebpf::open_bpf_objects();
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "auto", "127.0.0.1:0".parse().unwrap());
    let addr = server.kafka_addr;
    assert_eq!(server.ctx.steering.mode(), ActiveMode::Ebpf);
    assert!(
        ebpf::open_bpf_objects() > baseline,
        "program and maps held while serving"
    );
    assert_steered(&server);
    server.shutdown().unwrap();
    assert_eq!(ebpf::open_bpf_objects(), baseline, "BPF descriptors leaked");

    let server = start(dir.path(), "auto", addr);
    assert_eq!(server.kafka_addr, addr);
    assert_eq!(server.ctx.steering.mode(), ActiveMode::Ebpf);
    assert_steered(&server);
    server.shutdown().unwrap();
    assert_eq!(ebpf::open_bpf_objects(), baseline, "BPF descriptors leaked");
}
