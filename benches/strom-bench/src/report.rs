//! The markdown tables of `strom-bench report`: workloads side by side (with ratios to the
//! first broker on request), the brokers' cost, the machine's limits, and the failover
//! times benches/quick/failover.py measures on clusters.

use serde::{Deserialize, Serialize};

use crate::{BrokerRun, LimitsRun, Row};

/// The workloads table (one column per broker, in the order given; with `ratios` one more
/// per broker after the first: the first's figure over that one's), the brokers' cost and,
/// with the limits, the machine's limits and each broker's best figures as a share of them.
pub fn report(brokers: &[BrokerRun], lims: Option<&LimitsRun>, ratios: bool) -> String {
    let mut out = String::new();
    let first = brokers.first();
    if let Some(b) = first {
        out += &format!("Run of {} on {}.\n\n", b.date, b.machine);
    }
    let others = if ratios && brokers.len() > 1 {
        &brokers[1..]
    } else {
        &[]
    };
    out += "| workload |";
    for b in brokers {
        out += &format!(" {} |", b.broker);
    }
    for o in others {
        out += &format!(" {} / {} |", brokers[0].broker, o.broker);
    }
    out += "\n|---|";
    for _ in brokers.iter().chain(others) {
        out += "---|";
    }
    out += "\n";
    let workloads: Vec<&str> = first
        .map(|b| b.rows.iter().map(|r| r.workload.as_str()).collect())
        .unwrap_or_default();
    for w in workloads {
        out += &format!("| {w} |");
        for b in brokers {
            let cell = b
                .rows
                .iter()
                .find(|r| r.workload == w)
                .map(cell)
                .unwrap_or_default();
            out += &format!(" {cell} |");
        }
        for o in others {
            let first = brokers[0].rows.iter().find(|r| r.workload == w);
            let r = match (first, o.rows.iter().find(|r| r.workload == w)) {
                (Some(a), Some(b)) => ratio(a, b),
                _ => "–".into(),
            };
            out += &format!(" {r} |");
        }
        out += "\n";
    }
    out += "\nThroughput cells: MB/s (messages/s). Latency cells: p50 / p99 / p99.9 / max in ms, \
            from the intended send time (coordinated-omission corrected).\n";
    if !others.is_empty() {
        out += &format!(
            "Ratio cells: {first}'s figure over the other broker's; throughput: MB/s (above 1: \
             {first} moves more), latency: p50 / p99 / p99.9 (below 1: {first} is quicker); \
             `*`: one of the two figures carries a note (failures, records short).\n",
            first = brokers[0].broker,
        );
    }
    out += "\n";
    out += "Broker cost over the whole suite (CPU seconds per GB produced or consumed; peak \
            resident memory: all of it, and the anonymous part, without the file pages a broker \
            that reads through mmap has mapped):\n\n| broker | CPU s / GB | peak RSS MB | peak anon RSS MB |\n|---|---|---|---|\n";
    for b in brokers {
        let (mut cpu, mut gb, mut rss) = (0.0, 0.0, 0.0f64);
        let anon = b
            .rows
            .iter()
            .filter_map(|r| r.rss_anon_mb)
            .fold(0.0f64, f64::max);
        for r in &b.rows {
            if let (Some(c), Some(per)) = (r.cpu_s, r.cpu_s_per_gb) {
                cpu += c;
                gb += c / per;
            }
            rss = rss.max(r.rss_mb.unwrap_or(0.0));
        }
        let per = if gb > 0.0 {
            format!("{:.1}", cpu / gb)
        } else {
            "–".into()
        };
        let rss = if rss > 0.0 {
            format!("{rss:.0}")
        } else {
            "–".into()
        };
        let anon = if anon > 0.0 {
            format!("{anon:.0}")
        } else {
            "–".into()
        };
        out += &format!("| {} | {per} | {rss} | {anon} |\n", b.broker);
    }
    if let Some(l) = lims {
        out += "\nMachine limits, same run:\n\n| limit | MB/s | ops/s |\n|---|---|---|\n";
        for x in &l.limits {
            let ops = x
                .ops_per_s
                .map(|o| format!("{o:.0}"))
                .unwrap_or_else(|| "–".into());
            out += &format!("| {} | {:.0} | {ops} |\n", x.name, x.mb_per_s);
        }
        out += &shares(brokers, l);
    }
    out
}

