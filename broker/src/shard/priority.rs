//! Priority lanes with adaptive backpressure (issue 20, docs/ai-features.md "Priority lanes").
//!
//! A topic's `strom.priority` puts its Produce and Fetch work in a lane (critical, high,
//! normal, low). Each shard keeps one `PriorityGate`, fed by the shard's own requests and read
//! only by its thread, so it costs a `RefCell` borrow and a few float operations per request,
//! and no cross-core state.
//!
//! **Saturated.** The gate keeps exponentially weighted moments of the shard's produce
//! latency (read of the request → answer ready, fdatasync included for acks=all) per lane
//! (`fast`, about the last 10 requests: what is happening now) and of each lane's
//! *uncontended* latency (`quiet`: its requests served while no lower lane was busy), and of
//! the produce request sizes. The shard is saturated when the top busy lane's fast latency exceeds the quiet mean
//! by more than β, or when its in-flight request bytes pass 3/4 of `queued.max.request.bytes`.
//! It stays saturated (hysteresis) until that latency is back under halfway from the quiet mean
//! to the threshold and a second has passed since it was last over: a gate that opened the
//! moment latency dipped let the flood refill the queue, and the top lane paid a spike per
//! cycle.
//! The requirements document's threshold is β(t) = α · σ_len(t) · √Var[δ(t)]: its product of
//! a length spread and a latency spread is not a time, so Strom uses the length spread
//! relative to the mean (the coefficient of variation, dimensionless) and widens the latency
//! spread by it: β = α · (1 + cv(sizes)) · σ(quiet latency), floored at max(1 ms, ¼ of the
//! quiet mean). When prompt lengths vary a lot, latency legitimately varies with them and the
//! threshold widens; with uniform requests it tightens.
//!
//! **Probes.** A baseline learned from whatever latency the shard sees would learn a flood
//! that was there from the start as normal (measured: it never throttled). So the baseline is
//! learned only from uncontended requests, and when lanes compete and no uncontended sample
//! is fresher than `REPROBE`, the gate probes, as BBR probes its minimum RTT: for `PROBE` it
//! throttles every lane below the top one, and the top lane's requests admitted after the
//! queue drained (`DRAIN`) are uncontended samples. A probe costs the lower lanes about 3% of
//! their time while lanes compete, and nothing otherwise.
//! `strom.priority.static.threshold.ms` replaces the adaptive threshold by a fixed latency
//! bound (the requirements document's static comparison; no probes).
//!
//! **What a saturated shard does.** Requests of a lane below the highest lane that sent work
//! in the last second are throttled: the answer carries `throttle_time_ms` and the connection
//! reads nothing more for that long (KIP-219, the quota path in `server::connection`), so the
//! socket buffer pushes back on the client and the disk is left to the higher lanes. The
//! throttle grows with the overload and with the distance to the top lane, capped at
//! `strom.priority.max.throttle.ms`: every lane keeps at least one request per that long, so
//! none starves. A broker where every topic is `normal` (the default) never throttles anyone.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use prometheus::{Gauge, IntCounter, IntCounterVec, Opts, Registry};

pub use crate::config::ai_flow::Lane;

/// Weights of the latency averages (≈ 1/requests remembered).
const FAST_WEIGHT: f64 = 0.1;
const QUIET_WEIGHT: f64 = 0.01;
/// Uncontended samples before the adaptive threshold is trusted.
const WARMUP: u64 = 10;
/// A lane counts as active this long after its last request.
const ACTIVE: Duration = Duration::from_secs(1);
/// In-flight bytes above this share of the shard's budget saturate it regardless of latency.
const INFLIGHT_SATURATED: f64 = 0.75;
/// A probe's length, the part of it spent draining what the lower lanes had in flight, and
/// how stale the uncontended baseline may get while lanes compete before the next probe.
const PROBE: Duration = Duration::from_millis(300);
const DRAIN: Duration = Duration::from_millis(100);
const REPROBE: Duration = Duration::from_secs(10);
/// Hysteresis: a saturated shard stays saturated until the top lane's latency is back below
/// the exit threshold (halfway from the uncontended mean to the entry threshold; ¾ of a
/// static one) and at least `HOLD` has passed since it was last over the entry threshold.
/// Without it the gate let the flood back in the moment latency dipped under the threshold,
/// the queue refilled, and the top lane paid a spike per cycle (the p99 of the first version).
const HOLD: Duration = Duration::from_secs(1);
/// A lower lane's throttle doubles with each of its requests while the shard is saturated and
/// halves every `RELEASE` once it is not. A throttle sized to the top lane's latency alone (a
/// few ms) did not slow the flood at all (measured: 0.97 of its unthrottled rate, with 3,500
/// throttled answers), because a producer with five 1 MB requests in flight refills the
/// socket faster than a few ms of muting drains it; the ramp reaches the cap within a few
/// requests, and the slow release lets the flood back in steps instead of all at once.
const RELEASE: Duration = Duration::from_millis(250);

