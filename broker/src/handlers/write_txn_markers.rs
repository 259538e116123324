//! WriteTxnMarkers (key 27): the transaction coordinator's request to write COMMIT/ABORT
//! markers into the partitions of a transaction. Strom's own coordinator calls
//! `frontend::write_txn_marker` directly; this handler serves the same step over the wire
//! (Kafka's inter-broker API, also used by admin tooling), one marker per partition, all
//! partitions concurrently, each fdatasync'd before the response. v2's transaction version
//! is read but not acted on: a TV2 marker (KIP-890 part 2) carries the bumped producer
//! epoch, which the partition's producer state accepts as any newer epoch's marker.

use futures::future::join_all;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersResponse};

use super::RequestContext;
use crate::codec::write_txn_markers::WriteTxnMarkersRequest;
use crate::codec::Capped;
use crate::security::acl::Operation;
use crate::shard::frontend::TxnMarker;

pub const MIN_VERSION: i16 = 1;
pub const MAX_VERSION: i16 = 2;

pub async fn handle(
    ctx: &RequestContext,
    req: WriteTxnMarkersRequest,
) -> Capped<WriteTxnMarkersResponse> {
    let broker = ctx.ctx();
    // Kafka's `handleWriteTxnMarkersRequest`: CLUSTER_ACTION (a broker's request), else every
    // partition is CLUSTER_AUTHORIZATION_FAILED.
    let cluster_action = ctx.access().allows_cluster(Operation::ClusterAction);
    let catalog = broker.catalog.snapshot();
    let mut markers = Vec::with_capacity(req.markers.len());
    for m in req.markers {
        let marker = TxnMarker {
            producer_id: m.producer_id,
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
                        _ if !cluster_action => ResponseError::ClusterAuthorizationFailed.code(),
                        Some(meta) if p >= 0 && p < meta.partitions => {
                            // The same path as the coordinator's own markers: on __consumer_offsets the
                            // marker also applies or drops the transaction's pending offsets.
                            match crate::coordinator::txn::markers::write(broker, &meta.name, p, marker).await {
                                Ok(_) => 0,
                                Err(e) => {
                                    tracing::info!(topic = %meta.name, partition = p, error = %e, "transaction marker refused");
                                    super::errors::frontend_code(&e)
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
                    .with_name(TopicName(t.name))
                    .with_partitions(partitions),
            );
        }
        markers.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(ProducerId(m.producer_id))
                .with_topics(topics),
        );
    }
    Capped(WriteTxnMarkersResponse::default().with_markers(markers))
}
