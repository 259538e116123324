//! The transaction steps that cross nodes on a cluster, over Kafka's own inter-broker APIs on
//! the other node's inter-broker listener, authenticated as this broker
//! (`cluster::inter_broker`, as the follower fetchers reach leaders):
//!
//! - the coordinator's COMMIT/ABORT marker for a partition another node leads goes to that
//!   leader as WriteTxnMarkers (Kafka's `TransactionMarkerChannelManager`);
//! - a partition leader that is not the transaction's coordinator verifies a transactional
//!   batch with AddPartitionsToTxn v4 `verify_only` on the coordinator (KIP-890's
//!   `AddPartitionsToTxnManager`), or, for a Produce v12+ (KIP-890 part 2), adds the
//!   partition with the same request without `verify_only`.
//!
//! One connection per call: these are a few requests per transaction, not the data path.

use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TopicName,
    TransactionalId, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::TxnError;
use crate::kafka_conn::KafkaConn;
use crate::shard::frontend::TxnMarker;
use crate::shard::BrokerContext;

const TIMEOUT: Duration = Duration::from_secs(5);
const MAX_RESPONSE: usize = 1 << 20;
const WRITE_TXN_MARKERS_V: i16 = 1;
const ADD_PARTITIONS_V: i16 = 4;

/// Where a partition's leader is, when it is another node: `Ok(None)` = this node (or a
/// single node) leads it; `Err` = no leader now (retry later).
pub fn remote_leader(
    ctx: &BrokerContext,
    topic: &str,
    partition: i32,
) -> Result<Option<String>, String> {
    let Some(cluster) = ctx.cluster.get() else {
        return Ok(None);
    };
    let image = cluster.image();
    let Some(p) = image.partition(topic, partition) else {
        return Ok(None); // not in the image: the local lookup answers UNKNOWN_TOPIC
    };
    if p.leader == cluster.node_id {
        return Ok(None);
    }
    if p.leader < 0 {
        return Err(format!("{topic}-{partition} has no leader"));
    }
    cluster.inter_broker.address(&image, p.leader).map(Some)
}

/// A connection to the broker at `addr` (on the inter-broker listener), as this broker.
async fn connect(
    ctx: &BrokerContext,
    addr: &str,
    client_id: &'static str,
) -> Result<KafkaConn, String> {
    let cluster = ctx.cluster.get().ok_or("not a cluster")?;
    cluster
        .inter_broker
        .connect(addr, client_id, TIMEOUT, MAX_RESPONSE)
        .await
        .map_err(|e| e.to_string())
}

/// Writes `marker` on `topic`-`partition` through its leader at `addr`.
pub async fn write_marker(
    ctx: &BrokerContext,
    addr: &str,
    topic: &str,
    partition: i32,
    marker: TxnMarker,
) -> Result<(), String> {
    let mut conn = connect(ctx, addr, "strom-txn-coordinator").await?;
    let req = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(marker.producer_id))
        .with_producer_epoch(marker.producer_epoch)
        .with_transaction_result(marker.commit)
        .with_coordinator_epoch(marker.coordinator_epoch)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_indexes(vec![partition])])]);
    let resp: WriteTxnMarkersResponse = conn
        .call(ApiKey::WriteTxnMarkers, WRITE_TXN_MARKERS_V, &req, TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    let code = resp
        .markers
        .iter()
        .flat_map(|m| &m.topics)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index == partition)
        .map(|p| p.error_code)
        .ok_or("the leader did not answer for the partition")?;
    match code {
        0 => Ok(()),
        c => Err(format!("the leader answered error code {c}")),
    }
}

/// Asks the coordinator at `addr` whether `topic`-`partition` is in the producer's ongoing
/// transaction at `epoch` (`verify_only`), or to add it there (KIP-890 part 2's implicit
/// add of a Produce v12+); the coordinator's error code for the partition, 0 when it is in
/// the transaction now (`refusal` says what another code stands for).
pub async fn verify(
    ctx: &BrokerContext,
    addr: &str,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    (topic, partition): (&str, i32),
    verify_only: bool,
) -> Result<i16, String> {
    let mut conn = connect(ctx, addr, "strom-txn-verifier").await?;
    let req = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_string(),
            )))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_verify_only(verify_only)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![partition])]),
    ]);
    let resp: AddPartitionsToTxnResponse = conn
        .call(ApiKey::AddPartitionsToTxn, ADD_PARTITIONS_V, &req, TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    if resp.error_code != 0 {
        return Ok(partition_code_of_top_level(resp.error_code));
    }
    let code = resp
        .results_by_transaction
        .iter()
        .flat_map(|t| &t.topic_results)
        .flat_map(|t| &t.results_by_partition)
        .find(|p| p.partition_index == partition)
        .map(|p| p.partition_error_code)
        .ok_or("the coordinator did not answer for the partition")?;
    Ok(code)
}

