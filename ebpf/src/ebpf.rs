//! Loads the `SK_REUSEPORT` steering program (`src/steer.bpf.c`, built by build.rs) and
//! attaches it to a reuseport group with `SO_ATTACH_REUSEPORT_EBPF`.
//!
//! aya has no `SK_REUSEPORT` program type yet (aya-rs/aya#215), so aya does what it can
//! here: aya-obj parses the ELF object and relocates map references and calls, and aya's
//! `MapData`/`Array` create and fill the maps. The one thing left, `BPF_PROG_LOAD` with
//! the reuseport program type, is a single `bpf()` call below. The object's program sits
//! in a `socket` section only so that aya-obj accepts it.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use aya::maps::{Array, Map, MapData};

use crate::{shard_for_cpu, SteeringError, SO_ATTACH_REUSEPORT_EBPF};

/// The program object compiled by build.rs, or `None` when clang was not available.
#[cfg(not(strom_ebpf_unavailable))]
pub const BUILT_OBJECT: Option<&[u8]> = Some(aya::include_bytes_aligned!(concat!(
    env!("OUT_DIR"),
    "/steer.bpf.o"
)));
#[cfg(strom_ebpf_unavailable)]
pub const BUILT_OBJECT: Option<&[u8]> = None;

const PROGRAM: &str = "strom_steer";
const SHARD_SOCKETS: &str = "shard_sockets";
const CPU_SHARD: &str = "cpu_shard";
const STATS: &str = "steer_stats";

const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
const BPF_PROG_TYPE_SK_REUSEPORT: u32 = 21;
const BPF_SK_REUSEPORT_SELECT: u32 = 39;
const VERIFIER_LOG_BYTES: usize = 64 * 1024;

/// The leading fields of `union bpf_attr` for `BPF_PROG_LOAD` (the kernel accepts a
/// shorter attr as long as it is what the older ABI had).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct MapUpdateAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct GetFdByIdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

