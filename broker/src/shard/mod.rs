//! Shards: one OS thread per core, pinned, each running a tokio current-thread runtime.
//!
//! A shard owns the partitions whose home it is (`home_shard`), its own io_uring (through the
//! storage `IoBackend`), its own `SO_REUSEPORT` listener and the connections the kernel gives
//! it. Shards share no mutable state on the hot path: they talk by sending closures over
//! bounded channels (`frontend::invoke_on`), and read the topic catalog as an `Arc` snapshot.

pub mod checkpoint;
pub mod cleaner;
pub mod cleaner_checkpoints;
pub mod frontend;
pub mod housekeeping;
pub mod log_dir_failure;
pub mod priority;
pub mod run;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use storage::IoBackend;
use tokio::sync::{mpsc, Semaphore};

use crate::config::BrokerConfig;
use crate::metadata::catalog::CatalogHandle;
use crate::partition::Partition;

/// A unit of work sent to another shard: runs on that shard's thread.
pub type ShardMessage = Box<dyn FnOnce(Rc<ShardState>) + Send>;

/// Messages queued per shard before senders wait: bounded so a slow shard pushes back.
pub const SHARD_QUEUE_DEPTH: usize = 4096;

/// State every shard can read; immutable or atomic, so `Arc`-shared.
pub struct BrokerContext {
    pub config: BrokerConfig,
    pub catalog: CatalogHandle,
    pub cluster_id: String,
    pub shard_senders: Vec<mpsc::Sender<ShardMessage>>,
    /// Next producer id handed out by InitProducerId (persisted in the data dir).
    pub producer_ids: crate::metadata::producer_ids::ProducerIdAllocator,
    /// Finalized feature levels (KIP-584), persisted in the data dir.
    pub features: crate::metadata::features::FeaturesHandle,
    pub started_ms: i64,
    /// Connection steering in use and accepts per shard (`server::steering`).
    pub steering: Arc<strom_ebpf::SteeringProbe>,
    /// The schema registry's view for produce-time schema id validation, set once the
    /// registry (`schema_registry`) has started.
    pub schema_view: std::sync::OnceLock<Arc<dyn crate::partition::schema_ids::SchemaView>>,
    /// `cleaner-offset-checkpoint`: where each compacted log's dirty section starts.
    pub cleaner_checkpoints: Arc<crate::shard::cleaner_checkpoints::Checkpoints>,
    /// Runtime log levels (BROKER_LOGGER config resource).
    pub loggers: Arc<crate::logging::Loggers>,
    /// Per-group config overrides (GROUP config resource), persisted in the data dir.
    pub group_configs: crate::metadata::group_configs::GroupConfigsHandle,
    /// KIP-714 client telemetry: subscriptions, client instances, their pushed metrics.
    pub telemetry: crate::telemetry::ClientTelemetry,
    /// SCRAM credentials (SASL and Describe/AlterUserScramCredentials).
    pub credentials: Arc<dyn crate::metadata::scram::CredentialStore>,
    /// OAUTHBEARER's token validator, when that mechanism is enabled.
    pub oauthbearer: Option<Arc<crate::security::oauthbearer::OAuthValidator>>,
    /// ACL bindings (Create/Describe/DeleteAcls), kept whether or not an authorizer is on.
    pub acls: Arc<dyn crate::metadata::acls::AclStore>,
    /// `authorizer.class.name`'s authorizer; `None` = every request is allowed.
    pub authorizer: Option<Arc<crate::security::authorizer::Authorizer>>,
    /// Client quotas (Describe/AlterClientQuotas) and their enforcement, shared by all
    /// shards of the node (`quota`).
    pub quotas: Arc<crate::quota::QuotaManager>,
    /// The metadata quorum when `controller.quorum.voters` is set (set once, after the
    /// shards start); empty on a single node.
    pub cluster: std::sync::OnceLock<Arc<crate::cluster::handle::ClusterHandle>>,
    /// Spans of traced records (`otel.exporter.otlp.endpoint`); `None` = tracing off.
    pub otel: Option<Arc<crate::otel::Otel>>,
    /// Tiered storage (`remote.log.storage.system.enable`); `None` when off.
    pub remote: Option<Arc<crate::tiered::RemoteLogManager>>,
}

