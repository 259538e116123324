//! Coordinators: the group coordinator (`group/`) and the transaction coordinator (`txn/`).
//!
//! Both follow one pattern, written once here: a key (group id, transactional id) hashes to a
//! partition of an internal compacted topic exactly as Kafka places it
//! (`abs(key.hashCode()) % partitions`); the key's state lives on that partition's home shard
//! in a per-shard table (thread-local, no locks), loaded from the topic's log (`log`) the
//! first time the shard touches the partition; every change is appended to the log with
//! acks=all before it is answered. `on_coordinator` runs a closure there.
//!
//! On a cluster (`leadership`), a node coordinates the keys of the internal partitions it
//! leads, as Kafka's `onElection` / `onResignation`: it loads a partition when it becomes its
//! leader (at each new leader epoch, replaying the replicated log), unloads it when it stops
//! leading, answers NOT_COORDINATOR for the others, and its appends wait for the ISR.
//!
//! Coordinators work on the broker context and the shard frontend, never on handlers:
//! handlers call into them and map their errors to Kafka codes (`handlers::errors`).

pub mod group;
pub mod leadership;
pub mod log;
pub mod share;
pub mod txn;

use std::future::Future;
use std::rc::Rc;

use crate::config::BrokerConfig;
use crate::shard::{frontend, home_shard, BrokerContext, ShardState};
use log::CoordinatorLogError;

/// What a coordinator tells this module about itself.
pub trait Coordinator: 'static {
    /// Its internal topic (`__consumer_offsets`, `__transaction_state`).
    const TOPIC: &'static str;
    /// The topic's `segment.bytes` (Kafka's `offsets.topic.segment.bytes` and
    /// `transaction.state.log.segment.bytes` default: small, the topic is compacted).
    const SEGMENT_BYTES: &'static str;
    /// The per-shard state (`GroupShard`, `TxnShard`).
    type Shard: 'static;
    type Error: From<CoordinatorLogError> + std::fmt::Display + Send + 'static;

    fn partitions(config: &BrokerConfig) -> i32;
    /// On a cluster: the topic's replication factor and the `min.insync.replicas` it is
    /// created with (`None`: the broker's).
    fn replication(config: &BrokerConfig) -> (i16, Option<i32>);
    /// This shard's state with coordinator partition `p` loaded from its log; `epoch` is the
    /// leader epoch this node leads it at (`None` on a single node). A partition loaded at
    /// another epoch is unloaded and loaded again: it may have been led elsewhere meanwhile.
    fn loaded(
        state: &Rc<ShardState>,
        p: i32,
        epoch: Option<i32>,
    ) -> Result<Rc<Self::Shard>, Self::Error>;
    /// Forgets partition `p`'s keys (this node no longer leads it).
    fn unload(state: &Rc<ShardState>, p: i32);
    /// The partitions of this shard that are loaded, with the epoch they were loaded at.
    fn loaded_partitions(state: &Rc<ShardState>) -> Vec<(i32, Option<i32>)>;
    /// This shard's state without loading anything.
    fn loaded_shard(state: &Rc<ShardState>) -> Rc<Self::Shard>;
    /// The shard could not be reached (stopping).
    fn unavailable() -> Self::Error;
    /// Another node leads the key's partition (NOT_COORDINATOR).
    fn not_coordinator() -> Self::Error;
    /// This node leads it but has not taken the role yet (COORDINATOR_LOAD_IN_PROGRESS).
    fn load_in_progress() -> Self::Error;
}

/// Java's `String.hashCode` (over UTF-16 code units), which Kafka uses to place groups and
/// transactional ids.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// Kafka's `partitionFor(key)`: `Utils.abs(hashCode) % partitions` (abs maps MIN to 0).
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    let h = java_string_hash(key);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

/// Creates the coordinator's topic on first use and returns its partition count.
pub async fn ensure_topic<C: Coordinator>(broker: &BrokerContext) -> Result<i32, C::Error> {
    let n = C::partitions(&broker.config);
    let (rf, min_isr) = C::replication(&broker.config);
    Ok(log::ensure_topic(broker, C::TOPIC, n, C::SEGMENT_BYTES, rf, min_isr).await?)
}

/// Runs `f` on the shard that coordinates `key`, with its partition loaded.
pub async fn on_coordinator<C, R, F, Fut>(
    broker: &BrokerContext,
    key: &str,
    f: F,
) -> Result<R, C::Error>
where
    C: Coordinator,
    F: FnOnce(Rc<C::Shard>, i32) -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, C::Error>> + 'static,
    R: Send + 'static,
{
    let partitions = ensure_topic::<C>(broker).await?;
    on_partition::<C, R, F, Fut>(broker, partition_for(key, partitions), f).await
}

/// Runs `f` on the home shard of coordinator partition `p`, with it loaded.
pub async fn on_partition<C, R, F, Fut>(broker: &BrokerContext, p: i32, f: F) -> Result<R, C::Error>
where
    C: Coordinator,
    F: FnOnce(Rc<C::Shard>, i32) -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, C::Error>> + 'static,
    R: Send + 'static,
{
    let shard = home_shard(C::TOPIC, p, broker.shard_count());
    frontend::invoke_on(broker, shard, move |state| async move {
        let epoch = leadership::epoch::<C>(&state, p)?;
        let table = C::loaded(&state, p, epoch)?;
        f(table, p).await
    })
    .await
    .map_err(|_| C::unavailable())?
}

/// Runs `f` once on every shard that is home to a coordinator partition, with those
/// partitions loaded (ListGroups, ListTransactions).
pub async fn on_every_shard<C, R, F, Fut>(broker: &BrokerContext, f: F) -> Result<Vec<R>, C::Error>
where
    C: Coordinator,
    F: Fn(Rc<C::Shard>) -> Fut + Send + Clone + 'static,
    Fut: Future<Output = R> + 'static,
    R: Send + 'static,
{
    let partitions = ensure_topic::<C>(broker).await?;
    let shards = broker.shard_count();
    let mut out = Vec::new();
    for shard in 0..shards {
        let owned: Vec<i32> = (0..partitions)
            .filter(|p| home_shard(C::TOPIC, *p, shards) == shard)
            .collect();
        if owned.is_empty() {
            continue;
        }
        let f = f.clone();
        let r = frontend::invoke_on(broker, shard, move |state| async move {
            // Only the partitions this node coordinates (all of them on a single node).
            let mut table = None;
            for p in owned {
                if let Ok(epoch) = leadership::epoch::<C>(&state, p) {
                    table = Some(C::loaded(&state, p, epoch)?);
                }
            }
            let table = match table {
                Some(t) => t,
                None => C::loaded_shard(&state),
            };
            Ok::<R, C::Error>(f(table).await)
        })
        .await
        .map_err(|_| C::unavailable())??;
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_keys_when_hashing_then_matches_java_string_hash_code() {
        // Java's values: "".hashCode() = 0, "a" = 97, "hello" = 99162322, and
        // "polygenelubricants" is the well-known string hashing to Integer.MIN_VALUE.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99162322);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("hello", 50), 99162322 % 50);
        // A negative hash is made positive before the modulo.
        let h = java_string_hash("console-consumer-12345");
        assert_eq!(partition_for("console-consumer-12345", 50), h.abs() % 50);
    }
}
