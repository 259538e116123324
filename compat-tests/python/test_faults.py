"""Fault schedules against a 3-node Strom cluster, each node in its own network namespace
(netns.py), under load from clients in two client namespaces (fault_client.py: two
idempotent acks=all producers, a consumer group of two members, a transactional
consume-transform-produce worker and a read_committed reader), with every client operation
in a history that history.py checks afterwards: no lost acknowledged write, no duplicate, no
divergence, no non-monotonic read, no aborted or uncommitted read, no exactly-once
duplicate, no lost commit.

Schedules (one test each, `STROM_FAULT_SECONDS` of faults each, 60 by default):
  a. a partition leader (or the metadata controller) cut off from the majority, with one
     client on its side;
  b. 2|1 splits, with clients on both sides;
  c. flapping links, random packet loss and slow links;
  d. SIGSTOP of a partition leader past the session timeout, then SIGCONT: a stale leader
     must not acknowledge;
  e. kill -9 of random nodes (now and then two at once), restarted.

After the faults: every link healed and every node running, the cluster must recover
(full ISRs, acks again) within a bound, then the clients stop and a final read from the
root namespace reads every partition to its end. The seed (`STROM_FAULT_SEED`, default 1)
fixes the schedule; it is printed with every failure, with the anomalies, a history excerpt
and the nodes' log tails. One cluster for the module; each schedule has its own topics.

Runs with `STROM_FAULT_TESTS=1` (not yet in CI's default run: see ON_DEMAND). Needs root,
`ip netns` and nftables (netns.unavailable); skipped otherwise, except where
`STROM_FAULTS_REQUIRED=1` (set by scripts/test-all.sh as root) makes that a failure.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import history
import netns

SEED = os.environ.get("STROM_FAULT_SEED", "1")
SECONDS = float(os.environ.get("STROM_FAULT_SECONDS", "60"))
PARTITIONS = 3
RATE = float(os.environ.get("STROM_FAULT_RATE", "40"))  # records per second per producer
RECOVERY_S = 120.0  # after the last fault: full ISRs and acks again
TIMEOUT_S = SECONDS + RECOVERY_S + 240
CONTROL_S = 15.0  # the negative control's one fault and the wait after it
CLIENT = Path(__file__).resolve().parent / "fault_client.py"

# Opt-in (STROM_FAULT_TESTS=1, docs/operations.md "Fault tests"): several minutes as root,
# so CI's default run leaves them to the job that sets it. No anomaly is tolerated.
ON_DEMAND = os.environ.get("STROM_FAULT_TESTS") != "1"
_why = netns.unavailable()
if _why and not ON_DEMAND and os.environ.get("STROM_FAULTS_REQUIRED") == "1":
    raise RuntimeError(f"STROM_FAULTS_REQUIRED=1 but the fault tests cannot run: {_why}")
if ON_DEMAND:
    _why = "fault schedules run with STROM_FAULT_TESTS=1 (docs/operations.md \"Fault tests\")"
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")


@pytest.fixture(scope="module")
def cluster():
    with netns.cluster(nodes=3, clients=2) as c:
        yield c


def say(*a):
    print(f"[faults seed={SEED} {time.strftime('%H:%M:%S')}]", *a, flush=True)


def wait_for(what, check, timeout_s):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except KafkaException as e:
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what} (last: {last!r})")


def partitions_md(c, topic):
    """{partition: metadata} of `topic` as the first node that answers sees it."""
    for n in c:
        if not n.alive() or n.paused:
            continue
        try:
            t = AdminClient({"bootstrap.servers": n.bootstrap}).list_topics(topic=topic, timeout=3).topics[topic]
        except KafkaException:
            continue
        if t.error is None:
            return t.partitions
    return {}


def unhealthy(c, topics):
    """What keeps the cluster from being whole, as node 1..3 see `topics`: None when every
    partition has a leader and all three nodes in its ISR on every node."""
    for n in c:
        if not n.alive():
            return f"node {n.id} is not running"
        try:
            md = AdminClient({"bootstrap.servers": n.bootstrap}).list_topics(timeout=3)
        except KafkaException as e:
            return f"node {n.id}: {e}"
        for t in topics:
            tm = md.topics.get(t)
            if tm is None or tm.error is not None or len(tm.partitions) != PARTITIONS:
                return f"node {n.id}: {t} {tm.error if tm else 'missing'}"
            for p in tm.partitions.values():
                if p.leader < 0 or len(p.isrs) != 3:
                    return f"node {n.id}: {t}-{p.id} leader {p.leader} isr {p.isrs}"
    return None


def healthy(c, topics):
    return unhealthy(c, topics) is None


def controller(c):
    for n in c:
        if n.alive() and not n.paused:
            try:
                return AdminClient({"bootstrap.servers": n.bootstrap}).list_topics(timeout=3).controller_id
            except KafkaException:
                continue
    return -1


class Run:
    """One schedule's topics, clients, nemesis log and verdict."""

    def __init__(self, c, name, acks="all", seconds=SECONDS):
        self.c, self.name, self.acks_setting, self.seconds = c, name, acks, seconds
        self.dir = c.root / name
        self.dir.mkdir()
        self.rng = random.Random(f"{SEED}:{name}")
        self.input, self.output = f"{name}-in", f"{name}-out"
        self.clients: dict[str, object] = {}
        self.nemesis = history.Recorder(self.dir / "nemesis.jsonl", "nemesis")
        self.ops = 0  # faults injected
        self.txn_stuck = False  # no transaction committed within RECOVERY_S of healing

    def create_topics(self):
        admin = AdminClient({"bootstrap.servers": self.c.bootstrap})
        wait_for("3 brokers", lambda: len(admin.list_topics(timeout=5).brokers) == 3, 60)
        fs = admin.create_topics([NewTopic(t, num_partitions=PARTITIONS, replication_factor=3,
                                           config={"min.insync.replicas": "2"})
                                  for t in (self.input, self.output)])
        for f in fs.values():
            f.result(timeout=30)
        wait_for("full ISRs of the new topics", lambda: healthy(self.c, [self.input, self.output]), 60)

    def client(self, role, name, host, **kw):
        argv = [sys.executable, str(CLIENT), role, "--name", name, "--bootstrap", self.c.bootstrap,
                "--history", str(self.dir / f"{name}.jsonl"), "--seed", SEED,
                "--partitions", str(PARTITIONS), "--seconds", str(self.seconds + RECOVERY_S + 120)]
        for k, v in kw.items():
            argv += [f"--{k.replace('_', '-')}", str(v)]
        self.clients[name] = self.c.net.spawn(host, argv, self.dir / f"{name}.log")

    def start_clients(self):
        g = f"{self.name}-group"
        self.client("producer", "p1", "c1", topic=self.input, rate=RATE, acks=self.acks_setting)
        self.client("producer", "p2", "c2", topic=self.input, rate=RATE, acks=self.acks_setting)
        self.client("consumer", "g1", "c1", topic=self.input, group=g)
        self.client("consumer", "g2", "c2", topic=self.input, group=g)
        self.client("txn", "x1", "c2", topic=self.input, output=self.output, group=f"{self.name}-txn")
        self.client("reader", "r1", "c1", topic=self.output)

    def events(self):
        return history.load(sorted(self.dir.glob("*.jsonl")))

    def acks(self, since=0.0):
        return sum(1 for e in self.events() if e["type"] == "ack" and e["t"] > since)

    def op(self, what, **f):
        """A nemesis step: logged in the history and on stdout; `ops` counts the faults."""
        if what in ("partition", "link-down", "sigstop", "kill9", "disk-full") or f.get("percent") or f.get("rate"):
            self.ops += 1
        self.nemesis("nemesis", op=what, **f)
        say(f"{self.name}: {what} {json.dumps(f) if f else ''}")

    def leader_of(self, topic, p):
        md = partitions_md(self.c, topic).get(p)
        return md.leader if md is not None else -1

    def random_input_leader(self):
        """(partition, node id of its leader) of a random input partition; None, after waiting
        for the cluster to settle, when that partition has no leader now."""
        p = self.rng.randrange(PARTITIONS)
        target = self.leader_of(self.input, p)
        if target < 1:
            self.settle()
            return None
        return p, target

    def settle(self, timeout_s=45.0):
        """Between faults: wait for full ISRs, but go on (with a note) if they are not back:
        recovery is only required at the end."""
        try:
            wait_for("full ISRs", lambda: healthy(self.c, [self.input, self.output]), timeout_s)
        except AssertionError:
            self.op("not-settled", faults=self.c.net.faults())

    def recover(self):
        """Every fault undone, every node running; the cluster must take acks again."""
        self.c.net.heal()
        for n in self.c:
            if n.paused:
                n.resume()
            if not n.alive():
                n.start()
        self.op("healed")
        healed_at = time.monotonic()
        try:
            wait_for("full ISRs after healing", lambda: healthy(self.c, [self.input, self.output]), RECOVERY_S)
        except AssertionError as e:
            raise AssertionError(f"{e}: {unhealthy(self.c, [self.input, self.output])}") from None
        wait_for("acks after healing", lambda: self.acks(since=healed_at) > 20, RECOVERY_S)
        # Liveness of the transactional path too: under the faults it may starve (a
        # coordinator moving, the group rebalancing), healed it must commit again. Noted
        # here and judged in `verify`, with the safety checks, so a failure reports both.
        try:
            wait_for("a committed transaction after healing", lambda: any(
                e["type"] == "txn_end" and e["outcome"] == "committed" and e["t"] > healed_at
                for e in self.events()), RECOVERY_S)
        except AssertionError:
            self.txn_stuck = True
            self.op("txn-not-live", after_s=RECOVERY_S)
        say(f"{self.name}: recovered {time.monotonic() - healed_at:.1f}s after healing")

    def stop_clients(self):
        for p in self.clients.values():
            if p.poll() is None:
                p.terminate()
        # A client stuck in a blocking call (a transaction's commit against a coordinator
        # that just moved) is killed: its history is written line by line.
        deadline = time.monotonic() + 45
        for name, p in self.clients.items():
            try:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
                say(f"{self.name}: client {name} did not stop in time; killed")

    def final_read(self):
        """Every partition of both topics read to its end from the root namespace (read
        committed: the output's aborted transactions are not there to read)."""
        rec = history.Recorder(self.dir / "final.jsonl", "final")
        for topic in (self.input, self.output):
            c = Consumer({"bootstrap.servers": self.c.bootstrap, "group.id": f"{self.name}-final",
                          "enable.auto.commit": False, "isolation.level": "read_committed",
                          "enable.partition.eof": False})
            try:
                ends = {}
                for p in range(PARTITIONS):
                    ends[p] = wait_for(f"the end of {topic}-{p}", lambda p=p: c.get_watermark_offsets(
                        TopicPartition(topic, p), timeout=5), 60)[1]
                c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
                reached = {p: 0 for p in range(PARTITIONS)}
                deadline = time.monotonic() + 120
                while any(reached[p] < ends[p] for p in ends) and time.monotonic() < deadline:
                    for m in c.consume(num_messages=500, timeout=0.5):
                        if m.error():
                            continue
                        rec("poll", consumer="final", topic=topic, partition=m.partition(), offset=m.offset(),
                            value=m.value().decode(), isolation="read_committed")
                    for tp in c.position([TopicPartition(topic, p) for p in range(PARTITIONS)]):
                        if tp.offset >= 0:
                            reached[tp.partition] = max(reached[tp.partition], tp.offset)
                for p in range(PARTITIONS):
                    rec("final_end", consumer="final", topic=topic, partition=p, end=ends[p], reached=reached[p],
                        isolation="read_committed")
            finally:
                c.close()
        rec.close()

    def verify(self, min_ops=1, expect=()):
        """Fails with the seed, the anomalies, a history excerpt and the nodes' logs unless
        the history has exactly the anomaly kinds `expect` (none for every real schedule)."""
        events = self.events()
        counts = history.summary(events)
        say(f"{self.name}: history {json.dumps(counts, sort_keys=True)}")
        anomalies = history.check(events)
        failed_clients = {n: p.returncode for n, p in self.clients.items() if p.returncode not in (0, -9)}
        problems = []
        if set(anomalies) != set(expect):
            problems.append(f"expected anomalies {sorted(expect)}, found "
                            + json.dumps({k: len(v) for k, v in anomalies.items()}) + "\n"
                            + history.excerpt(events, anomalies))
        elif anomalies:
            say(f"{self.name}: the expected anomalies " + json.dumps({k: len(v) for k, v in anomalies.items()})
                + "\n" + history.excerpt(events, anomalies, around=1))
        if failed_clients:
            problems.append(f"clients crashed: {failed_clients} (logs in {self.dir})")
        # Progress: a schedule that injected nothing, or under which nothing happened, proves
        # nothing.
        if self.ops < min_ops:
            problems.append(f"only {self.ops} faults injected (at least {min_ops})")
        for kind, least in (("ack", 50), ("poll", 50)):
            if counts.get(kind, 0) < least:
                problems.append(f"too little load: {counts.get(kind, 0)} {kind} (at least {least})")
        # The transactional worker commits again once healed (it stalled on NOT_COORDINATOR
        # while its group's and its transactional id's coordinators sat on different nodes,
        # before TxnOffsetCommit asked the other node).
        if self.txn_stuck or counts.get("txn_committed", 0) < 1:
            problems.append(f"the transactional worker did not commit within {RECOVERY_S:.0f}s of healing "
                            f"({counts.get('txn_committed', 0)} commits in all)")
        if problems:
            nodes = self.c.logs(40)
            kept = self.keep_evidence()
            pytest.fail(f"schedule {self.name}, STROM_FAULT_SEED={SEED} STROM_FAULT_SECONDS={SECONDS:.0f} ({self.seconds:.0f} s here); "
                        f"histories and node logs copied to {kept}\n"
                        + "\n".join(problems) + "\n" + nodes, pytrace=False)

    def run(self, nemesis, expect=()):
        """The whole schedule: topics, clients, `nemesis(self, until)` for `seconds`, recovery,
        final read, check. Faults are undone and clients stopped even on failure."""
        try:
            self._run(nemesis, expect)
        except BaseException:
            say(f"{self.name}: failed, STROM_FAULT_SEED={SEED}; evidence in {self.keep_evidence()}")
            raise

    def keep_evidence(self) -> Path:
        """The schedule's histories and the nodes' logs, copied out of the module's temp dir."""
        kept = Path(tempfile.gettempdir()) / f"strom-faults-failed-{self.name}-seed{SEED}-{os.getpid()}"
        shutil.copytree(self.dir, kept, dirs_exist_ok=True)
        for n in self.c:
            if n.log_path.exists():
                shutil.copy(n.log_path, kept / f"node-{n.id}.log")
        return kept

    def _run(self, nemesis, expect):
        self.create_topics()
        self.start_clients()
        try:
            wait_for("first acks", lambda: self.acks() > 20, 60)
            # The groups formed before the first fault: the commit checks need assignments.
            wait_for("every group member assigned", lambda: {"g1", "g2", "x1"} <= {
                e["proc"] for e in self.events() if e["type"] == "assign"}, 60)
            self.op("start", seed=SEED, seconds=self.seconds)
            nemesis(self, time.monotonic() + self.seconds)
            self.recover()
        finally:
            # Also when the schedule failed half-way: the next schedule starts on a whole,
            # healed cluster.
            try:
                self.c.net.heal()
                for n in self.c:
                    if n.paused:
                        n.resume()
                    if not n.alive():
                        n.start()
                for n in self.c:
                    self.c.wait_serving(n)
            finally:
                self.stop_clients()
                self.nemesis.close()
        self.final_read()
        self.verify(expect=expect)


