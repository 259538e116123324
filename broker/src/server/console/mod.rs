//! The web console on the admin port: `/console` (a single page, its HTML, JS and CSS
//! embedded in the binary) and the JSON API it reads under `/api/v1`.
//!
//! The API runs the CLI's operations (`cli::topic::describe`, `cli::group::seek`, …) through
//! `cli::client::Client::local`: each Kafka request is handled in this process by the
//! broker's own handlers on a shard (`frontend::call_from_outside`), so the console sees what
//! any Kafka client would, with the same error codes, and its JSON is the CLI's `--format
//! json`. Throughput and lag sparklines are drawn in the browser from `/metrics`.
//!
//! Read-only unless the principal may write (`auth`): requests may sign in with HTTP Basic
//! (a SCRAM user's name and password) and run as that user, else as User:ANONYMOUS; with an
//! authorizer the broker's ACLs decide, as for any Kafka client.

pub(crate) mod auth;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::cli::client::Client;
use crate::cli::error::{kafka_error_name, CliError};
use crate::cli::offsets::OffsetSpec;
use crate::cli::{cluster, connect, group, messages, topic};
use crate::shard::BrokerContext;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// How long one console request may wait on the broker.
const TIMEOUT: Duration = Duration::from_secs(15);
/// Records per message-browser page at most.
const MAX_PAGE: usize = 500;

/// The connectors `strom serve` runs beside the broker (`[[connectors]]`), set once they start.
#[derive(Default)]
pub struct Connectors(OnceLock<strom_connectors::Metrics>);

impl Connectors {
    pub fn set(&self, m: strom_connectors::Metrics) {
        let _ = self.0.set(m);
    }
}

#[derive(Clone)]
struct Console {
    ctx: Arc<BrokerContext>,
    connectors: Arc<Connectors>,
}

impl Console {
    /// A client whose requests run as `who`.
    fn client(&self, who: &Caller) -> Client {
        Client::local_as(self.ctx.clone(), TIMEOUT, auth::principal(who.0.as_deref()))
    }
}

/// The signed-in user of a request (`auth::caller`); wrong credentials are a 401.
struct Caller(Option<String>);

impl FromRequestParts<Console> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, c: &Console) -> Result<Self, Self::Rejection> {
        auth::caller(&c.ctx, &parts.headers)
            .map(Caller)
            .map_err(unauthorized)
    }
}

/// 401 with a Basic challenge, so a browser asks for a user and password.
fn unauthorized(e: auth::AuthError) -> Response {
    let body = ErrorBody {
        code: None,
        name: None,
        message: e.to_string(),
        hint: Some("sign in with a SASL/SCRAM user (`strom user list`)"),
    };
    (
        StatusCode::UNAUTHORIZED,
        [(
            header::WWW_AUTHENTICATE,
            "Basic realm=\"strom console\", charset=\"UTF-8\"",
        )],
        Json(serde_json::json!({ "error": body })),
    )
        .into_response()
}

pub fn router(ctx: Arc<BrokerContext>, connectors: Arc<Connectors>) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::temporary("/console/") }))
        .route(
            "/console",
            get(|| async { Redirect::permanent("/console/") }),
        )
        .route(
            "/console/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/console/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/console/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route("/login", get(login))
        .route("/api/v1/session", get(session))
        .route("/api/v1/cluster", get(cluster_info))
        .route("/api/v1/health", get(health))
        .route("/api/v1/topics", get(topics))
        .route("/api/v1/topics/{name}", get(topic_describe))
        .route("/api/v1/topics/{name}/messages", get(topic_messages))
        .route("/api/v1/groups", get(groups))
        .route("/api/v1/groups/{id}", get(group_describe))
        .route("/api/v1/groups/{id}/seek", post(group_seek))
        .route("/api/v1/connectors", get(connectors_status))
        .with_state(Console { ctx, connectors })
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// An API error: `{"error": {"code", "name", "message", "hint"}}` with a status that says
/// whose fault it is.
pub struct ApiError(CliError);

impl From<CliError> for ApiError {
    fn from(e: CliError) -> Self {
        ApiError(e)
    }
}

#[derive(Serialize)]
struct ErrorBody {
    code: Option<i16>,
    name: Option<String>,
    message: String,
    hint: Option<&'static str>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = match &self.0 {
            // UNKNOWN_TOPIC_OR_PARTITION, GROUP_ID_NOT_FOUND
            CliError::Kafka {
                code: c @ (3 | 69), ..
            } => (StatusCode::NOT_FOUND, Some(*c)),
            // TOPIC_, GROUP_, CLUSTER_AUTHORIZATION_FAILED: the ACLs said no.
            CliError::Kafka {
                code: c @ 29..=31, ..
            } => (StatusCode::FORBIDDEN, Some(*c)),
            CliError::Kafka { code, .. } => (StatusCode::CONFLICT, Some(*code)),
            CliError::Usage(_) => (StatusCode::BAD_REQUEST, None),
            CliError::Unreachable { .. } => (StatusCode::SERVICE_UNAVAILABLE, None),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, None),
        };
        let body = ErrorBody {
            code,
            name: code.map(|c| {
                kafka_error_name(c)
                    .split(' ')
                    .next()
                    .unwrap_or_default()
                    .to_string()
            }),
            message: self.0.to_string(),
            hint: self.0.hint(),
        };
        (status, Json(serde_json::json!({ "error": body }))).into_response()
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

async fn cluster_info(State(c): State<Console>, who: Caller) -> ApiResult<cluster::ClusterInfo> {
    Ok(Json(cluster::info(&mut c.client(&who)).await?))
}

