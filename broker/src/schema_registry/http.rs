//! Confluent's REST API (`/subjects`, `/schemas`, `/config`, `/mode`, `/compatibility`) on
//! axum: paths, query parameters and JSON shapes as Confluent's resources have them, every
//! error as Confluent's `{"error_code", "message"}` body with its HTTP status (`error`).
//!
//! Bodies are read raw (bounded by `MAX_BODY`) and parsed here, so a malformed or oversized
//! body gets Confluent's answer rather than the framework's. Booleans in queries follow
//! Java's `Boolean.parseBoolean` (`True`, which confluent-kafka-python sends, is true).

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

use super::error::{RegistryError, CONTENT_TYPE};
use super::records::SchemaValue;
use super::registry::{validate_subject, Mode, SchemaRequest, VersionId, DEFAULT_LEVEL};
use super::store::Version;
use super::types::{Parsed, SchemaType};
use super::Service;

/// Largest request body read (a schema of several MB is possible; Confluent's own limit is
/// the `_schemas` record size, answered with 42209).
const MAX_BODY: usize = 16 * 1024 * 1024;

type S = State<Arc<Service>>;
type Q = Query<HashMap<String, String>>;
type Answer = Result<Response, RegistryError>;

pub fn router(service: Arc<Service>) -> Router {
    Router::new()
        .route("/", get(|| async { ok(json!({})) }))
        .route("/schemas", get(list_schemas))
        .route(
            "/schemas/types",
            get(|| async { ok(json!(SchemaType::ALL.map(|t| t.as_str()))) }),
        )
        .route("/schemas/ids/{id}", get(schema_by_id))
        .route("/schemas/ids/{id}/schema", get(raw_schema_by_id))
        .route("/schemas/ids/{id}/subjects", get(subjects_by_id))
        .route("/schemas/ids/{id}/versions", get(versions_by_id))
        .route("/subjects", get(list_subjects))
        .route("/subjects/{subject}", post(lookup).delete(delete_subject))
        .route(
            "/subjects/{subject}/versions",
            get(list_versions).post(register),
        )
        .route(
            "/subjects/{subject}/versions/{version}",
            get(get_version).delete(delete_version),
        )
        .route(
            "/subjects/{subject}/versions/{version}/schema",
            get(raw_version),
        )
        .route(
            "/subjects/{subject}/versions/{version}/referencedby",
            get(referenced_by),
        )
        .route(
            "/config",
            get(get_global_config)
                .put(put_global_config)
                .delete(delete_global_config),
        )
        .route(
            "/config/{subject}",
            get(get_config).put(put_config).delete(delete_config),
        )
        .route("/mode", get(get_global_mode).put(put_global_mode))
        .route(
            "/mode/{subject}",
            get(get_mode).put(put_mode).delete(delete_mode),
        )
        .route(
            "/compatibility/subjects/{subject}/versions",
            post(compat_all),
        )
        .route(
            "/compatibility/subjects/{subject}/versions/{version}",
            post(compat_version),
        )
        .route("/contexts", get(|| async { ok(json!(["."])) }))
        .fallback(|| async { RegistryError::NoRoute })
        .method_not_allowed_fallback(|| async { RegistryError::MethodNotAllowed })
        .with_state(service)
}

fn ok(v: Value) -> Answer {
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        v.to_string(),
    )
        .into_response())
}

/// Java's `Boolean.parseBoolean` of a query parameter (absent: false).
fn flag(q: &HashMap<String, String>, name: &str) -> bool {
    q.get(name).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

fn int_param(q: &HashMap<String, String>, name: &str, default: i64) -> i64 {
    q.get(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `offset` and `limit` (-1: all) of a listing.
fn page<T>(items: Vec<T>, q: &HashMap<String, String>) -> Vec<T> {
    let offset = int_param(q, "offset", 0).max(0) as usize;
    let limit = int_param(q, "limit", -1);
    let it = items.into_iter().skip(offset);
    if limit < 0 {
        it.collect()
    } else {
        it.take(limit as usize).collect()
    }
}

/// Reads a JSON body: Confluent's media types (or none) only, bounded, well-formed.
async fn json_body<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
) -> Result<T, RegistryError> {
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        let ct = ct
            .to_str()
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let accepted = [
            "application/vnd.schemaregistry.v1+json",
            "application/vnd.schemaregistry+json",
            "application/json",
            "application/octet-stream",
        ];
        if !ct.is_empty() && !accepted.contains(&ct.as_str()) {
            return Err(RegistryError::UnsupportedMediaType);
        }
    }
    let bytes = axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|_| RegistryError::BodyTooLarge)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
        RegistryError::MalformedJson(format!("Unrecognized or malformed JSON: {e}"))
    })?;
    // A request entity is a JSON object (serde would also take an array as a struct's fields).
    if !value.is_object() {
        return Err(RegistryError::UnprocessableJson(
            "Unrecognized request: a JSON object is expected".into(),
        ));
    }
    serde_json::from_value(value).map_err(|e| {
        RegistryError::UnprocessableJson(format!("Unrecognized field or wrong type: {e}"))
    })
}

