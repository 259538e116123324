//! Metadata (key 3): brokers (this node), cluster id, controller, and topics with their
//! partitions. Unknown topics are auto-created when the request allows it and
//! `auto_create_topics_enable` is on, as Kafka does.
//!
//! Authorization (Kafka's `handleTopicMetadataRequest`): a topic is shown only with DESCRIBE
//! on it — left out of an all-topics answer, TOPIC_AUTHORIZATION_FAILED when named,
//! UNKNOWN_TOPIC_ID when asked by id (its existence is not disclosed); auto-creation needs
//! CREATE on the cluster or the topic (else TOPIC_AUTHORIZATION_FAILED);
//! `include_*_authorized_operations` fill in the allowed operations.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::metadata::catalog::{validate_topic_name, TopicMeta};
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 13;

pub fn topic_response(ctx: &RequestContext, t: &TopicMeta) -> MetadataResponseTopic {
    let v = ctx.version();
    let ids = |v: &[i32]| v.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
    let listener = &ctx.session.listener.name;
    let partitions = super::placement::placements(ctx.ctx(), &t.name, 0..t.partitions, listener)
        .into_iter()
        .map(|(p, at)| {
            // Kafka's `errorUnavailableListeners`: before v6 a leader without the client's
            // listener is LEADER_NOT_AVAILABLE.
            let code = match at.error_code {
                c if c == ResponseError::ListenerNotFound.code() && v < 6 => {
                    ResponseError::LeaderNotAvailable.code()
                }
                c => c,
            };
            MetadataResponsePartition::default()
                .with_error_code(code)
                .with_partition_index(p)
                .with_leader_id(BrokerId(at.leader))
                .with_leader_epoch(if v >= 7 { at.leader_epoch } else { -1 })
                .with_isr_nodes(ids(&at.isr))
                .with_replica_nodes(ids(&at.replicas))
                .with_offline_replicas(if v >= 5 { ids(&at.offline) } else { Vec::new() })
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(t.name.to_string()))))
        .with_topic_id(if v >= 10 { t.id } else { uuid::Uuid::nil() })
        .with_is_internal(v >= 1 && t.internal)
        .with_partitions(partitions)
}

fn error_topic(name: Option<TopicName>, id: uuid::Uuid, code: i16) -> MetadataResponseTopic {
    // Only v10+ requests name topics by id, so a non-nil id here is always encodable.
    MetadataResponseTopic::default()
        .with_name(name)
        .with_topic_id(id)
        .with_error_code(code)
}

