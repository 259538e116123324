//! The `sticky` task assignor of streams groups (Kafka's `StickyTaskAssignor`, its default and
//! only production assignor): balanced over the processes (a process's capacity is its member
//! count), each task back to its previous owner while that owner is under its quota, and
//! standby copies of the stateful tasks on other processes than the active one. Warm-up tasks
//! are never assigned (Kafka 4.4 assigns none either).

use std::collections::{BTreeMap, BTreeSet};

use super::{TaskSet, Tasks};

pub const NAME: &str = "sticky";

pub struct MemberSpec<'a> {
    pub member_id: &'a str,
    pub process_id: &'a str,
    /// What the member owns now (its target is sticky to it).
    pub current: &'a Tasks,
}

/// Each member's target tasks. `tasks`: the number of tasks of each subtopology; `stateful`:
/// the subtopologies with state (changelogs), which get `standbys` copies each.
pub fn assign(
    members: &[MemberSpec<'_>],
    tasks: &BTreeMap<String, i32>,
    stateful: &BTreeSet<String>,
    standbys: i32,
) -> BTreeMap<String, Tasks> {
    let mut out: BTreeMap<String, Tasks> = members
        .iter()
        .map(|m| (m.member_id.to_string(), Tasks::default()))
        .collect();
    if members.is_empty() {
        return out;
    }
    let process_of: BTreeMap<&str, &str> = members
        .iter()
        .map(|m| (m.member_id, m.process_id))
        .collect();
    let capacity: BTreeMap<&str, usize> = members.iter().fold(BTreeMap::new(), |mut c, m| {
        *c.entry(m.process_id).or_default() += 1;
        c
    });
    let mut all: Vec<(String, i32)> = tasks
        .iter()
        .flat_map(|(s, n)| (0..*n).map(move |p| (s.clone(), p)))
        .collect();
    let quota = all.len().div_ceil(members.len());
    let mut load: BTreeMap<String, usize> = BTreeMap::new();
    let mut placed: BTreeSet<(String, i32)> = BTreeSet::new();
    let give = |out: &mut BTreeMap<String, Tasks>,
                load: &mut BTreeMap<String, usize>,
                m: &str,
                t: &(String, i32)| {
        out.get_mut(m)
            .expect("member")
            .active
            .entry(t.0.clone())
            .or_default()
            .insert(t.1);
        *load.entry(m.to_string()).or_default() += 1;
    };
    let owns = |set: &TaskSet, t: &(String, i32)| set.get(&t.0).is_some_and(|ps| ps.contains(&t.1));
    // 1. Back to the previous active owner, in (partition, subtopology) order.
    all.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    for t in &all {
        if let Some(m) = members.iter().find(|m| owns(&m.current.active, t)) {
            if load.get(m.member_id).copied().unwrap_or(0) < quota {
                give(&mut out, &mut load, m.member_id, t);
                placed.insert(t.clone());
            }
        }
    }
    // 2. To a previous standby owner, the least loaded first.
    for t in &all {
        if placed.contains(t) {
            continue;
        }
        let best = members
            .iter()
            .filter(|m| owns(&m.current.standby, t))
            .filter(|m| load.get(m.member_id).copied().unwrap_or(0) < quota)
            .min_by_key(|m| (load.get(m.member_id).copied().unwrap_or(0), m.member_id));
        if let Some(m) = best {
            give(&mut out, &mut load, m.member_id, t);
            placed.insert(t.clone());
        }
    }
    // 3. The rest, in (subtopology, partition) order: the least loaded process, then its
    // member with the fewest tasks.
    all.sort();
    let process_load = |load: &BTreeMap<String, usize>, p: &str| -> f64 {
        let n: usize = members
            .iter()
            .filter(|m| m.process_id == p)
            .map(|m| load.get(m.member_id).copied().unwrap_or(0))
            .sum();
        n as f64 / capacity[p] as f64
    };
    for t in &all {
        if placed.contains(t) {
            continue;
        }
        let m = members
            .iter()
            .min_by(|a, b| {
                let (la, lb) = (
                    process_load(&load, a.process_id),
                    process_load(&load, b.process_id),
                );
                la.total_cmp(&lb)
                    .then(a.process_id.cmp(b.process_id))
                    .then(load.get(a.member_id).cmp(&load.get(b.member_id)))
                    .then(a.member_id.cmp(b.member_id))
            })
            .expect("members");
        give(&mut out, &mut load, m.member_id, t);
    }
    // 4. Standby copies of stateful tasks, never on a process that already has the task.
    if standbys > 0 {
        let mut standby_load: BTreeMap<String, usize> = BTreeMap::new();
        for t in all.iter().filter(|t| stateful.contains(&t.0)) {
            for _ in 0..standbys {
                let has: BTreeSet<&str> = out
                    .iter()
                    .filter(|(_, a)| owns(&a.active, t) || owns(&a.standby, t))
                    .map(|(m, _)| process_of[m.as_str()])
                    .collect();
                let total = |m: &MemberSpec<'_>| {
                    load.get(m.member_id).copied().unwrap_or(0)
                        + standby_load.get(m.member_id).copied().unwrap_or(0)
                };
                let best = members
                    .iter()
                    .filter(|m| !has.contains(m.process_id))
                    .min_by_key(|m| (!owns(&m.current.standby, t), total(m), m.member_id));
                let Some(m) = best else {
                    tracing::debug!(task = ?t, "no process left for a standby copy");
                    break;
                };
                out.get_mut(m.member_id)
                    .expect("member")
                    .standby
                    .entry(t.0.clone())
                    .or_default()
                    .insert(t.1);
                *standby_load.entry(m.member_id.to_string()).or_default() += 1;
            }
        }
    }
    out
}
