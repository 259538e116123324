"""A private network for fault tests: every Strom node and every load client in a Linux
network namespace of its own, all plugged into one bridge, and the faults a Jepsen nemesis
injects between them (test_faults.py, docs/operations.md "Fault tests").

    root ns (pytest) ── veth ──┐
    <run>-n1 (node 1) ── veth ─┤
    <run>-n2 (node 2) ── veth ─┼── br0 in <run>-sw (the switch)
    <run>-n3 (node 3) ── veth ─┤
    <run>-c1, <run>-c2 ─ veth ─┘   (clients: confluent-kafka processes, fault_client.py)

Addresses are 10.213.S.0/24 (S picked per run, free in the root ns): the root ns is .1
(pytest's control plane: admin calls, readiness, the final read; never cut off), node i is
.1i, client k is .2k. Nothing but our own namespaces and one root-ns veth (`sfh<pid><k>`)
carries them, and everything is removed in `close()`, which also ends every process
started in a namespace (by its PID). Names carry pytest's PID, so parallel runs do not
collide, and a run that died without cleaning up is swept by the next one (`sweep`).

Faults, each undone by `heal()`:
  * `partition([{"n1","c1"}, {"n2","n3","c2"}])` — nftables drops every packet between
    hosts of different groups (silently: TCP waits, as behind a real broken switch);
  * `link(host, up)` — the host's switch port down/up (flapping);
  * `loss(host, percent)` — nftables drops that share of the host's packets at random
    (`numgen random`; netem is not needed, which many CI kernels lack);
  * `slow(host, rate)` — a token bucket (tc tbf) on the host's link: bandwidth and queueing delay.
SIGSTOP/SIGCONT and kill -9 are the node's own (`NetCluster`).

Requires root, `ip` (iproute2), `nft` (nftables) and `tc`; `unavailable()` says why not.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import brokers

PREFIX = "sf"
NODE_PORT, PEER_PORT, METRICS_PORT = 9092, 9093, 9094
CMD_TIMEOUT_S = 15
_LOCK = Path("/run/strom-netns.lock")
_runs = 0


def unavailable() -> str | None:
    """Why this machine cannot run the fault tests, or None when it can."""
    if os.geteuid() != 0:
        return "fault tests need root (network namespaces, nftables)"
    for tool, pkg in (("ip", "iproute2"), ("nft", "nftables"), ("tc", "iproute2")):
        if shutil.which(tool) is None:
            return f"`{tool}` not found (apt-get install {pkg}; scripts/test-all.sh installs it)"
    probe = f"{PREFIX}probe{os.getpid()}"
    try:
        _ip("netns", "add", probe)
        _ns(probe, "nft", "add", "table", "inet", "probe")
    except subprocess.CalledProcessError as e:
        return f"network namespaces or nftables do not work here: {e.stderr.strip() or e}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=CMD_TIMEOUT_S)
    return None


def _run(*argv: str, input: str | None = None) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=CMD_TIMEOUT_S)
    if r.returncode != 0:
        raise subprocess.CalledProcessError(r.returncode, argv, r.stdout, r.stderr)
    return r.stdout


def _ip(*args: str) -> str:
    return _run("ip", *args)


def _ns(ns: str, *argv: str, input: str | None = None) -> str:
    return _run("ip", "netns", "exec", ns, *argv, input=input)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep() -> list[str]:
    """Remove the namespaces and root-ns veths of runs whose pytest is gone (a kill -9
    leaves them). Returns what was removed."""
    removed = []
    for line in _ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        m = re.fullmatch(rf"{PREFIX}(\d+)x\d+-\w+", name)
        if m and not _pid_alive(int(m.group(1))):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=CMD_TIMEOUT_S)
            removed.append(name)
    for line in _ip("-o", "link", "show").splitlines():
        m = re.match(rf"\d+: ({PREFIX}h(\d{{7}})\w)[@:]", line)
        if m and not _pid_alive(int(m.group(2))):
            subprocess.run(["ip", "link", "del", m.group(1)], capture_output=True, timeout=CMD_TIMEOUT_S)
            removed.append(m.group(1))
    with open("/proc/mounts") as mounts:
        for line in mounts:
            source, target = line.split()[:2]
            m = re.fullmatch(rf"{PREFIX}disk(\d{{7}})", source)
            if m and not _pid_alive(int(m.group(1))):
                subprocess.run(["umount", "-l", target], capture_output=True, timeout=CMD_TIMEOUT_S)
                removed.append(target)
    return removed


@dataclass
class Net:
    """The namespaces, the switch and the addresses of one run (`Net.create`)."""

    run: str                      # e.g. sf0012345x1: the prefix of every name of this run
    subnet: int                   # S of 10.213.S.0/24
    hosts: list[str]              # n1.., c1..
    root_veth: str
    procs: list[subprocess.Popen] = field(default_factory=list)
    _faults: dict = field(default_factory=dict)

    # --- construction and teardown

    @classmethod
    def create(cls, nodes: int = 3, clients: int = 2) -> "Net":
        global _runs
        _runs += 1
        sweep()
        pid = os.getpid()
        run = f"{PREFIX}{pid:07d}x{_runs}"
        hosts = [f"n{i}" for i in range(1, nodes + 1)] + [f"c{k}" for k in range(1, clients + 1)]
        root_veth = f"{PREFIX}h{pid:07d}{_runs % 10}"
        _LOCK.parent.mkdir(parents=True, exist_ok=True)
        with open(_LOCK, "w") as lock:
            # Two runs picking a subnet at once would both see it free.
            fcntl.flock(lock, fcntl.LOCK_EX)
            subnet = _free_subnet()
            net = cls(run=run, subnet=subnet, hosts=hosts, root_veth=root_veth)
            try:
                net._build()
            except BaseException:
                net.close()
                raise
        return net

    def _build(self) -> None:
        sw = self.ns("sw")
        _ip("netns", "add", sw)
        _ns(sw, "ip", "link", "set", "lo", "up")
        _ns(sw, "ip", "link", "add", "br0", "type", "bridge")
        _ns(sw, "ip", "link", "set", "br0", "up")
        for h in self.hosts:
            ns = self.ns(h)
            _ip("netns", "add", ns)
            _ns(ns, "ip", "link", "set", "lo", "up")
            _ip("-n", sw, "link", "add", h, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", sw, "link", "set", h, "master", "br0", "up")
            _ns(ns, "ip", "addr", "add", f"{self.addr(h)}/24", "dev", "eth0")
            _ns(ns, "ip", "link", "set", "eth0", "up")
            # The fault table: a set of peers this host cannot reach, and a loss rule slot.
            _ns(ns, "nft", "-f", "-", input=_NFT_TABLE)
        _ip("link", "add", self.root_veth, "type", "veth", "peer", "name", "ctl", "netns", sw)
        _ip("-n", sw, "link", "set", "ctl", "master", "br0", "up")
        _ip("addr", "add", f"{self.addr('ctl')}/24", "dev", self.root_veth)
        _ip("link", "set", self.root_veth, "up")

    def close(self) -> None:
        """Every process started in a namespace ended (SIGKILL by PID, after a SIGCONT in case
        it was stopped), then every namespace and the root veth removed. Safe to call twice."""
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGCONT)
                    p.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=10)
        subprocess.run(["ip", "link", "del", self.root_veth], capture_output=True, timeout=CMD_TIMEOUT_S)
        for h in [*self.hosts, "sw"]:
            subprocess.run(["ip", "netns", "del", self.ns(h)], capture_output=True, timeout=CMD_TIMEOUT_S)

    def leftovers(self) -> list[str]:
        """Names of this run still present (empty after `close`)."""
        names = [line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()]
        links = _ip("-o", "link", "show").splitlines()
        return [n for n in names if n.startswith(self.run + "-")] + \
            [self.root_veth for line in links if f": {self.root_veth}" in line]

    # --- names and processes

    def ns(self, host: str) -> str:
        return f"{self.run}-{host}"

    def addr(self, host: str) -> str:
        if host == "ctl":
            last = 1
        elif host[0] == "n":
            last = 10 + int(host[1:])
        else:
            last = 20 + int(host[1:])
        return f"10.213.{self.subnet}.{last}"

    def spawn(self, host: str, argv: list[str], log_path: Path, env: dict | None = None,
              cwd: Path | None = None) -> subprocess.Popen:
        """`argv` in the host's namespace (`ip netns exec` execs it: the PID is the program's),
        its output in `log_path`; dies with pytest (PR_SET_PDEATHSIG)."""
        full_env = dict(os.environ)
        full_env.update(env or {})
        with open(log_path, "ab") as log:
            p = subprocess.Popen(["ip", "netns", "exec", self.ns(host), *argv], stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=cwd,
                                 preexec_fn=brokers._die_with_parent)
        self.procs.append(p)
        return p

    # --- faults

    def partition(self, groups: list[set[str]]) -> None:
        """Hosts of different groups cannot exchange a packet; a host in no group keeps its
        links (the root ns always does). Replaces the previous partition."""
        where = {h: i for i, g in enumerate(groups) for h in g}
        for h in self.hosts:
            blocked = [self.addr(o) for o in self.hosts
                       if h in where and o in where and where[o] != where[h]]
            self._set_blocked(h, blocked)
        self._faults["partition"] = [sorted(g) for g in groups]

    def isolate(self, host: str) -> None:
        """`host` cut off from every other node and client."""
        self.partition([{host}, set(self.hosts) - {host}])

    def link(self, host: str, up: bool) -> None:
        _ip("-n", self.ns("sw"), "link", "set", host, "up" if up else "down")
        self._faults.setdefault("down", set())
        (self._faults["down"].discard if up else self._faults["down"].add)(host)

    def loss(self, host: str, percent: int) -> None:
        """Drop `percent`% of the host's packets, in and out, at random (0 removes it)."""
        ns = self.ns(host)
        _ns(ns, "nft", "flush", "chain", "inet", "fault", "lossy")
        if percent > 0:
            _ns(ns, "nft", "add", "rule", "inet", "fault", "lossy", "numgen", "random", "mod", "100",
                "<", str(percent), "drop")
        self._faults.setdefault("loss", {})[host] = percent

    def slow(self, host: str, rate: str | None) -> None:
        """A token bucket of `rate` (tc syntax: "2mbit") on the host's outgoing link, up to
        200 ms queued; None removes it."""
        ns = self.ns(host)
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root"],
                       capture_output=True, timeout=CMD_TIMEOUT_S)
        if rate:
            _ns(ns, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "32kbit",
                "latency", "200ms")
        self._faults.setdefault("slow", {})[host] = rate

    def heal(self) -> None:
        """Every link up, no partition, no loss, no rate limit."""
        for h in self.hosts:
            _ip("-n", self.ns("sw"), "link", "set", h, "up")
            self._set_blocked(h, [])
            _ns(self.ns(h), "nft", "flush", "chain", "inet", "fault", "lossy")
            subprocess.run(["ip", "netns", "exec", self.ns(h), "tc", "qdisc", "del", "dev", "eth0", "root"],
                           capture_output=True, timeout=CMD_TIMEOUT_S)
        self._faults.clear()

    def faults(self) -> dict:
        """The faults in place now (for the nemesis log)."""
        return {k: v for k, v in self._faults.items() if v}

    def _set_blocked(self, host: str, addrs: list[str]) -> None:
        ns = self.ns(host)
        script = "flush set inet fault blocked\n"
        if addrs:
            script += f"add element inet fault blocked {{ {', '.join(addrs)} }}\n"
        _ns(ns, "nft", "-f", "-", input=script)


