//! SaslHandshake (key 17) reaching the handlers: on a listener without SASL, or (never, in
//! practice) past the authenticator. A SASL listener's handshakes are answered in the
//! connection by `server::sasl`. Kafka's `KafkaApis` answers these with ILLEGAL_SASL_STATE.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};

use super::RequestContext;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 1;

pub async fn handle(_ctx: &RequestContext, _req: SaslHandshakeRequest) -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code())
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use kafka_protocol::messages::{ApiKey, SaslHandshakeRequest, SaslHandshakeResponse};
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn given_plaintext_listener_when_handshaking_then_illegal_sasl_state() {
        let h = Harness::new();
        let req =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
        let r: SaslHandshakeResponse = h.call(ApiKey::SaslHandshake, 1, req);
        assert_eq!(r.error_code, 34);
        assert!(r.mechanisms.is_empty());
    }
}
