//! DescribeTransactions (key 65): the coordinator's view of each transactional id: state,
//! producer id and epoch, timeout, start time and the partitions of the open transaction.

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId,
};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::coordinator::txn::{self, TxnError};
use crate::security::acl::{Operation, ResourceType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

pub async fn handle(
    ctx: &RequestContext,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    // Kafka's `handleDescribeTransactionsRequest`: DESCRIBE on each transactional id (else
    // TRANSACTIONAL_ID_AUTHORIZATION_FAILED); only the topics the client may DESCRIBE are
    // listed in the transaction.
    let access = ctx.access();
    let mut states = Vec::with_capacity(req.transactional_ids.len());
    for tid in req.transactional_ids {
        let id = tid.to_string();
        if !access.allows(Operation::Describe, ResourceType::TransactionalId, &id) {
            states.push(
                TransactionState::default()
                    .with_transactional_id(tid)
                    .with_error_code(
                        kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed
                            .code(),
                    ),
            );
            continue;
        }
        let r = txn::on_coordinator(ctx.ctx(), &id.clone(), move |txns, _| async move {
            txns.describe(&id).ok_or(TxnError::TransactionalIdNotFound)
        })
        .await;
        let out = TransactionState::default().with_transactional_id(tid);
        states.push(match r {
            Ok(m) => {
                let mut topics: Vec<TopicData> = Vec::new();
                for (t, p) in m
                    .partitions
                    .iter()
                    .filter(|(t, _)| access.allows(Operation::Describe, ResourceType::Topic, t))
                {
                    match topics.last_mut() {
                        Some(last) if last.topic.as_str() == t => last.partitions.push(*p),
                        _ => topics.push(
                            TopicData::default()
                                .with_topic(StrBytes::from_string(t.clone()).into())
                                .with_partitions(vec![*p]),
                        ),
                    }
                }
                out.with_transaction_state(StrBytes::from_static_str(m.state.name()))
                    .with_transaction_timeout_ms(m.timeout_ms)
                    .with_transaction_start_time_ms(m.start_ms)
                    .with_producer_id(ProducerId(m.producer_id))
                    .with_producer_epoch(m.producer_epoch)
                    .with_topics(topics)
            }
            Err(e) => out
                .with_error_code(super::errors::txn_code(&e, 0, 0))
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1),
        });
    }
    DescribeTransactionsResponse::default().with_transaction_states(states)
}
