//! ShareFetch (key 78, KIP-932): the member's share session moves one epoch
//! (`coordinator::share::session`), the piggy-backed acknowledgements are applied and records
//! acquired on each partition's home shard (`coordinator::share::store`), and when nothing
//! was acquired the request waits, as Kafka's DelayedShareFetch does, until new records
//! arrive, a lock runs out or `max_wait_ms` passes. Records travel as the log's batches with
//! the acquired offset ranges beside them; the client delivers only those ranges.
//!
//! v2 (KIP-1222) may carry RENEW acknowledgements (`IsRenewAck`): such a request only renews
//! and acknowledges, fetching nothing, and Kafka insists its fetch limits be 0. v2's
//! `ShareAcquireMode` (KIP-1206): the record-limit mode stops at MaxRecords record by record;
//! the batch-optimized mode (v1's only one) acquires each batch it starts whole, as Kafka
//! does. A batch is read and sent once instead of once per MaxRecords records, which is
//! what a consumer of large producer batches pays for most (benches/README.md, share groups).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::future::join_all;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::ShareFetchResponse;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::share_common::{admit_member, check_batches, share_code};
use super::RequestContext;
use crate::codec::share_fetch::{self, ShareFetchRequest};
use crate::codec::Capped;
use crate::coordinator::share::records::StateKey;
use crate::coordinator::share::session::{SessionStep, ShareSessions};
use crate::coordinator::share::store::{self, PartitionDone, PartitionWork};
use crate::coordinator::share::{ShareConfig, ShareError};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = share_fetch::MAX;

/// Acknowledgement batches by partition, as a request carries them.
pub type Acks = BTreeMap<(Uuid, i32), Vec<(i64, i64, Vec<i8>)>>;

pub async fn handle(ctx: &RequestContext, req: ShareFetchRequest) -> Capped<ShareFetchResponse> {
    Capped(answer(ctx, req).await)
}

/// Kafka's refusal of a renewing ShareFetch that would also fetch: every limit must be 0.
fn renew_limits_problem(req: &ShareFetchRequest) -> Option<String> {
    let mut problem = String::new();
    for (name, value) in [
        ("maxBytes", req.max_bytes),
        ("minBytes", req.min_bytes),
        ("maxRecords", req.max_records),
        ("maxWaitMs", req.max_wait_ms),
    ] {
        if value != 0 {
            problem.push_str(&format!("{name} must be set to 0, "));
        }
    }
    (!problem.is_empty()).then(|| format!("{problem}if isRenewAck is true."))
}

async fn answer(ctx: &RequestContext, req: ShareFetchRequest) -> ShareFetchResponse {
    let fail = |code: i16, msg: String| {
        ShareFetchResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(msg)))
    };
    let (group, member) = match admit_member(ctx, req.group_id.as_deref(), req.member_id.as_ref()) {
        Ok(ids) => ids,
        Err((code, message)) => return fail(code, message),
    };
    let renewing = ctx.version() >= 2 && req.is_renew_ack;
    if renewing {
        if let Some(problem) = renew_limits_problem(&req) {
            tracing::debug!(%problem, "renewing ShareFetch refused");
            return fail(ResponseError::InvalidRequest.code(), problem);
        }
    }
    let mut acks: Acks = BTreeMap::new();
    // Partitions whose acknowledgements were malformed: none of them is applied.
    let mut refused: BTreeMap<(Uuid, i32), ShareError> = BTreeMap::new();
    let mut added = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            let key = (t.topic_id, p.partition_index);
            added.push(key);
            if p.acknowledgement_batches.is_empty() {
                continue;
            }
            let batches: Vec<_> = p
                .acknowledgement_batches
                .iter()
                .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                .collect();
            match check_batches(&batches, ctx.version(), req.is_renew_ack) {
                Ok(()) => {
                    acks.insert(key, batches);
                }
                Err(e) => {
                    refused.insert(key, e);
                }
            }
        }
    }
    let forgotten: Vec<(Uuid, i32)> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    let step = match ShareSessions::here().step(
        &group,
        &member,
        req.share_session_epoch,
        &added,
        &forgotten,
    ) {
        Ok(s) => s,
        Err(e) => return fail(share_code(&e), e.to_string()),
    };
    let cfg = ShareConfig::of(ctx.ctx(), &group);
    let (mut fetch, close) = match step {
        SessionStep::Fetch(parts) => (parts, Vec::new()),
        SessionStep::Close(parts) => (Default::default(), parts.into_iter().collect()),
    };
    if renewing {
        fetch.clear();
    }
    // Forgotten partitions give back what the member holds there, as Kafka's do.
    let mut releases: Vec<(Uuid, i32)> = forgotten;
    releases.extend(close);
    let max_records = usize::try_from(req.max_records.max(1)).unwrap_or(500);
    // v1 has no mode and means Kafka's default, batch-optimized.
    let whole_batches = req.share_acquire_mode != share_fetch::ACQUIRE_RECORD_LIMIT;
    let max_bytes = usize::try_from(req.max_bytes)
        .unwrap_or(0)
        .clamp(1, 64 << 20);
    let mut targets: Vec<(Uuid, i32)> = fetch.iter().copied().collect();
    for k in acks.keys().chain(releases.iter()).chain(refused.keys()) {
        if !targets.contains(k) {
            targets.push(*k);
        }
    }
    let deadline = tokio::time::Instant::now()
        + Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0));
    let mut first = true;
    let mut results: BTreeMap<(Uuid, i32), PartitionDone> = BTreeMap::new();
    loop {
        let work = targets.iter().map(|&(id, p)| {
            let acks = if first {
                acks.get(&(id, p)).cloned().unwrap_or_default()
            } else {
                Vec::new()
            };
            let release = first && releases.contains(&(id, p));
            let fetching = fetch.contains(&(id, p));
            run_partition(
                ctx,
                &group,
                &member,
                id,
                p,
                acks,
                release,
                fetching.then_some((max_records, max_bytes, whole_batches)),
                cfg,
            )
        });
        let round: Vec<((Uuid, i32), PartitionDone)> = join_all(work).await;
        let acquired = round.iter().any(|(_, d)| !d.acquired.is_empty());
        for (k, d) in round {
            // The acknowledgement outcome belongs to the first round.
            let entry = results.entry(k).or_default();
            if first {
                entry.ack_error = d.ack_error;
            }
            entry.error = d.error;
            entry.acquired = d.acquired;
            entry.records = d.records;
            entry.next_deadline = d.next_deadline;
            entry.high_watermark = d.high_watermark;
        }
        first = false;
        if acquired || fetch.is_empty() || tokio::time::Instant::now() >= deadline {
            break;
        }
        if !wait(&mut results, deadline).await {
            break;
        }
    }
    for (k, e) in refused {
        results.entry(k).or_default().ack_error = Some(e);
    }
    let mut topics: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
    let leader = LeaderIdAndEpoch::default()
        .with_leader_id(ctx.ctx().config.node_id)
        .with_leader_epoch(crate::shard::LEADER_EPOCH);
    for ((id, p), d) in results {
        let mut pd = PartitionData::default()
            .with_partition_index(p)
            .with_current_leader(leader.clone());
        if let Some(e) = &d.error {
            pd = pd
                .with_error_code(share_code(e))
                .with_error_message(Some(StrBytes::from_string(e.to_string())));
        }
        if let Some(e) = &d.ack_error {
            pd = pd
                .with_acknowledge_error_code(share_code(e))
                .with_acknowledge_error_message(Some(StrBytes::from_string(e.to_string())));
        }
        if fetch.contains(&(id, p)) {
            pd = pd
                .with_records(Some(concat(&d.records)))
                .with_acquired_records(
                    d.acquired
                        .iter()
                        .map(|&(f, l, c)| {
                            AcquiredRecords::default()
                                .with_first_offset(f)
                                .with_last_offset(l)
                                .with_delivery_count(c)
                        })
                        .collect(),
                );
        }
        topics.entry(id).or_default().push(pd);
    }
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(cfg.limits.lock_ms.clamp(0, i32::MAX as i64) as i32)
        .with_responses(
            topics
                .into_iter()
                .map(|(id, ps)| {
                    ShareFetchableTopicResponse::default()
                        .with_topic_id(id)
                        .with_partitions(ps)
                })
                .collect(),
        )
}

