//! SVG charts of a run, written next to the JSON: throughput per workload and latency
//! percentiles per workload, one bar per broker. Plain SVG text (no plotting library: the
//! charts are grouped bars, and a dependency tree for them would outweigh the tool).

use std::fmt::Write as _;
use std::path::Path;

use crate::{BrokerRun, LimitsRun, Row};

/// Bar colours per broker, in run order (colour-blind-safe Okabe–Ito palette).
const COLOURS: [&str; 6] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
];
const LABEL_W: f64 = 300.0;
const PLOT_W: f64 = 520.0;
const BAR_H: f64 = 11.0;
const GROUP_GAP: f64 = 8.0;

/// One group of bars: a label and one value per broker (None: not measured / failed).
struct Group {
    label: String,
    values: Vec<Option<f64>>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Horizontal grouped bars. `log`: a log10 axis (latencies span 4 decades); `limit`: a
/// dashed reference line (a machine limit) with its label.
fn chart(
    title: &str,
    unit: &str,
    brokers: &[String],
    groups: &[Group],
    log: bool,
    limit: Option<(f64, &str)>,
) -> String {
    let n = brokers.len().max(1) as f64;
    let group_h = n * BAR_H + GROUP_GAP;
    let top = 50.0 + 16.0 * ((brokers.len() as f64 / 4.0).ceil());
    let height = top + groups.len() as f64 * group_h + 40.0;
    let width = LABEL_W + PLOT_W + 90.0;
    let mut max = groups
        .iter()
        .flat_map(|g| g.values.iter().flatten())
        .fold(0.0f64, |a, &b| a.max(b));
    if let Some((l, _)) = limit {
        max = max.max(l);
    }
    let max = if max > 0.0 { max } else { 1.0 };
    let (lo, hi) = if log {
        let min = groups
            .iter()
            .flat_map(|g| g.values.iter().flatten())
            .filter(|v| **v > 0.0)
            .fold(max, |a, &b| a.min(b));
        (
            min.log10().floor(),
            max.log10().ceil().max(min.log10().floor() + 1.0),
        )
    } else {
        (0.0, max * 1.05)
    };
    let x = |v: f64| -> f64 {
        let f = if log {
            (v.max(10f64.powf(lo)).log10() - lo) / (hi - lo)
        } else {
            v / hi
        };
        LABEL_W + f.clamp(0.0, 1.0) * PLOT_W
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">{}</text>"#,
        esc(title)
    );
    for (i, b) in brokers.iter().enumerate() {
        let (lx, ly) = (10.0 + (i % 4) as f64 * 170.0, 38.0 + (i / 4) as f64 * 16.0);
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{}" width="12" height="10" fill="{}"/><text x="{}" y="{ly}">{}</text>"#,
            ly - 9.0,
            COLOURS[i % COLOURS.len()],
            lx + 16.0,
            esc(b)
        );
    }
    // Axis ticks: decades on a log axis, fifths on a linear one.
    let ticks: Vec<f64> = if log {
        (lo as i32..=hi as i32).map(|e| 10f64.powi(e)).collect()
    } else {
        (0..=5).map(|i| hi * i as f64 / 5.0).collect()
    };
    let bottom = top + groups.len() as f64 * group_h;
    for t in ticks {
        let tx = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{tx}" y1="{top}" x2="{tx}" y2="{bottom}" stroke="#ddd"/><text x="{tx}" y="{}" text-anchor="middle">{}</text>"##,
            bottom + 14.0,
            fmt_num(t)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LABEL_W + PLOT_W / 2.0,
        bottom + 30.0,
        esc(unit)
    );
    for (gi, g) in groups.iter().enumerate() {
        let gy = top + gi as f64 * group_h;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            LABEL_W - 6.0,
            gy + n * BAR_H / 2.0 + 4.0,
            esc(&g.label)
        );
        for (bi, v) in g.values.iter().enumerate() {
            let by = gy + bi as f64 * BAR_H;
            match v {
                Some(v) => {
                    let _ = writeln!(
                        s,
                        r#"<rect x="{LABEL_W}" y="{by}" width="{:.1}" height="{}" fill="{}"/><text x="{:.1}" y="{}" font-size="9">{}</text>"#,
                        x(*v) - LABEL_W,
                        BAR_H - 1.0,
                        COLOURS[bi % COLOURS.len()],
                        x(*v) + 3.0,
                        by + BAR_H - 2.0,
                        fmt_num(*v)
                    );
                }
                None => {
                    let _ = writeln!(
                        s,
                        r##"<text x="{}" y="{}" font-size="9" fill="#999">n/a</text>"##,
                        LABEL_W + 3.0,
                        by + BAR_H - 2.0
                    );
                }
            }
        }
    }
    if let Some((l, label)) = limit {
        let lx = x(l);
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{top}" x2="{lx}" y2="{bottom}" stroke="black" stroke-dasharray="4 3"/><text x="{lx}" y="{}" text-anchor="end" font-size="9">{}</text>"#,
            top - 3.0,
            esc(label)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn row<'a>(b: &'a BrokerRun, workload: &str) -> Option<&'a Row> {
    b.rows.iter().find(|r| r.workload == workload)
}

/// Writes throughput.svg and latency.svg into `dir`.
pub fn write(dir: &Path, brokers: &[BrokerRun], lims: Option<&LimitsRun>) -> anyhow::Result<()> {
    let names: Vec<String> = brokers.iter().map(|b| b.broker.clone()).collect();
    let workloads: Vec<String> = brokers
        .first()
        .map(|b| b.rows.iter().map(|r| r.workload.clone()).collect())
        .unwrap_or_default();
    let value = |b: &BrokerRun, w: &str, f: fn(&Row) -> Option<f64>| row(b, w).and_then(f);
    let throughput: Vec<Group> = workloads
        .iter()
        .filter(|w| w.starts_with("produce") || w.starts_with("consume"))
        .map(|w| Group {
            label: w.clone(),
            values: brokers
                .iter()
                .map(|b| value(b, w, |r| r.mb_per_s))
                .collect(),
        })
        .collect();
    let loopback = lims.and_then(|l| {
        l.limits
            .iter()
            .find(|x| x.name.starts_with("loopback"))
            .map(|x| (x.mb_per_s, "loopback TCP limit"))
    });
    let date = brokers.first().map(|b| b.date.as_str()).unwrap_or("");
    std::fs::write(
        dir.join("throughput.svg"),
        chart(
            &format!("Throughput per broker ({date})"),
            "MB/s (10^6 bytes of record values per second)",
            &names,
            &throughput,
            false,
            loopback,
        ),
    )?;
    let mut latency = Vec::new();
    for w in workloads
        .iter()
        .filter(|w| w.starts_with("e2e") || w.starts_with("embeddings"))
    {
        for (p, f) in [
            ("p50", (|r: &Row| r.p50_ms) as fn(&Row) -> Option<f64>),
            ("p99", |r: &Row| r.p99_ms),
            ("p99.9", |r: &Row| r.p999_ms),
        ] {
            latency.push(Group {
                label: format!("{w} {p}"),
                values: brokers.iter().map(|b| value(b, w, f)).collect(),
            });
        }
    }
    std::fs::write(
        dir.join("latency.svg"),
        chart(
            &format!("End-to-end latency percentiles per broker ({date})"),
            "ms, log scale (from the intended send time: coordinated-omission corrected)",
            &names,
            &latency,
            true,
            None,
        ),
    )?;
    Ok(())
}
