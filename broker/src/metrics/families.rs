//! Building Prometheus families from samples: what a scrape (`scrape`) and the client
//! telemetry receiver (`telemetry::exposition`) both render. A leaf: it knows nothing of
//! shards, so what it serves can be rendered from anywhere.

use std::collections::BTreeMap;

use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};

pub(crate) fn label(name: &str, value: &str) -> LabelPair {
    let mut l = LabelPair::default();
    l.set_name(name.to_string());
    l.set_value(value.to_string());
    l
}

pub(crate) fn labels(pairs: &[(&str, &str)]) -> Vec<LabelPair> {
    pairs.iter().map(|(n, v)| label(n, v)).collect()
}

/// Builds families of one type from (labels, value) samples.
pub(crate) struct Families(BTreeMap<String, MetricFamily>);

impl Families {
    pub(crate) fn new() -> Families {
        Families(BTreeMap::new())
    }

    pub(crate) fn into_vec(self) -> Vec<MetricFamily> {
        self.0.into_values().collect()
    }

    /// The family `name`, if it exists already (of whatever type).
    pub(crate) fn kind_of(&self, name: &str) -> Option<MetricType> {
        self.0.get(name).map(|f| f.get_field_type())
    }

    pub(crate) fn family(&mut self, name: &str, help: &str, kind: MetricType) -> &mut MetricFamily {
        self.0.entry(name.to_string()).or_insert_with(|| {
            let mut f = MetricFamily::default();
            f.set_name(name.to_string());
            f.set_help(help.to_string());
            f.set_field_type(kind);
            f
        })
    }

    pub(crate) fn gauge(&mut self, name: &str, help: &str, l: Vec<LabelPair>, v: f64) {
        let mut g = Gauge::default();
        g.set_value(v);
        let mut m = Metric::from_label(l);
        m.set_gauge(g);
        self.family(name, help, MetricType::GAUGE)
            .mut_metric()
            .push(m);
    }

    pub(crate) fn counter(&mut self, name: &str, help: &str, l: Vec<LabelPair>, v: f64) {
        let mut c = Counter::default();
        c.set_value(v);
        let mut m = Metric::from_label(l);
        m.set_counter(c);
        self.family(name, help, MetricType::COUNTER)
            .mut_metric()
            .push(m);
    }

    /// `scale` converts the storage unit (e.g. microseconds) to the exposed one (seconds).
    pub(crate) fn histogram(
        &mut self,
        name: &str,
        help: &str,
        l: Vec<LabelPair>,
        b: &storage::io::Buckets,
        scale: f64,
    ) {
        let mut cumulative = 0u64;
        let buckets: Vec<(f64, u64)> = b
            .bounds
            .iter()
            .zip(&b.counts)
            .map(|(bound, count)| {
                cumulative += count;
                (*bound as f64 * scale, cumulative)
            })
            .collect();
        self.histogram_cumulative(name, help, l, &buckets, b.count, b.sum as f64 * scale);
    }

    /// A histogram from (upper bound, cumulative count) buckets.
    pub(crate) fn histogram_cumulative(
        &mut self,
        name: &str,
        help: &str,
        l: Vec<LabelPair>,
        buckets: &[(f64, u64)],
        count: u64,
        sum: f64,
    ) {
        let mut h = Histogram::default();
        h.set_bucket(
            buckets
                .iter()
                .map(|(bound, n)| {
                    let mut bucket = Bucket::default();
                    bucket.set_upper_bound(*bound);
                    bucket.set_cumulative_count(*n);
                    bucket
                })
                .collect(),
        );
        h.set_sample_count(count);
        h.set_sample_sum(sum);
        let mut m = Metric::from_label(l);
        m.set_histogram(h);
        self.family(name, help, MetricType::HISTOGRAM)
            .mut_metric()
            .push(m);
    }
}
