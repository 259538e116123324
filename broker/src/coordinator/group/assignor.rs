//! Server-side assignors of the KIP-848 consumer protocol: `uniform` (Kafka's default: balanced
//! and sticky) and `range` (per topic, contiguous ranges in member order).
//!
//! Input: each member's subscribed topics and its current target assignment (for stickiness);
//! the topics' partition counts. Output: each member's partitions. Every partition of a
//! subscribed topic goes to exactly one member subscribed to it.

use std::collections::{BTreeMap, BTreeSet};

pub type Assignment = BTreeMap<String, BTreeSet<i32>>;

pub struct MemberSpec<'a> {
    pub member_id: &'a str,
    pub topics: &'a BTreeSet<String>,
    pub current: &'a Assignment,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignor {
    Uniform,
    Range,
}

impl Assignor {
    pub fn by_name(name: &str) -> Option<Assignor> {
        match name {
            "uniform" => Some(Assignor::Uniform),
            "range" => Some(Assignor::Range),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    /// `partitions`: partition count per existing topic.
    pub fn assign(
        self,
        members: &[MemberSpec<'_>],
        partitions: &BTreeMap<String, i32>,
    ) -> BTreeMap<String, Assignment> {
        match self {
            Assignor::Uniform => uniform(members, partitions),
            Assignor::Range => range(members, partitions),
        }
    }
}

fn range(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.member_id.to_string(), Assignment::new()))
        .collect();
    for (topic, &count) in partitions {
        let mut subscribers: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .map(|m| m.member_id)
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        subscribers.sort_unstable();
        let n = subscribers.len() as i32;
        let (per, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, m) in subscribers.iter().enumerate() {
            let take = per + i32::from((i as i32) < extra);
            let set: BTreeSet<i32> = (next..next + take).collect();
            next += take;
            if !set.is_empty() {
                out.get_mut(*m).expect("member").insert(topic.clone(), set);
            }
        }
    }
    out
}

/// Balanced and sticky: members keep what they have up to their fair share, the rest goes to
/// the least loaded eligible member (ties by member id, so the result is deterministic).
fn uniform(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.member_id.to_string(), Assignment::new()))
        .collect();
    let mut load: BTreeMap<&str, usize> = members.iter().map(|m| (m.member_id, 0)).collect();
    // Fair share when every member subscribes to the same topics; with mixed subscriptions
    // the least-loaded rule below still spreads partitions evenly among eligible members.
    let total: i32 = partitions
        .iter()
        .filter(|(t, _)| members.iter().any(|m| m.topics.contains(*t)))
        .map(|(_, c)| *c)
        .sum();
    let n = members.len().max(1);
    // Everyone may keep `floor` partitions; only `total % n` members may keep one more.
    let floor = total as usize / n;
    let mut extra = total as usize % n;
    let mut owners: BTreeMap<(String, i32), &str> = BTreeMap::new();
    // Stickiness: keep current partitions that are still valid, up to the quota; members
    // with the fewest partitions keep theirs first so no one exceeds the ceiling.
    let mut by_size: Vec<&MemberSpec<'_>> = members.iter().collect();
    by_size.sort_by_key(|m| {
        (
            m.current.values().map(|s| s.len()).sum::<usize>(),
            m.member_id,
        )
    });
    for m in by_size {
        for (topic, parts) in m.current {
            let Some(&count) = partitions.get(topic) else {
                continue;
            };
            if !m.topics.contains(topic) {
                continue;
            }
            for &p in parts {
                if p >= count || owners.contains_key(&(topic.clone(), p)) {
                    continue;
                }
                let l = load[m.member_id];
                if l > floor || (l == floor && extra == 0) {
                    break;
                }
                if l == floor {
                    extra -= 1;
                }
                owners.insert((topic.clone(), p), m.member_id);
                *load.get_mut(m.member_id).expect("member") += 1;
            }
        }
    }
    for (topic, &count) in partitions {
        for p in 0..count {
            if owners.contains_key(&(topic.clone(), p)) {
                continue;
            }
            let best = members
                .iter()
                .filter(|m| m.topics.contains(topic))
                .min_by_key(|m| (load[m.member_id], m.member_id));
            if let Some(m) = best {
                owners.insert((topic.clone(), p), m.member_id);
                *load.get_mut(m.member_id).expect("member") += 1;
            }
        }
    }
    for ((topic, p), m) in owners {
        out.get_mut(m)
            .expect("member")
            .entry(topic)
            .or_default()
            .insert(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn topics(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(|s| s.len()).sum()
    }

    #[test]
    fn given_three_members_six_partitions_when_range_then_two_each_contiguous() {
        let t = topics(&["t"]);
        let empty = Assignment::new();
        let members: Vec<MemberSpec<'_>> = ["a", "b", "c"]
            .iter()
            .map(|id| MemberSpec {
                member_id: id,
                topics: &t,
                current: &empty,
            })
            .collect();
        let parts = BTreeMap::from([("t".to_string(), 6)]);
        let out = Assignor::Range.assign(&members, &parts);
        assert_eq!(out["a"]["t"], BTreeSet::from([0, 1]));
        assert_eq!(out["c"]["t"], BTreeSet::from([4, 5]));
    }

    #[test]
    fn given_member_leaves_when_uniform_then_others_keep_their_partitions() {
        let t = topics(&["t"]);
        let empty = Assignment::new();
        let parts = BTreeMap::from([("t".to_string(), 6)]);
        let three: Vec<MemberSpec<'_>> = ["a", "b", "c"]
            .iter()
            .map(|id| MemberSpec {
                member_id: id,
                topics: &t,
                current: &empty,
            })
            .collect();
        let first = Assignor::Uniform.assign(&three, &parts);
        let two: Vec<MemberSpec<'_>> = ["a", "b"]
            .iter()
            .map(|id| MemberSpec {
                member_id: id,
                topics: &t,
                current: &first[*id],
            })
            .collect();
        let second = Assignor::Uniform.assign(&two, &parts);
        for id in ["a", "b"] {
            assert!(
                first[id]["t"].is_subset(&second[id]["t"]),
                "{id} kept its partitions"
            );
            assert_eq!(count(&second[id]), 3);
        }
    }

    proptest! {
        #[test]
        fn given_any_group_when_assigning_then_each_partition_once_and_balanced(
            n_members in 1usize..8,
            counts in proptest::collection::vec(0i32..20, 1..4),
            sticky_seed in 0usize..3,
        ) {
            let names: Vec<String> = (0..counts.len()).map(|i| format!("t{i}")).collect();
            let subs: BTreeSet<String> = names.iter().cloned().collect();
            let parts: BTreeMap<String, i32> = names.iter().cloned().zip(counts.iter().copied()).collect();
            let ids: Vec<String> = (0..n_members).map(|i| format!("m{i}")).collect();
            // Some arbitrary (possibly unbalanced) current assignment to be sticky to.
            let mut currents: Vec<Assignment> = vec![Assignment::new(); n_members];
            for (t, &c) in &parts {
                for p in 0..c {
                    let m = (p as usize * (sticky_seed + 1)) % n_members;
                    currents[m].entry(t.clone()).or_default().insert(p);
                }
            }
            let members: Vec<MemberSpec<'_>> = ids.iter().zip(&currents).map(|(id, cur)| MemberSpec {
                member_id: id, topics: &subs, current: cur,
            }).collect();
            for assignor in [Assignor::Uniform, Assignor::Range] {
                let out = assignor.assign(&members, &parts);
                let mut seen = BTreeSet::new();
                for a in out.values() {
                    for (t, ps) in a {
                        for p in ps {
                            prop_assert!(seen.insert((t.clone(), *p)), "assigned twice");
                        }
                    }
                }
                let total: i32 = counts.iter().sum();
                prop_assert_eq!(seen.len(), total as usize);
                if assignor == Assignor::Uniform {
                    let loads: Vec<usize> = out.values().map(count).collect();
                    let (min, max) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
                    prop_assert!(max - min <= 1, "balanced within one: {:?}", loads);
                }
            }
        }
    }
}
