//! Broker liveness, as KRaft's controller keeps it: every node heartbeats the Raft leader
//! over the peer port; the Raft leader fences a broker not heard from for `SESSION_TIMEOUT`
//! (its partitions get new leaders from their ISR, `image::fence_in`) and unfences it when
//! it heartbeats again. A node whose heartbeats go unanswered for that long (or, as Raft
//! leader, without a quorum ack) knows it is in a minority: `quorum` turns false and its
//! replicated partitions refuse acks=all. So does a node whose metadata lags the leader's
//! (just restarted, its image may still name it leader of partitions that moved on): it is
//! in the quorum again once it has applied what the leader had applied a heartbeat ago.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::image::{Command, Elected, ElectionType, MetadataImage, Outcome};
pub use super::liveness::{Liveness, SESSION_TIMEOUT};
use super::network::{PeerClient, PeerRequest, PeerResponse};
use super::types::{NodeId, Raft};

const HEARTBEAT: Duration = Duration::from_millis(500);

/// Asks a quorum to confirm this node's leadership (openraft sends a heartbeat round); an
/// isolated leader times out. (openraft's `millis_since_quorum_ack` metric is a snapshot
/// from the last metrics change, so it does not age on its own.)
async fn confirm_leadership(raft: &Raft) -> bool {
    matches!(
        tokio::time::timeout(HEARTBEAT, raft.ensure_linearizable()).await,
        Ok(Ok(_))
    )
}

/// Heartbeats the Raft leader every `HEARTBEAT` and keeps `quorum` current.
pub async fn heartbeat(raft: Raft, me: i32, quorum: Arc<AtomicBool>, liveness: Arc<Liveness>) {
    let mut last_ok: Option<Instant> = None;
    let mut peer: Option<(NodeId, PeerClient)> = None;
    // The leader's applied index at the last answered heartbeat (none yet: not caught up).
    let mut leader_applied = u64::MAX;
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        // The session runs from when the heartbeat left, not from its answer: the leader
        // counts its `SESSION_TIMEOUT` from when the heartbeat arrived, which is later, so
        // this node lets go of the quorum before the leader can fence it and elect others
        // (a slow link's delay would otherwise leave two nodes leading a partition for it).
        let sent = Instant::now();
        let m = raft.metrics().borrow().clone();
        let ok = match m.current_leader {
            Some(l) if l == me as NodeId => {
                liveness.saw(me);
                let ok = confirm_leadership(&raft).await;
                liveness.confirmed.store(ok, Ordering::Relaxed);
                ok
            }
            Some(l) => {
                liveness.confirmed.store(false, Ordering::Relaxed);
                if peer.as_ref().is_none_or(|(id, _)| *id != l) {
                    peer = m
                        .membership_config
                        .membership()
                        .get_node(&l)
                        .and_then(|n| n.addr.parse().ok())
                        .map(|addr| (l, PeerClient::new(addr)));
                }
                let answer = match peer.as_mut() {
                    Some((_, client)) => {
                        client
                            .call(&PeerRequest::Heartbeat(me), HEARTBEAT * 2)
                            .await
                    }
                    None => Err(std::io::ErrorKind::NotConnected.into()),
                };
                match answer {
                    Ok(PeerResponse::Heartbeat(Some(theirs))) => {
                        let mine = raft.metrics().borrow().last_applied.map_or(0, |l| l.index);
                        let caught_up = mine >= leader_applied;
                        leader_applied = theirs;
                        caught_up
                    }
                    _ => {
                        leader_applied = u64::MAX;
                        false
                    }
                }
            }
            None => {
                liveness.confirmed.store(false, Ordering::Relaxed);
                false
            }
        };
        if ok {
            last_ok = Some(sent);
        }
        let fresh = last_ok.is_some_and(|t| t.elapsed() < SESSION_TIMEOUT);
        if quorum.swap(fresh, Ordering::Relaxed) != fresh {
            tracing::info!(in_quorum = fresh, "metadata quorum contact changed");
        }
    }
}

/// On the Raft leader only: fences brokers whose session expired, unfences returning ones.
pub async fn fence(
    raft: Raft,
    me: NodeId,
    image: Arc<RwLock<Arc<MetadataImage>>>,
    liveness: Arc<Liveness>,
) {
    let mut leading = false;
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        let leader = raft.metrics().borrow().current_leader == Some(me);
        let image = image.read().expect("image lock").clone();
        if !leader {
            leading = false;
            continue;
        }
        if !leading {
            leading = true;
            liveness.grant_all(image.brokers.keys().copied());
            continue;
        }
        for &id in image.brokers.keys() {
            let alive = liveness.alive(id);
            let cmd = match (alive, image.fenced.contains(&id)) {
                (false, false) => Command::FenceBroker { id },
                // A broker in controlled shutdown still heartbeats until it stops; it comes
                // back by registering again.
                (true, true) if !image.shutting_down.contains(&id) => Command::UnfenceBroker { id },
                _ => continue,
            };
            tracing::info!(broker = id, fenced = !alive, "broker session changed");
            if let Err(e) = raft.client_write(cmd).await {
                tracing::info!(broker = id, error = %e, "cannot change the broker's session");
            }
        }
    }
}

/// Kafka's `maxElectionsPerImbalance`: preferred elections in one metadata entry.
const MAX_ELECTIONS_PER_ROUND: usize = 1000;

/// On the Raft leader only, every `interval` (`leader.imbalance.check.interval.seconds`): gives
/// partitions back to their preferred replica where it is in sync and live
/// (`auto.leader.rebalance.enable`, Kafka's `maybeBalancePartitionLeaders`), so leadership
/// spreads over the nodes again after restarts moved it away.
pub async fn rebalance(
    raft: Raft,
    me: NodeId,
    image: Arc<RwLock<Arc<MetadataImage>>>,
    interval: Duration,
) {
    loop {
        tokio::time::sleep(interval).await;
        if raft.metrics().borrow().current_leader != Some(me) {
            continue;
        }
        loop {
            let partitions = image
                .read()
                .expect("image lock")
                .imbalanced(MAX_ELECTIONS_PER_ROUND);
            let (count, more) = (
                partitions.len(),
                partitions.len() == MAX_ELECTIONS_PER_ROUND,
            );
            if count == 0 {
                break;
            }
            let cmd = Command::ElectLeaders {
                election: ElectionType::Preferred,
                partitions,
            };
            match raft.client_write(cmd).await {
                Ok(r) => {
                    let done = match &r.data {
                        Outcome::Elections(v) => v.iter().filter(|e| **e == Elected::Done).count(),
                        _ => 0,
                    };
                    tracing::info!(
                        imbalanced = count,
                        elected = done,
                        "preferred leaders back (auto.leader.rebalance.enable)"
                    );
                }
                Err(e) => {
                    tracing::info!(error = %e, "cannot rebalance leaders now");
                    break;
                }
            }
            if !more {
                break;
            }
        }
    }
}
