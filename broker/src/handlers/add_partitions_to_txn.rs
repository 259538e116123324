//! AddPartitionsToTxn (key 24): partitions the producer is about to write transactionally.
//! v0–3 (clients) carry one transaction; v4+ (KIP-890 part 1, from brokers) batch several, and
//! `verify_only` asks whether the partitions are already in the transaction without adding.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use super::RequestContext;
use crate::coordinator::txn;
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 5;
/// The first version whose clients understand PRODUCER_FENCED (KIP-588).
const FENCED_SINCE: i16 = 2;
const BATCHED_SINCE: i16 = 4;

/// Per-partition error codes of one transaction, in request order.
type TopicCodes = Vec<(String, Vec<(i32, i16)>)>;

fn results(codes: TopicCodes) -> Vec<AddPartitionsToTxnTopicResult> {
    codes
        .into_iter()
        .map(|(name, parts)| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(kafka_protocol::protocol::StrBytes::from_string(name).into())
                .with_results_by_partition(
                    parts
                        .into_iter()
                        .map(|(p, code)| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

/// Adds (or verifies) one transaction's partitions. Unknown partitions fail with
/// UNKNOWN_TOPIC_OR_PARTITION and the others are not attempted, as Kafka answers.
///
/// Authorization (Kafka's `handleAddPartitionsToTxnRequest`): WRITE on the transactional id
/// (every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each topic
/// (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED).
async fn one(
    ctx: &RequestContext,
    tid: String,
    pid: i64,
    epoch: i16,
    verify_only: bool,
    topics: &[AddPartitionsToTxnTopic],
) -> TopicCodes {
    let catalog = ctx.ctx().catalog.snapshot();
    let access = ctx.access();
    let tid_ok = access.allows(Operation::Write, ResourceType::TransactionalId, &tid);
    let mut partitions = Vec::new();
    let mut unknown = false;
    for t in topics {
        let allowed = access.allows(Operation::Write, ResourceType::Topic, t.name.as_str());
        for p in &t.partitions {
            let known = catalog
                .get(t.name.as_str())
                .is_some_and(|m| (0..m.partitions).contains(p));
            // 0: may be added; else the partition's own error.
            let refusal = if !tid_ok {
                ResponseError::TransactionalIdAuthorizationFailed.code()
            } else if !allowed {
                ResponseError::TopicAuthorizationFailed.code()
            } else if !known {
                ResponseError::UnknownTopicOrPartition.code()
            } else {
                0
            };
            unknown |= refusal != 0;
            partitions.push((t.name.to_string(), *p, refusal));
        }
    }
    let shape = |code_of: &dyn Fn(usize, i16) -> i16| -> TopicCodes {
        let mut out: TopicCodes = Vec::new();
        for (i, (t, p, refusal)) in partitions.iter().enumerate() {
            let code = code_of(i, *refusal);
            match out.last_mut() {
                Some((last, ps)) if last == t => ps.push((*p, code)),
                _ => out.push((t.clone(), vec![(*p, code)])),
            }
        }
        out
    };
    if unknown {
        return shape(&|_, refusal| {
            if refusal == 0 {
                ResponseError::OperationNotAttempted.code()
            } else {
                refusal
            }
        });
    }
    let list: Vec<(String, i32)> = partitions.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
    let id = tid.clone();
    let r = txn::on_coordinator(ctx.ctx(), &tid, move |txns, _| async move {
        if verify_only {
            txns.verify(&id, pid, epoch, &list)
        } else {
            txns.add_partitions(&id, pid, epoch, list.clone())
                .await
                .map(|()| vec![true; list.len()])
        }
    })
    .await;
    match r {
        Ok(in_txn) => shape(&|i, _| {
            if in_txn[i] {
                0
            } else {
                ResponseError::InvalidTxnState.code()
            }
        }),
        Err(e) => {
            tracing::debug!(transactional_id = %tid, error = %e, "AddPartitionsToTxn failed");
            let code = super::errors::txn_code(&e, ctx.version(), FENCED_SINCE);
            shape(&|_, _| code)
        }
    }
}

pub async fn handle(
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if ctx.version() < BATCHED_SINCE {
        let codes = one(
            ctx,
            req.v3_and_below_transactional_id.to_string(),
            req.v3_and_below_producer_id.0,
            req.v3_and_below_producer_epoch,
            false,
            &req.v3_and_below_topics,
        )
        .await;
        return AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(results(codes));
    }
    // v4+ comes from brokers verifying a produce (KIP-890): CLUSTER_ACTION, else the whole
    // request is CLUSTER_AUTHORIZATION_FAILED.
    if !ctx.access().allows_cluster(Operation::ClusterAction) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let mut out = Vec::with_capacity(req.transactions.len());
    for t in &req.transactions {
        let AddPartitionsToTxnTransaction {
            transactional_id,
            producer_id,
            producer_epoch,
            verify_only,
            topics,
            ..
        } = t;
        let codes = one(
            ctx,
            transactional_id.to_string(),
            producer_id.0,
            *producer_epoch,
            *verify_only,
            topics,
        )
        .await;
        out.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(transactional_id.clone())
                .with_topic_results(results(codes)),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(out)
}
