//! InitProducerId (key 22). Without a transactional id: a fresh producer id with epoch 0 for
//! an idempotent producer. With one: the transaction coordinator of that id hands out its
//! producer id with a bumped epoch, fencing older producers of the same id and aborting their
//! open transaction first (`txn::TxnShard::init_producer_id`). v3+ carries KIP-360's current
//! producer id and epoch of a producer recovering from an error.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::RequestContext;
use crate::coordinator::txn::{self, TxnError};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 5;
/// The first version whose clients understand PRODUCER_FENCED (KIP-588).
const FENCED_SINCE: i16 = 4;

fn answer(r: Result<(i64, i16), i16>) -> InitProducerIdResponse {
    let (code, (pid, epoch)) = match r {
        Ok(ids) => (0, ids),
        Err(code) => (code, (-1, -1)),
    };
    InitProducerIdResponse::default()
        .with_error_code(code)
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
}

/// Authorization (Kafka's `handleInitProducerIdRequest`): WRITE on the transactional id
/// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one, IDEMPOTENT_WRITE on the cluster or
/// WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED).
pub async fn handle(ctx: &RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let access = ctx.access();
    let refused = match req.transactional_id.as_deref() {
        Some(tid) => (!access.allows(Operation::Write, ResourceType::TransactionalId, tid))
            .then_some(ResponseError::TransactionalIdAuthorizationFailed),
        None => (!access.allows_cluster(Operation::IdempotentWrite)
            && !access.allows_any(Operation::Write, ResourceType::Topic))
        .then_some(ResponseError::ClusterAuthorizationFailed),
    };
    if let Some(e) = refused {
        return answer(Err(e.code()));
    }
    let Some(tid) = req.transactional_id.as_ref().map(|t| t.to_string()) else {
        let ids = &ctx.ctx().producer_ids;
        let broker = ctx.ctx();
        let cluster = broker.cluster.get().map(|c| c.as_ref());
        if let Err(e) = ids.ready(cluster, broker.config.node_id).await {
            // A cluster without a quorum cannot hand out a block: the client retries.
            tracing::warn!(error = %e, "no producer id block");
            return answer(Err(ResponseError::CoordinatorNotAvailable.code()));
        }
        return answer(ids.next().map(|id| (id, 0)).map_err(|e| {
            tracing::error!(error = %e, "cannot persist producer id block");
            ResponseError::UnknownServerError.code()
        }));
    };
    let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
    let expected = match (pid, epoch) {
        (-1, -1) => None,
        (-1, _) | (_, -1) => {
            let e = TxnError::InvalidRequest("producer id and epoch must both be set".into());
            return answer(Err(super::errors::txn_code(
                &e,
                ctx.version(),
                FENCED_SINCE,
            )));
        }
        ids => Some(ids),
    };
    let timeout = req.transaction_timeout_ms;
    let id = tid.clone();
    let r = txn::on_coordinator(ctx.ctx(), &tid, move |txns, _| async move {
        txns.init_producer_id(&id, timeout, expected).await
    })
    .await;
    answer(r.map_err(|e| {
        tracing::debug!(transactional_id = %tid, error = %e, "InitProducerId failed");
        super::errors::txn_code(&e, ctx.version(), FENCED_SINCE)
    }))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use kafka_protocol::messages::{ApiKey, TransactionalId};
    use kafka_protocol::protocol::StrBytes;

    fn init(
        h: &Harness,
        version: i16,
        tid: &str,
        timeout: i32,
        ids: (i64, i16),
    ) -> InitProducerIdResponse {
        h.call(
            ApiKey::InitProducerId,
            version,
            InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(StrBytes::from_string(tid.into()))))
                .with_transaction_timeout_ms(timeout)
                .with_producer_id(ProducerId(ids.0))
                .with_producer_epoch(ids.1),
        )
    }

    #[test]
    fn given_idempotent_producers_when_initialising_then_distinct_ids_epoch_zero() {
        let h = Harness::new();
        let a: InitProducerIdResponse = h.call(
            ApiKey::InitProducerId,
            4,
            InitProducerIdRequest::default().with_transactional_id(None),
        );
        let b: InitProducerIdResponse = h.call(
            ApiKey::InitProducerId,
            4,
            InitProducerIdRequest::default().with_transactional_id(None),
        );
        assert_eq!((a.error_code, a.producer_epoch), (0, 0));
        assert_ne!(a.producer_id, b.producer_id);
    }

    #[test]
    fn given_transactional_id_when_initialising_twice_then_same_id_and_epoch_bumped() {
        let h = Harness::new();
        let a = init(&h, 5, "tx", 60_000, (-1, -1));
        assert_eq!((a.error_code, a.producer_epoch), (0, 0));
        let b = init(&h, 5, "tx", 60_000, (-1, -1));
        assert_eq!(
            (b.error_code, b.producer_id, b.producer_epoch),
            (0, a.producer_id, 1)
        );
        // KIP-360: the producer of epoch 0 was fenced by the second one.
        let c = init(&h, 5, "tx", 60_000, (a.producer_id.0, 0));
        assert_eq!(c.error_code, ResponseError::ProducerFenced.code());
        // Before v4 clients get INVALID_PRODUCER_EPOCH for that (v3 has the fields).
        let d = init(&h, 3, "tx", 60_000, (a.producer_id.0, 0));
        assert_eq!(d.error_code, ResponseError::InvalidProducerEpoch.code());
        // The current producer recovering bumps its own epoch.
        let e = init(&h, 5, "tx", 60_000, (a.producer_id.0, 1));
        assert_eq!((e.error_code, e.producer_epoch), (0, 2));
    }

    #[test]
    fn given_bad_timeouts_or_ids_when_initialising_then_kafka_errors() {
        let h = Harness::new();
        for timeout in [0, -5, 900_001] {
            let r = init(&h, 4, "tx", timeout, (-1, -1));
            assert_eq!(
                r.error_code,
                ResponseError::InvalidTransactionTimeout.code(),
                "{timeout}"
            );
        }
        let r = init(&h, 4, "", 1000, (-1, -1));
        assert_eq!(r.error_code, ResponseError::InvalidRequest.code());
        let r = init(&h, 4, "tx", 1000, (5, -1));
        assert_eq!(r.error_code, ResponseError::InvalidRequest.code());
    }
}
