//! GetTelemetrySubscriptions (key 71, KIP-714): which metrics this client instance pushes,
//! how often, compressed how (`telemetry`). Any client may ask, as in Kafka (no ACL).

use kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

pub async fn handle(
    ctx: &RequestContext,
    req: GetTelemetrySubscriptionsRequest,
) -> GetTelemetrySubscriptionsResponse {
    let telemetry = &ctx.ctx().telemetry;
    match telemetry.subscribe(req.client_instance_id, ctx.client_meta(), crate::now_ms()) {
        Ok(g) => GetTelemetrySubscriptionsResponse::default()
            .with_client_instance_id(g.instance_id)
            .with_subscription_id(g.subscription_id)
            .with_accepted_compression_types(crate::telemetry::ACCEPTED_COMPRESSION.to_vec())
            .with_push_interval_ms(g.interval_ms)
            .with_telemetry_max_bytes(crate::telemetry::MAX_PUSH_BYTES as i32)
            // Cumulative: `/metrics` shows totals (`telemetry`'s module comment says why).
            .with_delta_temporality(false)
            .with_requested_metrics(g.metrics.into_iter().map(StrBytes::from_string).collect()),
        Err(e) => GetTelemetrySubscriptionsResponse::default()
            .with_error_code(super::errors::telemetry_code(&e)),
    }
}
