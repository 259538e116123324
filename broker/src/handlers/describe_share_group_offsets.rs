//! DescribeShareGroupOffsets (key 90, KIP-932): each share partition's start offset (SPSO),
//! -1 for a partition the group has no state for; with no topics named, every partition
//! it has state for (of the topics its members subscribe to or it ever had; Kafka's
//! initialized share partitions).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::share_common::{enabled, share_code};
use super::RequestContext;
use crate::coordinator::group;
use crate::coordinator::share::group::ShareGroups;
use crate::coordinator::share::records::StateKey;
use crate::coordinator::share::store;
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

pub async fn handle(
    ctx: &RequestContext,
    req: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    let catalog = ctx.ctx().catalog.snapshot();
    let mut groups = Vec::new();
    for g in req.groups {
        let base =
            DescribeShareGroupOffsetsResponseGroup::default().with_group_id(g.group_id.clone());
        if !enabled(ctx) {
            groups.push(base.with_error_code(ResponseError::UnsupportedVersion.code()));
            continue;
        }
        if !ctx
            .access()
            .allows(Operation::Describe, ResourceType::Group, &g.group_id)
        {
            groups.push(base.with_error_code(ResponseError::GroupAuthorizationFailed.code()));
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
                let pd = DescribeShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p)
                    .with_leader_epoch(crate::shard::LEADER_EPOCH);
                let Some(meta) = meta.as_ref().filter(|m| (0..m.partitions).contains(&p)) else {
                    out.push(
                        pd.with_start_offset(-1)
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code()),
                    );
                    continue;
                };
                let key = StateKey {
                    group_id: g.group_id.to_string(),
                    topic_id: meta.id,
                    partition: p,
                };
                out.push(
                    match store::start_offset(ctx.ctx(), key, name.clone()).await {
                        Ok(-1) if all => continue,
                        Ok(o) => pd.with_start_offset(o),
                        Err(e) => pd
                            .with_start_offset(-1)
                            .with_error_code(share_code(&e))
                            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                    },
                );
            }
            if all && out.is_empty() {
                continue;
            }
            topics.push(
                DescribeShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                    .with_topic_id(meta.map(|m| m.id).unwrap_or_default())
                    .with_partitions(out),
            );
        }
        groups.push(base.with_topics(topics));
    }
    DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}
