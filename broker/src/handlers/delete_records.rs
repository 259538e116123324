//! DeleteRecords (key 21): moves each partition's log start offset up to the requested
//! offset (-1 = the high watermark) and answers the low watermark, as Kafka's
//! `ReplicaManager.deleteRecords` / `Partition.deleteRecordsOnLeader` do. Segments wholly
//! below the new start are deleted at once (renamed `.deleted`, unlinked after
//! `file.delete.delay.ms`); records below it in the remaining first segment stop being
//! readable at once and go with their segment later (retention). The new log start offsets are
//! written to `log-start-offset-checkpoint` before the answer, so they survive a crash. On
//! a cluster only the leader takes it (NOT_LEADER_OR_FOLLOWER elsewhere) and answers once
//! its in-sync followers moved their starts too (the low watermark), within the request's
//! timeout (REQUEST_TIMED_OUT after it).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use std::time::Duration;

use super::RequestContext;
use crate::partition::DeleteRecordsError;
use crate::shard::frontend::{self};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 2;

/// Kafka's internal topics: their records are the broker's, not a client's to delete.
const INTERNAL_TOPICS: [&str; 3] = [
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

/// The one place DeleteRecords failures become Kafka error codes.
pub async fn handle(ctx: &RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let catalog = ctx.ctx().catalog.snapshot();
    // A replicated leader waits for its followers (`wait_low_watermark`), at most this long.
    let timeout = Duration::from_millis(req.timeout_ms.max(0) as u64);
    // Kafka's `handleDeleteRecordsRequest`: DELETE on each topic, else its partitions are
    // TOPIC_AUTHORIZATION_FAILED.
    let access = ctx.access();
    let mut topics = Vec::new();
    let mut deletions = Vec::new();
    for (ti, t) in req.topics.iter().enumerate() {
        let meta = catalog.get(t.name.as_str()).cloned();
        let internal = INTERNAL_TOPICS.contains(&t.name.as_str());
        let allowed = access.allows(
            crate::security::acl::Operation::Delete,
            crate::security::acl::ResourceType::Topic,
            t.name.as_str(),
        );
        let mut partitions = Vec::new();
        for (pi, p) in t.partitions.iter().enumerate() {
            let base = DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_low_watermark(-1);
            let code = match &meta {
                _ if !allowed => ResponseError::TopicAuthorizationFailed.code(),
                _ if internal => ResponseError::InvalidTopicException.code(),
                Some(m) if p.partition_index >= 0 && p.partition_index < m.partitions => {
                    if crate::cluster::led_elsewhere(ctx.ctx(), &m.name, p.partition_index) {
                        ResponseError::NotLeaderOrFollower.code()
                    } else {
                        let (name, index, offset) = (m.name.clone(), p.partition_index, p.offset);
                        deletions.push(async move {
                            let r = frontend::delete_records(
                                ctx.ctx(),
                                name.clone(),
                                index,
                                offset,
                                timeout,
                            )
                            .await;
                            (ti, pi, name, r)
                        });
                        0
                    }
                }
                _ => ResponseError::UnknownTopicOrPartition.code(),
            };
            partitions.push(base.with_error_code(code));
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(partitions),
        );
    }
    // All partitions at once: each may wait on its followers.
    let mut moved = false;
    for (ti, pi, name, r) in futures::future::join_all(deletions).await {
        let result = &mut topics[ti].partitions[pi];
        let index = result.partition_index;
        match r {
            Ok(Ok(low)) => {
                moved = true;
                result.low_watermark = low;
            }
            Ok(Err(e)) => {
                // The leader's own start moved before a follower timed out.
                moved |= matches!(e, DeleteRecordsError::ReplicasTimedOut { .. });
                tracing::debug!(topic = %name, partition = index, error = %e, "delete records refused");
                result.error_code = super::errors::delete_records_code(&e);
            }
            Err(e) => {
                tracing::warn!(topic = %name, partition = index, error = %e, "delete records failed");
                result.error_code = super::errors::frontend_code(&e);
            }
        }
    }
    if moved {
        if let Err(e) = crate::shard::checkpoint::checkpoint_now(ctx.ctx()).await {
            // The start moved in memory (and segments below it are gone); only a crash
            // before the next periodic checkpoint could bring records in the first
            // remaining segment back.
            tracing::warn!(error = %e, "writing log-start-offset-checkpoint after DeleteRecords failed");
        }
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

#[cfg(test)]
pub mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::handlers::testing::{batch, create, produce_req};
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::{ApiKey, ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    pub fn delete(h: &Harness, v: i16, topic: &str, partition: i32, offset: i64) -> (i16, i64) {
        let req = DeleteRecordsRequest::default()
            .with_timeout_ms(1000)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(partition)
                    .with_offset(offset)])]);
        let r: DeleteRecordsResponse = h.call(ApiKey::DeleteRecords, v, req);
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.low_watermark)
    }

    fn produce(h: &Harness, topic: &str, n: usize) {
        let r: ProduceResponse = h.call(
            ApiKey::Produce,
            11,
            produce_req(topic, 0, 1, batch(n, -1, -1, -1)),
        );
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    }

    #[test]
    fn given_records_when_deleting_then_low_watermark_moves_and_errors_are_kafkas() {
        let h = Harness::new();
        create(&h, "t", 1);
        for _ in 0..3 {
            produce(&h, "t", 4);
        }
        assert_eq!(delete(&h, 2, "t", 0, 5), (0, 5));
        // Below the current start: nothing changes, the low watermark is reported.
        assert_eq!(delete(&h, 2, "t", 0, 2), (0, 5));
        assert_eq!(
            delete(&h, 1, "t", 0, 13),
            (ResponseError::OffsetOutOfRange.code(), -1)
        );
        assert_eq!(
            delete(&h, 0, "t", 0, -7),
            (ResponseError::OffsetOutOfRange.code(), -1)
        );
        // -1: the high watermark.
        assert_eq!(delete(&h, 2, "t", 0, -1), (0, 12));
        assert_eq!(
            delete(&h, 2, "t", 1, 0),
            (ResponseError::UnknownTopicOrPartition.code(), -1)
        );
        assert_eq!(
            delete(&h, 2, "nope", 0, 0),
            (ResponseError::UnknownTopicOrPartition.code(), -1)
        );
        assert_eq!(
            delete(&h, 2, "__consumer_offsets", 0, 0),
            (ResponseError::InvalidTopicException.code(), -1)
        );
        // Persisted as Kafka's checkpoint file, before the answer.
        let text = std::fs::read_to_string(
            h.state
                .ctx
                .config
                .data_dir
                .join("log-start-offset-checkpoint"),
        )
        .unwrap();
        assert_eq!(text, "0\n1\nt 0 12\n");
    }

    #[test]
    fn given_compact_only_topic_when_deleting_then_policy_violation() {
        let h = Harness::new();
        assert_eq!(
            crate::handlers::testing::create_topic_with(&h, "c", &[("cleanup.policy", "compact")])
                .error_code,
            0
        );
        assert_eq!(
            delete(&h, 2, "c", 0, 0),
            (ResponseError::PolicyViolation.code(), -1)
        );
    }
}
