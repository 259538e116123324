//! The registry's errors and their one mapping to Confluent's answers: an HTTP status and the
//! body `{"error_code": N, "message": "..."}` (Confluent's `ErrorMessage`), with the messages
//! Confluent's `Errors` class formats. The table test below pins every mapping.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Confluent's media type; every answer carries it.
pub const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistryError {
    #[error("Subject '{0}' not found.")]
    SubjectNotFound(String),
    #[error("Version {0} not found.")]
    VersionNotFound(i32),
    #[error("Schema {0} not found")]
    SchemaNotFound(i32),
    #[error("Schema not found")]
    SchemaNotFoundAny,
    #[error("Subject '{0}' was soft deleted.Set permanent=true to delete permanently")]
    SubjectSoftDeleted(String),
    #[error("Subject '{0}' was not deleted first before being permanently deleted")]
    SubjectNotSoftDeleted(String),
    #[error("Subject '{0}' Version {1} was soft deleted.Set permanent=true to delete permanently")]
    VersionSoftDeleted(String, i32),
    #[error("Subject '{0}' Version {1} was not deleted first before being permanently deleted")]
    VersionNotSoftDeleted(String, i32),
    #[error("Subject '{0}' does not have subject-level compatibility configured")]
    SubjectCompatibilityNotConfigured(String),
    #[error("Subject '{0}' does not have subject-level mode configured")]
    SubjectModeNotConfigured(String),
    /// The message is Confluent's: `Schema being registered is incompatible with an earlier
    /// schema for subject "s", details: [...]`.
    #[error("{0}")]
    Incompatible(String),
    #[error("{0}")]
    InvalidSchema(String),
    #[error("The specified version '{0}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"")]
    InvalidVersion(String),
    #[error("Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive")]
    InvalidCompatibility,
    #[error("Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD.")]
    InvalidMode,
    #[error("{0}")]
    OperationNotPermitted(String),
    #[error("One or more references exist to the schema {0}.")]
    ReferenceExists(String),
    #[error("The specified subject '{0}' is not a valid.")]
    InvalidSubject(String),
    #[error("Register operation failed because schema is too large")]
    SchemaTooLarge,
    #[error("{0}")]
    Store(String),
    #[error("{0}")]
    Timeout(String),
    /// rest-utils' answer for an unknown path.
    #[error("HTTP 404 Not Found")]
    NoRoute,
    #[error("HTTP 405 Method Not Allowed")]
    MethodNotAllowed,
    /// A body that is not JSON (rest-utils' JsonParseExceptionMapper).
    #[error("{0}")]
    MalformedJson(String),
    /// JSON of the wrong shape (rest-utils' JsonMappingExceptionMapper).
    #[error("{0}")]
    UnprocessableJson(String),
    #[error("HTTP 415 Unsupported Media Type")]
    UnsupportedMediaType,
    #[error("Request body too large")]
    BodyTooLarge,
}

impl RegistryError {
    /// (HTTP status, Confluent error code).
    pub fn codes(&self) -> (StatusCode, u32) {
        use RegistryError::*;
        match self {
            SubjectNotFound(_) => (StatusCode::NOT_FOUND, 40401),
            VersionNotFound(_) => (StatusCode::NOT_FOUND, 40402),
            SchemaNotFound(_) | SchemaNotFoundAny => (StatusCode::NOT_FOUND, 40403),
            SubjectSoftDeleted(_) => (StatusCode::NOT_FOUND, 40404),
            SubjectNotSoftDeleted(_) => (StatusCode::NOT_FOUND, 40405),
            VersionSoftDeleted(..) => (StatusCode::NOT_FOUND, 40406),
            VersionNotSoftDeleted(..) => (StatusCode::NOT_FOUND, 40407),
            SubjectCompatibilityNotConfigured(_) => (StatusCode::NOT_FOUND, 40408),
            SubjectModeNotConfigured(_) => (StatusCode::NOT_FOUND, 40409),
            // Confluent Platform up to 8.1 (and Redpanda) answer error_code 409; 8.2 moved it
            // to 40901 (docs/schema-registry.md).
            Incompatible(_) => (StatusCode::CONFLICT, 409),
            InvalidSchema(_) => (StatusCode::UNPROCESSABLE_ENTITY, 42201),
            InvalidVersion(_) => (StatusCode::UNPROCESSABLE_ENTITY, 42202),
            InvalidCompatibility => (StatusCode::UNPROCESSABLE_ENTITY, 42203),
            InvalidMode => (StatusCode::UNPROCESSABLE_ENTITY, 42204),
            OperationNotPermitted(_) => (StatusCode::UNPROCESSABLE_ENTITY, 42205),
            ReferenceExists(_) => (StatusCode::UNPROCESSABLE_ENTITY, 42206),
            InvalidSubject(_) => (StatusCode::UNPROCESSABLE_ENTITY, 42208),
            SchemaTooLarge => (StatusCode::UNPROCESSABLE_ENTITY, 42209),
            Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, 50001),
            Timeout(_) => (StatusCode::INTERNAL_SERVER_ERROR, 50002),
            NoRoute => (StatusCode::NOT_FOUND, 404),
            MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, 405),
            MalformedJson(_) => (StatusCode::BAD_REQUEST, 400),
            UnprocessableJson(_) => (StatusCode::UNPROCESSABLE_ENTITY, 422),
            UnsupportedMediaType => (StatusCode::UNSUPPORTED_MEDIA_TYPE, 415),
            BodyTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, 413),
        }
    }

    pub fn body(&self) -> String {
        let (_, code) = self.codes();
        serde_json::json!({ "error_code": code, "message": self.to_string() }).to_string()
    }
}

