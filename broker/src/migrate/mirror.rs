//! The copy loop of `strom migrate mirror`: discover topics, fetch raw batches from each
//! partition's leader, append them at their offsets, fdatasync, record progress; copy group
//! offsets on an interval and at the end.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::rc::Rc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::client::SourceClient;
use super::metrics::MirrorMetrics;
use super::state::{copied_topic, pattern, GroupOffset, MigrateState, PartitionProgress};
use super::target::Target;
use super::{MigrateError, MirrorArgs};
use crate::coordinator::group::topic_regex::TopicRegex;

/// How often the source's topic list and leaders are read again.
const METADATA_INTERVAL: Duration = Duration::from_secs(30);
/// Progress is recorded at least this often while data flows (each time after an fdatasync).
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
/// Bound of one partition's share of a fetch answer.
const PARTITION_MAX_BYTES: i32 = 8 << 20;
const FETCH_MAX_WAIT_MS: i32 = 500;
/// A failed source request (a broker restarting, a network blip) is retried with a backoff
/// from `RETRY_MIN` doubling to `RETRY_MAX`; after failing for `RETRY_FOR` in a row the
/// mirror stops with the error (a rerun resumes where it stopped).
const RETRY_MIN: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(10);
const RETRY_FOR: Duration = Duration::from_secs(120);

// Kafka error codes the loop reacts to.
const OFFSET_OUT_OF_RANGE: i16 = 1;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

struct Part {
    leader: i32,
    /// Next source offset to fetch: Strom's log end.
    next: i64,
    /// Source high watermark as last seen (-1: not yet).
    hwm: i64,
    /// Where this run started, for the progress bar.
    started_at: i64,
}

struct Mirror {
    args: MirrorArgs,
    client: SourceClient,
    target: Target,
    topics_re: TopicRegex,
    groups_re: TopicRegex,
    parts: BTreeMap<(String, i32), Part>,
    groups_copied: BTreeMap<String, BTreeMap<(String, i32), i64>>,
    refresh_metadata: bool,
    round: usize,
    bytes: u64,
    progress: Progress,
    metrics: MirrorMetrics,
    /// Appended since the last checkpoint.
    dirty: bool,
    /// The background fdatasync of the last checkpoint, while it runs or until recorded.
    syncing: Option<tokio::task::JoinHandle<Result<(), MigrateError>>>,
    last_metadata: Instant,
    last_checkpoint: Instant,
    last_groups: Option<Instant>,
}

pub async fn run(args: MirrorArgs, metrics: MirrorMetrics) -> anyhow::Result<()> {
    let (config, origins) = super::broker_config(&args.target)?;
    let topics_re = pattern(&args.topics)?;
    let groups_re = pattern(&args.groups)?;
    // The source first: an unreachable source must not leave anything behind on Strom.
    let timeout = Duration::from_secs(args.timeout_secs);
    let client = SourceClient::connect(&args.source, timeout).await?;
    let target = Target::open(config, origins)?;
    let prev = MigrateState::load(&target.data_dir)?;
    if let Some(p) = &prev {
        if p.source != args.source {
            tracing::warn!(recorded = %p.source, now = %args.source,
                "this data dir was mirrored from another source address; batches are compared before anything is written");
        }
    }
    let stop = Rc::new(Cell::new(false));
    {
        let stop = stop.clone();
        tokio::task::spawn_local(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            stop.set(true);
        });
    }
    let groups_copied = prev.map(|p| p.groups_map()).unwrap_or_default();
    for (g, offsets) in &groups_copied {
        for ((t, p), o) in offsets {
            metrics.group_offset(g, t, *p, *o, false);
        }
    }
    let mut m = Mirror {
        client,
        target,
        topics_re,
        groups_re,
        parts: BTreeMap::new(),
        groups_copied,
        refresh_metadata: false,
        round: 0,
        bytes: 0,
        progress: Progress::new(),
        metrics,
        dirty: false,
        syncing: None,
        last_metadata: Instant::now(),
        last_checkpoint: Instant::now(),
        last_groups: None,
        args,
    };
    m.discover().await?;
    let mut failing_since: Option<Instant> = None;
    let mut backoff = RETRY_MIN;
    while !stop.get() {
        match m.step().await {
            Ok(appended) => {
                failing_since = None;
                backoff = RETRY_MIN;
                if m.args.until_caught_up && appended == 0 && m.caught_up() {
                    break;
                }
            }
            Err(MigrateError::Source(e)) => {
                m.metrics.source_error("request");
                if failing_since.get_or_insert_with(Instant::now).elapsed() >= RETRY_FOR {
                    return Err(MigrateError::Source(format!(
                        "{e} (failing for {}s; rerun to resume)",
                        RETRY_FOR.as_secs()
                    ))
                    .into());
                }
                tracing::warn!(error = %e, retry_in = ?backoff, "source request failed; retrying");
                let until = Instant::now() + backoff;
                while Instant::now() < until && !stop.get() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                backoff = (backoff * 2).min(RETRY_MAX);
                m.metrics.source_retries.inc();
                // The leader may have moved: a failed broker's partitions have new ones.
                m.refresh_metadata = true;
            }
            Err(e) => return Err(e.into()),
        }
    }
    m.checkpoint().await?;
    m.copy_groups().await?;
    m.progress.finish(&m.parts, m.bytes);
    Ok(())
}

