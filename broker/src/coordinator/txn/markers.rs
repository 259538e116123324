//! The WriteTxnMarkers step of EndTxn, from the coordinator's side: a commit or abort control
//! batch on a partition of the transaction (on its home shard, through the partition layer),
//! and, for a `__consumer_offsets` partition, the group coordinator applying or discarding the
//! transaction's pending offsets once that marker is durable (Kafka's
//! `onTransactionCompleted`). On a cluster, a partition led by another node gets its marker
//! through that leader (`remote`).

use crate::coordinator::group::{GroupShard, OFFSETS_TOPIC};
use crate::shard::{frontend, home_shard, BrokerContext};

pub use crate::shard::frontend::{begin_txn_on_partition, write_txn_marker, TxnMarker};

/// Writes the marker of `producer_id`'s transaction to `topic`-`partition` and makes it take
/// effect there.
pub async fn write(
    ctx: &BrokerContext,
    topic: &str,
    partition: i32,
    marker: TxnMarker,
) -> Result<(), frontend::FrontendError> {
    let (producer_id, commit) = (marker.producer_id, marker.commit);
    // On a cluster the partition's leader writes it (and, for `__consumer_offsets`, its
    // group coordinator applies the offsets there).
    let remote = |why: String| frontend::FrontendError::Remote(topic.to_string(), partition, why);
    if let Some(addr) = super::remote::remote_leader(ctx, topic, partition).map_err(remote)? {
        return super::remote::write_marker(ctx, &addr, topic, partition, marker)
            .await
            .map_err(remote);
    }
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
