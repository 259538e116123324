//! Client telemetry on `/metrics`: each instance's last pushed series, labelled with who
//! sent them (instance id, client id, software name and version, source address), and the
//! receiver's own counters. A family a client names with another type than an earlier
//! client did is left out for that client (Prometheus allows one type per family).

use prometheus::proto::{MetricFamily, MetricType};

use std::sync::atomic::Ordering;

use super::forward::ForwardCounters;
use super::otlp::{Kind, Value};
use super::{State, TelemetryError};
use crate::metrics::families::{label, Families};

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub pushes: u64,
    pub throttled: u64,
    /// Refused pushes by Kafka error name.
    pub refused: std::collections::BTreeMap<&'static str, u64>,
    pub dropped_series: u64,
    pub skipped_points: u64,
}

impl Counters {
    pub fn refused(&mut self, e: &TelemetryError) {
        let name = match e {
            TelemetryError::InvalidRequest(_) => "INVALID_REQUEST",
            TelemetryError::Throttled(_) => "THROTTLING_QUOTA_EXCEEDED",
            TelemetryError::UnknownSubscription(_) => "UNKNOWN_SUBSCRIPTION_ID",
            TelemetryError::UnsupportedCompression(..) => "UNSUPPORTED_COMPRESSION_TYPE",
            TelemetryError::TooLarge(..) => "TELEMETRY_TOO_LARGE",
            TelemetryError::InvalidRecord(_) => "INVALID_RECORD",
        };
        *self.refused.entry(name).or_default() += 1;
    }
}

fn kind_type(k: Kind) -> MetricType {
    match k {
        Kind::Gauge => MetricType::GAUGE,
        Kind::Counter => MetricType::COUNTER,
        Kind::Histogram => MetricType::HISTOGRAM,
    }
}

pub(super) fn families(state: &State, forward: Option<&ForwardCounters>) -> Vec<MetricFamily> {
    let mut f = Families::new();
    if let Some(c) = forward {
        for (name, help, n) in [
            (
                "strom_client_telemetry_forwarded_total",
                "Pushed payloads posted to the OTLP collector.",
                &c.sent,
            ),
            (
                "strom_client_telemetry_forward_dropped_total",
                "Pushed payloads not forwarded: the queue to the OTLP collector was full.",
                &c.dropped,
            ),
            (
                "strom_client_telemetry_forward_failed_total",
                "Posts of pushed payloads the OTLP collector refused or never answered.",
                &c.failed,
            ),
        ] {
            f.counter(name, help, vec![], n.load(Ordering::Relaxed) as f64);
        }
    }
    f.gauge(
        "strom_client_telemetry_instances",
        "Client instances (KIP-714) the broker knows, pushing or not.",
        vec![],
        state.instances.len() as f64,
    );
    f.gauge(
        "strom_client_telemetry_subscriptions",
        "CLIENT_METRICS subscriptions.",
        vec![],
        state.subscriptions.len() as f64,
    );
    f.counter(
        "strom_client_telemetry_pushes_total",
        "PushTelemetry requests accepted.",
        vec![],
        state.counters.pushes as f64,
    );
    f.counter(
        "strom_client_telemetry_subscription_throttled_total",
        "GetTelemetrySubscriptions requests sooner than their push interval.",
        vec![],
        state.counters.throttled as f64,
    );
    for (error, n) in &state.counters.refused {
        f.counter(
            "strom_client_telemetry_push_refused_total",
            "PushTelemetry requests refused, by Kafka error.",
            vec![label("error", error)],
            *n as f64,
        );
    }
    f.counter(
        "strom_client_telemetry_dropped_series_total",
        "Pushed series dropped: over 2000 per client or 200000 in all.",
        vec![],
        state.counters.dropped_series as f64,
    );
    f.counter(
        "strom_client_telemetry_skipped_points_total",
        "Pushed data points of kinds /metrics does not show (summaries, exponential histograms).",
        vec![],
        state.counters.skipped_points as f64,
    );
    // Instances in id order: a scrape lists the same client in the same place.
    let mut instances: Vec<_> = state.instances.values().collect();
    instances.sort_by_key(|i| i.id);
    for i in instances {
        let who = [
            ("client_instance_id", i.id_text.as_str()),
            ("client_id", i.meta.client_id.as_str()),
            ("client_software_name", i.meta.software_name.as_str()),
            ("client_software_version", i.meta.software_version.as_str()),
            ("client_source_address", i.meta.source_address.as_str()),
        ];
        for ((name, attrs), sample) in &i.series {
            if f.kind_of(name).is_some_and(|t| t != kind_type(sample.kind)) {
                continue;
            }
            // The broker's labels first; a pushed attribute of the same name is dropped
            // (who sent a series is the broker's to say).
            let mut labels: Vec<_> = who.iter().map(|(n, v)| label(n, v)).collect();
            labels.extend(
                attrs
                    .iter()
                    .filter(|(n, _)| !who.iter().any(|(w, _)| w == n))
                    .map(|(n, v)| label(n, v)),
            );
            match (&sample.value, sample.kind) {
                (Value::Number(v), Kind::Counter) => f.counter(name, &sample.help, labels, *v),
                (Value::Number(v), _) => f.gauge(name, &sample.help, labels, *v),
                (
                    Value::Histogram {
                        buckets,
                        count,
                        sum,
                    },
                    _,
                ) => f.histogram_cumulative(name, &sample.help, labels, buckets, *count, *sum),
            }
        }
    }
    f.into_vec()
}
