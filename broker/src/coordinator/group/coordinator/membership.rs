//! Group requests on the coordinator shard: the classic JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup, the KIP-848 ConsumerGroupHeartbeat, and DeleteGroups. Each change is durable in
//! `__consumer_offsets` before it is answered where Kafka does so.

use bytes::Bytes;

use super::GroupShard;
use crate::coordinator::group::classic::{
    Group, GroupState, JoinParams, JoinReply, Reply, SyncReply,
};
use crate::coordinator::group::consumer::{HeartbeatParams, HeartbeatResult, RegexResolver};
use crate::coordinator::group::records::GroupRecord;
use crate::coordinator::group::GroupError;

impl GroupShard {
    pub async fn join(&self, group_id: &str, p: JoinParams) -> JoinReply {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let now = crate::now_ms();
        let reply = {
            let mut groups = self.groups.borrow_mut();
            let created = !groups.contains_key(group_id);
            if created {
                if !p.member_id.is_empty() {
                    return Err(GroupError::UnknownMemberId);
                }
                groups.insert(group_id.to_string(), Group::new(group_id, now));
            }
            let g = groups.get_mut(group_id).expect("present");
            if g.has_consumer_members() || g.has_streams_members() {
                return Err(GroupError::InconsistentGroupProtocol);
            }
            // A classic join takes an empty streams group's id over (Kafka deletes it).
            g.streams = None;
            let reply = g.join(p, now, &self.cfg);
            // A rejected first join leaves no group behind (MEMBER_ID_REQUIRED is not a
            // rejection: the group keeps the pending member).
            if created
                && matches!(&reply, Reply::Now(Err(e)) if !matches!(e, GroupError::MemberIdRequired(_)))
            {
                groups.remove(group_id);
            }
            reply
        };
        let _ = self.persist_if_dirty(group_id).await;
        let r = reply.wait().await;
        let _ = self.persist_if_dirty(group_id).await;
        r
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn sync(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        assignments: Vec<(String, Bytes)>,
    ) -> SyncReply {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let now = crate::now_ms();
        let reply = {
            let mut groups = self.groups.borrow_mut();
            let Some(g) = groups.get_mut(group_id) else {
                return Err(GroupError::UnknownMemberId);
            };
            g.sync(
                member_id,
                instance_id,
                generation,
                protocol_type,
                protocol_name,
                assignments,
                now,
            )
        };
        // The leader's assignment is durable before the leader hears back (as Kafka does).
        self.persist_if_dirty(group_id).await?;
        reply.wait().await
    }

    pub async fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let mut groups = self.groups.borrow_mut();
        let g = groups
            .get_mut(group_id)
            .ok_or(GroupError::UnknownMemberId)?;
        g.heartbeat(member_id, instance_id, generation, crate::now_ms())
    }

    /// LeaveGroup: per member results.
    pub async fn leave(
        &self,
        group_id: &str,
        members: Vec<(String, Option<String>)>,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let now = crate::now_ms();
        let results = {
            let mut groups = self.groups.borrow_mut();
            let g = groups
                .get_mut(group_id)
                .ok_or(GroupError::UnknownMemberId)?;
            if g.state == GroupState::Dead {
                return Err(GroupError::CoordinatorNotAvailable);
            }
            members
                .iter()
                .map(|(m, i)| g.leave(m, i.as_deref(), now, &self.cfg))
                .collect()
        };
        let _ = self.persist_if_dirty(group_id).await;
        Ok(results)
    }

    /// ConsumerGroupHeartbeat (KIP-848). The changes are durable in `__consumer_offsets`
    /// before the member hears back. `may_describe` says which topics the sender may see:
    /// the group's regexes resolve to those when this heartbeat resolves them.
    pub async fn consumer_heartbeat(
        &self,
        group_id: &str,
        p: HeartbeatParams,
        may_describe: &dyn Fn(&str) -> bool,
    ) -> Result<HeartbeatResult, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidRequest("GroupId can't be empty.".into()));
        }
        // One catalog for both, so a resolution's version covers the topics it saw.
        let catalog = self.shard()?.ctx.catalog.snapshot();
        let topics = super::partition_counts(&catalog);
        let resolver = RegexResolver {
            may_describe,
            topics_version: self.topics_version(&catalog),
        };
        let now = crate::now_ms();
        let id_of = self.topic_ids();
        let (result, recs) = {
            let mut groups = self.groups.borrow_mut();
            if !groups.contains_key(group_id) {
                if p.member_epoch != 0 {
                    return Err(GroupError::UnknownMemberId);
                }
                groups.insert(group_id.to_string(), Group::new(group_id, now));
            }
            let g = groups.get_mut(group_id).expect("present");
            if !g.members.is_empty() || g.has_streams_members() {
                // A classic or streams group with members: not a consumer group.
                return Err(GroupError::GroupIdNotFound);
            }
            g.streams = None;
            let c = g.consumer.get_or_insert_with(Default::default);
            let cfg = self.consumer_cfg_for(group_id);
            let result = c.heartbeat(p, &topics, now, &cfg, &resolver);
            (result, c.take_records(group_id, &id_of))
        };
        self.append(self.partition_of(group_id), &recs).await?;
        result
    }

    /// DeleteGroups for one group: tombstones for its metadata and offsets.
    pub async fn delete_group(&self, group_id: &str) -> Result<(), GroupError> {
        let recs = {
            let groups = self.groups.borrow();
            let g = groups.get(group_id).ok_or(GroupError::GroupIdNotFound)?;
            g.can_delete()?;
            let mut recs: Vec<GroupRecord> = g
                .offsets
                .keys()
                .map(|(t, p)| GroupRecord::Offset {
                    group: group_id.to_string(),
                    topic: t.clone(),
                    partition: *p,
                    value: None,
                })
                .collect();
            if let Some(s) = &g.streams {
                recs.extend(s.tombstones(group_id).into_iter().map(GroupRecord::Streams));
            }
            if g.consumer.is_some() {
                recs.push(GroupRecord::ConsumerEpoch {
                    group: group_id.to_string(),
                    value: None,
                });
                recs.push(GroupRecord::TargetEpoch {
                    group: group_id.to_string(),
                    value: None,
                });
            }
            recs.push(GroupRecord::Metadata {
                group: group_id.to_string(),
                value: None,
            });
            recs
        };
        self.append(self.partition_of(group_id), &recs).await?;
        if let Some(mut g) = self.groups.borrow_mut().remove(group_id) {
            g.mark_dead(crate::now_ms());
        }
        Ok(())
    }
}
