//! The ISR arithmetic of `replica` on a real log: the leader's high watermark is the
//! minimum over the ISR and never moves back, a caught-up follower is proposed for the
//! ISR, acks=all waits for the ISR and fails without the quorum, and a follower appends at
//! the leader's offsets and epochs and truncates to an epoch boundary.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use storage::batch::BatchHeader;
use storage::{IoBackend, IoBackendKind, LogConfig, PartitionLog};

use super::Role;
use crate::config::dynamic::BrokerView;
use crate::config::effective::TopicSettings;
use crate::partition::{Partition, PartitionError};
use crate::test_support::TestBatch;

fn run<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&rt, f)
}

fn partition(dir: &std::path::Path) -> Rc<Partition> {
    partition_with(dir, &[])
}

/// A partition of a topic with these configs.
fn partition_with(dir: &std::path::Path, configs: &[(&str, &str)]) -> Rc<Partition> {
    let io = IoBackend::new(IoBackendKind::from_env()).unwrap();
    let log = PartitionLog::open(dir, "t", 0, LogConfig::default(), io, 0).unwrap();
    let view = BrokerView::from_static(Default::default(), BTreeMap::new());
    let overrides = configs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let settings = Arc::new(TopicSettings::resolve(&overrides, &view));
    Rc::new(Partition::new("t".into(), 0, log, settings, 0).unwrap())
}

fn leader(isr: &[i32], quorum: &Arc<AtomicBool>) -> Role {
    Role::Leader {
        me: 1,
        epoch: 3,
        isr: isr.to_vec(),
        replicas: vec![1, 2, 3],
        quorum: quorum.clone(),
    }
}

/// acks=all of the batches up to `end`, waiting in a task of its own.
fn acks_all(
    p: &Rc<Partition>,
    end: i64,
    min_isr: i32,
) -> tokio::task::JoinHandle<Result<(), PartitionError>> {
    let p = p.clone();
    tokio::task::spawn_local(async move {
        p.wait_replicated(end, min_isr, Duration::from_secs(10))
            .await
    })
}

async fn append(p: &Rc<Partition>, n: usize, acks: i16) -> Result<i64, PartitionError> {
    let bytes = TestBatch::new(n).encode();
    let header = BatchHeader::parse(&bytes).unwrap();
    Ok(p.append(header, bytes, acks, crate::now_ms())?
        .await?
        .base_offset)
}

#[test]
fn given_leader_with_isr_when_followers_fetch_then_hw_is_min_over_isr_and_never_back() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = partition(dir.path());
        let quorum = Arc::new(AtomicBool::new(true));
        p.set_role(leader(&[1, 2], &quorum)).unwrap();
        append(&p, 5, 1).await.unwrap();
        assert_eq!(p.high_watermark(), 0, "follower 2 has nothing yet");
        // Follower 3 is out of the ISR; at the HW it counts as caught up (Kafka's
        // maybeExpandIsr) and is proposed once, until the image answers.
        let (o, expand) = p.replica_read(3, 0, -1, 1 << 20).unwrap();
        assert_eq!(o.high_watermark, 0);
        assert!(!o.data.chunks.is_empty(), "followers read past the HW");
        assert_eq!(
            expand.map(|c| (c.leader_epoch, c.isr, c.from)),
            Some((3, vec![1, 2, 3], vec![1, 2]))
        );
        // Proposed, 3 holds the HW too (Kafka's maximal ISR): the controller may already have
        // it in the ISR it elects a new leader from.
        let (o, _) = p.replica_read(2, 5, -1, 1 << 20).unwrap();
        assert_eq!(
            o.high_watermark, 0,
            "3, proposed for the ISR, has nothing yet"
        );
        let (o, _) = p.replica_read(3, 5, -1, 1 << 20).unwrap();
        assert_eq!(o.high_watermark, 5);
        // A stale fetch offset does not move the HW back.
        p.replica_read(2, 2, -1, 1 << 20).unwrap();
        assert_eq!(p.high_watermark(), 5);
        let read = p.read(0, 1 << 20, false).unwrap();
        let first = BatchHeader::parse(&read.data.chunks[0]).unwrap();
        assert_eq!(
            first.partition_leader_epoch, 3,
            "the leader's epoch in the batch"
        );
        // One proposal is in flight at a time.
        assert_eq!(p.replica_read(3, 5, -1, 1 << 20).unwrap().1, None);
        p.set_role(leader(&[1, 2, 3], &quorum)).unwrap();
        append(&p, 1, 1).await.unwrap();
        p.replica_read(2, 6, -1, 1 << 20).unwrap();
        assert_eq!(p.high_watermark(), 5, "3 is in the ISR now and still at 5");
        p.replica_read(3, 6, -1, 1 << 20).unwrap();
        assert_eq!(p.high_watermark(), 6);
    });
}

