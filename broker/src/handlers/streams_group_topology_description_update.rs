//! StreamsGroupTopologyDescriptionUpdate (key 93, KIP-1331, Kafka 4.4): a member pushes its
//! topology's description for a description plugin to store. Kafka ships no plugin and
//! configures none by default, and then answers every such request UNSUPPORTED_VERSION with
//! the message below (after the feature and ACL checks); Strom has no plugin either, so it
//! answers as a default Kafka does, and its heartbeats never ask for a description
//! (TopologyDescriptionRequired stays false).

use kafka_protocol::error::ResponseError;

use super::streams_group_heartbeat::streams_enabled;
use super::RequestContext;
use crate::codec::generated::streams_group_topology_description_update_request::{
    self as req_schema, StreamsGroupTopologyDescriptionUpdateRequest,
};
use crate::codec::generated::streams_group_topology_description_update_response::StreamsGroupTopologyDescriptionUpdateResponse;
use crate::security::acl::{Operation, ResourceType};

pub const API_KEY: i16 = req_schema::API_KEY;
pub const MIN_VERSION: i16 = req_schema::MIN_VERSION;
pub const MAX_VERSION: i16 = req_schema::MAX_VERSION;

pub async fn handle(
    ctx: &RequestContext,
    req: StreamsGroupTopologyDescriptionUpdateRequest,
) -> StreamsGroupTopologyDescriptionUpdateResponse {
    let (code, message) = if !streams_enabled(ctx) {
        (ResponseError::UnsupportedVersion.code(), None)
    } else if !ctx
        .access()
        .allows(Operation::Read, ResourceType::Group, &req.group_id)
    {
        (ResponseError::GroupAuthorizationFailed.code(), None)
    } else {
        (
            ResponseError::UnsupportedVersion.code(),
            Some("The broker has no streams group topology description plugin configured.".into()),
        )
    };
    StreamsGroupTopologyDescriptionUpdateResponse {
        error_code: code,
        error_message: message,
        ..Default::default()
    }
}