fn parse_id(id: &str) -> Result<i32, RegistryError> {
    // Jersey answers a path parameter that is not an int with 404.
    id.parse::<i32>().map_err(|_| RegistryError::NoRoute)
}

/// Confluent's `Schema` entity of a stored version.
fn schema_json(v: &Version) -> Value {
    let s = &v.value;
    let mut o = serde_json::Map::new();
    o.insert("subject".into(), json!(s.subject));
    o.insert("version".into(), json!(s.version));
    o.insert("id".into(), json!(s.id));
    o.insert("schemaType".into(), json!(s.schema_type));
    if !s.references.is_empty() {
        o.insert("references".into(), json!(s.references));
    }
    if let Some(m) = &s.metadata {
        o.insert("metadata".into(), m.clone());
    }
    if let Some(r) = &s.rule_set {
        o.insert("ruleSet".into(), r.clone());
    }
    o.insert("schema".into(), json!(s.schema));
    o.insert("ts".into(), json!(v.ts));
    o.insert("deleted".into(), json!(s.deleted));
    Value::Object(o)
}

/// The schema string in the asked `format`: `serialized` gives PROTOBUF's base64 descriptor.
fn formatted(service: &Service, value: &SchemaValue, format: Option<&String>) -> String {
    if format.map(String::as_str) == Some("serialized") && value.schema_type == "PROTOBUF" {
        let parsed = service
            .read(|r| Ok(r.parsed_by_id(value.id)))
            .ok()
            .flatten();
        if let Some(p) = parsed {
            if let Parsed::Protobuf(proto) = p.as_ref() {
                return proto.serialized.clone();
            }
        }
    }
    value.schema.clone()
}

async fn list_schemas(State(svc): S, Query(q): Q) -> Answer {
    let prefix = q.get("subjectPrefix").cloned().unwrap_or_default();
    let deleted = flag(&q, "deleted");
    let latest_only = flag(&q, "latestOnly");
    let items = svc.read(|r| {
        let mut out = Vec::new();
        for (subject, _) in r.store.subjects() {
            if !subject.starts_with(&prefix) {
                continue;
            }
            let versions: Vec<Version> = r
                .store
                .versions(&subject)
                .filter(|v| deleted || !v.value.deleted)
                .cloned()
                .collect();
            if latest_only {
                out.extend(versions.last().map(schema_json));
            } else {
                out.extend(versions.iter().map(schema_json));
            }
        }
        Ok(out)
    })?;
    ok(json!(page(items, &q)))
}

async fn schema_by_id(State(svc): S, Path(id): Path<String>, Query(q): Q) -> Answer {
    let id = parse_id(&id)?;
    let value = svc.read(|r| {
        let subject = q.get("subject");
        let mut keys = r.store.keys_of_id(id);
        let found = match subject {
            Some(s) => r
                .store
                .keys_of_id(id)
                .find(|v| &v.value.subject == s)
                .or_else(|| keys.next()),
            None => keys.next(),
        };
        found
            .map(|v| v.value.clone())
            .ok_or(RegistryError::SchemaNotFound(id))
    })?;
    let mut o = serde_json::Map::new();
    o.insert("schemaType".into(), json!(value.schema_type));
    o.insert(
        "schema".into(),
        json!(formatted(&svc, &value, q.get("format"))),
    );
    if !value.references.is_empty() {
        o.insert("references".into(), json!(value.references));
    }
    if let Some(m) = &value.metadata {
        o.insert("metadata".into(), m.clone());
    }
    if let Some(r) = &value.rule_set {
        o.insert("ruleSet".into(), r.clone());
    }
    ok(Value::Object(o))
}