#[test]
fn given_a_refused_isr_expansion_when_followers_fetch_then_the_proposed_follower_no_longer_holds_the_hw(
) {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = partition(dir.path());
        let quorum = Arc::new(AtomicBool::new(true));
        p.set_role(leader(&[1, 2], &quorum)).unwrap();
        let (_, expand) = p.replica_read(3, 0, -1, 1 << 20).unwrap();
        assert_eq!(
            expand.map(|c| (c.leader_epoch, c.isr, c.from)),
            Some((3, vec![1, 2, 3], vec![1, 2]))
        );
        append(&p, 4, 1).await.unwrap();
        p.replica_read(2, 4, -1, 1 << 20).unwrap();
        assert_eq!(p.high_watermark(), 0, "3 proposed and behind");
        p.isr_change_failed();
        p.replica_read(2, 4, -1, 1 << 20).unwrap();
        assert_eq!(p.high_watermark(), 4, "the ISR is {{1, 2}} again");
    });
}

#[test]
fn given_leader_when_acks_all_then_waits_for_isr_and_fails_without_quorum() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = partition(dir.path());
        let quorum = Arc::new(AtomicBool::new(true));
        p.set_role(leader(&[1, 2], &quorum)).unwrap();
        append(&p, 2, -1).await.unwrap();
        let timeout = p.wait_replicated(2, 1, Duration::from_millis(200)).await;
        assert!(
            matches!(timeout, Err(PartitionError::ReplicationTimeout)),
            "{timeout:?}"
        );
        let waiter = acks_all(&p, 2, 2);
        tokio::task::yield_now().await;
        p.replica_read(2, 2, -1, 1 << 20).unwrap();
        assert!(waiter.await.unwrap().is_ok());
        assert_eq!(p.check_min_isr(2), Ok(()));
        assert_eq!(p.check_min_isr(3), Err(2));
        quorum.store(false, Ordering::Relaxed);
        assert_eq!(p.check_min_isr(1), Err(1), "no acks=all without the quorum");
        append(&p, 1, -1).await.unwrap();
        let lost = p.wait_replicated(3, 1, Duration::from_secs(10)).await;
        assert!(
            matches!(lost, Err(PartitionError::NotEnoughReplicasAfterAppend)),
            "{lost:?}"
        );
    });
}

#[test]
fn given_isr_shrunk_below_min_while_waiting_when_hw_reaches_the_batch_then_not_enough_replicas() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = partition(dir.path());
        let quorum = Arc::new(AtomicBool::new(true));
        p.set_role(leader(&[1, 2], &quorum)).unwrap();
        append(&p, 2, -1).await.unwrap();
        let waiter = acks_all(&p, 2, 2);
        tokio::task::yield_now().await;
        // Follower 2 never fetched: the ISR shrinks to the leader, whose end is the
        // watermark now; one copy is not the two min.insync.replicas asks for.
        p.set_role(leader(&[1], &quorum)).unwrap();
        assert_eq!(p.high_watermark(), 2);
        let answer = waiter.await.unwrap();
        assert!(
            matches!(answer, Err(PartitionError::NotEnoughReplicasAfterAppend)),
            "{answer:?}"
        );
    });
}

