//! AlterConfigs (key 33, Kafka's deprecated non-incremental form): the given configs replace
//! all of a topic's overrides, or all dynamic configs of one broker scope; a key left out is
//! deleted. `validate_only` checks without changing anything.

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};

use super::config_changes::{self as changes, AlterError, Change, Op};
use super::RequestContext;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 2;

type Resource = kafka_protocol::messages::alter_configs_request::AlterConfigsResource;

/// Each config's name, and whether its value is a null (which AlterConfigs refuses).
fn entries(r: &Resource) -> Vec<(&str, bool)> {
    r.configs
        .iter()
        .map(|c| (c.name.as_str(), c.value.is_none()))
        .collect()
}

async fn alter(ctx: &RequestContext, r: &Resource, validate_only: bool) -> Result<(), AlterError> {
    let list: Vec<Change> = r
        .configs
        .iter()
        .map(|c| Change {
            name: c.name.to_string(),
            op: Op::Set,
            value: c.value.as_ref().map(|v| v.to_string()),
        })
        .collect();
    let entries = entries(r);
    if r.resource_type == super::group_configs::RESOURCE_GROUP {
        changes::check_entries(&entries)?;
        let name = r.resource_name.as_str();
        return super::group_configs::alter(ctx, name, &list, false, validate_only).await;
    }
    if r.resource_type == changes::RESOURCE_CLIENT_METRICS {
        changes::check_entries(&entries)?;
        let name = r.resource_name.as_str();
        return super::client_metrics_configs::alter(ctx, name, &list, false, validate_only).await;
    }
    let target = changes::preprocess(ctx, r.resource_type, r.resource_name.as_str(), &entries)?;
    let configs = changes::apply_ops(&target, Default::default(), &list)?;
    changes::commit(ctx, &target, configs, validate_only).await
}

pub async fn handle(ctx: &RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let validate_only = req.validate_only;
    let outcomes = changes::answer_each(
        &ctx.access(),
        &req.resources,
        |r| (r.resource_type, r.resource_name.as_str()),
        |r| {
            let (t, name) = (r.resource_type, r.resource_name.as_str());
            changes::precheck(ctx, t, name, &entries(r), true)
        },
        async |r| alter(ctx, r, validate_only).await,
    )
    .await;
    let responses = req
        .resources
        .iter()
        .zip(outcomes)
        .map(|(r, (code, message))| {
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::handlers::testing::create;
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    use kafka_protocol::messages::ApiKey;
    use kafka_protocol::protocol::StrBytes;

    fn set(
        kind: i8,
        name: &str,
        pairs: &[(&str, &str)],
        validate_only: bool,
    ) -> AlterConfigsRequest {
        AlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(kind)
                .with_resource_name(StrBytes::from_string(name.into()))
                .with_configs(
                    pairs
                        .iter()
                        .map(|(k, v)| {
                            AlterableConfig::default()
                                .with_name(StrBytes::from_string(k.to_string()))
                                .with_value(Some(StrBytes::from_string(v.to_string())))
                        })
                        .collect(),
                )])
    }

    #[test]
    fn given_full_set_when_altering_then_unlisted_overrides_removed() {
        let h = Harness::new();
        create(&h, "t", 1);
        let r: AlterConfigsResponse = h.call(
            ApiKey::AlterConfigs,
            2,
            set(
                2,
                "t",
                &[("retention.ms", "5"), ("segment.bytes", "4096")],
                false,
            ),
        );
        assert_eq!(r.responses[0].error_code, 0);
        let r: AlterConfigsResponse = h.call(
            ApiKey::AlterConfigs,
            2,
            set(2, "t", &[("retention.ms", "6")], false),
        );
        assert_eq!(r.responses[0].error_code, 0);
        let t = h.state.ctx.catalog.snapshot().get("t").unwrap().clone();
        assert_eq!(t.configs.len(), 1);
        assert_eq!(t.configs["retention.ms"], "6");
        assert_eq!(t.settings.log.segment_bytes, 1 << 30);
        // validate_only and errors leave everything as it was.
        let r: AlterConfigsResponse = h.call(
            ApiKey::AlterConfigs,
            2,
            set(2, "t", &[("retention.ms", "7")], true),
        );
        assert_eq!(r.responses[0].error_code, 0);
        let r: AlterConfigsResponse = h.call(
            ApiKey::AlterConfigs,
            2,
            set(2, "t", &[("bogus", "7")], false),
        );
        assert_eq!(r.responses[0].error_code, 40);
        assert_eq!(
            h.state.ctx.catalog.snapshot().get("t").unwrap().configs["retention.ms"],
            "6"
        );
        // Broker scope: the cluster default set is replaced as a whole too.
        let r: AlterConfigsResponse = h.call(
            ApiKey::AlterConfigs,
            2,
            set(
                4,
                "",
                &[("log.retention.ms", "1000"), ("log.roll.ms", "2000")],
                false,
            ),
        );
        assert_eq!(r.responses[0].error_code, 0);
        let r: AlterConfigsResponse = h.call(
            ApiKey::AlterConfigs,
            2,
            set(4, "", &[("log.roll.ms", "3000")], false),
        );
        assert_eq!(r.responses[0].error_code, 0);
        let view = h.state.ctx.catalog.broker();
        assert_eq!(view.cluster.len(), 1);
        assert_eq!(view.config.log_roll_ms, 3000);
        assert_eq!(view.config.log_retention_ms, 7 * 24 * 3600 * 1000);
        let r: AlterConfigsResponse = h.call(
            ApiKey::AlterConfigs,
            2,
            set(8, "0", &[("root", "DEBUG")], false),
        );
        assert_eq!(
            r.responses[0].error_code, 42,
            "BROKER_LOGGER is not for AlterConfigs"
        );
    }
}