def hold(run, until, seconds):
    """Keep a fault for `seconds` (never past `until`): the faults' clock, not a sync."""
    time.sleep(max(0.0, min(seconds, until - time.monotonic())))


# --- the schedules


def leader_cut_off(run, until):
    while time.monotonic() < until - 5:
        if run.rng.random() < 0.3:
            target, what = controller(run.c), "controller"
        else:
            p = run.rng.randrange(PARTITIONS)
            target, what = run.leader_of(run.rng.choice([run.input, run.output]), p), f"leader of partition {p}"
        if target < 1:
            run.settle()
            continue
        others = {f"n{i}" for i in (1, 2, 3) if i != target}
        run.c.net.partition([{f"n{target}", "c1"}, others | {"c2"}])
        run.op("partition", cut=f"n{target}", role=what, groups=run.c.net.faults()["partition"])
        hold(run, until, run.rng.uniform(6, 12))
        run.c.net.heal()
        run.op("heal")
        run.settle()


def split_two_one(run, until):
    while time.monotonic() < until - 5:
        minority = run.rng.choice([1, 2, 3])
        majority = {f"n{i}" for i in (1, 2, 3) if i != minority}
        groups = [{f"n{minority}", "c1"}, majority | {"c2"}]
        if run.rng.random() < 0.5:
            groups = [{f"n{minority}", "c2"}, majority | {"c1"}]
        run.c.net.partition(groups)
        run.op("partition", groups=run.c.net.faults()["partition"])
        hold(run, until, run.rng.uniform(5, 12))
        run.c.net.heal()
        run.op("heal")
        run.settle()


