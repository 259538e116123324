//! Client quota enforcement, as Kafka's `ClientQuotaManager` / `ClientRequestQuotaManager` do
//! it, per node: one `QuotaManager` in `BrokerContext`, shared by every shard's thread.
//!
//! **Which quota.** The quotas themselves live in `metadata::quotas` (Describe/Alter
//! ClientQuotas). For a request of principal `user` with `client.id` `client`, Kafka's
//! `DefaultQuotaCallback` walks the 8 levels below, most specific first, for the quota type
//! (produce, fetch, request) — `precedence::resolve`:
//! 1. `user=U, client-id=C`    2. `user=U, client-id=<default>`    3. `user=U`
//! 4. `user=<default>, client-id=C`    5. `user=<default>, client-id=<default>`
//! 6. `user=<default>`    7. `client-id=C`    8. `client-id=<default>`
//!
//! The level found says which clients share one rate (the sensor's tags): a `user=U` quota is
//! one budget for all of U's clients, a `client-id=<default>` quota one budget per client id.
//!
//! **Measure and throttle.** Each sensor is a `rate::Rate` over `quota.window.num` windows of
//! `quota.window.size.seconds`. A request is recorded first (Kafka appends an over-quota
//! produce, then throttles); when the rate is then over the bound, the throttle time is
//! `(rate - bound) / bound * window` (`rate::throttle_time_ms`). The handler answers it in
//! `throttle_time_ms`, and the connection stops reading the client's next request for that
//! long (KIP-219: answer at once, then mute; `server::connection`).
//!
//! Controller mutations (`controller_mutation_rate`: partitions created or deleted per
//! second) are measured with Kafka's token bucket instead (`rate::TokenBucket`): a
//! CreateTopics, CreatePartitions or DeleteTopics of a new version is refused per topic with
//! THROTTLING_QUOTA_EXCEEDED once the bucket is empty (`record_mutation`).
//!
//! **Threads.** Sensors sit behind one mutex: a lookup and a few float adds per Produce or
//! Fetch, far below the cost of the request, and only when a quota applies to the client —
//! without any quota configured the handlers return after one relaxed atomic load.

pub mod busy;
pub mod precedence;
pub mod rate;
pub mod replication;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::metadata::quotas::{QuotaStore, Quotas};
pub use rate::WindowConfig;

/// The quota kinds Kafka meters per client (`connection_creation_rate` per IP is not
/// enforced).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuotaKind {
    Produce,
    Fetch,
    Request,
    /// Partitions created or deleted (CreateTopics, CreatePartitions, DeleteTopics).
    ControllerMutation,
}

impl QuotaKind {
    pub fn key(self) -> &'static str {
        use crate::metadata::quotas as q;
        match self {
            QuotaKind::Produce => q::PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => q::CONSUMER_BYTE_RATE,
            QuotaKind::Request => q::REQUEST_PERCENTAGE,
            QuotaKind::ControllerMutation => q::CONTROLLER_MUTATION_RATE,
        }
    }

    /// Kafka's metric group name for the kind.
    pub fn name(self) -> &'static str {
        match self {
            QuotaKind::Produce => "produce",
            QuotaKind::Fetch => "fetch",
            QuotaKind::Request => "request",
            QuotaKind::ControllerMutation => "controller_mutation",
        }
    }
}

/// The clients that share one rate: Kafka's metric tags (`""` = not part of the key).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SensorKey {
    pub kind: QuotaKind,
    pub user: String,
    pub client_id: String,
}

#[derive(Debug, Default)]
struct Sensor {
    rate: rate::Rate,
    /// Controller mutations only: Kafka measures them with a token bucket.
    bucket: rate::TokenBucket,
    bound: f64,
    throttle_ms_total: u64,
    throttled: u64,
    last_ms: i64,
}

/// What `/metrics` shows of one sensor.
#[derive(Debug, Clone)]
pub struct SensorView {
    pub key: SensorKey,
    pub rate: f64,
    pub bound: f64,
    pub throttle_ms_total: u64,
    pub throttled: u64,
}

