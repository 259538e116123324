//! Fetch (key 1): reads each partition on its home shard, honours KIP-74 size limits, and long
//! polls (`max_wait_ms` / `min_bytes`) by waiting on the partitions' high-watermark watches —
//! no timer polling — from whatever shard the connection lives on.
//!
//! `isolation_level = 1` (read_committed) reads only up to the last stable offset, lists the
//! aborted transactions overlapping the data returned (from `.txnindex`), and long polls on
//! the LSO, which a transaction marker moves without new data arriving.
//!
//! Fetch sessions (KIP-227, v7+) are kept per shard in `fetch_session`; an incremental
//! response carries only the partitions with news.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId};
use tokio::sync::watch;

use super::RequestContext;
use crate::fetch_session::{FetchSessionCache, SessionPartition, FINAL_EPOCH};
use crate::metadata::catalog::TopicMeta;
use crate::shard::frontend::{self};

pub const MIN_VERSION: i16 = 4;
pub const MAX_VERSION: i16 = 18;

fn concat(chunks: Vec<Bytes>) -> Bytes {
    match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.into_iter().next().expect("one chunk"),
        _ => {
            let mut b = BytesMut::with_capacity(chunks.iter().map(|c| c.len()).sum());
            for c in chunks {
                b.extend_from_slice(&c);
            }
            b.freeze()
        }
    }
}

