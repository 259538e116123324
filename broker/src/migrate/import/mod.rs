//! `strom migrate import`: adopts the partitions of a stopped Kafka broker's log dirs.
//!
//! Nothing Kafka wrote is used unchecked: every batch of every segment is verified first
//! (framing, CRC, offsets increasing) and only then appended to Strom's log at its own
//! offset, so Strom writes its own offset and time indexes and rebuilds the
//! aborted-transaction index from the markers (what the mirror does with fetched batches).
//! With `--link`, closed segments are hard-linked instead of appended (see `plan_links`).
//! A corrupt segment refuses the whole import before Strom's data dir is opened. Producer
//! snapshots are carried over after their CRC is checked; committed group offsets are read
//! from Kafka's `__consumer_offsets` and re-keyed into Strom's own partition of each group;
//! topic configs come from `--configs-from` or Kafka's KRaft metadata log (`kraft`).
//!
//! The steps, one file each: `plan` picks the partitions (and refuses a partial or ambiguous
//! log dir), `verify` reads every batch and plans the links, `adopt` appends or links them into
//! Strom's log and carries the producer snapshots, `offsets` folds Kafka's committed offsets;
//! `configs` the topic and broker configs, `progress` the progress bar, `report` the summary.

mod adopt;
mod configs;
mod offsets;
mod plan;
mod progress;
mod report;
#[cfg(test)]
mod tests;
mod verify;

use std::collections::BTreeMap;
use std::time::Duration;

use super::client::SourceClient;
use super::metrics::ImportMetrics;
use super::source;
use super::state::pattern;
use super::target::Target;
use super::{ImportArgs, MigrateError};
use adopt::{adopt_partition, carry_snapshot};
use configs::{carry_broker_configs, metadata_topic_configs, read_metadata};
use offsets::read_group_offsets;
use plan::{check_same_filesystem, select_partitions};
use progress::{segment_bytes, ImportProgress};
pub use report::Report;
use verify::{verify_partition, LinkPlan};

