//! A v2 consumer instance's records: `GET …/records` (one Fetch over the instance's
//! partitions, decoded into the instance's format), the positions of partitions that have
//! none yet (the group's commit, else `auto.offset.reset`), and ListOffsets for seeks.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Buf;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest};
use kafka_protocol::records::RecordBatchDecoder;
use serde::Deserialize;
use serde_json::{json, Value};

use super::consumer_group::{self, Tp};
use super::consumers::{
    assigned, commit_positions, done, instance, rejoin, Instance, Reset, AUTO_COMMIT_INTERVAL,
    MAX_POLL_BYTES, MAX_POLL_WAIT_MS,
};
use super::error::{ProxyError, ProxyResult};
use super::formats::{self, Format};
use super::{json_response, Caller, Proxy, V2_JSON};
use crate::cli::client::ANY;
use crate::cli::offsets::OffsetSpec;

#[derive(Debug, Deserialize)]
pub struct RecordsQuery {
    timeout: Option<i64>,
    max_bytes: Option<i64>,
}

/// Whether `Accept` allows the instance's format: 406 with 40601 when it names another
/// embedded format, plain 406 when it names nothing JSON.
fn check_accept(headers: &HeaderMap, format: Format) -> ProxyResult<()> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let types: Vec<&str> = accept
        .split(',')
        .map(|t| t.split(';').next().unwrap_or("").trim())
        .collect();
    let ok = types.iter().any(|t| {
        t.eq_ignore_ascii_case(format.media_type())
            || matches!(*t, "*/*" | "application/*" | "application/json" | "")
            || t.eq_ignore_ascii_case(V2_JSON)
    });
    if ok {
        return Ok(());
    }
    if types
        .iter()
        .any(|t| t.starts_with("application/vnd.kafka.") && t.ends_with(".v2+json"))
    {
        return Err(ProxyError::FormatMismatch);
    }
    Err(ProxyError::NotAcceptable)
}

pub async fn records(
    State(p): State<Proxy>,
    who: Caller,
    Path((group, name)): Path<(String, String)>,
    Query(q): Query<RecordsQuery>,
    headers: HeaderMap,
) -> Response {
    done(
        async {
            let mut i = instance(&p, &group, &name, &who).await?;
            check_accept(&headers, i.format)?;
            let max_bytes = q
                .max_bytes
                .map_or(MAX_POLL_BYTES, |b| (b.max(1) as usize).min(MAX_POLL_BYTES));
            let wait = q.timeout.unwrap_or(1000).clamp(0, MAX_POLL_WAIT_MS as i64) as i32;
            let registry = p.registry.get().cloned();
            let records = poll(&mut i, wait, max_bytes, registry.as_ref()).await?;
            let format = i.format;
            Ok(json_response(
                StatusCode::OK,
                format.media_type(),
                &Value::Array(records),
            ))
        }
        .await,
    )
}

