//! Broker configuration: one typed struct, loaded from (lowest to highest precedence)
//! embedded defaults, a TOML file, `STROM_*` environment variables and command-line flags.
//!
//! Keys are Kafka's broker config names where Kafka has one, written with underscores
//! (`log_retention_check_interval_ms` is Kafka's `log.retention.check.interval.ms`). The TOML
//! file may use either spelling: dotted keys are flattened and normalised to underscores, so a
//! Kafka-style `log.retention.check.interval.ms = 1000` works too. The environment variable is
//! `STROM_` plus the key uppercased (`STROM_LOG_RETENTION_CHECK_INTERVAL_MS`).

pub mod ai_flow;
pub mod dynamic;
pub mod effective;
pub mod group;
pub mod inter_broker;
pub mod kafka_broker_configs;
pub mod listeners;
pub mod rack;
pub mod schema_validation;
pub mod security;
pub mod share_reset;
pub mod tiered;
pub mod topic;
pub mod topic_def;
pub mod topic_set;

pub use rack::RACK_AWARE_REPLICA_SELECTOR;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Every field: unit, default, bounds, whether a restart is needed (all of them need one
/// until dynamic broker configs land).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BrokerConfig {
    /// The shorthand for one PLAINTEXT listener (`--listen`), used when `listeners` is
    /// empty. Default 127.0.0.1:9092.
    pub listen: SocketAddr,
    /// Address given to clients in Metadata for the `listen` listener; defaults to `listen`.
    /// `host:port`.
    pub advertised_listener: Option<String>,
    /// Kafka `listeners`: `NAME://HOST:PORT,...` (`config::listeners`). Empty (default) = one
    /// PLAINTEXT listener on `listen`.
    pub listeners: String,
    /// Kafka `advertised.listeners`: `NAME://HOST:PORT,...` for the listeners whose address
    /// clients are given differs from the bound one. Default empty.
    pub advertised_listeners: String,
    /// Kafka `listener.security.protocol.map`: `NAME:PROTOCOL,...`. Default maps PLAINTEXT,
    /// SSL, SASL_PLAINTEXT and SASL_SSL to themselves.
    pub listener_security_protocol_map: String,
    /// TLS and client-certificate settings (Kafka's `ssl.*`), `config::security`.
    /// Kafka `ssl.keystore.type`: only "PEM" (no JKS/PKCS12 without a JVM). Default "PEM".
    pub ssl_keystore_type: String,
    /// Kafka `ssl.keystore.location`: a PEM file with the private key (PKCS#8, PKCS#1 or
    /// SEC1, unencrypted) and the certificate chain. Default empty.
    pub ssl_keystore_location: String,
    /// Kafka `ssl.keystore.key`: the private key as PEM text (instead of a file). Sensitive.
    pub ssl_keystore_key: String,
    /// Kafka `ssl.keystore.certificate.chain`: the certificate chain as PEM text.
    pub ssl_keystore_certificate_chain: String,
    /// Kafka `ssl.truststore.type`: only "PEM". Default "PEM".
    pub ssl_truststore_type: String,
    /// Kafka `ssl.truststore.location`: a PEM file of CA certificates that client
    /// certificates must chain to. Default empty.
    pub ssl_truststore_location: String,
    /// Kafka `ssl.truststore.certificates`: the CA certificates as PEM text.
    pub ssl_truststore_certificates: String,
    /// Kafka `ssl.client.auth`: "none" (default), "requested" or "required". Applies to SSL
    /// listeners; SASL_SSL listeners never ask for a certificate (Kafka's KIP-684).
    pub ssl_client_auth: String,
    /// Kafka `ssl.enabled.protocols`: a subset of "TLSv1.2,TLSv1.3" (the default).
    pub ssl_enabled_protocols: String,
    /// Kafka `ssl.principal.mapping.rules`: how a client certificate's subject (RFC 2253)
    /// becomes the principal's name. Default "DEFAULT" (the subject as it is).
    pub ssl_principal_mapping_rules: String,
    /// How often the key, certificate and truststore files are checked for changes; a
    /// change is loaded for new connections without a restart. Milliseconds, >= 100.
    /// Default 10000.
    pub ssl_reload_interval_ms: i64,
    /// Kafka `inter.broker.listener.name`: the listener other brokers' calls go to (follower
    /// fetches, transaction markers; `config::inter_broker`). Empty (default): the PLAINTEXT
    /// listener, else the first. Exclusive with `security_inter_broker_protocol`.
    pub inter_broker_listener_name: String,
    /// Kafka `security.inter.broker.protocol`: the inter-broker listener named by its protocol
    /// (the listener of that name). Empty (default) = not set.
    pub security_inter_broker_protocol: String,
    /// Kafka `sasl.mechanism.inter.broker.protocol` on a SASL inter-broker listener: PLAIN,
    /// SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default GSSAPI is not implemented). Empty
    /// (default): the mechanism of the listener's only JAAS config.
    pub sasl_mechanism_inter_broker_protocol: String,
    /// Kafka `listener.name.<listener>.<mechanism>.sasl.jaas.config`: the broker's own SASL
    /// credentials on a listener (`config::inter_broker`); keys with a listener in their name,
    /// so `load` collects them here. Sensitive.
    #[serde(skip)]
    pub listener_jaas: inter_broker::JaasConfigs,
    /// Kafka `sasl.enabled.mechanisms` on SASL_PLAINTEXT and SASL_SSL listeners: a subset of
    /// PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. Default "SCRAM-SHA-256,SCRAM-SHA-512" (Kafka's
    /// default, GSSAPI, is not implemented; PLAIN sends the password, so it is opt-in).
    pub sasl_enabled_mechanisms: String,
    /// Kafka `connections.max.reauth.ms` (KIP-368): a SASL session lasts this long; the client
    /// re-authenticates before it ends, and a connection whose session has ended is closed at
    /// its next request. 0 (default) = sessions do not expire.
    pub connections_max_reauth_ms: i64,
    /// Kafka `connection.failed.authentication.delay.ms`: a failed authentication is answered
    /// after this delay, then the connection is closed. Default 100, >= 0.
    pub connection_failed_authentication_delay_ms: i64,
    /// Kafka `sasl.server.max.receive.size`: the largest request accepted before a SASL
    /// connection has authenticated, bytes. Default 524288.
    pub sasl_server_max_receive_size: i32,
    /// OAUTHBEARER (`security::oauthbearer`), Kafka's `sasl.oauthbearer.*` broker settings.
    /// Kafka `sasl.oauthbearer.jwks.endpoint.url`: where the keys that sign tokens are, a
    /// `file://` JWKS or an `http(s)://` URL on this machine. Needed when OAUTHBEARER is on.
    pub sasl_oauthbearer_jwks_endpoint_url: String,
    /// Kafka `sasl.oauthbearer.jwks.endpoint.refresh.ms`: how often the JWKS is read again.
    /// Default 3600000, >= 1000.
    pub sasl_oauthbearer_jwks_endpoint_refresh_ms: i64,
    /// Kafka `sasl.oauthbearer.expected.audience`: comma-separated; a token's `aud` must name
    /// one. Empty (default): a token must carry no `aud` (jose4j's rule, which Kafka uses).
    pub sasl_oauthbearer_expected_audience: String,
    /// Kafka `sasl.oauthbearer.expected.issuer`: the `iss` tokens must carry; empty = any.
    pub sasl_oauthbearer_expected_issuer: String,
    /// Kafka `sasl.oauthbearer.sub.claim.name`: the claim that names the principal. "sub".
    pub sasl_oauthbearer_sub_claim_name: String,
    /// Kafka `sasl.oauthbearer.scope.claim.name`: the scope claim (a string or a list). "scope".
    pub sasl_oauthbearer_scope_claim_name: String,
    /// Kafka `sasl.oauthbearer.clock.skew.seconds`: slack for `exp` and `nbf`. Default 30.
    pub sasl_oauthbearer_clock_skew_seconds: i64,
    /// Kafka `quota.window.num`: how many windows a client quota's rate is measured over
    /// (`quota::rate`). Default 11, >= 1. Restart needed.
    pub quota_window_num: u32,
    /// Kafka `quota.window.size.seconds`: each quota window's length, seconds. Default 1,
    /// >= 1. Restart needed.
    pub quota_window_size_seconds: u32,
    /// Kafka `authorizer.class.name`: empty (default) = no authorizer, every request is
    /// allowed; `org.apache.kafka.metadata.authorizer.StandardAuthorizer` turns ACLs on
    /// (`security::authorizer`).
    pub authorizer_class_name: String,
    /// Kafka `super.users`: `;`-separated principals (`User:admin`) that pass every check.
    pub super_users: String,
    /// Kafka `allow.everyone.if.no.acl.found`: a resource with no ACL is open to all.
    /// Default false.
    pub allow_everyone_if_no_acl_found: bool,
    /// Admin/metrics HTTP listener (`/health`, `/ready`, `/metrics`). Default 127.0.0.1:9644.
    pub metrics_listen: SocketAddr,
    /// The admin port over HTTPS with the broker's `ssl.keystore.*` (`server::admin_auth`).
    /// Default false.
    pub admin_ssl_enable: bool,
    /// Client certificates on the HTTPS admin port: "none" (default), "requested",
    /// "required" (against `ssl.truststore.*`).
    pub admin_ssl_client_auth: String,
    /// How admin requests authenticate: "basic" (the SCRAM users' passwords) and/or "mtls"
    /// (the client certificate), comma-separated; empty (default) = open. `/health` is open.
    pub admin_authentication: String,
    /// `;`-separated principals (`User:ops`) the admin port lets in; empty = any that
    /// authenticates.
    pub admin_principals: String,
    /// Data directory (Kafka's `log.dirs`, one dir). Default `./strom-data`.
    pub data_dir: PathBuf,
    /// Number of shards (one OS thread pinned per core). 0 = the cores available. Max 256.
    pub shards: usize,
    /// Kafka `node.id`. Default 0. Must be >= 0.
    pub node_id: i32,
    /// Cluster id reported in Metadata and meta.properties; generated on first start if empty.
    pub cluster_id: String,
    /// Kafka `controller.quorum.voters`: `ID@HOST:PORT,...`, the nodes of the metadata quorum
    /// and their Raft (peer) addresses; this node's `node_id` must be one of them and its
    /// entry is the address it binds. Empty (default) = a single node. Restart needed.
    pub controller_quorum_voters: String,
    /// `strom.raft.listen`: HOST:PORT a node outside `controller_quorum_voters` (broker-only,
    /// a quorum observer) binds and is sent the metadata log on. Restart needed.
    pub raft_listen: String,
    /// Kafka `auto.leader.rebalance.enable`: on a cluster, the controller gives partitions
    /// back to their preferred (first) replica once it is in sync again, every
    /// `leader_imbalance_check_interval_seconds`. Default true. Restart needed.
    pub auto_leader_rebalance_enable: bool,
    /// Kafka `leader.imbalance.check.interval.seconds`: how often the controller looks for
    /// partitions not led by their preferred replica. Default 300, >= 1. Restart needed.
    pub leader_imbalance_check_interval_seconds: u64,
    /// Kafka `broker.rack`: this broker's rack (zone), registered in the metadata quorum and
    /// served in Metadata and DescribeCluster; replicas are spread over racks at creation
    /// (`config/rack.rs`). Empty (default) = none. Restart needed.
    pub broker_rack: String,
    /// Kafka `replica.selector.class` (KIP-392): empty (default) = consumers read from the
    /// leader; `RACK_AWARE_REPLICA_SELECTOR` = from an in-sync replica in their `client.rack`
    /// (`preferred_read_replica`), the only other value. Restart needed.
    pub replica_selector_class: String,
    /// Kafka `auto.create.topics.enable`. Default true.
    pub auto_create_topics_enable: bool,
    /// Kafka `num.partitions`: partitions of auto-created topics. Default 1, >= 1.
    pub num_partitions: i32,
    /// Kafka `default.replication.factor`: replicas of auto-created topics and of
    /// CreateTopics with -1. Default 1; above 1 only with `controller.quorum.voters` (a
    /// single node has one replica), and checked against the live brokers at creation.
    pub default_replication_factor: i16,
    /// Kafka `socket.request.max.bytes`: largest request frame accepted, bytes. Default 100 MiB.
    pub socket_request_max_bytes: u32,
    /// Kafka `queued.max.request.bytes`: bytes of requests in flight per shard before the
    /// broker stops reading sockets (backpressure). Default 256 MiB (Kafka: -1 = unbounded;
    /// we never allow unbounded).
    pub queued_max_request_bytes: u64,
    /// In-flight requests per connection before we stop reading it. Default 64.
    pub max_in_flight_per_connection: usize,
    /// Priority lanes (`shard::priority`, `strom.priority`): α of the adaptive saturation
    /// threshold β = α · (1 + cv(sizes)) · σ(latency). Default 0.8 (the requirements
    /// document's), > 0.
    pub priority_alpha: f64,
    /// A fixed saturation threshold on the shard's produce latency, ms, instead of the
    /// adaptive one (the requirements document's "static" baseline); -1 (default) = adaptive.
    pub priority_static_threshold_ms: i64,
    /// Longest throttle one request of a lower lane gets, ms: every lane keeps at least one
    /// request per this long (no lane starves). Default 500, >= 1.
    pub priority_max_throttle_ms: i64,
    /// `otel.exporter.otlp.endpoint`: the OTLP/HTTP collector traced records' spans go to
    /// (`http://host:4318`, `/v1/traces` appended unless a path is given; `otel`). Empty
    /// (default) = no spans, and no header is looked at.
    pub otel_exporter_otlp_endpoint: String,
    /// `otel.traces.sampler.ratio`: the share of traces (by trace id) that get spans,
    /// 0..=1. Default 1.
    pub otel_traces_sampler_ratio: f64,
    /// Kafka `message.max.bytes`: default topic `max.message.bytes`, bytes. Default 1048588.
    pub message_max_bytes: i32,
    /// Kafka `log.segment.bytes`. Default 1 GiB. Min 14 (Kafka's lower bound).
    pub log_segment_bytes: i64,
    /// Kafka `log.roll.ms`. Default 7 days.
    pub log_roll_ms: i64,
    /// Kafka `log.retention.ms`. Default 7 days; -1 = forever.
    pub log_retention_ms: i64,
    /// Kafka `log.retention.bytes`. Default -1 (no limit).
    pub log_retention_bytes: i64,
    /// Kafka `log.retention.check.interval.ms`. Default 300000.
    pub log_retention_check_interval_ms: i64,
    /// Kafka `log.index.interval.bytes`. Default 4096.
    pub log_index_interval_bytes: i32,
    /// Kafka `log.index.size.max.bytes`. Default 10 MiB.
    pub log_index_size_max_bytes: i32,
    /// Kafka `log.flush.interval.messages`. Default i64::MAX (flush by acks=all and the OS).
    pub log_flush_interval_messages: i64,
    /// Kafka `log.flush.interval.ms`. Default i64::MAX.
    pub log_flush_interval_ms: i64,
    /// Kafka `log.flush.offset.checkpoint.interval.ms`: how often recovery points are written.
    /// Default 60000.
    pub log_flush_offset_checkpoint_interval_ms: i64,
    /// Kafka `log.cleanup.policy`. Default "delete".
    pub log_cleanup_policy: String,
    /// Kafka `log.cleaner.enable`: run the log cleaner for compacted topics. Default true.
    pub log_cleaner_enable: bool,
    /// Kafka `remote.log.storage.system.enable`: tiered storage (docs/tiered-storage.md).
    /// Default false: no remote thread, no housekeeping job, nothing on the hot path.
    pub remote_log_storage_system_enable: bool,
    /// The filesystem backend's root directory; empty = not this backend. Restart needed.
    pub remote_storage_local_path: String,
    /// The S3 backend: endpoint URL (`http://127.0.0.1:9000`; empty = AWS for the region),
    /// bucket (empty = not this backend) and region (default "us-east-1"). Credentials come
    /// from the AWS environment variables, never from this file. Restart needed.
    pub remote_storage_s3_endpoint: String,
    pub remote_storage_s3_bucket: String,
    pub remote_storage_s3_region: String,
    /// Kafka `remote.log.manager.task.interval.ms`: how often each shard looks for segments
    /// to copy and remote segments to expire. Default 30000, >= 1.
    pub remote_log_manager_task_interval_ms: i64,
    /// Kafka `remote.log.manager.copier.thread.pool.size`: segment copies in flight across
    /// the broker. Default 2 (Kafka: 10), 1..=64.
    pub remote_log_manager_copier_thread_pool_size: usize,
    /// Kafka `remote.log.reader.threads`: GETs of remote segment data in flight across the
    /// broker (fetches below the local log start). Default 5 (Kafka: 10), 1..=64.
    pub remote_log_reader_threads: usize,
    /// Bytes of remote index objects and `.log` chunks kept in memory for fetches (least
    /// recently used out first). Default 64 MiB, >= 1 MiB.
    pub remote_fetch_cache_bytes: u64,
    /// Kafka `log.cleaner.backoff.ms`: how long each shard's cleaner sleeps when no log
    /// needs cleaning. Default 15000.
    pub log_cleaner_backoff_ms: i64,
    /// Kafka `log.cleaner.io.max.bytes.per.second`: read plus write rate of each shard's
    /// cleaner. Default unlimited (Kafka's Double.MAX_VALUE).
    pub log_cleaner_io_max_bytes_per_second: f64,
    /// Kafka `log.cleaner.dedupe.buffer.size`: memory for the key map of one cleaning
    /// pass, split across shards (Kafka splits it across cleaner threads). Default 128 MiB.
    pub log_cleaner_dedupe_buffer_size: i64,
    /// Kafka `log.message.timestamp.type`. "CreateTime" (default) or "LogAppendTime".
    pub log_message_timestamp_type: String,
    /// Kafka `file.delete.delay.ms`. Default 60000.
    pub file_delete_delay_ms: i64,
    /// Kafka `offsets.topic.num.partitions`. Default 50.
    pub offsets_topic_num_partitions: i32,
    /// Kafka `transaction.state.log.num.partitions`. Default 50.
    pub transaction_state_log_num_partitions: i32,
    /// Kafka `offsets.topic.replication.factor`: replicas of `__consumer_offsets` on a
    /// cluster (its creation waits until that many brokers are registered, as Kafka's).
    /// A single node ignores it (one replica). Default 3, >= 1.
    pub offsets_topic_replication_factor: i16,
    /// Kafka `transaction.state.log.replication.factor`, as the offsets topic's. Default 3.
    pub transaction_state_log_replication_factor: i16,
    /// Kafka `transaction.state.log.min.isr`: `min.insync.replicas` of
    /// `__transaction_state` on a cluster. Default 2, >= 1.
    pub transaction_state_log_min_isr: i32,
    /// Kafka `transaction.max.timeout.ms`: the largest `transaction.timeout.ms` a producer may
    /// ask for; larger gets INVALID_TRANSACTION_TIMEOUT. Default 900000, >= 1.
    pub transaction_max_timeout_ms: i32,
    /// Kafka `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often the
    /// coordinator looks for transactions open longer than their timeout and aborts them.
    /// Default 10000, >= 1. Needs a restart.
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: i64,
    /// Kafka `transactional.id.expiration.ms`: a transactional id with no transaction open
    /// (Empty, CompleteCommit, CompleteAbort) and no update for this long is removed from the
    /// coordinator (a tombstone in `__transaction_state`), so idle ids do not hold memory
    /// forever; its producer then starts afresh with InitProducerId. Default 604800000
    /// (7 days), 1..=2147483647.
    pub transactional_id_expiration_ms: i64,
    /// Kafka `transaction.remove.expired.transaction.cleanup.interval.ms`: how often the
    /// coordinator looks for expired transactional ids. Default 3600000, >= 1. Needs a restart.
    pub transaction_remove_expired_transaction_cleanup_interval_ms: i64,
    /// Kafka `group.initial.rebalance.delay.ms`: how long a new (empty) group waits for more
    /// members before its first rebalance completes, ms. Default 3000, >= 0.
    pub group_initial_rebalance_delay_ms: i64,
    /// Kafka `group.min.session.timeout.ms`. Default 6000.
    pub group_min_session_timeout_ms: i32,
    /// Kafka `group.max.session.timeout.ms`. Default 1800000.
    pub group_max_session_timeout_ms: i32,
    /// Kafka `group.max.size`: members per classic group. Default 2147483647, >= 1.
    pub group_max_size: i32,
    /// Kafka `group.consumer.session.timeout.ms`: KIP-848 members that send no heartbeat for
    /// this long leave the group. Default 45000.
    pub group_consumer_session_timeout_ms: i32,
    /// Kafka `group.consumer.heartbeat.interval.ms`: how often KIP-848 members heartbeat.
    /// Default 5000.
    pub group_consumer_heartbeat_interval_ms: i32,
    /// Kafka `group.consumer.regex.refresh.interval.ms` (internal there): how long a KIP-848
    /// group's resolution of its subscribed regexes stands before a heartbeat makes it again,
    /// hence how long an ACL change takes to show in a regex subscription. Default 600000,
    /// >= 10000.
    pub group_consumer_regex_refresh_interval_ms: i32,
    /// Kafka `offsets.retention.minutes`: committed offsets of an empty group expire after
    /// this long. Default 10080 (7 days).
    pub offsets_retention_minutes: i64,
    /// Kafka `offset.metadata.max.bytes`: largest metadata string of a commit. Default 4096.
    pub offset_metadata_max_bytes: i32,
    /// Storage I/O backend: "auto" (io_uring, falling back to sync), "uring", "sync".
    pub io_backend: String,
    /// How new connections are spread over the shards' reuseport listeners: "auto" (eBPF,
    /// else classic BPF, else the kernel's hash), "ebpf" (else hash), "cbpf" (else hash),
    /// "hash". Steering sends each connection to the shard on the CPU that received its
    /// SYN. Default "auto". A mode that cannot be attached never stops the broker.
    pub steering: String,
    /// Kafka `producer.id.expiration.ms`: a producer's state on a partition (its last
    /// sequences, for de-duplication) is forgotten this long after its last write, unless it
    /// has a transaction open. Default 86400000.
    pub producer_id_expiration_ms: i64,
    /// Kafka `producer.id.expiration.check.interval.ms`: how often each shard looks for
    /// expired producers. Default 600000.
    pub producer_id_expiration_check_interval_ms: i64,
    /// Kafka `max.incremental.fetch.session.cache.slots`: fetch sessions kept, split evenly
    /// across shards. Default 1000; 0 disables sessions.
    pub max_incremental_fetch_session_cache_slots: usize,
    /// Kafka `errors.deadletterqueue.auto.create.topics.enable` (KIP-1191): a share group's
    /// dead-letter topic that does not exist is created on its first record. Default false.
    pub errors_deadletterqueue_auto_create_topics_enable: bool,
    /// Kafka `errors.deadletterqueue.topic.name.prefix`: the prefix a share group's
    /// dead-letter topic must have ("" for none). Default "dlq.".
    pub errors_deadletterqueue_topic_name_prefix: String,
    /// Serve the built-in Confluent-compatible Schema Registry (docs/schema-registry.md).
    /// Default true.
    pub schema_registry_enable: bool,
    /// The Schema Registry's HTTP listener, HOST:PORT. Default 127.0.0.1:8081 (the port
    /// registry clients expect). When the default address is taken (another registry on the
    /// host) the broker logs it and serves without a registry; an address set explicitly
    /// must bind.
    pub schema_registry_listen: SocketAddr,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: "127.0.0.1:9092".parse().expect("static address"),
            advertised_listener: None,
            listeners: String::new(),
            advertised_listeners: String::new(),
            listener_security_protocol_map: listeners::DEFAULT_PROTOCOL_MAP.into(),
            ssl_keystore_type: "PEM".into(),
            ssl_keystore_location: String::new(),
            ssl_keystore_key: String::new(),
            ssl_keystore_certificate_chain: String::new(),
            ssl_truststore_type: "PEM".into(),
            ssl_truststore_location: String::new(),
            ssl_truststore_certificates: String::new(),
            ssl_client_auth: "none".into(),
            ssl_enabled_protocols: "TLSv1.2,TLSv1.3".into(),
            ssl_principal_mapping_rules: "DEFAULT".into(),
            ssl_reload_interval_ms: 10_000,
            inter_broker_listener_name: String::new(),
            security_inter_broker_protocol: String::new(),
            sasl_mechanism_inter_broker_protocol: String::new(),
            listener_jaas: Default::default(),
            sasl_enabled_mechanisms: "SCRAM-SHA-256,SCRAM-SHA-512".into(),
            connections_max_reauth_ms: 0,
            connection_failed_authentication_delay_ms: 100,
            sasl_server_max_receive_size: 524_288,
            sasl_oauthbearer_jwks_endpoint_url: String::new(),
            sasl_oauthbearer_jwks_endpoint_refresh_ms: 3_600_000,
            sasl_oauthbearer_expected_audience: String::new(),
            sasl_oauthbearer_expected_issuer: String::new(),
            sasl_oauthbearer_sub_claim_name: "sub".into(),
            sasl_oauthbearer_scope_claim_name: "scope".into(),
            sasl_oauthbearer_clock_skew_seconds: 30,
            quota_window_num: 11,
            quota_window_size_seconds: 1,
            authorizer_class_name: String::new(),
            super_users: String::new(),
            allow_everyone_if_no_acl_found: false,
            metrics_listen: "127.0.0.1:9644".parse().expect("static address"),
            admin_ssl_enable: false,
            admin_ssl_client_auth: "none".into(),
            admin_authentication: String::new(),
            admin_principals: String::new(),
            data_dir: PathBuf::from("./strom-data"),
            shards: 0,
            node_id: 0,
            cluster_id: String::new(),
            controller_quorum_voters: String::new(),
            raft_listen: String::new(),
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_seconds: 300,
            broker_rack: String::new(),
            replica_selector_class: String::new(),
            auto_create_topics_enable: true,
            num_partitions: 1,
            default_replication_factor: 1,
            socket_request_max_bytes: 100 * 1024 * 1024,
            queued_max_request_bytes: 256 * 1024 * 1024,
            max_in_flight_per_connection: 64,
            priority_alpha: 0.8,
            priority_static_threshold_ms: -1,
            priority_max_throttle_ms: 500,
            otel_exporter_otlp_endpoint: String::new(),
            otel_traces_sampler_ratio: 1.0,
            message_max_bytes: 1_048_588,
            log_segment_bytes: 1 << 30,
            log_roll_ms: 7 * 24 * 3600 * 1000,
            log_retention_ms: 7 * 24 * 3600 * 1000,
            log_retention_bytes: -1,
            log_retention_check_interval_ms: 300_000,
            log_index_interval_bytes: 4096,
            log_index_size_max_bytes: 10 * 1024 * 1024,
            log_flush_interval_messages: i64::MAX,
            log_flush_interval_ms: i64::MAX,
            log_flush_offset_checkpoint_interval_ms: 60_000,
            log_cleanup_policy: "delete".into(),
            log_cleaner_enable: true,
            remote_log_storage_system_enable: false,
            remote_storage_local_path: String::new(),
            remote_storage_s3_endpoint: String::new(),
            remote_storage_s3_bucket: String::new(),
            remote_storage_s3_region: "us-east-1".into(),
            remote_log_manager_task_interval_ms: 30_000,
            remote_log_manager_copier_thread_pool_size: 2,
            remote_log_reader_threads: 5,
            remote_fetch_cache_bytes: 64 << 20,
            log_cleaner_backoff_ms: 15_000,
            log_cleaner_io_max_bytes_per_second: f64::MAX,
            log_cleaner_dedupe_buffer_size: 128 * 1024 * 1024,
            log_message_timestamp_type: "CreateTime".into(),
            file_delete_delay_ms: 60_000,
            offsets_topic_num_partitions: 50,
            transaction_state_log_num_partitions: 50,
            offsets_topic_replication_factor: 3,
            transaction_state_log_replication_factor: 3,
            transaction_state_log_min_isr: 2,
            transaction_max_timeout_ms: 900_000,
            transaction_abort_timed_out_transaction_cleanup_interval_ms: 10_000,
            transactional_id_expiration_ms: 604_800_000,
            transaction_remove_expired_transaction_cleanup_interval_ms: 3_600_000,
            group_initial_rebalance_delay_ms: 3000,
            group_min_session_timeout_ms: 6000,
            group_max_session_timeout_ms: 1_800_000,
            group_max_size: i32::MAX,
            group_consumer_session_timeout_ms: 45_000,
            group_consumer_heartbeat_interval_ms: 5_000,
            group_consumer_regex_refresh_interval_ms: 600_000,
            offsets_retention_minutes: 10080,
            offset_metadata_max_bytes: 4096,
            io_backend: "auto".into(),
            steering: "auto".into(),
            producer_id_expiration_ms: 86_400_000,
            producer_id_expiration_check_interval_ms: 600_000,
            max_incremental_fetch_session_cache_slots: 1000,
            errors_deadletterqueue_auto_create_topics_enable: false,
            errors_deadletterqueue_topic_name_prefix: "dlq.".into(),
            schema_registry_enable: true,
            schema_registry_listen: "127.0.0.1:8081".parse().expect("static address"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error("config key `{key}` (from {origin}): {message}")]
    Invalid {
        key: String,
        origin: String,
        message: String,
    },
}

