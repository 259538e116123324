//! Connection steering for Strom's per-shard `SO_REUSEPORT` listeners.
//!
//! Every shard binds its own listener on the Kafka address; all of them form one reuseport
//! group. Without help the kernel picks a listener by hashing the 4-tuple, so a connection
//! whose SYN was processed on CPU 0 is often accepted by the shard on CPU 1: every packet
//! of it then crosses cores (softirq on one, the shard on the other). Steering attaches a
//! program to the group that picks the listener of the shard pinned to the SYN's CPU.
//!
//! Modes, tried in this order for `auto`, chosen once at start and logged:
//! 1. `ebpf`: an `SK_REUSEPORT` program ([`ebpf`]) with a `REUSEPORT_SOCKARRAY` of the
//!    shards' sockets and a CPU → shard array. Sockets leave the array when they close,
//!    so a shard not bound yet (or gone) falls through to the kernel's hash.
//! 2. `cbpf`: a classic BPF program ([`cbpf`]) returning `cpu % shards`, the index of the
//!    listener in the group (listeners join in shard order). Needs no `CAP_BPF`.
//! 3. `hash`: nothing attached; the kernel's reuseport hash.
//!
//! Nothing here can stop the broker from serving: every failure (no clang at build time,
//! no capability, old kernel, verifier rejection) is logged and the next mode is tried.
//! [`probe::SteeringProbe`] counts accepts per shard and the accepts that landed on a
//! shard not pinned to the SYN's CPU (`SO_INCOMING_CPU`), which shows whether it works.

pub mod cbpf;
pub mod ebpf;
pub mod harness;
pub mod probe;

use std::fmt;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

pub use probe::SteeringProbe;

/// Socket options from `asm-generic/socket.h` (x86_64 and aarch64 use the generic values);
/// the libc crate does not define them for Linux.
pub(crate) const SO_INCOMING_CPU: libc::c_int = 49;
pub(crate) const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;
pub(crate) const SO_ATTACH_REUSEPORT_EBPF: libc::c_int = 52;
pub(crate) const SO_DETACH_REUSEPORT_BPF: libc::c_int = 68;

/// The `steering` config key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteeringMode {
    /// eBPF, else classic BPF, else the kernel's hash.
    Auto,
    /// eBPF, else the kernel's hash.
    Ebpf,
    /// Classic BPF, else the kernel's hash.
    Cbpf,
    /// The kernel's hash: nothing attached.
    Hash,
}

impl SteeringMode {
    pub fn parse(s: &str) -> Option<SteeringMode> {
        match s {
            "auto" => Some(SteeringMode::Auto),
            "ebpf" => Some(SteeringMode::Ebpf),
            "cbpf" => Some(SteeringMode::Cbpf),
            "hash" => Some(SteeringMode::Hash),
            _ => None,
        }
    }
}

/// What is actually attached to the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveMode {
    Ebpf = 0,
    Cbpf = 1,
    Hash = 2,
}

impl ActiveMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ActiveMode::Ebpf => "ebpf",
            ActiveMode::Cbpf => "cbpf",
            ActiveMode::Hash => "hash",
        }
    }
}