impl IntoResponse for RegistryError {
    fn into_response(self) -> Response {
        let (status, _) = self.codes();
        if status.is_server_error() {
            tracing::warn!(error = %self, "schema registry request failed");
        }
        (
            status,
            [(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)],
            self.body(),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_each_error_when_mapped_then_confluents_status_code_and_message() {
        use RegistryError::*;
        let table: Vec<(RegistryError, u16, u32, &str)> = vec![
            (SubjectNotFound("s".into()), 404, 40401, "Subject 's' not found."),
            (VersionNotFound(3), 404, 40402, "Version 3 not found."),
            (SchemaNotFound(9), 404, 40403, "Schema 9 not found"),
            (
                SubjectSoftDeleted("s".into()),
                404,
                40404,
                "Subject 's' was soft deleted.Set permanent=true to delete permanently",
            ),
            (
                SubjectNotSoftDeleted("s".into()),
                404,
                40405,
                "Subject 's' was not deleted first before being permanently deleted",
            ),
            (
                VersionSoftDeleted("s".into(), 1),
                404,
                40406,
                "Subject 's' Version 1 was soft deleted.Set permanent=true to delete permanently",
            ),
            (
                VersionNotSoftDeleted("s".into(), 1),
                404,
                40407,
                "Subject 's' Version 1 was not deleted first before being permanently deleted",
            ),
            (
                SubjectCompatibilityNotConfigured("s".into()),
                404,
                40408,
                "Subject 's' does not have subject-level compatibility configured",
            ),
            (
                SubjectModeNotConfigured("s".into()),
                404,
                40409,
                "Subject 's' does not have subject-level mode configured",
            ),
            (Incompatible("x".into()), 409, 409, "x"),
            (InvalidSchema("bad".into()), 422, 42201, "bad"),
            (
                InvalidVersion("0".into()),
                422,
                42202,
                "The specified version '0' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"",
            ),
            (
                InvalidCompatibility,
                422,
                42203,
                "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive",
            ),
            (
                InvalidMode,
                422,
                42204,
                "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD.",
            ),
            (OperationNotPermitted("no".into()), 422, 42205, "no"),
            (
                ReferenceExists("k".into()),
                422,
                42206,
                "One or more references exist to the schema k.",
            ),
            (
                InvalidSubject("".into()),
                422,
                42208,
                "The specified subject '' is not a valid.",
            ),
            (
                SchemaTooLarge,
                422,
                42209,
                "Register operation failed because schema is too large",
            ),
            (Store("disk".into()), 500, 50001, "disk"),
            (Timeout("t".into()), 500, 50002, "t"),
            (NoRoute, 404, 404, "HTTP 404 Not Found"),
            (MethodNotAllowed, 405, 405, "HTTP 405 Method Not Allowed"),
            (MalformedJson("m".into()), 400, 400, "m"),
            (UnprocessableJson("u".into()), 422, 422, "u"),
            (UnsupportedMediaType, 415, 415, "HTTP 415 Unsupported Media Type"),
            (BodyTooLarge, 413, 413, "Request body too large"),
        ];
        for (err, status, code, message) in table {
            assert_eq!(
                err.codes(),
                (StatusCode::from_u16(status).unwrap(), code),
                "{err:?}"
            );
            let body: serde_json::Value = serde_json::from_str(&err.body()).unwrap();
            assert_eq!(body["error_code"], code, "{err:?}");
            assert_eq!(body["message"], message, "{err:?}");
        }
    }
}
