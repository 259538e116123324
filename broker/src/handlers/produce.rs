//! Produce (key 0): validate each partition's batch on the receiving shard, then append it on
//! the partition's home shard (idempotence checks there), all partitions concurrently.
//! acks=-1 is answered only after the batch is fdatasync'd; acks=0 gets no response at all.

use std::sync::Arc;

use futures::future::join_all;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::partition::txn::TxnDataError;
use crate::partition::{validate_produce_records, PartitionError};
use crate::shard::frontend::{self, FrontendError};

pub const MIN_VERSION: i16 = 3;
pub const MAX_VERSION: i16 = 13;

pub fn no_response(req: &ProduceRequest) -> bool {
    req.acks == 0
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

/// Kafka's produce-time verification (KIP-890 part 1, `AddPartitionsToTxnManager`): a
/// transactional batch reached a partition that holds no guard for its transaction. The
/// coordinator pushes that guard when AddPartitionsToTxn adds the partition, but a restarted
/// broker has lost it while the transaction lives on in `__transaction_state`; so the
/// partition's leader asks the coordinator, as Kafka's always does, and re-arms the guard when
/// the partition is in the producer's ongoing transaction at that epoch.
async fn verify_with_coordinator(
    ctx: &RequestContext,
    transactional_id: &str,
    topic: &str,
    partition: i32,
    producer_id: i64,
    epoch: i16,
) -> bool {
    let (id, t) = (transactional_id.to_string(), topic.to_string());
    let verified = crate::coordinator::txn::on_coordinator(
        ctx.ctx(),
        transactional_id,
        move |txns, _| async move { txns.verify(&id, producer_id, epoch, &[(t, partition)]) },
    )
    .await;
    if verified.as_deref() != Ok(&[true][..]) {
        return false;
    }
    match frontend::begin_txn_on_partition(ctx.ctx(), topic, partition, producer_id, epoch).await {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(topic, partition, error = %e, "re-arming a verified transaction failed");
            false
        }
    }
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

pub async fn handle(ctx: &RequestContext, req: ProduceRequest) -> ProduceResponse {
    // Transactional data must name its transactional id (Kafka authorizes the write on it)
    // and come from one producer (Kafka: "Transactional records contained more than one
    // producer ID"). Both refuse the whole request.
    let txn_producers = transactional_producers(&req);
    if !txn_producers.is_empty() && req.transactional_id.is_none() {
        let code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return refuse_all(ctx.version(), req, code);
    }
    if txn_producers.len() > 1 {
        let code = ResponseError::InvalidProducerIdMapping.code();
        return refuse_all(ctx.version(), req, code);
    }
    let broker = ctx.ctx();
    let catalog = broker.catalog.snapshot();
    let now = super::now_ms();
    let acks = req.acks;
    let txn_id = req.transactional_id.as_ref().map(|s| s.to_string());
    let txn_id = &txn_id;
    let version = ctx.version();
    let mut topics = Vec::new();
    for td in req.topic_data {
        let meta = if ctx.version() >= 13 {
            catalog.by_id(&td.topic_id).cloned()
        } else {
            catalog.get(td.name.as_str()).cloned()
        };
        let unknown_code = if ctx.version() >= 13 {
            ResponseError::UnknownTopicId.code()
        } else {
            ResponseError::UnknownTopicOrPartition.code()
        };
        let futures = td.partition_data.into_iter().map(|pd| {
            let meta = meta.clone();
            async move {
                if !matches!(acks, -1..=1) {
                    return partition_error(version, pd.index, ResponseError::InvalidRequiredAcks.code(), None);
                }
                let Some(meta) = meta else {
                    return partition_error(version, pd.index, unknown_code, None);
                };
                if pd.index < 0 || pd.index >= meta.partitions {
                    return partition_error(version, pd.index, ResponseError::UnknownTopicOrPartition.code(), None);
                }
                let records = pd.records.unwrap_or_default();
                let header = match validate_produce_records(&records, &meta.settings, now) {
                    Ok(h) => h,
                    Err(e) => {
                        let e = FrontendError::Partition(e);
                        tracing::debug!(topic = %meta.name, partition = pd.index, error = %e, "produce rejected");
                        return partition_error(version, pd.index, super::errors::frontend_code(&e), Some(e.to_string()));
                    }
                };
                let mut r = frontend::produce(broker, Arc::clone(&meta.name), pd.index, header, records.clone(), acks, now).await;
                if let (Err(FrontendError::Partition(PartitionError::Txn(TxnDataError::NotAddedToTxn { producer_id, epoch }))), Some(tid)) = (&r, txn_id.as_deref()) {
                    if verify_with_coordinator(ctx, tid, &meta.name, pd.index, *producer_id, *epoch).await {
                        r = frontend::produce(broker, Arc::clone(&meta.name), pd.index, header, records, acks, now).await;
                    }
                }
                match r {
                    Ok(o) => PartitionProduceResponse::default()
                        .with_index(pd.index)
                        .with_base_offset(o.base_offset)
                        .with_log_append_time_ms(o.log_append_time_ms)
                        .with_log_start_offset(if version >= 5 { o.log_start_offset } else { -1 }),
                    Err(e) => {
                        tracing::debug!(topic = %meta.name, partition = pd.index, error = %e, "produce failed");
                        partition_error(version, pd.index, super::errors::frontend_code(&e), Some(e.to_string()))
                    }
                }
            }
        });
        let partitions = join_all(futures).await;
        topics.push(
            TopicProduceResponse::default()
                .with_name(td.name.clone())
                .with_topic_id(td.topic_id)
                .with_partition_responses(partitions),
        );
    }
    ProduceResponse::default().with_responses(topics)
}

#[cfg(test)]
pub mod tests;
