//! A test cluster: N real `strom serve` processes on free 127.0.0.1 ports, each with its own
//! data dir, forming a metadata quorum through `controller.quorum.voters`. Nodes can be
//! killed (-9) and restarted; `wait_for` polls until a state holds. Every process is killed
//! when the cluster is dropped. Each node's output goes to `<dir>/node-N.log`, printed for
//! the nodes of a failing test.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Buf;
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use super::Client;

pub struct Node {
    pub id: i32,
    /// The PLAINTEXT listener (the inter-broker one, as Kafka's default).
    pub kafka: SocketAddr,
    /// A second PLAINTEXT listener, CLIENTS, registered too: a request on it is answered
    /// with the CLIENTS endpoints.
    pub clients: SocketAddr,
    pub raft: SocketAddr,
    pub metrics: SocketAddr,
    pub dir: PathBuf,
    /// Broker settings of this node beyond the common ones, as `--set` pairs.
    pub settings: Vec<(String, String)>,
    child: Mutex<Option<Child>>,
}

pub struct TestCluster {
    pub nodes: Vec<Node>,
    voters: String,
    root: tempfile::TempDir,
}

/// `n` distinct ports free now: all held until all are chosen (so no two nodes get the
/// same one), then released for the nodes to bind.
fn free_ports(n: usize) -> Vec<SocketAddr> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter().map(|l| l.local_addr().unwrap()).collect()
}

impl TestCluster {
    /// Starts `n` nodes with ids 1..=n.
    pub fn start(n: i32) -> TestCluster {
        TestCluster::start_with(n, |_| Vec::new())
    }

    /// Starts `n` nodes with ids 1..=n, each with the settings `settings(id)` gives it.
    pub fn start_with(n: i32, settings: impl Fn(i32) -> Vec<(String, String)>) -> TestCluster {
        let root = tempfile::tempdir().unwrap();
        let ports = free_ports(4 * n as usize);
        let nodes: Vec<Node> = (1..=n)
            .map(|id| Node {
                id,
                kafka: ports[4 * (id as usize - 1)],
                raft: ports[4 * (id as usize - 1) + 1],
                metrics: ports[4 * (id as usize - 1) + 2],
                clients: ports[4 * (id as usize - 1) + 3],
                dir: root.path().join(format!("node-{id}")),
                settings: settings(id),
                child: Mutex::new(None),
            })
            .collect();
        let voters = nodes
            .iter()
            .map(|n| format!("{}@{}", n.id, n.raft))
            .collect::<Vec<_>>()
            .join(",");
        let mut c = TestCluster {
            nodes,
            voters,
            root,
        };
        for i in 0..c.nodes.len() {
            c.spawn(i);
        }
        c
    }

    /// Starts (or restarts) node `i` (index into `nodes`) with its data dir and ports.
    pub fn spawn(&mut self, i: usize) {
        let n = &self.nodes[i];
        assert!(!self.running(i), "node {} already runs", n.id);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.path().join(format!("node-{}.log", n.id)))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_strom"))
            .arg("serve")
            .args(["--node-id", &n.id.to_string()])
            .args([
                "--set",
                &format!("listeners=CLIENTS://{},PLAINTEXT://{}", n.clients, n.kafka),
            ])
            .args([
                "--set",
                "listener.security.protocol.map=CLIENTS:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            ])
            .args(["--metrics-listen", &n.metrics.to_string()])
            .args(["--data-dir", n.dir.to_str().unwrap()])
            .args(["--shards", "1"])
            .args([
                "--set",
                &format!("controller.quorum.voters={}", self.voters),
            ])
            .args(["--set", "schema.registry.enable=false"])
            // The controller gives leadership back to preferred replicas within seconds here
            // (Kafka's default looks every 5 minutes).
            .args(["--set", "leader.imbalance.check.interval.seconds=2"])
            .args(
                n.settings
                    .iter()
                    .flat_map(|(k, v)| ["--set".to_string(), format!("{k}={v}")]),
            )
            .env("RUST_LOG", "info,openraft=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("strom serve starts");
        *n.child.lock().unwrap() = Some(child);
    }

    /// kill -9 node `i` and reaps it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.lock().unwrap().take() {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
        }
    }

    pub fn running(&self, i: usize) -> bool {
        self.nodes[i].child.lock().unwrap().is_some()
    }

    /// A connection to node `i`'s Kafka listener.
    pub fn client(&self, i: usize) -> Client {
        Client::connect(self.nodes[i].kafka)
    }

    /// Metadata v12 (all topics) from node `i`; `None` while it does not answer.
    pub fn metadata(&self, i: usize) -> Option<MetadataResponse> {
        try_call(
            self.nodes[i].kafka,
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(None),
        )
        .ok()
    }

    /// The index of the node with this id.
    pub fn index_of(&self, id: i32) -> usize {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .expect("a node id")
    }

    /// Polls `check` until it returns `Some` or `timeout` passes (then panics with `what` and
    /// the nodes' logs).
    pub fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = check() {
                return v;
            }
            for n in &self.nodes {
                let exited = n.child.lock().unwrap().as_mut().map(|c| c.try_wait());
                if let Some(Ok(Some(status))) = exited {
                    let id = n.id;
                    self.dump_logs();
                    panic!("node {id} exited ({status}) while waiting for {what}");
                }
            }
            if Instant::now() > deadline {
                self.dump_logs();
                panic!("timed out after {timeout:?} waiting for {what}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn dump_logs(&self) {
        for n in &self.nodes {
            let path = self.root.path().join(format!("node-{}.log", n.id));
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(60).collect();
            eprintln!("---- node {} (last 60 lines) ----", n.id);
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}

/// One request on a fresh connection, every failure an `Err` (the node may be down).
pub fn try_call<Req: Encodable, Resp: Decodable + HeaderVersion>(
    addr: SocketAddr,
    key: ApiKey,
    version: i16,
    req: &Req,
) -> std::io::Result<Resp> {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut c = Client::over(stream);
    let frame = c.encode(key, version, req);
    c.send_raw(&frame)?;
    let mut resp = c.read_frame()?;
    let bad = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    ResponseHeader::decode(&mut resp, Resp::header_version(version))
        .map_err(|e| bad(e.to_string()))?;
    let r = Resp::decode(&mut resp, version).map_err(|e| bad(e.to_string()))?;
    if resp.has_remaining() {
        return Err(bad("trailing bytes".into()));
    }
    Ok(r)
}
