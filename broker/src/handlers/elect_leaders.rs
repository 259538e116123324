//! ElectLeaders (key 43, KIP-460): `kafka-leader-election.sh`. On a single node every
//! partition is led by its only replica, the preferred one, so no election is ever needed:
//! each named partition answers ELECTION_NOT_NEEDED (unknown ones UNKNOWN_TOPIC_OR_PARTITION,
//! with Kafka's messages), and "all partitions" answers an empty list — Kafka's controller
//! leaves out the partitions that needed no election. Replication will make this real.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 2;

/// Authorization (Kafka's `handleElectLeaders`): ALTER on the cluster, else the request and
/// every partition are CLUSTER_AUTHORIZATION_FAILED (no message).
pub async fn handle(ctx: &RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse {
    let catalog = ctx.ctx().catalog.snapshot();
    let denied = !ctx
        .access()
        .allows_cluster(crate::security::acl::Operation::Alter);
    let mut results = Vec::new();
    for t in req.topic_partitions.into_iter().flatten() {
        let meta = catalog.get(t.topic.as_str());
        let partition_result = t
            .partitions
            .iter()
            .map(|&p| {
                let (code, message) = match meta {
                    _ if denied => (ResponseError::ClusterAuthorizationFailed, String::new()),
                    None => (
                        ResponseError::UnknownTopicOrPartition,
                        format!("No such topic as {}", t.topic.as_str()),
                    ),
                    Some(m) if p < 0 || p >= m.partitions => (
                        ResponseError::UnknownTopicOrPartition,
                        format!("No such partition as {}-{p}", t.topic.as_str()),
                    ),
                    Some(_) => (
                        ResponseError::ElectionNotNeeded,
                        "Leader election not needed for topic partition.".to_string(),
                    ),
                };
                PartitionResult::default()
                    .with_partition_id(p)
                    .with_error_code(code.code())
                    .with_error_message((!denied).then(|| StrBytes::from_string(message)))
            })
            .collect();
        results.push(
            ReplicaElectionResult::default()
                .with_topic(t.topic)
                .with_partition_result(partition_result),
        );
    }
    let code = if denied {
        ResponseError::ClusterAuthorizationFailed.code()
    } else {
        0
    };
    ElectLeadersResponse::default()
        .with_error_code(code)
        .with_replica_election_results(results)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::{ApiKey, TopicName};

    pub fn request(topic: &str, partitions: Vec<i32>) -> ElectLeadersRequest {
        ElectLeadersRequest::default().with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(partitions)]))
    }

    #[test]
    fn given_named_partitions_when_electing_then_not_needed_or_unknown() {
        let h = Harness::new();
        create(&h, "t", 2);
        let r: ElectLeadersResponse = h.call(
            ApiKey::ElectLeaders,
            2,
            request("t", vec![0, 5]).with_election_type(1),
        );
        let codes: Vec<(i32, i16)> = r.replica_election_results[0]
            .partition_result
            .iter()
            .map(|p| (p.partition_id, p.error_code))
            .collect();
        assert_eq!(codes, vec![(0, 84), (5, 3)]);
        let r: ElectLeadersResponse = h.call(ApiKey::ElectLeaders, 1, request("nope", vec![0]));
        let p = &r.replica_election_results[0].partition_result[0];
        assert_eq!(p.error_message.as_deref(), Some("No such topic as nope"));
    }

    #[test]
    fn given_all_partitions_when_electing_then_empty_answer() {
        let h = Harness::new();
        create(&h, "t", 2);
        let r: ElectLeadersResponse = h.call(
            ApiKey::ElectLeaders,
            2,
            ElectLeadersRequest::default().with_topic_partitions(None),
        );
        assert_eq!(r.error_code, 0);
        assert!(r.replica_election_results.is_empty());
    }
}
