//! Steering end to end on 127.0.0.1: client threads pinned to each CPU in turn open
//! connections to a reuseport group; we check which listener (shard) accepted each one,
//! against `SO_INCOMING_CPU` and the probe's counters. Every mode and every fallback is
//! forced here. Counts and deadlines are bounded; nothing is timed.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use strom_ebpf::harness::{connect_from_cpu, fds, online_cpus, reuseport_group, Landing};
use strom_ebpf::{
    ebpf, shard_for_cpu, ActiveMode, Steering, SteeringMode, SteeringOptions, SteeringProbe,
};

const SHARDS: usize = 2;
const PER_CPU: usize = 200;
const DEADLINE: Duration = Duration::from_secs(20);

/// eBPF can load here: the object was built (clang present) and we may call bpf().
fn ebpf_possible() -> bool {
    // SAFETY: geteuid has no preconditions.
    ebpf::BUILT_OBJECT.is_some() && unsafe { libc::geteuid() } == 0
}

fn opts(mode: SteeringMode) -> SteeringOptions<'static> {
    SteeringOptions::new(mode, online_cpus())
}

/// Connects PER_CPU times from every CPU and asserts each connection was accepted by the
/// shard of its SYN's CPU, and that the probe saw no off-CPU accepts.
fn assert_steered(listeners: &[std::net::TcpListener]) {
    let probe = SteeringProbe::new(listeners.len(), online_cpus());
    for cpu in 0..online_cpus() {
        let landings = connect_from_cpu(listeners, cpu, PER_CPU, &probe, DEADLINE).unwrap();
        for Landing { shard, syn_cpu } in landings {
            assert_eq!(
                syn_cpu,
                Some(cpu),
                "SYN processed on the pinned client's CPU"
            );
            assert_eq!(
                shard,
                shard_for_cpu(cpu, listeners.len()),
                "connection from CPU {cpu} accepted by shard {shard}"
            );
        }
    }
    let total: u64 = (0..listeners.len()).map(|s| probe.accepted(s)).sum();
    assert_eq!(total, (PER_CPU * online_cpus()) as u64);
    for s in 0..listeners.len() {
        if s < online_cpus() {
            assert_eq!(
                probe.off_cpu(s),
                0,
                "shard {s} accepted off-CPU connections"
            );
        }
    }
}

#[test]
fn given_ebpf_steering_when_clients_pinned_to_each_cpu_connect_then_each_lands_on_its_cpus_shard() {
    let listeners = reuseport_group(SHARDS).unwrap();
    let steering = Steering::attach(&fds(&listeners), opts(SteeringMode::Ebpf));
    if !ebpf_possible() {
        assert_eq!(steering.mode(), ActiveMode::Hash);
        eprintln!("eBPF not possible here (no clang at build time or not root): checked the fallback only");
        return;
    }
    assert_eq!(steering.mode(), ActiveMode::Ebpf);
    assert_steered(&listeners);
    let (steered, fell_through) = steering.program_stats().unwrap();
    assert_eq!(steered, (PER_CPU * online_cpus()) as u64);
    assert_eq!(fell_through, 0);
}

#[test]
fn given_cbpf_steering_when_clients_pinned_to_each_cpu_connect_then_each_lands_on_its_cpus_shard() {
    let listeners = reuseport_group(SHARDS).unwrap();
    let steering = Steering::attach(&fds(&listeners), opts(SteeringMode::Cbpf));
    assert_eq!(steering.mode(), ActiveMode::Cbpf);
    assert_steered(&listeners);
}

#[test]
fn given_hash_when_clients_connect_from_one_cpu_then_the_kernel_spreads_them_over_shards() {
    let listeners = reuseport_group(SHARDS).unwrap();
    let steering = Steering::attach(&fds(&listeners), opts(SteeringMode::Hash));
    assert_eq!(steering.mode(), ActiveMode::Hash);
    let probe = SteeringProbe::new(SHARDS, online_cpus());
    let landings = connect_from_cpu(&listeners, 0, PER_CPU, &probe, DEADLINE).unwrap();
    assert!(landings.iter().all(|l| l.syn_cpu == Some(0)));
    // The hash ignores the CPU: with 200 random source ports each of the 2 shards gets
    // some (the chance of fewer than 20 on one is below 1e-30).
    for s in 0..SHARDS {
        assert!(
            probe.accepted(s) >= 20,
            "shard {s} got {} of {PER_CPU}",
            probe.accepted(s)
        );
    }
    if online_cpus() > 1 {
        assert!(
            probe.off_cpu(1) > 0,
            "the hash puts some on the other CPU's shard"
        );
    }
}

#[test]
fn given_auto_when_ebpf_object_is_corrupt_then_falls_back_to_cbpf_and_still_steers() {
    let listeners = reuseport_group(SHARDS).unwrap();
    let mut o = opts(SteeringMode::Auto);
    o.ebpf_object = Some(b"\x7fELF not really an object");
    let steering = Steering::attach(&fds(&listeners), o);
    assert_eq!(steering.mode(), ActiveMode::Cbpf);
    assert_steered(&listeners);
}

