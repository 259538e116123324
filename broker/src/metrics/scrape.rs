//! One scrape: ask every shard for its snapshot (through `invoke_on`, so each shard reads its
//! own state on its own thread), add what belongs to the process, render Prometheus text.
//! Runs on the admin thread; a shard that does not answer within `SHARD_TIMEOUT` (e.g. still
//! recovering) is left out of this scrape rather than holding the scraper.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use prometheus::proto::MetricFamily;
use prometheus::{Encoder, TextEncoder};

use super::families::{label, labels, Families};
pub use super::snapshot::PartitionSnapshot;
use crate::shard::{frontend, BrokerContext, ShardState};

const SHARD_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct GroupSnapshot {
    pub group: String,
    pub members: usize,
    /// (topic, partition, committed offset)
    pub offsets: Vec<(String, i32, i64)>,
}

/// Everything a scrape needs from one shard; plain data, so it crosses threads.
pub struct ShardSnapshot {
    pub shard: usize,
    pub families: Vec<MetricFamily>,
    pub partitions: Vec<PartitionSnapshot>,
    pub groups: Vec<GroupSnapshot>,
    pub sync: storage::io::SyncStatsSnapshot,
    pub copies: storage::io::CopyStatsSnapshot,
    /// Fetch record bytes served and copied.
    pub fetch_bytes: (u64, u64),
    pub syncs_in_flight: u64,
    /// `None` on the pwrite+fdatasync backend.
    pub ring: Option<storage::io::RingStatsSnapshot>,
    pub busy_seconds: f64,
    pub cpu_seconds: f64,
    pub inflight_bytes: u64,
    pub inflight_bound: u64,
}

/// Runs on the shard's own thread.
fn snapshot(state: &Rc<ShardState>) -> ShardSnapshot {
    let partitions = state
        .partitions
        .borrow()
        .iter()
        .map(|((t, p), part)| PartitionSnapshot {
            topic: t.to_string(),
            partition: *p,
            size_bytes: part.log.size_bytes(),
            log_start: part.log.log_start_offset(),
            log_end: part.log.log_end_offset(),
            high_watermark: part.high_watermark(),
            last_stable: part.last_stable_offset(),
            open_transactions: part.open_transactions(),
            min_isr: part.settings().min_insync_replicas,
            followers: part.follower_lags(),
        })
        .collect();
    let coordinator = crate::coordinator::group::GroupShard::of(state);
    // Groups load lazily, on the first group request after a start; the lag of groups whose
    // consumers are down must show anyway, so a scrape loads this shard's coordinator
    // partitions (once per shard life, as a group request would).
    let offsets_partitions: Vec<i32> = state
        .partitions
        .borrow()
        .keys()
        .filter(|(t, _)| t.as_ref() == crate::coordinator::group::OFFSETS_TOPIC)
        .map(|(_, p)| *p)
        .collect();
    for p in offsets_partitions {
        // On a cluster, only the partitions this node coordinates.
        use crate::coordinator::{group::Groups, leadership};
        let Ok(epoch) = leadership::epoch::<Groups>(state, p) else {
            continue;
        };
        if let Err(e) = coordinator.ensure_loaded_at(p, epoch) {
            tracing::warn!(partition = p, error = %e, "loading group offsets for metrics");
        }
    }
    let groups = coordinator
        .groups
        .borrow()
        .values()
        .map(|g| GroupSnapshot {
            group: g.id.clone(),
            members: g.members.len() + g.consumer.as_ref().map_or(0, |c| c.members.len()),
            offsets: g
                .offsets
                .iter()
                .map(|((t, p), o)| (t.clone(), *p, o.offset))
                .collect(),
        })
        .collect();
    let bound = state
        .ctx
        .config
        .queued_max_request_bytes
        .min(u32::MAX as u64);
    let busy_seconds = tokio::runtime::Handle::try_current()
        .map(|h| h.metrics().worker_total_busy_duration(0).as_secs_f64())
        .unwrap_or(0.0);
    ShardSnapshot {
        shard: state.id,
        families: state.metrics.registry.gather(),
        partitions,
        groups,
        sync: state.io.sync_stats(),
        copies: state.io.copy_stats(),
        fetch_bytes: (
            state.metrics.fetch_record_bytes.get(),
            state.metrics.fetch_record_bytes_copied.get(),
        ),
        syncs_in_flight: state.io.syncs_in_flight(),
        ring: state.io.ring_stats(),
        busy_seconds,
        cpu_seconds: thread_cpu_seconds(),
        inflight_bytes: bound.saturating_sub(state.inflight_bytes.available_permits() as u64),
        inflight_bound: bound,
    }
}

fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which lives on this stack frame.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Gathers every shard and renders the Prometheus text exposition.
pub async fn render(ctx: &Arc<BrokerContext>, ready: bool) -> String {
    let mut shards = Vec::new();
    for s in 0..ctx.shard_count() {
        let call = frontend::call_from_outside(ctx, s, |state| async move { snapshot(&state) });
        if let Ok(Ok(snap)) = tokio::time::timeout(SHARD_TIMEOUT, call).await {
            shards.push(snap);
        }
    }
    let mut all = families(&shards, ready, ctx.shard_count());
    all.extend(cluster_families(ctx, &shards));
    all.extend(quota_families(&ctx.quotas.views(crate::now_ms())));
    all.extend(ctx.telemetry.families(crate::now_ms()));
    if let Some(remote) = &ctx.remote {
        all.extend(remote.metrics.registry.gather());
    }
    let mut text = encode(&all);
    // Connection steering keeps its own atomics (ebpf crate), rendered as text here.
    text.push_str(&ctx.steering.render_prometheus());
    text
}

/// Replication and metadata-quorum families (`super::cluster`).
fn cluster_families(ctx: &BrokerContext, shards: &[ShardSnapshot]) -> Vec<MetricFamily> {
    let handle = ctx.cluster.get();
    let image = handle.map(|c| c.image());
    let state = handle
        .zip(image.as_deref())
        .map(|(c, image)| super::cluster::ClusterState {
            image,
            raft: c.raft_view(),
        });
    let partitions: Vec<&PartitionSnapshot> =
        shards.iter().flat_map(|s| s.partitions.iter()).collect();
    let mut f = Families::new();
    super::cluster::families(&mut f, ctx.config.node_id, state.as_ref(), &partitions);
    f.into_vec()
}

fn encode(families: &[MetricFamily]) -> String {
    let mut out = Vec::new();
    if let Err(e) = TextEncoder::new().encode(families, &mut out) {
        tracing::warn!(error = %e, "encoding metrics");
    }
    String::from_utf8(out).unwrap_or_default()
}

