//! What OffsetCommit (8) and TxnOffsetCommit (28) share: the request's partitions in order,
//! those of unknown topics or partitions answered UNKNOWN_TOPIC_OR_PARTITION at once (Kafka
//! checks its metadata cache before the coordinator sees them), the others handed to the group
//! coordinator as `CommitItem`s and their answers put back in place. Both check the group
//! first (READ, GROUP_AUTHORIZATION_FAILED for every partition: `CommitPlan::refused`) and then
//! READ on each topic (TOPIC_AUTHORIZATION_FAILED, before the unknown-topic check), as
//! Kafka's `handleOffsetCommitRequest` / `handleTxnOffsetCommitRequest`.

use kafka_protocol::error::ResponseError;

use crate::coordinator::group::coordinator::CommitItem;
use crate::metadata::catalog::Catalog;
use crate::security::acl::{Operation, ResourceType};
use crate::security::authorizer::Access;

/// One requested partition: (index, offset, leader epoch, metadata).
pub type Requested = (i32, i64, i32, Option<String>);

pub struct CommitPlan {
    /// (topic index, partition index) → answer, in request order.
    pub answers: Vec<Vec<i16>>,
    /// The partitions for the coordinator, with where their answers go.
    pub items: Vec<CommitItem>,
    slots: Vec<(usize, usize)>,
}

impl CommitPlan {
    pub fn new<'a>(
        catalog: &Catalog,
        access: &Access,
        topics: impl IntoIterator<Item = (&'a str, Vec<Requested>)>,
    ) -> CommitPlan {
        let (mut answers, mut items, mut slots) = (Vec::new(), Vec::new(), Vec::new());
        for (ti, (topic, partitions)) in topics.into_iter().enumerate() {
            let meta = catalog.get(topic);
            let allowed = access.allows(Operation::Read, ResourceType::Topic, topic);
            let mut codes = vec![0; partitions.len()];
            for (pi, (partition, offset, leader_epoch, metadata)) in
                partitions.into_iter().enumerate()
            {
                if !allowed {
                    codes[pi] = ResponseError::TopicAuthorizationFailed.code();
                    continue;
                }
                if !meta.is_some_and(|m| (0..m.partitions).contains(&partition)) {
                    codes[pi] = ResponseError::UnknownTopicOrPartition.code();
                    continue;
                }
                items.push(CommitItem {
                    topic: topic.to_string(),
                    partition,
                    offset,
                    leader_epoch,
                    metadata,
                });
                slots.push((ti, pi));
            }
            answers.push(codes);
        }
        CommitPlan {
            answers,
            items,
            slots,
        }
    }

    /// Every partition answered `code` (the group or transactional id is not authorized).
    pub fn refused<'a>(
        topics: impl IntoIterator<Item = (&'a str, Vec<Requested>)>,
        code: i16,
    ) -> CommitPlan {
        CommitPlan {
            answers: topics
                .into_iter()
                .map(|(_, p)| vec![code; p.len()])
                .collect(),
            items: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// Takes the items for the coordinator (an empty plan needs no coordinator call).
    pub fn take_items(&mut self) -> Vec<CommitItem> {
        std::mem::take(&mut self.items)
    }

    /// Puts the coordinator's answers, one per item in order, in their places.
    pub fn answer(mut self, codes: impl IntoIterator<Item = i16>) -> Vec<Vec<i16>> {
        for ((ti, pi), code) in self.slots.iter().zip(codes) {
            self.answers[*ti][*pi] = code;
        }
        self.answers
    }
}
