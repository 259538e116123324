//! The classic BPF fallback: `SO_ATTACH_REUSEPORT_CBPF` with a program that returns
//! `cpu % shards`. For reuseport the return value is the index of the socket in the group
//! (sockets are numbered in the order they joined: shards bind in order, so index = shard);
//! an index past the group's size makes the kernel use its hash. It needs no capability,
//! which is why it is the fallback when eBPF is refused, but it cannot see which shards are
//! bound and the index shifts if a listener leaves the group early.

use std::os::fd::{AsRawFd, BorrowedFd};

use crate::{SteeringError, SO_ATTACH_REUSEPORT_CBPF};

const BPF_LD: u16 = 0x00;
const BPF_W: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_ALU: u16 = 0x04;
const BPF_MOD: u16 = 0x90;
const BPF_K: u16 = 0x00;
const BPF_RET: u16 = 0x06;
const BPF_A: u16 = 0x10;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// `A = cpu; A %= shards; return A`. The CPU comes from the ancillary load
/// `SKF_AD_OFF + SKF_AD_CPU` (raw_smp_processor_id at the time of the SYN).
pub fn cpu_mod_shards(shards: u32) -> Vec<libc::sock_filter> {
    vec![
        stmt(
            BPF_LD | BPF_W | BPF_ABS,
            (libc::SKF_AD_OFF + libc::SKF_AD_CPU) as u32,
        ),
        stmt(BPF_ALU | BPF_MOD | BPF_K, shards.max(1)),
        stmt(BPF_RET | BPF_A, 0),
    ]
}

/// Attaches `program` to the group (one call on any member sets it for the whole group).
pub fn attach(
    listeners: &[BorrowedFd<'_>],
    program: &[libc::sock_filter],
) -> Result<(), SteeringError> {
    let first = listeners.first().ok_or(SteeringError::NoListeners)?;
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points at `program`, alive for the call; the kernel copies the
    // instructions and keeps no pointer into our memory.
    let rc = unsafe {
        libc::setsockopt(
            first.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ATTACH_REUSEPORT_CBPF,
            &prog as *const libc::sock_fprog as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(SteeringError::Sys {
            what: "SO_ATTACH_REUSEPORT_CBPF",
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}