#[test]
fn given_ebpf_forced_when_load_fails_then_kernel_hash_serves_every_connection() {
    let listeners = reuseport_group(SHARDS).unwrap();
    let mut o = opts(SteeringMode::Ebpf);
    o.ebpf_object = Some(b"garbage");
    let steering = Steering::attach(&fds(&listeners), o);
    assert_eq!(steering.mode(), ActiveMode::Hash);
    let probe = SteeringProbe::new(SHARDS, online_cpus());
    let landings = connect_from_cpu(&listeners, 0, PER_CPU, &probe, DEADLINE).unwrap();
    assert_eq!(landings.len(), PER_CPU);
}

#[test]
fn given_cbpf_forced_when_the_kernel_rejects_the_program_then_kernel_hash_serves() {
    let listeners = reuseport_group(SHARDS).unwrap();
    let mut o = opts(SteeringMode::Cbpf);
    // An empty program is invalid for the classic BPF checker (EINVAL).
    o.cbpf_program = Some(Vec::new());
    let steering = Steering::attach(&fds(&listeners), o);
    assert_eq!(steering.mode(), ActiveMode::Hash);
    let probe = SteeringProbe::new(SHARDS, online_cpus());
    assert_eq!(
        connect_from_cpu(&listeners, 0, PER_CPU, &probe, DEADLINE)
            .unwrap()
            .len(),
        PER_CPU
    );
}

#[test]
fn given_auto_when_both_programs_fail_then_kernel_hash_serves() {
    let listeners = reuseport_group(SHARDS).unwrap();
    let mut o = opts(SteeringMode::Auto);
    o.ebpf_object = Some(b"garbage");
    o.cbpf_program = Some(Vec::new());
    let steering = Steering::attach(&fds(&listeners), o);
    assert_eq!(steering.mode(), ActiveMode::Hash);
    let probe = SteeringProbe::new(SHARDS, online_cpus());
    assert_eq!(
        connect_from_cpu(&listeners, 1 % online_cpus(), 50, &probe, DEADLINE)
            .unwrap()
            .len(),
        50
    );
}

#[test]
fn given_ebpf_attached_when_detached_and_reattached_then_the_group_keeps_accepting() {
    if !ebpf_possible() {
        return;
    }
    let listeners = reuseport_group(SHARDS).unwrap();
    let mut steering = Steering::attach(&fds(&listeners), opts(SteeringMode::Ebpf));
    assert_eq!(steering.mode(), ActiveMode::Ebpf);
    assert_steered(&listeners);
    steering.detach(listeners[1].as_fd()).unwrap();
    assert_eq!(steering.mode(), ActiveMode::Hash);
    let probe = SteeringProbe::new(SHARDS, online_cpus());
    let landings = connect_from_cpu(&listeners, 0, PER_CPU, &probe, DEADLINE).unwrap();
    assert!(
        landings.iter().any(|l| l.shard == 1),
        "detached: the hash spreads again"
    );
    let steering = Steering::attach(&fds(&listeners), opts(SteeringMode::Ebpf));
    assert_eq!(steering.mode(), ActiveMode::Ebpf);
    assert_steered(&listeners);
}

#[test]
fn given_a_shard_listener_closed_when_its_cpu_connects_then_the_kernel_hash_takes_it() {
    if !ebpf_possible() || online_cpus() < 2 {
        return;
    }
    let mut listeners = reuseport_group(SHARDS).unwrap();
    let steering = Steering::attach(&fds(&listeners), opts(SteeringMode::Ebpf));
    assert_eq!(steering.mode(), ActiveMode::Ebpf);
    // Shard 1 goes away: the kernel removes its socket from the REUSEPORT_SOCKARRAY, so
    // CPU 1's SYNs find no shard socket and fall through to the hash (here: shard 0).
    drop(listeners.pop());
    let probe = SteeringProbe::new(1, online_cpus());
    let landings = connect_from_cpu(&listeners, 1, 50, &probe, DEADLINE).unwrap();
    assert!(landings.iter().all(|l| l.shard == 0));
    let (_, fell_through) = steering.program_stats().unwrap();
    assert_eq!(fell_through, 50);
}

#[test]
fn given_ebpf_steering_when_group_and_loader_are_dropped_then_no_bpf_objects_remain() {
    if !ebpf_possible() {
        return;
    }
    let listeners = reuseport_group(SHARDS).unwrap();
    let steering = Steering::attach(&fds(&listeners), opts(SteeringMode::Ebpf));
    let id = steering.program_id().expect("program id");
    assert_eq!(ebpf::program_exists(id), Some(true));
    let probe = SteeringProbe::new(SHARDS, online_cpus());
    connect_from_cpu(&listeners, 0, 20, &probe, DEADLINE).unwrap();
    drop(steering);
    // The group still holds the program while its sockets live.
    assert_eq!(ebpf::program_exists(id), Some(true));
    drop(listeners);
    // The kernel frees the program after an RCU grace period: poll, bounded.
    let until = Instant::now() + Duration::from_secs(10);
    while ebpf::program_exists(id) == Some(true) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ebpf::program_exists(id), Some(false), "program {id} leaked");
}
