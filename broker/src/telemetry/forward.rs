//! Client metrics to an OpenTelemetry collector. Each accepted PushTelemetry payload is
//! posted as OTLP/HTTP protobuf to `otel.exporter.otlp.endpoint`'s `/v1/metrics`, with the
//! broker's labels of the client added to every resource (KIP-714's client resource labels:
//! instance id, client id, software, source address and port). Kafka hands the payload to a
//! `ClientTelemetryReceiver` plugin someone has to write; here a configured endpoint is
//! enough, and the traces of the same records go there too (`otel`).
//!
//! The HTTP client runs on a thread of its own, so a slow collector never holds a shard. The
//! queue to it is bounded: when the collector falls behind, new payloads are dropped and
//! counted (`strom_client_telemetry_forward_dropped_total`), the same push still shows on
//! `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::MetricsData;
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use tokio::sync::mpsc;

/// Payloads waiting for the collector; with the 1 MiB payload bound of a push, at most
/// this many MiB.
const QUEUE: usize = 64;
const POST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub struct ForwardCounters {
    pub sent: AtomicU64,
    pub dropped: AtomicU64,
    pub failed: AtomicU64,
}

pub struct Forwarder {
    tx: mpsc::Sender<Vec<u8>>,
    pub counters: Arc<ForwardCounters>,
}

impl Forwarder {
    /// The forwarder to `endpoint`'s metrics URL; `None` without an endpoint.
    pub fn start(endpoint: &str) -> Result<Option<Forwarder>, strom_connectors::trace::OtelError> {
        let endpoint = endpoint.trim();
        if endpoint.is_empty() {
            return Ok(None);
        }
        let url = strom_connectors::trace::metrics_url(endpoint)?;
        let (tx, rx) = mpsc::channel(QUEUE);
        let counters = Arc::new(ForwardCounters::default());
        let c = counters.clone();
        std::thread::Builder::new()
            .name("strom-otlp-metrics".into())
            .spawn(move || post_all(url, rx, c))
            .expect("spawning the client metrics forwarder thread");
        Ok(Some(Forwarder { tx, counters }))
    }

    /// Queues `data` with `labels` added to each of its resources; dropped (and counted)
    /// when the queue is full.
    pub fn send(&self, data: MetricsData, labels: &[(&str, &str)]) {
        // MetricsData and the collector's ExportMetricsServiceRequest are the same message
        // on the wire (field 1: the resource metrics).
        let body = with_labels(data, labels).encode_to_vec();
        if self.tx.try_send(body).is_err() {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// `data` with each non-empty label set on every resource, in place of what the client
/// sent under the same key (the broker's view of who sent it wins).
fn with_labels(mut data: MetricsData, labels: &[(&str, &str)]) -> MetricsData {
    for rm in &mut data.resource_metrics {
        let resource = rm.resource.get_or_insert_with(Resource::default);
        for (key, value) in labels.iter().filter(|(_, v)| !v.is_empty()) {
            resource.attributes.retain(|kv| kv.key != *key);
            resource.attributes.push(KeyValue {
                key: key.to_string(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValue(value.to_string())),
                }),
            });
        }
    }
    data
}

/// The forwarder thread: posts queued payloads one at a time until the broker drops the
/// sender. A failure is logged at 1, 2, 4, 8… failures, not per push.
fn post_all(url: String, mut rx: mpsc::Receiver<Vec<u8>>, counters: Arc<ForwardCounters>) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "client metrics forwarder has no runtime: not forwarding");
            return;
        }
    };
    rt.block_on(async move {
        let client = reqwest::Client::new();
        while let Some(body) = rx.recv().await {
            let sent = client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
                .timeout(POST_TIMEOUT)
                .body(body)
                .send()
                .await;
            let failure = match sent {
                Ok(r) if r.status().is_success() => None,
                Ok(r) => Some(format!("HTTP {}", r.status())),
                Err(e) => Some(e.to_string()),
            };
            match failure {
                None => {
                    counters.sent.fetch_add(1, Ordering::Relaxed);
                }
                Some(why) => {
                    let n = counters.failed.fetch_add(1, Ordering::Relaxed) + 1;
                    if n.is_power_of_two() {
                        tracing::warn!(url = %url, error = %why, failures = n, "posting client metrics to the OTLP collector failed");
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::metrics::v1::ResourceMetrics;

    use super::*;

    fn text(kv: &KeyValue) -> (&str, &str) {
        match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::StringValue(s)) => (kv.key.as_str(), s.as_str()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn given_a_payload_when_labelled_then_every_resource_names_the_client_and_empty_labels_are_left_out(
    ) {
        let sent_by_client = Resource {
            attributes: vec![KeyValue {
                key: "client_id".into(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValue("claimed".into())),
                }),
            }],
            ..Default::default()
        };
        let data = MetricsData {
            resource_metrics: vec![
                ResourceMetrics {
                    resource: Some(sent_by_client),
                    ..Default::default()
                },
                ResourceMetrics::default(),
            ],
        };
        let out = with_labels(
            data,
            &[
                ("client_instance_id", "AAAB"),
                ("client_id", "app-1"),
                ("client_source_port", ""),
            ],
        );
        for rm in &out.resource_metrics {
            let attrs: Vec<_> = rm
                .resource
                .as_ref()
                .unwrap()
                .attributes
                .iter()
                .map(text)
                .collect();
            assert_eq!(
                attrs,
                vec![("client_instance_id", "AAAB"), ("client_id", "app-1")]
            );
        }
    }
}
