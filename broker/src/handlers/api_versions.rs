//! ApiVersions (key 18): derived from the handler table. Unsupported request versions get the
//! KIP-511 answer (v0 body, UNSUPPORTED_VERSION, our ranges).

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::{encode_response, FrameError, RequestContext, API_TABLE};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 4;

fn api_keys() -> Vec<ApiVersion> {
    API_TABLE
        .iter()
        .map(|s| {
            ApiVersion::default()
                .with_api_key(s.key as i16)
                .with_min_version(s.min)
                .with_max_version(s.max)
        })
        .collect()
}

pub async fn handle(_ctx: &RequestContext, _req: ApiVersionsRequest) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(api_keys())
}

pub fn unsupported_version_response(correlation_id: i32) -> Result<BytesMut, FrameError> {
    let body = ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_keys());
    encode_response(ApiKey::ApiVersions, 0, correlation_id, &body)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

    #[test]
    fn given_api_versions_when_asked_then_every_table_entry_and_nothing_else() {
        let h = Harness::new();
        let resp: ApiVersionsResponse =
            h.call(ApiKey::ApiVersions, 3, ApiVersionsRequest::default());
        assert_eq!(resp.error_code, 0);
        assert_eq!(resp.api_keys.len(), super::API_TABLE.len());
        let produce = resp.api_keys.iter().find(|k| k.api_key == 0).unwrap();
        assert_eq!((produce.min_version, produce.max_version), (3, 13));
        // Kafka lists the SASL APIs on every listener; clients look for them there.
        let sasl = resp
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::SaslAuthenticate as i16)
            .unwrap();
        assert_eq!((sasl.min_version, sasl.max_version), (0, 2));
    }

    #[test]
    fn given_future_api_versions_version_when_asked_then_kip511_v0_answer() {
        let h = Harness::new();
        let raw = h.call_raw_frame(ApiKey::ApiVersions, 99, 7, &[]);
        let raw = raw.expect("answered");
        let (corr, resp): (i32, ApiVersionsResponse) = decode_response(raw, 0, 0);
        assert_eq!(corr, 7);
        assert_eq!(resp.error_code, 35);
        assert!(!resp.api_keys.is_empty());
    }
}
