//! The one place where Strom's errors become Kafka error codes.
//!
//! Domain modules (partition, coordinators, metadata, fetch sessions) fail in their own
//! vocabulary (`thiserror` enums with real messages); handlers answer clients in Kafka's. Each
//! mapping below is total over its enum, so a new variant does not compile until it has a
//! code, and each has a table test against the numeric codes of Kafka's `Errors.java`.

use kafka_protocol::error::ResponseError;
use storage::batch::BatchError;
use storage::StorageError;

use crate::cluster::handle::ClusterError;
use crate::config::dynamic::BrokerConfigError;
use crate::config::topic::TopicConfigError;
use crate::coordinator::group::GroupError;
use crate::coordinator::txn::TxnError;
use crate::fetch_session::SessionError;
use crate::metadata::features::FeatureError;
use crate::metadata::topics::CreateError;
use crate::partition::producer_state::SequenceError;
use crate::partition::records::RecordsError;
use crate::partition::txn::TxnDataError;
use crate::partition::{DeleteRecordsError, PartitionError};
use crate::shard::frontend::FrontendError;
use crate::telemetry::TelemetryError;

/// Kafka's message when an ACL API reaches a broker without an authorizer.
pub const NO_AUTHORIZER: &str = "No Authorizer is configured.";
/// The messages of Kafka's authorization exceptions (`Errors.java` defaults), for the APIs
/// whose responses carry a message.
pub const CLUSTER_AUTHORIZATION_FAILED: &str = "Cluster authorization failed.";
/// Kafka's `Errors.THROTTLING_QUOTA_EXCEEDED` message.
pub const THROTTLING_QUOTA_EXCEEDED: &str = "The throttling quota has been exceeded.";
pub const TOPIC_AUTHORIZATION_FAILED: &str = "Topic authorization failed.";
pub const GROUP_AUTHORIZATION_FAILED: &str = "Group authorization failed.";
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: &str = "Transactional Id authorization failed.";

/// Why one resource of an alter request fails.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AlterError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    InvalidConfig(String),
    #[error("{0}")]
    InvalidTopic(String),
    #[error("The topic '{0}' does not exist.")]
    UnknownTopic(String),
    #[error("{0}")]
    Storage(String),
    /// The metadata quorum did not take the change in time (clustered).
    #[error("{0}")]
    Timeout(String),
}

impl From<ClusterError> for AlterError {
    fn from(e: ClusterError) -> Self {
        match e {
            ClusterError::NoQuorum(_) => AlterError::Timeout(e.to_string()),
            other => AlterError::Storage(other.to_string()),
        }
    }
}

impl From<TopicConfigError> for AlterError {
    fn from(e: TopicConfigError) -> Self {
        AlterError::InvalidConfig(e.to_string())
    }
}

impl From<BrokerConfigError> for AlterError {
    /// Kafka wraps broker-side validation failures in InvalidRequestException (KAFKA-13609).
    fn from(e: BrokerConfigError) -> Self {
        AlterError::InvalidRequest(e.to_string())
    }
}

impl From<crate::logging::LoggerError> for AlterError {
    /// Kafka's `RuntimeLoggerManager`: unknown loggers and levels are configuration errors,
    /// removing root's level a bad request.
    fn from(e: crate::logging::LoggerError) -> Self {
        use crate::logging::LoggerError as L;
        match e {
            L::UnknownLogger(_) | L::InvalidLevel(..) => AlterError::InvalidConfig(e.to_string()),
            L::RemoveRoot => AlterError::InvalidRequest(e.to_string()),
            L::Install(_) => AlterError::Storage(e.to_string()),
        }
    }
}

