//! OffsetFetch (key 9): committed offsets of one group (v1–7) or several (v8+); null topics
//! means every partition the group has committed. Partitions without a commit get offset -1.
//! v10 (KIP-848) names topics by id (`codec::offset_fetch`).

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use kafka_protocol::error::ResponseError;

use super::RequestContext;
use crate::codec::{ById, TOPIC_IDS_VERSION};
use crate::coordinator::group::records::CommittedOffset;
use crate::coordinator::group::{self, GroupError};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = 10;

/// The one place OffsetFetch failures become Kafka error codes.
use crate::coordinator::group::coordinator::FetchedOffsets as Fetched;

/// One partition's answer: its error code and committed offset (`None`: none, or not shown).
type PartitionAnswer = (i32, i16, Option<CommittedOffset>);

/// Committed offsets, with UNSTABLE_OFFSET_COMMIT in place of those an open transaction is
/// about to change when the client asked for stable offsets only (`require_stable`, v7+,
/// KIP-447).
///
/// Authorization (Kafka's `handleOffsetFetchRequest`): DESCRIBE on the group (else the group
/// fails with GROUP_AUTHORIZATION_FAILED); named topics without DESCRIBE are answered
/// TOPIC_AUTHORIZATION_FAILED per partition, and left out when all topics are asked for.
async fn fetch_group(
    ctx: &RequestContext,
    group_id: String,
    member: Option<(String, i32)>,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Result<Vec<(String, Vec<PartitionAnswer>)>, i16> {
    let access = ctx.access();
    if !access.allows(Operation::Describe, ResourceType::Group, &group_id) {
        return Err(ResponseError::GroupAuthorizationFailed.code());
    }
    let describe = |t: &str| access.allows(Operation::Describe, ResourceType::Topic, t);
    let (topics, denied) = match topics {
        None => (None, Vec::new()),
        Some(ts) => {
            let (ok, denied): (Vec<_>, Vec<_>) = ts.into_iter().partition(|(t, _)| describe(t));
            (Some(ok), denied)
        }
    };
    let all = topics.is_none();
    let gid = group_id.clone();
    let fetched = group::on_coordinator(ctx.ctx(), &group_id, move |gs, _| async move {
        let fetched: Fetched = gs.fetch_offsets(&gid, member, topics)?;
        Ok::<_, GroupError>(
            fetched
                .into_iter()
                .map(|(t, ps)| {
                    let ps = ps
                        .into_iter()
                        .map(|(p, o)| {
                            if require_stable && gs.has_pending_txn_offset(&gid, &t, p) {
                                (p, ResponseError::UnstableOffsetCommit.code(), None)
                            } else {
                                (p, 0, o)
                            }
                        })
                        .collect();
                    (t, ps)
                })
                .collect::<Vec<_>>(),
        )
    })
    .await
    .map_err(|e| super::errors::group_code(&e))?;
    let mut out: Vec<_> = fetched
        .into_iter()
        .filter(|(t, _)| !all || describe(t))
        .collect();
    let code = ResponseError::TopicAuthorizationFailed.code();
    out.extend(
        denied
            .into_iter()
            .map(|(t, ps)| (t, ps.into_iter().map(|p| (p, code, None)).collect())),
    );
    Ok(out)
}

fn parts(o: &Option<CommittedOffset>) -> (i64, i32, StrBytes) {
    match o {
        Some(o) => (
            o.offset,
            o.leader_epoch,
            StrBytes::from_string(o.metadata.clone()),
        ),
        None => (-1, -1, StrBytes::default()),
    }
}

fn partition_answer(
    p: i32,
    code: i16,
    o: &Option<CommittedOffset>,
) -> OffsetFetchResponsePartitions {
    let (offset, epoch, md) = parts(o);
    OffsetFetchResponsePartitions::default()
        .with_error_code(code)
        .with_partition_index(p)
        .with_committed_offset(offset)
        .with_committed_leader_epoch(epoch)
        .with_metadata(Some(md))
}

pub async fn handle(ctx: &RequestContext, req: ById<OffsetFetchRequest>) -> OffsetFetchResponse {
    let version = ctx.version();
    let req = req.into_inner();
    if version >= 8 {
        let by_id = version >= TOPIC_IDS_VERSION;
        let catalog = ctx.ctx().catalog.snapshot();
        let mut groups = Vec::new();
        for g in req.groups {
            // v10: each id becomes its topic's name. A topic whose id the broker does not know
            // is answered UNKNOWN_TOPIC_ID per partition (Kafka 4.1+; clients retry it while
            // their metadata catches up, KAFKA-20165).
            let mut unknown_ids: Vec<(Uuid, Vec<i32>)> = Vec::new();
            let topics = g.topics.map(|ts| {
                ts.into_iter()
                    .filter_map(|t| {
                        if !by_id {
                            return Some((t.name.to_string(), t.partition_indexes));
                        }
                        match catalog.by_id(&t.topic_id) {
                            Some(meta) => Some((meta.name.to_string(), t.partition_indexes)),
                            None => {
                                unknown_ids.push((t.topic_id, t.partition_indexes));
                                None
                            }
                        }
                    })
                    .collect()
            });
            let group_id = g.group_id.to_string();
            let member = g
                .member_id
                .as_ref()
                .filter(|_| version >= 9)
                .map(|m| (m.to_string(), g.member_epoch));
            let r = fetch_group(ctx, group_id, member, topics, req.require_stable).await;
            let mut out = OffsetFetchResponseGroup::default().with_group_id(g.group_id);
            match r {
                Ok(fetched) => {
                    // By id, a topic the catalog no longer has (offsets of a deleted topic, when
                    // all are asked for) cannot be named, and is left out as Kafka does.
                    out.topics = fetched
                        .into_iter()
                        .filter_map(|(t, ps)| {
                            let id = catalog.get(&t).map_or(Uuid::nil(), |m| m.id);
                            (!by_id || !id.is_nil()).then(|| {
                                OffsetFetchResponseTopics::default()
                                    .with_name(TopicName(StrBytes::from_string(t)))
                                    .with_topic_id(id)
                                    .with_partitions(
                                        ps.iter()
                                            .map(|(p, code, o)| partition_answer(*p, *code, o))
                                            .collect(),
                                    )
                            })
                        })
                        .collect();
                    let code = ResponseError::UnknownTopicId.code();
                    out.topics.extend(unknown_ids.into_iter().map(|(id, ps)| {
                        OffsetFetchResponseTopics::default()
                            .with_topic_id(id)
                            .with_partitions(
                                ps.into_iter()
                                    .map(|p| partition_answer(p, code, &None))
                                    .collect(),
                            )
                    }));
                }
                Err(code) => out.error_code = code,
            }
            groups.push(out);
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let topics = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.to_string(), t.partition_indexes))
            .collect()
    });
    let GroupId(group_id) = req.group_id;
    let require_stable = version >= 7 && req.require_stable;
    match fetch_group(ctx, group_id.to_string(), None, topics, require_stable).await {
        Ok(fetched) => OffsetFetchResponse::default().with_topics(
            fetched
                .into_iter()
                .map(|(t, ps)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t)))
                        .with_partitions(
                            ps.iter()
                                .map(|(p, code, o)| {
                                    let (offset, epoch, md) = parts(o);
                                    OffsetFetchResponsePartition::default()
                                        .with_error_code(*code)
                                        .with_partition_index(*p)
                                        .with_committed_offset(offset)
                                        .with_committed_leader_epoch(if version >= 5 {
                                            epoch
                                        } else {
                                            -1
                                        })
                                        .with_metadata(Some(md))
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
        // v1 has no top-level error code to carry the failure.
        Err(code) if version >= 2 => OffsetFetchResponse::default().with_error_code(code),
        Err(_) => OffsetFetchResponse::default(),
    }
}
