//! A streams group's topology (what the application's heartbeat describes) and its
//! configured form against the topics that exist (Kafka's `InternalTopicManager`): the
//! number of tasks of each subtopology, the partition counts of the repartition and changelog
//! topics, and what keeps the group from being ready — missing source topics, internal topics
//! to create, topics partitioned against the copartitioning rules.

use std::collections::{BTreeMap, BTreeSet};

use super::status;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicInfo {
    pub name: String,
    /// 0: derived by the broker.
    pub partitions: i32,
    /// 0: the broker's default.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// Indexes into the subtopology's source and repartition-source topic lists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CopartitionGroup {
    pub source_topics: Vec<i16>,
    pub repartition_source_topics: Vec<i16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subtopology {
    pub id: String,
    pub source_topics: Vec<String>,
    pub changelogs: Vec<TopicInfo>,
    pub repartition_sinks: Vec<String>,
    pub repartition_sources: Vec<TopicInfo>,
    pub copartition_groups: Vec<CopartitionGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Topology {
    pub epoch: i32,
    pub subtopologies: Vec<Subtopology>,
}

impl Topology {
    /// Every topic the topology reads or writes (sources, repartition and changelog topics).
    pub fn required_topics(&self) -> BTreeSet<String> {
        let mut all = BTreeSet::new();
        for s in &self.subtopologies {
            all.extend(s.source_topics.iter().cloned());
            all.extend(s.repartition_sinks.iter().cloned());
            all.extend(s.repartition_sources.iter().map(|t| t.name.clone()));
            all.extend(s.changelogs.iter().map(|t| t.name.clone()));
        }
        all
    }

    /// The subtopology that reads `topic` (a source or repartition-source topic).
    pub fn reader_of(&self, topic: &str) -> Option<&Subtopology> {
        self.subtopologies.iter().find(|s| {
            s.source_topics.iter().any(|t| t == topic)
                || s.repartition_sources.iter().any(|t| t.name == topic)
        })
    }
}

/// An internal topic the broker creates for the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalTopic {
    pub name: String,
    pub partitions: i32,
    /// -1: the broker's `default.replication.factor`.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// The topology against the topics that exist.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Configured {
    /// Tasks per subtopology (`None` when the subtopologies could not be computed).
    pub tasks: Option<BTreeMap<String, i32>>,
    /// Partition count of every source and repartition-source topic of each subtopology.
    pub inputs: BTreeMap<String, Vec<(String, i32)>>,
    /// What keeps the group from being ready (a status code and its detail).
    pub status: Option<(i8, String)>,
    pub to_create: Vec<InternalTopic>,
}

impl Configured {
    pub fn is_ready(&self) -> bool {
        self.status.is_none() && self.tasks.is_some()
    }
}

/// A topology the broker refuses (STREAMS_INVALID_TOPOLOGY), with Kafka's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidTopology(pub String);

/// At most 3 names, then " and <k> additional topics" (Kafka's status details).
fn some_names<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    let names: Vec<&String> = names.into_iter().collect();
    let shown: Vec<&str> = names.iter().take(3).map(|s| s.as_str()).collect();
    let mut out = shown.join(", ");
    if names.len() > 3 {
        out.push_str(&format!(" and {} additional topics", names.len() - 3));
    }
    out
}

/// Kafka's sorted-map rendering, `{a=2, b=3}`.
fn counts_map(counts: &BTreeMap<String, i32>) -> String {
    let inner: Vec<String> = counts.iter().map(|(t, n)| format!("{t}={n}")).collect();
    format!("{{{}}}", inner.join(", "))
}

