//! OffsetFetch (key 9): committed offsets of one group (v1–7) or several (v8+); null topics
//! means every partition the group has committed. Partitions without a commit get offset -1.

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::coordinator::group::records::CommittedOffset;
use crate::coordinator::group::{self, GroupError};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = 9;

/// The one place OffsetFetch failures become Kafka error codes.
use crate::coordinator::group::coordinator::FetchedOffsets as Fetched;

/// Committed offsets, with `None` in place of those an open transaction is about to change
/// when the client asked for stable offsets only (`require_stable`, v7+, KIP-447).
async fn fetch_group(
    ctx: &RequestContext,
    group_id: String,
    member: Option<(String, i32)>,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Result<Vec<(String, Vec<(i32, Option<Option<CommittedOffset>>)>)>, GroupError> {
    let gid = group_id.clone();
    group::on_coordinator(ctx.ctx(), &group_id, move |gs, _| async move {
        let fetched: Fetched = gs.fetch_offsets(&gid, member, topics)?;
        Ok(fetched
            .into_iter()
            .map(|(t, ps)| {
                let ps = ps
                    .into_iter()
                    .map(|(p, o)| {
                        let unstable = require_stable && gs.has_pending_txn_offset(&gid, &t, p);
                        (p, (!unstable).then_some(o))
                    })
                    .collect();
                (t, ps)
            })
            .collect())
    })
    .await
}

/// UNSTABLE_OFFSET_COMMIT for an offset an open transaction holds (the client retries).
fn unstable_code(o: &Option<Option<CommittedOffset>>) -> i16 {
    match o {
        Some(_) => 0,
        None => kafka_protocol::error::ResponseError::UnstableOffsetCommit.code(),
    }
}

fn parts(o: &Option<Option<CommittedOffset>>) -> (i64, i32, StrBytes) {
    match o.as_ref().and_then(|o| o.as_ref()) {
        Some(o) => (
            o.offset,
            o.leader_epoch,
            StrBytes::from_string(o.metadata.clone()),
        ),
        None => (-1, -1, StrBytes::default()),
    }
}

pub async fn handle(ctx: &RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse {
    let version = ctx.version();
    if version >= 8 {
        let mut groups = Vec::new();
        for g in req.groups {
            let topics = g.topics.map(|ts| {
                ts.into_iter()
                    .map(|t| (t.name.to_string(), t.partition_indexes))
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
                    out.topics = fetched
                        .into_iter()
                        .map(|(t, ps)| {
                            OffsetFetchResponseTopics::default()
                                .with_name(TopicName(StrBytes::from_string(t)))
                                .with_partitions(
                                    ps.iter()
                                        .map(|(p, o)| {
                                            let (offset, epoch, md) = parts(o);
                                            OffsetFetchResponsePartitions::default()
                                                .with_error_code(unstable_code(o))
                                                .with_partition_index(*p)
                                                .with_committed_offset(offset)
                                                .with_committed_leader_epoch(epoch)
                                                .with_metadata(Some(md))
                                        })
                                        .collect(),
                                )
                        })
                        .collect();
                }
                Err(e) => out.error_code = super::errors::group_code(&e),
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
                                .map(|(p, o)| {
                                    let (offset, epoch, md) = parts(o);
                                    OffsetFetchResponsePartition::default()
                                        .with_error_code(unstable_code(o))
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
        Err(e) if version >= 2 => {
            OffsetFetchResponse::default().with_error_code(super::errors::group_code(&e))
        }
        Err(_) => OffsetFetchResponse::default(),
    }
}
