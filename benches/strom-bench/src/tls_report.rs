//! `strom-bench report --tls`: what TLS costs each broker (issue 18). benches/tls.sh runs the
//! same workloads twice against one broker process, on its PLAINTEXT listener (run `B`) and
//! on its SSL listener (run `B+tls`); each such pair becomes rows here: throughput and
//! latency side by side, and the broker's CPU seconds per GB on each listener, whose
//! difference is what TLS costs that broker per GB moved.

use crate::{BrokerRun, Row};

/// The suffix benches/tls.sh gives the TLS run of a broker.
pub const TLS_SUFFIX: &str = "+tls";

/// Each broker `B` whose run `B+tls` is among `runs`, with that run, in the order given.
fn pairs(runs: &[BrokerRun]) -> Vec<(&BrokerRun, &BrokerRun)> {
    runs.iter()
        .filter(|b| !b.broker.ends_with(TLS_SUFFIX))
        .filter_map(|b| {
            let tls = format!("{}{TLS_SUFFIX}", b.broker);
            runs.iter().find(|r| r.broker == tls).map(|t| (b, t))
        })
        .collect()
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map(|v| format!("{v:.digits$}"))
        .unwrap_or_else(|| "–".into())
}

fn div(x: Option<f64>, y: Option<f64>) -> Option<f64> {
    match (x, y) {
        (Some(x), Some(y)) if x > 0.0 && y > 0.0 => Some(x / y),
        _ => None,
    }
}

/// CPU seconds and GB of the rows `pick` selects: the rows' own CPU/GB weighted by what each
/// moved, so a long workload counts for what it moved.
fn cost(rows: &[Row], pick: &dyn Fn(&str) -> bool) -> Option<f64> {
    let (mut cpu, mut gb) = (0.0, 0.0);
    for r in rows.iter().filter(|r| pick(&r.workload)) {
        if let (Some(c), Some(per)) = (r.cpu_s, r.cpu_s_per_gb) {
            cpu += c;
            gb += c / per;
        }
    }
    (gb > 0.0).then_some(cpu / gb)
}