fn families(shards: &[ShardSnapshot], ready: bool, shard_count: usize) -> Vec<MetricFamily> {
    let mut f = Families::new();
    // The shards' own registries: same families on every shard, told apart by `shard`.
    for s in shards {
        let id = s.shard.to_string();
        for fam in &s.families {
            let target = f.family(fam.name(), fam.help(), fam.get_field_type());
            for m in fam.get_metric() {
                let mut m = m.clone();
                let mut l = m.take_label();
                l.insert(0, label("shard", &id));
                m.set_label(l);
                target.mut_metric().push(m);
            }
        }
    }
    f.gauge(
        "strom_ready",
        "1 once recovery is done and every shard serves.",
        vec![],
        if ready { 1.0 } else { 0.0 },
    );
    f.gauge(
        "strom_shards",
        "Shards configured.",
        vec![],
        shard_count as f64,
    );
    f.gauge(
        "strom_shards_reporting",
        "Shards that answered this scrape (fewer than strom_shards: a shard is stuck or recovering).",
        vec![],
        shards.len() as f64,
    );
    // Bytes copied per byte of record data, over the whole broker (the zero-copy paths read 0).
    let ratio = |copied: u64, total: u64| {
        if total == 0 {
            0.0
        } else {
            copied as f64 / total as f64
        }
    };
    let (appended, append_copied) = shards.iter().fold((0, 0), |(a, c), s| {
        (
            a + s.copies.appended_bytes,
            c + s.copies.append_copied_bytes,
        )
    });
    let (served, serve_copied) = shards.iter().fold((0, 0), |(a, c), s| {
        (a + s.fetch_bytes.0, c + s.fetch_bytes.1)
    });
    for (path, value) in [
        ("produce", ratio(append_copied, appended)),
        ("fetch", ratio(serve_copied, served)),
    ] {
        f.gauge(
            "strom_record_bytes_copied_per_byte",
            "Record bytes the broker copied per record byte written (produce) or served (fetch).",
            labels(&[("path", path)]),
            value,
        );
    }
    let mut high_watermarks = BTreeMap::new();
    for s in shards {
        let id = s.shard.to_string();
        let sl = || labels(&[("shard", &id)]);
        f.counter(
            "strom_shard_busy_seconds_total",
            "Time the shard's runtime spent running tasks; rate() is the busy ratio.",
            sl(),
            s.busy_seconds,
        );
        f.counter(
            "strom_shard_cpu_seconds_total",
            "CPU time of the shard's thread (user + system).",
            sl(),
            s.cpu_seconds,
        );
        f.gauge(
            "strom_inflight_request_bytes",
            "Request bytes read and not yet answered on the shard.",
            sl(),
            s.inflight_bytes as f64,
        );
        f.gauge(
            "strom_inflight_request_bytes_limit",
            "The shard's bound on request bytes in flight (queued_max_request_bytes); reading stops there.",
            sl(),
            s.inflight_bound as f64,
        );
        f.counter(
            "strom_produce_record_bytes_total",
            "Record batch bytes the shard's logs appended (produce, coordinators, migration).",
            sl(),
            s.copies.appended_bytes as f64,
        );
        f.counter(
            "strom_produce_record_bytes_copied_total",
            "Of those, bytes copied before the write (LogAppendTime batches); the rest is written from the request's own buffer.",
            sl(),
            s.copies.append_copied_bytes as f64,
        );
        f.gauge(
            "strom_fdatasync_in_flight",
            "fdatasyncs issued and not completed on the shard (the sync queue depth).",
            sl(),
            s.syncs_in_flight as f64,
        );
        if let Some(ring) = &s.ring {
            f.gauge(
                "strom_io_uring_in_flight",
                "Operations (writes, fdatasyncs) on the shard's io_uring not completed yet.",
                sl(),
                ring.in_flight as f64,
            );
            f.histogram(
                "strom_io_uring_queue_depth",
                "io_uring queue depth at each submission (operations in flight, the new one included).",
                sl(),
                &ring.depth,
                1.0,
            );
        }
        f.histogram(
            "strom_fdatasync_duration_seconds",
            "fdatasync latency of the shard's segment files.",
            sl(),
            &s.sync.latency_us,
            1e-6,
        );
        f.histogram(
            "strom_group_commit_records",
            "Offsets made durable by one fdatasync (records sharing a group commit).",
            sl(),
            &s.sync.batch_offsets,
            1.0,
        );
        for p in &s.partitions {
            let ps = p.partition.to_string();
            let pl = || labels(&[("topic", &p.topic), ("partition", &ps)]);
            f.gauge(
                "strom_partition_size_bytes",
                "Bytes of the partition's segment files.",
                pl(),
                p.size_bytes as f64,
            );
            f.gauge(
                "strom_partition_log_start_offset",
                "First offset still in the log.",
                pl(),
                p.log_start as f64,
            );
            f.gauge(
                "strom_partition_log_end_offset",
                "Next offset to be assigned.",
                pl(),
                p.log_end as f64,
            );
            f.gauge(
                "strom_partition_high_watermark",
                "Offset up to which consumers may read.",
                pl(),
                p.high_watermark as f64,
            );
            f.gauge(
                "strom_partition_last_stable_offset",
                "Offset up to which read_committed consumers may read: the first offset of the oldest open transaction, else the high watermark.",
                pl(),
                p.last_stable as f64,
            );
            f.gauge(
                "strom_partition_open_transactions",
                "Transactions open on the partition (data written, no marker yet).",
                pl(),
                p.open_transactions as f64,
            );
            high_watermarks.insert((p.topic.clone(), p.partition), p.high_watermark);
        }
    }
    for s in shards {
        for g in &s.groups {
            f.gauge(
                "strom_consumer_group_members",
                "Members of the group (classic and KIP-848).",
                labels(&[("group", &g.group)]),
                g.members as f64,
            );
            for (topic, partition, committed) in &g.offsets {
                // Offsets of a deleted topic's partitions (or of one whose shard did not
                // answer) get no series: there is nothing to lag behind.
                let Some(hw) = high_watermarks.get(&(topic.clone(), *partition)) else {
                    continue;
                };
                let ps = partition.to_string();
                let l = || labels(&[("group", &g.group), ("topic", topic), ("partition", &ps)]);
                f.gauge(
                    "strom_consumer_group_committed_offset",
                    "Offset the group committed.",
                    l(),
                    *committed as f64,
                );
                f.gauge(
                    "strom_consumer_group_lag",
                    "High watermark minus the group's committed offset: records left to consume.",
                    l(),
                    (hw - committed).max(0) as f64,
                );
            }
        }
    }
    process(&mut f);
    f.into_vec()
}

