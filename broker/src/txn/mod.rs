//! Transaction coordinator: transactional producers' ids and epochs, the transactions they
//! open and how they end (Kafka's `TransactionCoordinator`).
//!
//! Data flow: a transactional request arrives on any shard → `on_coordinator` hashes the
//! transactional id to a `__transaction_state` partition exactly as Kafka does
//! (`abs(transactionalId.hashCode()) % transaction.state.log.num.partitions`) and runs the work
//! on that partition's home shard, where the id's state lives in a `TxnShard` (one per shard,
//! thread-local). Decisions are the pure state machine in `txn_stm`; every state change is
//! appended to `__transaction_state` (Kafka's `TransactionLogKey`/`Value`, acks=all) before it
//! is installed or answered. EndTxn persists PrepareCommit/PrepareAbort, answers, then writes
//! a commit/abort control batch to every partition of the transaction on their home shards
//! (`markers`, concurrently) and persists CompleteCommit/CompleteAbort. A shard reloads its
//! coordinator partitions at start and finishes what was prepared; a per-shard timer aborts
//! transactions open longer than their timeout.

pub mod coordinator;
pub mod markers;
pub mod records;
pub mod txn_stm;

use std::future::Future;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;

use crate::coordinator_log::CoordinatorLogError;
use crate::handlers::RequestContext;
use crate::shard::{frontend, home_shard};
pub use coordinator::TxnShard;

pub const TXN_TOPIC: &str = "__transaction_state";
/// Kafka's `transaction.state.log.segment.bytes` default.
const TXN_SEGMENT_BYTES: &str = "104857600";

/// Everything a transaction operation can fail with; `error_code` turns it into Kafka's code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("transaction timeout {0} ms is not in 1..=transaction.max.timeout.ms")]
    InvalidTransactionTimeout(i32),
    #[error("there is a newer producer with the same transactional id (fenced)")]
    ProducerFenced,
    #[error("the producer id does not match the transactional id's")]
    InvalidProducerIdMapping,
    #[error("a transaction of this transactional id is being completed; retry")]
    ConcurrentTransactions,
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(String),
    #[error("the transaction coordinator is not available")]
    CoordinatorNotAvailable,
    #[error("the transaction coordinator is loading its state")]
    CoordinatorLoadInProgress,
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("the transactional id is not known to the coordinator")]
    TransactionalIdNotFound,
    #[error(transparent)]
    Log(#[from] CoordinatorLogError),
    #[error("cannot allocate a producer id: {0}")]
    ProducerIds(String),
}

/// The one place transaction failures become Kafka error codes. Clients before
/// `fenced_since` (the first version of the API that knows PRODUCER_FENCED) get
/// INVALID_PRODUCER_EPOCH instead, as Kafka answers them.
pub fn error_code(e: &TxnError, version: i16, fenced_since: i16) -> i16 {
    use TxnError as T;
    let r = match e {
        T::InvalidRequest(_) => ResponseError::InvalidRequest,
        T::InvalidTransactionTimeout(_) => ResponseError::InvalidTransactionTimeout,
        T::ProducerFenced if version < fenced_since => ResponseError::InvalidProducerEpoch,
        T::ProducerFenced => ResponseError::ProducerFenced,
        T::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        T::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        T::InvalidTxnState(_) => ResponseError::InvalidTxnState,
        T::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        T::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        T::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        T::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
        // A failed write to __transaction_state: Kafka answers NOT_COORDINATOR (or
        // COORDINATOR_NOT_AVAILABLE), both of which make the client look up and retry.
        T::Log(_) => ResponseError::NotCoordinator,
        T::ProducerIds(_) => ResponseError::CoordinatorNotAvailable,
    };
    r.code()
}

/// Kafka's `partitionFor(transactionalId)`: the same hash as group placement.
pub fn txn_partition(transactional_id: &str, partitions: i32) -> i32 {
    crate::group::offsets_partition(transactional_id, partitions)
}

