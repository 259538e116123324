//! FindCoordinator (key 10): a single node coordinates every group and transactional id; on
//! a cluster the coordinator of a key is the leader of its `__consumer_offsets` /
//! `__transaction_state` partition, as the image has it (`coordinator::leadership`), and no
//! leader is COORDINATOR_NOT_AVAILABLE. Finding a coordinator creates the topic (groups, or
//! transactions with key type 1) on first use, as Kafka does. v4+ batches keys.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::coordinator::group::{self};
use crate::coordinator::txn::{self};
use crate::security::acl::{Operation, ResourceType};
use crate::security::authorizer::Access;
use kafka_protocol::error::ResponseError;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 6;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

pub use super::errors::FindError;

/// The coordinator of `key` on a cluster: (node id, host, port); `None` = this single node.
type Found = Option<(i32, String, i32)>;

async fn find(ctx: &RequestContext, key_type: i8, key: &str) -> Result<Found, FindError> {
    let (topic, partitions) = match key_type {
        KEY_TYPE_GROUP => (
            group::OFFSETS_TOPIC,
            group::ensure_offsets_topic(ctx.ctx()).await?,
        ),
        KEY_TYPE_TRANSACTION => (txn::TXN_TOPIC, txn::ensure_txn_topic(ctx.ctx()).await?),
        other => return Err(FindError::InvalidKeyType(other)),
    };
    let Some(cluster) = ctx.ctx().cluster.get() else {
        return Ok(None);
    };
    let p = crate::coordinator::partition_for(key, partitions);
    let image = cluster.image();
    // The leader's endpoint on the listener the request came in on (Kafka's
    // `getAliveBrokerNode(leader, listenerName)`); none is COORDINATOR_NOT_AVAILABLE.
    let leader = image
        .partition(topic, p)
        .and_then(|r| image.node_on(r.leader, &ctx.session.listener.name));
    match leader {
        Some(b) => Ok(Some((b.id, b.host, b.port))),
        None if key_type == KEY_TYPE_GROUP => {
            Err(group::GroupError::CoordinatorNotAvailable.into())
        }
        None => Err(txn::TxnError::CoordinatorNotAvailable.into()),
    }
}

/// Authorization (Kafka's `handleFindCoordinatorRequest`): DESCRIBE on the group
/// (GROUP_AUTHORIZATION_FAILED) or the transactional id
/// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) the key names.
fn authorized(access: &Access, key_type: i8, key: &str) -> Result<(), (i16, &'static str)> {
    let (rtype, code, msg) = match key_type {
        0 => (
            ResourceType::Group,
            ResponseError::GroupAuthorizationFailed,
            super::errors::GROUP_AUTHORIZATION_FAILED,
        ),
        1 => (
            ResourceType::TransactionalId,
            ResponseError::TransactionalIdAuthorizationFailed,
            super::errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ),
        _ => return Ok(()),
    };
    if access.allows(Operation::Describe, rtype, key) {
        Ok(())
    } else {
        Err((code.code(), msg))
    }
}

pub async fn handle(ctx: &RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse {
    let version = ctx.version();
    let access = ctx.access();
    let (host, port) = ctx.advertised();
    let node = ctx.ctx().config.node_id;
    let answer = |r: &Result<Found, FindError>| match r {
        Ok(None) => (0, None, node, host.clone(), port),
        Ok(Some((id, h, p))) => (0, None, *id, h.clone(), *p),
        Err(e) => (
            super::errors::find_coordinator_code(e),
            Some(e.to_string()),
            -1,
            String::new(),
            -1,
        ),
    };
    if version >= 4 {
        let mut coordinators = Vec::new();
        for key in req.coordinator_keys {
            let (code, msg, node, host, port) = match authorized(&access, req.key_type, &key) {
                Ok(()) => answer(&find(ctx, req.key_type, &key).await),
                Err((code, msg)) => (code, Some(msg.to_string()), -1, String::new(), -1),
            };
            coordinators.push(
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(BrokerId(node))
                    .with_host(StrBytes::from_string(host))
                    .with_port(port)
                    .with_error_code(code)
                    .with_error_message(msg.map(StrBytes::from_string)),
            );
        }
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let (code, msg, node, host, port) = match authorized(&access, req.key_type, &req.key) {
        Ok(()) => answer(&find(ctx, req.key_type, &req.key).await),
        Err((code, msg)) => (code, Some(msg.to_string()), -1, String::new(), -1),
    };
    FindCoordinatorResponse::default()
        .with_error_code(code)
        .with_error_message(msg.filter(|_| version >= 1).map(StrBytes::from_string))
        .with_node_id(BrokerId(node))
        .with_host(StrBytes::from_string(host))
        .with_port(port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::testing::Harness;
    use kafka_protocol::messages::ApiKey;

    #[test]
    fn given_group_keys_when_finding_batched_then_this_node_and_offsets_topic_created() {
        let h = Harness::new();
        let req = FindCoordinatorRequest::default().with_coordinator_keys(vec![
            StrBytes::from_static_str("g1"),
            StrBytes::from_static_str("g2"),
        ]);
        let r: FindCoordinatorResponse = h.call(ApiKey::FindCoordinator, 4, req);
        assert_eq!(r.coordinators.len(), 2);
        assert!(r
            .coordinators
            .iter()
            .all(|c| c.error_code == 0 && c.node_id.0 == 0));
        assert_eq!(r.coordinators[1].key.as_str(), "g2");
        let t = h
            .state
            .ctx
            .catalog
            .snapshot()
            .get("__consumer_offsets")
            .cloned()
            .unwrap();
        assert_eq!(t.partitions, 50);
        assert!(t.internal);
    }

    #[test]
    fn given_transaction_key_when_finding_then_this_node_and_txn_topic_created() {
        let h = Harness::new();
        let req = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_static_str("tx"))
            .with_key_type(1);
        let r: FindCoordinatorResponse = h.call(ApiKey::FindCoordinator, 3, req);
        assert_eq!((r.error_code, r.node_id.0), (0, 0));
        let t = h
            .state
            .ctx
            .catalog
            .snapshot()
            .get("__transaction_state")
            .cloned()
            .unwrap();
        assert_eq!(t.partitions, 50);
        assert!(t.internal);
    }
}