/// Where a value came from, for error messages and DescribeConfigs' `source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    File,
    Env,
    Flag,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Origin::File => "config file",
            Origin::Env => "environment",
            Origin::Flag => "command line",
        })
    }
}

/// Top-level keys of the file that `strom_connectors::config::from_serve_table` reads.
pub const CONNECTOR_KEYS: &[&str] = &["connectors", "connectors_admin_listen"];

/// Flattens nested TOML tables into `a_b_c` keys so dotted Kafka names work.
fn flatten(prefix: &str, table: toml::Table, out: &mut BTreeMap<String, toml::Value>) {
    for (k, v) in table {
        let key = normalise_key(&if prefix.is_empty() {
            k
        } else {
            format!("{prefix}_{k}")
        });
        match v {
            toml::Value::Table(t) => flatten(&key, t, out),
            v => {
                out.insert(key, v);
            }
        }
    }
}

pub fn normalise_key(k: &str) -> String {
    let k = k.replace(['.', '-'], "_").to_ascii_lowercase();
    // Kafka's name of a Strom-only setting (`kafka_name`): `strom.raft.listen` = `raft_listen`.
    match k.strip_prefix("strom_") {
        Some(field) if known_key(field) => field.to_string(),
        _ => k,
    }
}

/// A raw string from the environment or a flag, typed the way the field expects.
pub(crate) fn typed_value(key: &str, raw: &str) -> toml::Value {
    let defaults = toml::Table::try_from(BrokerConfig::default()).unwrap_or_default();
    // Kafka's ConfigDef trims numbers and booleans before parsing them.
    let trimmed = raw.trim();
    match defaults.get(key) {
        Some(toml::Value::Integer(_)) => trimmed
            .parse::<i64>()
            .map(toml::Value::Integer)
            .unwrap_or_else(|_| toml::Value::String(raw.into())),
        Some(toml::Value::Boolean(_)) => trimmed
            .parse::<bool>()
            .map(toml::Value::Boolean)
            .unwrap_or_else(|_| toml::Value::String(raw.into())),
        Some(toml::Value::Float(_)) => trimmed
            .parse::<f64>()
            .map(toml::Value::Float)
            .unwrap_or_else(|_| toml::Value::String(raw.into())),
        _ => toml::Value::String(raw.into()),
    }
}

