//! A PushTelemetry payload: OTLP `MetricsData` (protobuf, KIP-714), decoded with
//! OpenTelemetry's own types into the series `/metrics` shows. Names become Prometheus
//! names (`org.apache.kafka.producer.record.queue.time.avg` →
//! `strom_client_producer_record_queue_time_avg`); point and resource attributes become
//! labels. Gauges stay gauges, monotonic sums become counters (`_total`), explicit-bucket
//! histograms histograms; summaries and exponential histograms (which no Kafka client sends)
//! are skipped and counted.

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric::Data, number_data_point, AggregationTemporality, HistogramDataPoint, MetricsData,
    NumberDataPoint,
};
use prost::Message;

/// The prefix every Kafka client's standard metrics share (KIP-714), dropped from the names.
const KAFKA_PREFIX: &str = "org.apache.kafka.";
/// Client series are named apart from the broker's own families.
pub const FAMILY_PREFIX: &str = "strom_client_";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Gauge,
    Counter,
    Histogram,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Number(f64),
    /// (upper bound, cumulative count) per bucket, +Inf last; count; sum.
    Histogram {
        buckets: Vec<(f64, u64)>,
        count: u64,
        sum: f64,
    },
}

/// One series of one client: family name and its labels (sorted, unique).
pub type SeriesKey = (String, Vec<(String, String)>);

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub kind: Kind,
    pub help: String,
    pub value: Value,
    /// A delta sum is added to what came before; a series missing from the next push is kept.
    pub delta: bool,
}

pub type Series = BTreeMap<SeriesKey, Sample>;

#[derive(Debug, thiserror::Error)]
#[error("metrics payload is not OTLP MetricsData: {0}")]
pub struct DecodeError(#[from] prost::DecodeError);

/// What one push adds; `skipped` counts data points of kinds `/metrics` cannot show. `data`
/// is the payload itself, for the OTLP collector (`forward`).
#[derive(Debug, Default)]
pub struct Decoded {
    pub points: Vec<(SeriesKey, Sample)>,
    pub skipped: u64,
    pub data: MetricsData,
}

pub fn decode(payload: &[u8]) -> Result<Decoded, DecodeError> {
    let data = MetricsData::decode(payload)?;
    let mut out = Decoded::default();
    for rm in &data.resource_metrics {
        let resource = rm
            .resource
            .as_ref()
            .map(|r| r.attributes.as_slice())
            .unwrap_or_default();
        for metric in rm.scope_metrics.iter().flat_map(|s| &s.metrics) {
            let name = family_name(&metric.name);
            let help = metric.description.clone();
            let number = |p: &NumberDataPoint, kind: Kind, delta: bool, name: &str| {
                let value = match p.value {
                    Some(number_data_point::Value::AsDouble(v)) => v,
                    Some(number_data_point::Value::AsInt(v)) => v as f64,
                    None => return None,
                };
                Some((
                    (name.to_string(), labels(&p.attributes, resource)),
                    Sample {
                        kind,
                        help: help.clone(),
                        value: Value::Number(value),
                        delta,
                    },
                ))
            };
            match &metric.data {
                Some(Data::Gauge(g)) => out.points.extend(
                    g.data_points
                        .iter()
                        .filter_map(|p| number(p, Kind::Gauge, false, &name)),
                ),
                Some(Data::Sum(s)) => {
                    let delta = s.aggregation_temporality == AggregationTemporality::Delta as i32;
                    // Prometheus counters only rise; a sum that may fall is a gauge.
                    let (kind, name) = if s.is_monotonic {
                        (Kind::Counter, counter_name(&name))
                    } else {
                        (Kind::Gauge, name.clone())
                    };
                    out.points.extend(
                        s.data_points
                            .iter()
                            .filter_map(|p| number(p, kind, delta, &name)),
                    );
                }
                Some(Data::Histogram(h)) => {
                    let delta = h.aggregation_temporality == AggregationTemporality::Delta as i32;
                    for p in &h.data_points {
                        match histogram(p) {
                            Some(value) => out.points.push((
                                (name.clone(), labels(&p.attributes, resource)),
                                Sample {
                                    kind: Kind::Histogram,
                                    help: help.clone(),
                                    value,
                                    delta,
                                },
                            )),
                            None => out.skipped += 1,
                        }
                    }
                }
                Some(Data::ExponentialHistogram(h)) => out.skipped += h.data_points.len() as u64,
                Some(Data::Summary(s)) => out.skipped += s.data_points.len() as u64,
                None => {}
            }
        }
    }
    out.data = data;
    Ok(out)
}

/// Buckets as Prometheus wants them (cumulative, +Inf last); `None` when the point's
/// buckets and bounds disagree (OTLP: one more count than bounds).
fn histogram(p: &HistogramDataPoint) -> Option<Value> {
    if p.bucket_counts.is_empty() || p.bucket_counts.len() != p.explicit_bounds.len() + 1 {
        return None;
    }
    let mut cumulative = 0u64;
    let buckets = p
        .explicit_bounds
        .iter()
        .copied()
        .chain(std::iter::once(f64::INFINITY))
        .zip(&p.bucket_counts)
        .map(|(bound, n)| {
            cumulative = cumulative.saturating_add(*n);
            (bound, cumulative)
        })
        .collect();
    Some(Value::Histogram {
        buckets,
        count: p.count,
        sum: p.sum.unwrap_or(0.0),
    })
}

/// Adds a delta sample to the one before it (same series); anything else replaces it.
pub fn accumulate(before: Option<&Sample>, mut next: Sample) -> Sample {
    let Some(before) = before.filter(|b| next.delta && b.kind == next.kind) else {
        return next;
    };
    next.value = match (&before.value, next.value) {
        (Value::Number(a), Value::Number(b)) => Value::Number(a + b),
        (
            Value::Histogram {
                buckets: a,
                count: ca,
                sum: sa,
            },
            Value::Histogram {
                buckets: b,
                count: cb,
                sum: sb,
            },
        ) if a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.0 == y.0) => Value::Histogram {
            buckets: a.iter().zip(&b).map(|(x, y)| (x.0, x.1 + y.1)).collect(),
            count: ca + cb,
            sum: sa + sb,
        },
        (_, other) => other,
    };
    next
}

