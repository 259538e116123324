//! OffsetForLeaderEpoch (key 23): for each partition, the end offset of the largest leader
//! epoch <= the requested one, from the leader epoch cache (`leader-epoch-checkpoint`), as
//! Kafka's `Partition.lastOffsetForLeaderEpoch` answers it. Consumers (librdkafka, the Java
//! client) send it after a leader change or a seek with an epoch to detect log truncation.
//!
//! A single node is the only leader a partition ever had, with epoch 0 (`shard::LEADER_EPOCH`,
//! what Metadata reports). So `current_leader_epoch` > 0 is UNKNOWN_LEADER_EPOCH (the client
//! knows a newer leader than us), < 0 other than -1 (no check) is FENCED_LEADER_EPOCH.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::RequestContext;
use crate::shard::frontend::{self};
use crate::shard::LEADER_EPOCH;

pub const MIN_VERSION: i16 = 2;
pub const MAX_VERSION: i16 = 4;

/// Kafka's leader epoch fencing of a request's `current_leader_epoch` (here and in Fetch).
/// `leader` is the partition's epoch here (the image's when clustered).
pub(super) fn check_current_epoch(current: i32, leader: i32) -> Result<(), ResponseError> {
    match current {
        -1 => Ok(()),
        e if e > leader => Err(ResponseError::UnknownLeaderEpoch),
        e if e < leader => Err(ResponseError::FencedLeaderEpoch),
        _ => Ok(()),
    }
}

/// The partition's leader epoch on this node: the metadata image's when clustered, else the
/// single node's constant one.
pub(super) fn partition_epoch(
    broker: &crate::shard::BrokerContext,
    topic: &str,
    partition: i32,
) -> i32 {
    broker.cluster.get().map_or(LEADER_EPOCH, |c| {
        c.image()
            .partition(topic, partition)
            .map_or(LEADER_EPOCH, |r| r.leader_epoch)
    })
}

pub async fn handle(
    ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let catalog = ctx.ctx().catalog.snapshot();
    // Kafka's `handleOffsetForLeaderEpochRequest`: CLUSTER_ACTION (a follower) or DESCRIBE on
    // the topic (a consumer, KIP-320), else TOPIC_AUTHORIZATION_FAILED.
    let access = ctx.access();
    let cluster_action = access.allows_cluster(crate::security::acl::Operation::ClusterAction);
    let mut topics = Vec::new();
    for t in req.topics {
        let meta = catalog.get(t.topic.as_str()).cloned();
        let allowed = cluster_action
            || access.allows(
                crate::security::acl::Operation::Describe,
                crate::security::acl::ResourceType::Topic,
                t.topic.as_str(),
            );
        let mut partitions = Vec::new();
        for p in t.partitions {
            // Defaults: leader_epoch -1, end_offset -1 (Kafka's UNDEFINED_*).
            let base = EpochEndOffset::default().with_partition(p.partition);
            let resp = match &meta {
                _ if !allowed => {
                    base.with_error_code(ResponseError::TopicAuthorizationFailed.code())
                }
                // Clustered: another node leads it (and holds its data).
                Some(m) if crate::cluster::led_elsewhere(ctx.ctx(), &m.name, p.partition) => {
                    base.with_error_code(ResponseError::NotLeaderOrFollower.code())
                }
                Some(m) if p.partition >= 0 && p.partition < m.partitions => {
                    let epoch = partition_epoch(ctx.ctx(), &m.name, p.partition);
                    match check_current_epoch(p.current_leader_epoch, epoch) {
                        Err(e) => base.with_error_code(e.code()),
                        Ok(()) => match frontend::end_offset_for_epoch(
                            ctx.ctx(),
                            m.name.clone(),
                            p.partition,
                            p.leader_epoch,
                        )
                        .await
                        {
                            Ok((epoch, end)) => base.with_leader_epoch(epoch).with_end_offset(end),
                            Err(e) => base.with_error_code(super::errors::frontend_code(&e)),
                        },
                    }
                }
                _ => base.with_error_code(ResponseError::UnknownTopicOrPartition.code()),
            };
            partitions.push(resp);
        }
        topics.push(
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions),
        );
    }
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::super::delete_records::tests::delete;
    use super::super::testing::*;
    use super::*;
    use crate::handlers::testing::{batch, create, produce_req};
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::{ApiKey, ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn ask(
        h: &Harness,
        v: i16,
        topic: &str,
        partition: i32,
        current: i32,
        epoch: i32,
    ) -> (i16, i32, i64) {
        let req = OffsetForLeaderEpochRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(current)
                    .with_leader_epoch(epoch)])]);
        let r: OffsetForLeaderEpochResponse = h.call(ApiKey::OffsetForLeaderEpoch, v, req);
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.leader_epoch, p.end_offset)
    }

    #[test]
    fn given_single_leader_epoch_when_asking_then_answers_as_kafka() {
        let h = Harness::new();
        create(&h, "t", 1);
        // A fresh partition: epoch 0 starts at 0 and ends at the log end.
        assert_eq!(ask(&h, 4, "t", 0, 0, 0), (0, 0, 0));
        let r: ProduceResponse = h.call(
            ApiKey::Produce,
            11,
            produce_req("t", 0, 1, batch(5, -1, -1, -1)),
        );
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        assert_eq!(ask(&h, 4, "t", 0, 0, 0), (0, 0, 5));
        assert_eq!(ask(&h, 2, "t", 0, -1, 0), (0, 0, 5));
        // A newer epoch than any known: undefined, no error.
        assert_eq!(ask(&h, 3, "t", 0, -1, 3), (0, -1, -1));
        assert_eq!(ask(&h, 4, "t", 0, -1, -1), (0, -1, -1));
        // Fencing by the client's idea of the current leader epoch.
        assert_eq!(
            ask(&h, 4, "t", 0, 1, 0).0,
            ResponseError::UnknownLeaderEpoch.code()
        );
        assert_eq!(
            ask(&h, 4, "t", 0, -2, 0).0,
            ResponseError::FencedLeaderEpoch.code()
        );
        assert_eq!(
            ask(&h, 4, "t", 1, -1, 0).0,
            ResponseError::UnknownTopicOrPartition.code()
        );
        assert_eq!(
            ask(&h, 4, "nope", 0, -1, 0).0,
            ResponseError::UnknownTopicOrPartition.code()
        );
        // The checkpoint is Kafka's, and follows the log start.
        assert_eq!(delete(&h, 2, "t", 0, 3), (0, 3));
        let dir = h.state.ctx.config.data_dir.join("t-0");
        assert_eq!(
            std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).unwrap(),
            "0\n1\n0 3\n"
        );
        assert_eq!(ask(&h, 4, "t", 0, 0, 0), (0, 0, 5));
    }
}