_NFT_TABLE = """
table inet fault {
    set blocked { type ipv4_addr; }
    chain lossy { }
    chain input {
        type filter hook input priority 0; policy accept;
        ip saddr @blocked drop
        jump lossy
    }
    chain output {
        type filter hook output priority 0; policy accept;
        ip daddr @blocked drop
        jump lossy
    }
}
"""


def _free_subnet() -> int:
    """An S whose 10.213.S.0/24 no root-ns address or route uses (ours are torn down after)."""
    used = _ip("-4", "addr", "show") + _ip("-4", "route", "show")
    taken = {int(m) for m in re.findall(r"10\.213\.(\d+)\.", used)}
    start = os.getpid() % 250 + 1
    for k in range(250):
        s = (start + k) % 250 + 1
        if s not in taken:
            return s
    raise RuntimeError("no free 10.213.S.0/24 in the root namespace")


# --- probes over the bridge, from the root ns


def metadata_answers(host: str, port: int = NODE_PORT, timeout_s: float = 3.0) -> int:
    """A raw Metadata v1 for all topics; the number of brokers in the answer (0: none, or
    no answer)."""
    client = b"strom-faults"
    frame = struct.pack(">hhih", 3, 1, 7, len(client)) + client + struct.pack(">i", -1)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.settimeout(timeout_s)
            s.sendall(struct.pack(">i", len(frame)) + frame)
            size = struct.unpack(">i", brokers._recv(s, 4))[0]
            resp = brokers._recv(s, size)
    except (OSError, struct.error):
        return 0
    return struct.unpack(">i", resp[4:8])[0] if len(resp) >= 8 else 0


