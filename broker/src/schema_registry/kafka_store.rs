//! The `_schemas` topic: one compacted partition, written acks=all (fdatasync before the
//! registry answers) and read from the registry's thread through its home shard
//! (`frontend::call_from_outside`). Created on the first write, as Kafka topics are, so a
//! broker whose registry is never written has no `_schemas` topic.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;
use tokio::sync::watch;

use super::error::RegistryError;
use super::records::RegistryKey;
use super::registry::Records;
use crate::shard::{self, frontend, BrokerContext};

/// Confluent's `kafkastore.topic` default.
pub const TOPIC: &str = "_schemas";

/// Bytes read per call while catching up.
const READ_CHUNK: usize = 1 << 20;

/// One record of the topic.
#[derive(Debug, Clone)]
pub struct LogRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
}

/// What one read gives: records from the offset asked for, where the next read starts, and
/// a receiver of the partition's high watermark (None while the topic does not exist).
pub struct Read {
    pub records: Vec<LogRecord>,
    pub next_offset: i64,
    pub high_watermark: i64,
    pub watch: Option<watch::Receiver<i64>>,
}

#[derive(Clone)]
pub struct SchemasLog {
    ctx: Arc<BrokerContext>,
}

fn store_error(e: impl std::fmt::Display) -> RegistryError {
    RegistryError::Store(format!("Error while accessing the {TOPIC} topic: {e}"))
}

impl SchemasLog {
    pub fn new(ctx: Arc<BrokerContext>) -> SchemasLog {
        SchemasLog { ctx }
    }

    fn home(&self) -> usize {
        shard::home_shard(TOPIC, 0, self.ctx.shard_count())
    }

    /// Records from `offset` (or the log start, if compaction or retention moved it past).
    pub async fn read(&self, offset: i64) -> Result<Read, RegistryError> {
        frontend::call_from_outside(&self.ctx, self.home(), move |state| async move {
            let Some(part) = crate::coordinator::log::partition_on_shard(&state, TOPIC, 0) else {
                return Ok(Read {
                    records: Vec::new(),
                    next_offset: offset,
                    high_watermark: 0,
                    watch: None,
                });
            };
            let start = offset.max(part.log.log_start_offset());
            let read = part.read(start, READ_CHUNK, false).map_err(store_error)?;
            let mut records = Vec::new();
            let mut next = start;
            for chunk in read.data.chunks {
                let headers = storage::batch::validate_batches(&chunk).map_err(store_error)?;
                if let Some(last) = headers.last() {
                    next = next.max(last.base_offset + last.last_offset_delta as i64 + 1);
                }
                let mut buf = chunk.clone();
                let sets = RecordBatchDecoder::decode_all(&mut buf).map_err(store_error)?;
                for set in sets {
                    for r in set.records {
                        if r.control || r.offset < start {
                            continue;
                        }
                        records.push(LogRecord {
                            offset: r.offset,
                            timestamp: r.timestamp,
                            key: r.key,
                            value: r.value,
                        });
                    }
                }
            }
            Ok(Read {
                records,
                next_offset: next,
                high_watermark: read.high_watermark,
                watch: Some(part.watch_high_watermark()),
            })
        })
        .await
        .map_err(store_error)?
    }

    /// Appends `records` as one batch, durably; creates the topic first if needed.
    pub async fn append(&self, records: &Records) -> Result<(), RegistryError> {
        let encoded: Vec<(Bytes, Option<Bytes>)> = records
            .iter()
            .map(|(k, v)| {
                (
                    Bytes::from(k.encode()),
                    v.as_ref().and_then(|v| v.encode()).map(Bytes::from),
                )
            })
            .collect();
        let limit = self.ctx.config.message_max_bytes.max(0) as usize;
        if encoded
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len))
            .sum::<usize>()
            > limit.saturating_sub(256)
        {
            return Err(RegistryError::SchemaTooLarge);
        }
        self.ensure_topic().await?;
        frontend::call_from_outside(&self.ctx, self.home(), move |state| async move {
            let part = crate::coordinator::log::partition_on_shard(&state, TOPIC, 0)
                .ok_or_else(|| store_error("partition 0 is not open"))?;
            crate::coordinator::log::append(&part, &encoded, None)
                .await
                .map_err(store_error)
        })
        .await
        .map_err(store_error)?
    }

    /// Creates `_schemas` (one partition, compacted: Confluent's KafkaStore settings) unless
    /// it exists, and opens its log on its home shard.
    async fn ensure_topic(&self) -> Result<(), RegistryError> {
        if self.ctx.catalog.snapshot().get(TOPIC).is_some() {
            return Ok(());
        }
        let configs = std::collections::BTreeMap::from([(
            "cleanup.policy".to_string(),
            "compact".to_string(),
        )]);
        let meta = match self.ctx.catalog.create(TOPIC, 1, configs, false) {
            Ok(meta) => meta,
            // Created meanwhile (a Kafka client, `strom migrate`): use it.
            Err(crate::metadata::catalog::CatalogError::AlreadyExists(_)) => {
                return Ok(());
            }
            Err(e) => return Err(store_error(e)),
        };
        let ctx = self.ctx.clone();
        frontend::call_from_outside(&self.ctx, self.home(), move |_state| async move {
            frontend::open_partitions(&ctx, &meta, 0..meta.partitions).await
        })
        .await
        .map_err(store_error)?
        .map_err(store_error)
    }
}

/// A record's key, decoded; undecodable keys are logged and skipped by the caller, as
/// Confluent's reader skips records it cannot deserialize.
pub fn decode_key(r: &LogRecord) -> Option<RegistryKey> {
    let key = r.key.as_ref()?;
    match RegistryKey::decode(key) {
        Ok(k) => Some(k),
        Err(e) => {
            tracing::warn!(offset = r.offset, error = %e, "skipping an unreadable {TOPIC} key");
            None
        }
    }
}
