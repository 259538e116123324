//! The GROUP config resource (KIP-848): DescribeConfigs lists Kafka 4.4's group configs with
//! the group's overrides or the broker's defaults (`config::group`), IncrementalAlterConfigs
//! and AlterConfigs change the overrides with Kafka's validation
//! (`ControllerConfigurationValidator` for GROUP). The two Strom applies take effect at the
//! group's next heartbeat; the others are read-only (see `config::group`).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::protocol::StrBytes;

pub use super::config_changes::RESOURCE_GROUP;
use super::config_changes::{self as changes, AlterError, Change};
use super::RequestContext;
use crate::cluster::image::ConfigResource;
use crate::config::group::{self, GROUP_CONFIGS};
use crate::config::topic::ConfigSource;

/// Kafka's `ConfigSource.GROUP_CONFIG`.
const SOURCE_GROUP: i8 = 8;

pub fn describe(
    ctx: &RequestContext,
    name: &str,
    keys: &Option<Vec<StrBytes>>,
    synonyms: bool,
) -> DescribeConfigsResult {
    let base = match super::config_changes::named_result(
        RESOURCE_GROUP,
        name,
        "Group name must not be empty",
    ) {
        Ok(base) => base,
        Err(refused) => return refused,
    };
    let broker = &ctx.ctx().config;
    let overrides = ctx.ctx().group_configs.get(name);
    let version = ctx.version();
    let configs = GROUP_CONFIGS
        .iter()
        .filter(|d| {
            keys.as_ref()
                .is_none_or(|k| k.is_empty() || k.iter().any(|k| k.as_str() == d.name))
        })
        .map(|d| {
            let default = group::default_value(d, broker);
            let own = overrides.as_ref().and_then(|o| o.get(d.name));
            let syn = |name: &str, value: &str, source: i8| {
                DescribeConfigsSynonym::default()
                    .with_name(StrBytes::from_string(name.into()))
                    .with_value(Some(StrBytes::from_string(value.into())))
                    .with_source(source)
            };
            let mut list = Vec::new();
            if synonyms {
                if let Some(v) = own {
                    list.push(syn(d.name, v, SOURCE_GROUP));
                }
                list.push(syn(d.synonym, &default, ConfigSource::Default as i8));
            }
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_static_str(d.name))
                .with_value(Some(StrBytes::from_string(
                    own.cloned().unwrap_or_else(|| default.clone()),
                )))
                .with_config_source(if own.is_some() {
                    SOURCE_GROUP
                } else {
                    ConfigSource::Default as i8
                })
                .with_read_only(!d.applied)
                .with_config_type(if version >= 3 { d.kind as i8 } else { 0 })
                .with_synonyms(list)
                // Strom carries no documentation for these (Kafka's is the broker synonym's).
                .with_documentation(None)
        })
        .collect();
    base.with_configs(configs)
}