impl BrokerContext {
    /// The authorizer `config` asks for, over `acls`.
    pub fn authorizer_for(
        config: &BrokerConfig,
        acls: &Arc<dyn crate::metadata::acls::AclStore>,
    ) -> Option<Arc<crate::security::authorizer::Authorizer>> {
        (!config.authorizer_class_name.trim().is_empty()).then(|| {
            Arc::new(crate::security::authorizer::Authorizer::new(
                acls.clone(),
                &config.super_users,
                config.allow_everyone_if_no_acl_found,
            ))
        })
    }

    /// The quota manager over the quotas kept in `data_dir`, windows as `config` says.
    pub fn quotas_for(
        config: &BrokerConfig,
        data_dir: &std::path::Path,
    ) -> Result<Arc<crate::quota::QuotaManager>, crate::metadata::quotas::QuotasError> {
        let store = crate::metadata::quotas::QuotaStore::open(data_dir)?;
        Ok(Arc::new(crate::quota::QuotaManager::new(
            Arc::new(store),
            crate::quota::WindowConfig::new(
                config.quota_window_num as usize,
                config.quota_window_size_seconds,
            ),
        )))
    }

    pub fn shard_count(&self) -> usize {
        self.shard_senders.len()
    }

    /// The cluster id clients are told (Metadata, DescribeCluster) and that ApiVersions v5
    /// checks theirs against: on a cluster the image's, set by the first broker registered
    /// and the same on every node; this node's own on a single node, and on a cluster until
    /// the image has one. Each node's own id differs from the image's on all but one node.
    pub fn cluster_id_for_clients(&self) -> String {
        self.cluster
            .get()
            .and_then(|c| c.image().cluster_id.clone())
            .unwrap_or_else(|| self.cluster_id.clone())
    }
}

/// The partitions' home: a stable function of topic and partition, so every shard computes
/// the same answer without asking anyone. Kafka's murmur2 is not needed here (this is not a
/// client-visible partitioner), crc32c is fast and well spread.
pub fn home_shard(topic: &str, partition: i32, shards: usize) -> usize {
    let h = crc32c::crc32c_append(crc32c::crc32c(topic.as_bytes()), &partition.to_be_bytes());
    (h as usize) % shards.max(1)
}

pub type PartitionKey = (Arc<str>, i32);

/// The leader epoch of every partition: a single node is the only leader there ever was.
pub const LEADER_EPOCH: i32 = 0;

pub struct ShardState {
    pub id: usize,
    pub ctx: Arc<BrokerContext>,
    pub io: Rc<IoBackend>,
    pub partitions: RefCell<HashMap<PartitionKey, Rc<Partition>>>,
    /// Partitions whose log could not be opened (e.g. corruption below the recovery point),
    /// with the reason: served as KAFKA_STORAGE_ERROR instead of stopping the whole broker,
    /// as Kafka takes a failed log offline.
    pub offline: RefCell<HashMap<PartitionKey, String>>,
    /// Request bytes in flight on this shard (`queued_max_request_bytes`).
    pub inflight_bytes: Arc<Semaphore>,
    pub metrics: ShardMetrics,
    pub fetch_sessions: RefCell<crate::fetch_session::FetchSessionCache>,
    /// Priority lanes (`strom.priority`): this shard's saturation model.
    pub priority: priority::PriorityGate,
}

pub use crate::metrics::ShardMetrics;

impl ShardState {
    /// A shard with no partitions open yet.
    pub fn new(id: usize, ctx: Arc<BrokerContext>, io: Rc<IoBackend>) -> ShardState {
        let config = &ctx.config;
        let sessions = crate::fetch_session::FetchSessionCache::new(
            id,
            config.max_incremental_fetch_session_cache_slots / ctx.shard_count().max(1),
        );
        let metrics = ShardMetrics::default();
        let priority = priority::PriorityGate::new(
            priority::GateConfig::from_broker(config),
            &metrics.registry,
        );
        ShardState {
            id,
            io,
            partitions: Default::default(),
            offline: Default::default(),
            inflight_bytes: Arc::new(Semaphore::new(
                config.queued_max_request_bytes.min(u32::MAX as u64) as usize,
            )),
            metrics,
            fetch_sessions: RefCell::new(sessions),
            priority,
            ctx,
        }
    }

