//! The BROKER_LOGGER config resource (KIP-412): DescribeConfigs lists every logger with its
//! effective level, IncrementalAlterConfigs SETs or DELETEs levels at runtime
//! (`crate::logging`), with the checks and answers of Kafka's `ConfigHelper` and
//! `RuntimeLoggerManager`. The legacy AlterConfigs refuses the resource, as Kafka's does.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::protocol::StrBytes;

use super::config_changes::{self as changes, AlterError, RESOURCE_BROKER_LOGGER};
use super::RequestContext;

/// Kafka's `ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG`.
const SOURCE_DYNAMIC_BROKER_LOGGER: i8 = 6;

pub fn describe(
    ctx: &RequestContext,
    name: &str,
    keys: &Option<Vec<StrBytes>>,
) -> DescribeConfigsResult {
    let base = DescribeConfigsResult::default()
        .with_resource_type(RESOURCE_BROKER_LOGGER)
        .with_resource_name(StrBytes::from_string(name.into()));
    let node_id = ctx.ctx().config.node_id;
    let refuse = |message: String| {
        base.clone()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    if name.is_empty() {
        return refuse("Broker id must not be empty".into());
    }
    match name.parse::<i32>() {
        Err(_) => return refuse(format!("Broker id must be an integer, but it is: {name}")),
        Ok(id) if id != node_id => {
            return refuse(format!(
                "Unexpected broker id, expected {node_id} but received {name}"
            ))
        }
        Ok(_) => {}
    }
    let wanted = |n: &str| {
        keys.as_ref()
            .is_none_or(|k| k.is_empty() || k.iter().any(|k| k.as_str() == n))
    };
    let configs = ctx
        .ctx()
        .loggers
        .describe()
        .into_iter()
        .filter(|(n, _)| wanted(n))
        .map(|(n, level)| {
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_string(n))
                .with_value(Some(StrBytes::from_static_str(level)))
                .with_config_source(SOURCE_DYNAMIC_BROKER_LOGGER)
                .with_read_only(false)
                .with_documentation(None)
        })
        .collect();
    base.with_configs(configs)
}

