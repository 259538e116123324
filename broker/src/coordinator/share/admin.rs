//! Share group administration (KIP-932's Alter/DeleteShareGroupOffsets and DeleteGroups of
//! a share group): what Kafka's group coordinator checks on the group's coordinator shard
//! (the group exists and has no live member) before the share partitions' state is changed
//! on their home shards (`store::reset`).

use std::collections::BTreeSet;

use super::group::ShareGroups;
use super::records::StateKey;
use super::{store, ShareConfig, ShareError};
use crate::coordinator::group;
use crate::shard::BrokerContext;

/// What `empty_group` does with the group besides checking it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Only check (DeleteShareGroupOffsets, the first step of DeleteGroups).
    Existing,
    /// Create it, empty, when no group has the id: Kafka's AlterShareGroupOffsets does.
    Create,
    /// Drop it (DeleteGroups, last step).
    Remove,
}

/// On the group's coordinator shard: the topics the group may have share state on, once
/// the group is known (GROUP_ID_NOT_FOUND otherwise) and empty (NON_EMPTY_GROUP while a
/// member's session is alive). `note` are topics about to get state (an alter), recorded so
/// a later DeleteGroups deletes it.
pub async fn empty_group(
    ctx: &BrokerContext,
    group_id: &str,
    note: Vec<String>,
    how: Lookup,
) -> Result<BTreeSet<String>, ShareError> {
    let timeout = ShareConfig::of(ctx, group_id).session_timeout_ms;
    let id = group_id.to_string();
    group::on_coordinator(ctx, group_id, move |gs, _| async move {
        let topics = {
            let groups = ShareGroups::here();
            let mut all = groups.groups.borrow_mut();
            // Kafka's `shareGroup(groupId)`: a classic or consumer group's id is no share
            // group.
            if how == Lookup::Create
                && !all.contains_key(&id)
                && !gs.groups.borrow().contains_key(&id)
            {
                all.insert(id.clone(), Default::default());
            }
            let Some(g) = all.get_mut(&id) else {
                return Ok(Err(ShareError::GroupIdNotFound));
            };
            let now = crate::now_ms();
            if g.members
                .values()
                .any(|m| now - m.last_heartbeat_ms < timeout)
            {
                return Ok(Err(ShareError::NonEmptyGroup));
            }
            // A member whose session ran out and that the timer has not removed yet leaves
            // now, with the new group epoch its expiry gives.
            let counts = gs.topic_partitions();
            g.expire_members(now, timeout, |t| counts.get(t).copied());
            g.topics_seen.extend(note);
            g.topics_seen.clone()
        };
        // Durable before the answer: the group's existence (an alter creates it), the
        // topics that now have share state, or (a delete) the group's tombstones.
        let recs = if how == Lookup::Remove {
            gs.remove_share_group(&id)
        } else {
            gs.share_records(&id)
        };
        if !recs.is_empty() {
            gs.append(gs.partition_of(&id), &recs).await?;
        }
        Ok(Ok(topics))
    })
    .await?
}

/// Sets or deletes (`None`) the start offset of each listed partition of `topic`.
pub async fn reset_topic(
    ctx: &BrokerContext,
    group_id: &str,
    topic: &str,
    partitions: impl IntoIterator<Item = (i32, Option<i64>)>,
) -> Vec<(i32, Result<(), ShareError>)> {
    let meta = ctx.catalog.snapshot().get(topic).cloned();
    let mut out = Vec::new();
    for (p, start) in partitions {
        let Some(meta) = meta.as_ref().filter(|m| (0..m.partitions).contains(&p)) else {
            out.push((p, Err(ShareError::UnknownTopicOrPartition)));
            continue;
        };
        let key = StateKey {
            group_id: group_id.to_string(),
            topic_id: meta.id,
            partition: p,
        };
        out.push((p, store::reset(ctx, key, topic.to_string(), start).await));
    }
    out
}

/// DeleteGroups of a share group: `Ok(false)` when `group_id` is no share group (the caller
/// tries the other group types, as Kafka chains them); else its share state is tombstoned
/// and the group dropped. NON_EMPTY_GROUP while it has members.
pub async fn delete_group(ctx: &BrokerContext, group_id: &str) -> Result<bool, ShareError> {
    let topics = match empty_group(ctx, group_id, Vec::new(), Lookup::Existing).await {
        Err(ShareError::GroupIdNotFound) => return Ok(false),
        r => r?,
    };
    let catalog = ctx.catalog.snapshot();
    for topic in topics {
        // A topic deleted since has no partitions left to hold state for.
        let Some(n) = catalog.get(&topic).map(|m| m.partitions) else {
            continue;
        };
        for (_, r) in reset_topic(ctx, group_id, &topic, (0..n).map(|p| (p, None))).await {
            r?;
        }
    }
    empty_group(ctx, group_id, Vec::new(), Lookup::Remove).await?;
    Ok(true)
}