def flaky_links(run, until):
    hosts = ["n1", "n2", "n3", "c1", "c2"]
    while time.monotonic() < until - 3:
        r = run.rng.random()
        h = run.rng.choice(hosts)
        if r < 0.4:
            # A flap: down for a moment, up again (several in a row).
            for _ in range(run.rng.randint(1, 4)):
                run.c.net.link(h, False)
                run.op("link-down", host=h)
                hold(run, until, run.rng.uniform(0.2, 2.5))
                run.c.net.link(h, True)
                run.op("link-up", host=h)
                hold(run, until, run.rng.uniform(0.2, 1.5))
        elif r < 0.75:
            pct = run.rng.choice([5, 10, 20, 35])
            run.c.net.loss(h, pct)
            run.op("loss", host=h, percent=pct)
            hold(run, until, run.rng.uniform(3, 8))
            run.c.net.loss(h, 0)
            run.op("loss", host=h, percent=0)
        else:
            rate = run.rng.choice(["256kbit", "1mbit", "4mbit"])
            run.c.net.slow(h, rate)
            run.op("slow", host=h, rate=rate)
            hold(run, until, run.rng.uniform(3, 8))
            run.c.net.slow(h, None)
            run.op("slow", host=h, rate=None)


def pause_leader(run, until):
    while time.monotonic() < until - 5:
        picked = run.random_input_leader()
        if picked is None:
            continue
        p, target = picked
        node = run.c.node(target)
        # Past the 3 s session timeout and a Raft election: a new leader takes over while
        # this one sleeps, and its queued requests are served when it wakes up.
        secs = run.rng.uniform(5, 10)
        node.pause()
        run.op("sigstop", node=target, leader_of=p, seconds=round(secs, 1))
        hold(run, until + 5, secs)
        node.resume()
        run.op("sigcont", node=target)
        run.settle()