#[test]
fn given_follower_when_appending_fetched_batches_then_leader_offsets_epochs_and_truncation() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(async {
        let l = partition(ld.path());
        let quorum = Arc::new(AtomicBool::new(true));
        l.set_role(leader(&[1, 2], &quorum)).unwrap();
        append(&l, 3, 1).await.unwrap();
        append(&l, 2, 1).await.unwrap();
        let f = partition(fd.path());
        f.set_role(Role::Follower {
            leader: 1,
            epoch: 3,
        })
        .unwrap();
        assert!(
            f.take_truncate_pending(),
            "a new follower epoch asks for truncation"
        );
        let (fetched, _) = l.replica_read(2, 0, -1, 1 << 20).unwrap();
        f.append_replicated(fetched.data.chunks.clone(), fetched.high_watermark)
            .await
            .unwrap();
        assert_eq!(f.log.log_end_offset(), 5);
        assert_eq!(f.latest_epoch(), Some(3));
        assert_eq!(f.high_watermark(), 0, "the leader's HW was 0 at that fetch");
        let (again, _) = l.replica_read(2, 5, -1, 1 << 20).unwrap();
        f.note_leader_hw(again.high_watermark);
        assert_eq!(f.high_watermark(), 5);
        let theirs = l.read(0, 1 << 20, false).unwrap();
        let flat = |c: &[bytes::Bytes]| c.iter().flat_map(|b| b.to_vec()).collect::<Vec<u8>>();
        let mine = f.read(0, 1 << 20, false).unwrap();
        assert_eq!(
            flat(&mine.data.chunks),
            flat(&theirs.data.chunks),
            "byte-identical"
        );
        // A batch past the boundary goes on truncation, with the HW.
        f.truncate_replica(3).await.unwrap();
        assert_eq!(f.log.log_end_offset(), 3);
        assert_eq!(f.high_watermark(), 3);
        // The leader's epoch boundary for epoch 3 is its log end.
        assert_eq!(l.end_offset_for_epoch(3), (3, 5));
    });
}

#[test]
fn given_leader_when_follower_lags_past_lag_max_then_shrink_proposed_once() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = partition(dir.path());
        let quorum = Arc::new(AtomicBool::new(true));
        p.set_role(leader(&[1, 2, 3], &quorum)).unwrap();
        append(&p, 2, 1).await.unwrap();
        p.replica_read(2, 2, -1, 1 << 20).unwrap();
        assert_eq!(p.isr_to_shrink(Duration::from_secs(3600)), None);
        // Every follower lags by more than nothing: both go, the leader stays.
        assert_eq!(
            p.isr_to_shrink(Duration::ZERO)
                .map(|c| (c.leader_epoch, c.isr)),
            Some((3, vec![1]))
        );
        assert_eq!(
            p.isr_to_shrink(Duration::ZERO),
            None,
            "one change in flight"
        );
        p.isr_change_failed();
        assert_eq!(
            p.isr_to_shrink(Duration::ZERO)
                .map(|c| (c.leader_epoch, c.isr)),
            Some((3, vec![1]))
        );
    });
}

#[test]
fn given_restarted_replica_with_checkpointed_hw_then_records_past_it_wait_for_the_isr() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let quorum = Arc::new(AtomicBool::new(true));
        {
            let p = partition(dir.path());
            p.set_role(leader(&[1, 2], &quorum)).unwrap();
            append(&p, 5, 1).await.unwrap();
            p.replica_read(2, 5, -1, 1 << 20).unwrap();
            append(&p, 3, 1).await.unwrap();
            assert_eq!(p.high_watermark(), 5, "follower 2 has 5 of 8");
            assert_eq!(p.checkpointed_high_watermark(), Some(5));
            p.log.flush().await.unwrap();
        }
        // Restarted: the log has 8 records, the ISR had 5 of them.
        let p = partition(dir.path());
        assert_eq!(p.checkpointed_high_watermark(), None, "single until a role");
        p.restore_high_watermark(5);
        assert_eq!(p.high_watermark(), 5);
        p.set_role(leader(&[1, 2], &quorum)).unwrap();
        assert_eq!(p.high_watermark(), 5, "not the log end of 8");
        p.replica_read(2, 8, -1, 1 << 20).unwrap();
        assert_eq!(p.high_watermark(), 8, "the ISR has them now");
        // A checkpoint past the log end (a truncated tail) is capped at it.
        let empty = tempfile::tempdir().unwrap();
        let q = partition(empty.path());
        q.restore_high_watermark(7);
        assert_eq!(q.high_watermark(), 0);
    });
}

