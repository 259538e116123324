//! ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3), earliest local (-4),
//! latest tiered (-5), earliest pending upload (-6, v11, KIP-1023), or the first offset whose timestamp is at or after a given time.
//! With `isolation_level = 1` (read_committed, v2+) latest is the last stable offset, as Kafka
//! answers it, and a timestamp lookup finds nothing past it.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::RequestContext;
use crate::codec::Capped;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::frontend::{self, FrontendError};

pub const MIN_VERSION: i16 = 1;
/// v11 only adds EARLIEST_PENDING_UPLOAD; the layout is v10's (`codec::Capped`).
pub const MAX_VERSION: i16 = 11;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
const EARLIEST_PENDING_UPLOAD: i64 = -6;

async fn lookup(
    ctx: &RequestContext,
    topic: std::sync::Arc<str>,
    partition: i32,
    ts: i64,
    read_committed: bool,
) -> Result<(i64, i64), FrontendError> {
    let broker = ctx.ctx();
    match ts {
        LATEST => {
            let o = frontend::offsets(broker, topic, partition).await?;
            Ok((
                -1,
                if read_committed {
                    o.last_stable
                } else {
                    o.high_watermark
                },
            ))
        }
        EARLIEST => Ok((
            -1,
            frontend::offsets(broker, topic, partition).await?.log_start,
        )),
        // KIP-1005: the first offset on local disk (the log start without tiered storage).
        EARLIEST_LOCAL => Ok((
            -1,
            frontend::offsets(broker, topic, partition)
                .await?
                .local_log_start,
        )),
        LATEST_TIERED | EARLIEST_PENDING_UPLOAD => {
            // No tiered storage: nothing is tiered or waiting to be, so Kafka answers
            // "no offset".
            frontend::offsets(broker, topic, partition).await?;
            Ok((-1, -1))
        }
        _ => {
            let ts = if ts == MAX_TIMESTAMP {
                MAX_TIMESTAMP
            } else {
                ts.max(0)
            };
            let found =
                frontend::offset_for_timestamp(broker, topic.clone(), partition, ts).await?;
            let bound = if read_committed {
                frontend::offsets(broker, topic, partition)
                    .await?
                    .last_stable
            } else {
                i64::MAX
            };
            Ok(found
                .filter(|(offset, _)| *offset < bound)
                .map(|(offset, t)| (t, offset))
                .unwrap_or((-1, -1)))
        }
    }
}

pub async fn handle(
    ctx: &RequestContext,
    req: Capped<ListOffsetsRequest>,
) -> Capped<ListOffsetsResponse> {
    let req = req.into_inner();
    let catalog = ctx.ctx().catalog.snapshot();
    let read_committed = req.isolation_level == 1;
    // Authorization (Kafka's `handleListOffsetRequest`): DESCRIBE on each topic, else its
    // partitions are TOPIC_AUTHORIZATION_FAILED.
    let access = ctx.access();
    let mut topics = Vec::new();
    for t in req.topics {
        let meta = catalog.get(t.name.as_str()).cloned();
        let allowed = access.allows(Operation::Describe, ResourceType::Topic, t.name.as_str());
        let mut partitions = Vec::new();
        for p in t.partitions {
            let base = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_timestamp(-1)
                .with_offset(-1);
            let resp = match &meta {
                _ if !allowed => {
                    base.with_error_code(ResponseError::TopicAuthorizationFailed.code())
                }
                // Clustered: another node leads it (and holds its data).
                Some(m) if crate::cluster::led_elsewhere(ctx.ctx(), &m.name, p.partition_index) => {
                    base.with_error_code(ResponseError::NotLeaderOrFollower.code())
                }
                Some(m) if p.partition_index >= 0 && p.partition_index < m.partitions => {
                    match lookup(
                        ctx,
                        m.name.clone(),
                        p.partition_index,
                        p.timestamp,
                        read_committed,
                    )
                    .await
                    {
                        Ok((timestamp, offset)) => base
                            .with_timestamp(timestamp)
                            .with_offset(offset)
                            .with_leader_epoch(if ctx.version() >= 4 { 0 } else { -1 }),
                        Err(e) => base.with_error_code(super::errors::frontend_code(&e)),
                    }
                }
                _ => base.with_error_code(ResponseError::UnknownTopicOrPartition.code()),
            };
            partitions.push(resp);
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    Capped(ListOffsetsResponse::default().with_topics(topics))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::handlers::testing::{batch, create, produce_req};
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ApiKey, ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn ask(h: &Harness, topic: &str, ts: i64) -> (i16, i64, i64) {
        ask_at(h, 9, topic, ts)
    }

    fn ask_at(h: &Harness, version: i16, topic: &str, ts: i64) -> (i16, i64, i64) {
        let req = ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(ts)])]);
        let r: Capped<ListOffsetsResponse> = h.call(ApiKey::ListOffsets, version, Capped(req));
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.offset, p.timestamp)
    }

    #[test]
    fn given_records_when_listing_offsets_then_earliest_latest_and_by_time() {
        let h = Harness::new();
        create(&h, "t", 1);
        assert_eq!(ask(&h, "t", LATEST), (0, 0, -1));
        let before = crate::now_ms() - 1;
        for _ in 0..2 {
            let r: ProduceResponse = h.call(
                ApiKey::Produce,
                11,
                produce_req("t", 0, 1, batch(3, -1, -1, -1)),
            );
            assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        }
        assert_eq!(ask(&h, "t", EARLIEST), (0, 0, -1));
        assert_eq!(ask(&h, "t", LATEST), (0, 6, -1));
        let (code, offset, ts) = ask(&h, "t", before);
        assert_eq!((code, offset), (0, 0));
        assert!(ts >= before);
        assert_eq!(ask(&h, "t", crate::now_ms() + 3_600_000), (0, -1, -1));
        let (code, offset, _) = ask(&h, "t", MAX_TIMESTAMP);
        assert_eq!(code, 0);
        assert!((0..6).contains(&offset));
        assert_eq!(ask(&h, "nope", LATEST).0, 3);
        assert_eq!(ask_at(&h, 11, "t", LATEST), (0, 6, -1));
        assert_eq!(ask_at(&h, 11, "t", EARLIEST_PENDING_UPLOAD), (0, -1, -1));
    }
}
