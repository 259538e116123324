//! AddOffsetsToTxn (key 25): adds the group's `__consumer_offsets` partition to the
//! transaction, so the offsets the producer then commits with TxnOffsetCommit are part of it
//! (and get its commit or abort marker).

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use kafka_protocol::error::ResponseError;

use super::RequestContext;
use crate::coordinator::group::{self, OFFSETS_TOPIC};
use crate::coordinator::txn::{self, TxnError};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 4;
/// The first version whose clients understand PRODUCER_FENCED (KIP-588).
const FENCED_SINCE: i16 = 2;

/// Authorization (Kafka's `handleAddOffsetsToTxnRequest`): WRITE on the transactional id
/// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group
/// (GROUP_AUTHORIZATION_FAILED).
pub async fn handle(ctx: &RequestContext, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse {
    let access = ctx.access();
    let tid_ok = access.allows(
        Operation::Write,
        ResourceType::TransactionalId,
        &req.transactional_id,
    );
    if !tid_ok {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    if !access.allows(Operation::Read, ResourceType::Group, &req.group_id) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let r = async {
        let partitions = group::ensure_offsets_topic(ctx.ctx())
            .await
            .map_err(|_| TxnError::CoordinatorNotAvailable)?;
        let p = group::offsets_partition(req.group_id.as_str(), partitions);
        let tid = req.transactional_id.to_string();
        let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
        let id = tid.clone();
        txn::on_coordinator(ctx.ctx(), &tid, move |txns, _| async move {
            txns.add_partitions(&id, pid, epoch, vec![(OFFSETS_TOPIC.to_string(), p)])
                .await
        })
        .await
    }
    .await;
    let code = match r {
        Ok(()) => 0,
        Err(e) => {
            tracing::debug!(error = %e, "AddOffsetsToTxn failed");
            super::errors::txn_code(&e, ctx.version(), FENCED_SINCE)
        }
    };
    AddOffsetsToTxnResponse::default().with_error_code(code)
}
