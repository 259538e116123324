//! IncrementalAlterConfigs (key 44): SET, DELETE, APPEND and SUBTRACT (list configs only) on a
//! topic's overrides or the dynamic broker configs (this broker or the cluster-wide default),
//! with `validate_only`. The shared rules live in `config_changes`.

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::config_changes::{self as changes, AlterError, Change, Op};
use super::RequestContext;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 1;

type Resource = kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;

/// Each config's name, and whether its value is a null Kafka refuses (any operation but
/// DELETE).
fn entries(r: &Resource) -> Vec<(&str, bool)> {
    const DELETE: i8 = 1;
    r.configs
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.config_operation != DELETE && c.value.is_none(),
            )
        })
        .collect()
}

async fn alter(ctx: &RequestContext, r: &Resource, validate_only: bool) -> Result<(), AlterError> {
    if r.resource_type == changes::RESOURCE_BROKER_LOGGER {
        return super::broker_logger::alter(ctx, r, validate_only);
    }
    let mut target = None;
    let entries = entries(r);
    let own_store = [
        super::group_configs::RESOURCE_GROUP,
        changes::RESOURCE_CLIENT_METRICS,
    ];
    if own_store.contains(&r.resource_type) {
        changes::check_entries(&entries)?;
    } else {
        target = Some(changes::preprocess(
            ctx,
            r.resource_type,
            r.resource_name.as_str(),
            &entries,
        )?);
    }
    let list = r
        .configs
        .iter()
        .map(|c| {
            Ok(Change {
                name: c.name.to_string(),
                op: Op::from_id(c.config_operation)?,
                value: c.value.as_ref().map(|v| v.to_string()),
            })
        })
        .collect::<Result<Vec<_>, AlterError>>()?;
    let Some(target) = target else {
        let name = r.resource_name.as_str();
        if r.resource_type == changes::RESOURCE_CLIENT_METRICS {
            return super::client_metrics_configs::alter(ctx, name, &list, true, validate_only)
                .await;
        }
        return super::group_configs::alter(ctx, name, &list, true, validate_only).await;
    };
    let configs = changes::apply_ops(&target, changes::current(ctx, &target), &list)?;
    changes::commit(ctx, &target, configs, validate_only).await
}