/// Applies `changes` to the group's overrides (`incremental`: from the current ones, else
/// from none, as the legacy AlterConfigs replaces them), validates and (unless
/// `validate_only`) persists them (on a cluster, through the metadata quorum).
pub async fn alter(
    ctx: &RequestContext,
    name: &str,
    changes: &[Change],
    incremental: bool,
    validate_only: bool,
) -> Result<(), AlterError> {
    if name.is_empty() {
        return Err(AlterError::InvalidRequest(
            "Default group resources are not allowed.".into(),
        ));
    }
    let store = &ctx.ctx().group_configs;
    let current: BTreeMap<String, String> = match (incremental, store.get(name)) {
        (true, Some(o)) => (*o).clone(),
        _ => BTreeMap::new(),
    };
    // No group config Strom applies is a list.
    let configs = changes::apply_changes(current, changes, |c| Err(changes::not_a_list(c)))?;
    group::validate(&configs, &ctx.ctx().config).map_err(AlterError::InvalidConfig)?;
    if validate_only {
        return Ok(());
    }
    let resource = ConfigResource::Group(name.to_string());
    if changes::replicate(ctx, resource, configs.clone()).await? {
        tracing::info!(group = %name, "group configs altered");
        return Ok(());
    }
    store
        .set(name, configs)
        .map_err(|e| AlterError::Storage(e.to_string()))?;
    tracing::info!(group = %name, "group configs altered");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
    use kafka_protocol::protocol::StrBytes;

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.into())
    }

    /// (code, [(name, value, source, read_only)]) of group `name`.
    fn describe(h: &Harness, name: &str) -> (i16, Vec<(String, String, i8, bool)>) {
        let req = DescribeConfigsRequest::default()
            .with_include_synonyms(true)
            .with_resources(vec![DescribeConfigsResource::default()
                .with_resource_type(32)
                .with_resource_name(s(name))]);
        let r: DescribeConfigsResponse = h.call(ApiKey::DescribeConfigs, 4, req);
        let r = &r.results[0];
        let list = r
            .configs
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.value.as_deref().unwrap_or("").to_string(),
                    c.config_source,
                    c.read_only,
                )
            })
            .collect();
        (r.error_code, list)
    }

    fn alter(h: &Harness, name: &str, ops: &[(&str, i8, Option<&str>)]) -> (i16, String) {
        incremental_alter(h, 32, name, ops, false)
    }

    fn get(list: &[(String, String, i8, bool)], name: &str) -> (String, i8, bool) {
        let c = list.iter().find(|c| c.0 == name).expect("listed");
        (c.1.clone(), c.2, c.3)
    }

    #[test]
    fn given_group_when_described_then_kafkas_list_with_defaults_and_read_only_flags() {
        let h = Harness::new();
        let (code, list) = describe(&h, "g");
        assert_eq!(code, 0);
        assert_eq!(list.len(), 21);
        assert_eq!(
            get(&list, "consumer.session.timeout.ms"),
            ("45000".into(), 5, false)
        );
        assert_eq!(
            get(&list, "share.auto.offset.reset"),
            ("latest".into(), 5, false)
        );
        assert_eq!(describe(&h, "").0, 42);
    }

    #[test]
    fn given_overrides_when_altered_then_described_validated_and_applied() {
        let h = Harness::new();
        assert_eq!(
            alter(
                &h,
                "g",
                &[("consumer.session.timeout.ms", 0, Some("50000"))]
            ),
            (0, String::new())
        );
        let (_, list) = describe(&h, "g");
        assert_eq!(
            get(&list, "consumer.session.timeout.ms"),
            ("50000".into(), 8, false)
        );
        let cfg = crate::config::group::consumer_timeouts(
            h.state.ctx.group_configs.get("g").as_deref(),
            &h.state.ctx.config,
        );
        assert_eq!(cfg, (50000, 5000));
        // Other groups keep the defaults.
        assert_eq!(
            get(&describe(&h, "other").1, "consumer.session.timeout.ms").1,
            5
        );
        let code = |r: (i16, String)| r.0;
        assert_eq!(code(alter(&h, "g", &[("nope", 0, Some("1"))])), 40);
        assert_eq!(
            code(alter(
                &h,
                "g",
                &[("consumer.session.timeout.ms", 0, Some("1"))]
            )),
            40
        );
        assert_eq!(
            code(alter(
                &h,
                "g",
                &[("streams.rack.aware.assignment.tags", 0, Some("zone"))]
            )),
            40
        );
        assert_eq!(
            code(alter(
                &h,
                "g",
                &[("consumer.session.timeout.ms", 2, Some("1"))]
            )),
            40
        );
        assert_eq!(
            code(alter(
                &h,
                "",
                &[("consumer.session.timeout.ms", 0, Some("50000"))]
            )),
            42
        );
        // A refused change kept the earlier override.
        assert_eq!(
            get(&describe(&h, "g").1, "consumer.session.timeout.ms").0,
            "50000"
        );
        assert_eq!(
            alter(&h, "g", &[("consumer.session.timeout.ms", 1, None)]),
            (0, String::new())
        );
        assert!(h.state.ctx.group_configs.get("g").is_none());
    }

    #[test]
    fn given_group_heartbeat_override_when_member_heartbeats_then_interval_follows() {
        let h = Harness::new();
        crate::handlers::testing::create(&h, "t", 1);
        let join = |g: &str| crate::handlers::group_tests::consumer_join(&h, g, 1);
        assert_eq!(join("plain").heartbeat_interval_ms, 5000);
        assert_eq!(
            alter(
                &h,
                "tuned",
                &[("consumer.heartbeat.interval.ms", 0, Some("7000"))]
            ),
            (0, String::new())
        );
        let r = join("tuned");
        assert_eq!((r.error_code, r.heartbeat_interval_ms), (0, 7000));
    }
}