/// Client quotas (`quota`): per sensor — the clients that share one quota, labelled by
/// `quota` kind, `user` and `client_id` as Kafka's metric tags ("" = not part of the key) —
/// the measured rate, the bound, and the throttling. At most `quota::MAX_METRIC_SENSORS`
/// series per family; the rest are summed under `user="__other__"`.
fn quota_families(views: &[crate::quota::SensorView]) -> Vec<MetricFamily> {
    let mut f = Families::new();
    for v in views {
        let l = || {
            labels(&[
                ("quota", v.key.kind.name()),
                ("user", v.key.user.as_str()),
                ("client_id", v.key.client_id.as_str()),
            ])
        };
        f.gauge(
            "strom_quota_rate",
            "Rate the quota measures over its windows (bytes/s; request: % of a thread).",
            l(),
            v.rate,
        );
        if v.key.user != "__other__" {
            f.gauge(
                "strom_quota_bound",
                "The quota that applies (bytes/s; request: % of a thread).",
                l(),
                v.bound,
            );
        }
        f.counter(
            "strom_quota_throttle_time_ms_total",
            "Throttle time answered to the clients of this quota, ms.",
            l(),
            v.throttle_ms_total as f64,
        );
        f.counter(
            "strom_quota_throttled_requests_total",
            "Requests answered with a throttle time.",
            l(),
            v.throttled as f64,
        );
    }
    f.into_vec()
}

/// Process-wide figures from /proc/self (Linux).
fn process(f: &mut Families) {
    // SAFETY: sysconf only reads a configuration value.
    let (page, ticks) = unsafe {
        (
            libc::sysconf(libc::_SC_PAGESIZE),
            libc::sysconf(libc::_SC_CLK_TCK),
        )
    };
    if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
        if let Some(rss) = statm
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<f64>().ok())
        {
            f.gauge(
                "strom_process_resident_memory_bytes",
                "Resident set size of the broker process.",
                vec![],
                rss * page.max(1) as f64,
            );
        }
    }
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        // Fields after the command name (which may hold spaces) start after the last ')'.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks_of = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // utime and stime are fields 14 and 15 of stat; here 11 and 12 (state is index 0).
        let cpu = (ticks_of(11) + ticks_of(12)) / ticks.max(1) as f64;
        f.counter(
            "strom_process_cpu_seconds_total",
            "CPU time of the broker process (user + system).",
            vec![],
            cpu,
        );
    }
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        f.gauge(
            "strom_process_open_fds",
            "Open file descriptors of the broker process.",
            vec![],
            dir.count() as f64,
        );
    }
}
