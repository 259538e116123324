//! The admin port's HTTP API for AI pipelines (issue 21): token streams over SSE
//! (`streams`) and session reads by key (`sessions`), with the CORS answers both need. The
//! router lives here, above both, so neither module imports the other's handlers.

use std::sync::Arc;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::sync::watch;

use super::sessions;
use super::streams::{self, Streams};
use crate::shard::BrokerContext;

pub fn router(ctx: Arc<BrokerContext>, shutdown: watch::Receiver<bool>) -> Router {
    Router::new()
        .route(
            "/v1/topics/{topic}/partitions/{partition}/stream",
            get(streams::stream).options(preflight),
        )
        .route(
            "/v1/topics/{topic}/keys/{key}/records",
            get(sessions::key_records).options(preflight),
        )
        .layer(axum::middleware::map_response(allow_any_origin))
        .with_state(Streams::new(ctx, shutdown))
}

/// Pages of other origins (a chat front end) read the streams: the data is what a Kafka
/// client of the same principal may read (`http_access`: READ ACLs), and no credentials are
/// allowed cross-origin (no `Access-Control-Allow-Credentials`), so such a page reads as
/// `User:ANONYMOUS`.
async fn allow_any_origin(mut r: Response) -> Response {
    r.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    r
}

/// CORS preflight: an `EventSource` reconnecting cross-origin sends `Last-Event-ID`.
async fn preflight() -> Response {
    (
        StatusCode::NO_CONTENT,
        [
            (header::ACCESS_CONTROL_ALLOW_METHODS, "GET, OPTIONS"),
            (
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                "Last-Event-ID, Cache-Control, Accept",
            ),
            (header::ACCESS_CONTROL_MAX_AGE, "600"),
        ],
    )
        .into_response()
}
