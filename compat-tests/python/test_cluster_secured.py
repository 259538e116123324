"""A fully secured 3-node Strom cluster (docs/security.md "A secured cluster"): its only
listener is SASL_SSL with SCRAM-SHA-512, for clients and for the brokers themselves
(`inter.broker.listener.name`, `sasl.mechanism.inter.broker.protocol` and the broker's own
credentials in `listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config`, as in Kafka), with
the StandardAuthorizer and `super.users=User:broker` (what gives the brokers CLUSTER_ACTION)
plus the admin. With confluent-kafka over SASL_SSL:
- an RF=3 topic with `min.insync.replicas=2` takes acks=all writes; the followers replicate
  over the secured listener (ISR of 3, replica logs byte-identical); a kill -9 of the leader
  fails over with nothing acknowledged lost, and the restarted node catches up;
- a transaction over partitions led by three different nodes commits (its markers go to the
  other leaders as WriteTxnMarkers, the leaders verify with the coordinator over
  AddPartitionsToTxn, all on the secured listener) and read_committed reads it; an aborted
  one stays hidden.
The internal topics keep Kafka's defaults (3 replicas, `transaction.state.log.min.isr` 2),
so the transaction log replicates over the secured listener too. Without the broker's
credentials no follower could fetch: the logs would never match.

One cluster for the module. Strom only: the 3-node Apache Kafka counterpart is not run yet
(test_cluster.py).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import brokers
import cluster_nodes
import pki
import security_clients as sc
from cluster_nodes import wait_for

pytestmark = pytest.mark.timeout(300)

NODES = 3
USERS = {"broker": "broker-secret", "admin": "admin-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
        f'password="{USERS["broker"]}";')


def creds(p: pki.Pki, user: str = "admin") -> sc.Creds:
    return sc.Creds("SASL_SSL", ca=p.ca, mechanism="SCRAM-SHA-512", user=user, password=USERS[user])


@pytest.fixture(scope="module")
def cluster():
    if not brokers.STROM_BIN.is_file():
        raise brokers.BrokerStartError("build target/release/strom first")
    with cluster_nodes.cluster_root("strom-compat-cluster-secured-") as (root, nodes):
        certs = pki.make(root / "pki")
        raft_ports = {i: brokers.free_port() for i in range(1, NODES + 1)}
        settings = {
            "controller.quorum.voters": ",".join(f"{i}@127.0.0.1:{p}" for i, p in raft_ports.items()),
            "ssl.keystore.location": certs.keystore("broker"),
            "ssl.truststore.location": certs.ca,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": JAAS,
            "authorizer.class.name": AUTHORIZER,
            "super.users": "User:broker;User:admin",
            "schema_registry_enable": "false",
        }
        for i in range(1, NODES + 1):
            workdir = root / f"node-{i}"
            workdir.mkdir()
            # The brokers' own user and the admin, on every node before its first start.
            brokers.add_strom_users(workdir / "data", [(u, pw, "SCRAM-SHA-512") for u, pw in USERS.items()])
            nodes.append(cluster_nodes.Node(i, workdir, workdir / "data", [("SASL_SSL", "SASL_SSL")], settings,
                                            ready_on="SASL_SSL"))
        for n in nodes:
            n.spawn()
        for n in nodes:
            # Only a SASL_SSL port: open is all a raw check can see; then Metadata over it.
            n.proc.wait_ready()
        a = AdminClient(sc.confluent_conf(nodes[0].addr("SASL_SSL"), creds(certs)))
        wait_for("3 brokers", lambda: len(a.list_topics(timeout=5).brokers) == NODES, 60)
        yield nodes, certs


def bootstrap(nodes) -> str:
    return ",".join(n.addr("SASL_SSL") for n in nodes if n.alive())


def admin(nodes, certs) -> AdminClient:
    return AdminClient(sc.confluent_conf(bootstrap(nodes), creds(certs)))


def partitions(nodes, certs, topic):
    t = admin(nodes, certs).list_topics(topic, timeout=5).topics.get(topic)
    return None if t is None or t.error is not None else t.partitions


def wait_isr(nodes, certs, topic, partition, size):
    def check():
        p = (partitions(nodes, certs, topic) or {}).get(partition)
        return p if p is not None and p.leader > 0 and len(p.isrs) == size else None
    return wait_for(f"{topic}-{partition} with an ISR of {size}", check, 60)


def create(nodes, certs, topic, count, configs=None):
    a = admin(nodes, certs)  # held until the answer: a dropped client cancels its requests
    # Three replicas need three unfenced brokers (a restarted node is unfenced by its first
    # heartbeats): Metadata lists the live ones.
    wait_for("3 live brokers", lambda: len(a.list_topics(timeout=5).brokers) == NODES)
    a.create_topics([NewTopic(topic, count, replication_factor=3, config=configs or {})])[topic].result(timeout=30)
    return {p: wait_isr(nodes, certs, topic, p, NODES).leader for p in range(count)}


def identical_logs(nodes, topic, partition):
    def logs():
        data = [(n.data / f"{topic}-{partition}" / "00000000000000000000.log").read_bytes() for n in nodes]
        return data if all(d == data[0] for d in data) and data[0] else None
    return wait_for(f"identical replica logs of {topic}-{partition}", logs, 30)[0]


def produce(nodes, certs, topic, values):
    """acks=all, idempotent; every record acknowledged, or the test fails."""
    errors: list = []
    acked: list = []
    p = Producer({**sc.confluent_conf(bootstrap(nodes), creds(certs)), "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000})
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=lambda e, m: (errors if e else acked).append(e or m))
    assert p.flush(90) == 0
    assert errors == [], errors[:3]
    return acked


def read(nodes, certs, topic, parts, expected, committed=False):
    conf = {**sc.confluent_conf(bootstrap(nodes), creds(certs)), "group.id": f"{topic}-reader",
            "enable.auto.commit": False}
    if committed:
        conf["isolation.level"] = "read_committed"
    c = Consumer(conf)
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < expected and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append(m.value())
    # Anything more would be a duplicate (or, read_committed, an aborted record).
    m = c.poll(2.0)
    while m is not None:
        if not m.error():
            got.append(m.value())
        m = c.poll(0.5)
    c.close()
    return got


def test_rf3_acks_all_replicates_over_sasl_ssl_and_fails_over_on_a_leader_kill(cluster):
    nodes, certs = cluster
    topic = "secured-rf3"
    leader = create(nodes, certs, topic, 1, {"min.insync.replicas": "2"})[0]
    first = [f"a{i:05d}".encode() for i in range(500)]
    produce(nodes, certs, topic, first)
    assert b"a00499" in identical_logs(nodes, topic, 0)

    killed = nodes[leader - 1]
    killed.kill9()
    moved = wait_for("a new leader", lambda: (lambda p: p if p and p[0].leader not in (-1, leader) else None)(
        partitions(nodes, certs, topic)))
    assert leader not in moved[0].isrs
    # Two in-sync replicas left: acks=all goes on (min.insync.replicas=2).
    second = [f"b{i:05d}".encode() for i in range(500)]
    produce(nodes, certs, topic, second)
    got = read(nodes, certs, topic, [0], len(first) + len(second))
    assert got == first + second, "every acknowledged record once, in order"

    killed.spawn().wait_ready()
    wait_isr(nodes, certs, topic, 0, NODES)
    assert b"b00499" in identical_logs(nodes, topic, 0)


def test_transaction_over_partitions_led_by_three_nodes_commits_over_sasl_ssl(cluster):
    nodes, certs = cluster
    topic = "secured-txn"
    leaders = create(nodes, certs, topic, 3)
    assert set(leaders.values()) == {1, 2, 3}, leaders
    p = Producer({**sc.confluent_conf(bootstrap(nodes), creds(certs)), "transactional.id": "secured-txn",
                  "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
    p.init_transactions(60)

    def transaction(values, commit=True):
        p.begin_transaction()
        for i, v in enumerate(values):
            p.produce(topic, value=v, partition=i % 3)
        if commit:
            p.commit_transaction(60)
        else:
            p.flush(30)
            p.abort_transaction(60)

    committed = [f"c{i}".encode() for i in range(30)]
    transaction(committed)
    aborted = [f"x{i}".encode() for i in range(9)]
    transaction(aborted, commit=False)
    # A third one after the abort: its markers too must reach every leader.
    last = [f"d{i}".encode() for i in range(9)]
    transaction(last)
    got = read(nodes, certs, topic, range(3), len(committed) + len(last), committed=True)
    assert sorted(got) == sorted(committed + last)
    assert not set(got) & set(aborted)