/// The geometric mean of TLS MB/s over plaintext MB/s across the workloads `pick` selects.
fn throughput_ratio(plain: &[Row], tls: &[Row], pick: &dyn Fn(&str) -> bool) -> Option<f64> {
    let logs: Vec<f64> = plain
        .iter()
        .filter(|r| pick(&r.workload))
        .filter_map(|p| {
            let t = tls.iter().find(|t| t.workload == p.workload)?;
            div(t.mb_per_s, p.mb_per_s).map(f64::ln)
        })
        .collect();
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

fn figure(r: &Row) -> String {
    let mut s = match (r.p50_ms, r.mb_per_s) {
        (Some(p50), _) => format!("{p50:.2} / {} / {}", num(r.p99_ms, 2), num(r.p999_ms, 2)),
        (None, Some(mb)) => format!("{mb:.1}"),
        _ => "–".into(),
    };
    if !r.note.is_empty() {
        s += &format!(" [{}]", r.note.replace('|', "/"));
    }
    s
}

fn ratio(p: &Row, t: &Row) -> String {
    let f = |x, y| num(div(x, y), 2);
    if p.p50_ms.is_some() {
        format!(
            "{} / {} / {}",
            f(t.p50_ms, p.p50_ms),
            f(t.p99_ms, p.p99_ms),
            f(t.p999_ms, p.p999_ms)
        )
    } else {
        f(t.mb_per_s, p.mb_per_s)
    }
}

fn is_produce(w: &str) -> bool {
    w.starts_with("produce")
}

fn is_consume(w: &str) -> bool {
    w.starts_with("consume")
}

pub fn report(runs: &[BrokerRun]) -> String {
    let pairs = pairs(runs);
    let mut out = String::new();
    if let Some((b, _)) = pairs.first() {
        out += &format!("Run of {} on {}.\n\n", b.date, b.machine);
    } else {
        return format!("No TLS pairs: give runs named B and B{TLS_SUFFIX}.\n");
    }
    out += "| workload | broker | plaintext | TLS | TLS / plaintext | CPU s/GB plaintext | \
            CPU s/GB TLS | CPU s/GB added by TLS |\n|---|---|---|---|---|---|---|---|\n";
    let workloads: Vec<&str> = pairs[0]
        .0
        .rows
        .iter()
        .map(|r| r.workload.as_str())
        .collect();
    for w in workloads {
        for (p, t) in &pairs {
            let (Some(pr), Some(tr)) = (
                p.rows.iter().find(|r| r.workload == w),
                t.rows.iter().find(|r| r.workload == w),
            ) else {
                continue;
            };
            let added = match (pr.cpu_s_per_gb, tr.cpu_s_per_gb) {
                (Some(a), Some(b)) => format!("{:+.2}", b - a),
                _ => "–".into(),
            };
            out += &format!(
                "| {w} | {} | {} | {} | {} | {} | {} | {added} |\n",
                p.broker,
                figure(pr),
                figure(tr),
                ratio(pr, tr),
                num(pr.cpu_s_per_gb, 2),
                num(tr.cpu_s_per_gb, 2),
            );
        }
    }
    out += "\nThroughput rows: MB/s acknowledged (produce) or read (consume). Latency rows: p50 / \
            p99 / p99.9 in ms from the intended send time. TLS / plaintext: above 1 for \
            throughput or below 1 for latency means TLS did better. CPU s/GB: the broker \
            process's user+system CPU seconds per GB moved (/proc), on each listener.\n\n";
    out += "What TLS costs each broker, over all produce workloads and over the consume workload \
            (CPU s/GB weighted by the bytes each workload moved; throughput: the geometric mean \
            of TLS / plaintext MB/s):\n\n| broker | path | CPU s/GB plaintext | CPU s/GB TLS | \
            added by TLS | TLS / plaintext CPU | TLS / plaintext MB/s |\n\
            |---|---|---|---|---|---|---|\n";
    for (p, t) in &pairs {
        for (path, pick) in [
            ("produce", &is_produce as &dyn Fn(&str) -> bool),
            ("consume", &is_consume),
        ] {
            let (a, b) = (cost(&p.rows, pick), cost(&t.rows, pick));
            let added = match (a, b) {
                (Some(a), Some(b)) => format!("{:+.2}", b - a),
                _ => "–".into(),
            };
            out += &format!(
                "| {} | {path} | {} | {} | {added} | {} | {} |\n",
                p.broker,
                num(a, 2),
                num(b, 2),
                num(div(b, a), 2),
                num(throughput_ratio(&p.rows, &t.rows, pick), 2),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(broker: &str, rows: Vec<Row>) -> BrokerRun {
        BrokerRun {
            broker: broker.into(),
            bootstrap: String::new(),
            date: "2026-12-07".into(),
            machine: "m".into(),
            rows,
        }
    }

    fn tput(w: &str, mb: f64, cpu_s: f64, gb: f64) -> Row {
        Row {
            workload: w.into(),
            mb_per_s: Some(mb),
            msgs_per_s: Some(mb * 1000.0),
            cpu_s: Some(cpu_s),
            cpu_s_per_gb: Some(cpu_s / gb),
            ..Default::default()
        }
    }

    #[test]
    fn given_plaintext_and_tls_runs_when_reported_then_paired_with_the_cpu_tls_adds() {
        let runs = [
            run(
                "strom",
                vec![
                    tput("produce 1 KiB acks=1 1 part / 1 prod", 400.0, 1.0, 1.0),
                    tput("produce 16 KiB acks=1 1 part / 1 prod", 800.0, 1.0, 3.0),
                    tput("consume 1 KiB, 4 part", 800.0, 1.0, 2.0),
                ],
            ),
            run(
                "strom+tls",
                vec![
                    tput("produce 1 KiB acks=1 1 part / 1 prod", 200.0, 2.0, 1.0),
                    tput("produce 16 KiB acks=1 1 part / 1 prod", 200.0, 2.0, 1.0),
                    tput("consume 1 KiB, 4 part", 400.0, 2.0, 2.0),
                ],
            ),
            run("kafka", vec![]),
        ];
        let t = report(&runs);
        assert!(
            t.contains("| produce 1 KiB acks=1 1 part / 1 prod | strom | 400.0 | 200.0 | 0.50 | 1.00 | 2.00 | +1.00 |"),
            "{t}"
        );
        // Produce: 2 CPU s over 4 GB plaintext, 4 CPU s over 2 GB with TLS; MB/s ratios
        // 0.5 and 0.25, geometric mean 0.35.
        assert!(
            t.contains("| strom | produce | 0.50 | 2.00 | +1.50 | 4.00 | 0.35 |"),
            "{t}"
        );
        assert!(
            t.contains("| strom | consume | 0.50 | 1.00 | +0.50 | 2.00 | 0.50 |"),
            "{t}"
        );
        // A broker without its +tls run is left out.
        assert!(!t.contains("| kafka |"), "{t}");
    }

    #[test]
    fn given_no_tls_run_when_reported_then_says_so() {
        assert!(report(&[run("strom", vec![])]).starts_with("No TLS pairs"));
    }
}