pub async fn run(args: ImportArgs, metrics: &ImportMetrics) -> anyhow::Result<Report> {
    let (config, origins) = super::broker_config(&args.target)?;
    let topics_re = pattern(&args.topics)?;
    let groups_re = pattern(&args.groups)?;
    let mut report = Report::default();
    let scan = source::scan(&args.from)?;
    report.not_carried.extend(scan.not_carried.iter().cloned());
    let metadata = match args.configs_from {
        Some(_) => None,
        None => read_metadata(&args, &scan.metadata, &mut report)?,
    };
    let (topics, offsets_parts) =
        select_partitions(scan.partitions, metadata.as_ref(), &topics_re, &mut report)?;
    if args.link {
        check_same_filesystem(&args.from, &config.data_dir)?;
    }
    metrics
        .partitions
        .set(topics.values().map(|(_, ps)| ps.len() as i64).sum());
    let total: u64 = topics
        .values()
        .flat_map(|(_, ps)| ps)
        .map(|p| segment_bytes(&p.dir))
        .sum();
    let (verified, imported) = metrics.byte_totals();
    let _progress = ImportProgress::start(total, verified, imported);
    // First pass: verify everything before Strom's data dir is touched.
    let mut links = BTreeMap::new();
    for (_, parts) in topics.values() {
        for p in parts {
            let plan = verify_partition(p, args.link, metrics)?;
            links.insert((p.topic.clone(), p.partition), plan);
        }
    }
    let groups = read_group_offsets(&offsets_parts, &groups_re)?;
    let mut configs: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    if let Some(bs) = &args.configs_from {
        let mut client = SourceClient::connect(bs, Duration::from_secs(args.timeout_secs)).await?;
        for name in topics.keys() {
            let c = super::mirror::source_configs(&mut client, name).await?;
            configs.insert(name.clone(), c);
        }
    }

    // Kafka's log start offsets (DeleteRecords, or retention inside a batch): a start inside
    // the first batch cannot be kept, Strom's log starts at that batch (reported).
    let log_starts = scan.log_starts;
    let mut target = Target::open(config, origins)?;
    for (name, (_, parts)) in &topics {
        let Some(meta) = target.topic(name) else {
            continue;
        };
        if meta.partitions != parts.len() as i32 {
            return Err(MigrateError::Refused(format!(
                "topic {name} exists on Strom with {} partitions, the Kafka log dir has {}",
                meta.partitions,
                parts.len()
            ))
            .into());
        }
        for p in 0..meta.partitions {
            let end = target.open_partition(name, p)?.log.log_end_offset();
            if end > 0 {
                return Err(MigrateError::Refused(format!(
                    "topic {name} exists on Strom with data ({name}-{p} ends at offset {end}); \
                     delete it on Strom first"
                ))
                .into());
            }
        }
    }
    if let Some(m) = &metadata {
        carry_broker_configs(&target, m, scan.node_id, &mut report)?;
    }
    for (name, (id, parts)) in &topics {
        let (c, from) = match (configs.remove(name), &metadata) {
            (Some(c), _) => {
                let from = format!("from the source ({} set)", c.len());
                (c, from)
            }
            (None, Some(m)) => {
                let c = metadata_topic_configs(name, m, &mut report);
                let from = format!("from Kafka's metadata log ({} set)", c.len());
                (c, from)
            }
            (None, None) => (BTreeMap::new(), "Strom's defaults".to_string()),
        };
        if target.topic(name).is_none() {
            target.create_topic_with_id(name, *id, parts.len() as i32, c)?;
        }
        let (mut batches, mut bytes) = (0usize, 0u64);
        for p in parts {
            let key = (p.topic.clone(), p.partition);
            let mut plan = links.remove(&key).unwrap_or_default();
            if target.logs.contains_key(&key) {
                // An empty partition Strom had already: appended into, not linked.
                plan = LinkPlan::default();
            }
            let (b, s) = adopt_partition(&mut target, p, plan, &mut report, metrics).await?;
            batches += b;
            bytes += s;
            let ours = target.logs[&key].log.log_start_offset();
            if let Some(&start) = log_starts.get(&key) {
                if start > ours {
                    report.not_carried.push(format!(
                        "{}-{}: Kafka's log start offset {start}; Strom's log starts at {ours}",
                        p.topic, p.partition
                    ));
                }
            }
            for (pid, first) in target.logs[&key].open_transactions() {
                report.not_carried.push(format!(
                    "{}-{}: the transaction of producer {pid} open since offset {first} \
                     (Kafka stopped before its marker): read_committed consumers stop there",
                    p.topic, p.partition
                ));
            }
            match carry_snapshot(&target, p)? {
                Ok(()) => {
                    report.snapshots += 1;
                    metrics.producer_snapshots.inc();
                }
                Err(why) => report
                    .not_carried
                    .push(format!("{}-{}: {why}", p.topic, p.partition)),
            }
        }
        report
            .topics
            .insert(name.clone(), (parts.len() as i32, batches, bytes, from));
    }
    target.flush().await?;
    for (group, offsets) in groups {
        let (kept, dropped): (Vec<_>, Vec<_>) = offsets
            .into_iter()
            .partition(|((t, _), _)| topics.contains_key(t));
        for ((t, p), _) in dropped {
            report.not_carried.push(format!(
                "group {group}: offset of {t}-{p} (topic not imported)"
            ));
        }
        if kept.is_empty() {
            continue;
        }
        target.commit_offsets(&group, &kept).await?;
        report.groups += 1;
        report.offsets += kept.len();
        metrics.groups.inc();
        metrics.group_offsets.inc_by(kept.len() as u64);
    }
    report.not_carried.push(
        "leader-epoch-checkpoint: Strom's copy starts at leader epoch 0, as the mirror's".into(),
    );
    Ok(report)
}
