//! `strom consume TOPIC...`: records through librdkafka, printed through a kcat-style template
//! or as JSON lines. Without `--group` the partitions are assigned at the offsets asked for;
//! with it the consumer joins the group and commits what it printed.
//!
//! Without `--follow` it stops at the end as it was when consumption started: once every
//! partition's position (librdkafka's next fetch offset, past control records too) reaches the
//! high watermark read at the start, or at assignment for a group.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use super::error::CliError;
use super::offsets::{self, OffsetSpec};
use super::produce::describe_kafka_error;
use super::template::{Rec, Template};
use super::{split_kv, ConnArgs};

#[derive(clap::Args)]
pub struct ConsumeArgs {
    #[arg(required = true)]
    pub topics: Vec<String>,
    /// Where to start: start, end, OFFSET or @TIMESTAMP_MS (with --group: start or end, used
    /// when the group has no committed offset).
    #[arg(short, long, default_value = "start")]
    pub offset: String,
    /// Partitions to read (default: all), comma-separated; not with --group.
    #[arg(short, long, value_delimiter = ',', conflicts_with = "group")]
    pub partitions: Vec<i32>,
    /// Consume as a member of this group and commit the offsets read.
    #[arg(short, long)]
    pub group: Option<String>,
    /// Stop after this many records.
    #[arg(short, long)]
    pub num: Option<u64>,
    /// Keep waiting for new records at the end.
    #[arg(short = 'F', long)]
    pub follow: bool,
    /// A template (`%k %v\n`, fields in docs/cli.md) or `json` (one object per line).
    #[arg(short, long, default_value = "%v\\n")]
    pub format: String,
    /// librdkafka property KEY=VALUE, repeatable (e.g. -X isolation.level=read_uncommitted).
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
}

#[derive(Serialize)]
struct JsonHeader<'a> {
    key: &'a str,
    value: Option<String>,
}

#[derive(Serialize)]
struct JsonRecord<'a> {
    topic: &'a str,
    partition: i32,
    offset: i64,
    timestamp: Option<i64>,
    key: Option<String>,
    value: Option<String>,
    headers: Vec<JsonHeader<'a>>,
}

enum Output {
    Template(Template),
    Json,
}

/// Per partition: where reading starts when known (`None` for a group member) and the end.
type Ends = BTreeMap<(String, i32), (Option<i64>, i64)>;

pub async fn run(conn: &ConnArgs, args: ConsumeArgs) -> Result<(), CliError> {
    let output = if args.format == "json" {
        Output::Json
    } else {
        Output::Template(Template::parse(&args.format)?)
    };
    let spec = OffsetSpec::parse(&args.offset)?;
    let mut admin = conn.client().await?;
    // The partitions (and leaders) of every topic; an unknown topic is an error here, not a
    // consumer waiting forever.
    let mut layout: BTreeMap<String, Vec<(i32, i32)>> = BTreeMap::new();
    for t in &args.topics {
        let meta = super::topic::partitions_of(&mut admin, t).await?;
        let parts: Vec<(i32, i32)> = meta
            .partitions
            .iter()
            .filter(|p| args.partitions.is_empty() || args.partitions.contains(&p.partition_index))
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect();
        if let Some(missing) = args
            .partitions
            .iter()
            .find(|p| !parts.iter().any(|(i, _)| i == *p))
        {
            return Err(CliError::kafka(format!("{t} partition {missing}"), 3, None));
        }
        layout.insert(t.clone(), parts);
    }

    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &conn.brokers)
        .set("client.id", "strom-cli")
        .set("enable.partition.eof", "true")
        .set("socket.timeout.ms", conn.timeout_ms().max(10).to_string());
    conn.security.librdkafka_config(&mut config)?;
    let mut ends: Ends = BTreeMap::new();
    let mut assign = TopicPartitionList::new();
    match &args.group {
        Some(group) => {
            let reset = match spec {
                OffsetSpec::Start => "earliest",
                OffsetSpec::End => "latest",
                _ => return Err(CliError::Usage("with --group, --offset is start or end (for partitions without a committed offset); move a group with `strom group seek`".into())),
            };
            config
                .set("group.id", group)
                .set("auto.offset.reset", reset)
                // Committed by us, exactly what was printed (`commit_printed`).
                .set("enable.auto.commit", "false");
        }
        None => {
            config
                .set("group.id", "strom-cli")
                .set("enable.auto.commit", "false");
            for (t, parts) in &layout {
                let end = offsets::list(&mut admin, t, parts, OffsetSpec::End).await?;
                let start = match spec {
                    OffsetSpec::Start | OffsetSpec::Timestamp(_) => {
                        offsets::resolve(&mut admin, t, parts, spec).await?
                    }
                    OffsetSpec::End => end.clone(),
                    OffsetSpec::Exact(o) => parts.iter().map(|(p, _)| (*p, Ok(o))).collect(),
                };
                for (p, _) in parts {
                    let e =
                        end.get(p).cloned().unwrap_or(Err(3)).map_err(|c| {
                            CliError::kafka(format!("ListOffsets {t}/{p}"), c, None)
                        })?;
                    let s =
                        start.get(p).cloned().unwrap_or(Err(3)).map_err(|c| {
                            CliError::kafka(format!("ListOffsets {t}/{p}"), c, None)
                        })?;
                    ends.insert((t.clone(), *p), (Some(s), e));
                    assign
                        .add_partition_offset(t, *p, Offset::Offset(s))
                        .map_err(|e| CliError::Client(e.to_string()))?;
                }
            }
        }
    }
    for p in &args.properties {
        let (k, v) = split_kv(p)?;
        config.set(k, v);
    }
    let consumer: BaseConsumer = config
        .create()
        .map_err(|e| CliError::Client(format!("creating the consumer: {e}")))?;
    match &args.group {
        Some(_) => {
            let topics: Vec<&str> = args.topics.iter().map(|t| t.as_str()).collect();
            consumer
                .subscribe(&topics)
                .map_err(|e| CliError::Client(format!("subscribing: {e}")))?;
        }
        None => consumer
            .assign(&assign)
            .map_err(|e| CliError::Client(format!("assigning: {e}")))?,
    }

    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                stop.store(true, Ordering::Relaxed);
            }
        });
    }
    let timeout = conn.timeout();
    let grouped = args.group.is_some();
    tokio::task::spawn_blocking(move || {
        let follow = args.follow;
        let num = args.num;
        poll_loop(
            &consumer, &output, grouped, follow, num, ends, &stop, timeout,
        )
    })
    .await
    .map_err(|e| CliError::Client(format!("consumer thread: {e}")))?
}

