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
pub mod remote;
pub mod txn_stm;

use std::future::Future;
use std::rc::Rc;

use crate::config::BrokerConfig;
use crate::coordinator::log::CoordinatorLogError;
use crate::coordinator::Coordinator;
use crate::shard::{BrokerContext, ShardState};
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
    #[error("this broker is not the transactional id's coordinator")]
    NotCoordinator,
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("the transactional id is not known to the coordinator")]
    TransactionalIdNotFound,
    #[error(transparent)]
    Log(#[from] CoordinatorLogError),
    #[error("cannot allocate a producer id: {0}")]
    ProducerIds(String),
}

/// The transaction coordinator's place in the coordinator pattern (`crate::coordinator`).
pub struct Txns;

impl Coordinator for Txns {
    const TOPIC: &'static str = TXN_TOPIC;
    const SEGMENT_BYTES: &'static str = TXN_SEGMENT_BYTES;
    type Shard = TxnShard;
    type Error = TxnError;

    fn partitions(config: &BrokerConfig) -> i32 {
        config.transaction_state_log_num_partitions
    }
    fn replication(config: &BrokerConfig) -> (i16, Option<i32>) {
        (
            config.transaction_state_log_replication_factor,
            Some(config.transaction_state_log_min_isr),
        )
    }
    fn loaded(
        state: &Rc<ShardState>,
        p: i32,
        epoch: Option<i32>,
    ) -> Result<Rc<TxnShard>, TxnError> {
        let txns = TxnShard::of(state);
        txns.ensure_loaded_at(p, epoch)?;
        Ok(txns)
    }
    fn unload(state: &Rc<ShardState>, p: i32) {
        TxnShard::of(state).unload(p);
    }
    fn loaded_partitions(state: &Rc<ShardState>) -> Vec<(i32, Option<i32>)> {
        TxnShard::of(state).loaded_partitions()
    }
    fn loaded_shard(state: &Rc<ShardState>) -> Rc<TxnShard> {
        TxnShard::of(state)
    }
    fn unavailable() -> TxnError {
        TxnError::CoordinatorNotAvailable
    }
    fn not_coordinator() -> TxnError {
        TxnError::NotCoordinator
    }
    fn load_in_progress() -> TxnError {
        TxnError::CoordinatorLoadInProgress
    }
}

/// Kafka's `partitionFor(transactionalId)`: the same hash as group placement.
pub fn txn_partition(transactional_id: &str, partitions: i32) -> i32 {
    crate::coordinator::partition_for(transactional_id, partitions)
}

/// Creates `__transaction_state` on first use and returns its partition count.
pub async fn ensure_txn_topic(broker: &BrokerContext) -> Result<i32, TxnError> {
    crate::coordinator::ensure_topic::<Txns>(broker).await
}

/// Runs `f` on the shard that coordinates `transactional_id`, with its partition loaded.
pub async fn on_coordinator<R, F, Fut>(
    broker: &BrokerContext,
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
    crate::coordinator::on_coordinator::<Txns, R, F, Fut>(broker, transactional_id, f).await
}

/// Runs `f` on every shard that is home to a `__transaction_state` partition (List and
/// Describe over all ids), with those partitions loaded.
pub async fn on_every_shard<R, F, Fut>(broker: &BrokerContext, f: F) -> Result<Vec<R>, TxnError>
where
    F: Fn(Rc<TxnShard>) -> Fut + Send + Clone + 'static,
    Fut: Future<Output = R> + 'static,
    R: Send + 'static,
{
    crate::coordinator::on_every_shard::<Txns, R, F, Fut>(broker, f).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_transactional_ids_when_placing_then_kafka_partition() {
        // "hello".hashCode() = 99162322.
        assert_eq!(txn_partition("hello", 50), 99162322 % 50);
        assert_eq!(txn_partition("polygenelubricants", 50), 0);
    }
}
