//! The WriteTxnMarkers step of EndTxn, from the coordinator's side: a commit or abort control
//! batch on a partition of the transaction (on its home shard, through the partition layer),
//! and, for a `__consumer_offsets` partition, the group coordinator applying or discarding the
//! transaction's pending offsets once that marker is durable (Kafka's
//! `onTransactionCompleted`).

use crate::group::{GroupShard, OFFSETS_TOPIC};
use crate::shard::{frontend, home_shard, BrokerContext};

pub use shim::{begin_txn_on_partition, write_txn_marker, TxnMarker};

/// Writes the marker of `producer_id`'s transaction to `topic`-`partition` and makes it take
/// effect there.
pub async fn write(
    ctx: &BrokerContext,
    topic: &str,
    partition: i32,
    marker: TxnMarker,
) -> Result<(), frontend::FrontendError> {
    let (producer_id, commit) = (marker.producer_id, marker.commit);
    write_txn_marker(ctx, topic, partition, marker).await?;
    if topic == OFFSETS_TOPIC {
        let shard = home_shard(OFFSETS_TOPIC, partition, ctx.shard_count());
        frontend::invoke_on(ctx, shard, move |state| async move {
            GroupShard::of(&state).complete_txn(partition, producer_id, commit);
        })
        .await?;
    }
    Ok(())
}

/// Temporary stand-in for the partition side's `shard::frontend::write_txn_marker` and
/// `begin_txn_on_partition` (issue 3, partition half), with the same signatures; replaced by
/// a re-export when that lands.
mod shim {
    use std::sync::Arc;

    use bytes::{BufMut, BytesMut};
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    use crate::shard::frontend::{invoke_on, FrontendError};
    use crate::shard::{home_shard, BrokerContext};

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct TxnMarker {
        pub producer_id: i64,
        pub producer_epoch: i16,
        pub coordinator_epoch: i32,
        pub commit: bool,
    }

    pub async fn write_txn_marker(
        ctx: &BrokerContext,
        topic: &str,
        partition: i32,
        marker: TxnMarker,
    ) -> Result<i64, FrontendError> {
        let topic: Arc<str> = Arc::from(topic);
        let shard = home_shard(&topic, partition, ctx.shard_count());
        invoke_on(ctx, shard, move |state| async move {
            let p = state
                .partition(&topic, partition)
                .ok_or_else(|| FrontendError::UnknownPartition(topic.to_string(), partition))?;
            let now = crate::now_ms();
            let mut key = BytesMut::new();
            key.put_i16(0);
            key.put_i16(marker.commit as i16);
            let mut value = BytesMut::new();
            value.put_i16(0);
            value.put_i32(marker.coordinator_epoch);
            let record = Record {
                transactional: true,
                control: true,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: marker.producer_id,
                producer_epoch: marker.producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: 0,
                sequence: -1,
                timestamp: now,
                key: Some(key.freeze()),
                value: Some(value.freeze()),
                headers: Default::default(),
            };
            let mut buf = BytesMut::new();
            RecordBatchEncoder::encode(
                &mut buf,
                &[record],
                &RecordEncodeOptions {
                    version: 2,
                    compression: Compression::None,
                },
            )
            .map_err(|e| FrontendError::Offline(topic.to_string(), partition, e.to_string()))?;
            let bytes = buf.freeze();
            let header =
                storage::batch::validate_batches(&bytes).map_err(storage::StorageError::from)?[0];
            Ok(p.append(header, bytes, -1, now).await?.base_offset)
        })
        .await?
    }

    pub async fn begin_txn_on_partition(
        _ctx: &BrokerContext,
        _topic: &str,
        _partition: i32,
        _producer_id: i64,
        _producer_epoch: i16,
    ) -> Result<(), FrontendError> {
        Ok(())
    }
}
