//! RemoveRaftVoter (key 81, KIP-853): `kafka-metadata-quorum remove-controller`. On a cluster
//! the Raft leader removes the voter (`cluster::voter_change`); it stays an observer, still a
//! broker, until it stops. The checks before it are AddRaftVoter's (`add_raft_voter::refused`);
//! the directory id is not checked (Strom's quorum keeps none).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{RemoveRaftVoterRequest, RemoveRaftVoterResponse};
use kafka_protocol::protocol::StrBytes;

use super::add_raft_voter::{refused, wait};
use super::RequestContext;
use crate::cluster::voter_change::VoterChange;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

/// RemoveRaftVoter has no timeout of its own: Kafka's controller request timeout.
const TIMEOUT_MS: i32 = 30_000;

pub async fn handle(ctx: &RequestContext, req: RemoveRaftVoterRequest) -> RemoveRaftVoterResponse {
    let answer = |code: i16, message: Option<String>| {
        RemoveRaftVoterResponse::default()
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string))
    };
    if let Some((code, message)) = refused(ctx, req.cluster_id.as_ref(), "removing") {
        return answer(code, Some(message));
    }
    let Some(cluster) = ctx.ctx().cluster.get() else {
        unreachable!("refused() answers a single node");
    };
    if req.voter_id < 0 {
        return answer(
            ResponseError::VoterNotFound.code(),
            Some(format!("{} is not a node id", req.voter_id)),
        );
    }
    let change = VoterChange::Remove {
        id: req.voter_id as u64,
    };
    match cluster.change_voters(change, wait(TIMEOUT_MS)).await {
        Ok(()) => answer(0, None),
        Err(e) => answer(e.code(), Some(e.to_string())),
    }
}
