//! Priority lanes with adaptive backpressure (issue 20, docs/ai-features.md "Priority lanes").
//!
//! A topic's `strom.priority` puts its Produce and Fetch work in a lane (critical, high,
//! normal, low). Each shard keeps one `PriorityGate`, fed by the shard's own requests and read
//! only by its thread, so it costs a `RefCell` borrow and a few float operations per request,
//! and no cross-core state.
//!
//! **Saturated.** The gate keeps exponentially weighted moments of the shard's produce
//! latency (read of the request → answer ready, fdatasync included for acks=all) at two time
//! scales — `fast` (about the last 10 requests: what is happening now) and `base` (about the
//! last 1000: what is normal here) — and of the produce request sizes. The shard is saturated
//! when the fast mean exceeds the baseline by more than β, or when its in-flight request bytes
//! pass 3/4 of `queued.max.request.bytes`. The requirements document's threshold is
//! β(t) = α · σ_len(t) · √Var[δ(t)]: its product of a length spread and a latency spread is
//! not a time, so Strom uses the length spread relative to the mean (the coefficient of
//! variation, dimensionless) and widens the latency spread by it:
//! β = α · (1 + cv(sizes)) · σ(latency), floored at max(1 ms, ¼ of the baseline mean). When
//! prompt lengths vary a lot, latency legitimately varies with them and the threshold widens;
//! with uniform requests it tightens. While saturated, the baseline learns 20× slower, so a
//! flood cannot declare itself normal within seconds. `strom.priority.static.threshold.ms`
//! replaces β by a fixed latency bound (the requirements document's static comparison).
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

use prometheus::{Gauge, IntCounterVec, Opts, Registry};

pub use crate::config::ai_flow::Lane;

/// Weights of the two latency averages (≈ 1/requests remembered).
const FAST_WEIGHT: f64 = 0.1;
const BASE_WEIGHT: f64 = 0.001;
/// How much slower the baseline learns while the shard is saturated.
const SATURATED_SLOWDOWN: f64 = 20.0;
/// Produce requests seen before the adaptive threshold is trusted.
const WARMUP: u64 = 50;
/// A lane counts as active this long after its last request.
const ACTIVE: Duration = Duration::from_secs(1);
/// In-flight bytes above this share of the shard's budget saturate it regardless of latency.
const INFLIGHT_SATURATED: f64 = 0.75;

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
    fast: Moments,
    base: Moments,
    sizes: Moments,
    last_seen: [Option<Instant>; 4],
    saturated: bool,
}

impl Model {
    /// Latency above which the shard is saturated, ms; `None` while still warming up.
    fn threshold_ms(&self, cfg: &GateConfig) -> Option<f64> {
        if let Some(ms) = cfg.static_threshold_ms {
            return Some(ms);
        }
        if self.base.n < WARMUP {
            return None;
        }
        let cv = if self.sizes.mean > 0.0 {
            (self.sizes.sd() / self.sizes.mean).min(4.0)
        } else {
            0.0
        };
        let beta = cfg.alpha * (1.0 + cv) * self.base.sd();
        let floor = (self.base.mean / 4.0).max(1.0);
        Some(self.base.mean + beta.max(floor))
    }

    fn top_active(&self, now: Instant) -> Option<Lane> {
        Lane::ALL.into_iter().rev().find(|l| {
            self.last_seen[l.index()].is_some_and(|t| now.saturating_duration_since(t) < ACTIVE)
        })
    }
}

