//! The share groups' dead-letter queue (Kafka 4.4's KIP-1191, `share.version` 2): a record a
//! member REJECTs, or whose delivery count reaches `share.delivery.count.limit`, is written
//! to the group's `errors.deadletterqueue.topic.name` before it is archived. The record is
//! Kafka's: no key and value unless `errors.deadletterqueue.copy.record.enable`, the broker's
//! clock as its timestamp, and `__dlq.errors.*` headers (UTF-8 text) naming the source topic,
//! partition, offset, group, delivery count and cause; it goes to partition
//! `source partition % DLQ partitions`.
//!
//! Kafka's write-time checks, in Kafka's order: the name must not start with `__`; an
//! existing topic must have `errors.deadletterqueue.group.enable=true`; a missing one is
//! created only with the broker's `errors.deadletterqueue.auto.create.topics.enable` (with
//! that topic config set, and `message.timestamp.type=CreateTime`); the name must start with
//! `errors.deadletterqueue.topic.name.prefix` (default `dlq.`). As in Kafka, a write that
//! fails (a check, the append) is logged and counted, and the records are archived
//! regardless: the dead-letter topic is best effort, the share state is not.
//!
//! Kafka persists such records as ARCHIVING (state 3) until its asynchronous write is done;
//! Strom writes the dead letters first, on the share partition's own operation, and only
//! then persists the archived state. A crash in between redelivers the records (at least
//! once, as Kafka's resumed ARCHIVING batches are).

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Record, RecordBatchDecoder};

use super::inflight::Dead;
use crate::coordinator::log;
use crate::metadata::features::SHARE_VERSION;
use crate::partition::Partition;
use crate::shard::{frontend, home_shard, BrokerContext, ShardState};

pub const TOPIC_NAME: &str = "errors.deadletterqueue.topic.name";
pub const COPY_RECORD: &str = "errors.deadletterqueue.copy.record.enable";
/// The topic config that lets share groups write to a topic.
pub const GROUP_ENABLE: &str = "errors.deadletterqueue.group.enable";

/// Kafka's messages of its two causes (`ShareGroupDLQManager`).
const REJECTED: &str = "Offset rejected by client.";
const EXHAUSTED: &str = "Offset delivery count exceeded the threshold.";

/// How much of the source log one dead-letter write reads for the originals.
const READ_BUDGET: usize = 8 << 20;

/// The group's dead-letter topic, when it has one (a non-empty name).
pub fn topic_of(overrides: Option<&BTreeMap<String, String>>) -> Option<&str> {
    overrides
        .and_then(|o| o.get(TOPIC_NAME))
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
}

/// `share.version` >= 2 is finalized (Kafka's `supportsShareGroupDLQ`).
pub fn enabled(ctx: &BrokerContext) -> bool {
    ctx.features.snapshot().level(SHARE_VERSION) >= 2
}

/// Writes `dead` (records of `source_topic`-`partition`, read from `source`) to `group`'s
/// dead-letter topic. Never fails its caller: a failure is logged and counted.
pub async fn write(
    state: &Rc<ShardState>,
    group: &str,
    source_topic: &str,
    partition: i32,
    source: &Partition,
    dead: &[Dead],
) {
    if dead.is_empty() {
        return;
    }
    let metrics = &state.metrics;
    match try_write(state, group, source_topic, partition, source, dead).await {
        Ok(()) => metrics
            .share_dlq_records
            .with_label_values(&[group])
            .inc_by(dead.len() as u64),
        Err(e) => {
            metrics.share_dlq_failures.with_label_values(&[group]).inc();
            tracing::warn!(group, topic = source_topic, partition, records = dead.len(), error = %e,
                "writing to the share group's dead-letter topic failed; archiving the records regardless");
        }
    }
}

