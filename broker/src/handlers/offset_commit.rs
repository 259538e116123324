//! OffsetCommit (key 8): offsets are appended to `__consumer_offsets` with acks=all and only
//! then answered, so an acknowledged commit survives a crash. Topics must exist (Kafka checks
//! its metadata cache before the coordinator sees the request).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::RequestContext;
use crate::coordinator::group::coordinator::CommitItem;
use crate::coordinator::group::{self};

pub const MIN_VERSION: i16 = 2;
pub const MAX_VERSION: i16 = 9;

/// The one place OffsetCommit failures become Kafka error codes.
pub async fn handle(ctx: &RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse {
    let version = ctx.version();
    let catalog = ctx.ctx().catalog.snapshot();
    // (topic index, partition index) → answer; filled by validation then by the coordinator.
    let mut answers: Vec<Vec<i16>> = req
        .topics
        .iter()
        .map(|t| vec![0; t.partitions.len()])
        .collect();
    let mut items = Vec::new();
    let mut slots = Vec::new();
    for (ti, t) in req.topics.iter().enumerate() {
        let meta = catalog.get(t.name.as_str());
        for (pi, p) in t.partitions.iter().enumerate() {
            if !meta.is_some_and(|m| p.partition_index >= 0 && p.partition_index < m.partitions) {
                answers[ti][pi] = ResponseError::UnknownTopicOrPartition.code();
                continue;
            }
            items.push(CommitItem {
                topic: t.name.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: if version >= 6 {
                    p.committed_leader_epoch
                } else {
                    -1
                },
                metadata: p.committed_metadata.as_ref().map(|s| s.to_string()),
            });
            slots.push((ti, pi));
        }
    }
    if !items.is_empty() {
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
            Ok(results) => {
                for ((ti, pi), r) in slots.into_iter().zip(results) {
                    answers[ti][pi] = r.err().map(|e| super::errors::group_code(&e)).unwrap_or(0);
                }
            }
            Err(e) => {
                for (ti, pi) in slots {
                    answers[ti][pi] = super::errors::group_code(&e);
                }
            }
        }
    }
    let topics = req
        .topics
        .into_iter()
        .zip(answers)
        .map(|(t, codes)| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name)
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
