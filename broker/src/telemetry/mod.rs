//! KIP-714 client telemetry: the broker tells each client which of its metrics to push and
//! how often (GetTelemetrySubscriptions), receives them (PushTelemetry) and shows them on
//! `/metrics`, so a consumer's own lag or a producer's queue time is visible at the broker
//! with no exporter in the client. Kafka's `ClientMetricsManager` hands pushes to a plugin;
//! Strom's receiver is built in (`exposition`), and the subscriptions are CLIENT_METRICS
//! config resources (`subscription`), kept in `<data-dir>/strom-client-metrics.json`.
//!
//! Kafka's rules, kept here: a client instance is known by the id the broker gave it; its
//! subscription is the union of every matching subscription's metrics at the smallest
//! interval; a request sooner than the interval is throttled (a push right after a get is
//! not: clients jitter); a push after a terminating one is refused; at most 16384 instances,
//! each forgotten after max(60 s, 3 × its interval) without a request.
//!
//! One difference, on purpose: Kafka asks for delta temporality (its plugins forward to
//! systems that sum); `/metrics` is cumulative, and a delta lost with a refused push would
//! leave a counter wrong forever, so Strom asks for cumulative values (deltas still add up).

pub mod exposition;
pub mod forward;
pub mod otlp;
pub mod subscription;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

use crate::metadata::group_configs::{GroupConfigsError, GroupConfigsHandle, Overrides};
pub use subscription::SubscriptionError;
use subscription::{Attributes, Subscription};

const FILE: &str = "strom-client-metrics.json";
const MAX_INSTANCES: usize = 16_384;
const MIN_EXPIRY_MS: i64 = 60_000;
/// The request time of a request not made yet: long enough ago for any interval.
const NEVER: i64 = i64::MIN / 4;
/// Kafka's `telemetry.max.bytes` default: the largest (compressed) push accepted.
pub const MAX_PUSH_BYTES: usize = 1024 * 1024;
/// A push that inflates past this is refused: memory stays bounded whatever a client sends.
const MAX_DECOMPRESSED_BYTES: usize = 16 * 1024 * 1024;
/// Series kept per instance and in all: beyond them a push's extra series are dropped (and
/// counted), so no client can grow `/metrics` without bound.
const MAX_SERIES_PER_INSTANCE: usize = 2_000;
const MAX_SERIES: usize = 200_000;
/// zstd, lz4, gzip, snappy: Kafka's order of preference, which clients follow.
pub const ACCEPTED_COMPRESSION: [i8; 4] = [4, 3, 1, 2];

/// Why a telemetry request is refused; each is one Kafka error code (`handlers::errors`).
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum TelemetryError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("Request from the client [{0}] arrived before the next push interval time")]
    Throttled(String),
    #[error("Unknown client subscription id for the client [{0}]")]
    UnknownSubscription(String),
    #[error("Unknown compression type [{0}] is received in telemetry request from [{1}]")]
    UnsupportedCompression(i8, String),
    #[error("Telemetry request from [{0}] is larger than the maximum allowed size [{1}]")]
    TooLarge(String, usize),
    #[error("{0}")]
    InvalidRecord(String),
}

/// What the broker knows of a client from its connection (the `match` attributes but the
/// instance id, which the instance carries).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientMeta {
    pub client_id: String,
    pub software_name: String,
    pub software_version: String,
    pub source_address: String,
    pub source_port: String,
}

struct Instance {
    id: Uuid,
    id_text: String,
    meta: ClientMeta,
    subscription_id: i32,
    metrics: Vec<String>,
    interval_ms: i32,
    /// The subscriptions' version this instance's subscription was computed at.
    version: u64,
    last_get_ms: i64,
    last_push_ms: i64,
    terminating: bool,
    /// The last push's refusal: a get right after UNKNOWN_SUBSCRIPTION_ID or
    /// UNSUPPORTED_COMPRESSION_TYPE is not throttled (the client must re-subscribe).
    last_error: Option<TelemetryError>,
    expires_ms: i64,
    series: otlp::Series,
}

impl Attributes for Instance {
    fn attribute(&self, name: &str) -> Option<&str> {
        Some(match name {
            "client_instance_id" => &self.id_text,
            "client_id" => &self.meta.client_id,
            "client_software_name" => &self.meta.software_name,
            "client_software_version" => &self.meta.software_version,
            "client_source_address" => &self.meta.source_address,
            "client_source_port" => &self.meta.source_port,
            _ => return None,
        })
    }
}

/// A GetTelemetrySubscriptions answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Granted {
    pub instance_id: Uuid,
    pub subscription_id: i32,
    pub metrics: Vec<String>,
    pub interval_ms: i32,
}

