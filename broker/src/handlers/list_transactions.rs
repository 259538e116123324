//! ListTransactions (key 66): transactional ids known to the coordinators, filtered by state
//! names, producer ids, (v1+) minimum running time and (v2+) an id regular expression. Unknown
//! state names are echoed back in `unknown_state_filters`, as Kafka does.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{ListTransactionsRequest, ListTransactionsResponse, ProducerId};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::coordinator::group::topic_regex::TopicRegex;
use crate::coordinator::txn::{self, txn_stm};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 2;

pub async fn handle(
    ctx: &RequestContext,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let mut states = Vec::new();
    let mut unknown = Vec::new();
    for name in &req.state_filters {
        match txn_stm::TxnState::from_name(name.as_str()) {
            Some(s) => states.push(s),
            None => unknown.push(name.clone()),
        }
    }
    let resp = ListTransactionsResponse::default().with_unknown_state_filters(unknown.clone());
    // Only unknown states asked for: nothing can match them.
    if states.is_empty() && !unknown.is_empty() {
        return resp;
    }
    let pattern = match req
        .transactional_id_pattern
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        None => None,
        Some(p) => match TopicRegex::parse(p) {
            Ok(r) => Some(r),
            Err(_) => return resp.with_error_code(ResponseError::InvalidRegularExpression.code()),
        },
    };
    let producers: Vec<i64> = req.producer_id_filters.iter().map(|p| p.0).collect();
    let duration = if ctx.version() >= 1 {
        req.duration_filter
    } else {
        -1
    };
    let r = txn::on_every_shard(ctx.ctx(), move |txns| {
        let (states, producers, pattern) = (states.clone(), producers.clone(), pattern.clone());
        async move { txns.list(&states, &producers, duration, pattern.as_ref()) }
    })
    .await;
    // Kafka's `handleListTransactionsRequest`: only the transactional ids the client may
    // DESCRIBE.
    let access = ctx.access();
    match r {
        Ok(per_shard) => resp.with_transaction_states(
            per_shard
                .into_iter()
                .flatten()
                .filter(|l| {
                    access.allows(
                        crate::security::acl::Operation::Describe,
                        crate::security::acl::ResourceType::TransactionalId,
                        &l.transactional_id,
                    )
                })
                .map(|l| {
                    TransactionState::default()
                        .with_transactional_id(StrBytes::from_string(l.transactional_id).into())
                        .with_producer_id(ProducerId(l.producer_id))
                        .with_transaction_state(StrBytes::from_static_str(l.state.name()))
                })
                .collect(),
        ),
        Err(e) => resp.with_error_code(super::errors::txn_code(&e, 0, 0)),
    }
}