/// Layers the config. `file` is the TOML path if any, `env` the process environment, `flags`
/// the overrides given on the command line (already in key form).
pub fn load(
    file: Option<&std::path::Path>,
    env: impl IntoIterator<Item = (String, String)>,
    flags: &[(String, String)],
) -> Result<(BrokerConfig, BTreeMap<String, Origin>), ConfigError> {
    let mut values: BTreeMap<String, toml::Value> = BTreeMap::new();
    let mut origins: BTreeMap<String, Origin> = BTreeMap::new();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut table: toml::Table =
            toml::from_str(&text).map_err(|source| ConfigError::Parse {
                path: path.to_path_buf(),
                source,
            })?;
        // The connectors' keys belong to the connectors crate (main.rs hands them over).
        for key in CONNECTOR_KEYS {
            table.remove(*key);
        }
        // So do the redaction rule sets (`redact::config`, read by main.rs).
        table.remove(crate::redact::config::CONFIG_KEY);
        let mut flat = BTreeMap::new();
        flatten("", table, &mut flat);
        for (k, v) in flat {
            origins.insert(k.clone(), Origin::File);
            values.insert(k, v);
        }
    }
    for (name, raw) in env {
        let Some(key) = name.strip_prefix("STROM_") else {
            continue;
        };
        let key = normalise_key(key);
        // Only keys the broker knows: STROM_* variables of other tools (tests, connectors)
        // must not stop the broker.
        if !known_key(&key) && inter_broker::jaas_key(&key).is_none() {
            continue;
        }
        values.insert(key.clone(), typed_value(&key, &raw));
        origins.insert(key, Origin::Env);
    }
    for (key, raw) in flags {
        let key = normalise_key(key);
        values.insert(key.clone(), typed_value(&key, raw));
        origins.insert(key, Origin::Flag);
    }
    // Deserialize key by key so an error names the key and where it came from.
    let mut table = toml::Table::try_from(BrokerConfig::default()).unwrap_or_default();
    let mut jaas = inter_broker::JaasConfigs::default();
    for (key, value) in values {
        let origin = origins[&key];
        if let Some(slot) = inter_broker::jaas_key(&key) {
            let invalid = |message: String| ConfigError::Invalid {
                key: key.clone(),
                origin: origin.to_string(),
                message,
            };
            let slot = slot.map_err(invalid)?;
            let text = value
                .as_str()
                .ok_or_else(|| invalid("must be a string".into()))?;
            jaas.0.insert(slot, text.to_string());
            continue;
        }
        if !known_key(&key) {
            return Err(ConfigError::Invalid {
                key,
                origin: origin.to_string(),
                message: "unknown config key".into(),
            });
        }
        let mut probe = table.clone();
        probe.insert(key.clone(), value.clone());
        if let Err(e) = probe.try_into::<BrokerConfig>() {
            return Err(ConfigError::Invalid {
                key,
                origin: origin.to_string(),
                message: e.message().to_string(),
            });
        }
        table.insert(key, value);
    }
    let mut config: BrokerConfig = table.try_into().map_err(|e| ConfigError::Invalid {
        key: "?".into(),
        origin: "merged config".into(),
        message: e.to_string(),
    })?;
    config.listener_jaas = jaas;
    config.validate(&origins)?;
    Ok((config, origins))
}