pub async fn handle(ctx: &RequestContext, req: MetadataRequest) -> MetadataResponse {
    let broker = ctx.ctx();
    let (host, port) = ctx.advertised();
    let node = BrokerId(broker.config.node_id);
    // v0 means "all topics" by an empty list; v1+ by null.
    let wanted = match req.topics {
        Some(t) if !(ctx.version() == 0 && t.is_empty()) => Some(t),
        _ => None,
    };
    let access = ctx.access();
    let describe = |name: &str| access.allows(Operation::Describe, ResourceType::Topic, name);
    let denied = |name: TopicName| {
        let code = ResponseError::TopicAuthorizationFailed.code();
        error_topic(Some(name), uuid::Uuid::nil(), code)
    };
    let mut topics = Vec::new();
    match wanted {
        None => {
            let catalog = broker.catalog.snapshot();
            topics.extend(
                catalog
                    .topics
                    .values()
                    .filter(|t| describe(&t.name))
                    .map(|t| topic_response(ctx, t)),
            );
        }
        Some(requested) => {
            let auto_create = broker.config.auto_create_topics_enable
                && (ctx.version() < 4 || req.allow_auto_topic_creation);
            for rt in requested {
                let catalog = broker.catalog.snapshot();
                let Some(name) = rt.name.clone() else {
                    // v10+: lookup by topic id.
                    match catalog.by_id(&rt.topic_id).filter(|t| describe(&t.name)) {
                        Some(t) => topics.push(topic_response(ctx, t)),
                        None => topics.push(error_topic(
                            None,
                            rt.topic_id,
                            ResponseError::UnknownTopicId.code(),
                        )),
                    }
                    continue;
                };
                if !describe(name.as_str()) {
                    topics.push(denied(name));
                    continue;
                }
                if let Some(t) = catalog.get(name.as_str()) {
                    topics.push(topic_response(ctx, t));
                    continue;
                }
                if validate_topic_name(name.as_str()).is_err() {
                    topics.push(error_topic(
                        Some(name),
                        uuid::Uuid::nil(),
                        ResponseError::InvalidTopicException.code(),
                    ));
                    continue;
                }
                if !auto_create {
                    topics.push(error_topic(
                        Some(name),
                        uuid::Uuid::nil(),
                        ResponseError::UnknownTopicOrPartition.code(),
                    ));
                    continue;
                }
                if !access.allows_cluster(Operation::Create)
                    && !access.allows(Operation::Create, ResourceType::Topic, name.as_str())
                {
                    topics.push(denied(name));
                    continue;
                }
                match crate::metadata::topics::create_topic(
                    broker,
                    name.as_str(),
                    broker.config.num_partitions,
                    Default::default(),
                )
                .await
                {
                    Ok(t) => {
                        // Kafka answers the creating request with LEADER_NOT_AVAILABLE; here the
                        // partitions are ready at once, so the topic is answered in full.
                        topics.push(topic_response(ctx, &t));
                    }
                    Err(crate::handlers::create_topics::CreateError::AlreadyExists) => {
                        // Created concurrently by another request.
                        let catalog = broker.catalog.snapshot();
                        match catalog.get(name.as_str()) {
                            Some(t) => topics.push(topic_response(ctx, t)),
                            None => topics.push(error_topic(
                                Some(name),
                                uuid::Uuid::nil(),
                                ResponseError::LeaderNotAvailable.code(),
                            )),
                        }
                    }
                    Err(e) => {
                        tracing::warn!(topic = %name.as_str(), error = %e, "auto-create failed");
                        topics.push(error_topic(
                            Some(name),
                            uuid::Uuid::nil(),
                            super::errors::create_code(&e),
                        ));
                    }
                }
            }
        }
    }
    let v = ctx.version();
    if req.include_topic_authorized_operations {
        let denied = ResponseError::TopicAuthorizationFailed.code();
        for t in topics.iter_mut().filter(|t| t.error_code != denied) {
            if let Some(name) = &t.name {
                t.topic_authorized_operations =
                    access.operations(true, ResourceType::Topic, name.as_str());
            }
        }
    }
    let cluster_ops = access.operations(
        (8..=10).contains(&v) && req.include_cluster_authorized_operations,
        ResourceType::Cluster,
        CLUSTER_NAME,
    );
    let (brokers, controller, cluster_id) = match broker.cluster.get() {
        None => (
            vec![MetadataResponseBroker::default()
                .with_node_id(node)
                .with_host(StrBytes::from_string(host))
                .with_port(port)],
            node,
            broker.cluster_id.clone(),
        ),
        Some(cluster) => {
            let image = cluster.image();
            // Live brokers only, on the listener the request came in on: Kafka's
            // `getAliveBrokerNodes(listenerName)` leaves the fenced out (a client would
            // otherwise keep dialling a dead node; its partitions have moved) and those
            // without that listener.
            let brokers = image
                .nodes_on(&ctx.session.listener.name, false)
                .into_iter()
                .map(|(b, _)| {
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(b.id))
                        .with_host(StrBytes::from_string(b.host))
                        .with_port(b.port)
                        .with_rack(b.rack.map(StrBytes::from_string))
                })
                .collect();
            let controller = BrokerId(cluster.controller().unwrap_or(-1));
            (brokers, controller, broker.cluster_id_for_clients())
        }
    };
    MetadataResponse::default()
        .with_cluster_authorized_operations(cluster_ops)
        .with_brokers(brokers)
        .with_cluster_id((v >= 2).then(|| StrBytes::from_string(cluster_id)))
        .with_controller_id(if v >= 1 { controller } else { BrokerId(-1) })
        .with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn topic(name: &str) -> MetadataRequestTopic {
        MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.into()))))
    }

    #[test]
    fn given_unknown_topic_when_auto_create_allowed_then_created_with_defaults() {
        let h = Harness::new();
        let req = MetadataRequest::default()
            .with_topics(Some(vec![topic("auto-made")]))
            .with_allow_auto_topic_creation(true);
        let resp: MetadataResponse = h.call(ApiKey::Metadata, 12, req);
        assert_eq!(resp.brokers.len(), 1);
        let t = &resp.topics[0];
        assert_eq!(t.error_code, 0);
        assert_eq!(t.partitions.len(), 1);
        assert!(!t.topic_id.is_nil());
        // Now listed among all topics.
        let all: MetadataResponse = h.call(
            ApiKey::Metadata,
            12,
            MetadataRequest::default().with_topics(None),
        );
        assert!(all
            .topics
            .iter()
            .any(|t| t.name.as_ref().unwrap().as_str() == "auto-made"));
    }

    #[test]
    fn given_unknown_topic_when_auto_create_not_allowed_then_unknown_topic_or_partition() {
        let h = Harness::new();
        let req = MetadataRequest::default()
            .with_topics(Some(vec![topic("nope"), topic("bad name")]))
            .with_allow_auto_topic_creation(false);
        let resp: MetadataResponse = h.call(ApiKey::Metadata, 12, req);
        assert_eq!(resp.topics[0].error_code, 3);
        assert_eq!(resp.topics[1].error_code, 17);
    }
}