/// Exponentially weighted mean and variance (West's incremental form).
#[derive(Debug, Default, Clone, Copy)]
struct Moments {
    mean: f64,
    var: f64,
    n: u64,
}

impl Moments {
    fn add(&mut self, x: f64, weight: f64) {
        if self.n == 0 {
            self.mean = x;
            self.var = 0.0;
        } else {
            let d = x - self.mean;
            self.mean += weight * d;
            self.var = (1.0 - weight) * (self.var + weight * d * d);
        }
        self.n += 1;
    }

    fn sd(&self) -> f64 {
        self.var.max(0.0).sqrt()
    }
}

/// The gate's settings (broker configs `strom.priority.*`).
#[derive(Debug, Clone, Copy)]
pub struct GateConfig {
    pub alpha: f64,
    /// `Some(ms)`: a fixed latency threshold instead of the adaptive one.
    pub static_threshold_ms: Option<f64>,
    pub max_throttle_ms: f64,
}

impl GateConfig {
    pub fn from_broker(c: &crate::config::BrokerConfig) -> GateConfig {
        GateConfig {
            alpha: c.priority_alpha,
            static_threshold_ms: (c.priority_static_threshold_ms >= 0)
                .then_some(c.priority_static_threshold_ms as f64),
            max_throttle_ms: c.priority_max_throttle_ms as f64,
        }
    }
}

#[derive(Debug, Default)]
struct Model {
    /// Recent produce latency per lane, and over all lanes.
    fast: [Moments; 4],
    fast_all: Moments,
    /// Per lane, latency of its requests no lower lane competed with, and when the last was.
    quiet: [Moments; 4],
    last_quiet: [Option<Instant>; 4],
    sizes: Moments,
    last_seen: [Option<Instant>; 4],
    /// The probe in progress: (start, end).
    probe: Option<(Instant, Instant)>,
    saturated: bool,
    /// When the top lane was last over the entry threshold (or in-flight bytes over theirs).
    last_over: Option<Instant>,
    /// Per lane, the throttle it is answered now, ms, and when that was last changed.
    penalty: [(f64, Option<Instant>); 4],
}

impl Model {
    /// `lane`'s throttle after one more of its requests (module constant `RELEASE`): doubled
    /// from at least `start` while saturated, else released by the time since its last change.
    /// Kept at most `cap`, so a release starts from the cap, not from above it.
    fn penalty(&mut self, lane: Lane, saturated: bool, start: f64, cap: f64, now: Instant) -> f64 {
        let (ms, at) = &mut self.penalty[lane.index()];
        if saturated {
            *ms = (*ms * 2.0).max(start).min(cap);
            *at = Some(now);
        } else if *ms > 0.0 {
            let since = at.map_or(RELEASE, |t| now.saturating_duration_since(t));
            let halvings = since.as_secs_f64() / RELEASE.as_secs_f64();
            *ms *= 0.5f64.powf(halvings);
            *at = Some(now);
            if *ms < 1.0 {
                *ms = 0.0;
            }
        }
        *ms
    }

    /// Latency of `lane` above which the shard is saturated, ms; `None` before a baseline
    /// exists.
    fn threshold_ms(&self, cfg: &GateConfig, lane: Lane) -> Option<f64> {
        if let Some(ms) = cfg.static_threshold_ms {
            return Some(ms);
        }
        let quiet = &self.quiet[lane.index()];
        if quiet.n < WARMUP {
            return None;
        }
        let cv = if self.sizes.mean > 0.0 {
            (self.sizes.sd() / self.sizes.mean).min(4.0)
        } else {
            0.0
        };
        let beta = cfg.alpha * (1.0 + cv) * quiet.sd();
        let floor = (quiet.mean / 4.0).max(1.0);
        Some(quiet.mean + beta.max(floor))
    }

