//! The mirror's progress file (`<data-dir>/strom-migrate.json`, written atomically after the
//! logs it describes were fdatasync'd) and `strom migrate status`, which compares it with the
//! source's current end offsets and committed group offsets.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::client::SourceClient;
use super::{MigrateError, StatusArgs};
use crate::coordinator::group::topic_regex::TopicRegex;

pub const STATE_FILE: &str = "strom-migrate.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartitionProgress {
    pub topic: String,
    pub partition: i32,
    /// Strom's durable log end: every source offset below it is copied.
    pub copied: i64,
    /// The source's high watermark when last seen.
    pub source_end: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GroupOffset {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct MigrateState {
    pub source: String,
    pub topics: String,
    pub groups: String,
    pub updated_ms: i64,
    pub partitions: Vec<PartitionProgress>,
    pub group_offsets: Vec<GroupOffset>,
}

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(STATE_FILE)
}

impl MigrateState {
    pub fn load(data_dir: &Path) -> Result<Option<MigrateState>, MigrateError> {
        let p = path(data_dir);
        match std::fs::read(&p) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| MigrateError::Target(format!("{}: {e}", p.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(MigrateError::Target(format!("{}: {e}", p.display()))),
        }
    }

    pub fn save(&self, data_dir: &Path) -> Result<(), MigrateError> {
        let p = path(data_dir);
        let bytes = serde_json::to_vec_pretty(self).expect("state serialises");
        storage::logdir::write_atomic(&p, &bytes)
            .map_err(|e| MigrateError::Target(format!("{}: {e}", p.display())))
    }

    /// Copied group offsets by group, then (topic, partition).
    pub fn groups_map(&self) -> BTreeMap<String, BTreeMap<(String, i32), i64>> {
        let mut m: BTreeMap<String, BTreeMap<(String, i32), i64>> = BTreeMap::new();
        for g in &self.group_offsets {
            m.entry(g.group.clone())
                .or_default()
                .insert((g.topic.clone(), g.partition), g.offset);
        }
        m
    }
}

/// Compiles a `--topics`/`--groups` pattern (Kafka's whole-name RE2 semantics).
pub fn pattern(p: &str) -> Result<TopicRegex, MigrateError> {
    TopicRegex::parse(p).map_err(|e| MigrateError::Usage(format!("pattern `{p}`: {e}")))
}

/// Internal topics of the source are never copied: Strom keeps its own group and
/// transaction state (group offsets are copied through OffsetFetch instead).
pub fn copied_topic(name: &str, re: &TopicRegex) -> bool {
    !name.starts_with("__") && re.matches(name)
}

#[derive(Debug, Serialize)]
struct Report {
    source: String,
    caught_up: bool,
    partitions: Vec<PartitionProgress>,
    groups: Vec<GroupReport>,
}

#[derive(Debug, Serialize)]
struct GroupReport {
    group: String,
    topic: String,
    partition: i32,
    source: i64,
    copied: Option<i64>,
}

/// Prints the status; true when every partition and group offset is caught up.
pub async fn status(args: StatusArgs) -> anyhow::Result<bool> {
    let (config, _) = super::broker_config(&args.target)?;
    let state = MigrateState::load(&config.data_dir)?.ok_or_else(|| {
        MigrateError::Usage(format!(
            "no migration recorded in {} (run `strom migrate mirror` first)",
            config.data_dir.display()
        ))
    })?;
    let source = args.source.clone().unwrap_or(state.source.clone());
    let timeout = Duration::from_secs(args.timeout_secs);
    let mut client = SourceClient::connect(&source, timeout).await?;
    let topics_re = pattern(&state.topics)?;
    let groups_re = pattern(&state.groups)?;
    let copied: BTreeMap<(String, i32), i64> = state
        .partitions
        .iter()
        .map(|p| ((p.topic.clone(), p.partition), p.copied))
        .collect();
    let mut partitions = Vec::new();
    for t in client.metadata(None).await? {
        if !copied_topic(&t.name, &topics_re) {
            continue;
        }
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for (p, leader) in &t.partitions {
            by_leader.entry(*leader).or_default().push(*p);
        }
        for (leader, ps) in by_leader {
            for (p, end) in client.list_offsets(leader, &t.name, &ps, -1).await? {
                partitions.push(PartitionProgress {
                    topic: t.name.clone(),
                    partition: p,
                    copied: copied.get(&(t.name.clone(), p)).copied().unwrap_or(0),
                    source_end: end,
                });
            }
        }
    }
    let mirrored: std::collections::BTreeSet<&str> =
        partitions.iter().map(|p| p.topic.as_str()).collect();
    let copied_groups = state.groups_map();
    let mut groups = Vec::new();
    for g in client.list_groups().await? {
        if !groups_re.matches(&g) {
            continue;
        }
        for ((topic, partition), (offset, _, _)) in client.committed_offsets(&g).await? {
            if !mirrored.contains(topic.as_str()) {
                continue;
            }
            let c = copied_groups
                .get(&g)
                .and_then(|m| m.get(&(topic.clone(), partition)))
                .copied();
            groups.push(GroupReport {
                group: g.clone(),
                topic,
                partition,
                source: offset,
                copied: c,
            });
        }
    }
    let caught_up = partitions.iter().all(|p| p.copied >= p.source_end)
        && groups.iter().all(|g| g.copied == Some(g.source));
    let report = Report {
        source,
        caught_up,
        partitions,
        groups,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report, state.updated_ms);
    }
    Ok(caught_up)
}

fn print_table(r: &Report, updated_ms: i64) {
    let age = (crate::now_ms() - updated_ms).max(0) / 1000;
    println!("source {} (progress recorded {age}s ago)", r.source);
    println!(
        "{:<40} {:>9} {:>14} {:>14} {:>12}",
        "TOPIC", "PARTITION", "SOURCE-END", "COPIED", "LAG"
    );
    for p in &r.partitions {
        println!(
            "{:<40} {:>9} {:>14} {:>14} {:>12}",
            p.topic,
            p.partition,
            p.source_end,
            p.copied,
            (p.source_end - p.copied).max(0)
        );
    }
    if !r.groups.is_empty() {
        println!(
            "{:<24} {:<30} {:>9} {:>14} {:>14}",
            "GROUP", "TOPIC", "PARTITION", "SOURCE", "COPIED"
        );
        for g in &r.groups {
            let c = g.copied.map(|c| c.to_string()).unwrap_or("-".into());
            println!(
                "{:<24} {:<30} {:>9} {:>14} {:>14}",
                g.group, g.topic, g.partition, g.source, c
            );
        }
    }
    println!(
        "{}",
        if r.caught_up {
            "caught up"
        } else {
            "NOT caught up"
        }
    );
}
