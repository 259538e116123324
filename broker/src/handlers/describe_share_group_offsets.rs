//! DescribeShareGroupOffsets (key 90, KIP-932): each share partition's start offset (SPSO)
//! and, from v1 (KIP-1226), its lag; -1 for a partition the group has no state for. With no
//! topics named, every partition it has state for (of the topics its members subscribe to or
//! it ever had; Kafka's initialized share partitions).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::DescribeShareGroupOffsetsRequest;
use kafka_protocol::protocol::StrBytes;

use super::share_common::{enabled, share_code};
use super::RequestContext;
use crate::codec::describe_share_group_offsets::{
    DescribeShareGroupOffsetsResponse, ShareGroupOffsets, SharePartitionOffsets, ShareTopicOffsets,
};
use crate::codec::Capped;
use crate::coordinator::group;
use crate::coordinator::share::group::ShareGroups;
use crate::coordinator::share::records::StateKey;
use crate::coordinator::share::store;
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 1;

pub async fn handle(
    ctx: &RequestContext,
    req: Capped<DescribeShareGroupOffsetsRequest>,
) -> DescribeShareGroupOffsetsResponse {
    let catalog = ctx.ctx().catalog.snapshot();
    let mut groups = Vec::new();
    for g in req.into_inner().groups {
        let base = ShareGroupOffsets {
            group_id: g.group_id.0.clone(),
            ..Default::default()
        };
        let refused = |code: ResponseError| ShareGroupOffsets {
            error_code: code.code(),
            ..base.clone()
        };
        if !enabled(ctx) {
            groups.push(refused(ResponseError::UnsupportedVersion));
            continue;
        }
        if !ctx
            .access()
            .allows(Operation::Describe, ResourceType::Group, &g.group_id)
        {
            groups.push(refused(ResponseError::GroupAuthorizationFailed));
            continue;
        }
        let all = g.topics.is_none();
        let wanted: Vec<(String, Vec<i32>)> = match g.topics {
            Some(ts) => ts
                .into_iter()
                .map(|t| (t.topic_name.to_string(), t.partitions))
                .collect(),
            None => {
                let id = g.group_id.to_string();
                let subscribed =
                    group::on_coordinator(ctx.ctx(), &g.group_id, move |_, _| async move {
                        Ok(ShareGroups::here()
                            .groups
                            .borrow()
                            .get(&id)
                            .map(|g| {
                                let mut t = g.subscribed_topics();
                                t.extend(g.topics_seen.iter().cloned());
                                t
                            })
                            .unwrap_or_default())
                    })
                    .await
                    .unwrap_or_default();
                subscribed
                    .into_iter()
                    .filter_map(|t| {
                        let n = catalog.get(&t)?.partitions;
                        Some((t, (0..n).collect()))
                    })
                    .collect()
            }
        };
        let mut topics = Vec::new();
        for (name, parts) in wanted {
            let meta = catalog.get(&name).cloned();
            let mut out = Vec::new();
            for p in parts {
                let pd = SharePartitionOffsets {
                    partition_index: p,
                    leader_epoch: crate::shard::LEADER_EPOCH,
                    ..Default::default()
                };
                let Some(meta) = meta.as_ref().filter(|m| (0..m.partitions).contains(&p)) else {
                    out.push(SharePartitionOffsets {
                        error_code: ResponseError::UnknownTopicOrPartition.code(),
                        ..pd
                    });
                    continue;
                };
                let key = StateKey {
                    group_id: g.group_id.to_string(),
                    topic_id: meta.id,
                    partition: p,
                };
                out.push(
                    match store::start_and_lag(ctx.ctx(), key, name.clone()).await {
                        Ok((-1, _)) if all => continue,
                        Ok((start_offset, lag)) => SharePartitionOffsets {
                            start_offset,
                            lag,
                            ..pd
                        },
                        Err(e) => SharePartitionOffsets {
                            error_code: share_code(&e),
                            error_message: Some(StrBytes::from_string(e.to_string())),
                            ..pd
                        },
                    },
                );
            }
            if all && out.is_empty() {
                continue;
            }
            topics.push(ShareTopicOffsets {
                topic_name: StrBytes::from_string(name),
                topic_id: meta.map(|m| m.id).unwrap_or_default(),
                partitions: out,
                ..Default::default()
            });
        }
        groups.push(ShareGroupOffsets { topics, ..base });
    }
    DescribeShareGroupOffsetsResponse {
        groups,
        ..Default::default()
    }
}
