"""Cluster metrics on Strom's /metrics (docs/operations.md "Cluster metrics"), on one
3-node Strom cluster: a killed follower makes its partition under-replicated on the
leader's /metrics and counts an ISR shrink there, its restart brings the ISR back and
counts an expansion; partitions of replication factor 1 on a killed node are offline on the
active controller's /metrics until it is back; a killed controller gives the metadata Raft
a new term and leader, counted as a leadership change on the survivors. Strom only: Kafka
has the same figures on JMX, which this suite does not scrape."""

from __future__ import annotations

import functools
import re
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import cluster_nodes
from conftest import BROKERS

pytestmark = pytest.mark.skipif("strom" not in BROKERS, reason="Strom's /metrics")

NODES = 3
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@pytest.fixture(scope="module")
def cluster():
    with cluster_nodes.started("strom", NODES) as c:
        yield c


@pytest.fixture(autouse=True)
def every_node_back_up(cluster):
    """A test that failed half-way leaves no node down for the next one."""
    yield
    cluster_nodes.restart_dead(cluster)


def scrape(node) -> list[tuple[str, dict, float]]:
    url = f"http://127.0.0.1:{node.extra['metrics_port']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and not line.startswith("#"):
            out.append((m.group(1), dict(LABEL.findall(m.group(3) or "")), float(m.group(4))))
    return out


def value(node, name, **labels) -> float | None:
    """The sum of `name`'s series whose labels include `labels` (None: no such series)."""
    found = [v for n, l, v in scrape(node) if n == name and all(l.get(k) == w for k, w in labels.items())]
    return sum(found) if found else None


wait_for = functools.partial(cluster_nodes.wait_for, timeout_s=60.0)

def controller(cluster) -> int:
    """The active controller's node id, as the live nodes' /metrics agree on it."""
    def agreed():
        leaders = {value(n, "strom_metadata_raft_leader") for n in cluster if n.alive()}
        return int(leaders.pop()) if len(leaders) == 1 and None not in leaders else None
    leader = wait_for("one metadata leader on every live node", lambda: (x := agreed()) is not None and x > 0 and x)
    assert value(cluster[leader - 1], "strom_active_controller") == 1
    return leader


def create(cluster, name, partitions, rf):
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    wait_for("every broker registered", lambda: len(admin.list_topics(timeout=5).brokers) == NODES)
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=rf)])[name].result(timeout=30)

    def placed():
        t = admin.list_topics(topic=name, timeout=5).topics[name]
        ps = t.partitions
        ok = t.error is None and len(ps) == partitions and all(len(p.isrs) == rf and p.leader > 0 for p in ps.values())
        return ok and {p.id: (p.leader, list(p.replicas)) for p in ps.values()}
    return wait_for(f"{name} placed with full ISRs", placed)


def produce(cluster, topic, n):
    p = Producer({"bootstrap.servers": ",".join(x.bootstrap for x in cluster if x.alive()), "acks": "1"})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0


