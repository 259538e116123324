//! Steering metrics: the mode in use, connections accepted per shard, and accepts whose
//! shard is not pinned to the CPU that processed the SYN (read from `SO_INCOMING_CPU` on
//! the accepted socket). Plain atomics, bumped once per accept by the accepting shard;
//! the admin thread reads them for `/metrics` ([`SteeringProbe::render_prometheus`]).

use std::fmt::Write as _;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use crate::{ActiveMode, SO_INCOMING_CPU};

pub struct SteeringProbe {
    mode: AtomicU8,
    attach_us: AtomicU64,
    cpus: usize,
    accepted: Vec<AtomicU64>,
    off_cpu: Vec<AtomicU64>,
}

impl Default for SteeringProbe {
    fn default() -> Self {
        SteeringProbe::new(0, 1)
    }
}

impl SteeringProbe {
    /// `cpus`: what shard `i` is pinned over (CPU `i % cpus`).
    pub fn new(shards: usize, cpus: usize) -> SteeringProbe {
        SteeringProbe {
            mode: AtomicU8::new(ActiveMode::Hash as u8),
            attach_us: AtomicU64::new(0),
            cpus: cpus.max(1),
            accepted: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            off_cpu: (0..shards).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn set_mode(&self, mode: ActiveMode, attach: std::time::Duration) {
        self.mode.store(mode as u8, Ordering::Relaxed);
        self.attach_us
            .store(attach.as_micros() as u64, Ordering::Relaxed);
    }

    /// Load + attach time of the steering program (zero for `hash`).
    pub fn attach_time(&self) -> std::time::Duration {
        std::time::Duration::from_micros(self.attach_us.load(Ordering::Relaxed))
    }

    pub fn mode(&self) -> ActiveMode {
        match self.mode.load(Ordering::Relaxed) {
            0 => ActiveMode::Ebpf,
            1 => ActiveMode::Cbpf,
            _ => ActiveMode::Hash,
        }
    }

    /// Counts one connection accepted by `shard`; returns the SYN's CPU when the kernel
    /// recorded it.
    pub fn on_accept(&self, shard: usize, socket: BorrowedFd<'_>) -> Option<usize> {
        if let Some(n) = self.accepted.get(shard) {
            n.fetch_add(1, Ordering::Relaxed);
        }
        let cpu = incoming_cpu(socket)?;
        if cpu != shard % self.cpus {
            if let Some(n) = self.off_cpu.get(shard) {
                n.fetch_add(1, Ordering::Relaxed);
            }
        }
        Some(cpu)
    }

    pub fn accepted(&self, shard: usize) -> u64 {
        self.accepted
            .get(shard)
            .map_or(0, |n| n.load(Ordering::Relaxed))
    }

    pub fn off_cpu(&self, shard: usize) -> u64 {
        self.off_cpu
            .get(shard)
            .map_or(0, |n| n.load(Ordering::Relaxed))
    }

    pub fn shards(&self) -> usize {
        self.accepted.len()
    }

    /// The counters in Prometheus text format, for the admin listener's `/metrics`.
    pub fn render_prometheus(&self) -> String {
        let mut out = String::new();
        let mode = self.mode();
        out.push_str("# HELP strom_steering_mode Connection steering in use (1 = active).\n");
        out.push_str("# TYPE strom_steering_mode gauge\n");
        for m in [ActiveMode::Ebpf, ActiveMode::Cbpf, ActiveMode::Hash] {
            let _ = writeln!(
                out,
                "strom_steering_mode{{mode=\"{m}\"}} {}",
                u8::from(m == mode)
            );
        }
        out.push_str(
            "# HELP strom_steering_attach_seconds Time to load and attach the steering program.\n",
        );
        out.push_str("# TYPE strom_steering_attach_seconds gauge\n");
        let _ = writeln!(
            out,
            "strom_steering_attach_seconds {}",
            self.attach_us.load(Ordering::Relaxed) as f64 / 1e6
        );
        out.push_str("# HELP strom_steering_accepted_total Connections accepted, by shard (counted at accept, with the SYN CPU check).\n");
        out.push_str("# TYPE strom_steering_accepted_total counter\n");
        for s in 0..self.shards() {
            let _ = writeln!(
                out,
                "strom_steering_accepted_total{{shard=\"{s}\"}} {}",
                self.accepted(s)
            );
        }
        out.push_str("# HELP strom_steering_off_cpu_total Connections accepted by a shard not pinned to the CPU that processed their SYN.\n");
        out.push_str("# TYPE strom_steering_off_cpu_total counter\n");
        for s in 0..self.shards() {
            let _ = writeln!(
                out,
                "strom_steering_off_cpu_total{{shard=\"{s}\"}} {}",
                self.off_cpu(s)
            );
        }
        out
    }
}

/// The CPU that last processed a packet of this socket (for a fresh accept: the
/// handshake's), or `None` if the kernel has not recorded one.
pub fn incoming_cpu(socket: BorrowedFd<'_>) -> Option<usize> {
    let mut cpu: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the socket is borrowed for the call; `cpu` and `len` are valid for writes
    // of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_INCOMING_CPU,
            &mut cpu as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    (rc == 0 && cpu >= 0).then_some(cpu as usize)
}