#[test]
fn given_leader_when_deleting_records_then_low_watermark_waits_for_in_sync_followers_starts() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = partition(dir.path());
        let quorum = Arc::new(AtomicBool::new(true));
        p.set_role(leader(&[1, 2], &quorum)).unwrap();
        append(&p, 5, 1).await.unwrap();
        p.replica_read(2, 5, 0, 1 << 20).unwrap();
        p.replica_read(3, 5, -1, 1 << 20).unwrap(); // not in the ISR: not counted
        assert_eq!(p.delete_records(3).unwrap(), 3);
        assert_eq!(p.low_watermark(), 0, "follower 2 still starts at 0");
        let waited = p.wait_low_watermark(3, Duration::from_millis(50)).await;
        assert!(matches!(
            waited,
            Err(crate::partition::DeleteRecordsError::ReplicasTimedOut {
                offset: 3,
                low_watermark: 0
            })
        ));
        p.replica_read(2, 5, 3, 1 << 20).unwrap();
        assert_eq!(p.low_watermark(), 3);
        assert_eq!(p.wait_low_watermark(3, Duration::ZERO).await.unwrap(), 3);
    });
}

#[test]
fn given_a_leader_whose_isr_changes_when_the_role_is_set_then_one_shrink_or_expand_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = partition(dir.path());
        let quorum = Arc::new(AtomicBool::new(true));
        let moves = |shrank, expanded| super::IsrMoves { shrank, expanded };
        // Becoming leader takes over an ISR: no move of this leader's.
        assert_eq!(
            p.set_role(leader(&[1, 2, 3], &quorum)).unwrap(),
            moves(false, false)
        );
        assert_eq!(
            p.set_role(leader(&[1, 2, 3], &quorum)).unwrap(),
            moves(false, false)
        );
        // Two followers fenced at once: one shrink, as Kafka counts ISR changes.
        assert_eq!(
            p.set_role(leader(&[1], &quorum)).unwrap(),
            moves(true, false)
        );
        assert_eq!(
            p.set_role(leader(&[1, 3], &quorum)).unwrap(),
            moves(false, true)
        );
        // A new epoch at this leader: still this node's ISR changing.
        let mut next = leader(&[1, 2, 3], &quorum);
        if let Role::Leader { epoch, .. } = &mut next {
            *epoch = 4;
        }
        assert_eq!(p.set_role(next).unwrap(), moves(false, true));
        // Leadership moves away: nothing more to count here.
        let follower = Role::Follower {
            leader: 2,
            epoch: 5,
        };
        assert_eq!(p.set_role(follower).unwrap(), moves(false, false));
    });
}

#[test]
fn given_followers_when_the_leader_appends_then_their_lag_is_the_written_end_minus_their_last_fetch(
) {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = partition(dir.path());
        let quorum = Arc::new(AtomicBool::new(true));
        p.set_role(leader(&[1, 2], &quorum)).unwrap();
        append(&p, 5, 1).await.unwrap();
        p.replica_read(2, 5, 0, 1 << 20).unwrap();
        append(&p, 3, 1).await.unwrap();
        let lags = p.follower_lags();
        assert_eq!(lags.len(), 2, "every replica but the leader: {lags:?}");
        // 2 fetched at 5 and has not fetched the last 3 records yet.
        assert_eq!((lags[0].replica, lags[0].lag), (2, Some(3)));
        assert!(lags[0].caught_up_ago.is_some());
        // 3 is out of the ISR this leader took over and never fetched: nothing known.
        assert_eq!(
            (lags[1].replica, lags[1].lag, lags[1].caught_up_ago),
            (3, None, None)
        );
        // A follower alone (not a leader) reports none.
        p.set_role(Role::Follower {
            leader: 2,
            epoch: 4,
        })
        .unwrap();
        assert!(p.follower_lags().is_empty());
    });
}

