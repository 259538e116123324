//! OffsetCommit (key 8): offsets are appended to `__consumer_offsets` with acks=all and only
//! then answered, so an acknowledged commit survives a crash. Topics must exist (Kafka checks
//! its metadata cache before the coordinator sees the request). v10 (KIP-848) names topics by
//! id (`codec::offset_commit`).

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::commit_plan::CommitPlan;
use kafka_protocol::error::ResponseError;

use super::RequestContext;
use crate::codec::{ById, TOPIC_IDS_VERSION};
use crate::coordinator::group::{self};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 2;
pub const MAX_VERSION: i16 = 10;

pub async fn handle(ctx: &RequestContext, req: ById<OffsetCommitRequest>) -> OffsetCommitResponse {
    let version = ctx.version();
    let catalog = ctx.ctx().catalog.snapshot();
    let mut req = req.into_inner();
    // v10: each id becomes its topic's name; a topic whose id the broker does not know is
    // answered UNKNOWN_TOPIC_ID whole (after the group check, before the topic checks), as
    // Kafka's `handleOffsetCommitRequest`. Its empty name matches no topic, so the plan sends
    // none of its partitions to the coordinator.
    let unknown_ids: Vec<bool> = req
        .topics
        .iter_mut()
        .map(|t| {
            if version < TOPIC_IDS_VERSION {
                return false;
            }
            match catalog.by_id(&t.topic_id) {
                Some(meta) => {
                    t.name = TopicName(StrBytes::from_string(meta.name.to_string()));
                    false
                }
                None => true,
            }
        })
        .collect();
    let requested = req.topics.iter().map(|t| {
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                let epoch = if version >= 6 {
                    p.committed_leader_epoch
                } else {
                    -1
                };
                let metadata = p.committed_metadata.as_ref().map(|s| s.to_string());
                (p.partition_index, p.committed_offset, epoch, metadata)
            })
            .collect();
        (t.name.as_str(), partitions)
    });
    let access = ctx.access();
    let group_allowed = access.allows(Operation::Read, ResourceType::Group, &req.group_id);
    let mut plan = if group_allowed {
        CommitPlan::new(&catalog, &access, requested)
    } else {
        CommitPlan::refused(requested, ResponseError::GroupAuthorizationFailed.code())
    };
    let items = plan.take_items();
    let answers = if items.is_empty() {
        plan.answer([])
    } else {
        let n = items.len();
        let group_id = req.group_id.to_string();
        let gid = group_id.clone();
        let member = req.member_id.to_string();
        let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
        let generation = req.generation_id_or_member_epoch;
        let r = group::on_coordinator(ctx.ctx(), &group_id, move |gs, _| async move {
            gs.commit(
                &gid,
                &member,
                instance.as_deref(),
                generation,
                version,
                items,
                None,
            )
            .await
        })
        .await;
        match r {
            Ok(results) => plan.answer(
                results
                    .into_iter()
                    .map(|r| r.err().map(|e| super::errors::group_code(&e)).unwrap_or(0)),
            ),
            Err(e) => plan.answer(vec![super::errors::group_code(&e); n]),
        }
    };
    let topics = req
        .topics
        .into_iter()
        .zip(answers)
        .zip(unknown_ids)
        .map(|((t, mut codes), unknown_id)| {
            if unknown_id && group_allowed {
                codes.fill(ResponseError::UnknownTopicId.code());
            }
            OffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(codes)
                        .map(|(p, code)| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
