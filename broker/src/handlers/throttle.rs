//! `throttle_time_ms` of a serial API's response: the request quota's throttle (`quota`),
//! which Kafka answers in every response that has the field. The API table calls this on
//! every response, so a new API does not compile until it says whether its response has one.

use kafka_protocol::messages::*;

use crate::codec::Capped;

pub trait Throttled {
    /// At least `ms`: a handler may have answered a longer throttle of its own already
    /// (the controller mutation quota).
    fn raise_throttle_time_ms(&mut self, ms: i32);
}

impl<T: Throttled> Throttled for Capped<T> {
    fn raise_throttle_time_ms(&mut self, ms: i32) {
        self.0.raise_throttle_time_ms(ms);
    }
}

macro_rules! throttled {
    ($($t:ty),* $(,)?) => {
        $(impl Throttled for $t {
            fn raise_throttle_time_ms(&mut self, ms: i32) {
                self.throttle_time_ms = self.throttle_time_ms.max(ms);
            }
        })*
    };
}

macro_rules! unthrottled {
    ($($t:ty),* $(,)?) => {
        $(impl Throttled for $t {
            fn raise_throttle_time_ms(&mut self, _ms: i32) {}
        })*
    };
}

throttled!(
    crate::codec::generated::streams_group_heartbeat_response::StreamsGroupHeartbeatResponse,
    crate::codec::generated::streams_group_describe_response::StreamsGroupDescribeResponse,
    crate::codec::generated::streams_group_topology_description_update_response::StreamsGroupTopologyDescriptionUpdateResponse,
    ListOffsetsResponse,
    MetadataResponse,
    ApiVersionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    InitProducerIdResponse,
    DescribeConfigsResponse,
    AlterConfigsResponse,
    IncrementalAlterConfigsResponse,
    crate::codec::describe_log_dirs::DescribeLogDirsResponse,
    CreatePartitionsResponse,
    DescribeClusterResponse,
    FindCoordinatorResponse,
    JoinGroupResponse,
    HeartbeatResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    OffsetDeleteResponse,
    ListGroupsResponse,
    DescribeGroupsResponse,
    crate::codec::delete_groups::DeleteGroupsResponse,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupDescribeResponse,
    DeleteRecordsResponse,
    OffsetForLeaderEpochResponse,
    AddPartitionsToTxnResponse,
    AddOffsetsToTxnResponse,
    EndTxnResponse,
    TxnOffsetCommitResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
    DescribeProducersResponse,
    UpdateFeaturesResponse,
    DescribeTopicPartitionsResponse,
    ElectLeadersResponse,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
    DescribeUserScramCredentialsResponse,
    AlterUserScramCredentialsResponse,
    DescribeAclsResponse,
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeClientQuotasResponse,
    AlterClientQuotasResponse,
    ShareGroupHeartbeatResponse,
    ShareGroupDescribeResponse,
    ShareFetchResponse,
    crate::codec::share_acknowledge::ShareAcknowledgeResponse,
    crate::codec::describe_share_group_offsets::DescribeShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponse,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryResponse,
    ListConfigResourcesResponse,
    AddRaftVoterResponse,
    RemoveRaftVoterResponse,
);

// No `throttle_time_ms` in these responses (the connection is still muted).
unthrottled!(
    WriteTxnMarkersResponse,
    DescribeQuorumResponse,
    SaslHandshakeResponse,
    SaslAuthenticateResponse,
);
