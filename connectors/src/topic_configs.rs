//! The topic configs a connector honours besides its own file: the topic's embedding rules
//! (`strom.embedding.*`, [`crate::embedding`]), read with DescribeConfigs when the connector
//! starts, so a vector the broker would refuse at produce is never written to a database
//! either (records produced before the rules were set, or to a Kafka cluster that has
//! none of them, go to the dead-letter topic instead).

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

use crate::embedding::EmbeddingSpec;

/// The embedding rules of each of `topics` that has some. A topic that cannot be described
/// (a broker without DescribeConfigs rights for it, a timeout) has none: it is logged, and
/// the sink's own checks (finite numbers, the collection's dimension) still apply.
pub async fn embedding_specs(
    base: &ClientConfig,
    topics: &[String],
) -> HashMap<String, EmbeddingSpec> {
    let mut out = HashMap::new();
    let admin: AdminClient<DefaultClientContext> = match base.create() {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(error = %e, "no admin client for the topics' embedding rules");
            return out;
        }
    };
    let resources: Vec<ResourceSpecifier> =
        topics.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(30)));
    let results = match admin.describe_configs(resources.iter(), &opts).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "describing the topics' configs failed; no embedding rules");
            return out;
        }
    };
    for (topic, r) in topics.iter().zip(results) {
        match r {
            Ok(resource) => {
                let entries = resource.entry_map();
                let spec = EmbeddingSpec::from_configs(|k| {
                    entries.get(k).and_then(|e| e.value.as_deref())
                });
                if let Some(spec) = spec {
                    tracing::info!(topic = %topic, ?spec, "topic embedding rules apply to the sink");
                    out.insert(topic.clone(), spec);
                }
            }
            Err(e) => {
                tracing::warn!(topic = %topic, error = ?e, "describing the topic's configs failed")
            }
        }
    }
    out
}