/// A top-level AddPartitionsToTxn error stands for every partition of the request, as in
/// Kafka's `AddPartitionsToTxnManager`, except CLUSTER_AUTHORIZATION_FAILED: this broker may
/// not ask, which says nothing about the producer, so the partition is taken as not in the
/// transaction (INVALID_TXN_STATE).
fn partition_code_of_top_level(code: i16) -> i16 {
    use kafka_protocol::error::ResponseError as R;
    if code == R::ClusterAuthorizationFailed.code() {
        R::InvalidTxnState.code()
    } else {
        code
    }
}

/// What a remote coordinator's error code for a partition in `verify` stands for on this
/// node (`None`: 0, the partition is in the transaction). The codes are those
/// AddPartitionsToTxn answers from `TxnError` (`handlers::errors::txn_code`); a coordinator
/// that no longer coordinates the id is COORDINATOR_NOT_AVAILABLE here, not NOT_COORDINATOR:
/// the request's own coordinator (a group's, say) is not the one that moved, so the client
/// should retry rather than look its coordinator up again.
pub fn refusal(code: i16) -> Option<TxnError> {
    use kafka_protocol::error::ResponseError as R;
    let e = match R::try_from_code(code)? {
        R::InvalidProducerEpoch | R::ProducerFenced => TxnError::ProducerFenced,
        R::InvalidProducerIdMapping => TxnError::InvalidProducerIdMapping,
        R::ConcurrentTransactions => TxnError::ConcurrentTransactions,
        R::CoordinatorLoadInProgress => TxnError::CoordinatorLoadInProgress,
        R::NotCoordinator | R::CoordinatorNotAvailable => TxnError::CoordinatorNotAvailable,
        R::UnknownTopicOrPartition => TxnError::UnknownTopicOrPartition,
        R::InvalidTxnState => TxnError::InvalidTxnState(
            "the partition is not in the transaction (its coordinator says)".into(),
        ),
        other => TxnError::InvalidTxnState(format!(
            "the transaction coordinator answered {}",
            other.code()
        )),
    };
    Some(e)
}

/// The inter-broker address of the node that coordinates `transactional_id` on a cluster (the
/// leader of its `__transaction_state` partition), when it is another node.
pub fn remote_coordinator(ctx: &BrokerContext, transactional_id: &str) -> Option<String> {
    let partitions = ctx.catalog.snapshot().get(super::TXN_TOPIC)?.partitions;
    let p = super::txn_partition(transactional_id, partitions);
    remote_leader(ctx, super::TXN_TOPIC, p).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_a_top_level_error_then_it_stands_for_the_partition_but_authorization_is_invalid_state()
    {
        use kafka_protocol::error::ResponseError as R;
        let code = |e: R| partition_code_of_top_level(e.code());
        assert_eq!(
            code(R::ClusterAuthorizationFailed),
            R::InvalidTxnState.code()
        );
        assert_eq!(
            code(R::CoordinatorLoadInProgress),
            R::CoordinatorLoadInProgress.code()
        );
        assert_eq!(code(R::NotCoordinator), R::NotCoordinator.code());
    }

    #[test]
    fn given_remote_coordinator_codes_when_mapped_then_the_error_this_node_answers_with() {
        use kafka_protocol::error::ResponseError as R;
        assert_eq!(refusal(0), None, "in the transaction");
        let table = [
            (R::ProducerFenced, TxnError::ProducerFenced),
            (R::InvalidProducerEpoch, TxnError::ProducerFenced),
            (
                R::InvalidProducerIdMapping,
                TxnError::InvalidProducerIdMapping,
            ),
            (R::ConcurrentTransactions, TxnError::ConcurrentTransactions),
            (
                R::CoordinatorLoadInProgress,
                TxnError::CoordinatorLoadInProgress,
            ),
            // The other node's coordinator moved, not this one: retry, not look up again.
            (R::NotCoordinator, TxnError::CoordinatorNotAvailable),
            (
                R::CoordinatorNotAvailable,
                TxnError::CoordinatorNotAvailable,
            ),
            (
                R::UnknownTopicOrPartition,
                TxnError::UnknownTopicOrPartition,
            ),
        ];
        for (code, want) in table {
            assert_eq!(refusal(code.code()), Some(want), "{code:?}");
        }
        assert!(matches!(
            refusal(R::InvalidTxnState.code()),
            Some(TxnError::InvalidTxnState(_))
        ));
        assert!(matches!(refusal(-1), Some(TxnError::InvalidTxnState(_))));
    }
}