/// Waits for new records on any fetched partition, the next lock deadline, or `deadline`;
/// false when the deadline passed.
async fn wait(
    results: &mut BTreeMap<(Uuid, i32), PartitionDone>,
    deadline: tokio::time::Instant,
) -> bool {
    let now_ms = crate::now_ms();
    let lock_wake = results
        .values()
        .filter_map(|d| d.next_deadline)
        .min()
        .map(|ms| {
            tokio::time::Instant::now() + Duration::from_millis((ms - now_ms).max(0) as u64 + 1)
        });
    let wake = lock_wake.map_or(deadline, |w| w.min(deadline));
    let mut watches: Vec<_> = results
        .values_mut()
        .filter_map(|d| d.high_watermark.take())
        .collect();
    if watches.is_empty() {
        tokio::time::sleep_until(wake).await;
    } else {
        let changed = watches.iter_mut().map(|w| Box::pin(w.changed()));
        let _ = tokio::time::timeout_at(wake, futures::future::select_all(changed)).await;
    }
    tokio::time::Instant::now() < deadline
}

#[allow(clippy::too_many_arguments)]
async fn run_partition(
    ctx: &RequestContext,
    group: &str,
    member: &str,
    topic_id: Uuid,
    partition: i32,
    acks: Vec<(i64, i64, Vec<i8>)>,
    release: bool,
    fetch: Option<(usize, usize, bool)>,
    config: ShareConfig,
) -> ((Uuid, i32), PartitionDone) {
    let key = (topic_id, partition);
    let catalog = ctx.ctx().catalog.snapshot();
    let Some(topic) = catalog
        .by_id(&topic_id)
        .filter(|t| (0..t.partitions).contains(&partition))
    else {
        return (
            key,
            PartitionDone {
                error: Some(ShareError::UnknownTopicOrPartition),
                ..Default::default()
            },
        );
    };
    if !ctx
        .access()
        .allows(Operation::Read, ResourceType::Topic, &topic.name)
    {
        return (
            key,
            PartitionDone {
                error: Some(ShareError::UnknownTopicOrPartition),
                ..Default::default()
            },
        );
    }
    let (max_records, max_bytes, whole_batches) = fetch.unwrap_or((0, 0, false));
    let work = PartitionWork {
        key: StateKey {
            group_id: group.to_string(),
            topic_id,
            partition,
        },
        topic: topic.name.to_string(),
        member: member.to_string(),
        acks,
        max_records,
        whole_batches,
        max_bytes,
        release,
        config,
    };
    (key, store::on_partition(ctx.ctx(), work).await)
}

fn concat(chunks: &[Bytes]) -> Bytes {
    match chunks {
        [] => Bytes::new(),
        [one] => one.clone(),
        many => {
            let mut b = BytesMut::with_capacity(many.iter().map(Bytes::len).sum());
            for c in many {
                b.extend_from_slice(c);
            }
            b.freeze()
        }
    }
}
