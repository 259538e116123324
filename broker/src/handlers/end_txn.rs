//! EndTxn (key 26): commit or abort the producer's transaction. Answered once the decision
//! (PrepareCommit/PrepareAbort) is durable; the markers follow in the background. v5+ is
//! KIP-890 part 2: the epoch is bumped with every transaction and returned.

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

use super::RequestContext;
use crate::coordinator::txn;
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 5;
/// The first version whose clients understand PRODUCER_FENCED (KIP-588).
const FENCED_SINCE: i16 = 2;
/// The first version of KIP-890's epoch bump per transaction.
const BUMP_SINCE: i16 = 5;

/// Authorization (Kafka's `handleEndTxnRequest`): WRITE on the transactional id
/// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
pub async fn handle(ctx: &RequestContext, req: EndTxnRequest) -> EndTxnResponse {
    let tid = req.transactional_id.to_string();
    if !ctx
        .access()
        .allows(Operation::Write, ResourceType::TransactionalId, &tid)
    {
        return EndTxnResponse::default().with_error_code(
            kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed.code(),
        );
    }
    let (pid, epoch, commit) = (req.producer_id.0, req.producer_epoch, req.committed);
    let bump = ctx.version() >= BUMP_SINCE;
    let id = tid.clone();
    let r = txn::on_coordinator(ctx.ctx(), &tid, move |txns, _| async move {
        txns.end_txn(&id, pid, epoch, commit, bump).await
    })
    .await;
    match r {
        Ok((pid, epoch)) => EndTxnResponse::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch),
        Err(e) => {
            tracing::debug!(transactional_id = %tid, error = %e, "EndTxn failed");
            EndTxnResponse::default()
                .with_error_code(super::errors::txn_code(&e, ctx.version(), FENCED_SINCE))
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        }
    }
}
