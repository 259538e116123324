//! DescribeProducers (key 61): the producers with state on each partition (Kafka's
//! `ProducerStateManager.activeProducers`), with the first offset of the transaction each
//! has open there (-1 when none): what `kafka-transactions.sh find-hanging` looks at.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::shard::frontend::{self};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

pub async fn handle(
    ctx: &RequestContext,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let broker = ctx.ctx();
    let catalog = broker.catalog.snapshot();
    // Kafka's `handleDescribeProducersRequest`: READ on each topic, else its partitions are
    // TOPIC_AUTHORIZATION_FAILED.
    let access = ctx.access();
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let meta = catalog.get(t.name.as_str()).cloned();
        let allowed = access.allows(
            crate::security::acl::Operation::Read,
            crate::security::acl::ResourceType::Topic,
            t.name.as_str(),
        );
        let mut partitions = Vec::with_capacity(t.partition_indexes.len());
        for p in t.partition_indexes {
            let base = PartitionResponse::default().with_partition_index(p);
            let resp = match &meta {
                _ if !allowed => {
                    base.with_error_code(ResponseError::TopicAuthorizationFailed.code())
                }
                Some(m) if p >= 0 && p < m.partitions => {
                    match frontend::describe_producers(broker, m.name.clone(), p).await {
                        Ok(list) => base.with_active_producers(
                            list.into_iter()
                                .map(|s| {
                                    ProducerState::default()
                                        .with_producer_id(ProducerId(s.producer_id))
                                        .with_producer_epoch(s.epoch as i32)
                                        .with_last_sequence(s.last_sequence)
                                        .with_last_timestamp(s.last_timestamp)
                                        .with_coordinator_epoch(s.coordinator_epoch)
                                        .with_current_txn_start_offset(s.current_txn_start_offset)
                                })
                                .collect(),
                        ),
                        Err(e) => base
                            .with_error_code(super::errors::frontend_code(&e))
                            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                    }
                }
                _ => base.with_error_code(ResponseError::UnknownTopicOrPartition.code()),
            };
            partitions.push(resp);
        }
        topics.push(
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    DescribeProducersResponse::default().with_topics(topics)
}