def kill_nodes(run, until):
    """One node at a time, and one time in four a second one shortly after (the metadata
    quorum and every ISR of two lost until they restart)."""
    while time.monotonic() < until - 5:
        targets = [run.rng.choice([1, 2, 3])]
        if run.rng.random() < 0.25:
            targets.append(run.rng.choice([i for i in (1, 2, 3) if i != targets[0]]))
        for i, target in enumerate(targets):
            if i:
                hold(run, until + 5, run.rng.uniform(0.2, 2))
            run.c.node(target).kill9()
            run.op("kill9", node=target)
        hold(run, until + 5, run.rng.uniform(1, 6))
        for target in targets:
            run.c.node(target).start()
            run.op("restart", node=target)
        for target in targets:
            run.c.wait_serving(run.c.node(target))
        run.settle()


@pytest.mark.timeout(CONTROL_S + RECOVERY_S + 240)
def test_negative_control_acks_1_writes_to_a_cut_off_leader_are_found_lost(cluster):
    """The harness and the checker can fail: acks=1 producers, one of them beside a
    partition leader cut off from the majority, get writes acknowledged that the new
    leader never had and the old one truncates when it rejoins (Kafka's acks=1 contract,
    docs/design.md "Lost quorum"). The checker must report them lost, and their offsets
    as diverging (acknowledged with one value, read with another), and nothing else."""
    Run(cluster, "control", acks="1", seconds=CONTROL_S).run(cut_input_leaders, expect={"lost", "divergence"})


