//! What `strom migrate import` carried over, and what it did not (and why): the summary it
//! prints at the end.

use std::collections::BTreeMap;
use std::fmt;

/// What the import carried over, and what it did not (and why).
#[derive(Debug, Default)]
pub struct Report {
    /// topic -> (partitions, batches, bytes, where the configs came from)
    pub topics: BTreeMap<String, (i32, usize, u64, String)>,
    pub groups: usize,
    pub offsets: usize,
    pub snapshots: usize,
    /// Kafka segments hard-linked (`--link`) and their bytes.
    pub linked: (usize, u64),
    /// Dynamic broker configs carried from Kafka's metadata log.
    pub broker_configs: Vec<String>,
    /// What of Kafka's metadata log was read for the configs.
    pub metadata: Option<String>,
    pub not_carried: Vec<String>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (mut parts, mut batches, mut bytes) = (0, 0, 0);
        writeln!(f, "imported topics:")?;
        for (name, (n, b, s, configs)) in &self.topics {
            writeln!(
                f,
                "  {name}: {n} partitions, {b} batches, {s} bytes, configs {configs}"
            )?;
            parts += n;
            batches += b;
            bytes += s;
        }
        writeln!(
            f,
            "total: {} topics, {parts} partitions, {batches} batches, {bytes} bytes, \
             {} producer snapshots, {} committed offsets of {} groups",
            self.topics.len(),
            self.snapshots,
            self.offsets,
            self.groups
        )?;
        if self.linked.0 > 0 {
            writeln!(
                f,
                "hard-linked: {} segments, {} bytes (the rest copied)",
                self.linked.0, self.linked.1
            )?;
        }
        if let Some(m) = &self.metadata {
            writeln!(f, "configs read from Kafka's metadata log: {m}")?;
        }
        for c in &self.broker_configs {
            writeln!(f, "broker config carried: {c}")?;
        }
        for n in &self.not_carried {
            writeln!(f, "not carried over: {n}")?;
        }
        Ok(())
    }
}