pub async fn handle(ctx: &RequestContext, req: FetchRequest) -> FetchResponse {
    let broker = ctx.ctx();
    let version = ctx.version();
    let plan = if version >= 7 {
        ctx.shard.fetch_sessions.borrow_mut().plan(&req)
    } else {
        // Before v7 there are no sessions: every fetch is a full, sessionless one.
        FetchSessionCache::new(0, 0).plan(&req.clone().with_session_epoch(FINAL_EPOCH))
    };
    let plan = match plan {
        Ok(p) => p,
        Err(e) => return FetchResponse::default().with_error_code(super::errors::session_code(&e)),
    };
    let catalog = broker.catalog.snapshot();
    let by_id = version >= 13;
    let wanted: Vec<(SessionPartition, Option<Arc<TopicMeta>>)> = plan
        .partitions
        .into_iter()
        .map(|p| {
            let meta = if by_id {
                catalog.by_id(&p.topic_id).cloned()
            } else {
                catalog.get(p.topic.as_str()).cloned()
            };
            (p, meta)
        })
        .collect();
    let unknown_topic = if by_id {
        ResponseError::UnknownTopicId.code()
    } else {
        ResponseError::UnknownTopicOrPartition.code()
    };
    let read_committed = req.isolation_level == 1;
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let response_max = if req.max_bytes <= 0 {
        i32::MAX
    } else {
        req.max_bytes
    } as usize;

    let partitions = loop {
        let mut total = 0usize;
        let mut partitions: Vec<PartitionData> = Vec::with_capacity(wanted.len());
        let mut watches: Vec<watch::Receiver<i64>> = Vec::new();
        for (w, meta) in &wanted {
            let base = PartitionData::default()
                .with_partition_index(w.partition)
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_log_start_offset(-1)
                .with_preferred_read_replica(BrokerId(-1));
            let Some(meta) = meta else {
                partitions.push(base.with_error_code(unknown_topic));
                continue;
            };
            if w.partition < 0 || w.partition >= meta.partitions {
                partitions
                    .push(base.with_error_code(ResponseError::UnknownTopicOrPartition.code()));
                continue;
            }
            let budget = (w.max_bytes.max(0) as usize).min(response_max.saturating_sub(total));
            let read = frontend::fetch(
                broker,
                meta.name.clone(),
                w.partition,
                w.fetch_offset,
                budget,
                read_committed,
            )
            .await;
            if let Some(rx) = read.watch {
                watches.push(rx);
            }
            match read.outcome {
                Ok(o) => {
                    let mut bytes = o.data.total_bytes;
                    let mut chunks = o.data.chunks;
                    // KIP-74: only the first non-empty partition may exceed the limits.
                    if total > 0 && bytes > budget {
                        chunks.clear();
                        bytes = 0;
                    }
                    total += bytes;
                    let aborted = o.aborted.map(|list| {
                        list.into_iter()
                            .map(|t| {
                                AbortedTransaction::default()
                                    .with_producer_id(ProducerId(t.producer_id))
                                    .with_first_offset(t.first_offset)
                            })
                            .collect()
                    });
                    partitions.push(
                        base.with_high_watermark(o.high_watermark)
                            .with_last_stable_offset(o.last_stable_offset)
                            .with_log_start_offset(if version >= 5 {
                                o.log_start_offset
                            } else {
                                -1
                            })
                            .with_aborted_transactions(aborted)
                            .with_records(Some(concat(chunks))),
                    );
                }
                Err(e) => {
                    let code = super::errors::frontend_code(&e);
                    if code != ResponseError::OffsetOutOfRange.code() {
                        tracing::warn!(topic = %meta.name, partition = w.partition, error = %e, "fetch failed");
                    }
                    let mut p = base.with_error_code(code);
                    if let Ok(off) = frontend::offsets(broker, meta.name.clone(), w.partition).await
                    {
                        p = p
                            .with_high_watermark(off.high_watermark)
                            .with_last_stable_offset(off.last_stable)
                            .with_log_start_offset(if version >= 5 { off.log_start } else { -1 });
                    }
                    partitions.push(p);
                }
            }
        }
        let has_error = partitions.iter().any(|p| p.error_code != 0);
        let enough = total >= req.min_bytes.max(0) as usize || has_error;
        if enough || watches.is_empty() || tokio::time::Instant::now() >= deadline {
            break partitions;
        }
        // Wait for any partition's high watermark to move, or the deadline; then read again.
        let changed =
            futures::future::select_all(watches.iter_mut().map(|w| Box::pin(w.changed())));
        let _ = tokio::time::timeout_at(deadline, changed).await;
    };

    // Counted here, on what is sent: reads the long-poll loop discarded are not fetched.
    for ((_, meta), p) in wanted.iter().zip(&partitions) {
        if let (Some(meta), Some(records)) = (meta, &p.records) {
            ctx.shard.metrics.count_fetched(
                &meta.name,
                p.partition_index,
                records.len() as u64,
                crate::metrics::records_in_batches(records),
            );
        }
    }

    // An incremental response carries only partitions with news; the session remembers what
    // it told the client.
    let mut answered = Vec::new();
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    for ((w, _), p) in wanted.into_iter().zip(partitions) {
        let has_records = p.records.as_ref().is_some_and(|r| !r.is_empty());
        let news = !plan.incremental
            || p.error_code != 0
            || has_records
            || p.high_watermark != w.last_high_watermark
            || p.last_stable_offset != w.last_stable_offset
            || p.log_start_offset != w.last_log_start;
        if !news {
            continue;
        }
        let same_topic = topics
            .last()
            .is_some_and(|t| t.topic.as_str() == w.topic.as_str() && t.topic_id == w.topic_id);
        if !same_topic {
            topics.push(
                FetchableTopicResponse::default()
                    .with_topic(w.topic.clone())
                    .with_topic_id(w.topic_id),
            );
        }
        answered.push(SessionPartition {
            last_high_watermark: p.high_watermark,
            last_stable_offset: p.last_stable_offset,
            last_log_start: p.log_start_offset,
            ..w
        });
        topics.last_mut().expect("pushed above").partitions.push(p);
    }
    if plan.session_id != 0 {
        ctx.shard
            .fetch_sessions
            .borrow_mut()
            .record(plan.session_id, &answered);
    }
    FetchResponse::default()
        .with_session_id(plan.session_id)
        .with_responses(topics)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::handlers::testing::{batch, create, produce_req};
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{ApiKey, ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn fetch_req(
        topic: &str,
        partition: i32,
        offset: i64,
        max_wait: i32,
        min_bytes: i32,
    ) -> FetchRequest {
        FetchRequest::default()
            .with_max_wait_ms(max_wait)
            .with_min_bytes(min_bytes)
            .with_max_bytes(50 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])])
    }

    #[test]
    fn given_produced_batches_when_fetching_then_same_bytes_back_from_offset() {
        let h = Harness::new();
        create(&h, "t", 1);
        for _ in 0..3 {
            let r: ProduceResponse = h.call(
                ApiKey::Produce,
                11,
                produce_req("t", 0, -1, batch(4, -1, -1, -1)),
            );
            assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        }
        let resp: FetchResponse = h.call(ApiKey::Fetch, 12, fetch_req("t", 0, 5, 0, 1));
        let p = &resp.responses[0].partitions[0];
        assert_eq!(
            (p.error_code, p.high_watermark, p.log_start_offset),
            (0, 12, 0)
        );
        let mut records = p.records.clone().unwrap();
        let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut records).unwrap();
        // The batch containing offset 5 starts at 4.
        let offsets: Vec<i64> = sets
            .iter()
            .flat_map(|s| s.records.iter().map(|r| r.offset))
            .collect();
        assert_eq!(offsets, (4..12).collect::<Vec<_>>());
        assert_eq!(sets[0].records[1].value.as_deref(), Some(&b"v1"[..]));
    }

    #[test]
    fn given_offset_past_end_when_fetching_then_offset_out_of_range_with_watermarks() {
        let h = Harness::new();
        create(&h, "t", 1);
        let _: ProduceResponse = h.call(
            ApiKey::Produce,
            11,
            produce_req("t", 0, 1, batch(2, -1, -1, -1)),
        );
        let resp: FetchResponse = h.call(ApiKey::Fetch, 12, fetch_req("t", 0, 99, 0, 1));
        let p = &resp.responses[0].partitions[0];
        assert_eq!((p.error_code, p.high_watermark), (1, 2));
        let resp: FetchResponse = h.call(ApiKey::Fetch, 12, fetch_req("nope", 0, 0, 0, 1));
        assert_eq!(resp.responses[0].partitions[0].error_code, 3);
    }

    #[test]
    fn given_no_data_when_long_polling_then_waits_until_produce_arrives() {
        let h = Harness::new();
        create(&h, "t", 1);
        let state = h.state.clone();
        let got = h.block_on(async move {
            let fetch = {
                let state = state.clone();
                tokio::task::spawn_local(async move {
                    let ctx = RequestContext {
                        shard: state,
                        header: Default::default(),
                        client_host: "/127.0.0.1".into(),
                    };
                    let started = tokio::time::Instant::now();
                    let r = handle(&ctx, fetch_req("t", 0, 0, 5000, 1)).await;
                    (r, started.elapsed())
                })
            };
            tokio::time::sleep(Duration::from_millis(50)).await;
            let ctx = RequestContext {
                shard: state,
                header: Default::default(),
                client_host: "/127.0.0.1".into(),
            };
            let _ =
                super::super::produce::handle(&ctx, produce_req("t", 0, 1, batch(1, -1, -1, -1)))
                    .await;
            fetch.await.unwrap()
        });
        let (resp, waited) = got;
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.high_watermark, 1);
        assert!(!p.records.as_ref().unwrap().is_empty());
        assert!(
            waited >= Duration::from_millis(40) && waited < Duration::from_millis(4000),
            "{waited:?}"
        );
    }

    #[test]
    fn given_fetch_session_when_fetching_incrementally_then_only_partitions_with_news() {
        let h = Harness::new();
        create(&h, "t", 1);
        let full: FetchResponse = h.call(
            ApiKey::Fetch,
            12,
            fetch_req("t", 0, 0, 0, 0).with_session_epoch(0),
        );
        assert_ne!(full.session_id, 0);
        assert_eq!(full.responses[0].partitions.len(), 1);
        let quiet = FetchRequest::default()
            .with_session_id(full.session_id)
            .with_session_epoch(1)
            .with_max_bytes(1 << 20);
        let r: FetchResponse = h.call(ApiKey::Fetch, 12, quiet.clone());
        assert_eq!((r.error_code, r.session_id), (0, full.session_id));
        assert!(r.responses.is_empty(), "nothing changed: {r:?}");
        let _: ProduceResponse = h.call(
            ApiKey::Produce,
            11,
            produce_req("t", 0, 1, batch(2, -1, -1, -1)),
        );
        let r: FetchResponse = h.call(ApiKey::Fetch, 12, quiet.clone().with_session_epoch(2));
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.high_watermark, 2);
        assert!(!p.records.as_ref().unwrap().is_empty());
        // A replayed epoch is refused.
        let r: FetchResponse = h.call(ApiKey::Fetch, 12, quiet.with_session_epoch(2));
        assert_eq!(r.error_code, 71);
    }

    #[test]
    fn given_unknown_session_when_fetching_then_session_not_found() {
        let h = Harness::new();
        let resp: FetchResponse = h.call(
            ApiKey::Fetch,
            12,
            fetch_req("t", 0, 0, 0, 1)
                .with_session_id(77)
                .with_session_epoch(3),
        );
        assert_eq!(resp.error_code, 70);
    }
}