struct GateMetrics {
    threshold_ms: Gauge,
    latency_ms: Gauge,
    saturated: Gauge,
    requests: IntCounterVec,
    throttled: IntCounterVec,
    throttle_ms: IntCounterVec,
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
            c
        };
        GateMetrics {
            threshold_ms: gauge(
                "strom_priority_threshold_ms",
                "Produce latency above which the shard counts as saturated (adaptive β or the static threshold), ms; 0 while warming up.",
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

    /// A produce answered after `latency` for a request of `bytes`.
    pub fn record_produce(&self, latency: Duration, bytes: usize) {
        let mut m = self.model.borrow_mut();
        let ms = latency.as_secs_f64() * 1000.0;
        m.fast.add(ms, FAST_WEIGHT);
        // The first requests set the baseline at full weight, so it starts near reality.
        let w = if m.saturated {
            BASE_WEIGHT / SATURATED_SLOWDOWN
        } else {
            BASE_WEIGHT.max(1.0 / (m.base.n + 1) as f64)
        };
        m.base.add(ms, w);
        m.sizes.add(bytes as f64, w);
        let threshold = m.threshold_ms(&self.cfg);
        self.metrics.latency_ms.set(m.fast.mean);
        self.metrics.threshold_ms.set(threshold.unwrap_or(0.0));
    }

    /// Admits a Produce or Fetch request of `lane` and answers its throttle, ms (0: none).
    /// `inflight_used` is the share of the shard's in-flight byte budget taken (0..=1).
    pub fn admit(&self, lane: Lane, inflight_used: f64, now: Instant) -> i64 {
        self.metrics
            .requests
            .with_label_values(&[lane.name()])
            .inc();
        let mut m = self.model.borrow_mut();
        m.last_seen[lane.index()] = Some(now);
        let threshold = m.threshold_ms(&self.cfg);
        let over_latency = threshold.map(|t| (m.fast.mean / t).max(0.0));
        let by_latency = over_latency.is_some_and(|p| p > 1.0);
        let by_bytes = inflight_used > INFLIGHT_SATURATED;
        m.saturated = by_latency || by_bytes;
        self.metrics
            .saturated
            .set(if m.saturated { 1.0 } else { 0.0 });
        if !m.saturated {
            return 0;
        }
        let Some(top) = m.top_active(now).filter(|top| *top > lane) else {
            return 0; // the top lane is never slowed: nothing above it to make room for
        };
        let steps = (top.index() - lane.index()) as f64;
        let pressure = over_latency
            .unwrap_or(1.0)
            .max(inflight_used / INFLIGHT_SATURATED)
            .max(1.0);
        let ms = (steps * m.fast.mean.max(1.0) * pressure)
            .min(self.cfg.max_throttle_ms)
            .ceil() as i64;
        drop(m);
        self.metrics
            .throttled
            .with_label_values(&[lane.name()])
            .inc();
        self.metrics
            .throttle_ms
            .with_label_values(&[lane.name()])
            .inc_by(ms as u64);
        ms
    }

    /// The current threshold, ms (`None` while warming up).
    pub fn threshold_ms(&self) -> Option<f64> {
        self.model.borrow().threshold_ms(&self.cfg)
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

    fn feed(g: &PriorityGate, n: usize, ms: f64, bytes: usize) {
        for _ in 0..n {
            g.record_produce(Duration::from_secs_f64(ms / 1000.0), bytes);
        }
    }

    #[test]
    fn given_steady_latency_when_admitting_then_no_lane_is_throttled() {
        let g = gate(None);
        feed(&g, 200, 2.0, 1000);
        let now = Instant::now();
        assert_eq!(g.admit(Lane::Critical, 0.0, now), 0);
        assert_eq!(g.admit(Lane::Low, 0.0, now), 0);
        let t = g.threshold_ms().expect("warmed up");
        assert!(
            (3.0..4.0).contains(&t),
            "floor of 1 ms above a 2 ms baseline: {t}"
        );
    }

    #[test]
    fn given_a_latency_spike_when_admitting_then_lower_lanes_slow_and_the_top_does_not() {
        let g = gate(None);
        feed(&g, 200, 2.0, 1000);
        feed(&g, 30, 40.0, 1000);
        let now = Instant::now();
        assert_eq!(g.admit(Lane::Critical, 0.0, now), 0, "top lane");
        let low = g.admit(Lane::Low, 0.0, now);
        let normal = g.admit(Lane::Normal, 0.0, now);
        assert!(low > normal && normal > 0, "low {low} normal {normal}");
        assert!(low <= 500, "capped: {low}");
    }

    #[test]
    fn given_only_one_lane_active_when_saturated_then_it_is_not_throttled() {
        // Every topic at the default lane: saturation changes nothing (Kafka's behaviour).
        let g = gate(Some(1.0));
        feed(&g, 20, 50.0, 1000);
        assert_eq!(g.admit(Lane::Normal, 0.0, Instant::now()), 0);
    }

    #[test]
    fn given_a_higher_lane_gone_quiet_when_admitting_then_the_lower_is_free_again() {
        let g = gate(Some(1.0));
        feed(&g, 20, 50.0, 1000);
        let then = Instant::now();
        g.admit(Lane::Critical, 0.0, then);
        assert!(g.admit(Lane::Low, 0.0, then) > 0);
        let later = then + ACTIVE + Duration::from_millis(1);
        assert_eq!(g.admit(Lane::Low, 0.0, later), 0);
    }

    #[test]
    fn given_full_inflight_bytes_when_latency_is_normal_then_saturated_all_the_same() {
        let g = gate(None);
        feed(&g, 200, 2.0, 1000);
        let now = Instant::now();
        g.admit(Lane::High, 0.9, now);
        assert!(g.admit(Lane::Low, 0.9, now) > 0);
    }

    #[test]
    fn given_varied_sizes_when_thresholding_then_beta_widens() {
        let uniform = gate(None);
        let varied = gate(None);
        for i in 0..400 {
            let ms = 2.0 + (i % 5) as f64; // the same latency spread for both
            uniform.record_produce(Duration::from_secs_f64(ms / 1000.0), 1000);
            let bytes = if i % 2 == 0 { 100 } else { 10_000 };
            varied.record_produce(Duration::from_secs_f64(ms / 1000.0), bytes);
        }
        let (u, v) = (
            uniform.threshold_ms().unwrap(),
            varied.threshold_ms().unwrap(),
        );
        assert!(v > u, "varied {v} uniform {u}");
    }

    #[test]
    fn given_a_long_flood_when_saturated_then_the_baseline_learns_slowly() {
        let g = gate(None);
        feed(&g, 200, 2.0, 1000);
        let before = g.threshold_ms().unwrap();
        for _ in 0..500 {
            g.record_produce(Duration::from_millis(40), 1000);
            g.admit(Lane::Low, 0.0, Instant::now());
        }
        let after = g.threshold_ms().unwrap();
        // 500 requests at full weight would have moved the baseline most of the way to 40 ms.
        assert!(after < 20.0, "before {before} after {after}");
    }
}
