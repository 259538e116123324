//! InitProducerId (key 22) for idempotent producers: a fresh producer id with epoch 0, as
//! Kafka's coordinator answers when there is no transactional id. Transactional ids need the
//! transaction coordinator, which is not built yet: they get COORDINATOR_NOT_AVAILABLE, so the
//! client reports that transactions are unavailable instead of misbehaving.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::RequestContext;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 5;

pub async fn handle(ctx: &RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let fail = |e: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(e.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if req.transactional_id.is_some() {
        return fail(ResponseError::CoordinatorNotAvailable);
    }
    match ctx.ctx().producer_ids.next() {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "cannot persist producer id block");
            fail(ResponseError::UnknownServerError)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use kafka_protocol::messages::ApiKey;

    #[test]
    fn given_idempotent_producers_when_initialising_then_distinct_ids_epoch_zero() {
        let h = Harness::new();
        let a: InitProducerIdResponse = h.call(
            ApiKey::InitProducerId,
            4,
            InitProducerIdRequest::default().with_transactional_id(None),
        );
        let b: InitProducerIdResponse = h.call(
            ApiKey::InitProducerId,
            4,
            InitProducerIdRequest::default().with_transactional_id(None),
        );
        assert_eq!((a.error_code, a.producer_epoch), (0, 0));
        assert_ne!(a.producer_id, b.producer_id);
    }
}
