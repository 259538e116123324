//! Session reads by key: `GET /v1/topics/{topic}/keys/{key}/records?last=N` answers the last
//! N records of `key` (oldest first) from every partition of a `strom.key.index=true` topic,
//! read through each partition's key index (`partition::key_index`) without a scan. Kafka's
//! protocol cannot express this (ListOffsets knows times, not keys), so it is HTTP only.
//! With an authorizer the caller needs READ on the topic (`http_access`), as Fetch does.

use axum::extract::{Path, Query, State};
use axum::http::{Extensions, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use serde::Deserialize;

use super::http_access;
use super::streams::{error, record_json, Streams};
use crate::partition::key_index::PER_KEY;
use crate::partition::record_view;
use crate::security::acl::ResourceType;
use crate::shard::frontend;

#[derive(Debug, Deserialize)]
pub struct KeyQuery {
    last: Option<usize>,
}

pub async fn key_records(
    State(s): State<Streams>,
    Path((topic, key)): Path<(String, String)>,
    Query(q): Query<KeyQuery>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Response {
    let ctx = s.ctx().clone();
    let allowed = http_access::reader(&ctx, &headers, &extensions)
        .and_then(|a| http_access::require_read(&a, ResourceType::Topic, &topic));
    if let Err(r) = allowed {
        return *r;
    }
    let n = q.last.unwrap_or(10);
    if n == 0 || n > PER_KEY {
        return error(
            StatusCode::BAD_REQUEST,
            format!("last must be between 1 and {PER_KEY}"),
        );
    }
    let (partitions, max_decompressed, indexed) = {
        let catalog = ctx.catalog.snapshot();
        let Some(meta) = catalog.get(topic.as_str()) else {
            return error(StatusCode::NOT_FOUND, format!("topic {topic} not found"));
        };
        (
            meta.partitions,
            meta.settings.max_decompressed_bytes,
            meta.settings.key_index,
        )
    };
    if !indexed {
        return error(
            StatusCode::BAD_REQUEST,
            format!("topic {topic} does not index keys: set strom.key.index=true"),
        );
    }
    let key = Bytes::from(key);
    let mut records = Vec::new();
    // A key usually lives in one partition (the default partitioner), but a custom one may
    // spread it: ask each.
    for partition in 0..partitions {
        let shard = crate::shard::home_shard(&topic, partition, ctx.shard_count());
        let (t, k) = (topic.clone(), key.clone());
        let hits = frontend::call_from_outside(&ctx, shard, move |state| async move {
            // Waits for the partition's index if it is being built (`key_index`).
            match state.partition(&t, partition) {
                Some(p) => p.records_by_key(&k, n).await,
                None => None,
            }
        })
        .await;
        let Ok(Some(hits)) = hits else { continue };
        for hit in hits {
            let _ = record_view::for_each_record(
                &hit.chunk,
                hit.offset,
                max_decompressed,
                |_, offset, ts, r| {
                    // The offset itself, and still this key's (compaction may have removed it).
                    if offset == hit.offset && r.key == Some(&key[..]) {
                        records.push((ts, offset, record_json(&topic, partition, offset, ts, r)));
                    }
                },
            );
        }
    }
    // Across partitions, by time; the last n.
    records.sort_by_key(|(ts, offset, _)| (*ts, *offset));
    let from = records.len().saturating_sub(n);
    let body: Vec<serde_json::Value> = records.drain(from..).map(|(_, _, j)| j).collect();
    Json(serde_json::json!({ "topic": topic, "key": String::from_utf8_lossy(&key), "records": body }))
        .into_response()
}
