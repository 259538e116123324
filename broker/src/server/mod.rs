//! Starting and stopping the broker: data dir, shards, listeners, checkpoints.
//!
//! `Server::start` returns once every shard has recovered its partitions and is accepting,
//! with the bound addresses (tests bind port 0). `Server::shutdown` stops accepting, lets
//! in-flight requests finish, closes every log, writes Kafka's checkpoint files and the
//! clean-shutdown marker, and releases the data-dir lock.

pub mod admin;
pub mod admin_auth;
pub mod ai_http;
pub mod connection;
pub mod console;
pub mod http_access;
pub mod listener;
pub mod read_ahead;
pub mod sasl;
pub mod sessions;
pub mod steering;
pub mod stream_group;
pub mod streams;
pub mod tls;

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use tokio::sync::{mpsc, watch};

use crate::config::{BrokerConfig, Origin};
use crate::metadata::catalog::CatalogHandle;
use crate::security::ListenerInfo;
use crate::shard::{self, BrokerContext, ShardMessage};

/// How long a clustered node waits for the quorum to move its leaderships away before it
/// stops: one metadata write normally takes milliseconds; a quorum that cannot take it
/// within this long will not, and the node then stops as after a kill.
const CONTROLLED_SHUTDOWN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub struct Server {
    /// The first listener's bound address (`--listen`'s, in the one-listener form).
    pub kafka_addr: SocketAddr,
    /// Every listener, bound, in the order of `listeners`.
    pub listeners: Vec<Arc<ListenerInfo>>,
    pub metrics_addr: SocketAddr,
    /// The Schema Registry's address, when it is serving.
    pub schema_registry_addr: Option<SocketAddr>,
    pub ctx: Arc<BrokerContext>,
    /// The connectors `strom serve` runs beside the broker, for the console to show.
    pub connectors: Arc<console::Connectors>,
    shutdown: watch::Sender<bool>,
    shards: Vec<JoinHandle<anyhow::Result<shard::run::ShardReport>>>,
    admin: Option<JoinHandle<()>>,
    schema_registry: Option<JoinHandle<()>>,
    /// Holds the steering programs' descriptors (one per listener) until shutdown.
    _steering: Vec<strom_ebpf::Steering>,
    /// Reloads changed TLS files while the broker runs (stops when dropped).
    _tls_reloader: Option<tls::Reloader>,
    _jwks_refresher: Option<crate::security::jwks::Refresher>,
    _admin_tls_reloader: Option<tls::Reloader>,
    _lock: storage::logdir::DirLock,
}

impl Server {
    pub fn start(
        config: BrokerConfig,
        origins: std::collections::BTreeMap<String, Origin>,
    ) -> anyhow::Result<Server> {
        let data_dir = config.data_dir.clone();
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("creating data dir {}", data_dir.display()))?;
        let lock = storage::logdir::lock(&data_dir)
            .with_context(|| format!("locking data dir {}", data_dir.display()))?;
        let meta = storage::logdir::ensure_meta_properties(&data_dir, config.node_id)
            .context("reading meta.properties")?;
        let cluster_id = if config.cluster_id.is_empty() {
            meta.cluster_id.clone()
        } else {
            config.cluster_id.clone()
        };
        let swept = storage::logdir::sweep_deleted_dirs(&data_dir);
        if swept > 0 {
            tracing::info!(dirs = swept, "removing partition dirs a delete left behind");
        }
        let marker = storage::logdir::clean_shutdown_marker(&data_dir);
        let clean = marker.exists();
        if clean {
            std::fs::remove_file(&marker).context("removing clean-shutdown marker")?;
        } else {
            tracing::info!(
                "no clean-shutdown marker: logs are recovered from their recovery points"
            );
        }
        let checkpoints = shard::checkpoint::StartCheckpoints::read(&data_dir);
        let registry_listen_set = origins.contains_key("schema_registry_listen");
        let catalog = CatalogHandle::open(&data_dir, config.clone(), origins)?;
        let producer_ids = crate::metadata::producer_ids::ProducerIdAllocator::open(&data_dir)?;
        let features = crate::metadata::features::FeaturesHandle::open(&data_dir, config.node_id)?;