/// Configures `t` against `topics` (partition count of every existing topic).
pub fn configure(
    t: &Topology,
    topics: &BTreeMap<String, i32>,
) -> Result<Configured, InvalidTopology> {
    let mut out = Configured::default();
    let repartition: BTreeSet<&str> = t
        .subtopologies
        .iter()
        .flat_map(|s| s.repartition_sources.iter().map(|r| r.name.as_str()))
        .collect();
    // 1. External source topics that do not exist.
    let missing: BTreeSet<&String> = t
        .subtopologies
        .iter()
        .flat_map(|s| &s.source_topics)
        .filter(|n| !repartition.contains(n.as_str()) && !topics.contains_key(*n))
        .collect();
    if !missing.is_empty() {
        out.status = Some((
            status::MISSING_SOURCE_TOPICS,
            format!("Source topics {} are missing.", some_names(missing)),
        ));
        return Ok(out);
    }
    // 2. Repartition topics: fixed counts, existing topics, then derived from their writers.
    let mut counts: BTreeMap<String, i32> = BTreeMap::new();
    for s in &t.subtopologies {
        for r in &s.repartition_sources {
            if let Some(n) = topics.get(&r.name) {
                counts.insert(r.name.clone(), *n);
            } else if r.partitions > 0 {
                counts.insert(r.name.clone(), r.partitions);
            }
        }
    }
    let sinks: BTreeSet<&str> = t
        .subtopologies
        .iter()
        .flat_map(|s| s.repartition_sinks.iter().map(String::as_str))
        .collect();
    if repartition.iter().any(|r| !sinks.contains(r)) {
        return Err(InvalidTopology(
            "Failed to compute number of partitions for all repartition topics, because a \
             repartition source topic is never used as a sink topic."
                .into(),
        ));
    }
    loop {
        let mut progress = false;
        for s in &t.subtopologies {
            let known = s
                .source_topics
                .iter()
                .filter_map(|n| topics.get(n))
                .chain(
                    s.repartition_sources
                        .iter()
                        .filter_map(|r| counts.get(&r.name)),
                )
                .copied()
                .max();
            let Some(n) = known else { continue };
            for sink in &s.repartition_sinks {
                if repartition.contains(sink.as_str()) && !counts.contains_key(sink) {
                    counts.insert(sink.clone(), n);
                    progress = true;
                }
            }
        }
        if repartition.iter().all(|r| counts.contains_key(*r)) {
            break;
        }
        if !progress {
            return Err(InvalidTopology(
                "Failed to compute number of partitions for all repartition topics. There may \
                 be loops in the topology that cannot be resolved."
                    .into(),
            ));
        }
    }
    // 3. Copartition groups.
    for s in &t.subtopologies {
        for g in &s.copartition_groups {
            if let Some(status) = copartition(s, g, topics, &mut counts)? {
                out.status = Some(status);
                return Ok(out);
            }
        }
    }
    // 4.-5. Tasks, and the changelogs' partitions.
    let mut tasks = BTreeMap::new();
    let mut wanted: Vec<InternalTopic> = Vec::new();
    for s in &t.subtopologies {
        let mut inputs = Vec::new();
        for n in &s.source_topics {
            let count = topics
                .get(n)
                .or_else(|| counts.get(n))
                .copied()
                .unwrap_or(0);
            inputs.push((n.clone(), count));
        }
        for r in &s.repartition_sources {
            inputs.push((r.name.clone(), counts.get(&r.name).copied().unwrap_or(0)));
            wanted.push(internal(r, counts.get(&r.name).copied().unwrap_or(0)));
        }
        let n = inputs.iter().map(|(_, c)| *c).max().unwrap_or(0);
        for c in &s.changelogs {
            wanted.push(internal(c, n));
        }
        tasks.insert(s.id.clone(), n);
        out.inputs.insert(s.id.clone(), inputs);
    }
    out.tasks = Some(tasks);
    // 6. Internal topics that exist with other counts, or do not exist.
    for w in &wanted {
        if let Some(found) = topics.get(&w.name) {
            if *found != w.partitions {
                out.status = Some((
                    status::INCORRECTLY_PARTITIONED_TOPICS,
                    format!(
                        "Existing topic {} has different number of partitions: expected {}, found {}",
                        w.name, w.partitions, found
                    ),
                ));
                out.tasks = None;
                return Ok(out);
            }
        }
    }
    let mut seen = BTreeSet::new();
    out.to_create = wanted
        .into_iter()
        .filter(|w| !topics.contains_key(&w.name) && seen.insert(w.name.clone()))
        .collect();
    if !out.to_create.is_empty() {
        let names: Vec<String> = out.to_create.iter().map(|w| w.name.clone()).collect();
        out.status = Some((
            status::MISSING_INTERNAL_TOPICS,
            format!("Internal topics are missing: {}", some_names(&names)),
        ));
    }
    Ok(out)
}