pub async fn handle(
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let validate_only = req.validate_only;
    let outcomes = changes::answer_each(
        &ctx.access(),
        &req.resources,
        |r| (r.resource_type, r.resource_name.as_str()),
        |r| {
            let (t, name) = (r.resource_type, r.resource_name.as_str());
            changes::precheck(ctx, t, name, &entries(r), false)
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
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::config::topic::ConfigSource;
    use crate::handlers::testing::{batch, create, produce_req};
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        ApiKey, DescribeConfigsRequest, DescribeConfigsResponse, ProduceResponse,
    };
    use kafka_protocol::protocol::StrBytes;

    fn op(name: &str, op: i8, value: Option<&str>) -> AlterableConfig {
        AlterableConfig::default()
            .with_name(StrBytes::from_string(name.into()))
            .with_config_operation(op)
            .with_value(value.map(|v| StrBytes::from_string(v.into())))
    }

    fn alter(
        h: &Harness,
        kind: i8,
        name: &str,
        ops: Vec<AlterableConfig>,
        validate_only: bool,
    ) -> (i16, String) {
        let req = IncrementalAlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(kind)
                .with_resource_name(StrBytes::from_string(name.into()))
                .with_configs(ops)]);
        let r: IncrementalAlterConfigsResponse = h.call(ApiKey::IncrementalAlterConfigs, 1, req);
        let r = &r.responses[0];
        (
            r.error_code,
            r.error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
        )
    }

    /// (value, source) of one config as DescribeConfigs reports it.
    fn describe(h: &Harness, kind: i8, name: &str, key: &str) -> (String, i8) {
        let req = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(kind)
                .with_resource_name(StrBytes::from_string(name.into()))
                .with_configuration_keys(Some(vec![StrBytes::from_string(key.into())])),
        ]);
        let r: DescribeConfigsResponse = h.call(ApiKey::DescribeConfigs, 4, req);
        let c = &r.results[0].configs[0];
        (
            c.value.as_deref().unwrap_or("").to_string(),
            c.config_source,
        )
    }

    fn produce_code(h: &Harness, topic: &str) -> i16 {
        let r: ProduceResponse = h.call(
            ApiKey::Produce,
            9,
            produce_req(topic, 0, 1, batch(2, -1, -1, -1)),
        );
        r.responses[0].partition_responses[0].error_code
    }

    const SET: i8 = 0;
    const DELETE: i8 = 1;
    const APPEND: i8 = 2;
    const SUBTRACT: i8 = 3;

    #[test]
    fn given_topic_when_each_op_applied_then_overrides_and_describe_follow() {
        let h = Harness::new();
        create(&h, "t", 1);
        let ok = (0, String::new());
        assert_eq!(
            alter(
                &h,
                2,
                "t",
                vec![op("retention.ms", SET, Some("1000"))],
                false
            ),
            ok
        );
        assert_eq!(
            describe(&h, 2, "t", "retention.ms"),
            ("1000".into(), ConfigSource::DynamicTopic as i8)
        );
        assert_eq!(
            alter(
                &h,
                2,
                "t",
                vec![op("cleanup.policy", APPEND, Some("compact"))],
                false
            ),
            ok
        );
        assert_eq!(describe(&h, 2, "t", "cleanup.policy").0, "delete,compact");
        assert!(
            h.state
                .ctx
                .catalog
                .snapshot()
                .get("t")
                .unwrap()
                .settings
                .compact
        );
        assert_eq!(
            alter(
                &h,
                2,
                "t",
                vec![op("cleanup.policy", SUBTRACT, Some("delete"))],
                false
            ),
            ok
        );
        assert_eq!(describe(&h, 2, "t", "cleanup.policy").0, "compact");
        assert_eq!(
            alter(
                &h,
                2,
                "t",
                vec![
                    op("retention.ms", DELETE, None),
                    op("cleanup.policy", DELETE, None)
                ],
                false
            ),
            ok
        );
        assert_eq!(
            describe(&h, 2, "t", "retention.ms"),
            ("604800000".into(), ConfigSource::Default as i8)
        );
        assert!(h
            .state
            .ctx
            .catalog
            .snapshot()
            .get("t")
            .unwrap()
            .configs
            .is_empty());
    }

    #[test]
    fn given_altered_max_message_bytes_when_producing_then_limit_applies_at_once() {
        let h = Harness::new();
        create(&h, "t", 1);
        create(&h, "u", 1);
        assert_eq!(produce_code(&h, "t"), 0);
        // validate_only changes nothing.
        assert_eq!(
            alter(
                &h,
                2,
                "t",
                vec![op("max.message.bytes", SET, Some("20"))],
                true
            )
            .0,
            0
        );
        assert_eq!(produce_code(&h, "t"), 0);
        assert_eq!(
            alter(
                &h,
                2,
                "t",
                vec![op("max.message.bytes", SET, Some("20"))],
                false
            )
            .0,
            0
        );
        assert_eq!(produce_code(&h, "t"), 10, "MESSAGE_TOO_LARGE");
        assert_eq!(produce_code(&h, "u"), 0, "other topics unaffected");
        // A cluster-wide dynamic default reaches topics without an override.
        assert_eq!(
            alter(
                &h,
                4,
                "",
                vec![op("message.max.bytes", SET, Some("30"))],
                false
            )
            .0,
            0
        );
        assert_eq!(produce_code(&h, "u"), 10);
        assert_eq!(
            describe(&h, 2, "u", "max.message.bytes"),
            ("30".into(), ConfigSource::DynamicDefaultBroker as i8)
        );
        assert_eq!(
            describe(&h, 4, "0", "message.max.bytes"),
            ("30".into(), ConfigSource::DynamicDefaultBroker as i8)
        );
        // The per-broker value wins over the cluster default.
        assert_eq!(
            alter(
                &h,
                4,
                "0",
                vec![op("message.max.bytes", SET, Some("100000"))],
                false
            )
            .0,
            0
        );
        assert_eq!(produce_code(&h, "u"), 0);
        assert_eq!(
            describe(&h, 4, "0", "message.max.bytes"),
            ("100000".into(), ConfigSource::DynamicBroker as i8)
        );
        assert_eq!(
            alter(
                &h,
                4,
                "0",
                vec![op("message.max.bytes", DELETE, None)],
                false
            )
            .0,
            0
        );
        assert_eq!(produce_code(&h, "u"), 10);
        assert_eq!(produce_code(&h, "t"), 10, "topic override still wins");
    }

    #[test]
    fn given_bad_requests_when_altering_then_kafka_codes_and_messages() {
        let h = Harness::new();
        create(&h, "t", 1);
        let cases: Vec<(i8, &str, Vec<AlterableConfig>, i16, &str)> = vec![
            (
                2,
                "nope",
                vec![op("retention.ms", SET, Some("1"))],
                3,
                "The topic 'nope' does not exist.",
            ),
            (
                2,
                "t",
                vec![op("no.such.config", SET, Some("1"))],
                40,
                "Unknown topic config name: no.such.config",
            ),
            (
                2,
                "t",
                vec![op("retention.ms", SET, Some("abc"))],
                40,
                "Invalid value abc for configuration retention.ms: Not a number of type LONG",
            ),
            (
                2,
                "t",
                vec![op("retention.ms", APPEND, Some("1"))],
                40,
                "Can't APPEND to key retention.ms because its type is not LIST.",
            ),
            (
                2,
                "t",
                vec![op("retention.ms", SET, None)],
                42,
                "Null value not supported for : retention.ms",
            ),
            (
                2,
                "t",
                vec![
                    op("retention.ms", SET, Some("1")),
                    op("retention.ms", DELETE, None),
                ],
                42,
                "Error due to duplicate config keys",
            ),
            (
                2,
                "t",
                vec![op("retention.ms", 7, Some("1"))],
                42,
                "Unknown operations type 7",
            ),
            (
                2,
                "",
                vec![op("retention.ms", SET, Some("1"))],
                42,
                "Default topic resources are not allowed.",
            ),
            (
                4,
                "0",
                vec![op("log.dirs", SET, Some("/x"))],
                42,
                "Cannot update these configs dynamically: Set(log.dirs)",
            ),
            (
                4,
                "",
                vec![op("log.segment.bytes", SET, Some("13"))],
                42,
                "Invalid value 13 for configuration log.segment.bytes: Value must be at least 14",
            ),
            (
                4,
                "5",
                vec![op("message.max.bytes", SET, Some("1"))],
                42,
                "Unexpected broker id, expected 0, but received 5",
            ),
            (
                4,
                "x",
                vec![op("message.max.bytes", SET, Some("1"))],
                42,
                "Node id must be an integer, but it is: x",
            ),
            (
                4,
                "",
                vec![op("message.max.bytes", APPEND, Some("1"))],
                40,
                "Config value append is not allowed for config key: message.max.bytes",
            ),
            (
                8,
                "0",
                vec![op("kafka", SET, Some("DEBUG"))],
                40,
                "Logger kafka does not exist!",
            ),
        ];
        for (kind, name, ops, code, message) in cases {
            let ctx = format!("{kind}/{name}: {message}");
            assert_eq!(
                alter(&h, kind, name, ops, false),
                (code, message.to_string()),
                "{ctx}"
            );
        }
        assert!(h
            .state
            .ctx
            .catalog
            .snapshot()
            .get("t")
            .unwrap()
            .configs
            .is_empty());
        assert!(h.state.ctx.catalog.broker().cluster.is_empty());
    }

    #[test]
    fn given_same_resource_twice_when_altering_then_both_refused() {
        let h = Harness::new();
        create(&h, "t", 1);
        let res = AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("t"))
            .with_configs(vec![op("retention.ms", SET, Some("5"))]);
        let req = IncrementalAlterConfigsRequest::default().with_resources(vec![res.clone(), res]);
        let r: IncrementalAlterConfigsResponse = h.call(ApiKey::IncrementalAlterConfigs, 1, req);
        assert!(r.responses.iter().all(|r| r.error_code == 42));
        assert!(h
            .state
            .ctx
            .catalog
            .snapshot()
            .get("t")
            .unwrap()
            .configs
            .is_empty());
    }
}