impl Mirror {
    /// One round: metadata when due, a fetch from every leader, a checkpoint and the group
    /// offsets when due. Returns the number of batches appended.
    async fn step(&mut self) -> Result<usize, MigrateError> {
        if self.refresh_metadata || self.last_metadata.elapsed() >= METADATA_INTERVAL {
            self.discover().await?;
            self.last_metadata = Instant::now();
        }
        let appended = self.fetch_round().await?;
        self.metrics.set_caught_up(self.caught_up());
        if self.dirty && self.last_checkpoint.elapsed() >= CHECKPOINT_INTERVAL {
            self.checkpoint_in_background().await?;
        }
        self.progress.show(&self.parts, self.bytes);
        let group_interval = Duration::from_secs(self.args.group_interval_secs);
        if self
            .last_groups
            .is_none_or(|t| t.elapsed() >= group_interval)
        {
            self.copy_groups().await?;
            self.last_groups = Some(Instant::now());
        }
        Ok(appended)
    }

    /// Reads the source's topics; creates and opens the new ones on Strom (checking that
    /// what Strom holds already is the source's data) and updates leaders.
    async fn discover(&mut self) -> Result<(), MigrateError> {
        self.refresh_metadata = false;
        let topics = self.client.metadata(None).await?;
        for t in topics {
            if !copied_topic(&t.name, &self.topics_re) {
                continue;
            }
            let n = t.partitions.len() as i32;
            match self.target.topic(&t.name) {
                Some(meta)
                    if meta.partitions < n && self.parts.contains_key(&(t.name.clone(), 0)) =>
                {
                    // Partitions added on the source while mirroring.
                    self.target.grow_topic(&t.name, n)?;
                }
                Some(_) => self.target.ensure_topic(&t.name, n, BTreeMap::new())?,
                None => {
                    let configs = self.configs(&t.name).await?;
                    tracing::info!(topic = %t.name, partitions = n, ?configs, "creating topic");
                    self.target.ensure_topic(&t.name, n, configs)?;
                }
            }
            for &(p, leader) in &t.partitions {
                let key = (t.name.clone(), p);
                if let Some(part) = self.parts.get_mut(&key) {
                    part.leader = leader;
                    continue;
                }
                let end = self.target.open_partition(&t.name, p)?.log.log_end_offset();
                self.verify(&t.name, p, leader).await?;
                self.metrics.partition(&t.name, p, -1, end);
                self.parts.insert(
                    key,
                    Part {
                        leader,
                        next: end,
                        hwm: -1,
                        started_at: end,
                    },
                );
            }
        }
        Ok(())
    }

    async fn configs(&mut self, topic: &str) -> Result<BTreeMap<String, String>, MigrateError> {
        source_configs(&mut self.client, topic).await
    }

