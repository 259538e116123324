//! ShareAcknowledge (key 79, KIP-932): acknowledgements outside a fetch (commitSync, and the
//! final request of a closing consumer, epoch -1, which also gives back every record the
//! member still holds). Answered only once the new share state is on disk. v2 (KIP-1222) may
//! carry RENEW acknowledgements (`IsRenewAck`) and answers how long the locks now last.

use std::collections::BTreeMap;

use futures::future::join_all;
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::share_common::{admit_member, check_batches, share_code};
use super::RequestContext;
use crate::codec::share_acknowledge::{self, ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use crate::coordinator::share::records::StateKey;
use crate::coordinator::share::session::{SessionStep, ShareSessions};
use crate::coordinator::share::store::{self, PartitionDone, PartitionWork};
use crate::coordinator::share::{ShareConfig, ShareError};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = share_acknowledge::MAX;

pub async fn handle(
    ctx: &RequestContext,
    req: ShareAcknowledgeRequest,
) -> ShareAcknowledgeResponse {
    let fail = |code: i16, msg: String| ShareAcknowledgeResponse {
        body: kafka_protocol::messages::ShareAcknowledgeResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(msg))),
        ..Default::default()
    };
    let (group, member) = match admit_member(ctx, req.group_id.as_deref(), req.member_id.as_ref()) {
        Ok(ids) => ids,
        Err((code, message)) => return fail(code, message),
    };
    let sessions = ShareSessions::here();
    // Epoch 0 cannot acknowledge (there is no session yet); -1 closes the session.
    let releases: Vec<(Uuid, i32)> = match req.share_session_epoch {
        0 => {
            let e = ShareError::InvalidShareSessionEpoch;
            return fail(share_code(&e), e.to_string());
        }
        -1 => match sessions.step(&group, &member, -1, &[], &[]) {
            Ok(SessionStep::Close(parts)) => parts.into_iter().collect(),
            Ok(SessionStep::Fetch(_)) => Vec::new(),
            Err(e) => return fail(share_code(&e), e.to_string()),
        },
        e => match sessions.check(&group, &member, e) {
            Ok(()) => Vec::new(),
            Err(e) => return fail(share_code(&e), e.to_string()),
        },
    };
    let mut acks: super::share_fetch::Acks = BTreeMap::new();
    for t in &req.topics {
        for p in &t.partitions {
            acks.entry((t.topic_id, p.partition_index))
                .or_default()
                .extend(
                    p.acknowledgement_batches
                        .iter()
                        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone())),
                );
        }
    }
    // A partition whose batches are malformed applies none of them.
    let mut refused = BTreeMap::new();
    acks.retain(
        |k, batches| match check_batches(batches, ctx.version(), req.is_renew_ack) {
            Ok(()) => true,
            Err(e) => {
                refused.insert(*k, e);
                false
            }
        },
    );
    let cfg = ShareConfig::of(ctx.ctx(), &group);
    let mut targets: Vec<(Uuid, i32)> = acks.keys().copied().collect();
    for r in &releases {
        if !targets.contains(r) {
            targets.push(*r);
        }
    }
    let catalog = ctx.ctx().catalog.snapshot();
    let work = targets.iter().map(|&(id, p)| {
        let acks = acks.get(&(id, p)).cloned().unwrap_or_default();
        let release = releases.contains(&(id, p));
        let topic = catalog
            .by_id(&id)
            .filter(|t| (0..t.partitions).contains(&p))
            .filter(|t| {
                ctx.access()
                    .allows(Operation::Read, ResourceType::Topic, &t.name)
            })
            .map(|t| t.name.to_string());
        let (group, member) = (group.clone(), member.clone());
        async move {
            let Some(topic) = topic else {
                return (
                    (id, p),
                    PartitionDone {
                        error: Some(ShareError::UnknownTopicOrPartition),
                        ..Default::default()
                    },
                );
            };
            let work = PartitionWork {
                key: StateKey {
                    group_id: group,
                    topic_id: id,
                    partition: p,
                },
                topic,
                member,
                acks,
                max_records: 0,
                whole_batches: false,
                max_bytes: 0,
                release,
                config: cfg,
            };
            ((id, p), store::on_partition(ctx.ctx(), work).await)
        }
    });
    let mut done = join_all(work).await;
    let refused_keys: Vec<(Uuid, i32)> = refused.keys().copied().collect();
    done.extend(refused.into_iter().map(|(k, e)| {
        let d = PartitionDone {
            ack_error: Some(e),
            ..Default::default()
        };
        (k, d)
    }));
    let leader = LeaderIdAndEpoch::default()
        .with_leader_id(ctx.ctx().config.node_id)
        .with_leader_epoch(crate::shard::LEADER_EPOCH);
    let mut topics: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
    for ((id, p), d) in done {
        // Only the partitions the request acknowledged on are answered.
        if !acks.contains_key(&(id, p)) && !refused_keys.contains(&(id, p)) {
            continue;
        }
        let mut pd = PartitionData::default()
            .with_partition_index(p)
            .with_current_leader(leader.clone());
        if let Some(e) = d.error.as_ref().or(d.ack_error.as_ref()) {
            pd = pd
                .with_error_code(share_code(e))
                .with_error_message(Some(StrBytes::from_string(e.to_string())));
        }
        topics.entry(id).or_default().push(pd);
    }
    let mut resp = ShareAcknowledgeResponse {
        acquisition_lock_timeout_ms: cfg.limits.lock_ms.clamp(0, i32::MAX as i64) as i32,
        ..Default::default()
    };
    resp.responses = topics
        .into_iter()
        .map(|(id, ps)| {
            ShareAcknowledgeTopicResponse::default()
                .with_topic_id(id)
                .with_partitions(ps)
        })
        .collect();
    resp
}
