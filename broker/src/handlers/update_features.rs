//! UpdateFeatures (key 57): `kafka-features.sh upgrade|downgrade` and Admin
//! `updateFeatures`. The checks and messages are `metadata::features`' (Kafka's
//! `FeatureControlManager`); the answer is shaped as Kafka's `QuorumController.updateFeatures`
//! shapes it: one top-level error for the whole request, and per-feature results (v0–v1) only
//! on success. On a cluster the levels are cluster-wide: the update goes through the metadata
//! quorum and is decided there, against the image's levels (validate-only is checked here).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::cluster::image::{Command, Outcome};
use crate::metadata::features::{FeatureError, FeatureUpdate, UpgradeType};

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 2;

pub async fn handle(ctx: &RequestContext, req: UpdateFeaturesRequest) -> UpdateFeaturesResponse {
    let version = ctx.version();
    let updates: Vec<FeatureUpdate> = req
        .feature_updates
        .iter()
        .map(|u| FeatureUpdate {
            name: u.feature.to_string(),
            level: u.max_version_level,
            // v0 had a flag where v1 has the type (Kafka's `UpdateFeaturesRequest.upgradeType`).
            upgrade: if version == 0 {
                if u.allow_downgrade {
                    UpgradeType::SafeDowngrade
                } else {
                    UpgradeType::Upgrade
                }
            } else {
                UpgradeType::from_code(u.upgrade_type)
            },
        })
        .collect();
    // Kafka's `ControllerApis.handleUpdateFeatures`: ALTER on the cluster.
    if !ctx
        .access()
        .allows_cluster(crate::security::acl::Operation::Alter)
    {
        return UpdateFeaturesResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(
                super::errors::CLUSTER_AUTHORIZATION_FAILED,
            )));
    }
    let updated = match ctx.ctx().cluster.get() {
        Some(cluster) if !req.validate_only => {
            let cmd = Command::UpdateFeatures {
                updates,
                node: cluster.node_id,
                local: (*ctx.ctx().features.snapshot()).clone(),
            };
            match cluster.propose(cmd).await {
                Ok(Outcome::Refused(msg)) => Err(FeatureError::InvalidUpdate(msg)),
                Ok(_) => Ok(()),
                Err(e) => {
                    tracing::warn!(error = %e, "UpdateFeatures failed");
                    return UpdateFeaturesResponse::default()
                        .with_error_code(super::errors::cluster_write_code(&e).code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string())));
                }
            }
        }
        _ => ctx
            .ctx()
            .features
            .update(&updates, req.validate_only)
            .map(|_| ()),
    };
    match updated {
        Ok(()) => {
            let results = if version <= 1 {
                req.feature_updates
                    .iter()
                    .map(|u| UpdatableFeatureResult::default().with_feature(u.feature.clone()))
                    .collect()
            } else {
                Vec::new()
            };
            UpdateFeaturesResponse::default().with_results(results)
        }
        Err(e) => {
            let code = super::errors::feature_code(&e);
            if code != ResponseError::InvalidUpdateVersion.code() {
                tracing::warn!(error = %e, "UpdateFeatures failed");
            }
            UpdateFeaturesResponse::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(format!(
                    "The update failed for all features since the following feature had an \
                     error: {e}"
                ))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::codec::api_versions::ApiVersionsRequest;
    use crate::codec::Capped;
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
    use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

    fn update(name: &str, level: i16, upgrade_type: i8) -> UpdateFeaturesRequest {
        UpdateFeaturesRequest::default().with_feature_updates(vec![FeatureUpdateKey::default()
            .with_feature(StrBytes::from_string(name.into()))
            .with_max_version_level(level)
            .with_upgrade_type(upgrade_type)])
    }

    fn finalized(h: &Harness) -> (i64, Vec<(String, i16)>) {
        let r: Capped<ApiVersionsResponse> =
            h.call(ApiKey::ApiVersions, 4, ApiVersionsRequest::default());
        let levels = r
            .finalized_features
            .iter()
            .map(|f| (f.name.to_string(), f.max_version_level))
            .collect();
        (r.finalized_features_epoch, levels)
    }

    #[test]
    fn given_downgrade_and_upgrade_when_updating_then_api_versions_follows_with_new_epoch() {
        let h = Harness::new();
        let (epoch, _) = finalized(&h);
        let r: UpdateFeaturesResponse =
            h.call(ApiKey::UpdateFeatures, 1, update("group.version", 0, 2));
        assert_eq!(r.error_code, 0);
        assert_eq!(r.results.len(), 1);
        assert_eq!(
            (r.results[0].feature.as_str(), r.results[0].error_code),
            ("group.version", 0)
        );
        let (after, levels) = finalized(&h);
        assert!(after > epoch);
        assert_eq!(
            levels,
            vec![
                ("metadata.version".into(), 33),
                ("share.version".into(), 2),
                ("streams.version".into(), 1),
                ("transaction.version".into(), 2)
            ]
        );
        let r: UpdateFeaturesResponse =
            h.call(ApiKey::UpdateFeatures, 2, update("group.version", 1, 1));
        assert_eq!((r.error_code, r.results.len()), (0, 0), "v2 has no results");
        assert_eq!(finalized(&h).1.len(), 5);
    }

    #[test]
    fn given_unsupported_level_when_updating_then_invalid_update_version_for_all() {
        let h = Harness::new();
        let r: UpdateFeaturesResponse =
            h.call(ApiKey::UpdateFeatures, 2, update("kraft.version", 1, 1));
        assert_eq!(r.error_code, 95);
        assert_eq!(
            r.error_message.as_deref(),
            Some(
                "The update failed for all features since the following feature had an error: \
                 Invalid update version 1 for feature kraft.version. Local controller 0 does \
                 not support this feature."
            )
        );
        assert!(r.results.is_empty());
    }

    #[test]
    fn given_v0_allow_downgrade_when_updating_then_safe_downgrade() {
        let h = Harness::new();
        let mut req = update("group.version", 0, 1);
        req.feature_updates[0].allow_downgrade = true;
        let r: UpdateFeaturesResponse = h.call(ApiKey::UpdateFeatures, 0, req);
        assert_eq!(r.error_code, 0);
        assert_eq!(h.state.ctx.features.level("group.version"), 0);
    }

    #[test]
    fn given_group_version_0_when_heartbeating_then_unsupported_version_as_kafka() {
        use kafka_protocol::messages::{
            ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
        };
        let h = Harness::new();
        let r: UpdateFeaturesResponse =
            h.call(ApiKey::UpdateFeatures, 1, update("group.version", 0, 2));
        assert_eq!(r.error_code, 0);
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(StrBytes::from_static_str("g").into())
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30000)
            .with_subscribed_topic_names(Some(vec![]));
        let r: ConsumerGroupHeartbeatResponse = h.call(ApiKey::ConsumerGroupHeartbeat, 1, req);
        assert_eq!(r.error_code, 35);
    }

    #[test]
    fn given_validate_only_when_updating_then_nothing_changes() {
        let h = Harness::new();
        let r: UpdateFeaturesResponse = h.call(
            ApiKey::UpdateFeatures,
            1,
            update("group.version", 0, 2).with_validate_only(true),
        );
        assert_eq!(r.error_code, 0);
        assert_eq!(h.state.ctx.features.level("group.version"), 1);
    }
}