    /// Refuses a partition whose Strom log is not a prefix of the source's: its first and
    /// last batches must equal the source's batches at those offsets.
    async fn verify(&mut self, topic: &str, p: i32, leader: i32) -> Result<(), MigrateError> {
        let log = &self.target.logs[&(topic.to_string(), p)].log;
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        if end == start {
            return Ok(());
        }
        for (offset, is_last) in [(start, false), (end - 1, true)] {
            let Some((ours, our_bytes)) = self.target.batch_at(topic, p, offset)? else {
                continue;
            };
            let wants = [(topic.to_string(), p, ours.base_offset)];
            let resp = self.client.fetch(leader, &wants, 0, 1, 1).await?;
            let fp = resp
                .into_iter()
                .flat_map(|(_, ps)| ps)
                .find(|x| x.partition == p);
            let Some(fp) = fp else {
                return Err(MigrateError::Source(format!(
                    "{topic}-{p}: no fetch answer"
                )));
            };
            if fp.error_code == OFFSET_OUT_OF_RANGE {
                if is_last {
                    return Err(MigrateError::Refused(format!(
                        "{topic}-{p}: Strom holds offsets up to {} but the source has no offset {}: \
                         this is not a copy of the source (delete the topic on Strom or use another data dir)",
                        end - 1,
                        ours.base_offset
                    )));
                }
                continue; // the source deleted its first batches since (retention)
            }
            if fp.error_code != 0 {
                return Err(MigrateError::Source(format!(
                    "{topic}-{p}: fetch error code {}",
                    fp.error_code
                )));
            }
            let theirs = storage::batch::BatchIter::new(&fp.records).next();
            let same = match theirs {
                Some(Ok((h, b))) => h.base_offset == ours.base_offset && b[16..] == our_bytes[..],
                _ => false,
            };
            if !same {
                return Err(MigrateError::Refused(format!(
                    "{topic}-{p}: Strom's batch at offset {} differs from the source's; \
                     nothing was written (delete the topic on Strom or use another data dir)",
                    ours.base_offset
                )));
            }
        }
        Ok(())
    }

    /// One fetch per source leader over all its partitions; appends what came back.
    /// Returns the number of batches appended.
    async fn fetch_round(&mut self) -> Result<usize, MigrateError> {
        self.round += 1;
        let mut by_leader: BTreeMap<i32, Vec<(String, i32, i64)>> = BTreeMap::new();
        for ((t, p), part) in &self.parts {
            by_leader
                .entry(part.leader)
                .or_default()
                .push((t.clone(), *p, part.next));
        }
        let mut appended = 0;
        for (leader, mut wants) in by_leader {
            // Kafka fills a fetch answer in request order: rotate so no partition starves.
            let n = wants.len();
            wants.rotate_left(self.round % n.max(1));
            let max_bytes = self.args.fetch_max_bytes;
            let answer = self
                .client
                .fetch(
                    leader,
                    &wants,
                    FETCH_MAX_WAIT_MS,
                    max_bytes,
                    PARTITION_MAX_BYTES.min(max_bytes),
                )
                .await?;
            for (topic, parts) in answer {
                for fp in parts {
                    let key = (topic.clone(), fp.partition);
                    match fp.error_code {
                        0 => {}
                        OFFSET_OUT_OF_RANGE => {
                            self.metrics.source_error("offset_out_of_range");
                            self.out_of_range(&topic, fp.partition).await?;
                            continue;
                        }
                        code @ (UNKNOWN_TOPIC_OR_PARTITION
                        | NOT_LEADER_OR_FOLLOWER
                        | FENCED_LEADER_EPOCH
                        | UNKNOWN_LEADER_EPOCH) => {
                            self.metrics.source_error(retriable_name(code));
                            self.refresh_metadata = true;
                            continue;
                        }
                        code => {
                            return Err(MigrateError::Source(format!(
                                "fetch {topic}-{}: error code {code}",
                                fp.partition
                            )))
                        }
                    }
                    let done = if fp.records.is_empty() {
                        Default::default()
                    } else {
                        self.target
                            .append(&topic, fp.partition, &fp.records)
                            .await?
                    };
                    appended += done.batches;
                    self.dirty |= done.batches > 0;
                    self.bytes += done.bytes as u64;
                    self.metrics
                        .copied(&topic, fp.partition, done.batches, done.bytes);
                    let end = self.target.logs[&key].log.log_end_offset();
                    if let Some(part) = self.parts.get_mut(&key) {
                        part.next = end;
                        part.hwm = fp.high_watermark;
                    }
                    self.metrics
                        .partition(&topic, fp.partition, fp.high_watermark, end);
                }
            }
        }
        Ok(appended)
    }

