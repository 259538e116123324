//! TxnOffsetCommit (key 28): offsets committed inside a transaction. The group coordinator
//! first checks with the transaction coordinator that the group's `__consumer_offsets`
//! partition is in the producer's transaction (AddOffsetsToTxn came first; from v5, KIP-890
//! part 2, the request adds it itself), then writes the
//! offsets into that partition as transactional records (acks=all). They stay pending, visible
//! to no OffsetFetch, until the transaction's marker: applied on commit, dropped on abort.

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::commit_plan::CommitPlan;
use kafka_protocol::error::ResponseError;

use super::RequestContext;
use crate::coordinator::group::coordinator::CommitItem;
use crate::coordinator::group::{self, OFFSETS_TOPIC};
use crate::coordinator::log::TxnProducer;
use crate::coordinator::txn::{self, TxnError};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 5;
/// The first version whose clients understand PRODUCER_FENCED (KIP-588).
const FENCED_SINCE: i16 = 3;

/// The first version of KIP-890 part 2 (transaction.version 2): the request adds the group's
/// offsets partition to the transaction itself, as AddOffsetsToTxn did (Kafka's
/// `transactionSupportedOperation = addPartition` above v4).
const IMPLICIT_ADD_SINCE: i16 = 5;

/// Asks the transaction coordinator whether `__consumer_offsets`-`p` is in the transaction,
/// or (v5+) adds it there.
///
/// On a cluster that coordinator is the leader of the transactional id's
/// `__transaction_state` partition, which need not be this node, the leader of the group's
/// `__consumer_offsets` partition: the two move independently (a paused or cut-off node
/// loses both, and the controller elects their new leaders one by one). It is then asked
/// over the wire, as Kafka's group coordinator asks through its `AddPartitionsToTxnManager`.
/// Asking this node's own table instead answered NOT_COORDINATOR for as long as the two
/// leaders stayed apart, and the client, finding this node again as the group's
/// coordinator, retried into the same answer (the transactional worker of test_faults.py
/// stalled for minutes after SIGSTOP/SIGCONT of leaders).
async fn verify(
    ctx: &RequestContext,
    req: &TxnOffsetCommitRequest,
    p: i32,
) -> Result<(), TxnError> {
    let tid = req.transactional_id.to_string();
    let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
    let add = ctx.version() >= IMPLICIT_ADD_SINCE;
    if let Some(addr) = txn::remote::remote_coordinator(ctx.ctx(), &tid) {
        let offsets = (OFFSETS_TOPIC, p);
        let answer = txn::remote::verify(ctx.ctx(), &addr, &tid, (pid, epoch), offsets, !add);
        return match answer.await {
            Ok(code) => txn::remote::refusal(code).map_or(Ok(()), Err),
            Err(e) => {
                tracing::debug!(transactional_id = %tid, error = %e, "the transaction coordinator could not be asked");
                Err(TxnError::CoordinatorNotAvailable)
            }
        };
    }
    let id = tid.clone();
    if add {
        return txn::on_coordinator(ctx.ctx(), &tid, move |txns, _| async move {
            txns.add_partitions(&id, pid, epoch, vec![(OFFSETS_TOPIC.to_string(), p)])
                .await
        })
        .await;
    }
    let in_txn = txn::on_coordinator(ctx.ctx(), &tid, move |txns, _| async move {
        txns.verify(&id, pid, epoch, &[(OFFSETS_TOPIC.to_string(), p)])
    })
    .await?;
    if in_txn.first() == Some(&true) {
        Ok(())
    } else {
        Err(TxnError::InvalidTxnState(
            "the group's offsets partition is not in the transaction (AddOffsetsToTxn first)"
                .into(),
        ))
    }
}

pub async fn handle(ctx: &RequestContext, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse {
    let version = ctx.version();
    let catalog = ctx.ctx().catalog.snapshot();
    let requested = req.topics.iter().map(|t| {
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                let epoch = if version >= 2 {
                    p.committed_leader_epoch
                } else {
                    -1
                };
                let metadata = p.committed_metadata.as_ref().map(|s| s.to_string());
                (p.partition_index, p.committed_offset, epoch, metadata)
            })
            .collect();
        (t.name.as_str(), partitions)
    });
    // Kafka's order: WRITE on the transactional id, then READ on the group, then the topics.
    let access = ctx.access();
    let tid_ok = access.allows(
        Operation::Write,
        ResourceType::TransactionalId,
        &req.transactional_id,
    );
    let mut plan = if !tid_ok {
        let code = ResponseError::TransactionalIdAuthorizationFailed.code();
        CommitPlan::refused(requested, code)
    } else if !access.allows(Operation::Read, ResourceType::Group, &req.group_id) {
        CommitPlan::refused(requested, ResponseError::GroupAuthorizationFailed.code())
    } else {
        CommitPlan::new(&catalog, &access, requested)
    };
    let items = plan.take_items();
    let answers = if items.is_empty() {
        plan.answer([])
    } else {
        let codes = commit(ctx, &req, items).await;
        plan.answer(codes)
    };
    let topics = req
        .topics
        .into_iter()
        .zip(answers)
        .map(|(t, codes)| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(codes)
                        .map(|(p, code)| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// Error code per item, in order.
async fn commit(
    ctx: &RequestContext,
    req: &TxnOffsetCommitRequest,
    items: Vec<CommitItem>,
) -> Vec<i16> {
    let n = items.len();
    let partitions = match group::ensure_offsets_topic(ctx.ctx()).await {
        Ok(p) => p,
        Err(e) => return vec![super::errors::group_code(&e); n],
    };
    let group_id = req.group_id.to_string();
    if let Err(e) = verify(ctx, req, group::offsets_partition(&group_id, partitions)).await {
        tracing::debug!(group = %group_id, error = %e, "TxnOffsetCommit outside the transaction");
        return vec![super::errors::txn_code(&e, ctx.version(), FENCED_SINCE); n];
    }
    let txn = TxnProducer {
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
    };
    // v3+ carries the member and generation; older ones commit as a generation-less admin.
    let (member, instance, generation) = if ctx.version() >= 3 {
        (
            req.member_id.to_string(),
            req.group_instance_id.as_ref().map(|s| s.to_string()),
            req.generation_id,
        )
    } else {
        (String::new(), None, -1)
    };
    let gid = group_id.clone();
    let r = group::on_coordinator(ctx.ctx(), &group_id, move |gs, _| async move {
        gs.commit(
            &gid,
            &member,
            instance.as_deref(),
            generation,
            0,
            items,
            Some(txn),
        )
        .await
    })
    .await;
    match r {
        Ok(results) => results
            .into_iter()
            .map(|r| r.err().map(|e| super::errors::group_code(&e)).unwrap_or(0))
            .collect(),
        Err(e) => vec![super::errors::group_code(&e); n],
    }
}