#[allow(clippy::too_many_arguments)]
fn poll_loop(
    consumer: &BaseConsumer,
    output: &Output,
    grouped: bool,
    follow: bool,
    num: Option<u64>,
    mut ends: Ends,
    stop: &AtomicBool,
    timeout: Duration,
) -> Result<(), CliError> {
    let progress = progress_bar(num);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut count = 0u64;
    let mut assigned: Vec<(String, i32)> = Vec::new();
    // Partitions librdkafka reported at their end (its EOF event carries no topic: used when
    // the partition number names one partition of the topics read).
    let mut eof: std::collections::BTreeSet<(String, i32)> = Default::default();
    let mut result = Ok(());
    // Next offset per partition after the records printed: what a group member commits.
    let mut printed: BTreeMap<(String, i32), i64> = BTreeMap::new();
    let mut last_commit = std::time::Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) || num.is_some_and(|n| count >= n) {
            break;
        }
        if grouped {
            // A (re)assignment: read where this group's members' partitions end now.
            let now: Vec<(String, i32)> = consumer
                .assignment()
                .map(|l| {
                    l.elements()
                        .iter()
                        .map(|e| (e.topic().to_string(), e.partition()))
                        .collect()
                })
                .unwrap_or_default();
            if now != assigned {
                for (t, p) in &now {
                    if let std::collections::btree_map::Entry::Vacant(e) =
                        ends.entry((t.clone(), *p))
                    {
                        if let Ok((_, high)) = consumer.fetch_watermarks(t, *p, timeout) {
                            e.insert((None, high));
                        }
                    }
                }
                assigned = now;
            }
        }
        if !follow && at_end(consumer, grouped, &assigned, &ends, &eof, timeout) {
            break;
        }
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                let mut keys = ends.keys().filter(|(_, q)| *q == p);
                if let (Some(k), None) = (keys.next(), keys.next()) {
                    eof.insert(k.clone());
                }
            }
            Some(Err(e)) => {
                result = Err(CliError::Client(format!(
                    "consuming: {}",
                    describe_kafka_error(&e)
                )));
                break;
            }
            Some(Ok(m)) => {
                let written = match output {
                    Output::Json => write_json(&mut out, &m),
                    Output::Template(t) => t.render(&to_rec(&m), &mut out),
                };
                if let Err(e) = written {
                    if e.kind() == std::io::ErrorKind::BrokenPipe {
                        break;
                    }
                    result = Err(e.into());
                    break;
                }
                if grouped {
                    printed.insert((m.topic().to_string(), m.partition()), m.offset() + 1);
                    if last_commit.elapsed() >= COMMIT_EVERY {
                        if let Err(e) = commit_printed(consumer, &printed) {
                            result = Err(e);
                            break;
                        }
                        last_commit = std::time::Instant::now();
                    }
                }
                count += 1;
                if let Some(p) = &progress {
                    p.inc(1);
                }
                if progress.is_none() && std::io::stdout().is_terminal() {
                    let _ = out.flush();
                }
            }
        }
        // Records appear as they come when someone watches (a pipe gets them in blocks).
        if follow {
            let _ = out.flush();
        }
    }
    let _ = out.flush();
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    if grouped {
        if let Err(e) = commit_printed(consumer, &printed) {
            if result.is_ok() {
                result = Err(e);
            }
        }
    }
    result
}

