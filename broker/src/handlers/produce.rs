//! Produce (key 0): validate each partition's batch on the receiving shard, then append it on
//! the partition's home shard (idempotence checks there), all partitions concurrently.
//! acks=-1 is answered only after the batch is fdatasync'd; acks=0 gets no response at all.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::produce_response::{LeaderIdAndEpoch, NodeEndpoint};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;

use std::rc::Rc;

use kafka_protocol::messages::ApiKey;

use super::{encode_response, Answer, RequestContext, Responding};
use crate::partition::ProduceOutcome;
use crate::partition::{validate_produce_records, PartitionError};
use crate::quota::QuotaKind;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::frontend::ProduceStart;
use crate::shard::frontend::{self, FrontendError};

pub const MIN_VERSION: i16 = 3;
pub const MAX_VERSION: i16 = 13;

/// A partition's failure: its code, message and (KIP-467, v8+) the records it names.
fn failed(version: i16, index: i32, e: &FrontendError) -> PartitionProduceResponse {
    let code = super::errors::frontend_code(e);
    let p = partition_error(version, index, code, Some(e.to_string()));
    match e {
        FrontendError::Partition(PartitionError::Rejected(records)) if version >= 8 => p
            .with_record_errors(
                records
                    .iter()
                    .map(|r| {
                        BatchIndexAndErrorMessage::default()
                            .with_batch_index(r.index)
                            .with_batch_index_error_message(Some(StrBytes::from_string(
                                r.message.clone(),
                            )))
                    })
                    .collect(),
            ),
        _ => p,
    }
}

fn partition_error(
    version: i16,
    index: i32,
    code: i16,
    message: Option<String>,
) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.filter(|_| version >= 8).map(StrBytes::from_string))
}

