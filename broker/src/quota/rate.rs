//! Kafka's `Rate` over a `SampledStat` (`org.apache.kafka.common.metrics.stats`), the measure
//! every client quota is checked against, and the throttle time of a violation
//! (`QuotaUtils.throttleTime`). Time is passed in, so this is tested without clocks.
//!
//! A rate is the sum of the windows of `window_ms` each that overlap the last
//! `samples * window_ms`, divided by the time they cover. A window ends when it is `window_ms`
//! old; the next record then starts a new one in the oldest slot. A window is reset before a
//! measure once its *last record* is `samples * window_ms` old, so one that began before the
//! monitored span but overlaps it still counts, which takes `samples + 1` slots (Kafka since
//! 3.8, KAFKA PR #15889 "Fix rate metric spikes"; before it a window went when its start was
//! that old). The covered time is from the oldest window's start to now, but never less than
//! `samples - 1` whole windows: so a first burst is spread over ~10 s (Kafka's defaults), not
//! measured over its own few milliseconds. A quota's burst is therefore remembered until its
//! last record is 11 s old (Kafka's defaults), not 11 s after its first.

/// `quota.window.num` and `quota.window.size.seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowConfig {
    pub samples: usize,
    pub window_ms: i64,
}

impl WindowConfig {
    pub fn new(samples: usize, window_seconds: u32) -> WindowConfig {
        WindowConfig {
            samples: samples.max(1),
            window_ms: i64::from(window_seconds.max(1)) * 1000,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    value: f64,
    start_ms: i64,
    last_event_ms: i64,
}

impl Sample {
    fn fresh(now_ms: i64) -> Sample {
        Sample {
            value: 0.0,
            start_ms: now_ms,
            last_event_ms: now_ms,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Rate {
    samples: Vec<Sample>,
    current: usize,
}

impl Rate {
    /// Adds `value` at `now_ms` (Kafka's `SampledStat.record`).
    pub fn record(&mut self, cfg: WindowConfig, value: f64, now_ms: i64) {
        if self.samples.is_empty() {
            self.samples.push(Sample::fresh(now_ms));
            self.current = 0;
        }
        if now_ms - self.samples[self.current].start_ms >= cfg.window_ms {
            // One slot more than `samples`: the window that began before the monitored span
            // but overlaps it is still counted.
            self.current = (self.current + 1) % (cfg.samples + 1);
            if self.current >= self.samples.len() {
                self.samples.push(Sample::fresh(now_ms));
                self.current = self.samples.len() - 1;
            } else {
                self.samples[self.current] = Sample::fresh(now_ms);
            }
        }
        let s = &mut self.samples[self.current];
        s.value += value;
        s.last_event_ms = now_ms;
    }

    /// Resets the windows with no record in the monitored span (`purgeObsoleteSamples`).
    fn purge(&mut self, cfg: WindowConfig, now_ms: i64) {
        let expire = cfg.samples as i64 * cfg.window_ms;
        for s in &mut self.samples {
            if now_ms - s.last_event_ms >= expire {
                *s = Sample::fresh(now_ms);
            }
        }
    }

    /// The time the windows cover, in ms, at least 1 (`Rate.windowSize`).
    pub fn window_size_ms(&mut self, cfg: WindowConfig, now_ms: i64) -> i64 {
        self.purge(cfg, now_ms);
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        let mut elapsed = now_ms - oldest;
        let full = elapsed / cfg.window_ms;
        let min_full = cfg.samples as i64 - 1;
        if full < min_full {
            elapsed += (min_full - full) * cfg.window_ms;
        }
        elapsed.max(1)
    }

    /// Units per second over the windows (`Rate.measure`).
    pub fn measure(&mut self, cfg: WindowConfig, now_ms: i64) -> f64 {
        let window = self.window_size_ms(cfg, now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (window as f64 / 1000.0)
    }

    /// True once every window has expired: the sensor may go.
    pub fn idle(&self, cfg: WindowConfig, now_ms: i64) -> bool {
        let expire = cfg.samples as i64 * cfg.window_ms;
        self.samples
            .iter()
            .all(|s| now_ms - s.last_event_ms >= expire)
    }
}

/// Kafka's `TokenBucket`, what the controller mutation quota measures: credits refill at the
/// quota's rate up to a burst of `samples × window` seconds' worth; a mutation takes its
/// partitions' worth and may leave the bucket negative once.
#[derive(Debug, Clone, Default)]
pub struct TokenBucket {
    tokens: f64,
    last_ms: Option<i64>,
}

impl TokenBucket {
    fn refill(&mut self, cfg: WindowConfig, rate: f64, now_ms: i64) -> f64 {
        let burst = rate * cfg.samples as f64 * (cfg.window_ms as f64 / 1000.0);
        self.tokens = match self.last_ms {
            None => burst,
            Some(last) => {
                (self.tokens + rate * ((now_ms - last).max(0) as f64 / 1000.0)).min(burst)
            }
        };
        self.last_ms = Some(now_ms);
        burst
    }

    /// The credits left now (negative: over the quota).
    pub fn measure(&mut self, cfg: WindowConfig, rate: f64, now_ms: i64) -> f64 {
        self.refill(cfg, rate, now_ms);
        self.tokens
    }

    pub fn record(&mut self, cfg: WindowConfig, rate: f64, value: f64, now_ms: i64) {
        let burst = self.refill(cfg, rate, now_ms);
        self.tokens = (self.tokens - value).min(burst);
    }
}

/// The time until a negative bucket is back at zero (`ControllerMutationQuotaManager`).
pub fn bucket_throttle_ms(tokens: f64, rate: f64) -> i64 {
    if tokens >= 0.0 || rate <= 0.0 {
        return 0;
    }
    (-tokens / rate * 1000.0).round() as i64
}

/// How long a client over its quota is held back so that its rate falls to the bound
/// (`QuotaUtils.throttleTime`): the excess as a share of the bound, times the window the
/// rate was measured over.
pub fn throttle_time_ms(value: f64, bound: f64, window_ms: i64) -> i64 {
    if bound <= 0.0 || value <= bound {
        return 0;
    }
    ((value - bound) / bound * window_ms as f64).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: WindowConfig = WindowConfig {
        samples: 11,
        window_ms: 1000,
    };

    #[test]
    fn given_a_first_record_when_measured_then_spread_over_samples_minus_one_windows() {
        let mut r = Rate::default();
        r.record(CFG, 10_000.0, 0);
        assert_eq!(r.window_size_ms(CFG, 0), 10_000);
        assert_eq!(r.measure(CFG, 0), 1000.0);
        // 500 ms later: the floor plus the time since the window began (Kafka's formula).
        assert_eq!(r.window_size_ms(CFG, 500), 10_500);
    }

    #[test]
    fn given_steady_records_when_windows_fill_then_rate_is_the_true_rate() {
        let mut r = Rate::default();
        // 100 units every 100 ms = 1000/s, for 30 s.
        for t in (0..30_000).step_by(100) {
            r.record(CFG, 100.0, t);
        }
        let m = r.measure(CFG, 30_000);
        assert!((m - 1000.0).abs() < 50.0, "{m}");
        assert!(r.window_size_ms(CFG, 30_000) >= 10_000);
        assert!(r.window_size_ms(CFG, 30_000) <= 11_000);
    }

    #[test]
    fn given_old_windows_when_they_expire_then_forgotten() {
        let mut r = Rate::default();
        r.record(CFG, 1e6, 0);
        assert!(r.measure(CFG, 1000) > 0.0);
        assert!(!r.idle(CFG, 10_999));
        assert!(r.idle(CFG, 11_000));
        assert_eq!(r.measure(CFG, 11_000), 0.0);
    }

    #[test]
    fn given_windows_rolled_when_recording_then_slots_are_reused_not_grown() {
        let mut r = Rate::default();
        for t in (0..100_000).step_by(1000) {
            r.record(CFG, 1.0, t);
        }
        assert_eq!(r.samples.len(), CFG.samples + 1);
    }

    #[test]
    fn given_a_burst_window_then_kept_until_its_last_record_leaves_the_span() {
        // A new client's burst at 0 ms, the last of its requests at 900 ms (they are recorded
        // even when throttled), nothing after.
        let mut r = Rate::default();
        r.record(CFG, 100e6, 0);
        r.record(CFG, 1e6, 900);
        // 11 s after the window began it still counts, as in Kafka: its last record is only
        // 10.1 s old. The burst is paid off until 11.9 s, not 11.0 s.
        assert!(r.measure(CFG, 11_500) > 8e6, "{}", r.measure(CFG, 11_500));
        assert!(!r.idle(CFG, 11_899));
        assert!(r.idle(CFG, 11_900));
        assert_eq!(r.measure(CFG, 11_900), 0.0);
    }

    #[test]
    fn given_steady_records_when_a_window_overlaps_the_span_then_no_spike() {
        // Kafka's RateTest.testRateIsConsistentAfterTheFirstWindow: 2 windows of 1 s, an
        // event every ~100 ms, a 101 ms gap between the windows; from the second window on
        // the rate stays within 10..=11 per second and a repeated measure gives the same.
        let cfg = WindowConfig {
            samples: 2,
            window_ms: 1000,
        };
        let steps = [0, 99, 100, 100, 100, 100, 100, 100, 100, 100, 100];
        let mut r = Rate::default();
        let mut now = 0;
        for step in steps {
            now += step;
            r.record(cfg, 1.0, now);
        }
        now += 101;
        for step in steps {
            now += step;
            r.record(cfg, 1.0, now);
            let m = r.measure(cfg, now);
            assert!((10.0..=11.0).contains(&m), "rate {m} at {now} ms");
            assert_eq!(r.measure(cfg, now), m);
        }
    }

    #[test]
    fn given_a_token_bucket_when_drained_then_negative_once_and_refills_at_the_rate() {
        let mut b = TokenBucket::default();
        // 2 partitions/s over 11 windows of 1 s: a burst of 22.
        assert_eq!(b.measure(CFG, 2.0, 0), 22.0);
        b.record(CFG, 2.0, 30.0, 0);
        assert_eq!(b.measure(CFG, 2.0, 0), -8.0);
        assert_eq!(bucket_throttle_ms(-8.0, 2.0), 4000);
        // 4 s later it is back at 0; it never refills past the burst.
        assert_eq!(b.measure(CFG, 2.0, 4000), 0.0);
        assert_eq!(b.measure(CFG, 2.0, 1_000_000), 22.0);
    }

    #[test]
    fn given_excess_when_throttling_then_kafkas_formula() {
        // 2000/s against 1000/s over a 10 s window: hold back 10 s, so the average halves.
        assert_eq!(throttle_time_ms(2000.0, 1000.0, 10_000), 10_000);
        assert_eq!(throttle_time_ms(1100.0, 1000.0, 10_000), 1000);
        assert_eq!(throttle_time_ms(1000.0, 1000.0, 10_000), 0);
        assert_eq!(throttle_time_ms(10.0, 0.0, 10_000), 0);
    }
}
