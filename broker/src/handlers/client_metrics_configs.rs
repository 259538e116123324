//! The CLIENT_METRICS config resource (KIP-714): one telemetry subscription per name.
//! DescribeConfigs lists only the keys set (Kafka's `ConfigHelper`: source
//! CLIENT_METRICS_CONFIG, nothing for an unknown name); IncrementalAlterConfigs and
//! AlterConfigs change them with Kafka's validation (`telemetry::subscription`), `metrics`
//! and `match` being lists (APPEND/SUBTRACT work on them). The cluster's ACLs apply
//! (`config_changes::config_refusal`).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::protocol::StrBytes;

use super::config_changes::{AlterError, Change, Op, RESOURCE_CLIENT_METRICS};
use super::RequestContext;
use crate::telemetry::subscription::{INTERVAL_MS, KEYS};
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
    let base = DescribeConfigsResult::default()
        .with_resource_type(RESOURCE_CLIENT_METRICS)
        .with_resource_name(StrBytes::from_string(name.into()));
    if name.is_empty() {
        return base
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "Client metrics subscription name must not be empty",
            )));
    }
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

/// Kafka's LIST arithmetic: APPEND adds entries not there yet, SUBTRACT removes them.
fn list_op(current: Option<&String>, value: &str, append: bool) -> String {
    let split = |s: &str| -> Vec<String> {
        s.split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect()
    };
    let mut items = current.map(|c| split(c)).unwrap_or_default();
    for v in split(value) {
        if append {
            if !items.contains(&v) {
                items.push(v);
            }
        } else {
            items.retain(|x| *x != v);
        }
    }
    items.join(",")
}

/// Applies `changes` (`incremental`: to the current configs, else to none, as the legacy
/// AlterConfigs replaces them), validates the result and, unless `validate_only`, keeps it.
pub fn alter(
    ctx: &RequestContext,
    name: &str,
    changes: &[Change],
    incremental: bool,
    validate_only: bool,
) -> Result<(), AlterError> {
    let telemetry = &ctx.ctx().telemetry;
    let mut configs: BTreeMap<String, String> = match (incremental, telemetry.configs(name)) {
        (true, Some(c)) => (*c).clone(),
        _ => BTreeMap::new(),
    };
    for c in changes {
        let value = c.value.clone().unwrap_or_default();
        match c.op {
            Op::Set => {
                configs.insert(c.name.clone(), value);
            }
            Op::Delete => {
                configs.remove(&c.name);
            }
            Op::Append | Op::Subtract
                if c.name == INTERVAL_MS || !KEYS.contains(&c.name.as_str()) =>
            {
                return Err(AlterError::InvalidConfig(format!(
                    "Can't {} to key {} because its type is not LIST.",
                    if c.op == Op::Append {
                        "APPEND"
                    } else {
                        "SUBTRACT"
                    },
                    c.name
                )))
            }
            Op::Append | Op::Subtract => {
                let next = list_op(configs.get(&c.name), &value, c.op == Op::Append);
                configs.insert(c.name.clone(), next);
            }
        }
    }
    match telemetry.alter(name, configs, validate_only) {
        Ok(()) => {
            if !validate_only {
                tracing::info!(subscription = %name, "client metrics subscription altered");
            }
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