/// The distinct (producer id, epoch) of the transactional batches in the request, as Kafka's
/// `RequestUtils.hasTransactionalRecords` and `handleProduceAppend` look at them (one batch
/// per partition since produce v3).
fn transactional_producers(req: &ProduceRequest) -> Vec<(i64, i16)> {
    let mut out: Vec<(i64, i16)> = req
        .topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .filter_map(|pd| pd.records.as_deref())
        .filter_map(|r| storage::batch::BatchHeader::parse(r).ok())
        .filter(|h| h.is_transactional())
        .map(|h| (h.producer_id, h.producer_epoch))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Every partition of the request answered with `code` (Kafka's whole-request error response).
fn refuse_all(version: i16, req: ProduceRequest, code: i16) -> ProduceResponse {
    let topics = req
        .topic_data
        .into_iter()
        .map(|td| {
            let partitions = td
                .partition_data
                .iter()
                .map(|pd| partition_error(version, pd.index, code, None))
                .collect();
            TopicProduceResponse::default()
                .with_name(td.name)
                .with_topic_id(td.topic_id)
                .with_partition_responses(partitions)
        })
        .collect();
    ProduceResponse::default().with_responses(topics)
}

/// One partition of the request after its first phase.
enum Slot {
    Answered(PartitionProduceResponse),
    Appending {
        index: i32,
        topic: Arc<str>,
        done: frontend::Pending<Result<ProduceOutcome, FrontendError>>,
        /// With tracing on (`otel`): the batch and its decompression bound, for the spans of
        /// its traced records once the log has placed it.
        traced: Option<(bytes::Bytes, usize)>,
    },
}

/// First phase: each partition's batch validated here and handed to its home shard, in
/// request order (module overview of `handlers`); the second phase awaits the appends
/// (fdatasync for acks=all) and encodes the answer — none for acks=0.
pub async fn dispatch(ctx: Rc<RequestContext>, req: ProduceRequest) -> Responding {
    let (version, correlation_id, acks) = (ctx.version(), ctx.header.correlation_id, req.acks);
    let encode = move |resp: ProduceResponse| -> Answer {
        if acks == 0 {
            return Ok(None);
        }
        encode_response(ApiKey::Produce, version, correlation_id, &resp).map(|b| Some(b.into()))
    };
    // The producer quota meters the whole request, accepted or not: Kafka appends, then
    // throttles (`quota`). Recorded before the append so the next request sees it.
    let bandwidth_throttle = ctx.record_quota(QuotaKind::Produce, ctx.frame_bytes as f64);
    // Transactional data must name its transactional id (Kafka authorizes the write on it)
    // and come from one producer (Kafka: "Transactional records contained more than one
    // producer ID"). Both refuse the whole request.
    let txn_producers = transactional_producers(&req);
    let refusal = if !txn_producers.is_empty() && req.transactional_id.is_none() {
        Some(ResponseError::TransactionalIdAuthorizationFailed.code())
    } else if txn_producers.len() > 1 {
        Some(ResponseError::InvalidProducerIdMapping.code())
    } else {
        None
    };
    // Authorization (Kafka's `handleProduceRequest`): transactional data needs WRITE on its
    // transactional id (else the whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    // each topic needs WRITE (else its partitions are TOPIC_AUTHORIZATION_FAILED).
    let access = ctx.access();
    let refusal = refusal.or_else(|| {
        let tid = req.transactional_id.as_ref().map_or("", |s| s.as_str());
        (!txn_producers.is_empty()
            && !access.allows(Operation::Write, ResourceType::TransactionalId, tid))
        .then(|| ResponseError::TransactionalIdAuthorizationFailed.code())
    });
    if let Some(code) = refusal {
        let throttle = throttled(&ctx, acks, bandwidth_throttle);
        let resp = refuse_all(version, req, code).with_throttle_time_ms(throttle);
        return Box::pin(async move {
            delay_before_v6(version, throttle).await;
            encode(resp)
        });
    }
    let broker = ctx.ctx();
    let catalog = broker.catalog.snapshot();
    // Leaders named in KIP-951 hints, sent once in the response's node endpoints.
    let mut endpoints = std::collections::BTreeMap::new();
    let now = super::now_ms();
    let txn_id = req.transactional_id.as_ref().map(|s| s.to_string());
    let unknown_code = if version >= 13 {
        ResponseError::UnknownTopicId.code()
    } else {
        ResponseError::UnknownTopicOrPartition.code()
    };
    let mut topics = Vec::with_capacity(req.topic_data.len());
    // The request's priority lane: its highest topic's (`shard::priority`).
    let mut lane = None;
    for td in req.topic_data {
        let meta = if version >= 13 {
            catalog.by_id(&td.topic_id).cloned()
        } else {
            catalog.get(td.name.as_str()).cloned()
        };
        if let Some(m) = &meta {
            lane = lane.max(Some(m.settings.flow.priority));
        }
        let authorized = access.allows(
            Operation::Write,
            ResourceType::Topic,
            meta.as_ref().map_or(td.name.as_str(), |m| &m.name),
        );
        let mut slots = Vec::with_capacity(td.partition_data.len());
        for pd in td.partition_data {
            let refuse = |code: i16| Slot::Answered(partition_error(version, pd.index, code, None));
            if version >= 13 && meta.is_none() {
                slots.push(refuse(unknown_code));
                continue;
            }
            if !authorized {
                slots.push(refuse(ResponseError::TopicAuthorizationFailed.code()));
                continue;
            }
            if !matches!(acks, -1..=1) {
                slots.push(refuse(ResponseError::InvalidRequiredAcks.code()));
                continue;
            }
            let Some(meta) = meta.as_ref() else {
                slots.push(refuse(unknown_code));
                continue;
            };
            if pd.index < 0 || pd.index >= meta.partitions {
                slots.push(refuse(ResponseError::UnknownTopicOrPartition.code()));
                continue;
            }
            // Clustered: only the partition's leader takes writes (the client refreshes its
            // metadata and goes there).
            if crate::cluster::led_elsewhere(broker, &meta.name, pd.index) {
                let code = ResponseError::NotLeaderOrFollower.code();
                let mut r = partition_error(version, pd.index, code, None);
                // KIP-951 (v10+): the current leader, so the client need not ask Metadata.
                let listener = &ctx.session.listener.name;
                let placed = crate::cluster::current_leader(broker, &meta.name, pd.index, listener);
                if let Some((leader, epoch, node)) = placed.filter(|_| version >= 10) {
                    r = r.with_current_leader(
                        LeaderIdAndEpoch::default()
                            .with_leader_id(BrokerId(leader))
                            .with_leader_epoch(epoch),
                    );
                    if let Some(b) = node {
                        endpoints.insert(b.id, b);
                    }
                }
                slots.push(Slot::Answered(r));
                continue;
            }
            let records = pd.records.unwrap_or_default();
            let schemas = broker.schema_view.get().map(|v| v.as_ref());
            let (header, records) = match validate_produce_records(
                &meta.name,
                &records,
                &meta.settings,
                schemas,
                now,
            ) {
                Ok(v) => v,
                Err(e) => {
                    if let PartitionError::Rejected(records) = &e {
                        let vectors = records.iter().filter(|r| r.embedding).count();
                        ctx.shard
                            .metrics
                            .flow
                            .count_embedding_rejected(&meta.name, vectors as u64);
                    }
                    let e = FrontendError::Partition(e);
                    tracing::debug!(topic = %meta.name, partition = pd.index, error = %e, "produce rejected");
                    slots.push(Slot::Answered(failed(version, pd.index, &e)));
                    continue;
                }
            };
            let short = (acks == -1)
                .then(|| {
                    let min = meta.settings.min_insync_replicas;
                    crate::cluster::isr_shortfall(broker, &meta.name, pd.index, min)
                })
                .flatten();
            if let Some(isr) = short {
                // Kafka's `Partition.appendRecordsToLeader`: one node is an ISR of one; a
                // node without the metadata quorum takes no acks=all at all.
                let message = format!(
                    "The size of the current ISR Set({}) is insufficient to satisfy the min.isr requirement of {} for partition {}-{}",
                    isr.iter().map(i32::to_string).collect::<Vec<_>>().join(", "),
                    meta.settings.min_insync_replicas, meta.name, pd.index
                );
                slots.push(Slot::Answered(partition_error(
                    version,
                    pd.index,
                    ResponseError::NotEnoughReplicas.code(),
                    Some(message),
                )));
                continue;
            }
            let topic = meta.name.clone();
            let traced = broker
                .otel
                .as_ref()
                .map(|_| (records.clone(), meta.settings.max_decompressed_bytes));
            let (start, mut done) = frontend::produce(
                broker,
                topic.clone(),
                pd.index,
                header,
                records.clone(),
                acks,
                now,
            )
            .await;
            if header.is_transactional() {
                // A transactional batch the partition refused for want of its transaction: ask
                // the coordinator and hand it over again, still in this first phase, so that the
                // connection's next batches for the partition come after it.
                if let (Ok(ProduceStart::NotAdded(producer_id, epoch)), Some(tid)) =
                    (start.await, txn_id.as_deref())
                {
                    let producer = (producer_id, epoch);
                    match verify::with_coordinator(&ctx, version, tid, &topic, pd.index, producer)
                        .await
                    {
                        Ok(()) => {
                            done = frontend::produce(
                                broker,
                                topic.clone(),
                                pd.index,
                                header,
                                records,
                                acks,
                                now,
                            )
                            .await
                            .1;
                        }
                        // Not in the transaction: the partition's own refusal stands.
                        Err(verify::Unverified::NotAdded) => {}
                        Err(verify::Unverified::Refused(code, message)) => {
                            slots.push(Slot::Answered(partition_error(
                                version,
                                pd.index,
                                code,
                                Some(message),
                            )));
                            continue;
                        }
                    }
                }
            }
            slots.push(Slot::Appending {
                index: pd.index,
                topic,
                done,
                traced,
            });
        }
        topics.push((td.name, td.topic_id, slots));
    }
    let admission = lane.map(|l| (l, ctx.shard.priority_admit(l)));
    let lane_throttle = admission.map_or(0, |(_, a)| a.throttle_ms);
    let throttle = throttled(&ctx, acks, bandwidth_throttle.max(lane_throttle));
    let appended = topics
        .iter()
        .any(|(_, _, slots)| slots.iter().any(|s| matches!(s, Slot::Appending { .. })));
    Box::pin(async move {
        let mut responses = Vec::with_capacity(topics.len());
        for (name, topic_id, slots) in topics {
            let mut partitions = Vec::with_capacity(slots.len());
            for slot in slots {
                partitions.push(match slot {
                    Slot::Answered(p) => p,
                    Slot::Appending {
                        index,
                        topic,
                        done,
                        traced,
                    } => match done.await.and_then(|r| r) {
                        Ok(o) => {
                            if let (Some(otel), Some((batch, max))) = (&ctx.ctx().otel, traced) {
                                let at = crate::otel::Place {
                                    topic: &topic,
                                    partition: index,
                                    client_id: ctx.client_id(),
                                };
                                let started = crate::otel::started_at(ctx.started.elapsed());
                                otel.produced(&at, &batch, o.base_offset, max, started);
                            }
                            PartitionProduceResponse::default()
                            .with_index(index)
                            .with_base_offset(o.base_offset)
                            .with_log_append_time_ms(o.log_append_time_ms)
                            .with_log_start_offset(if version >= 5 { o.log_start_offset } else { -1 })
                        }
                        Err(e) => {
                            tracing::debug!(topic = %topic, partition = index, error = %e, "produce failed");
                            failed(version, index, &e)
                        }
                    },
                });
            }
            responses.push(
                TopicProduceResponse::default()
                    .with_name(name)
                    .with_topic_id(topic_id)
                    .with_partition_responses(partitions),
            );
        }
        if let Some((lane, admitted)) = admission.filter(|_| appended) {
            // What the shard's saturation model learns from (refusals cost nothing).
            let took = ctx.started.elapsed();
            (ctx.shard.priority).record_produce(lane, took, ctx.frame_bytes, admitted.quiet);
        }
        let node_endpoints = endpoints
            .into_values()
            .map(|b| {
                NodeEndpoint::default()
                    .with_node_id(BrokerId(b.id))
                    .with_host(StrBytes::from_string(b.host))
                    .with_port(b.port)
                    .with_rack(b.rack.map(StrBytes::from_string))
            })
            .collect();
        delay_before_v6(version, throttle).await;
        encode(
            ProduceResponse::default()
                .with_responses(responses)
                .with_throttle_time_ms(throttle)
                .with_node_endpoints(node_endpoints),
        )
    })
}

/// The throttle of this produce: the larger of the byte-rate and the request-time quota's,
/// as Kafka answers. Since v6 (KIP-219) the client holds back itself and the connection is
/// muted; an acks=0 producer gets no answer, but its connection is muted all the same.
fn throttled(ctx: &RequestContext, acks: i16, bandwidth_ms: i64) -> i32 {
    let ms = bandwidth_ms.max(ctx.record_request_time());
    if ctx.version() >= 6 || acks == 0 {
        ctx.throttle(ms)
    } else {
        ms.clamp(0, i32::MAX as i64) as i32
    }
}

/// Before v6 the client does not throttle itself: Kafka holds the response back instead.
async fn delay_before_v6(version: i16, throttle_ms: i32) {
    if version < 6 && throttle_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(throttle_ms as u64)).await;
    }
}

mod verify;

#[cfg(test)]
mod flow_tests;
#[cfg(test)]
mod settings_tests;
#[cfg(test)]
pub mod tests;