    /// Latency of `lane` below which a saturated shard may leave saturation, ms (module
    /// constant `HOLD`).
    fn exit_ms(&self, cfg: &GateConfig, lane: Lane) -> Option<f64> {
        if let Some(ms) = cfg.static_threshold_ms {
            return Some(ms * 0.75);
        }
        let enter = self.threshold_ms(cfg, lane)?;
        let mean = self.quiet[lane.index()].mean;
        Some(mean + (enter - mean) / 2.0)
    }

    fn active(&self, lane: Lane, now: Instant) -> bool {
        self.last_seen[lane.index()].is_some_and(|t| now.saturating_duration_since(t) < ACTIVE)
    }

    fn top_active(&self, now: Instant) -> Option<Lane> {
        Lane::ALL.into_iter().rev().find(|l| self.active(*l, now))
    }

    /// Whether a lane below `lane` is busy.
    fn contended(&self, lane: Lane, now: Instant) -> bool {
        Lane::ALL[..lane.index()]
            .iter()
            .any(|l| self.active(*l, now))
    }

    /// The latency the top lane sees now (its own, or the shard's while it has no produce).
    fn current_ms(&self, top: Lane) -> f64 {
        let own = &self.fast[top.index()];
        if own.n > 0 {
            own.mean
        } else {
            self.fast_all.mean
        }
    }
}

/// What the gate says about one admitted request.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Admission {
    /// Throttle to answer, ms (0: none).
    pub throttle_ms: i64,
    /// No lower lane competes with it: its latency is an uncontended sample.
    pub quiet: bool,
}

struct GateMetrics {
    probes: IntCounter,
    threshold_ms: Gauge,
    latency_ms: Gauge,
    saturated: Gauge,
    /// Per lane (`Lane::index`), resolved once: no label lookup per request.
    requests: [IntCounter; 4],
    throttled: [IntCounter; 4],
    throttle_ms: [IntCounter; 4],
}

impl GateMetrics {
    fn new(r: &Registry) -> GateMetrics {
        let gauge = |name: &str, help: &str| {
            let g = Gauge::new(name, help).expect("valid metric");
            r.register(Box::new(g.clone())).expect("unique metric");
            g
        };
        let counter = |name: &str, help: &str| {
            let c = IntCounterVec::new(Opts::new(name, help), &["lane"]).expect("valid metric");
            r.register(Box::new(c.clone())).expect("unique metric");
            Lane::ALL.map(|l| c.with_label_values(&[l.name()]))
        };
        let probes = IntCounter::new(
            "strom_priority_probes_total",
            "Probes of the uncontended latency (lower lanes held back briefly while lanes compete).",
        )
        .expect("valid metric");
        r.register(Box::new(probes.clone())).expect("unique metric");
        GateMetrics {
            probes,
            threshold_ms: gauge(
                "strom_priority_threshold_ms",
                "Produce latency above which the shard counts as saturated (uncontended mean + β, or the static threshold), ms; 0 before a baseline exists.",
            ),
            latency_ms: gauge(
                "strom_priority_latency_ms",
                "The shard's recent produce latency (fast moving average), ms.",
            ),
            saturated: gauge(
                "strom_priority_saturated",
                "1 while the shard is saturated and slows its lower priority lanes.",
            ),
            requests: counter(
                "strom_priority_requests_total",
                "Produce and Fetch requests by priority lane (strom.priority).",
            ),
            throttled: counter(
                "strom_priority_throttled_total",
                "Requests answered with a priority throttle (the connection paused), by lane.",
            ),
            throttle_ms: counter(
                "strom_priority_throttle_ms_total",
                "Milliseconds of priority throttle answered, by lane.",
            ),
        }
    }
}

/// One shard's priority lanes (module overview).
pub struct PriorityGate {
    cfg: GateConfig,
    model: RefCell<Model>,
    metrics: GateMetrics,
}

impl PriorityGate {
    pub fn new(cfg: GateConfig, registry: &Registry) -> PriorityGate {
        PriorityGate {
            cfg,
            model: RefCell::default(),
            metrics: GateMetrics::new(registry),
        }
    }

