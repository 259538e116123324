//! `strom connect status`: each connector's progress, read from the connectors' admin port
//! (`/metrics` of `strom connect` or of `strom serve` with `[[connectors]]`), the same figures
//! the console's connectors page shows.

use std::collections::BTreeMap;

use serde::Serialize;

use super::error::CliError;
use super::output::{Format, Render, Table};

#[derive(clap::Args)]
pub struct StatusArgs {
    /// The connectors' admin address (`connectors_admin_listen`).
    #[arg(long, env = "STROM_CONNECT_ADMIN", default_value = "127.0.0.1:9645")]
    pub admin: String,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Default, Clone, Serialize, PartialEq)]
pub struct ConnectorStatus {
    pub connector: String,
    pub records_written: u64,
    pub batches_written: u64,
    pub dlq_records: u64,
    pub errors: BTreeMap<String, u64>,
    /// Sum over the connector's partitions.
    pub lag: i64,
}

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Statuses(pub Vec<ConnectorStatus>);

impl Render for Statuses {
    fn table(&self, t: &mut Table) {
        t.header(&[
            "CONNECTOR",
            "RECORDS-WRITTEN",
            "BATCHES",
            "DLQ-RECORDS",
            "ERRORS",
            "LAG",
        ]);
        for c in &self.0 {
            t.row([
                c.connector.clone(),
                c.records_written.to_string(),
                c.batches_written.to_string(),
                c.dlq_records.to_string(),
                c.errors.values().sum::<u64>().to_string(),
                c.lag.to_string(),
            ]);
        }
    }
}

/// The connectors' figures from Prometheus text (what `strom_connectors::Metrics` renders).
pub fn from_metrics(text: &str) -> Vec<ConnectorStatus> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let Ok(scrape) = prometheus_parse::Scrape::parse(lines) else {
        return Vec::new();
    };
    let mut by: BTreeMap<String, ConnectorStatus> = BTreeMap::new();
    for s in scrape.samples {
        let Some(name) = s.labels.get("connector") else {
            continue;
        };
        let v = match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => continue,
        };
        let c = by
            .entry(name.to_string())
            .or_insert_with(|| ConnectorStatus {
                connector: name.to_string(),
                ..ConnectorStatus::default()
            });
        match s.metric.as_str() {
            "strom_connector_records_written_total" => c.records_written = v as u64,
            "strom_connector_batches_written_total" => c.batches_written = v as u64,
            "strom_connector_dlq_records_total" => c.dlq_records = v as u64,
            "strom_connector_errors_total" => {
                let kind = s.labels.get("kind").unwrap_or("other").to_string();
                *c.errors.entry(kind).or_default() += v as u64;
            }
            "strom_connector_consumer_lag" => c.lag += v as i64,
            _ => {}
        }
    }
    by.into_values().collect()
}

pub async fn status(args: StatusArgs) -> Result<(), CliError> {
    let url = if args.admin.starts_with("http") {
        format!("{}/metrics", args.admin.trim_end_matches('/'))
    } else {
        format!("http://{}/metrics", args.admin)
    };
    let unreachable = |e: reqwest::Error| CliError::Unreachable {
        addr: url.clone(),
        reason: e.to_string(),
    };
    let text = reqwest::Client::new()
        .get(&url)
        .timeout(std::time::Duration::from_secs(10))
        .send()
        .await
        .map_err(unreachable)?
        .error_for_status()
        .map_err(unreachable)?
        .text()
        .await
        .map_err(unreachable)?;
    super::output::print(&Statuses(from_metrics(&text)), args.format)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_connector_metrics_when_read_then_figures_per_connector() {
        let m = strom_connectors::Metrics::new();
        m.records_written.with_label_values(&["docs"]).inc_by(40);
        m.batches_written.with_label_values(&["docs"]).inc_by(2);
        m.dlq_records.with_label_values(&["docs"]).inc_by(3);
        m.errors.with_label_values(&["docs", "record"]).inc_by(3);
        m.consumer_lag.with_label_values(&["docs", "t", "0"]).set(5);
        m.consumer_lag.with_label_values(&["docs", "t", "1"]).set(7);
        m.records_written.with_label_values(&["other"]).inc();
        let text = String::from_utf8(m.render()).unwrap();
        let got = from_metrics(&text);
        assert_eq!(got.len(), 2);
        let docs = &got[0];
        assert_eq!(
            (
                docs.connector.as_str(),
                docs.records_written,
                docs.batches_written,
                docs.dlq_records,
                docs.lag
            ),
            ("docs", 40, 2, 3, 12)
        );
        assert_eq!(docs.errors.get("record"), Some(&3));
        assert_eq!(got[1].records_written, 1);
        assert!(
            from_metrics("garbage{").is_empty()
                || from_metrics("garbage{")
                    .iter()
                    .all(|c| c.records_written == 0)
        );
    }
}
