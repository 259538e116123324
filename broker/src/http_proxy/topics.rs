//! v3 cluster, topic and partition resources (`/v3/clusters/…`) in Confluent's JSON shapes:
//! `kind`, `metadata.self` (an absolute URL built from the request's Host), related links.
//! Each answer comes from a Metadata / CreateTopics / DeleteTopics request handled by the
//! broker as the caller, so a topic the ACLs hide is not listed.

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ProxyError, ProxyResult};
use super::{json_response, read_json, Caller, Proxy};
use crate::cli::client::Client;

const JSON: &str = "application/json";

/// `http://HOST` of the request, for `metadata.self`.
fn base(headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// The cluster id clients see in Metadata.
pub async fn cluster_id(client: &mut Client) -> ProxyResult<String> {
    let md = client.metadata(Some(&[])).await?;
    Ok(md.cluster_id.map(|c| c.to_string()).unwrap_or_default())
}

/// The cluster id if `cluster` names this cluster, else Confluent's 404.
pub async fn check_cluster(client: &mut Client, cluster: &str) -> ProxyResult<String> {
    let id = cluster_id(client).await?;
    if id == cluster {
        Ok(id)
    } else {
        Err(ProxyError::ClusterNotFound(cluster.to_string()))
    }
}

fn related(url: String) -> Value {
    json!({ "related": url })
}

fn cluster_json(base: &str, id: &str, controller: i32) -> Value {
    let c = format!("{base}/v3/clusters/{id}");
    json!({
        "kind": "KafkaCluster",
        "metadata": { "self": c, "resource_name": format!("crn:///kafka={id}") },
        "cluster_id": id,
        "controller": related(format!("{c}/brokers/{controller}")),
        "acls": related(format!("{c}/acls")),
        "brokers": related(format!("{c}/brokers")),
        "broker_configs": related(format!("{c}/broker-configs")),
        "consumer_groups": related(format!("{c}/consumer-groups")),
        "topics": related(format!("{c}/topics")),
        "partition_reassignments": related(format!("{c}/topics/-/partitions/-/reassignment")),
    })
}

pub async fn clusters(State(p): State<Proxy>, who: Caller, headers: HeaderMap) -> Response {
    let r: ProxyResult<Value> = async {
        let mut client = p.client(&who);
        let md = client.metadata(Some(&[])).await?;
        let id = md.cluster_id.map(|c| c.to_string()).unwrap_or_default();
        let b = base(&headers);
        Ok(json!({
            "kind": "KafkaClusterList",
            "metadata": { "self": format!("{b}/v3/clusters"), "next": null },
            "data": [cluster_json(&b, &id, md.controller_id.0)],
        }))
    }
    .await;
    answer(r, StatusCode::OK)
}

pub async fn cluster(
    State(p): State<Proxy>,
    who: Caller,
    Path(cluster): Path<String>,
    headers: HeaderMap,
) -> Response {
    let r: ProxyResult<Value> = async {
        let mut client = p.client(&who);
        let md = client.metadata(Some(&[])).await?;
        let id = md.cluster_id.map(|c| c.to_string()).unwrap_or_default();
        if id != cluster {
            return Err(ProxyError::ClusterNotFound(cluster));
        }
        Ok(cluster_json(&base(&headers), &id, md.controller_id.0))
    }
    .await;
    answer(r, StatusCode::OK)
}

fn answer(r: ProxyResult<Value>, status: StatusCode) -> Response {
    match r {
        Ok(v) => json_response(status, JSON, &v),
        Err(e) => e.into_response(),
    }
}

fn topic_json(
    base: &str,
    cluster: &str,
    t: &kafka_protocol::messages::metadata_response::MetadataResponseTopic,
) -> Value {
    let name = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
    let u = format!("{base}/v3/clusters/{cluster}/topics/{name}");
    json!({
        "kind": "KafkaTopic",
        "metadata": {
            "self": u,
            "resource_name": format!("crn:///kafka={cluster}/topic={name}"),
        },
        "cluster_id": cluster,
        "topic_name": name,
        "is_internal": t.is_internal,
        "replication_factor": t.partitions.first().map_or(0, |p| p.replica_nodes.len()),
        "partitions_count": t.partitions.len(),
        "partitions": related(format!("{u}/partitions")),
        "configs": related(format!("{u}/configs")),
        "partition_reassignments": related(format!("{u}/partitions/-/reassignment")),
        "authorized_operations": [],
    })
}

pub async fn list(
    State(p): State<Proxy>,
    who: Caller,
    Path(cluster): Path<String>,
    headers: HeaderMap,
) -> Response {
    let r: ProxyResult<Value> = async {
        let mut client = p.client(&who);
        let id = check_cluster(&mut client, &cluster).await?;
        let mut md = client.metadata(None).await?;
        md.topics
            .sort_by_key(|t| t.name.as_ref().map(|n| n.to_string()));
        let b = base(&headers);
        let data: Vec<Value> = md
            .topics
            .iter()
            .filter(|t| t.error_code == 0)
            .map(|t| topic_json(&b, &id, t))
            .collect();
        Ok(json!({
            "kind": "KafkaTopicList",
            "metadata": { "self": format!("{b}/v3/clusters/{id}/topics"), "next": null },
            "data": data,
        }))
    }
    .await;
    answer(r, StatusCode::OK)
}

pub async fn get_topic(
    State(p): State<Proxy>,
    who: Caller,
    Path((cluster, topic)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let r: ProxyResult<Value> = async {
        let mut client = p.client(&who);
        let id = check_cluster(&mut client, &cluster).await?;
        let t = crate::cli::topic::partitions_of(&mut client, &topic).await?;
        Ok(topic_json(&base(&headers), &id, &t))
    }
    .await;
    answer(r, StatusCode::OK)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTopic {
    pub topic_name: String,
    pub partitions_count: Option<i32>,
    pub replication_factor: Option<i16>,
    #[serde(default)]
    pub configs: Vec<ConfigIn>,
    #[serde(default)]
    pub validate_only: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigIn {
    pub name: String,
    pub value: Option<String>,
}

pub async fn create(
    State(p): State<Proxy>,
    who: Caller,
    Path(cluster): Path<String>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let headers = parts.headers;
    let r: ProxyResult<Value> = async {
        let mut client = p.client(&who);
        let id = check_cluster(&mut client, &cluster).await?;
        let c: CreateTopic = read_json(&headers, body, &[JSON]).await?;
        let configs: Vec<(String, String)> = c
            .configs
            .into_iter()
            .filter_map(|c| c.value.map(|v| (c.name, v)))
            .collect();
        let results = crate::cli::topic::create(
            &mut client,
            std::slice::from_ref(&c.topic_name),
            c.partitions_count.unwrap_or(-1),
            c.replication_factor.unwrap_or(-1),
            &configs,
            c.validate_only,
        )
        .await?;
        if let Some(e) = results.0.first().and_then(|r| r.error.as_ref()) {
            return Err(ProxyError::Kafka {
                code: e.code,
                message: e.message.clone(),
            });
        }
        if c.validate_only {
            return Ok(json!({
                "kind": "KafkaTopic",
                "cluster_id": id,
                "topic_name": c.topic_name,
                "partitions_count": results.0.first().and_then(|r| r.partitions),
                "replication_factor": results.0.first().and_then(|r| r.replication_factor),
            }));
        }
        let t = crate::cli::topic::partitions_of(&mut client, &c.topic_name).await?;
        Ok(topic_json(&base(&headers), &id, &t))
    }
    .await;
    answer(r, StatusCode::CREATED)
}

pub async fn delete(
    State(p): State<Proxy>,
    who: Caller,
    Path((cluster, topic)): Path<(String, String)>,
) -> Response {
    let r: ProxyResult<()> = async {
        let mut client = p.client(&who);
        check_cluster(&mut client, &cluster).await?;
        let results = crate::cli::topic::delete(&mut client, std::slice::from_ref(&topic)).await?;
        if let Some(e) = results.0.first().and_then(|r| r.error.as_ref()) {
            return Err(ProxyError::Kafka {
                code: e.code,
                message: e.message.clone(),
            });
        }
        Ok(())
    }
    .await;
    match r {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => e.into_response(),
    }
}

fn partition_json(base: &str, cluster: &str, topic: &str, p: i32, leader: i32) -> Value {
    let u = format!("{base}/v3/clusters/{cluster}/topics/{topic}/partitions/{p}");
    json!({
        "kind": "KafkaPartition",
        "metadata": {
            "self": u,
            "resource_name": format!("crn:///kafka={cluster}/topic={topic}/partition={p}"),
        },
        "cluster_id": cluster,
        "topic_name": topic,
        "partition_id": p,
        "leader": related(format!("{u}/replicas/{leader}")),
        "replicas": related(format!("{u}/replicas")),
        "reassignment": related(format!("{u}/reassignment")),
    })
}

pub async fn partitions(
    State(p): State<Proxy>,
    who: Caller,
    Path((cluster, topic)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let r: ProxyResult<Value> = async {
        let mut client = p.client(&who);
        let id = check_cluster(&mut client, &cluster).await?;
        let t = crate::cli::topic::partitions_of(&mut client, &topic).await?;
        let b = base(&headers);
        let data: Vec<Value> = t
            .partitions
            .iter()
            .map(|x| partition_json(&b, &id, &topic, x.partition_index, x.leader_id.0))
            .collect();
        Ok(json!({
            "kind": "KafkaPartitionList",
            "metadata": {
                "self": format!("{b}/v3/clusters/{id}/topics/{topic}/partitions"),
                "next": null,
            },
            "data": data,
        }))
    }
    .await;
    answer(r, StatusCode::OK)
}

pub async fn partition(
    State(p): State<Proxy>,
    who: Caller,
    Path((cluster, topic, partition)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let r: ProxyResult<Value> = async {
        let mut client = p.client(&who);
        let id = check_cluster(&mut client, &cluster).await?;
        let n: i32 = partition
            .parse()
            .map_err(|_| ProxyError::PartitionNotFound)?;
        let t = crate::cli::topic::partitions_of(&mut client, &topic).await?;
        let x = t
            .partitions
            .iter()
            .find(|x| x.partition_index == n)
            .ok_or(ProxyError::PartitionNotFound)?;
        Ok(partition_json(
            &base(&headers),
            &id,
            &topic,
            n,
            x.leader_id.0,
        ))
    }
    .await;
    answer(r, StatusCode::OK)
}