def test_killed_follower_is_under_replicated_on_the_leader_until_it_is_back(cluster):
    topic = "urp"
    (leader, replicas), = create(cluster, topic, 1, 3).values()
    active = controller(cluster)
    # The follower to kill: not the controller, so the metadata quorum stays as it is.
    follower = next(r for r in replicas if r not in (leader, active))
    lead = cluster[leader - 1]
    part = {"topic": topic, "partition": "0"}
    wait_for("the partition fully replicated on its leader",
             lambda: value(lead, "strom_partition_under_replicated", **part) == 0
             and value(lead, "strom_partition_in_sync_replicas", **part) == 3)
    assert value(lead, "strom_partition_replicas", **part) == 3
    produce(cluster, topic, 50)
    wait_for("both followers caught up", lambda: all(
        value(lead, "strom_partition_replica_lag_offsets", replica=str(r), **part) == 0
        for r in replicas if r != leader))
    shrinks = value(lead, "strom_isr_shrinks_total")
    expands = value(lead, "strom_isr_expands_total")
    assert shrinks is not None and expands is not None

    cluster.kill9(follower)
    wait_for("the partition under-replicated on the leader",
             lambda: value(lead, "strom_partition_under_replicated", **part) == 1
             and value(lead, "strom_under_replicated_partitions") >= 1)
    assert value(lead, "strom_partition_in_sync_replicas", **part) == 2
    assert value(lead, "strom_isr_shrinks_total") > shrinks
    # The dead follower's lag grows with what the leader appends; the live one stays at 0.
    produce(cluster, topic, 20)
    wait_for("the dead follower lagging",
             lambda: value(lead, "strom_partition_replica_lag_offsets", replica=str(follower), **part) >= 20)
    live = next(r for r in replicas if r not in (leader, follower))
    wait_for("the live follower caught up",
             lambda: value(lead, "strom_partition_replica_lag_offsets", replica=str(live), **part) == 0)
    # No other node reports the leader's partition.
    for n in cluster:
        if n.alive() and n is not lead:
            assert value(n, "strom_partition_under_replicated", **part) is None

    cluster.restart(follower)
    wait_for("the ISR whole again on the leader",
             lambda: value(lead, "strom_partition_under_replicated", **part) == 0
             and value(lead, "strom_partition_in_sync_replicas", **part) == 3, timeout_s=90)
    assert value(lead, "strom_isr_expands_total") > expands
    wait_for("the restarted follower caught up",
             lambda: value(lead, "strom_partition_replica_lag_offsets", replica=str(follower), **part) == 0)


def test_partitions_of_a_killed_node_are_offline_on_the_controller_until_it_is_back(cluster):
    topic = "offline"
    # Replication factor 1 over three partitions: one on each node (round robin).
    placed = create(cluster, topic, 3, 1)
    active = controller(cluster)
    ctl = cluster[active - 1]
    victim = next(leader for leader, _ in placed.values() if leader != active)
    gone = sorted(str(p) for p, (leader, _) in placed.items() if leader == victim)
    assert value(ctl, "strom_offline_partitions") == 0
    assert value(ctl, "strom_active_brokers") == NODES

    cluster.kill9(victim)
    wait_for("the victim's partitions offline on the controller",
             lambda: sorted(l["partition"] for n, l, v in scrape(ctl)
                            if n == "strom_partition_offline" and l["topic"] == topic and v == 1) == gone)
    assert value(ctl, "strom_offline_partitions") >= len(gone)
    assert value(ctl, "strom_fenced_brokers") == 1
    # Only the active controller reports them, so a sum over the nodes counts each once.
    for n in cluster:
        if n.alive() and n is not ctl:
            assert value(n, "strom_offline_partitions") == 0
            assert value(n, "strom_active_controller") == 0

    cluster.restart(victim)
    wait_for("no partition offline once the node is back",
             lambda: value(ctl, "strom_offline_partitions") == 0 and value(ctl, "strom_fenced_brokers") == 0,
             timeout_s=90)


def test_killed_controller_gives_a_new_term_and_a_counted_leadership_change(cluster):
    active = controller(cluster)
    survivors = [i for i in range(1, NODES + 1) if i != active]
    before = {i: (value(cluster[i - 1], "strom_metadata_raft_term"),
                  value(cluster[i - 1], "strom_metadata_raft_leader_changes_total")) for i in survivors}
    for i in survivors:
        n = cluster[i - 1]
        commit = value(n, "strom_metadata_raft_commit_index")
        applied = value(n, "strom_metadata_raft_applied_index")
        assert commit >= 0 and applied >= 0 and value(n, "strom_metadata_raft_last_log_index") >= applied
        assert value(n, "strom_metadata_raft_voters") == NODES

    cluster.kill9(active)
    new = wait_for("a new metadata leader among the survivors",
                   lambda: (x := controller(cluster)) != active and x)
    assert new in survivors
    for i in survivors:
        n = cluster[i - 1]
        term, changes = before[i]
        wait_for(f"node {i} at a later term", lambda: value(n, "strom_metadata_raft_term") > term)
        assert value(n, "strom_metadata_raft_leader_changes_total") > changes
    cluster.restart(active)
    wait_for("the restarted node following the new leader",
             lambda: value(cluster[active - 1], "strom_metadata_raft_leader") == new)