#[test]
fn given_followers_in_the_consumers_rack_when_selecting_then_the_most_caught_up_in_sync_one_holding_the_offset(
) {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = partition(dir.path());
        let quorum = Arc::new(AtomicBool::new(true));
        p.set_role(leader(&[1, 2, 3], &quorum)).unwrap();
        append(&p, 10, 1).await.unwrap();
        // 2 has everything, 3 half; both logs start at 0.
        p.replica_read(2, 10, 0, 1 << 20).unwrap();
        p.replica_read(3, 5, 0, 1 << 20).unwrap();
        assert_eq!(p.preferred_read_replica(4, &[2, 3]), Some(2));
        assert_eq!(p.preferred_read_replica(4, &[3]), Some(3));
        // 3 has not got offset 7 yet: not a place to read it.
        assert_eq!(p.preferred_read_replica(7, &[3]), None);
        // The leader itself is never named; nor a replica out of the ISR.
        assert_eq!(p.preferred_read_replica(4, &[1]), None);
        p.set_role(leader(&[1, 2], &quorum)).unwrap();
        assert_eq!(p.preferred_read_replica(4, &[3]), None);
        // A follower whose log starts past the offset (DeleteRecords) cannot serve it.
        p.replica_read(2, 10, 6, 1 << 20).unwrap();
        assert_eq!(p.preferred_read_replica(4, &[2]), None);
        assert_eq!(p.preferred_read_replica(8, &[2]), Some(2));
        // Not a leader: no selection.
        p.set_role(Role::Follower {
            leader: 2,
            epoch: 4,
        })
        .unwrap();
        assert_eq!(p.preferred_read_replica(8, &[2]), None);
    });
}

/// Appends `n` records with key `key` to the leader, acks=1.
async fn append_keyed(p: &Rc<Partition>, n: usize, key: &'static [u8]) -> i64 {
    let bytes = TestBatch::new(n).encode_with(|rs| {
        for r in rs.iter_mut() {
            r.key = Some(bytes::Bytes::from_static(key));
        }
    });
    let header = BatchHeader::parse(&bytes).unwrap();
    p.append(header, bytes, 1, crate::now_ms())
        .unwrap()
        .await
        .unwrap()
        .base_offset
}

#[test]
fn given_a_follower_with_a_key_index_when_it_appends_the_leaders_batches_then_the_index_follows_without_a_rebuild(
) {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(async {
        let keyed = [("strom.key.index", "true")];
        let l = partition_with(ld.path(), &keyed);
        let quorum = Arc::new(AtomicBool::new(true));
        l.set_role(leader(&[1, 2], &quorum)).unwrap();
        let f = partition_with(fd.path(), &keyed);
        f.set_role(Role::Follower {
            leader: 1,
            epoch: 3,
        })
        .unwrap();
        let offsets = |hits: Vec<crate::partition::key_index::KeyHit>| -> Vec<i64> {
            hits.iter().map(|h| h.offset).collect()
        };
        append_keyed(&l, 3, b"s1").await;
        append_keyed(&l, 2, b"s2").await;
        let (fetched, _) = l.replica_read(2, 0, -1, 1 << 20).unwrap();
        f.append_replicated(fetched.data.chunks.clone(), 5)
            .await
            .unwrap();
        assert!(
            matches!(
                f.key_index.borrow().state(),
                crate::partition::key_index::KeyState::Absent
            ),
            "not built for a replica nobody reads by key"
        );
        assert_eq!(
            offsets(f.records_by_key(b"s1", 10).await.unwrap()),
            [0, 1, 2]
        );
        assert!(
            f.key_index.borrow().ready().is_some(),
            "built by the first key read"
        );

        append_keyed(&l, 2, b"s1").await;
        let (fetched, _) = l.replica_read(2, 5, -1, 1 << 20).unwrap();
        f.append_replicated(fetched.data.chunks.clone(), 7)
            .await
            .unwrap();
        // Kept and added to: dropping it would make every key read after a replicated append
        // scan the partition again.
        let slot = f.key_index.borrow();
        let ix = slot
            .ready()
            .expect("the index survives the replicated append");
        assert_eq!(ix.last(b"s1", 10, 0, i64::MAX), [0, 1, 2, 5, 6]);
        assert_eq!(ix.last(b"s2", 10, 0, i64::MAX), [3, 4]);
    });
}