/// At most this many sensors are shown in `/metrics`; the others are summed into one series
/// with `user="__other__"`. Sensors exist only for clients under a quota and go after their
/// windows expire, but a `client-id=<default>` quota makes one per client id: the cap keeps a
/// client-id churn from flooding the scrape.
pub const MAX_METRIC_SENSORS: usize = 200;

/// Kafka's `InactiveSensorExpirationTimeSeconds`.
const SENSOR_EXPIRY_MS: i64 = 3_600_000;

pub struct QuotaManager {
    store: Arc<QuotaStore>,
    cfg: WindowConfig,
    sensors: Mutex<HashMap<SensorKey, Sensor>>,
}

impl QuotaManager {
    pub fn new(store: Arc<QuotaStore>, cfg: WindowConfig) -> QuotaManager {
        QuotaManager {
            store,
            cfg,
            sensors: Mutex::new(HashMap::new()),
        }
    }

    pub fn store(&self) -> &Arc<QuotaStore> {
        &self.store
    }

    pub fn window(&self) -> WindowConfig {
        self.cfg
    }

    /// False when no quota is set at all: callers skip looking the client up.
    pub fn enabled(&self) -> bool {
        !self.store.is_empty()
    }

    fn resolve(
        &self,
        quotas: &Quotas,
        kind: QuotaKind,
        user: &str,
        client: &str,
    ) -> Option<(SensorKey, f64)> {
        if quotas.is_empty() {
            return None;
        }
        let (user_tag, client_tag, bound) = precedence::resolve(quotas, kind.key(), user, client)?;
        Some((
            SensorKey {
                kind,
                user: user_tag,
                client_id: client_tag,
            },
            bound,
        ))
    }

    /// The quota bound that applies to the client, if any.
    pub fn bound(&self, kind: QuotaKind, user: &str, client: &str) -> Option<f64> {
        self.resolve(&self.store.snapshot(), kind, user, client)
            .map(|(_, b)| b)
    }

    /// Records `value` for the client and answers the throttle time in ms (0: within quota).
    /// Kafka's `maybeRecordAndGetThrottleTimeMs`.
    pub fn record(
        &self,
        kind: QuotaKind,
        user: &str,
        client: &str,
        value: f64,
        now_ms: i64,
    ) -> i64 {
        let Some((key, bound)) = self.resolve(&self.store.snapshot(), kind, user, client) else {
            return 0;
        };
        let cfg = self.cfg;
        let mut sensors = self.sensors.lock().unwrap_or_else(|e| e.into_inner());
        let s = sensors.entry(key).or_default();
        s.bound = bound;
        s.last_ms = now_ms;
        s.rate.record(cfg, value, now_ms);
        let measured = s.rate.measure(cfg, now_ms);
        if measured <= bound {
            return 0;
        }
        let window = s.rate.window_size_ms(cfg, now_ms);
        let mut throttle = rate::throttle_time_ms(measured, bound, window);
        if kind == QuotaKind::Request {
            // `ClientRequestQuotaManager` bounds its throttle at one window.
            throttle = throttle.min(cfg.window_ms);
        }
        s.throttle_ms_total += throttle.max(0) as u64;
        s.throttled += 1;
        throttle
    }

