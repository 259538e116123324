//! Per-shard Kafka listeners: for every configured listener (`listeners`), every shard binds
//! its own socket on the listener's address with `SO_REUSEPORT`, so the kernel (or the eBPF
//! steering program) spreads new connections across shards with no accept lock and no
//! hand-off between threads.
//!
//! A connection is authenticated here before its first request is read: on SSL and SASL_SSL
//! listeners the TLS handshake runs first (bounded by `tls::HANDSHAKE_TIMEOUT`); an SSL
//! listener's principal comes from the client certificate. A failed handshake is logged and
//! counted (`strom_tls_handshake_failures_total{listener}`) and the socket closed, as Kafka
//! closes a channel whose SSL handshake failed.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::read_ahead::{ReadAhead, READ_AHEAD};
use super::tls::{TlsAcceptors, HANDSHAKE_TIMEOUT};
use crate::config::listeners::SecurityProtocol;
use crate::security::{ListenerInfo, Principal, Session};
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
    info: Arc<ListenerInfo>,
    tls: Option<Arc<TlsAcceptors>>,
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
                    let (info, tls) = (info.clone(), tls.clone());
                    connections.push(tokio::task::spawn_local(async move {
                        serve_accepted(stream, info, tls, st.clone(), sd).await;
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

/// One accepted socket: TLS first where the listener has it, then the Kafka connection.
async fn serve_accepted(
    stream: TcpStream,
    info: Arc<ListenerInfo>,
    tls: Option<Arc<TlsAcceptors>>,
    shard: Rc<ShardState>,
    mut shutdown: watch::Receiver<bool>,
) {
    let addr = stream.peer_addr().ok();
    let peer = addr.map_or_else(|| "?".to_string(), |a| a.to_string());
    // Kafka's form (Java's InetAddress.toString): a slash, then the address.
    let client_host: Rc<str> = addr
        .map(|a| format!("/{}", a.ip()))
        .unwrap_or_default()
        .into();
    let _ = stream.set_nodelay(true);
    if !info.protocol.tls() {
        let session = Rc::new(
            Session::new(client_host, info, Principal::anonymous())
                .with_client_port(addr.map_or(0, |a| a.port())),
        );
        let (rd, wr) = stream.into_split();
        return super::connection::serve(rd, wr, peer, session, shard, shutdown).await;
    }
    let Some(tls) = tls else {
        // Server::start loads TLS whenever a listener needs it.
        tracing::error!(listener = %info.name, "TLS listener without TLS config; closing");
        return;
    };
    let failed = |reason: &dyn std::fmt::Display| {
        tracing::info!(peer = %peer, listener = %info.name, "failed authentication with {client_host} (SSL handshake failed): {reason}");
        shard
            .metrics
            .tls_handshake_failures
            .with_label_values(&[&info.name])
            .inc();
    };
    // rustls reads the socket a record at most; `ReadAhead` reads it in large chunks.
    let stream = ReadAhead::new(stream, READ_AHEAD);
    let handshake = tokio::select! {
        _ = shutdown.changed() => return,
        r = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor(info.protocol).accept(stream)) => r,
    };
    let stream = match handshake {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return failed(&e),
        Err(_) => return failed(&format_args!("no handshake within {HANDSHAKE_TIMEOUT:?}")),
    };
    let principal = if info.protocol == SecurityProtocol::Ssl {
        match tls.principal(stream.get_ref().1.peer_certificates()) {
            Ok(p) => p,
            Err(e) => return failed(&e),
        }
    } else {
        Principal::anonymous()
    };
    tracing::debug!(peer = %peer, listener = %info.name, %principal, "TLS connection established");
    let session = Rc::new(
        Session::new(client_host.clone(), info.clone(), principal)
            .with_client_port(addr.map_or(0, |a| a.port())),
    );
    let (rd, wr) = tokio::io::split(stream);
    super::connection::serve(rd, wr, peer.clone(), session, shard, shutdown).await
}