    /// A produce of `lane` answered after `latency` for a request of `bytes`; `quiet` as its
    /// admission said.
    pub fn record_produce(&self, lane: Lane, latency: Duration, bytes: usize, quiet: bool) {
        let mut m = self.model.borrow_mut();
        let ms = latency.as_secs_f64() * 1000.0;
        m.fast[lane.index()].add(ms, FAST_WEIGHT);
        m.fast_all.add(ms, FAST_WEIGHT);
        // The first samples count fully, so a baseline starts near reality.
        let w = |n: u64| QUIET_WEIGHT.max(1.0 / (n + 1) as f64);
        let sw = w(m.sizes.n);
        m.sizes.add(bytes as f64, sw);
        if quiet {
            let q = &mut m.quiet[lane.index()];
            let qw = w(q.n);
            q.add(ms, qw);
            m.last_quiet[lane.index()] = Some(Instant::now());
        }
        let top = m.top_active(Instant::now()).unwrap_or(lane);
        let threshold = m.threshold_ms(&self.cfg, top);
        self.metrics.latency_ms.set(m.fast_all.mean);
        self.metrics.threshold_ms.set(threshold.unwrap_or(0.0));
    }

    /// Admits a Produce or Fetch request of `lane`. `inflight_used` is the share of the
    /// shard's in-flight byte budget taken (0..=1).
    pub fn admit(&self, lane: Lane, inflight_used: f64, now: Instant) -> Admission {
        self.metrics.requests[lane.index()].inc();
        let mut m = self.model.borrow_mut();
        m.last_seen[lane.index()] = Some(now);
        if m.probe.is_some_and(|(_, end)| now >= end) {
            m.probe = None;
        }
        let top = m.top_active(now).unwrap_or(lane);
        let competing = m.contended(top, now);
        let probing = m.probe;
        let quiet = !m.contended(lane, now)
            || probing.is_some_and(|(start, _)| lane == top && now >= start + DRAIN);
        let threshold = m.threshold_ms(&self.cfg, top);
        // Lanes compete and the top lane's uncontended baseline is missing or stale: probe.
        let stale =
            m.last_quiet[top.index()].is_none_or(|t| now.saturating_duration_since(t) > REPROBE);
        if competing && probing.is_none() && stale && self.cfg.static_threshold_ms.is_none() {
            m.probe = Some((now, now + PROBE));
            self.metrics.probes.inc();
        }
        let current = m.current_ms(top);
        let over_latency = threshold.map(|t| (current / t).max(0.0));
        let by_latency = over_latency.is_some_and(|p| p > 1.0);
        let by_bytes = inflight_used > INFLIGHT_SATURATED;
        let over = by_latency || by_bytes;
        if competing && over {
            m.last_over = Some(now);
        }
        let still_high = m.exit_ms(&self.cfg, top).is_some_and(|e| current >= e);
        let held = m
            .last_over
            .is_some_and(|t| now.saturating_duration_since(t) < HOLD);
        m.saturated = competing && (over || (m.saturated && (still_high || held)));
        self.metrics
            .saturated
            .set(if m.saturated { 1.0 } else { 0.0 });
        let ms = if lane >= top {
            0.0 // the top lane is never slowed: nothing above it to make room for
        } else if let Some((_, end)) = m.probe {
            end.saturating_duration_since(now).as_millis() as f64
        } else {
            let steps = (top.index() - lane.index()) as f64;
            let pressure = over_latency
                .unwrap_or(1.0)
                .max(inflight_used / INFLIGHT_SATURATED)
                .max(1.0);
            let saturated = m.saturated;
            let start = steps * current.max(1.0) * pressure;
            m.penalty(lane, saturated, start, self.cfg.max_throttle_ms, now)
        };
        drop(m);
        let ms = ms.min(self.cfg.max_throttle_ms).ceil() as i64;
        if ms > 0 {
            self.metrics.throttled[lane.index()].inc();
            self.metrics.throttle_ms[lane.index()].inc_by(ms as u64);
        }
        Admission {
            throttle_ms: ms,
            quiet,
        }
    }

    /// Whether the shard counts as saturated now (as of the last admission).
    pub fn saturated(&self) -> bool {
        self.model.borrow().saturated
    }