/// IncrementalAlterConfigs on BROKER_LOGGER: all entries are checked before any applies.
pub fn alter(
    ctx: &RequestContext,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), AlterError> {
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    let entries: Vec<(&str, bool)> = r
        .configs
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.config_operation != DELETE && c.value.is_none(),
            )
        })
        .collect();
    changes::check_entries(&entries)?;
    let name = r.resource_name.as_str();
    let node_id = ctx.ctx().config.node_id;
    let id: i32 = name.parse().map_err(|_| {
        AlterError::InvalidRequest(format!("Node id must be an integer, but it is: {name}"))
    })?;
    if id != node_id {
        return Err(AlterError::InvalidRequest(format!(
            "Unexpected node id. Expected {node_id}, but received {name}"
        )));
    }
    let loggers = &ctx.ctx().loggers;
    let mut list = Vec::with_capacity(r.configs.len());
    for c in &r.configs {
        let logger = c.name.to_string();
        let level = match c.config_operation {
            SET => c.value.as_ref().map(|v| v.to_string()),
            DELETE => None,
            op => {
                let what = match op {
                    2 => "APPEND operation".to_string(),
                    3 => "SUBTRACT operation".to_string(),
                    other => format!("Unknown operation type {other}"),
                };
                return Err(AlterError::InvalidRequest(format!(
                    "{what} is not allowed for the BROKER_LOGGER resource"
                )));
            }
        };
        loggers.validate(&logger, level.as_deref())?;
        list.push((logger, level));
    }
    if !validate_only {
        loggers.apply(&list)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::{
        AlterConfigsRequest, AlterConfigsResponse, ApiKey, DescribeConfigsRequest,
        DescribeConfigsResponse,
    };
    use kafka_protocol::protocol::StrBytes;

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.into())
    }

    fn describe(h: &Harness, name: &str) -> (i16, Vec<(String, String, i8)>) {
        let req = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(8)
                .with_resource_name(s(name)),
        ]);
        let r: DescribeConfigsResponse = h.call(ApiKey::DescribeConfigs, 4, req);
        let r = &r.results[0];
        let configs = r
            .configs
            .iter()
            .map(|c| {
                assert!(!c.read_only);
                (
                    c.name.to_string(),
                    c.value.as_deref().unwrap_or("").to_string(),
                    c.config_source,
                )
            })
            .collect();
        (r.error_code, configs)
    }

    fn alter(
        h: &Harness,
        name: &str,
        ops: &[(&str, i8, Option<&str>)],
        validate: bool,
    ) -> (i16, String) {
        incremental_alter(h, 8, name, ops, validate)
    }

    fn level(h: &Harness, logger: &str) -> String {
        describe(h, "0")
            .1
            .into_iter()
            .find(|(n, _, _)| n == logger)
            .map(|(_, v, _)| v)
            .unwrap_or_else(|| panic!("{logger} listed"))
    }

    #[test]
    fn given_loggers_when_described_then_root_first_with_levels_and_logger_source() {
        let h = Harness::new();
        let (code, configs) = describe(&h, "0");
        assert_eq!(code, 0);
        assert_eq!(configs[0], ("root".into(), "INFO".into(), 6));
        assert!(configs
            .iter()
            .any(|(n, v, _)| n == "strom.handlers" && v == "INFO"));
        assert_eq!(describe(&h, "").0, 42);
        assert_eq!(describe(&h, "7").0, 42);
        assert_eq!(describe(&h, "x").0, 42);
    }

    #[test]
    fn given_set_and_delete_when_altered_then_levels_follow_and_kafka_errors() {
        let h = Harness::new();
        let ok = (0, String::new());
        assert_eq!(
            alter(&h, "0", &[("strom.handlers", 0, Some("DEBUG"))], true),
            ok
        );
        assert_eq!(level(&h, "strom.handlers"), "INFO", "validate_only");
        assert_eq!(
            alter(
                &h,
                "0",
                &[
                    ("strom.handlers", 0, Some("DEBUG")),
                    ("root", 0, Some("WARN"))
                ],
                false
            ),
            ok
        );
        assert_eq!(level(&h, "strom.handlers"), "DEBUG");
        assert_eq!(level(&h, "strom.server"), "WARN");
        assert_eq!(alter(&h, "0", &[("strom.handlers", 1, None)], false), ok);
        assert_eq!(level(&h, "strom.handlers"), "WARN");
        let code = |r: (i16, String)| r.0;
        assert_eq!(
            code(alter(&h, "0", &[("nope", 0, Some("DEBUG"))], false)),
            40
        );
        assert_eq!(
            code(alter(&h, "0", &[("strom", 0, Some("LOUD"))], false)),
            40
        );
        assert_eq!(code(alter(&h, "0", &[("root", 1, None)], false)), 42);
        assert_eq!(
            alter(&h, "0", &[("strom", 2, Some("DEBUG"))], false),
            (
                42,
                "APPEND operation is not allowed for the BROKER_LOGGER resource".into()
            )
        );
        assert_eq!(
            code(alter(&h, "0", &[("strom", 3, Some("DEBUG"))], false)),
            42
        );
        assert_eq!(code(alter(&h, "0", &[("strom", 0, None)], false)), 42);
        assert_eq!(
            code(alter(&h, "1", &[("strom", 0, Some("DEBUG"))], false)),
            42
        );
        // A batch with one bad entry changes nothing.
        assert_eq!(
            code(alter(
                &h,
                "0",
                &[("strom", 0, Some("TRACE")), ("nope", 0, Some("DEBUG"))],
                false
            )),
            40
        );
        assert_eq!(level(&h, "strom"), "WARN");
    }

    #[test]
    fn given_legacy_alter_configs_when_broker_logger_then_unknown_resource_type() {
        use kafka_protocol::messages::alter_configs_request::{
            AlterConfigsResource, AlterableConfig,
        };
        let h = Harness::new();
        let req =
            AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(8)
                .with_resource_name(s("0"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(s("strom"))
                    .with_value(Some(s("DEBUG")))])]);
        let r: AlterConfigsResponse = h.call(ApiKey::AlterConfigs, 2, req);
        assert_eq!(r.responses[0].error_code, 42);
        assert_eq!(level(&h, "strom"), "INFO");
    }
}