    pub fn partition(&self, topic: &str, index: i32) -> Option<Rc<Partition>> {
        let key: (Arc<str>, i32) = (Arc::from(topic), index);
        self.partitions.borrow().get(&key).cloned()
    }

    /// Admits a Produce or Fetch of `lane` to the priority gate (`priority`): its throttle is
    /// 0 unless the shard is saturated (or probing) and a higher lane is busy.
    pub fn priority_admit(&self, lane: priority::Lane) -> priority::Admission {
        let bound = self
            .ctx
            .config
            .queued_max_request_bytes
            .min(u32::MAX as u64) as f64;
        let used = 1.0 - self.inflight_bytes.available_permits() as f64 / bound.max(1.0);
        self.priority.admit(lane, used, std::time::Instant::now())
    }

    pub fn count_connection(&self, delta: i64) {
        self.metrics.connections_open.add(delta);
        if delta > 0 {
            self.metrics.connections_accepted.inc();
        } else {
            self.metrics.connections_closed.inc();
        }
    }
}

/// Opens (creating when missing) one partition's log on this shard, its home. A no-op when it
/// is open already. `recovery_point` comes from the checkpoint at start; `None` means new.
pub fn open_partition(
    state: &ShardState,
    topic: &Arc<crate::metadata::catalog::TopicMeta>,
    index: i32,
    recovery_point: Option<i64>,
) -> Result<Rc<Partition>, storage::StorageError> {
    let key = (topic.name.clone(), index);
    if let Some(p) = state.partitions.borrow().get(&key) {
        return Ok(p.clone());
    }
    let data_dir = &state.ctx.config.data_dir;
    let log = storage::PartitionLog::open(
        data_dir,
        &topic.name,
        index,
        topic.settings.log.clone(),
        state.io.clone(),
        recovery_point.unwrap_or(0),
    )?;
    storage::logdir::write_partition_metadata(log.dir(), *topic.id.as_bytes())?;
    // Kafka's makeLeader: the leader's epoch starts at the log end. A single node is leader
    // with epoch 0 forever (Metadata says so), so this writes leader-epoch-checkpoint once.
    log.assign_leader_epoch(LEADER_EPOCH)?;
    let partition = Rc::new(Partition::new(
        topic.name.clone(),
        index,
        log,
        topic.settings.clone(),
        recovery_point.unwrap_or(0),
    )?);
    state.partitions.borrow_mut().insert(key, partition.clone());
    Ok(partition)
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<ShardState>>> = const { RefCell::new(None) };
}

/// The shard running on this thread, if any.
pub fn current() -> Option<Rc<ShardState>> {
    CURRENT.with(|c| c.borrow().clone())
}

pub fn set_current(state: Option<Rc<ShardState>>) {
    CURRENT.with(|c| *c.borrow_mut() = state);
}

/// The CPUs this process may run on (its affinity mask, as `taskset` or a cgroup set it), in
/// order; all of them by count if the mask cannot be read.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size into it for
    // the calling thread (pid 0), and CPU_ISSET only reads inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                .filter(|c| libc::CPU_ISSET(*c, &set))
                .collect();
            if !cpus.is_empty() {
                return cpus;
            }
        }
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n).collect()
}

/// Pins the calling thread to one CPU; a failure (e.g. restricted cpuset) only costs locality.
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it, and
    // sched_setaffinity reads it for the calling thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            tracing::warn!(cpu, error = %std::io::Error::last_os_error(), "could not pin shard thread");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_many_partitions_when_homing_then_stable_and_spread() {
        let mut counts = [0usize; 4];
        for p in 0..400 {
            let s = home_shard("orders", p, 4);
            assert_eq!(s, home_shard("orders", p, 4));
            counts[s] += 1;
        }
        assert!(counts.iter().all(|&c| c > 50), "{counts:?}");
        assert_eq!(home_shard("x", 0, 1), 0);
    }
}