/// Each broker's best figures as a share of the limit that bounds them: produce and consume
/// against one loopback TCP stream (every byte crosses it), acks=all produce against the
/// fdatasync write rate at 1 MiB per sync (a durable broker's ceiling on this disk when
/// group commit gathers ~1 MiB per sync).
fn shares(brokers: &[BrokerRun], l: &LimitsRun) -> String {
    let limit = |prefix: &str| {
        l.limits
            .iter()
            .find(|x| x.name.starts_with(prefix))
            .map(|x| x.mb_per_s)
    };
    let (Some(tcp), Some(sync)) = (limit("loopback"), limit("fdatasync write, 1 MiB")) else {
        return String::new();
    };
    // None when the run has no such workload (cluster.sh runs acks=all only): "–", not 0%.
    let best = |b: &BrokerRun, f: &dyn Fn(&str) -> bool| {
        b.rows
            .iter()
            .filter(|r| f(&r.workload))
            .filter_map(|r| r.mb_per_s)
            .reduce(f64::max)
    };
    let mut out = format!(
        "\nBest figures as a share of the machine's limits (loopback {tcp:.0} MB/s, fdatasync \
         at 1 MiB per sync {sync:.0} MB/s):\n\n| broker | produce acks=1 / loopback | \
         produce acks=all / loopback | produce acks=all / fdatasync 1 MiB | consume / loopback |\n\
         |---|---|---|---|---|\n"
    );
    for b in brokers {
        let p1 = best(b, &|w| w.starts_with("produce") && w.contains("acks=1 "));
        let pall = best(b, &|w| w.starts_with("produce") && w.contains("acks=all"));
        let cons = best(b, &|w| w.starts_with("consume"));
        let pct = |v: Option<f64>, lim: f64| {
            v.map(|v| format!("{:.0}% ({v:.0} MB/s)", 100.0 * v / lim))
                .unwrap_or_else(|| "–".into())
        };
        out += &format!(
            "| {} | {} | {} | {} | {} |\n",
            b.broker,
            pct(p1, tcp),
            pct(pall, tcp),
            pct(pall, sync),
            pct(cons, tcp)
        );
    }
    out
}

fn cell(r: &Row) -> String {
    let mut s = match (r.p50_ms, r.mb_per_s, r.msgs_per_s) {
        (Some(p50), _, _) => format!(
            "{p50:.2} / {:.2} / {:.2} / {:.2}",
            r.p99_ms.unwrap_or(0.0),
            r.p999_ms.unwrap_or(0.0),
            r.max_ms.unwrap_or(0.0)
        ),
        (None, Some(mb), Some(m)) => format!("{mb:.1} ({m:.0}/s)"),
        _ => String::new(),
    };
    if !r.note.is_empty() {
        s += &format!(" [{}]", r.note.replace('|', "/"));
    }
    s
}

/// The first broker's figure over another's for one workload: MB/s for throughput rows,
/// p50 / p99 / p99.9 for latency rows; "–" where either lacks the figure.
fn ratio(a: &Row, b: &Row) -> String {
    let div = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if y > 0.0 && x > 0.0 => format!("{:.2}", x / y),
        _ => "–".into(),
    };
    let mut s = if a.p50_ms.is_some() || b.p50_ms.is_some() {
        format!(
            "{} / {} / {}",
            div(a.p50_ms, b.p50_ms),
            div(a.p99_ms, b.p99_ms),
            div(a.p999_ms, b.p999_ms)
        )
    } else {
        div(a.mb_per_s, b.mb_per_s)
    };
    if !a.note.is_empty() || !b.note.is_empty() {
        s += " *";
    }
    s
}