    /// The fetch offset left the source's log: below its start (retention removed data
    /// before it was copied) the copy continues at the start, leaving a gap as Kafka's
    /// own logs may have; above its end, Strom holds offsets the source does not.
    async fn out_of_range(&mut self, topic: &str, p: i32) -> Result<(), MigrateError> {
        let key = (topic.to_string(), p);
        let (leader, next) = {
            let part = &self.parts[&key];
            (part.leader, part.next)
        };
        let earliest = self.client.list_offsets(leader, topic, &[p], -2).await?;
        let latest = self.client.list_offsets(leader, topic, &[p], -1).await?;
        let (Some(&earliest), Some(&latest)) = (earliest.get(&p), latest.get(&p)) else {
            self.refresh_metadata = true;
            return Ok(());
        };
        if next > latest {
            return Err(MigrateError::Refused(format!(
                "{topic}-{p}: Strom's log ends at {next}, beyond the source's end {latest}: \
                 the source was truncated or recreated"
            )));
        }
        if next < earliest {
            let log = &self.target.logs[&key].log;
            if log.log_end_offset() > log.log_start_offset() {
                tracing::warn!(topic, partition = p, from = next, to = earliest,
                    "the source deleted these offsets before they were copied; Strom's log has a gap there");
            }
            let part = self.parts.get_mut(&key).expect("known partition");
            part.next = earliest;
            part.started_at = part.started_at.max(earliest);
        }
        Ok(())
    }

    fn caught_up(&self) -> bool {
        self.parts.values().all(|p| p.hwm >= 0 && p.next >= p.hwm)
    }

    /// fdatasync, then record the durable ends as progress.
    /// The last checkpoint: waits for a background one, then syncs everything.
    async fn checkpoint(&mut self) -> Result<(), MigrateError> {
        if let Some(sync) = self.syncing.take() {
            sync.await
                .map_err(|e| MigrateError::Target(format!("log sync task: {e}")))??;
        }
        self.target.flush().await?;
        self.dirty = false;
        self.save_state()
    }

    /// A checkpoint that does not stall the copy: once the previous background fdatasync
    /// has finished, records what it made durable (recovery points, progress file) and
    /// starts the next one over everything appended since; while one runs, nothing. With
    /// the fdatasync awaited in line, each checkpoint stopped fetching for as long as the
    /// disk took to write a second's worth of copied data (the page cache holds it dirty
    /// until then), which held the mirror near half the source's consume rate.
    async fn checkpoint_in_background(&mut self) -> Result<(), MigrateError> {
        if let Some(sync) = self.syncing.take() {
            if !sync.is_finished() {
                self.syncing = Some(sync);
                return Ok(());
            }
            sync.await
                .map_err(|e| MigrateError::Target(format!("log sync task: {e}")))??;
            self.target.record_durable()?;
            self.save_state()?;
        }
        self.syncing = Some(tokio::task::spawn_local(self.target.sync_logs()));
        self.dirty = false;
        self.last_checkpoint = Instant::now();
        Ok(())
    }

    fn save_state(&self) -> Result<(), MigrateError> {
        let partitions = self
            .parts
            .iter()
            .map(|((t, p), part)| PartitionProgress {
                topic: t.clone(),
                partition: *p,
                copied: self.target.logs[&(t.clone(), *p)].log.durable_end_offset(),
                source_end: part.hwm,
            })
            .collect();
        let group_offsets = self
            .groups_copied
            .iter()
            .flat_map(|(g, m)| {
                m.iter().map(move |((t, p), o)| GroupOffset {
                    group: g.clone(),
                    topic: t.clone(),
                    partition: *p,
                    offset: *o,
                })
            })
            .collect();
        MigrateState {
            source: self.args.source.clone(),
            topics: self.args.topics.clone(),
            groups: self.args.groups.clone(),
            updated_ms: crate::now_ms(),
            partitions,
            group_offsets,
        }
        .save(&self.target.data_dir)
    }