async fn health(State(c): State<Console>, who: Caller) -> ApiResult<cluster::Health> {
    Ok(Json(cluster::health(&mut c.client(&who)).await?))
}

#[derive(Deserialize)]
struct TopicsQuery {
    #[serde(default)]
    internal: bool,
}

async fn topics(
    State(c): State<Console>,
    who: Caller,
    Query(q): Query<TopicsQuery>,
) -> ApiResult<topic::TopicList> {
    Ok(Json(topic::list(&mut c.client(&who), q.internal).await?))
}

async fn topic_describe(
    State(c): State<Console>,
    who: Caller,
    Path(name): Path<String>,
) -> ApiResult<topic::TopicDescription> {
    Ok(Json(topic::describe(&mut c.client(&who), &name).await?))
}

#[derive(Deserialize)]
struct MessagesQuery {
    #[serde(default)]
    partition: i32,
    /// start, end, OFFSET or @TIMESTAMP_MS (default end: the newest page).
    offset: Option<String>,
    limit: Option<usize>,
    key: Option<String>,
}

async fn topic_messages(
    State(c): State<Console>,
    who: Caller,
    Path(name): Path<String>,
    Query(q): Query<MessagesQuery>,
) -> ApiResult<messages::Page> {
    let from = OffsetSpec::parse(q.offset.as_deref().unwrap_or("end"))?;
    let limit = q.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let key = q.key.as_deref().filter(|k| !k.is_empty());
    let mut page =
        messages::browse(&mut c.client(&who), &name, q.partition, from, limit, key).await?;
    if let Some(view) = c.ctx.schema_view.get() {
        messages::decode_schemas(&mut page, view.as_ref());
    }
    Ok(Json(page))
}

async fn groups(State(c): State<Console>, who: Caller) -> ApiResult<group::GroupList> {
    Ok(Json(group::list(&mut c.client(&who)).await?))
}

async fn group_describe(
    State(c): State<Console>,
    who: Caller,
    Path(id): Path<String>,
) -> ApiResult<group::GroupDescription> {
    let d = group::describe(&mut c.client(&who), &id).await?;
    if let Some(e) = &d.error {
        return Err(CliError::kafka(format!("group {id:?}"), e.code, e.message.clone()).into());
    }
    Ok(Json(d))
}

#[derive(Deserialize)]
struct SeekBody {
    /// start, end, OFFSET or @TIMESTAMP_MS.
    to: String,
    #[serde(default)]
    topics: Vec<String>,
    #[serde(default)]
    dry_run: bool,
}

async fn group_seek(
    State(c): State<Console>,
    who: Caller,
    Path(id): Path<String>,
    Json(body): Json<SeekBody>,
) -> ApiResult<group::SeekResults> {
    let spec = OffsetSpec::parse(&body.to)?;
    let r = group::seek(
        &mut c.client(&who),
        &id,
        &body.topics,
        group::SeekTarget::Spec(spec),
        body.dry_run,
    )
    .await?;
    // The commit answers per partition; a refusal by the ACLs is the request's (403).
    let refused = r
        .partitions
        .iter()
        .find_map(|p| p.error.as_ref().filter(|e| matches!(e.code, 29..=31)));
    if let Some(e) = refused {
        return Err(CliError::kafka(format!("group {id:?}"), e.code, e.message.clone()).into());
    }
    Ok(Json(r))
}

/// Signing in: a Basic challenge until the browser sends a user the broker knows (it then
/// sends the same credentials with every console request), then back to the console.
async fn login(who: Caller) -> Response {
    match who.0 {
        Some(_) => Redirect::to("/console/").into_response(),
        None => unauthorized(auth::AuthError::SignIn),
    }
}

#[derive(Deserialize)]
struct SessionQuery {
    group: Option<String>,
}

async fn session(
    State(c): State<Console>,
    who: Caller,
    Query(q): Query<SessionQuery>,
) -> Json<auth::SessionView> {
    Json(auth::session(&c.ctx, who.0.as_deref(), q.group.as_deref()))
}

#[derive(Serialize)]
struct ConnectorsView {
    /// Whether this process runs connectors (`[[connectors]]` in the serve config).
    running: bool,
    connectors: Vec<connect::ConnectorStatus>,
}

async fn connectors_status(State(c): State<Console>) -> Json<ConnectorsView> {
    let statuses = c
        .connectors
        .0
        .get()
        .map(|m| connect::from_metrics(&String::from_utf8_lossy(&m.render())));
    Json(ConnectorsView {
        running: statuses.is_some(),
        connectors: statuses.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_cli_errors_when_answered_then_status_says_whose_fault() {
        let cases = [
            (CliError::kafka("t", 3, None), StatusCode::NOT_FOUND),
            (CliError::kafka("g", 69, None), StatusCode::NOT_FOUND),
            (CliError::kafka("g", 68, None), StatusCode::CONFLICT),
            (
                CliError::Usage("bad offset".into()),
                StatusCode::BAD_REQUEST,
            ),
            (
                CliError::Unreachable {
                    addr: "shard 0".into(),
                    reason: "gone".into(),
                },
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (
                CliError::Client("x".into()),
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
        ];
        for (e, status) in cases {
            assert_eq!(ApiError(e).into_response().status(), status);
        }
    }

    #[test]
    fn given_the_page_when_embedded_then_it_loads_its_script_and_styles() {
        assert!(INDEX_HTML.contains("/console/app.js"));
        assert!(INDEX_HTML.contains("/console/app.css"));
        assert!(APP_JS.contains("/api/v1/topics"));
    }
}
