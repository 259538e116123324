//! ListConfigResources (key 74; v0 was ListClientMetricsResources, KIP-714; v1 KIP-1142):
//! the config resources that exist, by type. `kafka-client-metrics.sh --list` and
//! `kafka-configs.sh --describe --entity-type client-metrics|groups` without a name ask it.
//! As Kafka: DESCRIBE_CONFIGS on the cluster; v0 lists only CLIENT_METRICS; no types means
//! every type the version knows; a type it does not know fails the request
//! (UNSUPPORTED_VERSION); groups are those with configs of their own.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};
use kafka_protocol::protocol::StrBytes;

use super::config_changes::{
    RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP,
    RESOURCE_TOPIC,
};
use super::RequestContext;
use crate::security::acl::Operation;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 1;

pub async fn handle(
    ctx: &RequestContext,
    req: ListConfigResourcesRequest,
) -> ListConfigResourcesResponse {
    if !ctx.access().allows_cluster(Operation::DescribeConfigs) {
        return ListConfigResourcesResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let supported: &[i8] = if ctx.version() == 0 {
        &[RESOURCE_CLIENT_METRICS]
    } else {
        &[
            RESOURCE_TOPIC,
            RESOURCE_BROKER,
            RESOURCE_BROKER_LOGGER,
            RESOURCE_CLIENT_METRICS,
            RESOURCE_GROUP,
        ]
    };
    let wanted = if req.resource_types.is_empty() {
        supported.to_vec()
    } else {
        req.resource_types.clone()
    };
    if wanted.iter().any(|t| !supported.contains(t)) {
        return ListConfigResourcesResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let broker = ctx.ctx();
    let mut out = Vec::new();
    let mut add = |kind: i8, names: Vec<String>| {
        out.extend(names.into_iter().map(|n| {
            ConfigResource::default()
                .with_resource_name(StrBytes::from_string(n))
                .with_resource_type(kind)
        }))
    };
    for kind in wanted {
        match kind {
            RESOURCE_GROUP => add(kind, broker.group_configs.all().keys().cloned().collect()),
            RESOURCE_CLIENT_METRICS => add(kind, broker.telemetry.names()),
            RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => {
                add(kind, vec![broker.config.node_id.to_string()])
            }
            RESOURCE_TOPIC => add(
                kind,
                broker
                    .catalog
                    .snapshot()
                    .topics
                    .keys()
                    .map(|t| t.to_string())
                    .collect(),
            ),
            _ => {}
        }
    }
    ListConfigResourcesResponse::default().with_config_resources(out)
}
