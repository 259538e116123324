//! Coordinators follow the leadership of their internal partitions on a cluster (Kafka's
//! `GroupCoordinator.onElection` / `onResignation` and the transaction coordinator's
//! equivalents): a node coordinates the keys of the `__consumer_offsets` and
//! `__transaction_state` partitions it leads.
//!
//! - `epoch` is the check every coordinator request makes on the partition's home shard: led
//!   elsewhere → NOT_COORDINATOR (the client looks the coordinator up again); led here but the
//!   replica manager has not given the partition its leader role at the image's epoch yet →
//!   COORDINATOR_LOAD_IN_PROGRESS (retriable); otherwise the epoch, and the partition is
//!   (re)loaded at it.
//! - `follow` runs on every shard: when the image changes it loads the partitions this node
//!   has just been elected for (so pending transactions are completed and timed-out ones
//!   aborted without waiting for a client) and unloads those it no longer leads.
//!
//! A single node has no cluster: `epoch` is `Ok(None)` and nothing here runs.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::group::Groups;
use super::txn::Txns;
use super::Coordinator;
use crate::partition::replica::Role;
use crate::shard::{frontend, home_shard, BrokerContext, ShardState};

/// The leader epoch at which this node coordinates partition `p` of `C`'s topic (`None` on a
/// single node), or why it does not.
pub fn epoch<C: Coordinator>(state: &ShardState, p: i32) -> Result<Option<i32>, C::Error> {
    let Some(cluster) = state.ctx.cluster.get() else {
        return Ok(None);
    };
    let image = cluster.image();
    let record = image
        .partition(C::TOPIC, p)
        .ok_or_else(C::load_in_progress)?;
    if record.leader != cluster.node_id {
        return Err(C::not_coordinator());
    }
    if !record.replicated() {
        // One replica: no role to wait for, the image is the whole truth.
        return Ok(Some(record.leader_epoch));
    }
    match state.partition(C::TOPIC, p).map(|part| part.role()) {
        Some(Role::Leader { epoch, .. }) if epoch == record.leader_epoch => Ok(Some(epoch)),
        _ => Err(C::load_in_progress()),
    }
}

/// Starts `follow` on every shard (clustered only; from any thread).
pub async fn start_on_shards(ctx: Arc<BrokerContext>) {
    for shard in 0..ctx.shard_count() {
        let started = frontend::invoke_on(&ctx, shard, |state| async move {
            tokio::task::spawn_local(follow(state));
        })
        .await;
        if let Err(e) = started {
            tracing::warn!(shard, error = %e, "coordinator leadership not followed");
        }
    }
}

/// How often leadership is looked at without a new metadata entry (the replica manager sets
/// roles a moment after the entry is applied).
const RECHECK: Duration = Duration::from_millis(250);

async fn follow(state: Rc<ShardState>) {
    let cluster = loop {
        if let Some(c) = state.ctx.cluster.get() {
            break c.clone();
        }
        tokio::time::sleep(RECHECK).await;
    };
    let mut applied = cluster.watch_materialized();
    loop {
        step::<Groups>(&state);
        step::<Txns>(&state);
        tokio::select! {
            r = applied.changed() => if r.is_err() { return },
            _ = tokio::time::sleep(RECHECK) => {}
        }
    }
}

/// One look at `C`'s partitions homed on this shard: unload the resigned, load the elected.
fn step<C: Coordinator>(state: &Rc<ShardState>) {
    let Some(meta) = state.ctx.catalog.snapshot().get(C::TOPIC).cloned() else {
        return;
    };
    let loaded = C::loaded_partitions(state);
    for &(p, at) in &loaded {
        match epoch::<C>(state, p) {
            Ok(e) if e == at => {}
            Ok(_) => {} // re-elected at a new epoch: reloaded below
            Err(_) => {
                tracing::info!(
                    topic = C::TOPIC,
                    partition = p,
                    "no longer the coordinator: unloading"
                );
                C::unload(state, p);
            }
        }
    }
    let shards = state.ctx.shard_count();
    for p in (0..meta.partitions).filter(|p| home_shard(C::TOPIC, *p, shards) == state.id) {
        let Ok(e) = epoch::<C>(state, p) else {
            continue;
        };
        if loaded.contains(&(p, e)) {
            continue;
        }
        match C::loaded(state, p, e) {
            Ok(_) => tracing::info!(
                topic = C::TOPIC,
                partition = p,
                epoch = ?e,
                "elected coordinator: loaded"
            ),
            Err(e) => tracing::warn!(
                topic = C::TOPIC,
                partition = p,
                error = %e,
                "loading a coordinator partition failed"
            ),
        }
    }
}