impl fmt::Display for ActiveMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SteeringError {
    #[error("ebpf unavailable: the steering program was not built (no clang at build time)")]
    NotBuilt,
    #[error("parsing the BPF object")]
    Parse(#[source] aya_obj::ParseError),
    #[error("relocating the BPF object")]
    Relocate(#[source] aya_obj::relocation::EbpfRelocationError),
    #[error("creating BPF map {name}")]
    Map {
        name: String,
        #[source]
        source: aya::maps::MapError,
    },
    #[error("the BPF object has no {0}")]
    Missing(&'static str),
    #[error("{what} failed")]
    Sys {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the verifier rejected the program: {source}; log: {log}")]
    Verifier {
        #[source]
        source: std::io::Error,
        log: String,
    },
    #[error("no listeners to steer")]
    NoListeners,
}

/// How to steer, and (for tests) replacements that make a mode fail the way a real kernel
/// or build would.
pub struct SteeringOptions<'a> {
    pub mode: SteeringMode,
    /// CPUs the shards are pinned over: shard `i` runs on CPU `i % cpus`.
    pub cpus: usize,
    /// Replaces the built eBPF object (a corrupt one simulates a load failure).
    pub ebpf_object: Option<&'a [u8]>,
    /// Replaces the classic program (an invalid one is rejected by the kernel).
    pub cbpf_program: Option<Vec<libc::sock_filter>>,
}

impl SteeringOptions<'_> {
    pub fn new(mode: SteeringMode, cpus: usize) -> Self {
        SteeringOptions {
            mode,
            cpus: cpus.max(1),
            ebpf_object: None,
            cbpf_program: None,
        }
    }
}

/// The steering attached to one reuseport group. Holds the eBPF program and maps (closed
/// on drop; the kernel frees them once the group's sockets are gone too).
pub struct Steering {
    mode: ActiveMode,
    attach_time: Duration,
    ebpf: Option<ebpf::EbpfSteering>,
}

impl Steering {
    /// Attaches steering to the group of `listeners` (indexed by shard, already listening).
    /// Never fails: the mode that could be attached is returned, and the reasons the
    /// better ones could not are logged.
    pub fn attach(listeners: &[BorrowedFd<'_>], opts: SteeringOptions<'_>) -> Steering {
        let shards = listeners.len();
        let try_ebpf = matches!(opts.mode, SteeringMode::Auto | SteeringMode::Ebpf);
        let try_cbpf = matches!(opts.mode, SteeringMode::Auto | SteeringMode::Cbpf);
        if try_ebpf {
            let start = Instant::now();
            let object = opts.ebpf_object.or(ebpf::BUILT_OBJECT);
            match ebpf::EbpfSteering::load_and_attach(object, listeners, opts.cpus) {
                Ok(prog) => {
                    let took = start.elapsed();
                    tracing::info!(
                        mode = "ebpf",
                        shards,
                        // The kernel's id of the program: `bpftool prog show id N`, and how
                        // tests check it is gone after shutdown.
                        prog_id = prog.program_id(),
                        load_attach_us = took.as_micros() as u64,
                        "connection steering: SK_REUSEPORT program attached"
                    );
                    return Steering {
                        mode: ActiveMode::Ebpf,
                        attach_time: took,
                        ebpf: Some(prog),
                    };
                }
                Err(e) => tracing::warn!(error = %error_chain(&e),
                    "connection steering: eBPF not attached, falling back"),
            }
        }
        if try_cbpf {
            let start = Instant::now();
            let program = opts
                .cbpf_program
                .unwrap_or_else(|| cbpf::cpu_mod_shards(shards as u32));
            match cbpf::attach(listeners, &program) {
                Ok(()) => {
                    let took = start.elapsed();
                    tracing::info!(
                        mode = "cbpf",
                        shards,
                        load_attach_us = took.as_micros() as u64,
                        "connection steering: classic BPF (cpu % shards) attached"
                    );
                    return Steering {
                        mode: ActiveMode::Cbpf,
                        attach_time: took,
                        ebpf: None,
                    };
                }
                Err(e) => tracing::warn!(error = %error_chain(&e),
                    "connection steering: classic BPF not attached, falling back"),
            }
        }
        tracing::info!(
            mode = "hash",
            shards,
            "connection steering: the kernel's reuseport hash"
        );
        Steering {
            mode: ActiveMode::Hash,
            attach_time: Duration::ZERO,
            ebpf: None,
        }
    }

    pub fn mode(&self) -> ActiveMode {
        self.mode
    }

    /// Time to load the program and attach it (zero for `hash`).
    pub fn attach_time(&self) -> Duration {
        self.attach_time
    }

    /// Connections the eBPF program steered to their CPU's shard, and those it left to the
    /// kernel's hash. `None` unless eBPF is attached.
    pub fn program_stats(&self) -> Option<(u64, u64)> {
        self.ebpf.as_ref().and_then(|e| e.stats().ok())
    }

    /// The kernel id of the loaded eBPF program (tests check it is freed after shutdown).
    pub fn program_id(&self) -> Option<u32> {
        self.ebpf.as_ref().map(|e| e.program_id())
    }

    /// Detaches whatever program the group has; the listeners keep accepting, by hash.
    pub fn detach(&mut self, any_listener: BorrowedFd<'_>) -> Result<(), SteeringError> {
        if self.mode != ActiveMode::Hash {
            detach(any_listener)?;
        }
        self.mode = ActiveMode::Hash;
        self.ebpf = None;
        Ok(())
    }
}

/// `SO_DETACH_REUSEPORT_BPF` on one socket of the group detaches the group's program.
pub fn detach(any_listener: BorrowedFd<'_>) -> Result<(), SteeringError> {
    let zero: libc::c_int = 0;
    // SAFETY: the fd is a live socket borrowed for the call; the option value is a valid
    // c_int the kernel only reads.
    let rc = unsafe {
        libc::setsockopt(
            any_listener.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_DETACH_REUSEPORT_BPF,
            &zero as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(SteeringError::Sys {
            what: "SO_DETACH_REUSEPORT_BPF",
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// The shard a CPU's connections go to. Shard `s` is pinned to CPU `s % cpus`, so CPU `c`
/// hosts shard `c` when `c < shards`; CPUs beyond the shards get `c % shards` (any shard is
/// off-CPU for them, and this spreads them evenly). Classic BPF computes the same.
pub fn shard_for_cpu(cpu: usize, shards: usize) -> usize {
    cpu % shards.max(1)
}

pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