async fn poll(
    i: &mut Instance,
    wait_ms: i32,
    max_bytes: usize,
    registry: Option<&Arc<crate::schema_registry::Service>>,
) -> ProxyResult<Vec<Value>> {
    if i.auto_commit && i.last_commit.elapsed() >= AUTO_COMMIT_INTERVAL {
        if let Err(e) = commit_positions(i).await {
            tracing::debug!(group = %i.group, error = %e, "http proxy: auto commit");
        }
    }
    if !i.subscription.is_empty() && (i.membership.needs_join || i.membership.member_id.is_empty())
    {
        let topics = i.subscription.clone();
        rejoin(i, &topics).await?;
    }
    let tps = assigned(i);
    if tps.is_empty() {
        return Ok(Vec::new());
    }
    position_unpositioned(i, &tps).await?;
    let mut by_topic: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
    for (t, p) in &tps {
        by_topic.entry(t).or_default().push(
            FetchPartition::default()
                .with_partition(*p)
                .with_fetch_offset(i.positions[&(t.clone(), *p)])
                .with_current_leader_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(max_bytes as i32),
        );
    }
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes as i32)
        .with_isolation_level(0)
        .with_session_epoch(-1)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    FetchTopic::default()
                        .with_topic(crate::cli::topic_name(t))
                        .with_partitions(ps)
                })
                .collect(),
        );
    let (resp, _) = i.client.call(ANY, &req, 12).await?;
    if resp.error_code != 0 {
        return Err(ProxyError::Kafka {
            code: resp.error_code,
            message: Some("Fetch".into()),
        });
    }
    let mut out = Vec::new();
    let mut used = 0usize;
    let mut out_of_range = Vec::new();
    for t in resp.responses {
        let topic = t.topic.to_string();
        for pd in t.partitions {
            let tp = (topic.clone(), pd.partition_index);
            match pd.error_code {
                0 => {}
                1 => {
                    out_of_range.push(tp);
                    continue;
                }
                code => {
                    return Err(ProxyError::Kafka {
                        code,
                        message: Some(format!("Fetch {topic}-{}", pd.partition_index)),
                    })
                }
            }
            let mut records = pd.records.unwrap_or_default();
            let Some(pos) = i.positions.get(&tp).copied() else {
                continue;
            };
            let mut next = pos;
            'batches: while records.remaining() >= 12 {
                let len = i32::from_be_bytes([records[8], records[9], records[10], records[11]]);
                if len < 0 || records.remaining() < 12 + len as usize {
                    break;
                }
                let mut batch = records.split_to(12 + len as usize);
                let Ok(set) = RecordBatchDecoder::decode(&mut batch) else {
                    return Err(ProxyError::Internal(format!(
                        "undecodable batch at offset {next} of {topic}-{}",
                        pd.partition_index
                    )));
                };
                for r in set.records {
                    if r.offset < next {
                        continue;
                    }
                    if r.control {
                        next = r.offset + 1;
                        continue;
                    }
                    let size = r.key.as_ref().map_or(0, |k| k.len())
                        + r.value.as_ref().map_or(0, |v| v.len());
                    // The first record always goes (as Kafka returns at least one).
                    if used > 0 && used + size > max_bytes {
                        break 'batches;
                    }
                    used += size;
                    out.push(json!({
                        "topic": topic,
                        "key": formats::decode(registry, i.format, r.key.as_deref())?,
                        "value": formats::decode(registry, i.format, r.value.as_deref())?,
                        "partition": pd.partition_index,
                        "offset": r.offset,
                    }));
                    next = r.offset + 1;
                }
            }
            i.positions.insert(tp, next);
        }
    }
    for tp in out_of_range {
        i.positions.remove(&tp);
    }
    Ok(out)
}

/// Gives each partition without a position the group's committed offset, else the reset
/// policy's.
async fn position_unpositioned(i: &mut Instance, tps: &BTreeSet<Tp>) -> ProxyResult<()> {
    let missing: Vec<Tp> = tps
        .iter()
        .filter(|tp| !i.positions.contains_key(*tp))
        .cloned()
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let group = i.group.clone();
    let committed = crate::cli::group::committed(&mut i.client, ANY, &group).await?;
    let mut rest = Vec::new();
    for tp in missing {
        match committed.get(&tp.0).and_then(|m| m.get(&tp.1)) {
            Some(o) => {
                i.positions.insert(tp, *o);
            }
            None => rest.push(tp),
        }
    }
    if rest.is_empty() {
        return Ok(());
    }
    let spec = match i.reset {
        Reset::Earliest => OffsetSpec::Start,
        Reset::Latest => OffsetSpec::End,
        Reset::None => {
            return Err(ProxyError::IllegalState(format!(
                "Undefined offset with no reset policy for partitions: {}",
                rest.iter()
                    .map(|(t, p)| format!("{t}-{p}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    };
    let found = consumer_group::list_offsets(&mut i.client, &rest, spec).await?;
    i.positions.extend(found);
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn given_accept_headers_then_format_checked_as_confluent_does() {
        assert!(check_accept(&HeaderMap::new(), Format::Json).is_ok());
        assert!(check_accept(&accept("application/vnd.kafka.json.v2+json"), Format::Json).is_ok());
        assert!(check_accept(&accept("*/*"), Format::Binary).is_ok());
        let e = check_accept(
            &accept("application/vnd.kafka.binary.v2+json"),
            Format::Json,
        )
        .unwrap_err();
        assert_eq!(e.status_and_code(), (StatusCode::NOT_ACCEPTABLE, 40601));
        let e = check_accept(&accept("text/html"), Format::Json).unwrap_err();
        assert_eq!(e.status_and_code(), (StatusCode::NOT_ACCEPTABLE, 406));
    }
}
