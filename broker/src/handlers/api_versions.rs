//! ApiVersions (key 18): derived from the handler table, with the feature levels of
//! `metadata::features` (v3+). Unsupported request versions get the KIP-511 answer (v0 body,
//! UNSUPPORTED_VERSION, our ranges).

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{
    encode_response, FrameError, RequestContext, API_TABLE, CLUSTERED_ONLY, EXT_API_TABLE,
};
use crate::codec::api_versions::ApiVersionsRequest;
use crate::codec::Capped;
use crate::metadata::features::{Finalized, SUPPORTED};

pub const MIN_VERSION: i16 = 0;
/// v5 (KIP-1242) adds the cluster and node id the client expects; the response is v4's.
pub const MAX_VERSION: i16 = 5;

/// The table's APIs, without those only a cluster serves when `clustered` is false.
fn api_keys(clustered: bool) -> Vec<ApiVersion> {
    API_TABLE
        .iter()
        .filter(|s| clustered || !CLUSTERED_ONLY.contains(&s.key))
        .map(|s| {
            ApiVersion::default()
                .with_api_key(s.key as i16)
                .with_min_version(s.min)
                .with_max_version(s.max)
        })
        .chain(EXT_API_TABLE.iter().map(|s| {
            ApiVersion::default()
                .with_api_key(s.key)
                .with_min_version(s.min)
                .with_max_version(s.max)
        }))
        .collect()
}

/// Kafka's `ApiVersionsResponse.createApiVersionsResponse`: v3 clients choke on a supported
/// minimum of 0 (KAFKA-17011), so before v4 such features are left out; finalized levels of
/// 0 are never listed.
fn with_features(resp: ApiVersionsResponse, version: i16, f: &Finalized) -> ApiVersionsResponse {
    let supported = SUPPORTED
        .iter()
        .filter(|s| version >= 4 || s.min > 0)
        .map(|s| {
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(s.name))
                .with_min_version(s.min)
                .with_max_version(s.max)
        })
        .collect();
    let finalized = f
        .levels
        .iter()
        .filter(|(_, l)| **l > 0)
        .map(|(name, l)| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_string(name.clone()))
                .with_min_version_level(*l)
                .with_max_version_level(*l)
        })
        .collect();
    resp.with_supported_features(supported)
        .with_finalized_features_epoch(f.epoch)
        .with_finalized_features(finalized)
}

pub async fn handle(ctx: &RequestContext, req: ApiVersionsRequest) -> Capped<ApiVersionsResponse> {
    let version = ctx.version();
    let broker = ctx.ctx();
    let clustered = broker.cluster.get().is_some();
    let mut resp = ApiVersionsResponse::default().with_api_keys(api_keys(clustered));
    // KIP-1242: a client that names the cluster and node it means to reach, and reached
    // another, must re-bootstrap (its metadata is stale). The cluster id is the one Metadata
    // gave it: on a cluster the image's, not this node's own.
    if let (Some(cluster), true) = (&req.cluster_id, req.node_id >= 0) {
        if cluster.as_str() != broker.cluster_id_for_clients()
            || req.node_id != broker.config.node_id
        {
            resp = resp.with_error_code(ResponseError::RebootstrapRequired.code());
        }
    }
    if version >= 3 {
        resp = with_features(resp, version, &broker.features.snapshot());
        // KIP-714 matches subscriptions on these (`telemetry`).
        ctx.session.set_software(
            req.client_software_name.as_str(),
            req.client_software_version.as_str(),
        );
    }
    Capped::new(resp)
}

pub fn unsupported_version_response(
    correlation_id: i32,
    clustered: bool,
) -> Result<BytesMut, FrameError> {
    let body = ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_keys(clustered));
    encode_response(ApiKey::ApiVersions, 0, correlation_id, &body)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::codec::api_versions::ApiVersionsRequest;
    use crate::codec::Capped;
    use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
    use kafka_protocol::protocol::StrBytes;

    /// (supported: name, min, max), (finalized: name, level).
    type Features = (Vec<(String, i16, i16)>, Vec<(String, i16)>);

    fn features(r: &ApiVersionsResponse) -> Features {
        let s = r
            .supported_features
            .iter()
            .map(|f| (f.name.to_string(), f.min_version, f.max_version))
            .collect();
        let f = r
            .finalized_features
            .iter()
            .map(|f| (f.name.to_string(), f.max_version_level))
            .collect();
        (s, f)
    }

    #[test]
    fn given_api_versions_when_asked_then_every_table_entry_and_nothing_else() {
        let h = Harness::new();
        let resp: Capped<ApiVersionsResponse> =
            h.call(ApiKey::ApiVersions, 3, ApiVersionsRequest::default());
        let resp = resp.into_inner();
        assert_eq!(resp.error_code, 0);
        // A single node: without the APIs only a cluster serves.
        assert_eq!(
            resp.api_keys.len(),
            super::API_TABLE.len() + super::EXT_API_TABLE.len() - super::CLUSTERED_ONLY.len()
        );
        // The streams group APIs, which kafka-protocol does not know (KIP-1071, KIP-1331).
        let streams: Vec<(i16, i16, i16)> = resp
            .api_keys
            .iter()
            .filter(|k| [88, 89, 93].contains(&k.api_key))
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        assert_eq!(streams, vec![(88, 0, 1), (89, 0, 1), (93, 0, 0)]);
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
    fn given_v4_and_v3_when_asked_then_features_as_kafka_lists_them() {
        let h = Harness::new();
        let v4: Capped<ApiVersionsResponse> =
            h.call(ApiKey::ApiVersions, 4, ApiVersionsRequest::default());
        let (supported, finalized) = features(&v4);
        assert_eq!(
            supported,
            vec![
                ("metadata.version".into(), 7, 33),
                ("group.version".into(), 0, 1),
                ("share.version".into(), 0, 2),
                ("streams.version".into(), 0, 1),
                ("transaction.version".into(), 0, 2)
            ]
        );
        assert_eq!(
            finalized,
            vec![
                ("group.version".into(), 1),
                ("metadata.version".into(), 33),
                ("share.version".into(), 2),
                ("streams.version".into(), 1),
                ("transaction.version".into(), 2)
            ]
        );
        assert!(v4.finalized_features_epoch >= 0);
        // KAFKA-17011: no supported minimum of 0 before v4; finalized levels unchanged.
        let v3: Capped<ApiVersionsResponse> =
            h.call(ApiKey::ApiVersions, 3, ApiVersionsRequest::default());
        assert_eq!(features(&v3).0, vec![("metadata.version".into(), 7, 33)]);
        assert_eq!(features(&v3).1, finalized);
    }

    #[test]
    fn given_v5_naming_another_cluster_when_asked_then_rebootstrap_required() {
        let h = Harness::new();
        let mut req = ApiVersionsRequest {
            cluster_id: Some(StrBytes::from_static_str("test-cluster")),
            node_id: 0,
            ..Default::default()
        };
        let ok: Capped<ApiVersionsResponse> = h.call(ApiKey::ApiVersions, 5, req.clone());
        assert_eq!(ok.error_code, 0);
        req.node_id = 3;
        let wrong: Capped<ApiVersionsResponse> = h.call(ApiKey::ApiVersions, 5, req.clone());
        assert_eq!(wrong.error_code, 129);
        assert!(!wrong.api_keys.is_empty());
        req.node_id = -1;
        let unnamed: Capped<ApiVersionsResponse> = h.call(ApiKey::ApiVersions, 5, req);
        assert_eq!(
            unnamed.error_code, 0,
            "a cluster id without a node id checks nothing"
        );
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
