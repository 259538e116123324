//! DescribeTopicPartitions (key 75, KIP-966): the Java admin client's `describeTopics`. Topics
//! in name order, at most `ResponsePartitionLimit` partitions per answer (capped at Kafka's
//! `max.request.partition.size.limit`, 2000), and a cursor (topic, partition) where the next
//! page starts — Kafka's `DescribeTopicPartitionsRequestHandler` and
//! `KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse`, rule for rule.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::metadata::catalog::validate_topic_name;
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

/// Kafka's `max.request.partition.size.limit` default: no answer carries more partitions.
const MAX_PARTITIONS_PER_RESPONSE: i32 = 2000;

/// What an admin may do to a topic with no authorizer configured (Kafka's `AuthHelper.
/// authorizedOperations`: every operation a topic supports — READ, WRITE, CREATE, DELETE,
/// ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS — as a bit field of ACL operation codes).
pub const TOPIC_AUTHORIZED_OPERATIONS: i32 =
    1 << 3 | 1 << 4 | 1 << 5 | 1 << 6 | 1 << 7 | 1 << 8 | 1 << 10 | 1 << 11;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// The partitions in `range`, placed as Metadata places them (handlers/placement.rs).
fn partitions(
    ctx: &crate::shard::BrokerContext,
    topic: &str,
    range: std::ops::Range<i32>,
    listener: &str,
) -> Vec<DescribeTopicPartitionsResponsePartition> {
    let ids = |v: &[i32]| v.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
    super::placement::placements(ctx, topic, range, listener)
        .into_iter()
        .map(|(p, at)| {
            // Kafka gives a leader without the client's listener as -1, with no error.
            let code = match at.error_code {
                c if c == ResponseError::ListenerNotFound.code() => 0,
                c => c,
            };
            DescribeTopicPartitionsResponsePartition::default()
                .with_error_code(code)
                .with_partition_index(p)
                .with_leader_id(BrokerId(at.leader))
                .with_leader_epoch(at.leader_epoch)
                .with_replica_nodes(ids(&at.replicas))
                .with_isr_nodes(ids(&at.isr))
                .with_offline_replicas(ids(&at.offline))
                // ELR (KIP-966) is off: eligible.leader.replicas.version 0.
                .with_eligible_leader_replicas(Some(vec![]))
                .with_last_known_elr(Some(vec![]))
        })
        .collect()
}

fn invalid_request(
    req: &DescribeTopicPartitionsRequest,
    message: &str,
) -> DescribeTopicPartitionsResponse {
    tracing::debug!(message, "DescribeTopicPartitions refused");
    // Kafka's `getErrorResponse`: every requested topic carries the error.
    DescribeTopicPartitionsResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                DescribeTopicPartitionsResponseTopic::default()
                    .with_name(Some(t.name.clone()))
                    .with_error_code(ResponseError::InvalidRequest.code())
            })
            .collect(),
    )
}

