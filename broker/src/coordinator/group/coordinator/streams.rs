//! StreamsGroupHeartbeat on the coordinator shard: the group found or created, the state
//! machine (`group::streams`) run against the current topics, and the group's describe view.

use super::GroupShard;
use crate::coordinator::group::classic::Group;
use crate::coordinator::group::records::GroupRecord;
use crate::coordinator::group::streams::{HeartbeatParams, HeartbeatResult, StreamsGroup};
use crate::coordinator::group::GroupError;

/// A failed streams group request: the error, and Kafka's message where it has one.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamsFailure {
    pub error: GroupError,
    pub message: Option<String>,
}

impl From<GroupError> for StreamsFailure {
    fn from(error: GroupError) -> Self {
        let message = match &error {
            GroupError::InvalidRequest(m)
            | GroupError::StreamsInvalidTopology(m)
            | GroupError::UnsupportedVersion(m) => Some(m.clone()),
            _ => None,
        };
        StreamsFailure { error, message }
    }
}

fn not_found(message: String) -> StreamsFailure {
    StreamsFailure {
        error: GroupError::GroupIdNotFound,
        message: Some(message),
    }
}

impl GroupShard {
    /// StreamsGroupHeartbeat (KIP-1071). What it changed is durable in `__consumer_offsets`
    /// (Kafka's streams group records) before the member hears back.
    pub async fn streams_heartbeat(
        &self,
        group_id: &str,
        p: HeartbeatParams,
    ) -> Result<HeartbeatResult, StreamsFailure> {
        let (result, recs) = self.streams_heartbeat_in_memory(group_id, p)?;
        self.append(self.partition_of(group_id), &recs).await?;
        result
    }

    fn streams_heartbeat_in_memory(
        &self,
        group_id: &str,
        p: HeartbeatParams,
    ) -> Result<(Result<HeartbeatResult, StreamsFailure>, Vec<GroupRecord>), StreamsFailure> {
        let topics = self.topic_partitions();
        let now = crate::now_ms();
        let cfg = self.streams_cfg_for(group_id);
        let leaving = p.member_epoch < 0;
        let mut groups = self.groups.borrow_mut();
        let other_type = |g: &Group| !g.members.is_empty() || g.has_consumer_members();
        match groups.get(group_id) {
            Some(g) if other_type(g) => {
                return Err(not_found(format!(
                    "Group {group_id} is not a streams group."
                )))
            }
            Some(g) if g.streams.is_some() => {}
            _ if leaving => return Err(not_found(format!("Group {group_id} not found."))),
            _ if p.member_epoch != 0 => {
                return Err(not_found(format!("Streams group {group_id} not found.")))
            }
            Some(_) => {}
            None => {
                groups.insert(group_id.to_string(), Group::new(group_id, now));
            }
        }
        let g = groups.get_mut(group_id).expect("present");
        // An empty classic or consumer group's id is taken over (Kafka replaces it).
        g.consumer = None;
        let s = g.streams.get_or_insert_with(StreamsGroup::default);
        // A failed heartbeat may have changed the group too (a member fenced, a topology
        // stored): what changed is written either way.
        let result = s.heartbeat(p, &topics, now, &cfg);
        let recs = s
            .take_records(group_id)
            .into_iter()
            .map(GroupRecord::Streams)
            .collect();
        Ok((result.map_err(StreamsFailure::from), recs))
    }

    /// Runs `f` on the streams group `group_id` (`Err` with Kafka's message when there is
    /// none, or the id is another type's).
    pub fn with_streams_group<R>(
        &self,
        group_id: &str,
        f: impl FnOnce(&StreamsGroup) -> R,
    ) -> Result<R, StreamsFailure> {
        let groups = self.groups.borrow();
        match groups.get(group_id) {
            Some(g) if g.streams.is_some() && g.members.is_empty() && !g.has_consumer_members() => {
                Ok(f(g.streams.as_ref().expect("streams group")))
            }
            Some(_) => Err(not_found(format!(
                "Group {group_id} is not a streams group."
            ))),
            _ => Err(not_found(format!("Group {group_id} not found."))),
        }
    }
}
