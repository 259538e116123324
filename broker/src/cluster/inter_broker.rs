//! How this node calls the other brokers' Kafka listeners (docs/security.md "A secured
//! cluster"): on the inter-broker listener (`inter.broker.listener.name`,
//! `config::inter_broker`), at the endpoint the peer registered for it in the image, secured
//! as a client of that listener — the broker's keystore as its TLS client certificate and its
//! truststore to check the peer (`server::tls` hands over the current client config), its
//! own SASL credentials. The follower fetchers (`replicas.rs`) and the transaction calls
//! across nodes (`coordinator::txn::remote`) connect through it; the peer checks
//! CLUSTER_ACTION on the principal they authenticate as, as Kafka does.

use std::time::Duration;

use super::image::MetadataImage;
use crate::config::inter_broker::InterBroker as Settings;
use crate::kafka_conn::{ClientSecurity, ConnError, KafkaConn, Mechanism, SaslLogin, TlsClient};

pub struct InterBroker {
    listener: String,
    security: ClientSecurity,
}

impl InterBroker {
    /// From the checked settings; `tls` gives the client config when the listener is TLS.
    pub fn new(settings: Settings, tls: Option<TlsClient>) -> Result<InterBroker, String> {
        let sasl = match settings.sasl {
            None => None,
            Some((m, login)) => Some(SaslLogin {
                mechanism: Mechanism::from_name(m.name())
                    .ok_or_else(|| format!("{} is no inter-broker mechanism", m.name()))?,
                user: login.username,
                password: login.password,
            }),
        };
        let tls = match (settings.protocol.tls(), tls) {
            (false, _) => None,
            (true, Some(t)) => Some(t),
            (true, None) => {
                return Err(format!(
                    "the inter-broker listener {} is TLS but no TLS settings are loaded",
                    settings.listener
                ))
            }
        };
        Ok(InterBroker {
            listener: settings.listener,
            security: ClientSecurity { tls, sasl },
        })
    }

    /// PLAINTEXT on `listener` (tests).
    pub fn plaintext(listener: &str) -> InterBroker {
        InterBroker {
            listener: listener.to_string(),
            security: ClientSecurity::default(),
        }
    }

    pub fn listener(&self) -> &str {
        &self.listener
    }

    /// Broker `id`'s `host:port` on the inter-broker listener, as the image has it.
    pub fn address(&self, image: &MetadataImage, id: i32) -> Result<String, String> {
        let b = image
            .brokers
            .get(&id)
            .ok_or_else(|| format!("broker {id} is not registered"))?;
        let (host, port) = b.endpoint(&self.listener).ok_or_else(|| {
            format!(
                "broker {id} has no {} listener (inter.broker.listener.name)",
                self.listener
            )
        })?;
        Ok(if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        })
    }

    /// A connection to `addr`, authenticated as this broker.
    pub async fn connect(
        &self,
        addr: &str,
        client_id: &'static str,
        timeout: Duration,
        max_response: usize,
    ) -> Result<KafkaConn, ConnError> {
        KafkaConn::connect_with(addr, &self.security, timeout, client_id, max_response).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::{BrokerRecord, Endpoint};
    use crate::config::listeners::SecurityProtocol;

    #[test]
    fn given_registered_listeners_when_addressing_a_peer_then_its_inter_broker_endpoint() {
        let mut image = MetadataImage::default();
        let e = |listener: &str, host: &str, port| Endpoint {
            listener: listener.into(),
            host: host.into(),
            port,
            protocol: "PLAINTEXT".into(),
        };
        image.brokers.insert(
            1,
            BrokerRecord::new(
                1,
                None,
                vec![e("EXTERNAL", "a", 1), e("INTERNAL", "::1", 2)],
            ),
        );
        image
            .brokers
            .insert(2, BrokerRecord::new(2, None, vec![e("EXTERNAL", "b", 3)]));
        let ib = InterBroker::plaintext("INTERNAL");
        assert_eq!(ib.address(&image, 1).unwrap(), "[::1]:2");
        assert!(ib
            .address(&image, 2)
            .unwrap_err()
            .contains("no INTERNAL listener"));
        assert!(ib
            .address(&image, 3)
            .unwrap_err()
            .contains("not registered"));
        // A TLS inter-broker listener without TLS settings cannot be set up.
        let settings = Settings {
            listener: "INTERNAL".into(),
            protocol: SecurityProtocol::Ssl,
            sasl: None,
        };
        assert!(InterBroker::new(settings, None).is_err());
    }
}