fn sys_bpf<T>(cmd: libc::c_long, attr: &T) -> std::io::Result<libc::c_long> {
    // SAFETY: `attr` is a repr(C) prefix of `union bpf_attr` for `cmd`, alive for the call;
    // every pointer inside it refers to memory the caller keeps alive across the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *const T as *const libc::c_void,
            std::mem::size_of::<T>(),
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A loaded, attached steering program and its maps. Dropping it closes our descriptors;
/// the kernel frees the program once the group's sockets have closed too.
pub struct EbpfSteering {
    prog: OwnedFd,
    prog_id: u32,
    shards: usize,
    sockets: MapData,
    _cpu_shard: Array<MapData, u32>,
    stats: Array<MapData, u64>,
}

impl EbpfSteering {
    /// Loads `object`, fills the maps for `listeners` (indexed by shard) and attaches the
    /// program to their group. `cpus` is what the shards are pinned over; the CPU map
    /// covers every possible CPU regardless.
    pub fn load_and_attach(
        object: Option<&[u8]>,
        listeners: &[BorrowedFd<'_>],
        cpus: usize,
    ) -> Result<EbpfSteering, SteeringError> {
        let data = object.ok_or(SteeringError::NotBuilt)?;
        let first = listeners.first().ok_or(SteeringError::NoListeners)?;
        let shards = listeners.len();
        let possible_cpus = aya::util::nr_cpus().unwrap_or(cpus).max(cpus);

        let mut obj = aya_obj::Object::parse(data).map_err(SteeringError::Parse)?;
        let mut created: HashMap<String, (aya_obj::Map, MapData)> = HashMap::new();
        for (name, mut def) in obj.maps.drain() {
            match name.as_str() {
                SHARD_SOCKETS => def.set_max_entries(shards as u32),
                CPU_SHARD => def.set_max_entries(possible_cpus as u32),
                _ => {}
            }
            let map =
                MapData::create(def.clone(), &name, None).map_err(|source| SteeringError::Map {
                    name: name.clone(),
                    source,
                })?;
            created.insert(name, (def, map));
        }
        let text_sections: HashSet<usize> = obj.functions.keys().map(|(s, _)| *s).collect();
        obj.relocate_maps(
            created
                .iter()
                .map(|(n, (def, map))| (n.as_str(), map.fd().as_fd().as_raw_fd(), def)),
            &text_sections,
        )
        .map_err(SteeringError::Relocate)?;
        obj.relocate_calls(&text_sections)
            .map_err(SteeringError::Relocate)?;
        let program = obj
            .programs
            .get(PROGRAM)
            .ok_or(SteeringError::Missing("program strom_steer"))?;
        let function = obj
            .functions
            .get(&program.function_key())
            .ok_or(SteeringError::Missing("program instructions"))?;
        let prog = load_program(&function.instructions, &obj.license)?;
        let prog_id = program_id(prog.as_fd()).unwrap_or(0);

        let mut take = |name: &'static str| {
            created
                .remove(name)
                .map(|(_, m)| m)
                .ok_or(SteeringError::Missing(name))
        };
        let sockets = take(SHARD_SOCKETS)?;
        let map_err = |name: &str| {
            let name = name.to_string();
            move |source| SteeringError::Map { name, source }
        };
        let mut cpu_shard: Array<MapData, u32> =
            Array::try_from(Map::Array(take(CPU_SHARD)?)).map_err(map_err(CPU_SHARD))?;
        let stats: Array<MapData, u64> =
            Array::try_from(Map::Array(take(STATS)?)).map_err(map_err(STATS))?;
        for cpu in 0..possible_cpus {
            cpu_shard
                .set(cpu as u32, shard_for_cpu(cpu, shards) as u32, 0)
                .map_err(map_err(CPU_SHARD))?;
        }
        for (shard, listener) in listeners.iter().enumerate() {
            let key = shard as u32;
            let value = listener.as_raw_fd() as u64;
            let attr = MapUpdateAttr {
                map_fd: sockets.fd().as_fd().as_raw_fd() as u32,
                key: &key as *const u32 as u64,
                value: &value as *const u64 as u64,
                ..Default::default()
            };
            sys_bpf(BPF_MAP_UPDATE_ELEM, &attr).map_err(|source| SteeringError::Sys {
                what: "adding a listener to the REUSEPORT_SOCKARRAY",
                source,
            })?;
        }

        // Maps first, then attach: the first SYN the program sees is already steered.
        let fd: libc::c_int = prog.as_raw_fd();
        // SAFETY: the socket fd is borrowed for the call; the option value is a valid c_int
        // (the program fd) that the kernel only reads.
        let rc = unsafe {
            libc::setsockopt(
                first.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_ATTACH_REUSEPORT_EBPF,
                &fd as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(SteeringError::Sys {
                what: "SO_ATTACH_REUSEPORT_EBPF",
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(EbpfSteering {
            prog,
            prog_id,
            shards,
            sockets,
            _cpu_shard: cpu_shard,
            stats,
        })
    }

    /// (steered to the SYN CPU's shard, left to the kernel's hash), as the program counted.
    pub fn stats(&self) -> Result<(u64, u64), aya::maps::MapError> {
        Ok((self.stats.get(&0, 0)?, self.stats.get(&1, 0)?))
    }

    pub fn program_id(&self) -> u32 {
        self.prog_id
    }

    pub fn program_fd(&self) -> BorrowedFd<'_> {
        self.prog.as_fd()
    }
}

impl Drop for EbpfSteering {
    /// Takes the listeners out of the sockarray now. A socket can be in one sockarray at a
    /// time, and the kernel releases it from ours only when the map is freed (after the
    /// program, after an RCU grace period): without this, re-attaching to the same
    /// listeners right after a detach fails with EBUSY.
    fn drop(&mut self) {
        for shard in 0..self.shards as u32 {
            let attr = MapUpdateAttr {
                map_fd: self.sockets.fd().as_fd().as_raw_fd() as u32,
                key: &shard as *const u32 as u64,
                ..Default::default()
            };
            // ENOENT: that listener already closed and left the map by itself.
            let _ = sys_bpf(BPF_MAP_DELETE_ELEM, &attr);
        }
    }
}

fn load_program(
    insns: &[aya_obj::generated::bpf_insn],
    license: &std::ffi::CStr,
) -> Result<OwnedFd, SteeringError> {
    let mut name = [0u8; 16];
    name[..PROGRAM.len()].copy_from_slice(PROGRAM.as_bytes());
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_SK_REUSEPORT,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name,
        expected_attach_type: BPF_SK_REUSEPORT_SELECT,
        ..Default::default()
    };
    let first = sys_bpf(BPF_PROG_LOAD, &attr);
    let err = match first {
        Ok(fd) => {
            // SAFETY: BPF_PROG_LOAD returned a new descriptor that nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) });
        }
        Err(e) => e,
    };
    // Load again with the verifier's log only on failure: logging slows every load.
    let mut log = vec![0u8; VERIFIER_LOG_BYTES];
    attr.log_level = 1;
    attr.log_size = log.len() as u32;
    attr.log_buf = log.as_mut_ptr() as u64;
    match sys_bpf(BPF_PROG_LOAD, &attr) {
        Ok(fd) => {
            // SAFETY: as above, a fresh descriptor from the kernel.
            Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
        }
        Err(_) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let tail: String = text.lines().rev().take(6).collect::<Vec<_>>().join(" | ");
            Err(SteeringError::Verifier {
                source: err,
                log: tail,
            })
        }
    }
}

/// The kernel id of a program, from `/proc/self/fdinfo` (no extra bpf() command needed).
pub fn program_id(fd: BorrowedFd<'_>) -> Option<u32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("prog_id:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Whether the kernel still has a program with this id (any process). Needs the same
/// privilege as loading; `None` when the question cannot be asked.
pub fn program_exists(id: u32) -> Option<bool> {
    let attr = GetFdByIdAttr {
        id,
        ..Default::default()
    };
    match sys_bpf(BPF_PROG_GET_FD_BY_ID, &attr) {
        Ok(fd) => {
            // SAFETY: a fresh descriptor from the kernel, closed right away.
            drop(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) });
            Some(true)
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Some(false),
        Err(_) => None,
    }
}

/// Descriptors of BPF programs and maps this process holds, from `/proc/self/fd`.
pub fn open_bpf_objects() -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|target| {
            let t = target.to_string_lossy();
            t.starts_with("anon_inode:bpf-prog") || t.starts_with("anon_inode:bpf-map")
        })
        .count()
}