/// A long-running group member commits this often (and at the end).
const COMMIT_EVERY: Duration = Duration::from_secs(5);

fn commit_printed(
    consumer: &BaseConsumer,
    printed: &BTreeMap<(String, i32), i64>,
) -> Result<(), CliError> {
    if printed.is_empty() {
        return Ok(());
    }
    let mut tpl = TopicPartitionList::new();
    for ((t, p), o) in printed {
        tpl.add_partition_offset(t, *p, Offset::Offset(*o))
            .map_err(|e| CliError::Client(e.to_string()))?;
    }
    consumer
        .commit(&tpl, CommitMode::Sync)
        .map_err(|e| CliError::Client(format!("committing: {}", describe_kafka_error(&e))))
}

/// Every partition read up to the end recorded for it.
fn at_end(
    consumer: &BaseConsumer,
    grouped: bool,
    assigned: &[(String, i32)],
    ends: &Ends,
    eof: &std::collections::BTreeSet<(String, i32)>,
    timeout: Duration,
) -> bool {
    let wanted: Vec<(String, i32)> = if grouped {
        if assigned.is_empty() {
            return false;
        }
        assigned.to_vec()
    } else {
        ends.keys().cloned().collect()
    };
    let Ok(positions) = consumer.position() else {
        return false;
    };
    let mut pos: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for e in positions.elements() {
        if let Offset::Offset(o) = e.offset() {
            pos.insert((e.topic().to_string(), e.partition()), o);
        }
    }
    // A group member starts at its committed offset (or the reset point) before it fetched.
    let committed = if grouped && wanted.iter().any(|k| !pos.contains_key(k)) {
        consumer.committed(timeout).ok()
    } else {
        None
    };
    wanted.iter().all(|k| {
        if eof.contains(k) {
            return true;
        }
        let Some(&(start, end)) = ends.get(k) else {
            return false;
        };
        if let Some(p) = pos.get(k) {
            return *p >= end;
        }
        if let Some(c) = &committed {
            if let Some(e) = c.find_partition(&k.0, k.1) {
                if let Offset::Offset(o) = e.offset() {
                    return o >= end;
                }
            }
        }
        start.unwrap_or(0) >= end
    })
}

fn to_rec(m: &rdkafka::message::BorrowedMessage<'_>) -> Rec {
    Rec {
        topic: m.topic().to_string(),
        partition: Some(m.partition()),
        offset: Some(m.offset()),
        key: m.key().map(|k| k.to_vec()),
        value: m.payload().map(|v| v.to_vec()),
        timestamp: m.timestamp().to_millis(),
        headers: m
            .headers()
            .map(|hs| {
                hs.iter()
                    .map(|h| (h.key.to_string(), h.value.map(|v| v.to_vec())))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn write_json(
    out: &mut impl Write,
    m: &rdkafka::message::BorrowedMessage<'_>,
) -> std::io::Result<()> {
    let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
    let headers: Vec<JsonHeader<'_>> = m
        .headers()
        .map(|hs| {
            hs.iter()
                .map(|h| JsonHeader {
                    key: h.key,
                    value: text(h.value),
                })
                .collect()
        })
        .unwrap_or_default();
    let r = JsonRecord {
        topic: m.topic(),
        partition: m.partition(),
        offset: m.offset(),
        timestamp: m.timestamp().to_millis(),
        key: text(m.key()),
        value: text(m.payload()),
        headers,
    };
    serde_json::to_writer(&mut *out, &r)?;
    out.write_all(b"\n")
}

/// A bar (with `-n`) or a spinner on stderr while records go to a file or a pipe.
fn progress_bar(num: Option<u64>) -> Option<indicatif::ProgressBar> {
    if std::io::stdout().is_terminal() || !std::io::stderr().is_terminal() {
        return None;
    }
    let p = match num {
        Some(n) => indicatif::ProgressBar::new(n).with_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} records ({per_sec}, eta {eta})",
            )
            .ok()?,
        ),
        None => indicatif::ProgressBar::new_spinner().with_style(
            indicatif::ProgressStyle::with_template("{spinner} {pos} records ({per_sec})").ok()?,
        ),
    };
    p.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    p.enable_steady_tick(Duration::from_millis(200));
    Some(p)
}