    /// Records `partitions` mutations (Kafka's `ControllerMutationQuota.record`). Strict
    /// (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): refused with the throttle
    /// time when the bucket is already empty, else taken even if that empties it. Permissive
    /// (older versions): always taken; the throttle time, if it emptied the bucket.
    pub fn record_mutation(
        &self,
        user: &str,
        client: &str,
        partitions: f64,
        strict: bool,
        now_ms: i64,
    ) -> Result<i64, i64> {
        let kind = QuotaKind::ControllerMutation;
        let Some((key, bound)) = self.resolve(&self.store.snapshot(), kind, user, client) else {
            return Ok(0);
        };
        let cfg = self.cfg;
        let mut sensors = self.sensors.lock().unwrap_or_else(|e| e.into_inner());
        let s = sensors.entry(key).or_default();
        s.bound = bound;
        s.last_ms = now_ms;
        if strict {
            let tokens = s.bucket.measure(cfg, bound, now_ms);
            if tokens < 0.0 {
                let throttle = rate::bucket_throttle_ms(tokens, bound);
                s.throttle_ms_total += throttle as u64;
                s.throttled += 1;
                return Err(throttle);
            }
            s.bucket.record(cfg, bound, partitions, now_ms);
            s.rate.record(cfg, partitions, now_ms);
            return Ok(0);
        }
        s.bucket.record(cfg, bound, partitions, now_ms);
        s.rate.record(cfg, partitions, now_ms);
        let throttle = rate::bucket_throttle_ms(s.bucket.measure(cfg, bound, now_ms), bound);
        if throttle > 0 {
            s.throttle_ms_total += throttle as u64;
            s.throttled += 1;
        }
        Ok(throttle)
    }

    /// Takes back a recorded value (Kafka's `unrecordQuotaSensor`: a throttled fetch is
    /// answered without records, so its bytes were never sent).
    pub fn unrecord(&self, kind: QuotaKind, user: &str, client: &str, value: f64, now_ms: i64) {
        if let Some((key, _)) = self.resolve(&self.store.snapshot(), kind, user, client) {
            let mut sensors = self.sensors.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = sensors.get_mut(&key) {
                s.rate.record(self.cfg, -value, now_ms);
            }
        }
    }

    /// The most a client may take within the quota's windows (Kafka's
    /// `getMaxValueInQuotaWindow`): a fetch asks for no more bytes than this.
    pub fn max_value_in_window(&self, kind: QuotaKind, user: &str, client: &str) -> Option<f64> {
        self.bound(kind, user, client).map(|b| {
            b * (self.cfg.samples.saturating_sub(1)) as f64 * (self.cfg.window_ms as f64 / 1000.0)
        })
    }

    /// Every sensor's rate and throttling for `/metrics` (at most `MAX_METRIC_SENSORS`, the
    /// rest summed), dropping the sensors whose windows all expired.
    pub fn views(&self, now_ms: i64) -> Vec<SensorView> {
        let cfg = self.cfg;
        let mut sensors = self.sensors.lock().unwrap_or_else(|e| e.into_inner());
        // Kafka expires a quota sensor after an hour without use.
        sensors.retain(|_, s| now_ms - s.last_ms < SENSOR_EXPIRY_MS);
        let mut views: Vec<SensorView> = sensors
            .iter_mut()
            .map(|(k, s)| SensorView {
                key: k.clone(),
                rate: s.rate.measure(cfg, now_ms),
                bound: s.bound,
                throttle_ms_total: s.throttle_ms_total,
                throttled: s.throttled,
            })
            .collect();
        drop(sensors);
        views.sort_by(|a, b| a.key.cmp(&b.key));
        if views.len() > MAX_METRIC_SENSORS {
            let rest = views.split_off(MAX_METRIC_SENSORS);
            let mut other: HashMap<QuotaKind, SensorView> = HashMap::new();
            for v in rest {
                let o = other.entry(v.key.kind).or_insert_with(|| SensorView {
                    key: SensorKey {
                        kind: v.key.kind,
                        user: "__other__".into(),
                        client_id: "__other__".into(),
                    },
                    rate: 0.0,
                    bound: 0.0,
                    throttle_ms_total: 0,
                    throttled: 0,
                });
                o.rate += v.rate;
                o.throttle_ms_total += v.throttle_ms_total;
                o.throttled += v.throttled;
            }
            let mut other: Vec<SensorView> = other.into_values().collect();
            other.sort_by(|a, b| a.key.cmp(&b.key));
            views.extend(other);
        }
        views
    }
}

#[cfg(test)]
mod tests;
