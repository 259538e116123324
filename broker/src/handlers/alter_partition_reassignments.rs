//! AlterPartitionReassignments (key 45, KIP-455; v1 KIP-860): `kafka-reassign-partitions
//! --execute` and `--cancel`. Served on a cluster only (`handlers::CLUSTERED_ONLY`): Kafka's
//! brokers forward it to the KRaft controller, and here any node proposes it through the Raft
//! leader (`Command::AlterReassignments`), where the image decides every partition alike
//! (`cluster::image::reassign`, Kafka's `ReplicationControlManager.alterPartitionReassignment`).
//! The answer says the move is recorded (or done, when nothing had to catch up); the new
//! replicas then catch up and the ISR change that takes in the last of them completes it.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::cluster::image::{Command, Outcome, Reassigned, Reassignment};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 1;

/// Kafka's code and message of one partition's outcome (`ApiError.fromThrowable`: a
/// success, and an error whose message is its code's default, have none).
pub fn answer(r: &Reassigned) -> (i16, Option<String>) {
    let (code, message) = match r {
        Reassigned::Done => return (0, None),
        Reassigned::UnknownTopicOrPartition(m) => (ResponseError::UnknownTopicOrPartition, m),
        Reassigned::InvalidReplicaAssignment(m) => (ResponseError::InvalidReplicaAssignment, m),
        Reassigned::InvalidReplicationFactor(m) => (ResponseError::InvalidReplicationFactor, m),
        Reassigned::NoReassignmentInProgress => {
            return (ResponseError::NoReassignmentInProgress.code(), None)
        }
    };
    (code.code(), Some(message.clone()))
}

/// Authorization (Kafka's `ControllerApis.handleAlterPartitionReassignments`): ALTER on the
/// cluster, else the request and every partition are CLUSTER_AUTHORIZATION_FAILED.
pub async fn handle(
    ctx: &RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    // v0 has no such field: a change of the replication factor is allowed.
    let allow_rf_change = ctx.version() < 1 || req.allow_replication_factor_change;
    let asked: Vec<Reassignment> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| Reassignment {
                topic: t.name.to_string(),
                partition: p.partition_index,
                replicas: p
                    .replicas
                    .as_ref()
                    .map(|rs| rs.iter().map(|r| r.0).collect()),
            })
        })
        .collect();
    let allowed = ctx
        .access()
        .allows_cluster(crate::security::acl::Operation::Alter);
    let refusal = |code: ResponseError, message: &str| {
        (
            code.code(),
            Some(message.to_string()),
            vec![(code.code(), Some(message.to_string())); asked.len()],
        )
    };
    let (code, message, outcomes) = match ctx.ctx().cluster.get() {
        _ if !allowed => refusal(
            ResponseError::ClusterAuthorizationFailed,
            super::errors::CLUSTER_AUTHORIZATION_FAILED,
        ),
        // Not reached: the API is neither advertised nor dispatched on a single node.
        None => refusal(
            ResponseError::NotController,
            "This node is not part of a cluster.",
        ),
        Some(cluster) => {
            let cmd = Command::AlterReassignments {
                reassignments: asked.clone(),
                allow_rf_change,
            };
            match cluster.propose(cmd).await {
                Ok(Outcome::Reassignments(v)) if v.len() == asked.len() => {
                    (0, None, v.iter().map(answer).collect())
                }
                other => {
                    tracing::warn!(outcome = ?other, "partition reassignment not made");
                    refusal(
                        ResponseError::RequestTimedOut,
                        "The metadata quorum did not answer in time.",
                    )
                }
            }
        }
    };
    let mut outcomes = outcomes.into_iter();
    let responses = req
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .zip(outcomes.by_ref())
                .map(|(p, (code, message))| {
                    ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    let mut resp = AlterPartitionReassignmentsResponse::default()
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string))
        .with_responses(responses);
    if ctx.version() >= 1 {
        resp = resp.with_allow_replication_factor_change(allow_rf_change);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_each_outcome_when_answered_then_kafkas_code_and_message() {
        let table = [
            (Reassigned::Done, 0, None),
            (
                Reassigned::UnknownTopicOrPartition("Unable to find a topic named x.".into()),
                3,
                Some("Unable to find a topic named x."),
            ),
            (
                Reassigned::InvalidReplicaAssignment("bad".into()),
                39,
                Some("bad"),
            ),
            (
                Reassigned::InvalidReplicationFactor("rf".into()),
                38,
                Some("rf"),
            ),
            (Reassigned::NoReassignmentInProgress, 85, None),
        ];
        for (outcome, code, message) in table {
            let (c, m) = answer(&outcome);
            assert_eq!((c, m.as_deref()), (code, message), "{outcome:?}");
        }
    }
}
