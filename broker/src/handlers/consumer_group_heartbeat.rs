//! ConsumerGroupHeartbeat (key 68, KIP-848): join, heartbeat, leave and receive the
//! broker-computed assignment in one request. Partitions travel as topic ids on the wire and
//! as topic names inside the group (names are what subscriptions hold).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::coordinator::group::consumer::HeartbeatParams;
use crate::coordinator::group::{self};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 1;

/// The one place ConsumerGroupHeartbeat failures become Kafka error codes.
pub async fn handle(
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    if !ctx.ctx().features.consumer_protocol_enabled() {
        // group.version 0: the consumer protocol is off, as Kafka's KafkaApis answers then.
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(kafka_protocol::error::ResponseError::UnsupportedVersion.code());
    }
    // Kafka's `handleConsumerGroupHeartbeat`: READ on the group (GROUP_AUTHORIZATION_FAILED),
    // DESCRIBE on every subscribed topic (TOPIC_AUTHORIZATION_FAILED naming them); a regex
    // resolves to the topics the principal may DESCRIBE (`may_describe`, given to the
    // coordinator, which resolves the group's regexes when they are due).
    let access = ctx.access();
    {
        use kafka_protocol::error::ResponseError;
        if !access.allows(Operation::Read, ResourceType::Group, &req.group_id) {
            return ConsumerGroupHeartbeatResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code());
        }
        let denied: Vec<&str> = req
            .subscribed_topic_names
            .iter()
            .flatten()
            .map(|t| t.as_str())
            .filter(|t| !access.allows(Operation::Describe, ResourceType::Topic, t))
            .collect();
        if !denied.is_empty() {
            return ConsumerGroupHeartbeatResponse::default()
                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                .with_error_message(Some(StrBytes::from_string(format!(
                    "The group member is not authorized to describe topics: {}",
                    denied.join(", ")
                ))));
        }
    }
    let catalog = ctx.ctx().catalog.snapshot();
    let owned = req.topic_partitions.as_ref().map(|tps| {
        let mut a: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
        for tp in tps {
            if let Some(t) = catalog.by_id(&tp.topic_id) {
                a.entry(t.name.to_string())
                    .or_default()
                    .extend(tp.partitions.iter().copied());
            }
        }
        a
    });
    let params = HeartbeatParams {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        client_id: ctx
            .header
            .client_id
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default(),
        client_host: ctx.session.client_host.to_string(),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed: req
            .subscribed_topic_names
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.to_string()).collect()),
        regex: req.subscribed_topic_regex.as_ref().map(|s| s.to_string()),
        assignor: req.server_assignor.as_ref().map(|s| s.to_string()),
        owned,
    };
    let group_id = req.group_id.to_string();
    let gid = group_id.clone();
    let may_describe = move |t: &str| access.allows(Operation::Describe, ResourceType::Topic, t);
    let r = group::on_coordinator(ctx.ctx(), &group_id, move |gs, _| async move {
        gs.consumer_heartbeat(&gid, params, &may_describe).await
    })
    .await;
    match r {
        Ok(h) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(StrBytes::from_string(h.member_id)))
            .with_member_epoch(h.member_epoch)
            .with_heartbeat_interval_ms(h.heartbeat_interval_ms)
            .with_assignment(h.assignment.map(|a| {
                Assignment::default().with_topic_partitions(
                    a.into_iter()
                        .filter_map(|(t, ps)| {
                            let id = catalog.get(&t)?.id;
                            Some(
                                TopicPartitions::default()
                                    .with_topic_id(id)
                                    .with_partitions(ps.into_iter().collect()),
                            )
                        })
                        .collect(),
                )
            })),
        Err(e) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(super::errors::group_code(&e))
            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
    }
}