def cut_input_leaders(run, until):
    """Cut the leader of input partition 0 off with client c1 for 8 s, once."""
    target = run.leader_of(run.input, 0)
    assert target >= 1, "input partition 0 has a leader"
    run.c.net.partition([{f"n{target}", "c1"}, {f"n{i}" for i in (1, 2, 3) if i != target} | {"c2"}])
    run.op("partition", cut=f"n{target}", groups=run.c.net.faults()["partition"])
    hold(run, until, 8)
    run.c.net.heal()
    run.op("heal")


@pytest.mark.timeout(TIMEOUT_S)
def test_leader_cut_off_from_majority_loses_no_acknowledged_write(cluster):
    Run(cluster, "leadercut").run(leader_cut_off)


@pytest.mark.timeout(TIMEOUT_S)
def test_two_one_split_with_clients_on_both_sides_loses_no_acknowledged_write(cluster):
    Run(cluster, "split").run(split_two_one)


@pytest.mark.timeout(TIMEOUT_S)
def test_flapping_lossy_and_slow_links_lose_no_acknowledged_write(cluster):
    Run(cluster, "flaky").run(flaky_links)


@pytest.mark.timeout(TIMEOUT_S)
def test_paused_leader_does_not_acknowledge_after_it_was_replaced(cluster):
    Run(cluster, "pause").run(pause_leader)