# --- a Strom cluster on the network


class Node:
    """One `strom serve` in namespace n<i>: listens and advertises on its own address."""

    def __init__(self, net: Net, node_id: int, root: Path, voters: str):
        self.net, self.id = net, node_id
        self.host = f"n{node_id}"
        self.addr = net.addr(self.host)
        self.workdir = root / f"node-{node_id}"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "strom.log"
        self.argv = [
            str(brokers.STROM_BIN), "serve",
            "--node-id", str(node_id),
            "--listen", f"{self.addr}:{NODE_PORT}",
            "--metrics-listen", f"{self.addr}:{METRICS_PORT}",
            "--data-dir", str(self.workdir / "data"),
            "--shards", "1",
            "--set", f"controller.quorum.voters={voters}",
            "--set", "schema_registry_enable=false",
        ]
        self.proc: subprocess.Popen | None = None
        self.paused = False
        self.runs = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.addr}:{NODE_PORT}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self.runs += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== run {self.runs} at {time.monotonic():.3f} =====\n".encode())
        self.proc = self.net.spawn(self.host, self.argv, self.log_path, env={"RUST_LOG": "info"},
                                   cwd=self.workdir)
        self.paused = False

    def kill9(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.paused = False

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=brokers.STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def log_tail(self, lines: int = 80) -> str:
        return brokers.tail(self.log_path, lines)

    # --- a data dir on a filesystem of its own, to fill up (the disk-full schedule)

    @property
    def disk(self) -> Path:
        return self.workdir / "disk"

    def data_on_tmpfs(self, headroom: int) -> None:
        """Moves the node's data dir onto a tmpfs of its current size plus `headroom` bytes,
        mounted at `disk` (the data dir becomes `disk/data`, so a filler file beside it
        fills the same filesystem). The node must be stopped; `unmount_disk` undoes the
        mount (`cluster()` calls it at the end). The mount's source names pytest's PID, so
        `sweep` unmounts what a killed run left."""
        assert not self.alive(), "move the data of a stopped node"
        data = self.workdir / "data"
        # Blocks, not sizes: index files are sparse (preallocated), and cp -a keeps them so.
        used = sum(f.stat().st_blocks * 512 for f in data.rglob("*") if f.is_file()) if data.exists() else 0
        self.disk.mkdir(exist_ok=True)
        _run("mount", "-t", "tmpfs", "-o", f"size={used + headroom}", f"{PREFIX}disk{os.getpid():07d}",
             str(self.disk))
        if data.exists():
            _run("cp", "-a", str(data), str(self.disk / "data"))
            shutil.rmtree(data)
        i = self.argv.index("--data-dir")
        self.argv[i + 1] = str(self.disk / "data")

    def fill_disk(self) -> int:
        """Fills the node's tmpfs to the last page with `disk/filler`: its next write gets
        ENOSPC. Returns the bytes written."""
        written = 0
        with open(self.disk / "filler", "ab", buffering=0) as f:
            for chunk in (1 << 20, 4096):
                block = b"\0" * chunk
                try:
                    while True:
                        written += f.write(block)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
        return written

    def free_disk(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.disk / "filler").unlink()

    def unmount_disk(self) -> None:
        if os.path.ismount(self.disk):
            subprocess.run(["umount", "-l", str(self.disk)], capture_output=True, timeout=CMD_TIMEOUT_S)


class NetCluster(list):
    """Three (or `nodes`) Strom nodes, one per namespace, node i at index i-1."""

    def __init__(self, net: Net, root: Path, nodes: int):
        super().__init__()
        self.net, self.root = net, root
        voters = ",".join(f"{i}@{net.addr(f'n{i}')}:{PEER_PORT}" for i in range(1, nodes + 1))
        for i in range(1, nodes + 1):
            self.append(Node(net, i, root, voters))

    def node(self, node_id: int) -> Node:
        return self[node_id - 1]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self)

    def wait_serving(self, node: Node, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not node.alive():
                raise brokers.BrokerStartError(f"node {node.id} exited ({node.proc.returncode}):\n{node.log_tail()}")
            if metadata_answers(node.addr) >= 1:
                return
            time.sleep(0.2)
        raise brokers.BrokerStartError(f"node {node.id} did not serve Metadata in {timeout_s:.0f}s:\n{node.log_tail()}")

    def start(self) -> None:
        for n in self:
            n.start()
        for n in self:
            self.wait_serving(n)

    def restart(self, node_id: int) -> None:
        n = self.node(node_id)
        n.kill9()
        n.start()
        self.wait_serving(n)

    def stop(self) -> None:
        for n in self:
            if n.alive():
                n.proc.send_signal(signal.SIGCONT)
                n.proc.send_signal(signal.SIGTERM)
        for n in self:
            n.stop()

    def logs(self, lines: int = 60) -> str:
        return "\n".join(f"--- node {n.id} ({n.log_path}) ---\n{n.log_tail(lines)}" for n in self)


@contextlib.contextmanager
def cluster(nodes: int = 3, clients: int = 2):
    """A `Net` and a started `NetCluster` on it; at the end every process is stopped, every
    namespace and veth removed, the temp dir removed (kept with STROM_COMPAT_KEEP_DIRS=1)."""
    root = Path(tempfile.mkdtemp(prefix="strom-faults-"))
    net = Net.create(nodes, clients)
    c = NetCluster(net, root, nodes)
    try:
        c.start()
        yield c
    finally:
        try:
            c.stop()
        finally:
            for n in c:
                n.unmount_disk()
            net.close()
            left = net.leftovers()
            if os.environ.get("STROM_COMPAT_KEEP_DIRS") == "1":
                print(f"fault cluster data, logs and histories kept in {root}")
            else:
                shutil.rmtree(root, ignore_errors=True)
            assert not left, f"namespaces or links left behind: {left}"
