//! Per-shard Kafka listeners: every shard binds its own socket on the same address with
//! `SO_REUSEPORT`, so the kernel spreads new connections across shards with no accept lock
//! and no hand-off between threads. (eBPF steering by SYN CPU replaces the kernel's hash
//! later; the hash stays as the fallback.)

use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

/// Binds a non-blocking reuseport listener. When `addr` has port 0 the first call picks a
/// port; pass the bound address to the others so all shards share it.
pub fn bind_reuseport(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}