async fn raw_schema_by_id(State(svc): S, Path(id): Path<String>, Query(q): Q) -> Answer {
    let id = parse_id(&id)?;
    let value = svc.read(|r| {
        r.store
            .keys_of_id(id)
            .next()
            .map(|v| v.value.clone())
            .ok_or(RegistryError::SchemaNotFound(id))
    })?;
    let text = formatted(&svc, &value, q.get("format"));
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response())
}

async fn subjects_by_id(State(svc): S, Path(id): Path<String>, Query(q): Q) -> Answer {
    let id = parse_id(&id)?;
    let deleted = flag(&q, "deleted");
    let subjects = svc.read(|r| {
        if r.store.keys_of_id(id).next().is_none() {
            return Err(RegistryError::SchemaNotFound(id));
        }
        let mut s: Vec<String> = r
            .store
            .keys_of_id(id)
            .filter(|v| deleted || !v.value.deleted)
            .map(|v| v.value.subject.clone())
            .collect();
        s.dedup();
        Ok(s)
    })?;
    ok(json!(page(subjects, &q)))
}

async fn versions_by_id(State(svc): S, Path(id): Path<String>, Query(q): Q) -> Answer {
    let id = parse_id(&id)?;
    let deleted = flag(&q, "deleted");
    let versions = svc.read(|r| {
        if r.store.keys_of_id(id).next().is_none() {
            return Err(RegistryError::SchemaNotFound(id));
        }
        Ok(r.store
            .keys_of_id(id)
            .filter(|v| deleted || !v.value.deleted)
            .map(|v| json!({"subject": v.value.subject, "version": v.value.version}))
            .collect::<Vec<_>>())
    })?;
    ok(json!(page(versions, &q)))
}

async fn list_subjects(State(svc): S, Query(q): Q) -> Answer {
    let prefix = q.get("subjectPrefix").cloned().unwrap_or_default();
    let (deleted, deleted_only) = (flag(&q, "deleted"), flag(&q, "deletedOnly"));
    let subjects = svc.read(|r| {
        Ok(r.store
            .subjects()
            .into_iter()
            .filter(|(s, _)| s.starts_with(&prefix))
            .filter(|(_, all_deleted)| {
                if deleted_only {
                    *all_deleted
                } else {
                    deleted || !all_deleted
                }
            })
            .map(|(s, _)| s)
            .collect::<Vec<_>>())
    })?;
    ok(json!(page(subjects, &q)))
}

async fn list_versions(State(svc): S, Path(subject): Path<String>, Query(q): Q) -> Answer {
    let (deleted, deleted_only, negative) = (
        flag(&q, "deleted"),
        flag(&q, "deletedOnly"),
        flag(&q, "deletedAsNegative"),
    );
    let versions = svc.read(|r| {
        if !r
            .store
            .has_subject(&subject, deleted || deleted_only || negative)
        {
            return Err(RegistryError::SubjectNotFound(subject.clone()));
        }
        Ok(r.store
            .versions(&subject)
            .filter_map(|v| {
                let (n, d) = (v.value.version, v.value.deleted);
                if negative {
                    Some(if d { -n } else { n })
                } else if deleted_only {
                    d.then_some(n)
                } else {
                    (deleted || !d).then_some(n)
                }
            })
            .collect::<Vec<_>>())
    })?;
    ok(json!(page(versions, &q)))
}

async fn register(State(svc): S, Path(subject): Path<String>, Query(q): Q, req: Request) -> Answer {
    let (parts, body) = req.into_parts();
    let body: SchemaRequest = json_body(&parts.headers, body).await?;
    let normalize = flag(&q, "normalize");
    // A known schema is answered from memory, without the write lock or the log.
    let known = svc.read(|r| Ok(r.registered_already(&subject, &body, normalize)))?;
    let value = match known {
        Some(v) => v,
        None => {
            svc.write(|r| {
                let out = r.register(&subject, &body, normalize)?;
                Ok((out.value, out.records))
            })
            .await?
        }
    };
    let mut o = serde_json::Map::new();
    o.insert("id".into(), json!(value.id));
    o.insert("version".into(), json!(value.version));
    o.insert("schemaType".into(), json!(value.schema_type));
    if !value.references.is_empty() {
        o.insert("references".into(), json!(value.references));
    }
    o.insert("schema".into(), json!(value.schema));
    ok(Value::Object(o))
}

async fn lookup(State(svc): S, Path(subject): Path<String>, Query(q): Q, req: Request) -> Answer {
    let (parts, body) = req.into_parts();
    let body: SchemaRequest = json_body(&parts.headers, body).await?;
    let v = svc.read(|r| r.lookup(&subject, &body, flag(&q, "normalize"), flag(&q, "deleted")))?;
    ok(schema_json(&v))
}

