//! ListPartitionReassignments (key 46, KIP-455): `kafka-reassign-partitions --list` and
//! `--verify`. Served on a cluster only (`handlers::CLUSTERED_ONLY`), from this node's
//! metadata image (an AlterPartitionReassignments answered by this node is applied here
//! before it answers). As Kafka's `ReplicationControlManager.listPartitionReassignments`:
//! every moving partition when no topics are named, else the named partitions that are
//! moving; unknown topics and partitions, and partitions not moving, are left out.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::cluster::image::{MetadataImage, PartitionRecord};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

/// Authorization (Kafka's `ControllerApis.handleListPartitionReassignments`): DESCRIBE on
/// the cluster.
pub async fn handle(
    ctx: &RequestContext,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let allowed = ctx
        .access()
        .allows_cluster(crate::security::acl::Operation::Describe);
    let refused = |code: ResponseError, message: &str| {
        ListPartitionReassignmentsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(message.to_string())))
    };
    if !allowed {
        return refused(
            ResponseError::ClusterAuthorizationFailed,
            super::errors::CLUSTER_AUTHORIZATION_FAILED,
        );
    }
    // Not reached: the API is neither advertised nor dispatched on a single node.
    let Some(cluster) = ctx.ctx().cluster.get() else {
        return refused(
            ResponseError::NotController,
            "This node is not part of a cluster.",
        );
    };
    let asked = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.to_string(), t.partition_indexes))
            .collect::<Vec<_>>()
    });
    ListPartitionReassignmentsResponse::default().with_topics(ongoing(&cluster.image(), asked))
}

/// The moving partitions of `asked` (`None`: of every topic), by topic.
pub fn ongoing(
    image: &MetadataImage,
    asked: Option<Vec<(String, Vec<i32>)>>,
) -> Vec<OngoingTopicReassignment> {
    let asked: Vec<(String, Vec<i32>)> = match asked {
        Some(a) => a,
        None => image
            .topics
            .iter()
            .map(|(name, t)| (name.clone(), (0..t.partitions.len() as i32).collect()))
            .collect(),
    };
    asked
        .into_iter()
        .filter_map(|(name, indexes)| {
            let t = image.topics.get(&name)?;
            let partitions: Vec<OngoingPartitionReassignment> = indexes
                .into_iter()
                .filter_map(|i| {
                    let p = t.partitions.get(usize::try_from(i).ok()?)?;
                    p.reassigning().then(|| entry(i, p))
                })
                .collect();
            (!partitions.is_empty()).then(|| {
                OngoingTopicReassignment::default()
                    .with_name(TopicName(StrBytes::from_string(name)))
                    .with_partitions(partitions)
            })
        })
        .collect()
}

fn entry(index: i32, p: &PartitionRecord) -> OngoingPartitionReassignment {
    let ids = |v: &[i32]| v.iter().map(|r| BrokerId(*r)).collect::<Vec<_>>();
    OngoingPartitionReassignment::default()
        .with_partition_index(index)
        .with_replicas(ids(&p.replicas))
        .with_adding_replicas(ids(&p.adding))
        .with_removing_replicas(ids(&p.removing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::TopicRecord;

    fn partition(replicas: &[i32], adding: &[i32], removing: &[i32]) -> PartitionRecord {
        PartitionRecord {
            leader: replicas[0],
            leader_epoch: 0,
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            adding: adding.to_vec(),
            removing: removing.to_vec(),
        }
    }

    fn listed(v: &[OngoingTopicReassignment]) -> Vec<(String, i32, Vec<i32>, Vec<i32>)> {
        v.iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
                    (
                        t.name.to_string(),
                        p.partition_index,
                        ids(&p.adding_replicas),
                        ids(&p.removing_replicas),
                    )
                })
            })
            .collect()
    }

    #[test]
    fn given_moving_and_settled_partitions_when_listed_then_only_the_moving_ones() {
        let mut image = MetadataImage::default();
        image.topics.insert(
            "a".into(),
            TopicRecord {
                id: uuid::Uuid::nil(),
                configs: Default::default(),
                internal: false,
                partitions: vec![
                    partition(&[1, 2], &[], &[]),
                    partition(&[2, 3, 1], &[3], &[1]),
                ],
            },
        );
        let all = vec![("a".to_string(), 1, vec![3], vec![1])];
        assert_eq!(listed(&ongoing(&image, None)), all);
        let named = Some(vec![
            ("a".to_string(), vec![0, 1, 9]),
            ("nope".to_string(), vec![0]),
        ]);
        assert_eq!(listed(&ongoing(&image, named)), all);
        assert!(ongoing(&image, Some(vec![("a".to_string(), vec![0])])).is_empty());
    }
}