/// Kafka's name for a broker config key; Strom-only settings live under `strom.`.
pub fn kafka_name(key: &str) -> String {
    match key {
        "ssl_reload_interval_ms" => "strom.ssl.reload.interval.ms".into(),
        "data_dir" => "log.dirs".into(),
        "file_delete_delay_ms" => "log.segment.delete.delay.ms".into(),
        "listen"
        | "advertised_listener"
        | "shards"
        | "metrics_listen"
        | "raft_listen"
        | "io_backend"
        | "max_in_flight_per_connection"
        | "cluster_id"
        | "steering"
        | "schema_registry_enable"
        | "schema_registry_listen"
        | "priority_alpha"
        | "priority_static_threshold_ms"
        | "priority_max_throttle_ms" => {
            format!("strom.{}", key.replace('_', "."))
        }
        other => other.replace('_', "."),
    }
}

/// The field (underscore key) of `BrokerConfig` that Kafka's broker config `name` is.
pub fn field_for_kafka_name(name: &str) -> Option<String> {
    let table = toml::Table::try_from(BrokerConfig::default()).ok()?;
    table
        .keys()
        .chain(std::iter::once(&"advertised_listener".to_string()))
        .find(|k| kafka_name(k) == name)
        .cloned()
}

/// Whether `name` is one of the broker configs Strom has (under Kafka's name or `strom.*`).
pub fn known_kafka_broker_name(name: &str) -> bool {
    field_for_kafka_name(name).is_some()
}