#[test]
fn given_isr_expansion_made_when_image_fences_the_member_again_then_next_change_is_proposed() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = partition(dir.path());
        let quorum = Arc::new(AtomicBool::new(true));
        p.set_role(leader(&[1, 2], &quorum)).unwrap();
        let (_, expand) = p.replica_read(3, 0, -1, 1 << 20).unwrap();
        assert!(expand.is_some());
        // The image took {1, 2, 3}, then a fence of 3 took it out again at the same epoch
        // before this shard read its role: the role shows {1, 2} only.
        p.isr_change_made();
        p.set_role(leader(&[1, 2], &quorum)).unwrap();
        let (_, again) = p.replica_read(3, 0, -1, 1 << 20).unwrap();
        assert_eq!(
            again.map(|c| (c.isr, c.from)),
            Some((vec![1, 2, 3], vec![1, 2])),
            "3 is caught up and out of the ISR: proposed again"
        );
    });
}

#[test]
fn given_isr_expansion_in_flight_when_role_set_again_then_no_second_change_and_hw_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let p = partition(dir.path());
        let quorum = Arc::new(AtomicBool::new(true));
        p.set_role(leader(&[1, 2], &quorum)).unwrap();
        assert!(p.replica_read(3, 0, -1, 1 << 20).unwrap().1.is_some());
        p.set_role(leader(&[1, 2], &quorum)).unwrap();
        append(&p, 4, 1).await.unwrap();
        let (_, again) = p.replica_read(2, 4, -1, 1 << 20).unwrap();
        assert_eq!(again, None);
        assert_eq!(p.replica_read(3, 0, -1, 1 << 20).unwrap().1, None);
        assert_eq!(
            p.high_watermark(),
            0,
            "3 proposed, not yet decided, and behind"
        );
    });
}

#[test]
fn given_a_fetch_answered_by_a_deposed_leader_when_the_follower_moved_to_a_new_epoch_then_not_appended(
) {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(async {
        let l = partition(ld.path());
        let quorum = Arc::new(AtomicBool::new(true));
        l.set_role(leader(&[1, 2], &quorum)).unwrap();
        append(&l, 3, 1).await.unwrap();
        let f = partition(fd.path());
        f.set_role(Role::Follower {
            leader: 1,
            epoch: 3,
        })
        .unwrap();
        f.take_truncate_pending();
        let (fetched, _) = l.replica_read(2, 0, -1, 1 << 20).unwrap();
        // The fetch was out when the image made another node leader at epoch 4.
        f.set_role(Role::Follower {
            leader: 3,
            epoch: 4,
        })
        .unwrap();
        f.take_truncate_pending();
        let appended = f
            .append_fetched(1, 3, fetched.data.chunks.clone(), fetched.high_watermark)
            .await
            .unwrap();
        assert!(!appended);
        assert_eq!(
            f.log.log_end_offset(),
            0,
            "the deposed leader's records stay out"
        );
        // From the leader it follows, at its epoch, they go in.
        let appended = f
            .append_fetched(3, 4, fetched.data.chunks.clone(), fetched.high_watermark)
            .await
            .unwrap();
        assert!(appended);
        assert_eq!(f.log.log_end_offset(), 3);
    });
}
