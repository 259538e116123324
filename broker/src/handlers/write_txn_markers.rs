//! WriteTxnMarkers (key 27): the transaction coordinator's request to write COMMIT/ABORT
//! markers into the partitions of a transaction. Strom's own coordinator calls
//! `frontend::write_txn_marker` directly; this handler serves the same step over the wire
//! (Kafka's inter-broker API, also used by admin tooling), one marker per partition, all
//! partitions concurrently, each fdatasync'd before the response.

use futures::future::join_all;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use super::RequestContext;
use crate::partition::producer_state::SequenceError;
use crate::partition::txn::TxnError;
use crate::partition::PartitionError;
use crate::shard::frontend::{self, FrontendError, TxnMarker};

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = 1;

/// The one place marker failures become Kafka error codes.
pub fn error_code(e: &FrontendError) -> i16 {
    match e {
        FrontendError::UnknownPartition(..) => ResponseError::UnknownTopicOrPartition.code(),
        FrontendError::ShardGone(_) => ResponseError::NotLeaderOrFollower.code(),
        FrontendError::Offline(..) | FrontendError::Storage(_) => {
            ResponseError::KafkaStorageError.code()
        }
        FrontendError::Partition(p) => match p {
            PartitionError::Txn(TxnError::InvalidProducerEpoch { .. })
            | PartitionError::Sequence(SequenceError::InvalidProducerEpoch { .. }) => {
                ResponseError::InvalidProducerEpoch.code()
            }
            PartitionError::Txn(TxnError::CoordinatorFenced { .. }) => {
                ResponseError::TransactionCoordinatorFenced.code()
            }
            PartitionError::Txn(_) => ResponseError::InvalidTxnState.code(),
            PartitionError::Storage(_) => ResponseError::KafkaStorageError.code(),
            _ => ResponseError::UnknownServerError.code(),
        },
    }
}

pub async fn handle(ctx: &RequestContext, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    let broker = ctx.ctx();
    let catalog = broker.catalog.snapshot();
    let mut markers = Vec::with_capacity(req.markers.len());
    for m in req.markers {
        let marker = TxnMarker {
            producer_id: m.producer_id.0,
            producer_epoch: m.producer_epoch,
            coordinator_epoch: m.coordinator_epoch,
            commit: m.transaction_result,
        };
        let mut topics = Vec::with_capacity(m.topics.len());
        for t in m.topics {
            let meta = catalog.get(t.name.as_str()).cloned();
            let writes = t.partition_indexes.iter().map(|&p| {
                let meta = meta.clone();
                async move {
                    let code = match meta {
                        Some(meta) if p >= 0 && p < meta.partitions => {
                            match frontend::write_txn_marker(broker, &meta.name, p, marker).await {
                                Ok(_) => 0,
                                Err(e) => {
                                    tracing::info!(topic = %meta.name, partition = p, error = %e, "transaction marker refused");
                                    error_code(&e)
                                }
                            }
                        }
                        _ => ResponseError::UnknownTopicOrPartition.code(),
                    };
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                }
            });
            let partitions = join_all(writes).await;
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(partitions),
            );
        }
        markers.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(markers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_each_error_when_mapping_then_table_of_kafka_codes() {
        let txn = |e: TxnError| FrontendError::Partition(PartitionError::Txn(e));
        let table: Vec<(FrontendError, i16)> = vec![
            (FrontendError::UnknownPartition("t".into(), 0), 3),
            (FrontendError::ShardGone(1), 6),
            (FrontendError::Offline("t".into(), 0, "x".into()), 56),
            (
                txn(TxnError::InvalidProducerEpoch {
                    producer_id: 1,
                    epoch: 0,
                    current: 1,
                    offset: 0,
                }),
                47,
            ),
            (
                txn(TxnError::CoordinatorFenced {
                    producer_id: 1,
                    epoch: 0,
                    current: 1,
                    offset: 0,
                }),
                52,
            ),
            (
                txn(TxnError::NotAddedToTxn {
                    producer_id: 1,
                    epoch: 0,
                }),
                48,
            ),
            (
                FrontendError::Partition(PartitionError::InvalidRecord("x".into())),
                -1,
            ),
        ];
        for (e, code) in table {
            assert_eq!(error_code(&e), code, "{e}");
        }
    }
}
