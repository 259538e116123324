//! DescribeQuorum (key 55, KIP-595/KIP-853): `kafka-metadata-quorum.sh describe`. On a
//! cluster, the metadata quorum as its Raft leader sees it (`cluster::quorum`): leader, epoch
//! (the Raft term), high watermark and each voter's log end and last contact, the voters'
//! endpoints being their Raft ports (Kafka's controller listener, named CONTROLLER). A
//! single Strom node is its own quorum: the only voter, leader of `__cluster_metadata`-0, no
//! observers, and with its metadata in files, not a replicated log, no offsets or fetch
//! times to report: those are -1 (Kafka's "unknown"). Voters have no directory id (the zero
//! uuid of a static quorum, kraft.version 0).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 2;

pub const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

pub async fn handle(ctx: &RequestContext, req: DescribeQuorumRequest) -> DescribeQuorumResponse {
    let broker = ctx.ctx();
    let node = BrokerId(broker.config.node_id);
    // Kafka's `ControllerApis.handleDescribeQuorum`: DESCRIBE on the cluster.
    if !ctx
        .access()
        .allows_cluster(crate::security::acl::Operation::Describe)
    {
        return DescribeQuorumResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(
                super::errors::CLUSTER_AUTHORIZATION_FAILED,
            )));
    }
    // Kafka's `KafkaRaftClient.handleDescribeQuorumRequest`: one topic with one partition.
    let single = match req.topics.as_slice() {
        [t] if t.partitions.len() == 1 => Some(t),
        _ => None,
    };
    let Some(topic) = single else {
        return DescribeQuorumResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "DescribeQuorum asks for exactly one topic partition",
            )));
    };
    let index = topic.partitions[0].partition_index;
    let partition = PartitionData::default().with_partition_index(index);
    let known = topic.topic_name.as_str() == CLUSTER_METADATA_TOPIC && index == 0;
    if let (Some(cluster), true) = (broker.cluster.get(), known) {
        return match cluster.describe_quorum().await {
            Ok(view) => clustered(ctx.version(), topic.topic_name.clone(), partition, &view),
            Err(e) => {
                tracing::debug!(error = %e, "no metadata leader to describe the quorum");
                let p = partition
                    .with_error_code(ResponseError::NotLeaderOrFollower.code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string())));
                DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
                    .with_topic_name(topic.topic_name.clone())
                    .with_partitions(vec![p])])
            }
        };
    }
    let partition = if !known {
        partition.with_error_code(ResponseError::UnknownTopicOrPartition.code())
    } else {
        let voter = ReplicaState::default()
            .with_replica_id(node)
            .with_log_end_offset(-1)
            .with_last_fetch_timestamp(-1)
            .with_last_caught_up_timestamp(-1);
        partition
            .with_leader_id(node)
            .with_leader_epoch(crate::shard::LEADER_EPOCH)
            .with_high_watermark(-1)
            .with_current_voters(vec![voter])
    };
    let nodes = if ctx.version() >= 2 {
        // The single node is its own controller: the listener this request came in on.
        let (host, port) = ctx.advertised();
        vec![Node::default()
            .with_node_id(node)
            .with_listeners(vec![Listener::default()
                .with_name(StrBytes::from_string(ctx.session.listener.name.clone()))
                .with_host(StrBytes::from_string(host))
                .with_port(u16::try_from(port).unwrap_or_default())])]
    } else {
        Vec::new()
    };
    DescribeQuorumResponse::default()
        .with_topics(vec![TopicData::default()
            .with_topic_name(topic.topic_name.clone())
            .with_partitions(vec![partition])])
        .with_nodes(nodes)
}

/// The answer from the Raft leader's view.
fn clustered(
    version: i16,
    topic: kafka_protocol::messages::TopicName,
    partition: PartitionData,
    view: &crate::cluster::quorum::QuorumView,
) -> DescribeQuorumResponse {
    let states = |of: &[crate::cluster::quorum::VoterState]| {
        of.iter()
            .map(|v| {
                ReplicaState::default()
                    .with_replica_id(BrokerId(v.id))
                    .with_log_end_offset(v.log_end_offset)
                    .with_last_fetch_timestamp(v.last_fetch_ms)
                    .with_last_caught_up_timestamp(v.last_caught_up_ms)
            })
            .collect::<Vec<_>>()
    };
    let partition = partition
        .with_leader_id(BrokerId(view.leader))
        .with_leader_epoch(i32::try_from(view.epoch).unwrap_or(i32::MAX))
        .with_high_watermark(view.high_watermark)
        .with_current_voters(states(&view.voters))
        .with_observers(states(&view.observers));
    let nodes = if version >= 2 {
        view.voters
            .iter()
            .filter_map(|v| {
                let addr: std::net::SocketAddr = v.addr.parse().ok()?;
                Some(Node::default().with_node_id(BrokerId(v.id)).with_listeners(
                    vec![Listener::default()
                            .with_name(StrBytes::from_static_str("CONTROLLER"))
                            .with_host(StrBytes::from_string(addr.ip().to_string()))
                            .with_port(addr.port())],
                ))
            })
            .collect()
    } else {
        Vec::new()
    };
    DescribeQuorumResponse::default()
        .with_topics(vec![TopicData::default()
            .with_topic_name(topic)
            .with_partitions(vec![partition])])
        .with_nodes(nodes)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use kafka_protocol::messages::describe_quorum_request::{
        PartitionData as ReqPartition, TopicData as ReqTopic,
    };
    use kafka_protocol::messages::{ApiKey, TopicName};

    pub fn request(topic: &str, partition: i32) -> DescribeQuorumRequest {
        DescribeQuorumRequest::default().with_topics(vec![ReqTopic::default()
            .with_topic_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![ReqPartition::default().with_partition_index(partition)])])
    }

    #[test]
    fn given_single_node_when_describing_quorum_then_self_is_leader_and_only_voter() {
        let h = Harness::new();
        let r: DescribeQuorumResponse = h.call(
            ApiKey::DescribeQuorum,
            2,
            request(CLUSTER_METADATA_TOPIC, 0),
        );
        assert_eq!(r.error_code, 0);
        let p = &r.topics[0].partitions[0];
        assert_eq!((p.error_code, p.leader_id.0), (0, 0));
        assert_eq!(p.current_voters.len(), 1);
        assert!(p.observers.is_empty());
        assert_eq!(r.nodes[0].listeners[0].port, 9092);
    }

    #[test]
    fn given_other_partition_or_many_when_describing_quorum_then_kafka_errors() {
        let h = Harness::new();
        let r: DescribeQuorumResponse = h.call(ApiKey::DescribeQuorum, 1, request("t", 0));
        assert_eq!(r.topics[0].partitions[0].error_code, 3);
        let r: DescribeQuorumResponse =
            h.call(ApiKey::DescribeQuorum, 1, DescribeQuorumRequest::default());
        assert_eq!(r.error_code, 42);
    }
}
