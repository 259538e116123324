//! ElectLeaders (key 43, KIP-460): `kafka-leader-election.sh`. On a cluster the controller
//! elects through the metadata image (`cluster::image::elect`, Kafka's
//! `ReplicationControlManager.electLeader`): PREFERRED gives a partition back to its first
//! replica when that one is in sync and live, UNCLEAN gives a leaderless partition a live
//! replica (in sync if one is, else any: what only the lost ones had is gone). On a single
//! node every partition is led by its only replica, the preferred one: each named partition
//! answers ELECTION_NOT_NEEDED. "All partitions" (null) answers only the partitions whose
//! election was needed, as Kafka's controller leaves out the others.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::cluster::image::{Command, Elected, ElectionType, Outcome};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 2;

/// Kafka's code and message of one partition's election.
fn answer(topic: &str, partition: i32, e: &Elected) -> (i16, Option<String>) {
    let (code, message) = match e {
        Elected::Done => return (0, None),
        Elected::NotNeeded => (
            ResponseError::ElectionNotNeeded,
            Some("Leader election not needed for topic partition.".into()),
        ),
        Elected::PreferredNotAvailable => (
            ResponseError::PreferredLeaderNotAvailable,
            Some("The preferred leader was not available.".into()),
        ),
        Elected::EligibleNotAvailable => (
            ResponseError::EligibleLeadersNotAvailable,
            Some("Eligible topic partition leaders are not available.".into()),
        ),
        Elected::UnknownTopic => (
            ResponseError::UnknownTopicOrPartition,
            Some(format!("No such topic as {topic}")),
        ),
        Elected::UnknownPartition => (
            ResponseError::UnknownTopicOrPartition,
            Some(format!("No such partition as {topic}-{partition}")),
        ),
    };
    (code.code(), message)
}

/// Authorization (Kafka's `handleElectLeaders`): ALTER on the cluster, else the request and
/// every partition are CLUSTER_AUTHORIZATION_FAILED (no message).
pub async fn handle(ctx: &RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse {
    let catalog = ctx.ctx().catalog.snapshot();
    let denied = !ctx
        .access()
        .allows_cluster(crate::security::acl::Operation::Alter);
    let election = match req.election_type {
        0 => Some(ElectionType::Preferred),
        1 => Some(ElectionType::Unclean),
        _ => None,
    };
    let refusal = if denied {
        Some((ResponseError::ClusterAuthorizationFailed.code(), None))
    } else if election.is_none() {
        let why = format!("Unknown election type {}", req.election_type);
        Some((ResponseError::InvalidRequest.code(), Some(why)))
    } else {
        None
    };
    let all = req.topic_partitions.is_none();
    // The partitions asked, in order; `None` = all of them.
    let asked: Vec<(TopicName, Vec<i32>)> = match req.topic_partitions {
        Some(ts) => ts.into_iter().map(|t| (t.topic, t.partitions)).collect(),
        None if refusal.is_some() => Vec::new(),
        None => catalog
            .topics
            .values()
            .map(|t| {
                let name = TopicName(StrBytes::from_string(t.name.to_string()));
                (name, (0..t.partitions).collect())
            })
            .collect(),
    };
    let flat: Vec<(String, i32)> = asked
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.as_str().to_string(), *p)))
        .collect();
    let outcomes: Vec<(i16, Option<String>)> = match (&refusal, election) {
        (Some(r), _) => vec![r.clone(); flat.len()],
        (None, Some(election)) => elect(ctx, election, &flat).await,
        (None, None) => unreachable!("no election type is a refusal"),
    };
    let mut outcomes = outcomes.into_iter();
    let mut results = Vec::new();
    for (topic, partitions) in asked {
        let partition_result: Vec<PartitionResult> = partitions
            .into_iter()
            .zip(outcomes.by_ref())
            .filter(|(_, (code, _))| !(all && *code == ResponseError::ElectionNotNeeded.code()))
            .map(|(p, (code, message))| {
                PartitionResult::default()
                    .with_partition_id(p)
                    .with_error_code(code)
                    .with_error_message(message.map(StrBytes::from_string))
            })
            .collect();
        if all && partition_result.is_empty() {
            continue;
        }
        results.push(
            ReplicaElectionResult::default()
                .with_topic(topic)
                .with_partition_result(partition_result),
        );
    }
    ElectLeadersResponse::default()
        .with_error_code(refusal.map_or(0, |(code, _)| code))
        .with_replica_election_results(results)
}

/// The election's outcome per partition: through the metadata quorum on a cluster; on a
/// single node, where the one replica always leads, not needed (or unknown).
async fn elect(
    ctx: &RequestContext,
    election: ElectionType,
    partitions: &[(String, i32)],
) -> Vec<(i16, Option<String>)> {
    let broker = ctx.ctx();
    let elected: Vec<Elected> = match broker.cluster.get() {
        Some(cluster) => {
            let cmd = Command::ElectLeaders {
                election,
                partitions: partitions.to_vec(),
            };
            match cluster.propose(cmd).await {
                Ok(Outcome::Elections(v)) if v.len() == partitions.len() => v,
                other => {
                    tracing::warn!(outcome = ?other, "leader election not made");
                    let why = Some("The metadata quorum did not answer in time.".to_string());
                    return vec![(ResponseError::RequestTimedOut.code(), why); partitions.len()];
                }
            }
        }
        None => {
            let catalog = broker.catalog.snapshot();
            partitions
                .iter()
                .map(|(t, p)| match catalog.get(t.as_str()) {
                    None => Elected::UnknownTopic,
                    Some(m) if *p < 0 || *p >= m.partitions => Elected::UnknownPartition,
                    Some(_) => Elected::NotNeeded,
                })
                .collect()
        }
    };
    partitions
        .iter()
        .zip(&elected)
        .map(|((t, p), e)| answer(t, *p, e))
        .collect()
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