    /// The current threshold of `lane`, ms (`None` before a baseline exists).
    pub fn threshold_ms(&self, lane: Lane) -> Option<f64> {
        self.model.borrow().threshold_ms(&self.cfg, lane)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(static_ms: Option<f64>) -> PriorityGate {
        PriorityGate::new(
            GateConfig {
                alpha: 0.8,
                static_threshold_ms: static_ms,
                max_throttle_ms: 500.0,
            },
            &Registry::new(),
        )
    }

    /// `n` produces of `lane`, each admitted at `now` and answered after `ms`.
    fn feed(g: &PriorityGate, lane: Lane, n: usize, ms: f64, now: Instant) -> Vec<Admission> {
        (0..n)
            .map(|_| {
                let a = g.admit(lane, 0.0, now);
                g.record_produce(lane, Duration::from_secs_f64(ms / 1000.0), 1000, a.quiet);
                a
            })
            .collect()
    }

    #[test]
    fn given_one_lane_alone_when_admitting_then_quiet_and_never_throttled() {
        let g = gate(None);
        let now = Instant::now();
        let a = feed(&g, Lane::Critical, 50, 2.0, now);
        assert!(a.iter().all(|a| a.quiet && a.throttle_ms == 0));
        let t = g.threshold_ms(Lane::Critical).expect("baseline");
        assert!(
            (3.0..4.0).contains(&t),
            "floor of 1 ms above a 2 ms baseline: {t}"
        );
        // A flood of the default lane alone is never slowed (Kafka's behaviour).
        assert!(feed(&g, Lane::Normal, 50, 80.0, now)
            .iter()
            .all(|a| a.throttle_ms == 0));
    }

    #[test]
    fn given_a_flood_below_when_the_top_lane_slows_then_lower_lanes_throttled_more_the_lower() {
        let g = gate(None);
        let t0 = Instant::now();
        feed(&g, Lane::Critical, 50, 2.0, t0); // uncontended baseline ~2 ms
        let now = t0 + Duration::from_millis(10);
        feed(&g, Lane::Low, 5, 100.0, now);
        feed(&g, Lane::Normal, 5, 100.0, now);
        let crit = feed(&g, Lane::Critical, 30, 5.0, now);
        assert!(
            crit.iter().all(|a| a.throttle_ms == 0 && !a.quiet),
            "top lane"
        );
        let low = g.admit(Lane::Low, 0.0, now).throttle_ms;
        let normal = g.admit(Lane::Normal, 0.0, now).throttle_ms;
        assert!(low > normal && normal > 0, "low {low} normal {normal}");
        assert!(low <= 500, "capped: {low}");
    }

    #[test]
    fn given_a_flood_from_the_start_when_the_top_lane_arrives_then_a_probe_learns_its_baseline() {
        // The case a baseline over all traffic gets wrong: the flood was always there.
        let g = gate(None);
        let t0 = Instant::now();
        feed(&g, Lane::Low, 100, 100.0, t0);
        let first = g.admit(Lane::Critical, 0.0, t0);
        assert_eq!(first.throttle_ms, 0);
        // The probe holds the low lane back for its length.
        let held = g.admit(Lane::Low, 0.0, t0).throttle_ms;
        assert!(held > 0 && held <= PROBE.as_millis() as i64, "{held}");
        // After the drain, the critical lane's requests are uncontended samples.
        let later = t0 + DRAIN + Duration::from_millis(10);
        let probed = feed(&g, Lane::Critical, 20, 2.0, later);
        assert!(probed.iter().all(|a| a.quiet));
        let t = g
            .threshold_ms(Lane::Critical)
            .expect("baseline from the probe");
        assert!(t < 5.0, "{t}");
        // Probe over, flood back: critical slow again → the low lane is throttled.
        let after = t0 + PROBE + Duration::from_millis(10);
        feed(&g, Lane::Low, 5, 100.0, after);
        feed(&g, Lane::Critical, 30, 50.0, after);
        assert!(g.admit(Lane::Low, 0.0, after).throttle_ms > 0);
    }

    #[test]
    fn given_a_higher_lane_gone_quiet_when_admitting_then_the_lower_is_free_again() {
        let g = gate(Some(1.0));
        let then = Instant::now();
        feed(&g, Lane::Critical, 5, 50.0, then);
        assert!(g.admit(Lane::Low, 0.0, then).throttle_ms > 0);
        let later = then + ACTIVE + Duration::from_millis(1);
        assert_eq!(g.admit(Lane::Low, 0.0, later).throttle_ms, 0);
    }

    #[test]
    fn given_a_saturated_shard_when_latency_dips_under_the_threshold_then_held_until_below_exit() {
        let g = gate(Some(10.0)); // enter at 10 ms, exit under 7.5 ms
        let t0 = Instant::now();
        feed(&g, Lane::Low, 5, 100.0, t0);
        feed(&g, Lane::Critical, 30, 20.0, t0);
        assert!(g.admit(Lane::Low, 0.0, t0).throttle_ms > 0, "saturated");
        // Just under the entry threshold, within the hold: still throttled.
        let dip = t0 + Duration::from_millis(200);
        feed(&g, Lane::Critical, 40, 9.0, dip);
        feed(&g, Lane::Low, 1, 100.0, dip);
        g.admit(Lane::Low, 0.0, dip);
        assert!(g.saturated(), "held");
        // Past the hold but still above the exit threshold: still throttled.
        // (The dip's first requests still saw the old latency: the hold counts from them.)
        let later = dip + HOLD + Duration::from_millis(100);
        let between = dip + HOLD / 2; // both lanes stay active
        feed(&g, Lane::Critical, 1, 9.0, between);
        feed(&g, Lane::Low, 1, 100.0, between);
        feed(&g, Lane::Low, 1, 100.0, later);
        feed(&g, Lane::Critical, 40, 8.0, later);
        g.admit(Lane::Low, 0.0, later);
        assert!(g.saturated(), "above exit");
        // Below the exit threshold and past the hold: no longer saturated, and the throttle is
        // released step by step, not at once.
        feed(&g, Lane::Critical, 60, 3.0, later);
        let last = g.admit(Lane::Low, 0.0, later).throttle_ms;
        assert!(!g.saturated(), "released");
        let soon = later + RELEASE;
        feed(&g, Lane::Critical, 1, 3.0, soon);
        let halved = g.admit(Lane::Low, 0.0, soon).throttle_ms;
        assert!(
            halved > 0 && halved <= last / 2 + 1,
            "{halved} after {last}"
        );
        let gone = later + RELEASE * 12;
        feed(&g, Lane::Critical, 1, 3.0, gone);
        assert_eq!(g.admit(Lane::Low, 0.0, gone).throttle_ms, 0, "free again");
    }

    #[test]
    fn given_a_saturated_shard_when_a_lower_lane_keeps_sending_then_its_throttle_doubles_to_the_cap(
    ) {
        let g = gate(Some(10.0));
        let now = Instant::now();
        feed(&g, Lane::Low, 5, 100.0, now);
        feed(&g, Lane::Critical, 30, 20.0, now);
        let ramp: Vec<i64> = (0..12)
            .map(|_| g.admit(Lane::Low, 0.0, now).throttle_ms)
            .collect();
        assert!(ramp.windows(2).all(|w| w[1] >= w[0]), "{ramp:?}");
        assert!(ramp[1] >= 2 * ramp[0] - 1 || ramp[1] == 500, "{ramp:?}");
        assert_eq!(*ramp.last().unwrap(), 500, "capped: {ramp:?}");
    }

    #[test]
    fn given_full_inflight_bytes_when_latency_is_normal_then_saturated_all_the_same() {
        let g = gate(None);
        let now = Instant::now();
        feed(&g, Lane::High, 50, 2.0, now);
        g.admit(Lane::High, 0.9, now);
        let later = now + PROBE + Duration::from_millis(1);
        g.admit(Lane::Low, 0.9, later);
        g.admit(Lane::High, 0.9, later);
        assert!(g.admit(Lane::Low, 0.9, later).throttle_ms > 0);
    }

    #[test]
    fn given_varied_sizes_when_thresholding_then_beta_widens() {
        let uniform = gate(None);
        let varied = gate(None);
        for i in 0..400 {
            let ms = Duration::from_secs_f64((2.0 + (i % 5) as f64) / 1000.0);
            uniform.record_produce(Lane::Normal, ms, 1000, true);
            let bytes = if i % 2 == 0 { 100 } else { 10_000 };
            varied.record_produce(Lane::Normal, ms, bytes, true);
        }
        let u = uniform.threshold_ms(Lane::Normal).unwrap();
        let v = varied.threshold_ms(Lane::Normal).unwrap();
        assert!(v > u, "varied {v} uniform {u}");
    }
}