        let shard_count = config.shard_count();
        let listener_configs = config.listener_configs().context("listeners")?;
        let tls = if listener_configs.iter().any(|l| l.protocol.tls()) {
            let settings = config
                .tls_settings()
                .map_err(|(key, msg)| anyhow::anyhow!("{key}: {msg}"))?;
            Some(Arc::new(
                tls::TlsAcceptors::load(settings, &config.ssl_principal_mapping_rules)
                    .context("loading TLS key, certificates and truststore")?,
            ))
        } else {
            None
        };
        // Per listener, one reuseport socket per shard: `groups[l][shard]`.
        let mut infos = Vec::new();
        let mut groups: Vec<Vec<std::net::TcpListener>> = Vec::new();
        for l in &listener_configs {
            let first = listener::bind_reuseport(l.bind)
                .with_context(|| format!("binding listener {}://{}", l.name, l.bind))?;
            let addr = first.local_addr()?;
            let mut group = vec![first];
            for _ in 1..shard_count {
                group.push(listener::bind_reuseport(addr)?);
            }
            infos.push(Arc::new(ListenerInfo::bound(l, addr)));
            groups.push(group);
        }
        let kafka_addr = infos[0].bound;
        let mut steers = Vec::new();
        let mut steering_probe = None;
        for group in &groups {
            let (steer, probe) = steering::attach(&config, group);
            steers.push(steer);
            steering_probe.get_or_insert(probe);
        }
        let steering_probe = steering_probe.expect("at least one listener");
        // One socket of every listener for each shard.
        let mut per_shard: Vec<Vec<(Arc<ListenerInfo>, std::net::TcpListener)>> =
            (0..shard_count).map(|_| Vec::new()).collect();
        for (info, group) in infos.iter().zip(groups) {
            for (shard, l) in group.into_iter().enumerate() {
                per_shard[shard].push((info.clone(), l));
            }
        }
        let tls_reloader = match &tls {
            Some(t) => Some(tls::spawn_reloader(
                t.clone(),
                std::time::Duration::from_millis(config.ssl_reload_interval_ms as u64),
            )?),
            None => None,
        };
        let (oauthbearer, jwks_refresher) = oauthbearer_validator(&config)?.unzip();
        let metrics_std = std::net::TcpListener::bind(config.metrics_listen)
            .with_context(|| format!("binding admin listener {}", config.metrics_listen))?;
        let metrics_addr = metrics_std.local_addr()?;