async fn delete_subject(State(svc): S, Path(subject): Path<String>, Query(q): Q) -> Answer {
    let permanent = flag(&q, "permanent");
    let versions = svc.write(|r| r.delete_subject(&subject, permanent)).await?;
    ok(json!(versions))
}

/// The version a `/subjects/{subject}/versions/{version}` path names ("latest", -1 or a
/// number; soft-deleted ones only with `?deleted=true`).
fn version_at(
    svc: &Service,
    subject: &str,
    version: &str,
    q: &HashMap<String, String>,
) -> Result<Version, RegistryError> {
    let version = VersionId::parse(version)?;
    svc.read(|r| r.get_version(subject, version, flag(q, "deleted")).cloned())
}

async fn get_version(
    State(svc): S,
    Path((subject, version)): Path<(String, String)>,
    Query(q): Q,
) -> Answer {
    let v = version_at(&svc, &subject, &version, &q)?;
    let mut j = schema_json(&v);
    if q.contains_key("format") {
        j["schema"] = json!(formatted(&svc, &v.value, q.get("format")));
    }
    ok(j)
}

async fn raw_version(
    State(svc): S,
    Path((subject, version)): Path<(String, String)>,
    Query(q): Q,
) -> Answer {
    let v = version_at(&svc, &subject, &version, &q)?;
    let text = formatted(&svc, &v.value, q.get("format"));
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response())
}

