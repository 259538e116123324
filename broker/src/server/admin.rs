//! The admin HTTP listener (default 127.0.0.1:9644), on axum: `/health` (the process is up),
//! `/ready` (recovery is done and shards serve), `/metrics` (Prometheus text, see
//! `crate::metrics`) and the web console with its JSON API (`server::console`).
//! It starts before recovery, so `/health` answers and `/ready` says 503 while logs recover.
//! This is off the hot path, on its own small thread, so a slow scraper never delays a shard:
//! a scrape costs each shard one cross-shard message (`frontend::call_from_outside`).
//!
//! Each service is a function returning a `Router` (`probes`, `console::router`), merged in
//! `broker_router`; `strom migrate` serves its own metrics router on the same thread shape
//! with `spawn_thread`. The schema registry, on its own port, is served by `serve` too, so
//! it is behind the same TLS and authentication.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::admin_auth::{Guard, RefusalBody};
use crate::shard::BrokerContext;

/// Requests handled at once over all routes: each holds a socket and, for /metrics, a
/// rendering.
const MAX_CONCURRENT: usize = 16;

pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4";

#[derive(Clone)]
struct Probes {
    ready: Arc<AtomicBool>,
    ctx: Arc<BrokerContext>,
}

/// `/health`, `/ready`, `/metrics` of the broker.
pub fn probes(ready: Arc<AtomicBool>, ctx: Arc<BrokerContext>) -> Router {
    Router::new()
        .route("/health", get(|| async { "ok\n" }))
        .route("/ready", get(ready_probe))
        .route("/metrics", get(metrics))
        .with_state(Probes { ready, ctx })
}

/// Everything the broker's admin port serves.
pub fn broker_router(
    ready: Arc<AtomicBool>,
    ctx: Arc<BrokerContext>,
    connectors: Arc<super::console::Connectors>,
) -> Router {
    probes(ready, ctx.clone()).merge(super::console::router(ctx, connectors))
}

async fn ready_probe(State(p): State<Probes>) -> Response {
    if p.ready.load(Ordering::Acquire) {
        "ready\n".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "recovering\n").into_response()
    }
}

async fn metrics(State(p): State<Probes>) -> Response {
    let ready = p.ready.load(Ordering::Acquire);
    let text = crate::metrics::scrape::render(&p.ctx, ready).await;
    prometheus_text(text)
}

pub fn prometheus_text(text: String) -> Response {
    ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], text).into_response()
}

/// Serves `router` on `listener` until `shutdown` changes, on a thread of its own (a
/// current-thread runtime), so a slow client or a busy caller never delays the other.
pub fn spawn_thread(
    name: &str,
    listener: std::net::TcpListener,
    router: Router,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    spawn_thread_with(name, listener, router, Router::new(), shutdown, None)
}

/// `spawn_thread` plus `long_lived` routes (SSE streams) that are not counted against
/// `MAX_CONCURRENT`: they stay open and limit themselves; and `security`, the port's TLS
/// and authentication (`server::admin_auth`), if any.
pub fn spawn_thread_with(
    name: &str,
    listener: std::net::TcpListener,
    router: Router,
    long_lived: Router,
    mut shutdown: watch::Receiver<bool>,
    security: Option<Arc<super::admin_auth::AdminSecurity>>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    // One request per connection, as this port always answered (`connection: close`):
    // scrapers and probes open one each, and nothing idles on the admin thread.
    let router = router
        .layer(axum::middleware::map_response(close_connection))
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(
            MAX_CONCURRENT,
        ))
        .merge(long_lived.layer(axum::middleware::map_response(close_connection)));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            rt.block_on(async move {
                let listener = match TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!(error = %e, "admin listener");
                        return;
                    }
                };
                let stop = async move {
                    let _ = shutdown.changed().await;
                };
                let guard = security.map(|s| Guard::new(s, RefusalBody::Text));
                if let Err(e) = serve(listener, router, guard, stop).await {
                    tracing::error!(error = %e, "admin server");
                }
            });
        })
}

/// Serves `router` on `listener` until `stop`: plain, or behind `guard`'s TLS and
/// authentication (`server::admin_auth`). The admin port and the schema registry share it,
/// so both honour the same `admin_*` settings.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    guard: Option<Guard>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let Some(guard) = guard else {
        // The peer's address reaches the handlers (`http_access`: ACL host checks).
        let service = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
        return axum::serve(listener, service)
            .with_graceful_shutdown(stop)
            .await;
    };
    let secured = super::admin_auth::AdminListener::new(listener, guard.security.tls.clone())?;
    let service = router
        .layer(axum::middleware::from_fn_with_state(
            guard,
            super::admin_auth::guard,
        ))
        .into_make_service_with_connect_info::<super::admin_auth::AdminPeer>();
    axum::serve(secured, service)
        .with_graceful_shutdown(stop)
        .await
}

async fn close_connection(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}
