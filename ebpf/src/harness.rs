//! Helpers shared by the steering tests and the benchmark: a reuseport group on
//! 127.0.0.1, client threads pinned to a CPU, and an accept loop that records which
//! listener (shard) took each connection and the CPU its SYN came in on.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use crate::probe::{incoming_cpu, SteeringProbe};

/// `shards` non-blocking reuseport listeners on one port of 127.0.0.1, joined in shard
/// order (which is the index classic BPF returns).
pub fn reuseport_group(shards: usize) -> io::Result<Vec<TcpListener>> {
    let mut out: Vec<TcpListener> = Vec::new();
    let mut addr: SocketAddr = "127.0.0.1:0".parse().expect("static address");
    for _ in 0..shards {
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
        s.set_reuse_address(true)?;
        s.set_reuse_port(true)?;
        s.set_nonblocking(true)?;
        s.bind(&addr.into())?;
        s.listen(4096)?;
        let l: TcpListener = s.into();
        addr = l.local_addr()?;
        out.push(l);
    }
    Ok(out)
}

pub fn fds(listeners: &[TcpListener]) -> Vec<BorrowedFd<'_>> {
    listeners.iter().map(|l| l.as_fd()).collect()
}

/// Pins the calling thread to one CPU, so its SYNs are processed there (loopback runs
/// the receive path on the sending CPU).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it and
    // sched_setaffinity only reads it, for the calling thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One accepted connection: the shard whose listener took it and its SYN's CPU.
#[derive(Debug, Clone, Copy)]
pub struct Landing {
    pub shard: usize,
    pub syn_cpu: Option<usize>,
}

/// Opens `count` connections from a thread pinned to `cpu` and accepts them all, counting
/// each in `probe` as the broker's accept loop does. Bounded by `deadline`.
pub fn connect_from_cpu(
    listeners: &[TcpListener],
    cpu: usize,
    count: usize,
    probe: &SteeringProbe,
    deadline: Duration,
) -> io::Result<Vec<Landing>> {
    let addr = listeners[0].local_addr()?;
    let client = std::thread::spawn(move || -> io::Result<Vec<TcpStream>> {
        pin_current_thread(cpu)?;
        (0..count).map(|_| TcpStream::connect(addr)).collect()
    });
    let landings = accept_n(listeners, count, probe, deadline)?;
    client
        .join()
        .map_err(|_| io::Error::other("client thread panicked"))??;
    Ok(landings)
}

/// Accepts `count` connections across the group, polling each non-blocking listener.
pub fn accept_n(
    listeners: &[TcpListener],
    count: usize,
    probe: &SteeringProbe,
    deadline: Duration,
) -> io::Result<Vec<Landing>> {
    let until = Instant::now() + deadline;
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let mut progress = false;
        for (shard, l) in listeners.iter().enumerate() {
            match l.accept() {
                Ok((s, _)) => {
                    let syn_cpu = probe.on_accept(shard, s.as_fd());
                    out.push(Landing { shard, syn_cpu });
                    progress = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if !progress {
            if Instant::now() > until {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("accepted {} of {count}", out.len()),
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    Ok(out)
}

/// Incoming CPU of a socket (re-exported for callers holding a stream).
pub fn syn_cpu(s: &TcpStream) -> Option<usize> {
    incoming_cpu(s.as_fd())
}
