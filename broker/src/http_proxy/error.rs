//! The proxy's errors and how each is answered: Confluent REST Proxy's HTTP status plus its
//! body `{"error_code": N, "message": "…"}`. Kafka error codes from the broker's handlers map
//! as Confluent's `KafkaExceptionMapper` maps the Java client's exceptions (one table,
//! `kafka_status`, tested below); the proxy's own refusals carry the codes of
//! kafka-rest's `Errors` (40403 consumer instance, 40601 format mismatch, 42201 …).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::cli::error::{kafka_error_name, CliError};

/// kafka-rest's fixed codes (`Errors`, `KafkaExceptionMapper`).
pub mod code {
    pub const BAD_REQUEST: i32 = 400;
    pub const KAFKA_BAD_REQUEST: i32 = 40002;
    pub const KAFKA_AUTHENTICATION: i32 = 40101;
    pub const KAFKA_AUTHORIZATION: i32 = 40301;
    pub const TOPIC_NOT_FOUND: i32 = 40401;
    pub const PARTITION_NOT_FOUND: i32 = 40402;
    pub const UNKNOWN_TOPIC_PARTITION: i32 = 40403;
    pub const CONSUMER_INSTANCE_NOT_FOUND: i32 = 40403;
    pub const CONSUMER_FORMAT_MISMATCH: i32 = 40601;
    pub const CONSUMER_ALREADY_SUBSCRIBED: i32 = 40901;
    pub const CONSUMER_ALREADY_EXISTS: i32 = 40902;
    pub const ILLEGAL_STATE: i32 = 40903;
    pub const KEY_SCHEMA_MISSING: i32 = 42201;
    pub const VALUE_SCHEMA_MISSING: i32 = 42202;
    pub const SCHEMA_CONVERSION: i32 = 42203;
    pub const INVALID_CONSUMER_CONFIG: i32 = 42204;
    pub const KAFKA_ERROR: i32 = 50002;
    pub const KAFKA_RETRIABLE: i32 = 50003;
    pub const TOO_MANY_REQUESTS: i32 = 42901;
}

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// A Kafka error code from the broker's handlers, with what was being done.
    #[error("{}{}", kafka_message(*code), message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Kafka { code: i16, message: Option<String> },
    #[error("Topic not found.")]
    TopicNotFound,
    #[error("Partition not found.")]
    PartitionNotFound,
    #[error("Consumer instance not found.")]
    InstanceNotFound,
    #[error("Consumer with specified consumer ID already exists in the specified consumer group.")]
    InstanceExists,
    #[error("Consumer cannot subscribe the the specified target because it has already subscribed to other topics.")]
    AlreadySubscribed,
    #[error("Illegal state: {0}")]
    IllegalState(String),
    #[error("The requested embedded data format does not match the deserializer for this consumer instance")]
    FormatMismatch,
    #[error("Invalid consumer configuration: {0}")]
    InvalidConsumerConfig(String),
    #[error("Request includes keys but does not include key schema")]
    KeySchemaMissing,
    #[error("Request includes values but does not include value schema")]
    ValueSchemaMissing,
    /// The data does not fit its schema (Confluent's "Conversion of JSON to Avro failed").
    #[error("Conversion of JSON to {kind} failed: {reason}")]
    Conversion { kind: &'static str, reason: String },
    /// A malformed request: bad JSON, a missing field, bad base64.
    #[error("{0}")]
    BadRequest(String),
    #[error("HTTP 404 Not Found")]
    NoSuchRoute,
    #[error("Cluster {0} cannot be found.")]
    ClusterNotFound(String),
    #[error("HTTP 415 Unsupported Media Type")]
    UnsupportedMediaType,
    #[error("HTTP 406 Not Acceptable")]
    NotAcceptable,
    #[error("Request body is larger than {0} bytes")]
    TooLarge(usize),
    #[error("Too many consumer instances (max {0})")]
    TooManyInstances(usize),
    #[error("Too many produce requests in flight (max {0})")]
    TooManyStreams(usize),
    #[error("Unauthorized: {0}")]
    Unauthenticated(String),
    #[error("Kafka error: {0}")]
    Internal(String),
}

fn kafka_message(code: i16) -> String {
    kafka_error_name(code).to_string()
}

impl From<CliError> for ProxyError {
    fn from(e: CliError) -> Self {
        match e {
            CliError::Kafka { code, message, .. } => ProxyError::Kafka { code, message },
            CliError::Usage(m) => ProxyError::BadRequest(m),
            other => ProxyError::Internal(other.to_string()),
        }
    }
}

/// Kafka error code → Confluent's (status, error_code), as `KafkaExceptionMapper` answers
/// the exception the Java client raises for it.
pub fn kafka_status(code: i16) -> (StatusCode, i32) {
    match code {
        // UNKNOWN_TOPIC_OR_PARTITION (UnknownTopicOrPartitionException)
        3 => (StatusCode::NOT_FOUND, code::UNKNOWN_TOPIC_PARTITION),
        // TOPIC_, GROUP_, CLUSTER_, TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        29..=31 | 53 => (StatusCode::FORBIDDEN, code::KAFKA_AUTHORIZATION),
        // SASL_AUTHENTICATION_FAILED
        58 => (StatusCode::UNAUTHORIZED, code::KAFKA_AUTHENTICATION),
        // INVALID_TOPIC_EXCEPTION, RECORD_LIST_TOO_LARGE, INVALID_REQUIRED_ACKS,
        // INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT,
        // INVALID_CONFIG, TOPIC_ALREADY_EXISTS, INVALID_REQUEST, POLICY_VIOLATION,
        // INVALID_RECORD, MESSAGE_TOO_LARGE: the request's fault.
        10 | 17 | 18 | 21 | 36..=44 | 87 => (StatusCode::BAD_REQUEST, code::KAFKA_BAD_REQUEST),
        // The retriable ones: leader moves, coordinator loading, timeouts, throttling.
        5 | 6 | 7 | 13 | 14 | 15 | 16 | 19 | 20 | 27 | 51 => {
            (StatusCode::INTERNAL_SERVER_ERROR, code::KAFKA_RETRIABLE)
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, code::KAFKA_ERROR),
    }
}