/// benches/quick/failover.py's output: one entry per broker measured.
#[derive(Debug, Serialize, Deserialize)]
pub struct FailoverFile {
    pub date: String,
    pub failover: Vec<Failover>,
}

/// Kill -9 cycles on one cluster: each cycle's time from the kill of a partition leader to
/// the first acknowledged write on every partition it led, in seconds.
#[derive(Debug, Serialize, Deserialize)]
pub struct Failover {
    pub broker: String,
    pub partitions: u32,
    pub seconds: Vec<f64>,
    /// Errors the producer's delivery reports carried (none expected: idempotent, acks=all).
    #[serde(default)]
    pub producer_errors: u64,
    #[serde(default)]
    pub note: String,
}

pub fn failover(runs: &[Failover]) -> String {
    if runs.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nFailover: kill -9 of a partition leader under an idempotent acks=all producer, to the \
         first acknowledged write on every partition it led (seconds; the 3 s session of both \
         brokers included, which runs from the last heartbeat, up to 0.5 s before the kill):\n\n| broker | cycles | min | median | max | every cycle |\n\
         |---|---|---|---|---|---|\n",
    );
    for f in runs {
        let mut s = f.seconds.clone();
        s.sort_by(f64::total_cmp);
        let fmt = |v: Option<&f64>| v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "–".into());
        let median = match s.len() {
            0 => None,
            n if n % 2 == 1 => Some(s[n / 2]),
            n => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
        };
        let all: Vec<String> = f.seconds.iter().map(|v| format!("{v:.2}")).collect();
        let mut note = f.note.clone();
        if f.producer_errors > 0 {
            note += &format!(" {} producer errors", f.producer_errors);
        }
        let note = if note.trim().is_empty() {
            String::new()
        } else {
            format!(" [{}]", note.trim().replace('|', "/"))
        };
        out += &format!(
            "| {} | {} | {} | {} | {} | {}{note} |\n",
            f.broker,
            s.len(),
            fmt(s.first()),
            fmt(median.as_ref()),
            fmt(s.last()),
            all.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throughput(mb: f64, note: &str) -> Row {
        Row {
            mb_per_s: Some(mb),
            msgs_per_s: Some(mb * 1000.0),
            note: note.into(),
            ..Default::default()
        }
    }

    #[test]
    fn given_throughput_rows_when_compared_then_first_over_other_marked_when_noted() {
        assert_eq!(
            ratio(&throughput(300.0, ""), &throughput(200.0, "")),
            "1.50"
        );
        assert_eq!(ratio(&throughput(300.0, ""), &throughput(0.0, "")), "–");
        assert_eq!(
            ratio(
                &throughput(100.0, "5 not delivered"),
                &throughput(200.0, "")
            ),
            "0.50 *"
        );
    }

    #[test]
    fn given_latency_rows_when_compared_then_p50_p99_p999_ratios() {
        let lat = |p50, p99, p999| Row {
            p50_ms: Some(p50),
            p99_ms: Some(p99),
            p999_ms: Some(p999),
            ..Default::default()
        };
        assert_eq!(
            ratio(&lat(1.0, 2.0, 4.0), &lat(2.0, 8.0, 4.0)),
            "0.50 / 0.25 / 1.00"
        );
    }

    #[test]
    fn given_cycles_when_reporting_failover_then_min_median_max_in_seconds() {
        let f = |seconds: Vec<f64>| Failover {
            broker: "b".into(),
            partitions: 3,
            seconds,
            producer_errors: 0,
            note: String::new(),
        };
        let t = failover(&[f(vec![5.0, 3.0, 4.0, 9.0])]);
        assert!(
            t.contains("| b | 4 | 3.00 | 4.50 | 9.00 | 5.00, 3.00, 4.00, 9.00 |"),
            "{t}"
        );
        let t = failover(&[f(vec![])]);
        assert!(t.contains("| b | 0 | – | – | – |  |"), "{t}");
    }
}
