//! The registered brokers and where they listen: every listener's advertised endpoint
//! (Kafka's `RegisterBrokerRecord.endPoints`), so that a client is answered with the
//! endpoints of the listener it came in on and the brokers call each other on the
//! inter-broker listener. Kafka's `MetadataCache.getAliveBrokerNode(s)(listenerName)`: a
//! broker without that listener is left out.

use serde::{Deserialize, Serialize};

use super::MetadataImage;

/// One listener of a broker, as advertised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// The listener's name (upper case, as `listeners` resolves it).
    pub listener: String,
    pub host: String,
    pub port: i32,
    /// Kafka's security protocol name: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    pub protocol: String,
}

/// A registered broker. `host` and `port` are its first listener's, all that records held
/// before every listener was registered (and what a node of that version still reads during
/// a rolling upgrade); `endpoints` has every listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRecord {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// Empty in records written before: read as the first listener's endpoint for any
    /// listener, which is what every node answered then (`endpoint`).
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
}

impl BrokerRecord {
    /// The record of broker `id` listening on `endpoints` (the first is the legacy
    /// `host`/`port`).
    pub fn new(id: i32, rack: Option<String>, endpoints: Vec<Endpoint>) -> BrokerRecord {
        let (host, port) = endpoints
            .first()
            .map(|e| (e.host.clone(), e.port))
            .unwrap_or_default();
        BrokerRecord {
            id,
            host,
            port,
            rack,
            endpoints,
        }
    }

    /// Where the broker listens on `listener`: `None` when it has no such listener. A record
    /// of an older version, which named no listener, answers with its one address.
    pub fn endpoint(&self, listener: &str) -> Option<(&str, i32)> {
        if self.endpoints.is_empty() {
            return Some((&self.host, self.port));
        }
        self.endpoints
            .iter()
            .find(|e| e.listener == listener)
            .map(|e| (e.host.as_str(), e.port))
    }

    /// The broker as a client of `listener` sees it.
    pub fn node_on(&self, listener: &str) -> Option<BrokerNode> {
        let (host, port) = self.endpoint(listener)?;
        Some(BrokerNode {
            id: self.id,
            host: host.to_string(),
            port,
            rack: self.rack.clone(),
        })
    }
}

/// A broker on one listener: what Metadata, DescribeCluster, FindCoordinator and the
/// KIP-951 node endpoints give a client (Kafka's `Node`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerNode {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

impl MetadataImage {
    /// The brokers with an endpoint on `listener`, by id, with whether each is fenced; the
    /// fenced ones only when `with_fenced` (Kafka's `getAliveBrokerNodes` /
    /// `getBrokerNodes(listenerName)`).
    pub fn nodes_on(&self, listener: &str, with_fenced: bool) -> Vec<(BrokerNode, bool)> {
        self.brokers
            .values()
            .filter_map(|b| {
                let fenced = self.fenced.contains(&b.id);
                (with_fenced || !fenced).then(|| b.node_on(listener).map(|n| (n, fenced)))?
            })
            .collect()
    }

    /// Broker `id` on `listener`, if it is registered and has that listener.
    pub fn node_on(&self, id: i32, listener: &str) -> Option<BrokerNode> {
        self.brokers.get(&id)?.node_on(listener)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(listener: &str, port: i32) -> Endpoint {
        Endpoint {
            listener: listener.into(),
            host: "127.0.0.1".into(),
            port,
            protocol: "PLAINTEXT".into(),
        }
    }

    #[test]
    fn given_brokers_with_listeners_when_asked_per_listener_then_that_listeners_endpoints() {
        let mut image = MetadataImage::default();
        let both = vec![endpoint("INTERNAL", 9001), endpoint("EXTERNAL", 19001)];
        image
            .brokers
            .insert(1, BrokerRecord::new(1, Some("r1".into()), both));
        image.brokers.insert(
            2,
            BrokerRecord::new(2, None, vec![endpoint("INTERNAL", 9002)]),
        );
        image.brokers.insert(
            3,
            BrokerRecord::new(3, None, vec![endpoint("EXTERNAL", 19003)]),
        );
        image.fenced.insert(3);
        let ports = |l: &str, fenced: bool| -> Vec<(i32, i32, bool)> {
            image
                .nodes_on(l, fenced)
                .into_iter()
                .map(|(n, f)| (n.id, n.port, f))
                .collect()
        };
        assert_eq!(
            ports("INTERNAL", true),
            [(1, 9001, false), (2, 9002, false)]
        );
        assert_eq!(ports("EXTERNAL", false), [(1, 19001, false)]);
        assert_eq!(
            ports("EXTERNAL", true),
            [(1, 19001, false), (3, 19003, true)]
        );
        assert_eq!(image.node_on(2, "EXTERNAL"), None);
        let n = image.node_on(1, "EXTERNAL").unwrap();
        assert_eq!((n.port, n.rack.as_deref()), (19001, Some("r1")));
        // The legacy fields are the first listener's.
        assert_eq!(image.brokers[&1].port, 9001);
    }

    #[test]
    fn given_a_record_of_an_older_version_when_read_then_one_endpoint_for_any_listener() {
        let old: BrokerRecord =
            serde_json::from_str(r#"{"id":4,"host":"h","port":9092,"rack":null}"#).unwrap();
        assert_eq!(old.endpoint("ANYTHING"), Some(("h", 9092)));
        // A new record is read by an older version as its first listener.
        let new = BrokerRecord::new(
            5,
            None,
            vec![endpoint("SASL_SSL", 1), endpoint("PLAINTEXT", 2)],
        );
        let v: serde_json::Value = serde_json::to_value(&new).unwrap();
        assert_eq!(
            (v["host"].as_str(), v["port"].as_i64()),
            (Some("127.0.0.1"), Some(1))
        );
        let back: BrokerRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back, new);
    }
}