/// Creates `__transaction_state` on first use and returns its partition count.
pub async fn ensure_txn_topic(ctx: &RequestContext) -> Result<i32, TxnError> {
    let n = ctx.ctx().config.transaction_state_log_num_partitions;
    Ok(crate::coordinator_log::ensure_topic(ctx, TXN_TOPIC, n, TXN_SEGMENT_BYTES).await?)
}

/// Runs `f` on the shard that coordinates `transactional_id`, with its partition loaded.
pub async fn on_coordinator<R, F, Fut>(
    ctx: &RequestContext,
    transactional_id: &str,
    f: F,
) -> Result<R, TxnError>
where
    F: FnOnce(Rc<TxnShard>, i32) -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, TxnError>> + 'static,
    R: Send + 'static,
{
    if transactional_id.is_empty() {
        return Err(TxnError::InvalidRequest(
            "the transactional id is empty".into(),
        ));
    }
    let partitions = ensure_txn_topic(ctx).await?;
    let p = txn_partition(transactional_id, partitions);
    let broker = ctx.ctx();
    let shard = home_shard(TXN_TOPIC, p, broker.shard_count());
    frontend::invoke_on(broker, shard, move |state| async move {
        let txns = TxnShard::of(&state);
        txns.ensure_loaded(p)?;
        f(txns, p).await
    })
    .await
    .map_err(|_| TxnError::CoordinatorNotAvailable)?
}

/// Runs `f` on every shard that is home to a `__transaction_state` partition (List and
/// Describe over all ids), with those partitions loaded.
pub async fn on_every_shard<R, F, Fut>(ctx: &RequestContext, f: F) -> Result<Vec<R>, TxnError>
where
    F: Fn(Rc<TxnShard>) -> Fut + Send + Clone + 'static,
    Fut: Future<Output = R> + 'static,
    R: Send + 'static,
{
    let partitions = ensure_txn_topic(ctx).await?;
    let broker = ctx.ctx();
    let mut out = Vec::new();
    for shard in 0..broker.shard_count() {
        let owned: Vec<i32> = (0..partitions)
            .filter(|p| home_shard(TXN_TOPIC, *p, broker.shard_count()) == shard)
            .collect();
        if owned.is_empty() {
            continue;
        }
        let f = f.clone();
        let r = frontend::invoke_on(broker, shard, move |state| async move {
            let txns = TxnShard::of(&state);
            for p in owned {
                txns.ensure_loaded(p)?;
            }
            Ok::<R, TxnError>(f(txns).await)
        })
        .await
        .map_err(|_| TxnError::CoordinatorNotAvailable)??;
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_each_txn_error_when_mapping_then_kafka_code() {
        use TxnError as T;
        let table: &[(T, i16)] = &[
            (T::InvalidRequest("x".into()), 42),
            (T::InvalidTransactionTimeout(0), 50),
            (T::ProducerFenced, 90),
            (T::InvalidProducerIdMapping, 49),
            (T::ConcurrentTransactions, 51),
            (T::InvalidTxnState("x".into()), 48),
            (T::CoordinatorNotAvailable, 15),
            (T::CoordinatorLoadInProgress, 14),
            (T::UnknownTopicOrPartition, 3),
            (T::TransactionalIdNotFound, 105),
            (T::Log(CoordinatorLogError::Append("x".into())), 16),
            (T::ProducerIds("x".into()), 15),
        ];
        for (e, code) in table {
            assert_eq!(error_code(e, 5, 2), *code, "{e:?}");
        }
        // Old clients do not know PRODUCER_FENCED: INVALID_PRODUCER_EPOCH.
        assert_eq!(error_code(&T::ProducerFenced, 1, 2), 47);
    }

    #[test]
    fn given_transactional_ids_when_placing_then_kafka_partition() {
        // "hello".hashCode() = 99162322.
        assert_eq!(txn_partition("hello", 50), 99162322 % 50);
        assert_eq!(txn_partition("polygenelubricants", 50), 0);
    }
}