/// FindCoordinator: a key type it does not know, or its coordinator's failure.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FindError {
    #[error("key type {0} is not a group (0) or transaction (1) key")]
    InvalidKeyType(i8),
    #[error(transparent)]
    Group(#[from] GroupError),
    #[error(transparent)]
    Txn(#[from] TxnError),
}

/// A partition reached through the shard frontend: every partition API (Produce, Fetch,
/// ListOffsets, DeleteRecords, OffsetForLeaderEpoch, DescribeProducers, WriteTxnMarkers).
pub fn frontend_code(e: &FrontendError) -> i16 {
    match e {
        FrontendError::UnknownPartition(..) => ResponseError::UnknownTopicOrPartition.code(),
        // The shard is stopping: this node no longer serves the partition.
        FrontendError::ShardGone(_) => ResponseError::NotLeaderOrFollower.code(),
        FrontendError::Offline(..) => ResponseError::KafkaStorageError.code(),
        FrontendError::Storage(s) => storage_code(s),
        FrontendError::Partition(p) => partition_code(p),
        FrontendError::Remote(..) => ResponseError::NotLeaderOrFollower.code(),
        // Kafka answers a failed remote read with Errors.forException(e): a
        // RemoteStorageException is no ApiException, so UNKNOWN_SERVER_ERROR, which
        // consumers treat as transient for fetches.
        FrontendError::RemoteStorage(_) => ResponseError::UnknownServerError.code(),
    }
}

/// What the home shard refused (Kafka's `LogValidator`, `ProducerAppendInfo`).
pub fn partition_code(e: &PartitionError) -> i16 {
    let r = match e {
        // A batch whose records do not add up to its header is invalid rather than corrupt
        // (its CRC checks out), as Kafka's LogValidator reports it.
        PartitionError::Corrupt(BatchError::BadRecordCount { .. }) => ResponseError::InvalidRecord,
        PartitionError::Corrupt(_) => ResponseError::CorruptMessage,
        PartitionError::InvalidRecord(_) => ResponseError::InvalidRecord,
        PartitionError::Records(r) => return records_code(r),
        PartitionError::TooLarge { .. } => ResponseError::MessageTooLarge,
        // KIP-467: INVALID_TIMESTAMP when any record's timestamp is out of bounds, as Kafka.
        PartitionError::Rejected(records) if records.iter().any(|r| r.timestamp) => {
            ResponseError::InvalidTimestamp
        }
        PartitionError::Rejected(_) => ResponseError::InvalidRecord,
        PartitionError::Sequence(SequenceError::InvalidProducerEpoch { .. }) => {
            ResponseError::InvalidProducerEpoch
        }
        PartitionError::Sequence(_) => ResponseError::OutOfOrderSequenceNumber,
        // Since Kafka 2.7 a produce is never told PRODUCER_FENCED: INVALID_PRODUCER_EPOCH
        // lets the client abort its transaction and go on (ProducerAppendInfo).
        PartitionError::Txn(TxnDataError::InvalidProducerEpoch { .. }) => {
            ResponseError::InvalidProducerEpoch
        }
        PartitionError::Txn(TxnDataError::CoordinatorFenced { .. }) => {
            ResponseError::TransactionCoordinatorFenced
        }
        PartitionError::Txn(TxnDataError::NotAddedToTxn { .. })
        | PartitionError::Txn(TxnDataError::ExpectedTransactional { .. }) => {
            ResponseError::InvalidTxnState
        }
        PartitionError::Storage(s) => return storage_code(s),
        PartitionError::NotLeader => ResponseError::NotLeaderOrFollower,
        PartitionError::NotEnoughReplicasAfterAppend => ResponseError::NotEnoughReplicasAfterAppend,
        PartitionError::ReplicationTimeout => ResponseError::RequestTimedOut,
    };
    r.code()
}

/// A batch's records (compressed payloads, keys of compacted topics).
pub fn records_code(e: &RecordsError) -> i16 {
    let r = match e {
        RecordsError::Decompress { .. }
        | RecordsError::UnknownCodec(_)
        | RecordsError::Malformed { .. } => ResponseError::CorruptMessage,
        RecordsError::TooLarge { .. } => ResponseError::MessageTooLarge,
        RecordsError::CountMismatch { .. } | RecordsError::OffsetDelta { .. } => {
            ResponseError::InvalidRecord
        }
    };
    r.code()
}

/// The log: an offset outside it is the client's error, anything else the disk's.
pub fn storage_code(e: &StorageError) -> i16 {
    match e {
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
        _ => ResponseError::KafkaStorageError.code(),
    }
}

pub fn delete_records_code(e: &DeleteRecordsError) -> i16 {
    match e {
        DeleteRecordsError::Policy(_) => ResponseError::PolicyViolation.code(),
        DeleteRecordsError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
        DeleteRecordsError::Storage(s) => storage_code(s),
        DeleteRecordsError::ReplicasTimedOut { .. } => ResponseError::RequestTimedOut.code(),
    }
}

/// Every group API fails in the same vocabulary.
pub fn group_code(e: &GroupError) -> i16 {
    use GroupError as G;
    let r = match e {
        G::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        G::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        G::NotCoordinator => ResponseError::NotCoordinator,
        G::InvalidGroupId => ResponseError::InvalidGroupId,
        G::UnknownMemberId => ResponseError::UnknownMemberId,
        G::MemberIdRequired(_) => ResponseError::MemberIdRequired,
        G::IllegalGeneration => ResponseError::IllegalGeneration,
        G::RebalanceInProgress => ResponseError::RebalanceInProgress,
        G::FencedInstanceId => ResponseError::FencedInstanceId,
        G::UnreleasedInstanceId => ResponseError::UnreleasedInstanceId,
        G::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        G::InvalidSessionTimeout(_) => ResponseError::InvalidSessionTimeout,
        G::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        G::GroupIdNotFound => ResponseError::GroupIdNotFound,
        G::NonEmptyGroup => ResponseError::NonEmptyGroup,
        G::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        G::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        G::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        G::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        G::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
        G::UnsupportedAssignor => ResponseError::UnsupportedAssignor,
        G::InvalidRegularExpression(_) => ResponseError::InvalidRegularExpression,
        G::InvalidRequest(_) => ResponseError::InvalidRequest,
        G::StreamsInvalidTopology(_) => ResponseError::StreamsInvalidTopology,
        G::UnsupportedVersion(_) => ResponseError::UnsupportedVersion,
        // A failed append to __consumer_offsets: Kafka answers NOT_COORDINATOR so the client
        // looks the coordinator up again and retries.
        G::Storage(_) => ResponseError::NotCoordinator,
    };
    r.code()
}

/// Transaction coordinator failures. Clients before `fenced_since` (the first version of the
/// API that knows PRODUCER_FENCED, KIP-588) get INVALID_PRODUCER_EPOCH instead, as Kafka
/// answers them.
pub fn txn_code(e: &TxnError, version: i16, fenced_since: i16) -> i16 {
    use TxnError as T;
    let r = match e {
        T::InvalidRequest(_) => ResponseError::InvalidRequest,
        T::InvalidTransactionTimeout(_) => ResponseError::InvalidTransactionTimeout,
        T::ProducerFenced if version < fenced_since => ResponseError::InvalidProducerEpoch,
        T::ProducerFenced => ResponseError::ProducerFenced,
        T::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        T::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        T::InvalidTxnState(_) => ResponseError::InvalidTxnState,
        T::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        T::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        T::NotCoordinator => ResponseError::NotCoordinator,
        T::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        T::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
        // A failed write to __transaction_state: Kafka answers NOT_COORDINATOR (or
        // COORDINATOR_NOT_AVAILABLE), both of which make the client look up and retry.
        T::Log(_) => ResponseError::NotCoordinator,
        T::ProducerIds(_) => ResponseError::CoordinatorNotAvailable,
    };
    r.code()
}

pub fn find_coordinator_code(e: &FindError) -> i16 {
    match e {
        FindError::InvalidKeyType(_) => ResponseError::InvalidRequest.code(),
        FindError::Group(g) => group_code(g),
        FindError::Txn(t) => txn_code(t, 0, 0),
    }
}

pub fn create_code(e: &CreateError) -> i16 {
    let r = match e {
        CreateError::InvalidName(_) => ResponseError::InvalidTopicException,
        CreateError::AlreadyExists => ResponseError::TopicAlreadyExists,
        CreateError::InvalidPartitions => ResponseError::InvalidPartitions,
        CreateError::InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
        CreateError::InvalidAssignment(_) => ResponseError::InvalidReplicaAssignment,
        CreateError::InvalidRequest(_) => ResponseError::InvalidRequest,
        CreateError::InvalidConfig(_) => ResponseError::InvalidConfig,
        CreateError::Storage(_) => ResponseError::KafkaStorageError,
        CreateError::ThrottlingQuotaExceeded => ResponseError::ThrottlingQuotaExceeded,
    };
    r.code()
}

pub fn alter_code(e: &AlterError) -> i16 {
    let r = match e {
        AlterError::InvalidRequest(_) => ResponseError::InvalidRequest,
        AlterError::InvalidConfig(_) => ResponseError::InvalidConfig,
        AlterError::InvalidTopic(_) => ResponseError::InvalidTopicException,
        AlterError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        AlterError::Storage(_) => ResponseError::KafkaStorageError,
        AlterError::Timeout(_) => ResponseError::RequestTimedOut,
    };
    r.code()
}

/// A change the metadata quorum was asked to make and did not (clustered ACL, SCRAM, quota
/// and feature writes): no quorum within the proposal's time is Kafka's REQUEST_TIMED_OUT
/// (what its brokers answer when the forwarded request times out at the controller); the
/// rest is a broker fault.
pub fn cluster_write_code(e: &ClusterError) -> ResponseError {
    match e {
        ClusterError::NoQuorum(_) => ResponseError::RequestTimedOut,
        ClusterError::Voters(_)
        | ClusterError::Bind { .. }
        | ClusterError::Store { .. }
        | ClusterError::MigrationConflict(_)
        | ClusterError::Raft(_) => ResponseError::UnknownServerError,
    }
}

/// GetTelemetrySubscriptions and PushTelemetry (Kafka's `ClientMetricsManager`).
pub fn telemetry_code(e: &TelemetryError) -> i16 {
    let r = match e {
        TelemetryError::InvalidRequest(_) => ResponseError::InvalidRequest,
        TelemetryError::Throttled(_) => ResponseError::ThrottlingQuotaExceeded,
        TelemetryError::UnknownSubscription(_) => ResponseError::UnknownSubscriptionId,
        TelemetryError::UnsupportedCompression(..) => ResponseError::UnsupportedCompressionType,
        TelemetryError::TooLarge(..) => ResponseError::TelemetryTooLarge,
        TelemetryError::InvalidRecord(_) => ResponseError::InvalidRecord,
    };
    r.code()
}

/// UpdateFeatures (Kafka's `FeatureControlManager` answers INVALID_UPDATE_VERSION for every
/// refused level; a failed write is the controller's unexpected error).
pub fn feature_code(e: &FeatureError) -> i16 {
    let r = match e {
        FeatureError::InvalidUpdate(_) => ResponseError::InvalidUpdateVersion,
        FeatureError::Persist(_) | FeatureError::Io { .. } | FeatureError::Corrupt { .. } => {
            ResponseError::FeatureUpdateFailed
        }
    };
    r.code()
}

/// KIP-227 fetch sessions (Kafka's `FetchSession` errors).
pub fn session_code(e: &SessionError) -> i16 {
    let r = match e {
        SessionError::NotFound => ResponseError::FetchSessionIdNotFound,
        SessionError::InvalidEpoch => ResponseError::InvalidFetchSessionEpoch,
    };
    r.code()
}

/// Kafka's gate for the ACL APIs: no authorizer configured → SECURITY_DISABLED; otherwise
/// `op` (ALTER to create/delete, DESCRIBE to describe) on the cluster, else
/// CLUSTER_AUTHORIZATION_FAILED. The error and the message to answer with, if refused.
pub fn acl_api_refusal(
    ctx: &super::RequestContext,
    op: crate::security::acl::Operation,
) -> Option<(ResponseError, &'static str)> {
    if ctx.ctx().authorizer.is_none() {
        Some((ResponseError::SecurityDisabled, NO_AUTHORIZER))
    } else if !ctx.access().allows_cluster(op) {
        Some((
            ResponseError::ClusterAuthorizationFailed,
            CLUSTER_AUTHORIZATION_FAILED,
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::log::CoordinatorLogError;

    #[test]
    fn given_each_frontend_error_when_mapping_then_kafka_code() {
        use crate::partition::records::RecordError;
        use TxnDataError as TxnError;
        let seq = SequenceError::OutOfOrder {
            producer_id: 1,
            first_seq: 1,
            last_seq: 1,
            offset: 0,
        };
        let epoch = SequenceError::InvalidProducerEpoch {
            producer_id: 1,
            epoch: 0,
            current: 1,
            offset: 0,
        };
        let table: Vec<(FrontendError, i16)> = vec![
            (FrontendError::UnknownPartition("t".into(), 0), 3),
            (FrontendError::ShardGone(1), 6),
            (FrontendError::Offline("t".into(), 0, "corrupt".into()), 56),
            (
                FrontendError::Partition(PartitionError::Corrupt(
                    storage::batch::BatchError::Truncated,
                )),
                2,
            ),
            (
                FrontendError::Partition(PartitionError::InvalidRecord("x".into())),
                87,
            ),
            (
                FrontendError::Partition(PartitionError::Records(RecordsError::OffsetDelta {
                    index: 1,
                    delta: 2,
                })),
                87,
            ),
            (
                FrontendError::Partition(PartitionError::Records(RecordsError::CountMismatch {
                    claimed: 2,
                    found: 1,
                })),
                87,
            ),
            (
                FrontendError::Partition(PartitionError::Records(RecordsError::Malformed {
                    index: 0,
                    reason: "x",
                })),
                2,
            ),
            (
                FrontendError::Partition(PartitionError::Records(RecordsError::TooLarge {
                    limit: 1,
                })),
                10,
            ),
            (
                FrontendError::Partition(PartitionError::TooLarge { size: 2, max: 1 }),
                10,
            ),
            (
                FrontendError::Partition(PartitionError::Rejected(vec![RecordError {
                    index: 1,
                    message: "x".into(),
                    timestamp: true,
                    embedding: false,
                }])),
                32,
            ),
            (
                FrontendError::Partition(PartitionError::Rejected(vec![RecordError {
                    index: 1,
                    message: "x".into(),
                    timestamp: false,
                    embedding: true,
                }])),
                87,
            ),
            (FrontendError::Partition(PartitionError::Sequence(seq)), 45),
            (
                FrontendError::Partition(PartitionError::Sequence(epoch)),
                47,
            ),
            (
                FrontendError::Partition(PartitionError::Txn(TxnError::InvalidProducerEpoch {
                    producer_id: 1,
                    epoch: 0,
                    current: 1,
                    offset: 0,
                })),
                47,
            ),
            (
                FrontendError::Partition(PartitionError::Txn(TxnError::NotAddedToTxn {
                    producer_id: 1,
                    epoch: 0,
                })),
                48,
            ),
            (
                FrontendError::Partition(PartitionError::Txn(TxnError::ExpectedTransactional {
                    producer_id: 1,
                    offset: 0,
                })),
                48,
            ),
            (
                FrontendError::Partition(PartitionError::Txn(TxnError::CoordinatorFenced {
                    producer_id: 1,
                    epoch: 0,
                    current: 1,
                    offset: 0,
                })),
                52,
            ),
        ];
        for (e, code) in table {
            assert_eq!(frontend_code(&e), code, "{e}");
        }
    }

    #[test]
    fn given_each_group_error_when_mapping_then_kafka_code() {
        use GroupError as G;
        let table: &[(G, i16)] = &[
            (G::CoordinatorNotAvailable, 15),
            (G::CoordinatorLoadInProgress, 14),
            (G::NotCoordinator, 16),
            (G::InvalidGroupId, 24),
            (G::UnknownMemberId, 25),
            (G::MemberIdRequired("m".into()), 79),
            (G::IllegalGeneration, 22),
            (G::RebalanceInProgress, 27),
            (G::FencedInstanceId, 82),
            (G::UnreleasedInstanceId, 111),
            (G::InconsistentGroupProtocol, 23),
            (G::InvalidSessionTimeout(1), 26),
            (G::GroupMaxSizeReached, 81),
            (G::GroupIdNotFound, 69),
            (G::NonEmptyGroup, 68),
            (G::GroupSubscribedToTopic, 86),
            (G::UnknownTopicOrPartition, 3),
            (G::OffsetMetadataTooLarge, 12),
            (G::FencedMemberEpoch, 110),
            (G::StaleMemberEpoch, 113),
            (G::UnsupportedAssignor, 112),
            (G::InvalidRegularExpression("x".into()), 128),
            (G::InvalidRequest("x".into()), 42),
            (G::StreamsInvalidTopology("x".into()), 130),
            (G::UnsupportedVersion("x".into()), 35),
            (G::Storage("x".into()), 16),
        ];
        for (e, code) in table {
            assert_eq!(group_code(e), *code, "{e:?}");
        }
    }

    #[test]
    fn given_each_txn_error_when_mapping_then_kafka_code() {
        use TxnError as T;
        let table: &[(T, i16)] = &[
            (T::InvalidRequest("x".into()), 42),
            (T::InvalidTransactionTimeout(0), 50),
            (T::ProducerFenced, 90),
            (T::InvalidProducerIdMapping, 49),
            (T::ConcurrentTransactions, 51),
            (T::InvalidTxnState("x".into()), 48),
            (T::CoordinatorNotAvailable, 15),
            (T::CoordinatorLoadInProgress, 14),
            (T::NotCoordinator, 16),
            (T::UnknownTopicOrPartition, 3),
            (T::TransactionalIdNotFound, 105),
            (T::Log(CoordinatorLogError::Append("x".into())), 16),
            (T::ProducerIds("x".into()), 15),
        ];
        for (e, code) in table {
            assert_eq!(txn_code(e, 5, 2), *code, "{e:?}");
        }
        // Old clients do not know PRODUCER_FENCED: INVALID_PRODUCER_EPOCH.
        assert_eq!(txn_code(&T::ProducerFenced, 1, 2), 47);
    }

    #[test]
    fn given_feature_errors_when_mapping_then_kafka_codes() {
        assert_eq!(feature_code(&FeatureError::InvalidUpdate("x".into())), 95);
        let io = FeatureError::Io {
            path: "f".into(),
            source: std::io::Error::other("x"),
        };
        assert_eq!(feature_code(&io), 96);
    }

    #[test]
    fn given_fetch_session_errors_when_mapping_then_kafka_codes() {
        assert_eq!(session_code(&SessionError::NotFound), 70);
        assert_eq!(session_code(&SessionError::InvalidEpoch), 71);
    }

    #[test]
    fn given_storage_errors_when_mapping_then_out_of_range_is_the_clients() {
        let oor = StorageError::OffsetOutOfRange {
            offset: 9,
            log_start: 0,
            log_end: 3,
        };
        assert_eq!(storage_code(&oor), 1);
        assert_eq!(frontend_code(&FrontendError::Storage(oor)), 1);
        let table = [
            (DeleteRecordsError::Policy("t-0".into()), 44),
            (
                DeleteRecordsError::ReplicasTimedOut {
                    offset: 5,
                    low_watermark: 3,
                },
                7,
            ),
            (
                DeleteRecordsError::OffsetOutOfRange {
                    offset: 9,
                    high_watermark: 3,
                },
                1,
            ),
            (
                DeleteRecordsError::Storage(StorageError::LogFailed {
                    path: "p".into(),
                    reason: "r".into(),
                }),
                56,
            ),
        ];
        for (e, code) in table {
            assert_eq!(delete_records_code(&e), code, "{e:?}");
        }
    }

    #[test]
    fn given_each_alter_error_when_mapped_then_kafka_code() {
        let cases = [
            (AlterError::InvalidRequest("x".into()), 42),
            (AlterError::InvalidConfig("x".into()), 40),
            (AlterError::InvalidTopic("x".into()), 17),
            (AlterError::UnknownTopic("t".into()), 3),
            (AlterError::Storage("x".into()), 56),
            (
                AlterError::from(BrokerConfigError::NotDynamic(vec!["log.dirs".into()])),
                42,
            ),
            (
                AlterError::from(TopicConfigError::Unknown("nope".into())),
                40,
            ),
        ];
        for (e, code) in cases {
            assert_eq!(crate::handlers::errors::alter_code(&e), code, "{e:?}");
        }
        assert_eq!(
            AlterError::UnknownTopic("t".into()).to_string(),
            "The topic 't' does not exist."
        );
    }

    #[test]
    fn given_each_find_error_when_mapping_then_kafka_code() {
        assert_eq!(find_coordinator_code(&FindError::InvalidKeyType(9)), 42);
        assert_eq!(
            find_coordinator_code(&FindError::Txn(TxnError::CoordinatorNotAvailable)),
            15
        );
        assert_eq!(
            find_coordinator_code(&FindError::Group(GroupError::CoordinatorNotAvailable)),
            15
        );
    }

    #[test]
    fn given_each_cluster_write_error_when_mapping_then_kafka_code() {
        let s = String::new;
        for (e, code) in [
            (ClusterError::NoQuorum(s()), 7),
            (ClusterError::Raft(s()), -1),
            (ClusterError::MigrationConflict(s()), -1),
        ] {
            assert_eq!(cluster_write_code(&e).code(), code, "{e:?}");
        }
        assert_eq!(alter_code(&ClusterError::NoQuorum(s()).into()), 7);
        assert_eq!(alter_code(&ClusterError::Raft(s()).into()), 56);
    }

    #[test]
    fn given_each_telemetry_error_when_mapping_then_kafka_code() {
        let s = String::new;
        for (e, code) in [
            (TelemetryError::InvalidRequest(s()), 42),
            (TelemetryError::Throttled(s()), 89),
            (TelemetryError::UnknownSubscription(s()), 117),
            (TelemetryError::UnsupportedCompression(9, s()), 76),
            (TelemetryError::TooLarge(s(), 1), 118),
            (TelemetryError::InvalidRecord(s()), 87),
        ] {
            assert_eq!(telemetry_code(&e), code, "{e:?}");
        }
    }
}