@pytest.mark.timeout(TIMEOUT_S)
def test_random_kill9_and_restart_loses_no_acknowledged_write(cluster):
    Run(cluster, "kill").run(kill_nodes)


# --- disk full on one node (appended after the others: a schedule of its own setup)

DISK_HEADROOM = 128 * 1024 * 1024  # each node's tmpfs: its data now plus this much
DISK_STOP_S = 20.0  # a node whose disk is full must stop within this (it writes every fetch)


def disk_full(run, until):
    """Each round: the node leading a random input partition has its data dir filled to the
    last page (a filler file on its tmpfs) under load. It must stop by itself (Strom on a
    cluster stops a node whose data dir fails, as Kafka halts a broker whose only log dir
    failed: shard/log_dir_failure.rs) and its partitions move to the other replicas; then
    the filler goes and the node is started again, as an operator would. The filler is
    removed even when a round fails, so that the run's recovery can start the node."""
    while time.monotonic() < until - 10:
        picked = run.random_input_leader()
        if picked is None:
            continue
        p, target = picked
        node = run.c.node(target)
        try:
            filled = node.fill_disk()
            run.op("disk-full", node=target, leader_of=p, filler_bytes=filled)
            deadline = time.monotonic() + DISK_STOP_S
            while node.alive() and time.monotonic() < deadline:
                time.sleep(0.2)
            if node.alive():
                run.op("disk-full-node-still-running", node=target, after_s=DISK_STOP_S)
            else:
                run.stopped += 1
                run.op("node-stopped", node=target, status=node.proc.returncode)
            hold(run, until + 5, run.rng.uniform(3, 8))
        finally:
            node.free_disk()
        run.op("disk-freed", node=target)
        if not node.alive():
            node.start()
            run.op("restart", node=target)
            run.c.wait_serving(node)
        run.settle()


@pytest.mark.timeout(TIMEOUT_S + 180)
def test_disk_full_on_a_leader_stops_it_and_loses_no_acknowledged_write(cluster):
    """Every node's data dir is moved onto a tmpfs of its own first (one node at a time,
    restarted onto it), so that whichever node leads can have its disk filled."""
    try:
        for n in cluster:
            n.stop()
            n.data_on_tmpfs(DISK_HEADROOM)
            n.start()
            cluster.wait_serving(n)
            # The next node stops only once this one is back in the metadata quorum's view.
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            wait_for(f"node {n.id} registered again", lambda: len(admin.list_topics(timeout=5).brokers) == 3, 60)
        run = Run(cluster, "diskfull")
        run.stopped = 0  # rounds in which the full node stopped by itself
        run.run(disk_full)
        assert run.stopped >= 1, (f"no node stopped on a full disk (seed {SEED}); nemesis log in {run.dir}\n"
                                  + cluster.logs(40))
    finally:
        for n in cluster:
            n.free_disk()
