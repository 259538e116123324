//! Produce-time transaction verification (KIP-890): a transactional batch reached a partition
//! that holds no guard for its transaction, so its leader asks the transaction coordinator,
//! and Kafka's translation of what the coordinator said into the produce answer.

use kafka_protocol::error::ResponseError;

use super::RequestContext;
use crate::coordinator::txn::TxnError;
use crate::shard::frontend;

/// Why a batch was not verified.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Unverified {
    /// The partition is not in the producer's transaction: the partition's own refusal
    /// (INVALID_TXN_STATE, "Partition was not added to the transaction") stands.
    NotAdded,
    /// Another answer for the partition: its code and message.
    Refused(i16, String),
}

/// Kafka's translation (`ReplicaManager`, "translate transaction coordinator errors to known
/// producer response errors") of the coordinator's `code` for the partition into the produce
/// answer. A coordinator that cannot be reached, is loading or moved becomes
/// NOT_ENOUGH_REPLICAS, which every client retries without a metadata refresh: an abortable
/// INVALID_TXN_STATE there made the client abort a transaction that only had to wait out a
/// coordinator failover (and librdkafka's abort path then hung on a decommissioned broker,
/// librdkafka#5511). A TV2 producer (Produce v12+) gets CONCURRENT_TRANSACTIONS as it is.
pub(super) fn translate(code: i16, version: i16) -> Unverified {
    use ResponseError as R;
    let Some(e) = R::try_from_code(code) else {
        return Unverified::Refused(code, format!("transaction verification failed ({code})"));
    };
    let underlying = match e {
        R::NetworkException
        | R::CoordinatorLoadInProgress
        | R::CoordinatorNotAvailable
        | R::NotCoordinator => true,
        R::ConcurrentTransactions => version < IMPLICIT_ADD_SINCE,
        _ => false,
    };
    if underlying {
        return Unverified::Refused(
            R::NotEnoughReplicas.code(),
            format!(
                "Unable to verify the partition has been added to the transaction. Underlying error: {e:?}"
            ),
        );
    }
    match e {
        R::InvalidTxnState | R::ClusterAuthorizationFailed => Unverified::NotAdded,
        R::TransactionAbortable if version < IMPLICIT_ADD_SINCE => Unverified::NotAdded,
        R::ProducerFenced | R::InvalidProducerEpoch => Unverified::Refused(
            R::InvalidProducerEpoch.code(),
            "the producer's epoch is fenced by a newer one".into(),
        ),
        other => Unverified::Refused(code, format!("transaction verification failed: {other:?}")),
    }
}

fn translate_local(e: &TxnError, version: i16) -> Unverified {
    translate(crate::handlers::errors::txn_code(e, 0, 0), version)
}

/// The first Produce version of KIP-890 part 2 (transaction.version 2): the partition's
/// leader adds the partition to the transaction itself; the client sends no
/// AddPartitionsToTxn (Kafka's `transactionSupportedOperation = addPartition` above v11).
pub(super) const IMPLICIT_ADD_SINCE: i16 = 12;
/// How long an implicit add waits for the producer's previous transaction to complete.
const CONCURRENT_RETRY: std::time::Duration = std::time::Duration::from_secs(2);

