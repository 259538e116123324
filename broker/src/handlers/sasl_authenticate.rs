//! SaslAuthenticate (key 36) reaching the handlers: on a listener without SASL, or after a
//! completed authentication. A SASL listener's exchange is answered in the connection by
//! `server::sasl`. Kafka's `KafkaApis` answers ILLEGAL_SASL_STATE with this message.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 2;

pub async fn handle(
    _ctx: &RequestContext,
    _req: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "SaslAuthenticate request received after successful authentication",
        )))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse};

    #[test]
    fn given_plaintext_listener_when_authenticating_then_illegal_sasl_state() {
        let h = Harness::new();
        let r: SaslAuthenticateResponse = h.call(
            ApiKey::SaslAuthenticate,
            2,
            SaslAuthenticateRequest::default(),
        );
        assert_eq!(r.error_code, 34);
        assert_eq!(
            r.error_message.as_deref(),
            Some("SaslAuthenticate request received after successful authentication")
        );
    }
}
