"""Start and stop the brokers under test: Strom (`target/release/strom serve`) and a real
Apache Kafka 4.x (compat-tests/kafka/kafka.sh), each on free 127.0.0.1 ports with a
temporary data directory.

Both are real processes over TCP. Each is stopped by its own PID: SIGTERM, then SIGKILL
if it has not exited within a bound. Every wait here is bounded.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
COMPAT_DIR = REPO_ROOT / "compat-tests"
# Absolute: brokers run with their temp workdir as cwd, so a relative STROM_BIN (as in
# `STROM_BIN=../../target/debug/strom`) must not be resolved there.
STROM_BIN = Path(os.environ.get("STROM_BIN", REPO_ROOT / "target" / "release" / "strom")).resolve()
KAFKA_SH = COMPAT_DIR / "kafka" / "kafka.sh"

START_TIMEOUT_S = float(os.environ.get("STROM_COMPAT_START_TIMEOUT", "60"))
STOP_TIMEOUT_S = 20.0


class BrokerStartError(RuntimeError):
    pass


def free_port() -> int:
    """A port the kernel just handed out on 127.0.0.1. Another process could take it
    between this call and the broker's bind; the broker then fails to start and says so."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def metadata_answers(port: int) -> bool:
    """A raw Metadata v1 request for all topics; True when the broker answers with at
    least one broker in it. Kafka opens its port a while before it serves requests."""
    client = b"strom-compat"
    body = struct.pack(">i", -1)  # topics: null = all
    header = struct.pack(">hhih", 3, 1, 7, len(client)) + client
    frame = header + body
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
            s.sendall(struct.pack(">i", len(frame)) + frame)
            size = struct.unpack(">i", _recv(s, 4))[0]
            resp = _recv(s, size)
    except (OSError, struct.error):
        return False
    # correlation id (4), brokers array length (4)
    return len(resp) >= 8 and struct.unpack(">i", resp[4:8])[0] >= 1


def _recv(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    return data


def tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"(no log: {e})"


@dataclass
class BrokerProcess:
    """A running broker: `name` is "strom" or "kafka"; `bootstrap` is HOST:PORT."""

    name: str
    port: int
    workdir: Path
    log_path: Path
    proc: subprocess.Popen | None = None
    extra: dict = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        return tail(self.log_path, lines)

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S, serving: bool = False) -> None:
        """Until the port is open, and with `serving` until Metadata answers too."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                code = self.proc.returncode if self.proc else None
                raise BrokerStartError(
                    f"{self.name} exited with code {code} before listening on "
                    f"{self.bootstrap}; log tail:\n{self.log_tail()}"
                )
            if port_open(self.port) and (not serving or metadata_answers(self.port)):
                return
            time.sleep(0.2)
        self.stop()
        raise BrokerStartError(
            f"{self.name} did not {'serve Metadata' if serving else 'listen'} on {self.bootstrap} "
            f"within {timeout_s:.0f}s; log tail:\n{self.log_tail()}"
        )

    def stop(self) -> int | None:
        """SIGTERM, wait, then SIGKILL. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT_S)
        return self.proc.returncode

    def cleanup(self) -> None:
        self.stop()
        if os.environ.get("STROM_COMPAT_KEEP_DIRS") != "1":
            shutil.rmtree(self.workdir, ignore_errors=True)