    /// Copies the committed offsets of matching groups on mirrored topics that changed
    /// since the last copy (fdatasync'd into `__consumer_offsets`), then records them.
    async fn copy_groups(&mut self) -> Result<(), MigrateError> {
        let mut changed_any = false;
        for g in self.client.list_groups().await? {
            if !self.groups_re.matches(&g) {
                continue;
            }
            let offsets = self.client.committed_offsets(&g).await?;
            let copied = self.groups_copied.entry(g.clone()).or_default();
            let changed: Vec<_> = offsets
                .into_iter()
                .filter(|(tp, (o, _, _))| self.parts.contains_key(tp) && copied.get(tp) != Some(o))
                .collect();
            if changed.is_empty() {
                continue;
            }
            self.target.commit_offsets(&g, &changed).await?;
            for ((t, p), (o, _, _)) in changed {
                self.metrics.group_offset(&g, &t, p, o, true);
                copied.insert((t, p), o);
            }
            changed_any = true;
            tracing::debug!(group = %g, "copied committed offsets");
        }
        if changed_any {
            self.save_state()?;
        }
        Ok(())
    }
}

/// The `strom_migrate_source_errors_total` label of a partition error the loop handles.
fn retriable_name(code: i16) -> &'static str {
    match code {
        UNKNOWN_TOPIC_OR_PARTITION => "unknown_topic_or_partition",
        NOT_LEADER_OR_FOLLOWER => "not_leader_or_follower",
        FENCED_LEADER_EPOCH => "fenced_leader_epoch",
        UNKNOWN_LEADER_EPOCH => "unknown_leader_epoch",
        _ => "other",
    }
}

/// A progress bar on a terminal, a log line every few seconds otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    last_line: Instant,
}

impl Progress {
    fn new() -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new(0);
            b.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:40}] {pos}/{len} offsets  {msg}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            b
        });
        Progress {
            bar,
            started: Instant::now(),
            last_line: Instant::now(),
        }
    }

    fn figures(
        parts: &BTreeMap<(String, i32), Part>,
        bytes: u64,
        secs: f64,
    ) -> (u64, u64, i64, f64) {
        let total: i64 = parts
            .values()
            .map(|p| (p.hwm.max(p.next) - p.started_at).max(0))
            .sum();
        let done: i64 = parts.values().map(|p| (p.next - p.started_at).max(0)).sum();
        let lag: i64 = parts.values().map(|p| (p.hwm - p.next).max(0)).sum();
        let mbs = bytes as f64 / 1e6 / secs.max(0.001);
        (done as u64, total as u64, lag, mbs)
    }

    fn show(&mut self, parts: &BTreeMap<(String, i32), Part>, bytes: u64) {
        let secs = self.started.elapsed().as_secs_f64();
        let (done, total, lag, mbs) = Self::figures(parts, bytes, secs);
        match &self.bar {
            Some(b) => {
                b.set_length(total);
                b.set_position(done);
                b.set_message(format!(
                    "{:.1} MB, {mbs:.1} MB/s, lag {lag}",
                    bytes as f64 / 1e6
                ));
            }
            None if self.last_line.elapsed() >= Duration::from_secs(5) => {
                self.last_line = Instant::now();
                tracing::info!(
                    partitions = parts.len(),
                    copied_offsets = done,
                    lag_offsets = lag,
                    mb = bytes as f64 / 1e6,
                    mb_per_s = format!("{mbs:.1}"),
                    "mirroring"
                );
            }
            None => {}
        }
    }

    fn finish(&mut self, parts: &BTreeMap<(String, i32), Part>, bytes: u64) {
        let secs = self.started.elapsed().as_secs_f64();
        let (done, _, lag, mbs) = Self::figures(parts, bytes, secs);
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        tracing::info!(
            partitions = parts.len(),
            copied_offsets = done,
            lag_offsets = lag,
            mb = bytes as f64 / 1e6,
            mb_per_s = format!("{mbs:.1}"),
            "mirror stopped"
        );
    }
}

/// The source topic's own configs that Strom knows; others are reported and left out.
pub(super) async fn source_configs(
    client: &mut SourceClient,
    topic: &str,
) -> Result<BTreeMap<String, String>, MigrateError> {
    let mut out = BTreeMap::new();
    for (k, v) in client.topic_configs(topic).await? {
        match crate::config::topic::validate(&k, &v) {
            Ok(()) => {
                out.insert(k, v);
            }
            Err(e) => tracing::warn!(topic, key = %k, value = %v, error = %e,
                "topic config not carried over"),
        }
    }
    Ok(out)
}
