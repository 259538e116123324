//! The CLIENT_METRICS config resource (KIP-714): one telemetry subscription per name.
//! DescribeConfigs lists only the keys set (Kafka's `ConfigHelper`: source
//! CLIENT_METRICS_CONFIG, nothing for an unknown name); IncrementalAlterConfigs and
//! AlterConfigs change them with Kafka's validation (`telemetry::subscription`), `metrics`
//! and `match` being lists (APPEND/SUBTRACT work on them). The cluster's ACLs apply
//! (`config_changes::config_refusal`).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::protocol::StrBytes;

use super::config_changes::{self as changes, AlterError, Change, RESOURCE_CLIENT_METRICS};
use super::RequestContext;
use crate::cluster::image::ConfigResource;
use crate::telemetry::subscription::{INTERVAL_MS, MATCH, METRICS};
use crate::telemetry::{AlterSubscriptionError, SubscriptionError};

/// Kafka's `ConfigSource.CLIENT_METRICS_CONFIG`.
const SOURCE_CLIENT_METRICS: i8 = 7;
/// Kafka's `ConfigDef.Type` ids (DescribeConfigs v3+): INT 3, LIST 7.
const TYPE_INT: i8 = 3;
const TYPE_LIST: i8 = 7;

pub fn describe(
    ctx: &RequestContext,
    name: &str,
    keys: &Option<Vec<StrBytes>>,
    synonyms: bool,
) -> DescribeConfigsResult {
    let base = match super::config_changes::named_result(
        RESOURCE_CLIENT_METRICS,
        name,
        "Client metrics subscription name must not be empty",
    ) {
        Ok(base) => base,
        Err(refused) => return refused,
    };
    let set = ctx.ctx().telemetry.configs(name).unwrap_or_default();
    let version = ctx.version();
    let configs = set
        .iter()
        .filter(|(k, _)| {
            keys.as_ref()
                .is_none_or(|ks| ks.is_empty() || ks.iter().any(|x| x.as_str() == k.as_str()))
        })
        .map(|(k, v)| {
            let kind = if k == INTERVAL_MS {
                TYPE_INT
            } else {
                TYPE_LIST
            };
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_value(Some(StrBytes::from_string(v.clone())))
                .with_config_source(SOURCE_CLIENT_METRICS)
                .with_read_only(false)
                .with_config_type(if version >= 3 { kind } else { 0 })
                // Kafka 4.4 lists the value as its own synonym (kafka-configs.sh shows it).
                .with_synonyms(if synonyms {
                    vec![DescribeConfigsSynonym::default()
                        .with_name(StrBytes::from_string(k.clone()))
                        .with_value(Some(StrBytes::from_string(v.clone())))
                        .with_source(SOURCE_CLIENT_METRICS)]
                } else {
                    Vec::new()
                })
                .with_documentation(None)
        })
        .collect();
    base.with_configs(configs)
}

/// Applies `changes` (`incremental`: to the current configs, else to none, as the legacy
/// AlterConfigs replaces them), validates the result and, unless `validate_only`, keeps it
/// (on a cluster, through the metadata quorum: validated here, kept by every node).
pub async fn alter(
    ctx: &RequestContext,
    name: &str,
    changes: &[Change],
    incremental: bool,
    validate_only: bool,
) -> Result<(), AlterError> {
    let telemetry = &ctx.ctx().telemetry;
    let current: BTreeMap<String, String> = match (incremental, telemetry.configs(name)) {
        (true, Some(c)) => (*c).clone(),
        _ => BTreeMap::new(),
    };
    // `metrics` and `match` are LISTs (default empty); `interval.ms` and unknown keys are not.
    let configs = changes::apply_changes(current, changes, |c| {
        if [METRICS, MATCH].contains(&c.name.as_str()) {
            Ok("")
        } else {
            Err(changes::not_a_list(c))
        }
    })?;
    let clustered = ctx.ctx().cluster.get().is_some();
    match telemetry.alter(name, configs.clone(), validate_only || clustered) {
        Ok(()) if validate_only => Ok(()),
        Ok(()) => {
            let resource = ConfigResource::ClientMetrics(name.to_string());
            changes::replicate(ctx, resource, configs).await?;
            tracing::info!(subscription = %name, "client metrics subscription altered");
            Ok(())
        }
        Err(AlterSubscriptionError::Invalid(SubscriptionError::InvalidRequest(m))) => {
            Err(AlterError::InvalidRequest(m))
        }
        Err(AlterSubscriptionError::Invalid(SubscriptionError::InvalidConfig(m))) => {
            Err(AlterError::InvalidConfig(m))
        }
        Err(AlterSubscriptionError::Storage(e)) => Err(AlterError::Storage(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{incremental_alter, Harness};

    const SET: i8 = 0;
    const DELETE: i8 = 1;
    const APPEND: i8 = 2;
    const SUBTRACT: i8 = 3;

    #[test]
    fn given_list_keys_when_appended_or_subtracted_then_kafkas_list_arithmetic() {
        let h = Harness::new();
        let alter = |ops: &[(&str, i8, Option<&str>)]| incremental_alter(&h, 16, "s", ops, false);
        let metrics = || h.state.ctx.telemetry.configs("s").unwrap()["metrics"].clone();
        assert_eq!(alter(&[("metrics", SET, Some("a"))]).0, 0);
        assert_eq!(alter(&[("metrics", APPEND, Some("b,a"))]).0, 0);
        assert_eq!(metrics(), "a,b");
        assert_eq!(alter(&[("metrics", SUBTRACT, Some("a"))]).0, 0);
        assert_eq!(metrics(), "b");
        // APPEND to an unset list starts from the empty list.
        assert_eq!(alter(&[("match", APPEND, Some("client_id=x"))]).0, 0);
        assert_eq!(
            h.state.ctx.telemetry.configs("s").unwrap()["match"],
            "client_id=x"
        );
        // Not LISTs: Kafka's INVALID_CONFIG, nothing applied.
        assert_eq!(
            alter(&[("interval.ms", APPEND, Some("1000"))]),
            (
                40,
                "Can't APPEND to key interval.ms because its type is not LIST.".into()
            )
        );
        assert_eq!(alter(&[("nope", SUBTRACT, Some("1"))]).0, 40);
        // An alter whose result is invalid is refused whole (INVALID_REQUEST for the range).
        assert_eq!(
            alter(&[("metrics", DELETE, None), ("interval.ms", SET, Some("5"))]).0,
            42
        );
        assert_eq!(metrics(), "b");
        assert_eq!(
            h.state.ctx.telemetry.names(),
            ["s"],
            "the subscription is kept"
        );
    }
}
