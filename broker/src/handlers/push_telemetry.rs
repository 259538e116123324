//! PushTelemetry (key 72, KIP-714): one client instance's metrics (OTLP, maybe compressed),
//! checked as Kafka checks them and shown on `/metrics` (`telemetry`).

use kafka_protocol::messages::{PushTelemetryRequest, PushTelemetryResponse};

use super::RequestContext;
use crate::telemetry::Push;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

pub async fn handle(ctx: &RequestContext, req: PushTelemetryRequest) -> PushTelemetryResponse {
    let push = Push {
        instance_id: req.client_instance_id,
        subscription_id: req.subscription_id,
        terminating: req.terminating,
        compression: req.compression_type,
        metrics: &req.metrics,
    };
    match ctx
        .ctx()
        .telemetry
        .push(&push, ctx.client_meta(), crate::now_ms())
    {
        Ok(()) => PushTelemetryResponse::default(),
        Err(e) => {
            tracing::debug!(client_id = ctx.client_id(), error = %e, "push telemetry refused");
            PushTelemetryResponse::default().with_error_code(super::errors::telemetry_code(&e))
        }
    }
}
