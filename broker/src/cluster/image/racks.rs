//! Rack-aware replica placement: Kafka's `assignReplicasToBrokersRackAware` (the
//! deterministic form it takes with a fixed start index, which is what keeps `apply` the same
//! on every node). Brokers are laid out alternating racks (`a1 b1 c1 a2 b2 …`); a partition's
//! leader walks that list one step per partition, and each further replica is the next broker
//! of the list, shifted per round of partitions, skipping a rack that already has a replica
//! while another has none, and a broker that already has one. So the replicas of a partition
//! are in as many racks as there are, and leaders and followers spread evenly over brokers
//! and racks. A broker without `broker.rack` counts as a rack of its own kind (KRaft's
//! `StripedReplicaPlacer` treats a missing rack so); a cluster without any rack keeps the
//! plain round robin of `MetadataImage::place`.

use std::collections::{BTreeMap, BTreeSet};

/// Brokers as (id, rack), sorted by id, alternating racks (Kafka's
/// `getRackAlternatedBrokerList`: racks sorted by name, each contributing its next broker in
/// turn).
fn rack_alternated(brokers: &[(i32, Option<&str>)]) -> Vec<i32> {
    let mut by_rack: BTreeMap<Option<&str>, Vec<i32>> = BTreeMap::new();
    for (id, rack) in brokers {
        by_rack.entry(*rack).or_default().push(*id);
    }
    for ids in by_rack.values_mut() {
        ids.sort_unstable();
    }
    let longest = by_rack.values().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| by_rack.values().filter_map(move |ids| ids.get(i).copied()))
        .collect()
}

/// The `rf` replicas of `partition` (the first is the leader) over `brokers`, from `start`
/// (the topic's offset, so that topics do not all start on the same broker).
pub(super) fn replicas(
    brokers: &[(i32, Option<&str>)],
    start: usize,
    partition: i32,
    rf: usize,
) -> Vec<i32> {
    let list = rack_alternated(brokers);
    let n = list.len();
    let rack_of: BTreeMap<i32, Option<&str>> = brokers.iter().copied().collect();
    let racks = rack_of.values().collect::<BTreeSet<_>>().len();
    let partition = partition.max(0) as usize;
    let first = (start + partition) % n;
    // Kafka shifts the second replica by one more after each round of `n` partitions, so the
    // same leader does not always get the same followers.
    let shift = start + partition / n;
    let mut chosen = vec![list[first]];
    let mut used_racks = BTreeSet::from([rack_of[&list[first]]]);
    let mut k = 0;
    while chosen.len() < rf.min(n) {
        let step = if n > 1 {
            1 + (shift * racks + k) % (n - 1)
        } else {
            0
        };
        let broker = list[(first + step) % n];
        let rack = rack_of[&broker];
        k += 1;
        if (used_racks.contains(&rack) && used_racks.len() < racks) || chosen.contains(&broker) {
            continue;
        }
        chosen.push(broker);
        used_racks.insert(rack);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn racks_of(
        brokers: &[(i32, Option<&'static str>)],
        replicas: &[i32],
    ) -> BTreeSet<Option<&'static str>> {
        replicas
            .iter()
            .map(|r| brokers.iter().find(|(id, _)| id == r).unwrap().1)
            .collect()
    }

    #[test]
    fn given_racks_when_alternating_then_each_rack_gives_its_next_broker_in_turn() {
        let brokers = [
            (1, Some("a")),
            (2, Some("a")),
            (3, Some("b")),
            (4, Some("c")),
            (5, Some("c")),
        ];
        assert_eq!(rack_alternated(&brokers), vec![1, 3, 4, 2, 5]);
    }

    #[test]
    fn given_three_racks_of_two_when_placing_rf3_then_every_partition_spans_the_three_racks_and_load_is_even(
    ) {
        let brokers = [
            (1, Some("a")),
            (2, Some("a")),
            (3, Some("b")),
            (4, Some("b")),
            (5, Some("c")),
            (6, Some("c")),
        ];
        let mut leaders: BTreeMap<i32, usize> = BTreeMap::new();
        let mut replicas_per_broker: BTreeMap<i32, usize> = BTreeMap::new();
        for p in 0..60 {
            let r = replicas(&brokers, 7, p, 3);
            assert_eq!(r.len(), 3);
            assert_eq!(racks_of(&brokers, &r).len(), 3, "partition {p}: {r:?}");
            *leaders.entry(r[0]).or_default() += 1;
            for b in r {
                *replicas_per_broker.entry(b).or_default() += 1;
            }
        }
        assert!(leaders.values().all(|n| *n == 10), "{leaders:?}");
        assert!(
            replicas_per_broker.values().all(|n| *n == 30),
            "{replicas_per_broker:?}"
        );
    }

    #[test]
    fn given_more_replicas_than_racks_when_placing_then_every_rack_first_then_distinct_brokers() {
        let brokers = [(1, Some("a")), (2, Some("a")), (3, Some("b")), (4, None)];
        for p in 0..12 {
            let r = replicas(&brokers, 0, p, 4);
            assert_eq!(r.iter().collect::<BTreeSet<_>>().len(), 4, "{r:?}");
            // The first three are in the three racks ("a", "b", and the one without a rack).
            assert_eq!(racks_of(&brokers, &r[..3]).len(), 3, "partition {p}: {r:?}");
        }
        // Two racks of two, rf 2: one replica in each.
        let two = [
            (1, Some("x")),
            (2, Some("x")),
            (3, Some("y")),
            (4, Some("y")),
        ];
        for p in 0..8 {
            assert_eq!(racks_of(&two, &replicas(&two, 3, p, 2)).len(), 2);
        }
    }

    #[test]
    fn given_one_broker_when_placing_then_it_has_the_one_replica() {
        assert_eq!(replicas(&[(7, Some("a"))], 5, 3, 1), vec![7]);
    }
}
