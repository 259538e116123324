//! Per-shard Kafka listeners: every shard binds its own socket on the same address with
//! `SO_REUSEPORT`, so the kernel spreads new connections across shards with no accept lock
//! and no hand-off between threads. (eBPF steering by SYN CPU replaces the kernel's hash
//! later; the hash stays as the fallback.)

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::watch;

use crate::shard::ShardState;

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

/// A shard's accept loop: serves each connection the kernel hands this shard's listener
/// until shutdown, then waits (bounded) for in-flight requests to finish, so a clean
/// shutdown answers what it has read before the logs close.
pub async fn accept_loop(
    state: Rc<ShardState>,
    listener: tokio::net::TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    let id = state.id;
    let mut connections = Vec::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    state.count_connection(1);
                    state.ctx.steering.on_accept(id, std::os::fd::AsFd::as_fd(&stream));
                    let st = state.clone();
                    let sd = shutdown.clone();
                    connections.push(tokio::task::spawn_local(async move {
                        super::connection::serve(stream, st.clone(), sd).await;
                        st.count_connection(-1);
                    }));
                    connections.retain(|c| !c.is_finished());
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        futures::future::join_all(connections),
    )
    .await;
}