/// A Prometheus metric name for an OTLP one: Kafka's common prefix dropped, every character
/// outside `[a-zA-Z0-9_]` made `_`, and `strom_client_` in front.
pub fn family_name(otlp: &str) -> String {
    let short = otlp.strip_prefix(KAFKA_PREFIX).unwrap_or(otlp);
    let mut out = String::with_capacity(FAMILY_PREFIX.len() + short.len());
    out.push_str(FAMILY_PREFIX);
    out.extend(short.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
    out
}

fn counter_name(name: &str) -> String {
    if name.ends_with("_total") {
        name.to_string()
    } else {
        format!("{name}_total")
    }
}

/// A Prometheus label name: `[a-zA-Z_][a-zA-Z0-9_]*`, and never `__`-prefixed (reserved).
pub fn label_name(key: &str) -> String {
    let mut out: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) || out.starts_with("__") {
        out.insert_str(0, "otel_");
    }
    out
}

fn text(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        // Lists, maps and bytes have no one text form; Kafka clients send none.
        _ => String::new(),
    }
}

/// The point's attributes, then the resource's (a point's wins a name they share).
fn labels(point: &[KeyValue], resource: &[KeyValue]) -> Vec<(String, String)> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for kv in point.iter().chain(resource) {
        out.entry(label_name(&kv.key))
            .or_insert_with(|| text(&kv.value));
    }
    out.into_iter().collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::AnyValue;
    use opentelemetry_proto::tonic::metrics::v1::{
        Gauge, Histogram, Metric, ResourceMetrics, ScopeMetrics, Sum,
    };
    use opentelemetry_proto::tonic::resource::v1::Resource;

    pub fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(v.into())),
            }),
        }
    }

    pub fn point(v: f64, attrs: Vec<KeyValue>) -> NumberDataPoint {
        NumberDataPoint {
            attributes: attrs,
            value: Some(number_data_point::Value::AsDouble(v)),
            ..Default::default()
        }
    }

    pub fn payload(metrics: Vec<Metric>, resource: Vec<KeyValue>) -> Vec<u8> {
        MetricsData {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource {
                    attributes: resource,
                    ..Default::default()
                }),
                scope_metrics: vec![ScopeMetrics {
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
        .encode_to_vec()
    }

    pub fn gauge(name: &str, v: f64, attrs: Vec<KeyValue>) -> Metric {
        Metric {
            name: name.into(),
            description: "help".into(),
            data: Some(Data::Gauge(Gauge {
                data_points: vec![point(v, attrs)],
            })),
            ..Default::default()
        }
    }

    pub fn sum(name: &str, v: f64, temporality: AggregationTemporality) -> Metric {
        Metric {
            name: name.into(),
            data: Some(Data::Sum(Sum {
                data_points: vec![point(v, vec![])],
                aggregation_temporality: temporality as i32,
                is_monotonic: true,
            })),
            ..Default::default()
        }
    }

    #[test]
    fn given_kafka_metrics_when_decoded_then_prometheus_names_kinds_and_labels() {
        let hist = Metric {
            name: "org.apache.kafka.producer.node.request.latency".into(),
            data: Some(Data::Histogram(Histogram {
                data_points: vec![HistogramDataPoint {
                    bucket_counts: vec![1, 2, 3],
                    explicit_bounds: vec![10.0, 100.0],
                    count: 6,
                    sum: Some(123.0),
                    ..Default::default()
                }],
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
            })),
            ..Default::default()
        };
        let bytes = payload(
            vec![
                gauge(
                    "org.apache.kafka.producer.record.queue.time.avg",
                    1.5,
                    vec![kv("node.id", "0"), kv("client_rack", "point-wins")],
                ),
                sum(
                    "org.apache.kafka.producer.connection.creation.total",
                    3.0,
                    AggregationTemporality::Cumulative,
                ),
                hist,
            ],
            vec![kv("client_rack", "r1"), kv("__name__", "x")],
        );
        let d = decode(&bytes).unwrap();
        assert_eq!(d.skipped, 0);
        let (key, s) = &d.points[0];
        assert_eq!(key.0, "strom_client_producer_record_queue_time_avg");
        assert_eq!(
            key.1,
            [
                ("client_rack".to_string(), "point-wins".to_string()),
                ("node_id".to_string(), "0".to_string()),
                ("otel___name__".to_string(), "x".to_string()),
            ]
        );
        assert_eq!((s.kind, &s.value), (Kind::Gauge, &Value::Number(1.5)));
        assert_eq!(
            d.points[1].0 .0,
            "strom_client_producer_connection_creation_total"
        );
        assert_eq!(d.points[1].1.kind, Kind::Counter);
        assert_eq!(
            d.points[2].1.value,
            Value::Histogram {
                buckets: vec![(10.0, 1), (100.0, 3), (f64::INFINITY, 6)],
                count: 6,
                sum: 123.0
            }
        );
        assert!(decode(b"\xff\xff\xff").is_err());
    }

    #[test]
    fn given_delta_sums_when_accumulated_then_added_and_cumulative_replaced() {
        let d = |m| {
            decode(&payload(vec![m], vec![]))
                .unwrap()
                .points
                .remove(0)
                .1
        };
        let a = d(sum("c", 2.0, AggregationTemporality::Delta));
        let b = d(sum("c", 3.0, AggregationTemporality::Delta));
        assert_eq!(accumulate(Some(&a), b).value, Value::Number(5.0));
        let c = d(sum("c", 3.0, AggregationTemporality::Cumulative));
        assert_eq!(accumulate(Some(&a), c).value, Value::Number(3.0));
        assert_eq!(family_name("my.app-metric"), "strom_client_my_app_metric");
        assert_eq!(label_name("9x"), "otel_9x");
    }
}