def _die_with_parent() -> None:
    """In the child before exec: ask Linux for SIGTERM when the parent dies
    (PR_SET_PDEATHSIG survives exec)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except OSError:
        pass


def _spawn(name: str, argv: list[str], workdir: Path, port: int, env_extra: dict | None = None, **extra) -> BrokerProcess:
    log_path = workdir / f"{name}.log"
    log = open(log_path, "wb")
    env = dict(os.environ)
    env.update(env_extra or {})
    env.setdefault("RUST_LOG", "info")
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        env=env,
        # Same process group as pytest, so `timeout` in scripts/test-all.sh reaches the
        # brokers too; and SIGTERM on pytest's death, so a killed run leaves none behind.
        preexec_fn=_die_with_parent,
    )
    log.close()
    return BrokerProcess(name=name, port=port, workdir=workdir, log_path=log_path, proc=proc, extra=extra)


# free_port's race: another process (a second pytest part, a client suite, a test's own
# server) may bind the port between our pick and the broker's bind. The broker then exits
# saying so, and is started again on fresh ports, up to this many times in all.
BIND_ATTEMPTS = 3


def _bind_lost(e: BrokerStartError) -> bool:
    return "Address already in use" in str(e) or "BindException" in str(e)


def _retrying_bind(start):
    """`start()`, again on fresh ports when the broker lost a port to another process."""
    for attempt in range(1, BIND_ATTEMPTS + 1):
        try:
            return start()
        except BrokerStartError as e:
            if attempt == BIND_ATTEMPTS or not _bind_lost(e):
                raise
            print(f"broker lost a port to another process (attempt {attempt}); starting it again", flush=True)
    raise AssertionError("unreachable")


def start_strom(shards: int = 2, data_dir: Path | None = None, security: dict | None = None,
                extra_args: list[str] | None = None, config=None) -> BrokerProcess:
    """A Strom broker (`_start_strom`), started again on fresh ports if it lost one."""
    return _retrying_bind(lambda: _start_strom(shards, data_dir, security, extra_args, config))


def _start_strom(shards: int, data_dir: Path | None, security: dict | None,
                 extra_args: list[str] | None, config) -> BrokerProcess:
    """A Strom broker in a new temp workdir; its data in `data_dir` when given (e.g. a
    size-limited mount, or the dir of a previous run to restart on). `security` adds
    listeners and their settings (`security_listeners`). `config(port)`, when given, is the
    text of its `--config` file, given its Kafka port (e.g. `[[connectors]]` that consume
    from it)."""
    if not STROM_BIN.is_file():
        raise BrokerStartError(
            f"{STROM_BIN.relative_to(REPO_ROOT) if STROM_BIN.is_relative_to(REPO_ROOT) else STROM_BIN}"
            " not found: build it with `cargo build --release -p strom`"
        )
    workdir = Path(tempfile.mkdtemp(prefix="strom-compat-strom-"))
    port, metrics_port, registry_port = free_port(), free_port(), free_port()
    listeners, settings, ports = security_listeners(port, security, "strom")
    if security and security.get("users"):
        add_strom_users(data_dir or workdir / "data", security["users"])
    argv = [
        str(STROM_BIN),
        "serve",
        *(["--set", f"listeners={listeners}"] if security else ["--listen", f"127.0.0.1:{port}"]),
        *[a for k, v in settings.items() for a in ("--set", f"{k}={v}")],
        "--data-dir", str(data_dir or workdir / "data"),
        "--metrics-listen", f"127.0.0.1:{metrics_port}",
        "--shards", str(shards),
        # The built-in schema registry (docs/schema-registry.md), on a port of its own.
        "--set", f"schema_registry_listen=127.0.0.1:{registry_port}",
        # Compaction tests wait for the cleaner; Kafka's fixture sets the same (kafka.sh).
        "--set", "log_cleaner_backoff_ms=1000",
        *(extra_args or []),
    ]
    if config is not None:
        (workdir / "strom.toml").write_text(config(port))
        argv += ["--config", str(workdir / "strom.toml")]
    # Retention checked every second (Kafka's fixture sets log.retention.check.interval.ms
    # the same way), so short-retention tests see segments go within seconds.
    env_extra = {"STROM_LOG_RETENTION_CHECK_INTERVAL_MS": "1000"}
    b = _spawn("strom", argv, workdir, port, env_extra, metrics_port=metrics_port,
               schema_registry_port=registry_port, cmdline=argv, ports=ports)
    try:
        b.wait_ready()
    except BaseException:
        b.cleanup()  # the error carries the log tail; the temp dir would be left behind
        raise
    return b


def fetch_kafka() -> None:
    """Make sure the Kafka jars are in compat-tests/.cache (a no-op when they are)."""
    r = subprocess.run(["bash", str(KAFKA_SH), "fetch"], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise BrokerStartError(f"kafka.sh fetch failed:\n{r.stdout}\n{r.stderr}")


def security_listeners(plain_port: int, security: dict | None, broker: str = "strom") -> tuple[str, dict, dict]:
    """The listeners and broker settings for `security`: {"listeners": ["SSL", ...],
    "settings": {...} (Kafka's names, which both brokers take), "kafka_settings" /
    "strom_settings": {...} (one broker's own), "users": [(name, password, mechanism)],
    "kafka_jvm": [JVM options]}.
    Returns the `listeners` value, the settings and each listener's port by name (PLAINTEXT
    always there)."""
    security = security or {}
    ports = {"PLAINTEXT": plain_port}
    for name in security.get("listeners", []):
        ports[name] = free_port()
    listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    settings = {**security.get("settings", {}), **security.get(f"{broker}_settings", {})}
    return listeners, settings, ports


def add_strom_users(data_dir: Path, users: list) -> None:
    """`strom user add` for each (name, password, mechanism), before the broker starts."""
    for name, password, mechanism in users:
        r = subprocess.run(
            [str(STROM_BIN), "user", "add", name, "--password", password, "--mechanism", mechanism, "--data-dir", str(data_dir)],
            capture_output=True, text=True, timeout=60,
        )
        if r.returncode != 0:
            raise BrokerStartError(f"strom user add {name} failed:\n{r.stderr}")


def start_kafka(security: dict | None = None) -> BrokerProcess:
    """Kafka 4.x; `security` as for `start_strom`: the same listeners and settings. Started
    again on fresh ports if it lost one (`_retrying_bind`)."""
    fetch_kafka()
    return _retrying_bind(lambda: _start_kafka(security))


def _start_kafka(security: dict | None) -> BrokerProcess:
    workdir = Path(tempfile.mkdtemp(prefix="strom-compat-kafka-"))
    port, controller_port = free_port(), free_port()
    listeners, settings, ports = security_listeners(port, security, "kafka")
    argv = ["bash", str(KAFKA_SH), "run", str(port), str(controller_port), str(workdir)]
    env_extra = {}
    if security:
        extra = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items() if n != "PLAINTEXT")
        env_extra["KAFKA_EXTRA_LISTENERS"] = extra
        env_extra["KAFKA_EXTRA_PROPERTIES"] = "\n".join(f"{k}={v}" for k, v in settings.items())
        # Kafka 4's way to the first SCRAM users: at format time.
        env_extra["KAFKA_JVM_EXTRA"] = "\n".join(security.get("kafka_jvm", []))
        env_extra["KAFKA_FORMAT_ARGS"] = "\n".join(
            a for name, pw, mech in security.get("users", []) for a in ("--add-scram", f"{mech}=[name={name},password={pw}]")
        )
    b = _spawn("kafka", argv, workdir, port, env_extra, controller_port=controller_port, cmdline=argv, ports=ports)
    try:
        # The JVM takes a few seconds on two busy cores; the StorageTool runs first. Kafka
        # listens before it serves, and the tests that start a Kafka of their own use it at once.
        b.wait_ready(timeout_s=max(START_TIMEOUT_S, 120), serving=True)
    except BaseException:
        b.cleanup()  # the error carries the log tail; the temp dir would be left behind
        raise
    return b


# --- Clusters: N nodes of one broker kind on 127.0.0.1, each node also a metadata voter
# (python/test_cluster.py). A node is a BrokerProcess whose `extra` holds what restarting it
# takes: its command, environment and node id; its PID is the broker's own (Strom's, or the
# JVM kafka.sh execs), so kill -9 hits the broker.

# Kafka's nodes fence a broker after 3 s without a heartbeat, heartbeating every 500 ms:
# Strom's fixed values (docs/design.md "Cluster"), so that both brokers' failovers start
# from the same detection time (Kafka's defaults are 9 s and 2 s). Everything else is
# Kafka's default.
KAFKA_CLUSTER_PROPERTIES = "broker.session.timeout.ms=3000\nbroker.heartbeat.interval.ms=500"
# Three JVMs (and the clients' JVMs) share two cores with everything else.
KAFKA_CLUSTER_HEAP = "-Xms128m -Xmx384m"


class Cluster(list):
    """The nodes, node id i at index i-1; `kind` is "strom" or "kafka"."""

    def __init__(self, kind: str, root: Path, voters: str = "", cluster_id: str = "", shards: int = 1):
        super().__init__()
        self.kind = kind
        self.root = root
        self.voters = voters
        self.cluster_id = cluster_id
        self.shards = shards

    def kill9(self, node_id: int) -> None:
        n = self[node_id - 1]
        n.proc.send_signal(signal.SIGKILL)
        n.proc.wait(timeout=10)

    def restart(self, node_id: int) -> BrokerProcess:
        """The node again, on its ports and data, once it serves Metadata."""
        old = self[node_id - 1]
        k = old.extra["restarts"] + 1
        n = _spawn(f"{old.name.split('-restart')[0]}-restart{k}", old.extra["cmd"], old.workdir, old.port,
                   old.extra["env"], **{**old.extra, "restarts": k})
        self[node_id - 1] = n
        n.wait_ready(timeout_s=_cluster_start_timeout(self.kind), serving=True)
        return n

    def add_broker_only_node(self) -> BrokerProcess:
        """Node id len+1, a broker that is not a metadata voter (Kafka's
        `process.roles=broker`; a Strom observer on `strom.raft.listen`), once it serves."""
        node_id = len(self) + 1
        port, raft_port, metrics_port = free_port(), free_port(), free_port()
        workdir = self.root / f"node-{node_id}"
        workdir.mkdir()
        if self.kind == "kafka":
            argv = ["bash", str(KAFKA_SH), "node", str(node_id), str(port), str(raft_port), str(workdir),
                    self.voters, self.cluster_id]
            # Later keys win in Java's Properties: no controller role, no controller listener.
            env = {"KAFKA_HEAP_OPTS": KAFKA_CLUSTER_HEAP, "KAFKA_EXTRA_PROPERTIES": "\n".join(
                [KAFKA_CLUSTER_PROPERTIES, "process.roles=broker", f"listeners=PLAINTEXT://127.0.0.1:{port}"])}
        else:
            argv = _strom_node_argv(node_id, port, metrics_port, workdir, self.voters, self.shards) + [
                "--set", f"strom.raft.listen=127.0.0.1:{raft_port}"]
            env = {}
        n = _spawn(f"{self.kind}-{node_id}", argv, workdir, port, env, cmd=argv, env=env, node_id=node_id,
                   restarts=0, raft_port=raft_port)
        self.append(n)
        n.wait_ready(timeout_s=_cluster_start_timeout(self.kind), serving=True)
        return n

    def stop(self) -> None:
        # SIGTERM to all first: stopped one by one, the last Kafka nodes would wait in their
        # controlled shutdown for a quorum that has gone (then SIGKILL, 20 s each).
        for n in self:
            if n.alive():
                n.proc.send_signal(signal.SIGTERM)
        for n in self:
            n.stop()


def _cluster_start_timeout(kind: str) -> float:
    # A JVM each, on two busy cores, the first time with the StorageTool's JVM before it.
    return max(START_TIMEOUT_S, 180) if kind == "kafka" else START_TIMEOUT_S


def start_cluster(kind: str, nodes: int = 3, shards: int = 1) -> Cluster:
    """`nodes` brokers of `kind` forming one cluster, every node serving Metadata; started
    again on fresh ports if a node lost one (`_retrying_bind`). `shards`: each Strom node's
    (benches/quick/failover.py runs them as benches/cluster.sh does)."""
    if kind == "kafka":
        fetch_kafka()
    elif not STROM_BIN.is_file():
        raise BrokerStartError(f"{STROM_BIN} not found: build it with `cargo build --release -p strom`")
    return _retrying_bind(lambda: _start_cluster(kind, nodes, shards))


def _start_cluster(kind: str, count: int, shards: int) -> Cluster:
    # Per node: the client port, the quorum (Raft / KRaft controller) port, and Strom's metrics port.
    ports = {i: (free_port(), free_port(), free_port()) for i in range(1, count + 1)}
    voters = ",".join(f"{i}@127.0.0.1:{p[1]}" for i, p in ports.items())
    cluster_id = _kafka_cluster_id()
    cluster = Cluster(kind, Path(tempfile.mkdtemp(prefix=f"strom-compat-{kind}-cluster-")), voters, cluster_id,
                      shards)
    try:
        for i, (port, quorum_port, metrics_port) in ports.items():
            workdir = cluster.root / f"node-{i}"
            workdir.mkdir()
            if kind == "kafka":
                argv = ["bash", str(KAFKA_SH), "node", str(i), str(port), str(quorum_port), str(workdir),
                        voters, cluster_id]
                env = {"KAFKA_HEAP_OPTS": KAFKA_CLUSTER_HEAP, "KAFKA_EXTRA_PROPERTIES": KAFKA_CLUSTER_PROPERTIES}
            else:
                argv = _strom_node_argv(i, port, metrics_port, workdir, voters, shards)
                env = {}
            cluster.append(_spawn(f"{kind}-{i}", argv, workdir, port, env, cmd=argv, env=env, node_id=i,
                                  restarts=0))
        # Each waits for the others: no node serves before a quorum of them has formed.
        for n in cluster:
            n.wait_ready(timeout_s=_cluster_start_timeout(kind), serving=True)
    except BaseException:
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)
        raise
    return cluster


def _strom_node_argv(node_id: int, port: int, metrics_port: int, workdir: Path, voters: str,
                     shards: int) -> list[str]:
    return [
        str(STROM_BIN), "serve",
        "--node-id", str(node_id),
        "--listen", f"127.0.0.1:{port}",
        "--metrics-listen", f"127.0.0.1:{metrics_port}",
        "--data-dir", str(workdir / "data"),
        "--shards", str(shards),
        "--set", f"controller.quorum.voters={voters}",
        "--set", "schema_registry_enable=false",
    ]


def _kafka_cluster_id() -> str:
    """16 random bytes as Kafka writes a Uuid (URL-safe base64, no padding), not starting
    with '-' (kafka.sh `run` says why)."""
    import base64

    while True:
        cid = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid
