"""The nodes of a Strom test cluster with listeners of their choosing (names and protocols,
Kafka's `listeners` and `listener.security.protocol.map`), each on free 127.0.0.1 ports
with its own data dir: started, killed -9 and started again by their own PIDs
(brokers._spawn). Shared by the cluster modules that secure their listeners
(test_cluster_metadata.py, test_cluster_secured.py). Also what every cluster module waits
with (`wait_for`), starts its `brokers.start_cluster` cluster with (`started`) and brings
back the nodes a failed test left dead with (`restart_dead`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import brokers


class Node:
    """One `strom serve` of a cluster: `listeners` are (name, protocol) pairs, `settings`
    Kafka's names and values (`--set`); `ready_on` is the listener whose port says it is up
    (with `serving`, a PLAINTEXT one that also answers Metadata)."""

    def __init__(self, node_id: int, workdir: Path, data: Path, listeners: list[tuple[str, str]],
                 settings: dict, ready_on: str, label: str = "node"):
        self.id, self.workdir, self.data, self.label, self.ready_on = node_id, workdir, data, label, ready_on
        self.ports = {name: brokers.free_port() for name, _ in listeners}
        self.metrics_port = brokers.free_port()
        kv = {
            "listeners": ",".join(f"{name}://127.0.0.1:{self.ports[name]}" for name, _ in listeners),
            "listener.security.protocol.map": ",".join(f"{name}:{proto}" for name, proto in listeners),
            **settings,
        }
        self.argv = [
            str(brokers.STROM_BIN), "serve",
            "--node-id", str(node_id),
            "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
            "--data-dir", str(data),
            "--shards", "1",
            *[a for k, v in kv.items() for a in ("--set", f"{k}={v}")],
        ]
        self.runs = 0
        self.proc: brokers.BrokerProcess | None = None

    def addr(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def bootstrap(self) -> str:
        return self.addr(self.ready_on)

    def spawn(self) -> brokers.BrokerProcess:
        self.runs += 1
        name = f"strom-{self.id}-{self.label}-run{self.runs}"
        self.proc = brokers._spawn(name, self.argv, self.workdir, self.ports[self.ready_on])
        return self.proc

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def kill9(self) -> None:
        self.proc.proc.send_signal(signal.SIGKILL)
        self.proc.proc.wait(timeout=10)

    def log(self) -> str:
        return self.proc.log_path.read_text(errors="replace")


@contextlib.contextmanager
def cluster_root(prefix: str):
    """A temp dir for a cluster and the list of its nodes, filled by the caller; at the end
    every node is stopped and the dir removed (kept, and said so, with
    STROM_COMPAT_KEEP_DIRS=1)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    nodes: list[Node] = []
    try:
        yield root, nodes
    finally:
        for n in nodes:
            if n.proc:
                n.proc.stop()
        if os.environ.get("STROM_COMPAT_KEEP_DIRS") == "1":
            print(f"cluster data and logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def started(kind: str, nodes: int, **kwargs):
    """`brokers.start_cluster(kind, nodes, **kwargs)` for a module's tests, stopped after
    them; its data and logs are kept with STROM_CLUSTER_KEEP=1."""
    c = brokers.start_cluster(kind, nodes, **kwargs)
    try:
        yield c
    finally:
        c.stop()
        if os.environ.get("STROM_CLUSTER_KEEP"):
            print(f"cluster data and logs kept in {c.root}")
        else:
            shutil.rmtree(c.root, ignore_errors=True)


def restart_dead(cluster) -> None:
    """Every node of a `brokers.Cluster` that is not running, started again on its data:
    after a test that failed half-way, so that the next test does not fail on a dead node."""
    for node_id, n in enumerate(cluster, start=1):
        if not n.alive():
            cluster.restart(node_id)


def wait_for(what, check, timeout_s=30.0):
    """`check()` until it returns something true (an exception counts as "not yet");
    returns that, or fails naming `what` and the last answer."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as e:  # noqa: BLE001 - "not yet", whatever the client raised
            last = e
        if last is True or (last and not isinstance(last, Exception)):
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")