#[derive(Default)]
struct State {
    subscriptions: BTreeMap<String, Subscription>,
    version: u64,
    instances: HashMap<Uuid, Instance>,
    series: usize,
    counters: exposition::Counters,
}

pub struct ClientTelemetry {
    store: GroupConfigsHandle,
    state: Mutex<State>,
    /// To the OTLP collector, when `otel.exporter.otlp.endpoint` names one.
    forwarder: Option<forward::Forwarder>,
}

/// Kafka's text form of a Uuid (url-safe base64, no padding), as clients log their id.
pub fn uuid_text(id: &Uuid) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

impl ClientTelemetry {
    /// The subscriptions stored in `data_dir`; pushed metrics go on to the OTLP collector at
    /// `otlp_endpoint` too, unless it is empty.
    pub fn open(
        data_dir: &Path,
        otlp_endpoint: &str,
    ) -> Result<ClientTelemetry, TelemetryOpenError> {
        let store = GroupConfigsHandle::open_file(data_dir, FILE)?;
        let mut subscriptions = BTreeMap::new();
        for (name, configs) in store.all().iter() {
            match Subscription::parse(name, configs) {
                Ok(s) => {
                    subscriptions.insert(name.clone(), s);
                }
                // Written only after validation; a hand edit may still break one.
                Err(e) => {
                    tracing::warn!(subscription = %name, error = %e, "ignoring client metrics subscription")
                }
            }
        }
        Ok(ClientTelemetry {
            store,
            state: Mutex::new(State {
                subscriptions,
                ..Default::default()
            }),
            forwarder: forward::Forwarder::start(otlp_endpoint)?,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The subscription's configs as set (Kafka describes only those).
    pub fn configs(&self, name: &str) -> Option<Arc<Overrides>> {
        self.store.get(name)
    }

    pub fn names(&self) -> Vec<String> {
        self.store.all().keys().cloned().collect()
    }

    /// Validates `configs` as subscription `name`'s whole config (empty: removes it) and,
    /// unless `validate_only`, persists it; clients see it at their next request.
    pub fn alter(
        &self,
        name: &str,
        configs: Overrides,
        validate_only: bool,
    ) -> Result<(), AlterSubscriptionError> {
        let parsed = Subscription::parse(name, &configs)?;
        if validate_only {
            return Ok(());
        }
        // The file first: an answered alter survives a crash.
        let empty = configs.is_empty();
        self.store.set(name, configs)?;
        let mut state = self.state();
        if empty {
            state.subscriptions.remove(name);
        } else {
            state.subscriptions.insert(name.to_string(), parsed);
        }
        state.version += 1;
        Ok(())
    }

    /// Makes the subscriptions exactly `all` (a cluster node mirroring its image): each one
    /// that differs is altered as above, each one not in `all` removed. A subscription that no
    /// longer parses is skipped with a log line, as at open.
    pub fn replace_all(&self, all: &BTreeMap<String, Overrides>) -> Result<(), GroupConfigsError> {
        let current = self.store.all();
        let gone = current.keys().filter(|n| !all.contains_key(*n));
        let changed = all
            .iter()
            .filter(|(n, c)| current.get(*n).map(|o| &**o) != Some(*c));
        let wanted: Vec<(String, Overrides)> = gone
            .map(|n| (n.clone(), Overrides::new()))
            .chain(changed.map(|(n, c)| (n.clone(), c.clone())))
            .collect();
        for (name, configs) in wanted {
            match self.alter(&name, configs, false) {
                Ok(()) => {}
                Err(AlterSubscriptionError::Storage(e)) => return Err(e),
                Err(e) => {
                    tracing::warn!(subscription = %name, error = %e, "ignoring client metrics subscription")
                }
            }
        }
        Ok(())
    }

    /// GetTelemetrySubscriptions: the instance's subscription (a new instance id for the
    /// zero id), or THROTTLING_QUOTA_EXCEEDED when it asks again within its interval.
    pub fn subscribe(
        &self,
        requested: Uuid,
        meta: ClientMeta,
        now_ms: i64,
    ) -> Result<Granted, TelemetryError> {
        let mut guard = self.state();
        let state = &mut *guard;
        state.expire(now_ms);
        let id = if requested.is_nil() {
            loop {
                let id = Uuid::new_v4();
                if !state.instances.contains_key(&id) {
                    break id;
                }
            }
        } else {
            requested
        };
        let instance = state.instance(id, meta, now_ms);
        let since = now_ms - instance.last_get_ms.max(instance.last_push_ms);
        let resubscribing = matches!(
            instance.last_error,
            Some(TelemetryError::UnknownSubscription(_))
                | Some(TelemetryError::UnsupportedCompression(..))
        );
        if since < instance.interval_ms as i64 && !resubscribing {
            let text = instance.id_text.clone();
            state.counters.throttled += 1;
            return Err(TelemetryError::Throttled(text));
        }
        instance.last_get_ms = now_ms;
        instance.last_error = None;
        Ok(Granted {
            instance_id: id,
            subscription_id: instance.subscription_id,
            metrics: instance.metrics.clone(),
            interval_ms: instance.interval_ms,
        })
    }

    /// PushTelemetry, with Kafka's checks in Kafka's order; the payload is decoded only
    /// once they pass, and replaces what the instance showed before.
    pub fn push(
        &self,
        push: &Push<'_>,
        meta: ClientMeta,
        now_ms: i64,
    ) -> Result<(), TelemetryError> {
        let text = uuid_text(&push.instance_id);
        if push.instance_id.is_nil() || push.instance_id == Uuid::from_u128(1) {
            return Err(TelemetryError::InvalidRequest(format!(
                "Invalid request from the client [{text}], invalid client instance id"
            )));
        }
        let mut guard = self.state();
        let state = &mut *guard;
        state.expire(now_ms);
        let instance = state.instance(push.instance_id, meta, now_ms);
        let checked = check_push(instance, push, &text, now_ms);
        instance.terminating |= push.terminating;
        let mut decoded = match checked.and_then(|()| decode(push)) {
            Ok(d) => d,
            Err(e) => {
                instance.last_error = Some(e.clone());
                state.counters.refused(&e);
                return Err(e);
            }
        };
        instance.last_error = None;
        // The labels a forwarded payload gets are the attributes a subscription can match.
        let forward = self.forwarder.as_ref().map(|f| {
            let labels = subscription::MATCH_ATTRIBUTES
                .map(|k| (k, instance.attribute(k).unwrap_or_default().to_string()));
            (f, labels, std::mem::take(&mut decoded.data))
        });
        state.counters.pushes += 1;
        state.counters.skipped_points += decoded.skipped;
        let id = push.instance_id;
        state.replace_series(id, decoded.points);
        drop(guard);
        if let Some((f, labels, data)) = forward {
            let labels = labels.each_ref().map(|(k, v)| (*k, v.as_str()));
            f.send(data, &labels);
        }
        Ok(())
    }

    /// The instances and their series, for `/metrics`.
    pub fn families(&self, now_ms: i64) -> Vec<prometheus::proto::MetricFamily> {
        let mut state = self.state();
        state.expire(now_ms);
        exposition::families(&state, self.forwarder.as_ref().map(|f| &*f.counters))
    }
}

/// One PushTelemetry request's fields.
pub struct Push<'a> {
    pub instance_id: Uuid,
    pub subscription_id: i32,
    pub terminating: bool,
    pub compression: i8,
    pub metrics: &'a [u8],
}

#[derive(Debug, thiserror::Error)]
pub enum TelemetryOpenError {
    #[error(transparent)]
    Store(#[from] GroupConfigsError),
    #[error("otel.exporter.otlp.endpoint: {0}")]
    Endpoint(#[from] strom_connectors::trace::OtelError),
}

#[derive(Debug, thiserror::Error)]
pub enum AlterSubscriptionError {
    #[error(transparent)]
    Invalid(#[from] SubscriptionError),
    #[error(transparent)]
    Storage(#[from] GroupConfigsError),
}

fn check_push(
    instance: &mut Instance,
    push: &Push<'_>,
    text: &str,
    now_ms: i64,
) -> Result<(), TelemetryError> {
    if instance.terminating {
        return Err(TelemetryError::InvalidRequest(format!(
            "Client [{text}] sent the previous request with state terminating to TRUE, can not accept any requests after that"
        )));
    }
    // A push right after a get is accepted whenever it comes: clients jitter the interval.
    let after_get = instance.last_get_ms > instance.last_push_ms;
    if after_get || now_ms - instance.last_push_ms >= instance.interval_ms as i64 {
        instance.last_push_ms = now_ms;
    } else if !push.terminating {
        return Err(TelemetryError::Throttled(text.to_string()));
    }
    if push.subscription_id != instance.subscription_id {
        return Err(TelemetryError::UnknownSubscription(text.to_string()));
    }
    if push.compression != 0 && !ACCEPTED_COMPRESSION.contains(&push.compression) {
        return Err(TelemetryError::UnsupportedCompression(
            push.compression,
            text.to_string(),
        ));
    }
    if push.metrics.len() > MAX_PUSH_BYTES {
        return Err(TelemetryError::TooLarge(text.to_string(), MAX_PUSH_BYTES));
    }
    Ok(())
}

fn decode(push: &Push<'_>) -> Result<otlp::Decoded, TelemetryError> {
    if push.metrics.is_empty() {
        return Ok(otlp::Decoded::default());
    }
    let inflated;
    let bytes = if push.compression == 0 {
        push.metrics
    } else {
        inflated = crate::partition::records::decompress(
            push.compression as u8,
            push.metrics,
            MAX_DECOMPRESSED_BYTES,
        )
        .map_err(|e| TelemetryError::InvalidRecord(e.to_string()))?;
        &inflated[..]
    };
    otlp::decode(bytes).map_err(|e| TelemetryError::InvalidRecord(e.to_string()))
}

impl State {
    /// The instance for `id`, created (or re-evaluated after a subscription change) with
    /// the subscriptions that match it now; its expiry moves to max(60 s, 3 × interval).
    fn instance(&mut self, id: Uuid, meta: ClientMeta, now_ms: i64) -> &mut Instance {
        let stale = self
            .instances
            .get(&id)
            .is_none_or(|i| i.version < self.version);
        if stale {
            if !self.instances.contains_key(&id) && self.instances.len() >= MAX_INSTANCES {
                self.evict_one();
            }
            let old = self.instances.remove(&id);
            let mut fresh = Instance {
                id,
                id_text: uuid_text(&id),
                meta: old.as_ref().map_or(meta, |o| o.meta.clone()),
                subscription_id: 0,
                metrics: Vec::new(),
                interval_ms: subscription::DEFAULT_INTERVAL_MS,
                version: self.version,
                last_get_ms: NEVER,
                last_push_ms: NEVER,
                terminating: old.as_ref().is_some_and(|o| o.terminating),
                last_error: None,
                expires_ms: 0,
                series: old.map(|o| o.series).unwrap_or_default(),
            };
            self.evaluate(&mut fresh);
            self.instances.insert(id, fresh);
        }
        let instance = self.instances.get_mut(&id).expect("inserted above");
        instance.expires_ms = now_ms + MIN_EXPIRY_MS.max(3 * instance.interval_ms as i64);
        instance
    }

    fn evaluate(&self, instance: &mut Instance) {
        let mut metrics = std::collections::BTreeSet::new();
        let mut interval = subscription::DEFAULT_INTERVAL_MS;
        let mut all = false;
        for s in self.subscriptions.values().filter(|s| s.matches(instance)) {
            all |= s.metrics.iter().any(|m| m == subscription::ALL_METRICS);
            metrics.extend(s.metrics.iter().cloned());
            interval = interval.min(s.interval_ms);
        }
        let metrics: Vec<String> = if all {
            vec![subscription::ALL_METRICS.to_string()]
        } else {
            metrics.into_iter().collect()
        };
        // Kafka's id: CRC32C of the metrics and interval, XOR the instance id's hash, so
        // a changed subscription gets a new id the client's stale push does not carry.
        let text = format!("{metrics:?}{interval}");
        let (hi, lo) = instance.id.as_u64_pair();
        let id_hash = (hi ^ lo) as i32 ^ ((hi ^ lo) >> 32) as i32;
        instance.subscription_id = crc32c::crc32c(text.as_bytes()) as i32 ^ id_hash;
        instance.metrics = metrics;
        instance.interval_ms = interval;
    }

    fn evict_one(&mut self) {
        if let Some(id) = self
            .instances
            .values()
            .min_by_key(|i| i.expires_ms)
            .map(|i| i.id)
        {
            self.drop_instance(id);
        }
    }

    fn drop_instance(&mut self, id: Uuid) {
        if let Some(i) = self.instances.remove(&id) {
            self.series -= i.series.len();
        }
    }

    fn expire(&mut self, now_ms: i64) {
        let gone: Vec<Uuid> = self
            .instances
            .values()
            .filter(|i| i.expires_ms <= now_ms)
            .map(|i| i.id)
            .collect();
        for id in gone {
            self.drop_instance(id);
        }
    }

    /// The push's series become the instance's: cumulative ones replace, deltas add to
    /// what was there, and a delta series the push left out stays (nothing changed).
    fn replace_series(&mut self, id: Uuid, points: Vec<(otlp::SeriesKey, otlp::Sample)>) {
        let Some(instance) = self.instances.get_mut(&id) else {
            return;
        };
        let before = std::mem::take(&mut instance.series);
        let mut next: otlp::Series = before
            .iter()
            .filter(|(_, s)| s.delta)
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        let budget = MAX_SERIES
            .saturating_sub(self.series - before.len())
            .min(MAX_SERIES_PER_INSTANCE);
        let mut dropped = 0u64;
        for (key, sample) in points {
            if !next.contains_key(&key) && next.len() >= budget {
                dropped += 1;
                continue;
            }
            let sample = otlp::accumulate(before.get(&key), sample);
            next.insert(key, sample);
        }
        self.series = self.series - before.len() + next.len();
        instance.series = next;
        self.counters.dropped_series += dropped;
    }
}

#[cfg(test)]
mod tests;