pub async fn handle(
    ctx: &RequestContext,
    req: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let broker = ctx.ctx();
    let catalog = broker.catalog.snapshot();
    let all = req.topics.is_empty();
    let (cursor_topic, cursor_partition) = req
        .cursor
        .as_ref()
        .map_or(("", 0), |c| (c.topic_name.as_str(), c.partition_index));
    // Names at or after the cursor, sorted and without duplicates.
    let wanted: BTreeSet<&str> = if all {
        catalog
            .topics
            .keys()
            .map(|n| &**n)
            .filter(|n| *n >= cursor_topic)
            .collect()
    } else {
        req.topics
            .iter()
            .map(|t| t.name.as_str())
            .filter(|n| *n >= cursor_topic)
            .collect()
    };
    if let Some(c) = &req.cursor {
        if !all && !wanted.contains(c.topic_name.as_str()) {
            return invalid_request(
                &req,
                "DescribeTopicPartitionsRequest topic list should contain the cursor topic",
            );
        }
        if c.partition_index < 0 {
            return invalid_request(
                &req,
                "DescribeTopicPartitionsRequest cursor partition must be valid",
            );
        }
    }
    let mut remaining = req
        .response_partition_limit
        .clamp(1, MAX_PARTITIONS_PER_RESPONSE);
    let mut resp = DescribeTopicPartitionsResponse::default();
    // Kafka's `DescribeTopicPartitionsRequestHandler`: DESCRIBE on each topic — left out of an
    // all-topics answer, TOPIC_AUTHORIZATION_FAILED when named; each topic carries what the
    // client may do on it.
    let access = ctx.access();
    let ops = |t: &str| access.operations(true, ResourceType::Topic, t);
    for topic in wanted {
        if !access.allows(Operation::Describe, ResourceType::Topic, topic) {
            if !all {
                resp.topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_name(Some(name(topic)))
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
                );
            }
            continue;
        }
        if remaining == 0 {
            // The page is full: the next one starts at this topic.
            resp.next_cursor = Some(
                Cursor::default()
                    .with_topic_name(name(topic))
                    .with_partition_index(0),
            );
            break;
        }
        let Some(t) = catalog.get(topic) else {
            if !all {
                let code = if validate_topic_name(topic).is_ok() {
                    ResponseError::UnknownTopicOrPartition
                } else {
                    ResponseError::InvalidTopicException
                };
                resp.topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_name(Some(name(topic)))
                        .with_error_code(code.code())
                        .with_topic_authorized_operations(ops(topic)),
                );
            }
            continue;
        };
        let from = if topic == cursor_topic {
            cursor_partition
        } else {
            0
        };
        let upper = t.partitions.min(from.saturating_add(remaining));
        let ps = partitions(broker, topic, from..upper, &ctx.session.listener.name);
        remaining -= ps.len() as i32;
        resp.topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(name(topic)))
                .with_topic_id(t.id)
                .with_is_internal(t.internal)
                .with_partitions(ps)
                .with_topic_authorized_operations(ops(topic)),
        );
        if upper < t.partitions {
            resp.next_cursor = Some(
                Cursor::default()
                    .with_topic_name(name(topic))
                    .with_partition_index(upper),
            );
            break;
        }
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use kafka_protocol::messages::describe_topic_partitions_request::{
        Cursor as ReqCursor, TopicRequest,
    };
    use kafka_protocol::messages::ApiKey;

    fn ask(
        h: &Harness,
        topics: &[&str],
        limit: i32,
        cursor: Option<(&str, i32)>,
    ) -> DescribeTopicPartitionsResponse {
        let req = DescribeTopicPartitionsRequest::default()
            .with_topics(
                topics
                    .iter()
                    .map(|t| TopicRequest::default().with_name(name(t)))
                    .collect(),
            )
            .with_response_partition_limit(limit)
            .with_cursor(cursor.map(|(t, p)| {
                ReqCursor::default()
                    .with_topic_name(name(t))
                    .with_partition_index(p)
            }));
        h.call(ApiKey::DescribeTopicPartitions, 0, req)
    }

    /// (topic, partitions) per topic of a page, and the next cursor.
    type Page = (Vec<(String, Vec<i32>)>, Option<(String, i32)>);

    fn pages(r: &DescribeTopicPartitionsResponse) -> Page {
        let topics = r
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.as_ref().unwrap().to_string(),
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            })
            .collect();
        let next = r
            .next_cursor
            .as_ref()
            .map(|c| (c.topic_name.to_string(), c.partition_index));
        (topics, next)
    }

    #[test]
    fn given_limit_when_describing_all_topics_then_pages_follow_the_cursor() {
        let h = Harness::new();
        create(&h, "b", 3);
        create(&h, "a", 2);
        create(&h, "c", 1);
        let r = ask(&h, &[], 3, None);
        assert_eq!(
            pages(&r),
            (
                vec![("a".into(), vec![0, 1]), ("b".into(), vec![0])],
                Some(("b".into(), 1))
            )
        );
        assert_eq!(
            r.topics[0].topic_authorized_operations,
            TOPIC_AUTHORIZED_OPERATIONS
        );
        let r = ask(&h, &[], 2, Some(("b", 1)));
        // The page ends exactly at the end of b: the cursor names the next topic.
        assert_eq!(
            pages(&r),
            (vec![("b".into(), vec![1, 2])], Some(("c".into(), 0)))
        );
        let r = ask(&h, &[], 2, Some(("c", 0)));
        assert_eq!(pages(&r), (vec![("c".into(), vec![0])], None));
        assert_eq!(r.topics[0].partitions[0].isr_nodes, vec![BrokerId(0)]);
    }

    #[test]
    fn given_named_topics_when_describing_then_unknown_and_invalid_answered_in_order() {
        let h = Harness::new();
        create(&h, "t", 2);
        let r = ask(&h, &["zz", "t", "bad/name", "t"], 2000, None);
        let got: Vec<(String, i16, usize)> = r
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.as_ref().unwrap().to_string(),
                    t.error_code,
                    t.partitions.len(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("bad/name".into(), 17, 0),
                ("t".into(), 0, 2),
                ("zz".into(), 3, 0)
            ]
        );
    }

    #[test]
    fn given_cursor_outside_the_list_or_negative_when_describing_then_invalid_request() {
        let h = Harness::new();
        create(&h, "t", 1);
        let r = ask(&h, &["t"], 10, Some(("u", 0)));
        assert_eq!(r.topics[0].error_code, 42);
        let r = ask(&h, &["t"], 10, Some(("t", -1)));
        assert_eq!(r.topics[0].error_code, 42);
    }
}