fn known_key(key: &str) -> bool {
    toml::Table::try_from(BrokerConfig::default())
        .map(|t| t.contains_key(key) || key == "advertised_listener")
        .unwrap_or(false)
}

impl BrokerConfig {
    fn validate(&self, origins: &BTreeMap<String, Origin>) -> Result<(), ConfigError> {
        let bad = |key: &str, message: String| ConfigError::Invalid {
            key: key.into(),
            origin: origins
                .get(key)
                .map(|o| o.to_string())
                .unwrap_or_else(|| "default".into()),
            message,
        };
        if self.shards > 256 {
            return Err(bad(
                "shards",
                format!("{} is above the maximum 256", self.shards),
            ));
        }
        if self.node_id < 0 {
            return Err(bad("node_id", "must be >= 0".into()));
        }
        if self.num_partitions < 1 {
            return Err(bad("num_partitions", "must be >= 1".into()));
        }
        if self.leader_imbalance_check_interval_seconds < 1 {
            return Err(bad(
                "leader_imbalance_check_interval_seconds",
                "must be >= 1".into(),
            ));
        }
        rack::validate(self).map_err(|(key, message)| bad(key, message))?;
        if self.default_replication_factor < 1 {
            return Err(bad("default_replication_factor", "must be >= 1".into()));
        }
        if self.default_replication_factor != 1 && self.controller_quorum_voters.trim().is_empty() {
            return Err(bad(
                "default_replication_factor",
                "a single-node broker (no controller.quorum.voters) only supports 1".into(),
            ));
        }
        if self.socket_request_max_bytes < 1024 {
            return Err(bad("socket_request_max_bytes", "must be >= 1024".into()));
        }
        if self.queued_max_request_bytes < self.socket_request_max_bytes as u64 {
            return Err(bad(
                "queued_max_request_bytes",
                "must be >= socket_request_max_bytes".into(),
            ));
        }
        if self.max_in_flight_per_connection == 0 {
            return Err(bad("max_in_flight_per_connection", "must be >= 1".into()));
        }
        if !(self.priority_alpha.is_finite() && self.priority_alpha > 0.0) {
            return Err(bad("priority_alpha", "must be > 0".into()));
        }
        if self.priority_static_threshold_ms < -1 {
            return Err(bad(
                "priority_static_threshold_ms",
                "must be >= 0, or -1 for the adaptive threshold".into(),
            ));
        }
        if self.priority_max_throttle_ms < 1 {
            return Err(bad("priority_max_throttle_ms", "must be >= 1".into()));
        }
        if !(0.0..=1.0).contains(&self.otel_traces_sampler_ratio) {
            return Err(bad(
                "otel_traces_sampler_ratio",
                "must be within 0..=1".into(),
            ));
        }
        let otlp = self.otel_exporter_otlp_endpoint.trim();
        if !(otlp.is_empty() || otlp.starts_with("http://") || otlp.starts_with("https://")) {
            return Err(bad(
                "otel_exporter_otlp_endpoint",
                format!("`{otlp}` is not an http:// or https:// URL"),
            ));
        }
        if self.log_cleaner_backoff_ms < 0 {
            return Err(bad("log_cleaner_backoff_ms", "must be >= 0".into()));
        }
        if self.log_cleaner_io_max_bytes_per_second.is_nan()
            || self.log_cleaner_io_max_bytes_per_second <= 0.0
        {
            return Err(bad(
                "log_cleaner_io_max_bytes_per_second",
                "must be > 0".into(),
            ));
        }
        if self.log_cleaner_dedupe_buffer_size < 1024 * 1024 {
            return Err(bad(
                "log_cleaner_dedupe_buffer_size",
                "must be >= 1048576".into(),
            ));
        }
        if self.remote_log_storage_system_enable {
            let local = !self.remote_storage_local_path.trim().is_empty();
            let s3 = !self.remote_storage_s3_bucket.trim().is_empty();
            if local == s3 {
                return Err(bad(
                    "remote_log_storage_system_enable",
                    "needs exactly one of remote_storage_local_path and remote_storage_s3_bucket"
                        .into(),
                ));
            }
        }
        if self.remote_log_manager_task_interval_ms < 1 {
            return Err(bad(
                "remote_log_manager_task_interval_ms",
                "must be >= 1".into(),
            ));
        }
        if !(1..=64).contains(&self.remote_log_manager_copier_thread_pool_size) {
            return Err(bad(
                "remote_log_manager_copier_thread_pool_size",
                "must be between 1 and 64".into(),
            ));
        }
        if !(1..=64).contains(&self.remote_log_reader_threads) {
            return Err(bad(
                "remote_log_reader_threads",
                "must be between 1 and 64".into(),
            ));
        }
        if self.remote_fetch_cache_bytes < 1 << 20 {
            return Err(bad("remote_fetch_cache_bytes", "must be >= 1048576".into()));
        }
        if self.log_segment_bytes < 14 {
            return Err(bad("log_segment_bytes", "must be >= 14".into()));
        }
        if !matches!(self.io_backend.as_str(), "auto" | "uring" | "sync") {
            return Err(bad(
                "io_backend",
                format!("`{}` is not one of auto, uring, sync", self.io_backend),
            ));
        }
        if !matches!(self.steering.as_str(), "auto" | "ebpf" | "cbpf" | "hash") {
            return Err(bad(
                "steering",
                format!("`{}` is not one of auto, ebpf, cbpf, hash", self.steering),
            ));
        }
        if !matches!(
            self.log_message_timestamp_type.as_str(),
            "CreateTime" | "LogAppendTime"
        ) {
            return Err(bad(
                "log_message_timestamp_type",
                "must be CreateTime or LogAppendTime".into(),
            ));
        }
        if self.offsets_topic_replication_factor < 1
            || self.transaction_state_log_replication_factor < 1
            || self.transaction_state_log_min_isr < 1
        {
            return Err(bad(
                "offsets_topic_replication_factor",
                "internal topics' replication factors and min.isr must be >= 1".into(),
            ));
        }
        if self.offsets_topic_num_partitions < 1 || self.transaction_state_log_num_partitions < 1 {
            return Err(bad("offsets_topic_num_partitions", "must be >= 1".into()));
        }
        if self.transaction_max_timeout_ms < 1 {
            return Err(bad("transaction_max_timeout_ms", "must be >= 1".into()));
        }
        if self.transaction_abort_timed_out_transaction_cleanup_interval_ms < 1 {
            return Err(bad(
                "transaction_abort_timed_out_transaction_cleanup_interval_ms",
                "must be >= 1".into(),
            ));
        }
        if !(1..=i32::MAX as i64).contains(&self.transactional_id_expiration_ms) {
            return Err(bad(
                "transactional_id_expiration_ms",
                "must be 1..=2147483647".into(),
            ));
        }
        if self.transaction_remove_expired_transaction_cleanup_interval_ms < 1 {
            return Err(bad(
                "transaction_remove_expired_transaction_cleanup_interval_ms",
                "must be >= 1".into(),
            ));
        }
        if self.group_initial_rebalance_delay_ms < 0 {
            return Err(bad(
                "group_initial_rebalance_delay_ms",
                "must be >= 0".into(),
            ));
        }
        if self.group_consumer_heartbeat_interval_ms < 1
            || self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms
        {
            return Err(bad(
                "group_consumer_heartbeat_interval_ms",
                "must be >= 1 and below group_consumer_session_timeout_ms".into(),
            ));
        }
        // Kafka's bound: its least time between two resolutions of a group's regexes.
        if self.group_consumer_regex_refresh_interval_ms < 10_000 {
            return Err(bad(
                "group_consumer_regex_refresh_interval_ms",
                "must be >= 10000".into(),
            ));
        }
        if self.group_max_size < 1 {
            return Err(bad("group_max_size", "must be >= 1".into()));
        }
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms {
            return Err(bad(
                "group_min_session_timeout_ms",
                "must be <= group_max_session_timeout_ms".into(),
            ));
        }
        if let Some(adv) = &self.advertised_listener {
            if parse_host_port(adv).is_none() {
                return Err(bad(
                    "advertised_listener",
                    format!("`{adv}` is not host:port"),
                ));
            }
        }
        if !self.listeners.trim().is_empty()
            && (origins.contains_key("listen") || origins.contains_key("advertised_listener"))
        {
            return Err(bad(
                "listeners",
                "set either `listeners` (with `advertised.listeners`) or the `listen` shorthand (with `advertised_listener`), not both".into(),
            ));
        }
        let listeners = self
            .listener_configs()
            .map_err(|e| bad("listeners", e.to_string()))?;
        security::validate(self, &listeners).map_err(|(key, message)| bad(key, message))?;
        inter_broker::validate(self, &listeners).map_err(|(key, message)| bad(&key, message))?;
        Ok(())
    }

    /// Every listener, resolved (`config::listeners`); validated at load.
    pub fn listener_configs(
        &self,
    ) -> Result<Vec<listeners::ListenerConfig>, listeners::ListenerError> {
        listeners::resolve(
            self.listen,
            &self.listeners,
            self.advertised_listener
                .as_deref()
                .and_then(parse_host_port),
            &self.advertised_listeners,
            &self.listener_security_protocol_map,
        )
    }

    pub fn shard_count(&self) -> usize {
        if self.shards == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        } else {
            self.shards
        }
    }
}

fn parse_host_port(s: &str) -> Option<(String, i32)> {
    let (host, port) = s.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    if host.is_empty() {
        return None;
    }
    Some((host.trim_matches(['[', ']']).to_string(), port as i32))
}

#[cfg(test)]
mod tests;