        let mut senders = Vec::new();
        let mut receivers = Vec::new();
        for _ in 0..shard_count {
            let (tx, rx) = mpsc::channel::<ShardMessage>(shard::SHARD_QUEUE_DEPTH);
            senders.push(tx);
            receivers.push(rx);
        }
        let acls: Arc<dyn crate::metadata::acls::AclStore> =
            Arc::new(crate::metadata::acls::FileAclStore::open(&data_dir).context("reading ACLs")?);
        let remote =
            crate::tiered::RemoteLogManager::start(&config).context("starting tiered storage")?;
        let ctx = Arc::new(BrokerContext {
            cluster: Default::default(),
            remote,
            authorizer: BrokerContext::authorizer_for(&config, &acls),
            quotas: BrokerContext::quotas_for(&config, &data_dir)
                .context("reading client quotas")?,
            acls,
            config: config.clone(),
            catalog,
            cluster_id,
            shard_senders: senders,
            producer_ids,
            features,
            started_ms: crate::now_ms(),
            steering: steering_probe,
            schema_view: Default::default(),
            cleaner_checkpoints: Arc::new(crate::shard::cleaner_checkpoints::Checkpoints::load(
                &data_dir,
            )),
            loggers: crate::logging::process(),
            group_configs: crate::metadata::group_configs::GroupConfigsHandle::open(&data_dir)?,
            telemetry: crate::telemetry::ClientTelemetry::open(
                &data_dir,
                &config.otel_exporter_otlp_endpoint,
            )?,
            credentials: Arc::new(
                crate::metadata::scram::FileCredentialStore::open(&data_dir)
                    .context("reading SCRAM credentials")?,
            ),
            oauthbearer,
            otel: crate::otel::Otel::from_config(&config)
                .context("the OpenTelemetry exporter")?
                .map(Arc::new),
        });
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let ready_flag = Arc::new(AtomicBool::new(false));
        let connectors = Arc::new(console::Connectors::default());
        let admin_reloader;
        // The schema registry's port is behind the same TLS and authentication.
        let admin_security;
        // The registry starts after the admin port; the HTTP proxy finds it here once it runs.
        let registry: crate::http_proxy::Registry = Default::default();
        let admin = {
            let ready = ready_flag.clone();
            let ctx = ctx.clone();
            let shutdown = shutdown_rx.clone();
            let router = admin::broker_router(ready, ctx.clone(), connectors.clone());
            // SSE streams, key reads and the HTTP proxy (long polls, produce streams): outside
            // the port's request limit, each with its own.
            let credentials = ctx.credentials.clone();
            let streams = ai_http::router(ctx.clone(), shutdown.clone()).merge(
                crate::http_proxy::router(ctx, registry.clone(), shutdown.clone()).layer(
                    tower::limit::GlobalConcurrencyLimitLayer::new(
                        crate::http_proxy::MAX_CONCURRENT,
                    ),
                ),
            );
            let security = admin_auth::AdminSecurity::from_config(&config, credentials)
                .context("the admin port's TLS and authentication")?
                .map(Arc::new);
            admin_reloader = match security.as_ref().and_then(|s| s.tls.clone()) {
                Some(t) => Some(tls::spawn_reloader(
                    t,
                    std::time::Duration::from_millis(config.ssl_reload_interval_ms as u64),
                )?),
                None => None,
            };
            admin_security = security.clone();
            admin::spawn_thread_with("admin", metrics_std, router, streams, shutdown, security)?
        };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<usize, String>>();
        let checkpoints = Arc::new(checkpoints);
        // Each shard on its own core when the shards take every CPU this process may use
        // (Redpanda's shape). With fewer shards — several brokers on one machine, as tests
        // and benches run them — pinning would stack every broker's shard i on core i; the
        // kernel's scheduler places them better.
        let cpus = shard::allowed_cpus();
        let pin = (shard_count == cpus.len()).then_some(cpus);
        if pin.is_none() {
            tracing::info!(
                shards = shard_count,
                "shards not pinned: fewer shards than CPUs"
            );
        }
        // Before the shards accept connections, so that no request is ever answered as a single
        // node; the entries it applies wait in the shards' inboxes until the shards run.
        // Every listener is registered: a client is answered with the endpoints of the one it
        // came in on, and the brokers call each other on the inter-broker one.
        let endpoints = infos
            .iter()
            .map(|l| crate::cluster::image::Endpoint {
                listener: l.name.clone(),
                host: l.advertised_host.clone(),
                port: l.advertised_port,
                protocol: l.protocol.name().to_string(),
            })
            .collect();
        let tls_client = tls
            .clone()
            .map(|t| Arc::new(move || t.client_config()) as crate::kafka_conn::TlsClient);
        let inter_broker = config
            .inter_broker(&listener_configs)
            .map_err(|(key, msg)| format!("{key}: {msg}"))
            .and_then(|s| crate::cluster::inter_broker::InterBroker::new(s, tls_client));
        let inter_broker = match inter_broker {
            Ok(ib) => ib,
            Err(e) => {
                let _ = shutdown_tx.send(true);
                anyhow::bail!("the inter-broker listener: {e}");
            }
        };
        // The coordinators follow their internal partitions' leadership.
        let followers: Vec<crate::cluster::Follower> = vec![Box::new(|ctx| {
            Box::pin(crate::coordinator::leadership::start_on_shards(ctx))
        })];
        match crate::cluster::start(ctx.clone(), endpoints, inter_broker, followers) {
            Ok(Some(cluster)) => {
                let _ = ctx.cluster.set(cluster);
            }
            Ok(None) => {}
            Err(e) => {
                let _ = shutdown_tx.send(true);
                return Err(e).context("starting the metadata quorum");
            }
        }
        let mut shards = Vec::new();
        for (id, (listeners, rx)) in per_shard.into_iter().zip(receivers).enumerate() {
            let ctx = ctx.clone();
            let tls = tls.clone();
            let shutdown = shutdown_rx.clone();
            let ready = ready_tx.clone();
            let points = checkpoints.clone();
            let core = pin.as_ref().map(|cpus| cpus[id]);

            let handle = std::thread::Builder::new()
                .name(format!("shard-{id}"))
                .spawn(move || {
                    if let Some(cpu) = core {
                        shard::pin_to_cpu(cpu);
                    }
                    shard::run::run_shard(
                        id,
                        ctx,
                        rx,
                        shutdown,
                        ready,
                        points,
                        move |state, shutdown| {
                            let mut loops = Vec::new();
                            for (info, l) in listeners {
                                let l = tokio::net::TcpListener::from_std(l)?;
                                let (state, tls, sd) =
                                    (state.clone(), tls.clone(), shutdown.clone());
                                loops.push(listener::accept_loop(state, l, info, tls, sd));
                            }
                            Ok(async move {
                                futures::future::join_all(loops).await;
                            })
                        },
                    )
                })?;
            shards.push(handle);
        }
        drop(ready_tx);
        for _ in 0..shard_count {
            match ready_rx.recv() {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    let _ = shutdown_tx.send(true);
                    anyhow::bail!("shard failed to start: {e}");
                }
                Err(_) => anyhow::bail!("a shard thread died during start"),
            }
        }
        // After the shards: the registry replays `_schemas` through them before it answers.
        let (schema_registry, schema_registry_addr) = start_schema_registry(
            &ctx,
            registry_listen_set,
            shutdown_rx.clone(),
            admin_security,
            registry,
        )?;
        ready_flag.store(true, std::sync::atomic::Ordering::Release);
        let listeners = infos
            .iter()
            .map(|i| format!("{}://{}", i.name, i.bound))
            .collect::<Vec<_>>()
            .join(",");
        tracing::info!(%kafka_addr, %listeners, %metrics_addr, schema_registry = ?schema_registry_addr,
            shards = shard_count, clean_start = clean, "strom is serving");
        Ok(Server {
            kafka_addr,
            listeners: infos,
            _tls_reloader: tls_reloader,
            _jwks_refresher: jwks_refresher,
            _admin_tls_reloader: admin_reloader,
            metrics_addr,
            schema_registry_addr,
            ctx,
            connectors,
            shutdown: shutdown_tx,
            shards,
            admin: Some(admin),
            schema_registry,
            _steering: steers,
            _lock: lock,
        })
    }

    /// Clean shutdown: stop accepting, finish in-flight requests, close logs, write the
    /// checkpoints and the clean-shutdown marker.
    pub fn shutdown(mut self) -> anyhow::Result<()> {
        // The quorum first: applying its entries needs the shards. Before it, the partitions
        // this node leads move to other replicas while it still answers (controlled
        // shutdown), so a rolling restart costs clients retriable errors only.
        if let Some(c) = self.ctx.cluster.get() {
            c.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT);
            c.stop();
        }
        let _ = self.shutdown.send(true);
        // The registry first: its writes go through the shards.
        if let Some(r) = self.schema_registry.take() {
            let _ = r.join();
        }
        let mut entries = Vec::new();
        let mut failed = false;
        for h in self.shards.drain(..) {
            match h.join() {
                Ok(Ok(report)) => entries.extend(report),
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "shard stopped with an error");
                    failed = true;
                }
                Err(_) => failed = true,
            }
        }
        if let Some(a) = self.admin.take() {
            let _ = a.join();
        }
        // Nothing makes spans any more: send the ones still queued (`Otel::shutdown`).
        if let Some(o) = &self.ctx.otel {
            o.shutdown();
        }
        let dir = &self.ctx.config.data_dir;
        shard::checkpoint::write_checkpoints(dir, &entries)?;
        if !failed {
            storage::logdir::write_atomic(&storage::logdir::clean_shutdown_marker(dir), b"")?;
        }
        tracing::info!("shut down cleanly");
        Ok(())
    }
}

