//! Connection steering for the shards' reuseport listeners (the `ebpf/` crate does the
//! work): attached once at start, after every shard's listener is bound and before any
//! shard accepts, so the group is complete when the program goes in. The probe it returns
//! lives in `BrokerContext::steering`; each shard counts its accepts there, and
//! `/metrics` renders it with `SteeringProbe::render_prometheus`.

use std::net::TcpListener;
use std::os::fd::AsFd;
use std::sync::Arc;

use strom_ebpf::{Steering, SteeringMode, SteeringOptions, SteeringProbe};

use crate::config::BrokerConfig;

/// Attaches the configured steering to `listeners` (indexed by shard). Never fails: the
/// mode in use, and why a better one was not, are logged by the ebpf crate.
pub fn attach(config: &BrokerConfig, listeners: &[TcpListener]) -> (Steering, Arc<SteeringProbe>) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Validated at load; an unknown value here can only come from a hand-built config.
    let mode = SteeringMode::parse(&config.steering).unwrap_or(SteeringMode::Auto);
    let fds: Vec<_> = listeners.iter().map(|l| l.as_fd()).collect();
    let steering = Steering::attach(&fds, SteeringOptions::new(mode, cpus));
    let probe = Arc::new(SteeringProbe::new(listeners.len(), cpus));
    probe.set_mode(steering.mode(), steering.attach_time());
    (steering, probe)
}