fn internal(t: &TopicInfo, partitions: i32) -> InternalTopic {
    InternalTopic {
        name: t.name.clone(),
        partitions,
        replication_factor: if t.replication_factor == 0 {
            -1
        } else {
            t.replication_factor
        },
        configs: t.configs.clone(),
    }
}

/// Kafka's `CopartitionedTopicsEnforcer`: a status when the group's topics cannot be
/// copartitioned, else the repartition topics of the group get the common count.
fn copartition(
    s: &Subtopology,
    g: &CopartitionGroup,
    topics: &BTreeMap<String, i32>,
    counts: &mut BTreeMap<String, i32>,
) -> Result<Option<(i8, String)>, InvalidTopology> {
    let sources: Vec<&String> = g
        .source_topics
        .iter()
        .filter_map(|i| s.source_topics.get(*i as usize))
        .collect();
    let reps: Vec<&TopicInfo> = g
        .repartition_source_topics
        .iter()
        .filter_map(|i| s.repartition_sources.get(*i as usize))
        .collect();
    let not_same = |m: &BTreeMap<String, i32>| {
        Some((
            status::INCORRECTLY_PARTITIONED_TOPICS,
            format!(
                "Following topics do not have the same number of partitions: [{}]",
                counts_map(m)
            ),
        ))
    };
    let target = if sources.is_empty() {
        let fixed: BTreeMap<String, i32> = reps
            .iter()
            .filter(|r| r.partitions > 0 || topics.contains_key(&r.name))
            .map(|r| (r.name.clone(), counts.get(&r.name).copied().unwrap_or(0)))
            .collect();
        if !fixed.is_empty() {
            if fixed.values().collect::<BTreeSet<_>>().len() > 1 {
                return Ok(not_same(&fixed));
            }
            *fixed.values().next().expect("non-empty")
        } else {
            let max = reps
                .iter()
                .filter_map(|r| counts.get(&r.name))
                .copied()
                .max()
                .unwrap_or(0);
            if max == 0 {
                let names: Vec<&str> = reps.iter().map(|r| r.name.as_str()).collect();
                return Err(InvalidTopology(format!(
                    "All topics in the copartition group had undefined partition number: [{}]",
                    names.join(", ")
                )));
            }
            max
        }
    } else {
        let found: BTreeMap<String, i32> = sources
            .iter()
            .map(|n| ((*n).clone(), topics.get(*n).copied().unwrap_or(0)))
            .collect();
        if found.values().collect::<BTreeSet<_>>().len() > 1 {
            return Ok(not_same(&found));
        }
        let n = *found.values().next().expect("non-empty");
        for r in &reps {
            let fixed = r.partitions > 0 || topics.contains_key(&r.name);
            let have = counts.get(&r.name).copied().unwrap_or(0);
            if fixed && have != n {
                return Ok(Some((
                    status::INCORRECTLY_PARTITIONED_TOPICS,
                    format!(
                        "Number of partitions [{have}] of repartition topic [{}] doesn't match \
                         number of partitions [{n}] of the source topic.",
                        r.name
                    ),
                )));
            }
        }
        n
    };
    for r in reps {
        counts.insert(r.name.clone(), target);
    }
    Ok(None)
}