/// OAUTHBEARER's validator and its JWKS refresh thread, when the mechanism is enabled; a
/// JWKS that cannot be read stops the start.
fn oauthbearer_validator(
    config: &BrokerConfig,
) -> anyhow::Result<
    Option<(
        Arc<crate::security::oauthbearer::OAuthValidator>,
        crate::security::jwks::Refresher,
    )>,
> {
    use crate::security::jwks::{Jwks, JwksSource};
    if !config
        .sasl_mechanisms()
        .contains(&crate::config::security::SaslMechanism::OAuthBearer)
    {
        return Ok(None);
    }
    let source = JwksSource::parse(&config.sasl_oauthbearer_jwks_endpoint_url)?;
    let jwks = Arc::new(Jwks::load(source).context("sasl.oauthbearer.jwks.endpoint.url")?);
    let refresher = crate::security::jwks::spawn_refresher(
        jwks.clone(),
        std::time::Duration::from_millis(config.sasl_oauthbearer_jwks_endpoint_refresh_ms as u64),
    )?;
    let validator = crate::security::oauthbearer::OAuthValidator {
        rules: crate::security::oauthbearer::TokenRules::from_config(config),
        jwks,
    };
    Ok(Some((Arc::new(validator), refresher)))
}

/// Binds and starts the Schema Registry (`schema_registry_enable`). The default address
/// being taken is logged and the broker runs without a registry (another registry may own
/// that port on the host); an address the operator set must bind.
fn start_schema_registry(
    ctx: &Arc<BrokerContext>,
    listen_set_explicitly: bool,
    shutdown: watch::Receiver<bool>,
    security: Option<Arc<admin_auth::AdminSecurity>>,
    published: crate::http_proxy::Registry,
) -> anyhow::Result<(Option<JoinHandle<()>>, Option<SocketAddr>)> {
    let config = &ctx.config;
    if !config.schema_registry_enable {
        return Ok((None, None));
    }
    let listener = match std::net::TcpListener::bind(config.schema_registry_listen) {
        Ok(l) => l,
        Err(e) if !listen_set_explicitly => {
            tracing::warn!(addr = %config.schema_registry_listen, error = %e,
                "schema registry not started: its default address is not available (set schema_registry_listen)");
            return Ok((None, None));
        }
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "binding schema registry listener {}",
                    config.schema_registry_listen
                )
            })
        }
    };
    let addr = listener.local_addr()?;
    let guard = security.map(|s| admin_auth::Guard::new(s, admin_auth::RefusalBody::Confluent));
    let serve: crate::schema_registry::Serve = Box::new(move |listener, router, stop| {
        Box::pin(admin::serve(listener, router, guard, stop))
    });
    let handle = crate::schema_registry::spawn(ctx.clone(), listener, shutdown, serve, published)?;
    Ok((Some(handle), Some(addr)))
}
