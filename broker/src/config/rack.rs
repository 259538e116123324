//! `broker.rack` and `replica.selector.class` (KIP-392): what the rest of the broker asks of
//! them, and the one selector Strom implements.

use super::BrokerConfig;

/// Kafka's rack-aware `replica.selector.class` (KIP-392), the one selector Strom has.
pub const RACK_AWARE_REPLICA_SELECTOR: &str =
    "org.apache.kafka.common.replica.RackAwareReplicaSelector";

impl BrokerConfig {
    /// This broker's rack, if it has one.
    pub fn rack(&self) -> Option<String> {
        Some(self.broker_rack.trim())
            .filter(|r| !r.is_empty())
            .map(str::to_string)
    }

    /// Whether consumers are sent to a replica in their rack (KIP-392).
    pub fn rack_aware_fetch(&self) -> bool {
        self.replica_selector_class.trim() == RACK_AWARE_REPLICA_SELECTOR
    }
}

/// Refuses a selector Strom does not have: accepting it would leave consumers on the leader
/// while the operator believes otherwise (a config that does nothing).
pub(super) fn validate(c: &BrokerConfig) -> Result<(), (&'static str, String)> {
    match c.replica_selector_class.trim() {
        "" | RACK_AWARE_REPLICA_SELECTOR => Ok(()),
        _ => Err((
            "replica_selector_class",
            format!("only {RACK_AWARE_REPLICA_SELECTOR} (or empty, the leader) is supported"),
        )),
    }
}