async fn referenced_by(
    State(svc): S,
    Path((subject, version)): Path<(String, String)>,
    Query(q): Q,
) -> Answer {
    let version = VersionId::parse(&version)?;
    let ids = svc.read(|r| {
        let v = r.get_version(&subject, version, true)?.value.version;
        let mut ids: Vec<i32> = r
            .store
            .referenced_by(&subject, v, flag(&q, "deleted"))
            .into_iter()
            .map(|x| x.value.id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    })?;
    ok(json!(page(ids, &q)))
}

async fn delete_version(
    State(svc): S,
    Path((subject, version)): Path<(String, String)>,
    Query(q): Q,
) -> Answer {
    let version = VersionId::parse(&version)?;
    let permanent = flag(&q, "permanent");
    let deleted = svc
        .write(|r| r.delete_version(&subject, version, permanent))
        .await?;
    ok(json!(deleted))
}

fn config_json(c: &super::records::ConfigValue, default_level: bool) -> Value {
    let mut o = serde_json::Map::new();
    if let Some(a) = &c.alias {
        o.insert("alias".into(), json!(a));
    }
    if let Some(n) = c.normalize {
        o.insert("normalize".into(), json!(n));
    }
    if let Some(v) = c.validate_fields {
        o.insert("validateFields".into(), json!(v));
    }
    match &c.compatibility_level {
        Some(l) => {
            o.insert("compatibilityLevel".into(), json!(l));
        }
        None if default_level => {
            o.insert("compatibilityLevel".into(), json!(DEFAULT_LEVEL.as_str()));
        }
        None => {}
    }
    if let Some(g) = &c.compatibility_group {
        o.insert("compatibilityGroup".into(), json!(g));
    }
    Value::Object(o)
}

async fn get_global_config(State(svc): S) -> Answer {
    let c = svc.read(|r| Ok(r.store.config(None).cloned().unwrap_or_default()))?;
    ok(config_json(&c, true))
}

async fn get_config(State(svc): S, Path(subject): Path<String>, Query(q): Q) -> Answer {
    let default_to_global = flag(&q, "defaultToGlobal");
    let c = svc.read(|r| match r.store.config(Some(&subject)) {
        Some(c) => Ok(c.clone()),
        None if default_to_global => Ok(r.store.config(None).cloned().unwrap_or_default()),
        None => Err(RegistryError::SubjectCompatibilityNotConfigured(
            subject.clone(),
        )),
    })?;
    ok(config_json(&c, true))
}

#[derive(serde::Deserialize)]
struct ConfigUpdate {
    #[serde(default)]
    compatibility: Option<String>,
    #[serde(default)]
    normalize: Option<bool>,
}

async fn put_config_for(svc: Arc<Service>, subject: Option<String>, req: Request) -> Answer {
    let (parts, body) = req.into_parts();
    let body: ConfigUpdate = json_body(&parts.headers, body).await?;
    let value = svc
        .write(|r| {
            r.set_config(
                subject.as_deref(),
                body.compatibility.as_deref(),
                body.normalize,
            )
        })
        .await?;
    // ConfigUpdateRequest: `compatibility`, not `compatibilityLevel`.
    let mut o = serde_json::Map::new();
    if let Some(n) = value.normalize {
        o.insert("normalize".into(), json!(n));
    }
    if let Some(l) = &value.compatibility_level {
        o.insert("compatibility".into(), json!(l));
    }
    ok(Value::Object(o))
}

async fn put_global_config(State(svc): S, req: Request) -> Answer {
    put_config_for(svc, None, req).await
}

async fn put_config(State(svc): S, Path(subject): Path<String>, req: Request) -> Answer {
    put_config_for(svc, Some(subject), req).await
}

async fn delete_global_config(State(svc): S) -> Answer {
    let old = svc.write(|r| r.delete_config(None)).await?;
    ok(config_json(&old, true))
}

async fn delete_config(State(svc): S, Path(subject): Path<String>) -> Answer {
    let old = svc.write(|r| r.delete_config(Some(&subject))).await?;
    ok(config_json(&old, false))
}

async fn get_global_mode(State(svc): S) -> Answer {
    let m = svc.read(|r| Ok(r.mode(None)))?;
    ok(json!({"mode": m.as_str()}))
}

async fn get_mode(State(svc): S, Path(subject): Path<String>, Query(q): Q) -> Answer {
    let default_to_global = flag(&q, "defaultToGlobal");
    let m = svc.read(|r| {
        match r
            .store
            .mode(Some(&subject))
            .and_then(|m| Mode::parse(&m.mode))
        {
            Some(m) => Ok(m),
            None if default_to_global => Ok(r.mode(None)),
            None => Err(RegistryError::SubjectModeNotConfigured(subject.clone())),
        }
    })?;
    ok(json!({"mode": m.as_str()}))
}

#[derive(serde::Deserialize)]
struct ModeUpdate {
    mode: Option<String>,
}

async fn put_mode_for(
    svc: Arc<Service>,
    subject: Option<String>,
    force: bool,
    req: Request,
) -> Answer {
    let (parts, body) = req.into_parts();
    let body: ModeUpdate = json_body(&parts.headers, body).await?;
    if let Some(s) = &subject {
        validate_subject(s)?;
    }
    let mode = body.mode.ok_or(RegistryError::InvalidMode)?;
    let m = svc
        .write(|r| r.set_mode(subject.as_deref(), &mode, force))
        .await?;
    ok(json!({"mode": m.as_str()}))
}

async fn put_global_mode(State(svc): S, Query(q): Q, req: Request) -> Answer {
    put_mode_for(svc, None, flag(&q, "force"), req).await
}

async fn put_mode(State(svc): S, Path(subject): Path<String>, Query(q): Q, req: Request) -> Answer {
    put_mode_for(svc, Some(subject), flag(&q, "force"), req).await
}

async fn delete_mode(State(svc): S, Path(subject): Path<String>) -> Answer {
    let m = svc.write(|r| r.delete_mode(&subject)).await?;
    ok(json!({"mode": m.as_str()}))
}

async fn compat_for(
    svc: Arc<Service>,
    subject: String,
    version: Option<VersionId>,
    q: HashMap<String, String>,
    req: Request,
) -> Answer {
    let (parts, body) = req.into_parts();
    let body: SchemaRequest = json_body(&parts.headers, body).await?;
    let normalize = flag(&q, "normalize");
    let result = svc.read(|r| {
        // "latest" of a subject with no versions: nothing to be incompatible with.
        if version == Some(VersionId::Latest) && !r.store.has_subject(&subject, false) {
            return Ok((true, Vec::new()));
        }
        r.test_compatibility(&subject, version, &body, normalize)
    })?;
    let (compatible, messages) = result;
    if flag(&q, "verbose") {
        ok(json!({"is_compatible": compatible, "messages": messages}))
    } else {
        ok(json!({"is_compatible": compatible}))
    }
}

async fn compat_all(
    State(svc): S,
    Path(subject): Path<String>,
    Query(q): Q,
    req: Request,
) -> Answer {
    compat_for(svc, subject, None, q, req).await
}

async fn compat_version(
    State(svc): S,
    Path((subject, version)): Path<(String, String)>,
    Query(q): Q,
    req: Request,
) -> Answer {
    let version = VersionId::parse(&version)?;
    compat_for(svc, subject, Some(version), q, req).await
}
