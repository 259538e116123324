//! AddRaftVoter (key 80, KIP-853): `kafka-metadata-quorum add-controller`. On a cluster the
//! Raft leader makes an observer (a broker-only node, caught up) a voter
//! (`cluster::voter_change`); a node asked here forwards to it, as a Kafka broker forwards to
//! the active controller. A single node has no quorum to change: UNSUPPORTED_VERSION, what a
//! Kafka quorum of kraft.version 0 answers. Strom keeps no directory ids in its quorum, so
//! the request's `VoterDirectoryId` is not checked.

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{AddRaftVoterRequest, AddRaftVoterResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::cluster::voter_change::VoterChange;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

/// What AddRaftVoter and RemoveRaftVoter refuse before the change: ALTER on the cluster
/// (Kafka's `authorizeClusterOperation(ALTER)`), another cluster's id, a single node.
pub(super) fn refused(
    ctx: &RequestContext,
    cluster_id: Option<&StrBytes>,
    what: &str,
) -> Option<(i16, String)> {
    if !ctx
        .access()
        .allows_cluster(crate::security::acl::Operation::Alter)
    {
        return Some((
            ResponseError::ClusterAuthorizationFailed.code(),
            super::errors::CLUSTER_AUTHORIZATION_FAILED.into(),
        ));
    }
    let broker = ctx.ctx();
    if let Some(id) = cluster_id.filter(|id| id.as_str() != broker.cluster_id) {
        return Some((
            ResponseError::InconsistentClusterId.code(),
            format!(
                "The cluster id {id} does not match this cluster's {}",
                broker.cluster_id
            ),
        ));
    }
    if broker.cluster.get().is_none() {
        return Some((
            ResponseError::UnsupportedVersion.code(),
            format!(
                "Cluster doesn't support {what} voter because this node has no metadata quorum \
                 (no controller.quorum.voters)"
            ),
        ));
    }
    None
}

/// The longest a voter change waits for the quorum: the request's timeout within bounds.
pub(super) fn wait(timeout_ms: i32) -> Duration {
    Duration::from_millis(timeout_ms.clamp(1_000, 60_000) as u64)
}

pub async fn handle(ctx: &RequestContext, req: AddRaftVoterRequest) -> AddRaftVoterResponse {
    let answer = |code: i16, message: Option<String>| {
        AddRaftVoterResponse::default()
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string))
    };
    if let Some((code, message)) = refused(ctx, req.cluster_id.as_ref(), "adding") {
        return answer(code, Some(message));
    }
    let Some(cluster) = ctx.ctx().cluster.get() else {
        unreachable!("refused() answers a single node");
    };
    if req.voter_id < 0 {
        return answer(
            ResponseError::InvalidRequest.code(),
            Some(format!("{} is not a node id", req.voter_id)),
        );
    }
    let change = VoterChange::Add {
        id: req.voter_id as u64,
        addrs: req
            .listeners
            .iter()
            .map(|l| format!("{}:{}", l.host.as_str(), l.port))
            .collect(),
    };
    match cluster.change_voters(change, wait(req.timeout_ms)).await {
        Ok(()) => answer(0, None),
        Err(e) => answer(e.code(), Some(e.to_string())),
    }
}