async fn try_write(
    state: &Rc<ShardState>,
    group: &str,
    source_topic: &str,
    partition: i32,
    source: &Partition,
    dead: &[Dead],
) -> Result<(), String> {
    let ctx = &state.ctx;
    let overrides = ctx.group_configs.get(group);
    let topic = topic_of(overrides.as_deref())
        .ok_or_else(|| format!("Configured DLQ topic name in share group: {group} is empty."))?
        .to_string();
    let copy = overrides
        .as_deref()
        .and_then(|o| o.get(COPY_RECORD))
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let partitions = checked_topic(ctx, group, &topic).await?;
    let originals = if copy {
        originals(source, dead)
    } else {
        HashMap::new()
    };
    let now = crate::now_ms();
    let records: Vec<Record> = dead
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let (key, value) = originals.get(&d.offset).cloned().unwrap_or((None, None));
            let mut r = log::broker_record(i, now, key, value, None);
            r.headers = headers(source_topic, partition, group, d);
            r
        })
        .collect();
    let bytes =
        log::encode_records(&records).map_err(|e| format!("encoding the dead letters: {e}"))?;
    let p = partition % partitions;
    let shard = home_shard(&topic, p, ctx.shard_count());
    frontend::invoke_on(ctx, shard, move |state| async move {
        let part = log::partition_on_shard(&state, &topic, p)
            .ok_or_else(|| format!("{topic}-{p} is not open here"))?;
        log::append_batch(&part, bytes, now)
            .await
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Kafka's `validateDlqTopic` (same order and messages), creating the topic when it is
/// missing and the broker allows it. Returns the topic's partition count.
async fn checked_topic(ctx: &BrokerContext, group: &str, topic: &str) -> Result<i32, String> {
    if topic.starts_with("__") {
        return Err(format!(
            "Configured DLQ topic name in share group: {group} cannot start with __, topic: {topic}."
        ));
    }
    let broker = ctx.catalog.broker();
    let existing = ctx.catalog.snapshot().get(topic).cloned();
    if let Some(t) = &existing {
        let on = t
            .configs
            .get(GROUP_ENABLE)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if !on {
            return Err(format!(
                "DLQ is not enabled on configured DLQ topic for share group: {group}, topic: {topic}."
            ));
        }
    } else if !broker
        .config
        .errors_deadletterqueue_auto_create_topics_enable
    {
        return Err(format!(
            "DLQ topic does not exist and auto create is disabled on cluster for share group: {group}, topic: {topic}."
        ));
    }
    let prefix = &broker.config.errors_deadletterqueue_topic_name_prefix;
    if !prefix.is_empty() && !topic.starts_with(prefix.as_str()) {
        return Err(format!(
            "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: {group}, topic: {topic}, prefix: {prefix}."
        ));
    }
    if let Some(t) = existing {
        return Ok(t.partitions);
    }
    let configs = BTreeMap::from([
        (GROUP_ENABLE.to_string(), "true".to_string()),
        (
            "message.timestamp.type".to_string(),
            "CreateTime".to_string(),
        ),
    ]);
    let partitions = broker.config.num_partitions;
    let created = match ctx.cluster.get() {
        Some(_) => {
            let rf = i32::from(broker.config.default_replication_factor);
            crate::metadata::topics::create_replicated(ctx, topic, partitions, rf, configs).await
        }
        None => crate::metadata::topics::create_topic(ctx, topic, partitions, configs).await,
    };
    match created {
        Ok(meta) => {
            tracing::info!(
                group,
                topic,
                partitions,
                "created the share group's dead-letter topic"
            );
            Ok(meta.partitions)
        }
        // Another share partition created it meanwhile.
        Err(crate::metadata::topics::CreateError::AlreadyExists) => ctx
            .catalog
            .snapshot()
            .get(topic)
            .map(|t| t.partitions)
            .ok_or_else(|| format!("{topic} vanished after its creation")),
        Err(e) => Err(format!("creating DLQ topic {topic}: {e}")),
    }
}

/// Kafka's headers of a dead letter, every value UTF-8 text.
fn headers(
    topic: &str,
    partition: i32,
    group: &str,
    d: &Dead,
) -> IndexMap<StrBytes, Option<Bytes>> {
    let text = |s: String| Some(Bytes::from(s));
    let cause = if d.rejected { REJECTED } else { EXHAUSTED };
    IndexMap::from_iter([
        (
            StrBytes::from_static_str("__dlq.errors.topic"),
            text(topic.to_string()),
        ),
        (
            StrBytes::from_static_str("__dlq.errors.partition"),
            text(partition.to_string()),
        ),
        (
            StrBytes::from_static_str("__dlq.errors.offset"),
            text(d.offset.to_string()),
        ),
        (
            StrBytes::from_static_str("__dlq.errors.group"),
            text(group.to_string()),
        ),
        (
            StrBytes::from_static_str("__dlq.errors.delivery.count"),
            text(d.delivery_count.to_string()),
        ),
        (
            StrBytes::from_static_str("__dlq.errors.message"),
            text(cause.to_string()),
        ),
    ])
}

type KeyValue = (Option<Bytes>, Option<Bytes>);

/// The key and value of each dead offset, read from the source log on its home shard (this
/// one). What cannot be read (retention took it, a bad batch) is left out: its dead letter
/// carries the headers only, as Kafka's does.
fn originals(source: &Partition, dead: &[Dead]) -> HashMap<i64, KeyValue> {
    let mut want: Vec<i64> = dead.iter().map(|d| d.offset).collect();
    want.sort_unstable();
    let mut out = HashMap::new();
    let (Some(&first), Some(&last)) = (want.first(), want.last()) else {
        return out;
    };
    let mut from = first;
    let mut budget = READ_BUDGET;
    while from <= last && budget > 0 {
        let Ok(read) = source.read(from, budget.min(1 << 20), false) else {
            break;
        };
        let before = from;
        for chunk in read.data.chunks {
            budget = budget.saturating_sub(chunk.len());
            let mut buf = chunk.clone();
            let Ok(sets) = RecordBatchDecoder::decode_all(&mut buf) else {
                return out;
            };
            for r in sets.iter().flat_map(|s| s.records.iter()) {
                from = from.max(r.offset + 1);
                if want.binary_search(&r.offset).is_ok() && !r.control {
                    out.insert(r.offset, (r.key.clone(), r.value.clone()));
                }
            }
        }
        if from <= before {
            break;
        }
    }
    out
}