impl ProxyError {
    pub fn status_and_code(&self) -> (StatusCode, i32) {
        use ProxyError::*;
        match self {
            Kafka { code, .. } => kafka_status(*code),
            TopicNotFound => (StatusCode::NOT_FOUND, code::TOPIC_NOT_FOUND),
            PartitionNotFound => (StatusCode::NOT_FOUND, code::PARTITION_NOT_FOUND),
            InstanceNotFound => (StatusCode::NOT_FOUND, code::CONSUMER_INSTANCE_NOT_FOUND),
            InstanceExists => (StatusCode::CONFLICT, code::CONSUMER_ALREADY_EXISTS),
            AlreadySubscribed => (StatusCode::CONFLICT, code::CONSUMER_ALREADY_SUBSCRIBED),
            IllegalState(_) => (StatusCode::CONFLICT, code::ILLEGAL_STATE),
            FormatMismatch => (StatusCode::NOT_ACCEPTABLE, code::CONSUMER_FORMAT_MISMATCH),
            InvalidConsumerConfig(_) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                code::INVALID_CONSUMER_CONFIG,
            ),
            KeySchemaMissing => (StatusCode::UNPROCESSABLE_ENTITY, code::KEY_SCHEMA_MISSING),
            ValueSchemaMissing => (StatusCode::UNPROCESSABLE_ENTITY, code::VALUE_SCHEMA_MISSING),
            Conversion { .. } => (StatusCode::UNPROCESSABLE_ENTITY, code::SCHEMA_CONVERSION),
            BadRequest(_) => (StatusCode::BAD_REQUEST, code::BAD_REQUEST),
            NoSuchRoute | ClusterNotFound(_) => (StatusCode::NOT_FOUND, 404),
            UnsupportedMediaType => (StatusCode::UNSUPPORTED_MEDIA_TYPE, 415),
            NotAcceptable => (StatusCode::NOT_ACCEPTABLE, 406),
            TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, 413),
            TooManyInstances(_) | TooManyStreams(_) => {
                (StatusCode::TOO_MANY_REQUESTS, code::TOO_MANY_REQUESTS)
            }
            Unauthenticated(_) => (StatusCode::UNAUTHORIZED, code::KAFKA_AUTHENTICATION),
            Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, code::KAFKA_ERROR),
        }
    }

    /// The body Confluent answers an error with (also one line of a streamed produce).
    pub fn body(&self) -> serde_json::Value {
        let (_, error_code) = self.status_and_code();
        serde_json::json!({ "error_code": error_code, "message": self.to_string() })
    }
}

impl IntoResponse for ProxyError {
    fn into_response(self) -> Response {
        let (status, _) = self.status_and_code();
        if status.is_server_error() {
            tracing::warn!(error = %self, "http proxy");
        } else {
            tracing::debug!(error = %self, "http proxy");
        }
        let mut r = (status, Json(self.body())).into_response();
        if let ProxyError::Unauthenticated(_) = self {
            r.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Basic realm=\"strom\", charset=\"UTF-8\""),
            );
        }
        r
    }
}

pub type ProxyResult<T> = Result<T, ProxyError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_kafka_codes_when_mapped_then_confluents_status_and_code() {
        let cases = [
            (3, StatusCode::NOT_FOUND, 40403),
            (29, StatusCode::FORBIDDEN, 40301),
            (30, StatusCode::FORBIDDEN, 40301),
            (36, StatusCode::BAD_REQUEST, 40002),
            (37, StatusCode::BAD_REQUEST, 40002),
            (17, StatusCode::BAD_REQUEST, 40002),
            (6, StatusCode::INTERNAL_SERVER_ERROR, 50003),
            (-1, StatusCode::INTERNAL_SERVER_ERROR, 50002),
        ];
        for (kafka, status, code) in cases {
            assert_eq!(kafka_status(kafka), (status, code), "kafka code {kafka}");
        }
    }

    #[test]
    fn given_proxy_errors_then_body_is_confluents_shape() {
        let cases = [
            (ProxyError::InstanceNotFound, StatusCode::NOT_FOUND, 40403),
            (ProxyError::TopicNotFound, StatusCode::NOT_FOUND, 40401),
            (ProxyError::PartitionNotFound, StatusCode::NOT_FOUND, 40402),
            (
                ProxyError::FormatMismatch,
                StatusCode::NOT_ACCEPTABLE,
                40601,
            ),
            (
                ProxyError::UnsupportedMediaType,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                415,
            ),
            (
                ProxyError::BadRequest("x".into()),
                StatusCode::BAD_REQUEST,
                400,
            ),
            (
                ProxyError::ValueSchemaMissing,
                StatusCode::UNPROCESSABLE_ENTITY,
                42202,
            ),
            (ProxyError::TooLarge(1), StatusCode::PAYLOAD_TOO_LARGE, 413),
        ];
        for (e, status, code) in cases {
            assert_eq!(e.status_and_code(), (status, code), "{e}");
            let body = e.body();
            assert_eq!(body["error_code"], code);
            assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
        }
        assert_eq!(
            ProxyError::Kafka {
                code: 3,
                message: None
            }
            .body()["error_code"],
            40403
        );
    }
}