/// Kafka's produce-time verification (KIP-890 part 1, `AddPartitionsToTxnManager`): a
/// transactional batch reached a partition that holds no guard for its transaction. The
/// coordinator pushes that guard when AddPartitionsToTxn adds the partition, but a restarted
/// broker has lost it while the transaction lives on in `__transaction_state`; so the
/// partition's leader asks the coordinator, as Kafka's always does, and re-arms the guard when
/// the partition is in the producer's ongoing transaction at that epoch. With `add` (Produce
/// v12+, KIP-890 part 2) it asks the coordinator to add the partition instead, which also
/// starts the transaction if this is its first partition.
pub(super) async fn with_coordinator(
    ctx: &RequestContext,
    version: i16,
    transactional_id: &str,
    topic: &str,
    partition: i32,
    (producer_id, epoch): (i64, i16),
) -> Result<(), Unverified> {
    let add = version >= IMPLICIT_ADD_SINCE;
    if let Some(addr) =
        crate::coordinator::txn::remote::remote_coordinator(ctx.ctx(), transactional_id)
    {
        // On a cluster the coordinator may be another node: ask it over the wire.
        let verified = crate::coordinator::txn::remote::verify(
            ctx.ctx(),
            &addr,
            transactional_id,
            (producer_id, epoch),
            (topic, partition),
            !add,
        )
        .await;
        match verified {
            Ok(0) => {}
            Ok(code) => return Err(translate(code, version)),
            Err(e) => {
                // Kafka's AddPartitionsToTxnManager: a disconnect or timeout is
                // NETWORK_EXCEPTION, which the translation makes retriable. (A top-level
                // error in the answer comes back as the partition's code, `Ok` above.)
                tracing::debug!(topic, partition, error = %e, "verifying with a remote coordinator failed");
                return Err(translate(ResponseError::NetworkException.code(), version));
            }
        }
        return rearm(ctx, topic, partition, producer_id, epoch).await;
    }
    let (id, t) = (transactional_id.to_string(), topic.to_string());
    if add {
        // The coordinator pushes the guard to the partition itself once the add is durable.
        // A TV2 producer begins its next transaction as soon as EndTxn answers, while the
        // coordinator may still be writing the last one's markers (CONCURRENT_TRANSACTIONS
        // until they are done): the add is retried here, briefly, rather than fail a batch
        // the producer could not have sent later.
        let deadline = std::time::Instant::now() + CONCURRENT_RETRY;
        loop {
            let (id, t) = (id.clone(), t.clone());
            let added = crate::coordinator::txn::on_coordinator(
                ctx.ctx(),
                transactional_id,
                move |txns, _| async move {
                    txns.add_partitions(&id, producer_id, epoch, vec![(t, partition)])
                        .await
                },
            )
            .await;
            match added {
                Err(TxnError::ConcurrentTransactions) if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                Err(e) => {
                    tracing::debug!(topic, partition, error = %e, "adding the partition to the transaction failed");
                    return Err(translate_local(&e, version));
                }
                Ok(()) => return Ok(()),
            }
        }
    }
    let verified = crate::coordinator::txn::on_coordinator(
        ctx.ctx(),
        transactional_id,
        move |txns, _| async move { txns.verify(&id, producer_id, epoch, &[(t, partition)]) },
    )
    .await;
    match verified.as_deref() {
        Ok([true]) => rearm(ctx, topic, partition, producer_id, epoch).await,
        Ok(_) => Err(Unverified::NotAdded),
        Err(e) => Err(translate_local(e, version)),
    }
}

/// Re-arms the partition's guard for a transaction its coordinator confirmed.
async fn rearm(
    ctx: &RequestContext,
    topic: &str,
    partition: i32,
    producer_id: i64,
    epoch: i16,
) -> Result<(), Unverified> {
    frontend::begin_txn_on_partition(ctx.ctx(), topic, partition, producer_id, epoch)
        .await
        .map_err(|e| {
            tracing::debug!(topic, partition, error = %e, "re-arming a verified transaction failed");
            Unverified::Refused(crate::handlers::errors::frontend_code(&e), e.to_string())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::error::ResponseError as R;

    fn code(u: Unverified) -> Option<i16> {
        match u {
            Unverified::NotAdded => None,
            Unverified::Refused(c, _) => Some(c),
        }
    }

    #[test]
    fn given_coordinator_answers_when_translated_then_kafkas_produce_errors() {
        let ner = Some(R::NotEnoughReplicas.code());
        for v in [9, 11, 12] {
            for e in [
                R::NetworkException,
                R::CoordinatorLoadInProgress,
                R::CoordinatorNotAvailable,
                R::NotCoordinator,
            ] {
                assert_eq!(code(translate(e.code(), v)), ner, "{e:?} v{v}");
            }
            assert_eq!(
                translate(R::InvalidTxnState.code(), v),
                Unverified::NotAdded
            );
            assert_eq!(
                translate(R::ClusterAuthorizationFailed.code(), v),
                Unverified::NotAdded
            );
            assert_eq!(
                code(translate(R::ProducerFenced.code(), v)),
                Some(R::InvalidProducerEpoch.code())
            );
        }
        assert_eq!(code(translate(R::ConcurrentTransactions.code(), 11)), ner);
        assert_eq!(
            code(translate(R::ConcurrentTransactions.code(), 12)),
            Some(R::ConcurrentTransactions.code()),
            "TV2 producers get CONCURRENT_TRANSACTIONS as it is"
        );
        assert_eq!(
            translate(R::TransactionAbortable.code(), 11),
            Unverified::NotAdded
        );
        assert_eq!(
            code(translate(R::TransactionAbortable.code(), 12)),
            Some(R::TransactionAbortable.code())
        );
    }
}
