"""The rest of the cluster's metadata in the replicated image (docs/design.md "Cluster"):
on a secured 3-node Strom cluster (an EXTERNAL SASL_SSL listener with SCRAM-SHA-512 for
clients and an INTERNAL PLAINTEXT one, `inter.broker.listener.name`, for the brokers and the
per-node checks; Kafka's StandardAuthorizer; admin a super user, added with `strom user add`
on every node before their first start, as `kafka-storage format --add-scram` is), a change
made through one node holds on every node:
- every node registers both listeners: a client on EXTERNAL is given the EXTERNAL endpoints
  (Metadata, DescribeCluster, FindCoordinator), one on INTERNAL the INTERNAL ones, and an
  RF=3 topic replicates over INTERNAL;
- a SCRAM user made with Kafka's `kafka-configs.sh` authenticates on each node;
- an ACL made with `kafka-acls.sh` lets alice produce to the partitions each node leads
  (TOPIC_AUTHORIZATION_FAILED before, with confluent-kafka);
- a topic's `max.message.bytes` set with `kafka-configs.sh` is described alike by every
  node (DescribeConfigs sent to each) and enforced by each partition's leader;
- a client quota set with `kafka-configs.sh` is described by every node, and so are a
  cluster-wide broker default, a group's config and a feature level (`kafka-features.sh`);
- a node killed -9 and restarted keeps all of it and learns what changed while it was down.
The admin tools send each request to a broker of their choosing; so each check asks every
node, which fails unless the change reached them all.

Then a single node's data dir (a topic with records, an ACL, users, a producer id) becomes
node 1 of a cluster on its first start with `controller.quorum.voters`: the records are
served through the other nodes with the same topic id, alice's ACL and password work there,
producer ids continue above the old ones; a node whose own data dir has a topic of that name
with another id is refused at start with the reason.

Strom only: the 3-node Apache Kafka counterpart is not run yet (test_cluster.py).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import brokers
import cluster_nodes
import kafka_tools
import pki
import raw_protocol as raw
import security_clients as sc
from cluster_nodes import wait_for

pytestmark = pytest.mark.timeout(300)

NODES = 3
USERS = {"admin": "admin-secret", "alice": "alice-secret", "carol": "carol-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC_AUTHORIZATION_FAILED = 29
MESSAGE_TOO_LARGE = 10
# EXTERNAL first: the inter-broker listener is INTERNAL because it is named so, not because
# it comes first.
LISTENERS = [("EXTERNAL", "SASL_SSL"), ("INTERNAL", "PLAINTEXT")]
_PKI: list[pki.Pki] = []


def certs() -> pki.Pki:
    """The module's certificates (made once; removed by `remove_certs`)."""
    if not _PKI:
        _PKI.append(pki.make(Path(tempfile.mkdtemp(prefix="strom-compat-cluster-meta-pki-"))))
    return _PKI[0]


@pytest.fixture(scope="module", autouse=True)
def remove_certs():
    yield
    for p in _PKI:
        shutil.rmtree(p.dir, ignore_errors=True)


def settings(voters: str | None) -> dict:
    """Every node's settings but its ports and data dir."""
    kv = {
        "ssl.keystore.location": certs().keystore("broker"),
        "ssl.truststore.location": certs().ca,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "inter.broker.listener.name": "INTERNAL",
        "authorizer.class.name": AUTHORIZER,
        # ANONYMOUS: the PLAINTEXT listener, where the brokers call each other (CLUSTER_ACTION),
        # the fixture's readiness check and the per-node requests of `raw_protocol` arrive.
        "super.users": "User:admin;User:ANONYMOUS",
        # The internal topics get one replica: this module is about metadata (replication
        # is test_cluster.py's and test_cluster_secured.py's).
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "schema_registry_enable": "false",
    }
    if voters:
        kv["controller.quorum.voters"] = voters
    return kv


class Node(cluster_nodes.Node):
    """One `strom serve` of the cluster; `bootstrap` is its INTERNAL (PLAINTEXT) listener,
    `sasl` its EXTERNAL (SASL_SSL) one."""

    def __init__(self, node_id: int, workdir: Path, data: Path, voters: str | None, label: str = "node"):
        super().__init__(node_id, workdir, data, LISTENERS, settings(voters), ready_on="INTERNAL", label=label)

    @property
    def sasl(self) -> str:
        return self.addr("EXTERNAL")


def add_users(data: Path, *names: str) -> None:
    brokers.add_strom_users(data, [(n, USERS[n], "SCRAM-SHA-512") for n in names])


def creds(user: str) -> sc.Creds:
    return sc.Creds("SASL_SSL", ca=certs().ca, mechanism="SCRAM-SHA-512", user=user, password=USERS[user])


def tool(name: str, node: Node, *args: str) -> kafka_tools.Run:
    """A Kafka tool as admin over SCRAM, bootstrapped on `node` (it may send its request to
    any node it learns of: the checks ask every node)."""
    with tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False) as f:
        f.write(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            f"ssl.truststore.type=PEM\nssl.truststore.location={certs().ca}\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="admin" password="{USERS["admin"]}";\n'
        )
    try:
        return kafka_tools.ok(kafka_tools.run(name, node.sasl, "--command-config", f.name, *args))
    finally:
        Path(f.name).unlink()


def authenticates(node: Node, user: str) -> bool:
    """A Metadata answer over a SCRAM connection to this node alone."""
    sc.metadata(node.sasl, creds(user), timeout_s=5)
    return True


def create_topic(node: Node, name: str, partitions: int) -> dict[int, int]:
    """Creates the topic as admin; its leader per partition, once every node places it."""
    a = AdminClient(sc.confluent_conf(node.sasl, creds("admin")))
    a.create_topics([NewTopic(name, partitions, replication_factor=1)])[name].result(timeout=30)
    leaders = wait_for(f"{name} placed", lambda: {
        p.id: p.leader for p in a.list_topics(name, timeout=5).topics[name].partitions.values()} or None)
    return leaders


def leaders_of(node: Node, topic: str) -> dict[int, int]:
    a = AdminClient(sc.confluent_conf(node.sasl, creds("admin")))
    return {p.id: p.leader for p in a.list_topics(topic, timeout=5).topics[topic].partitions.values()}


def produce_error(node: Node, user: str, topic: str, partition: int, size: int = 10) -> int | None:
    """One record of `size` bytes from `user` (confluent-kafka, bootstrapped on `node`): the
    error code of its refusal, None when acknowledged."""
    errors: list = []
    done: list = []
    p = Producer({**sc.confluent_conf(node.sasl, creds(user)), "acks": "all", "message.timeout.ms": 8000,
                  "retries": 0})
    p.produce(topic, value=b"x" * size, partition=partition,
              on_delivery=lambda e, m: (errors if e else done).append(e or m))
    p.flush(15)
    if errors:
        return errors[0].code()
    assert done, "neither acknowledged nor refused"
    return None


@pytest.fixture(scope="module")
def cluster():
    if not brokers.STROM_BIN.is_file():
        raise brokers.BrokerStartError("build target/release/strom first")
    kafka_tools.fetch()
    with cluster_nodes.cluster_root("strom-compat-cluster-meta-") as (root, nodes):
        raft_ports = {i: brokers.free_port() for i in range(1, NODES + 1)}
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in raft_ports.items())
        for i in range(1, NODES + 1):
            workdir = root / f"node-{i}"
            workdir.mkdir()
            add_users(workdir / "data", "admin")
            nodes.append(Node(i, workdir, workdir / "data", voters))
        for n in nodes:
            n.spawn()
        for n in nodes:
            n.proc.wait_ready(serving=True)
        wait_for("3 brokers", lambda: len(sc.metadata(nodes[0].sasl, creds("admin")).brokers) == NODES)
        yield nodes


def test_each_listener_is_answered_with_its_own_endpoints_and_replicas_follow_on_internal(cluster):
    """Every node registers both listeners: Metadata, DescribeCluster and FindCoordinator
    name the endpoints of the listener the request came in on. An RF=3 topic's followers
    fetch over INTERNAL, the inter-broker listener, though EXTERNAL comes first: its replica
    logs end byte-identical."""
    ports = {name: {n.id: n.ports[name] for n in cluster} for name, _ in LISTENERS}

    def admin(n: Node, listener: str) -> AdminClient:
        if listener == "EXTERNAL":
            return AdminClient(sc.confluent_conf(n.sasl, creds("admin")))
        return AdminClient({"bootstrap.servers": n.bootstrap})

    for n in cluster:
        for listener in ports:
            a = admin(n, listener)
            md = a.list_topics(timeout=10)
            assert {b.id: b.port for b in md.brokers.values()} == ports[listener], f"node {n.id} {listener}"
            d = a.describe_cluster().result(timeout=10)
            assert {b.id: b.port for b in d.nodes} == ports[listener], f"node {n.id} {listener}"

    topic = "listeners-rf3"
    a = admin(cluster[0], "EXTERNAL")
    a.create_topics([NewTopic(topic, 1, replication_factor=3)])[topic].result(timeout=30)
    wait_for(f"{topic} with an ISR of 3", lambda: len(
        a.list_topics(topic, timeout=5).topics[topic].partitions[0].isrs) == NODES)
    errors: list = []
    p = Producer({**sc.confluent_conf(cluster[0].sasl, creds("admin")), "acks": "all",
                  "enable.idempotence": True, "message.timeout.ms": 30000})
    for i in range(200):
        p.produce(topic, value=f"v{i:04d}".encode(), partition=0, on_delivery=lambda e, m: e and errors.append(e))
    assert p.flush(60) == 0 and errors == []

    def logs():
        data = [(n.data / f"{topic}-0" / "00000000000000000000.log").read_bytes() for n in cluster]
        return data if all(d == data[0] for d in data) and data[0] else None
    assert b"v0199" in wait_for("identical replica logs", logs)[0]

    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({**sc.confluent_conf(cluster[0].sasl, creds("admin")), "group.id": "listeners-g",
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    c.close()
    for listener in ports:
        a = admin(cluster[1], listener)  # held until the answer: a dropped client cancels it
        g = a.describe_consumer_groups(["listeners-g"])["listeners-g"].result(timeout=10)
        assert g.coordinator.port == ports[listener][g.coordinator.id], listener


def test_scram_user_made_through_one_node_authenticates_on_every_node(cluster):
    n1 = cluster[0]
    tool("kafka-configs", n1, "--alter", "--entity-type", "users", "--entity-name", "alice",
         "--add-config", f"SCRAM-SHA-512=[iterations=8192,password={USERS['alice']}]")
    for n in cluster:
        wait_for(f"alice authenticated by node {n.id}", lambda: authenticates(n, "alice"))


def test_acl_made_through_one_node_is_enforced_by_every_leader(cluster):
    n1, n2, _ = cluster
    leaders = create_topic(n1, "acl-t", 3)
    assert set(leaders.values()) == {1, 2, 3}, leaders
    for p in leaders:
        assert produce_error(n1, "alice", "acl-t", p) == TOPIC_AUTHORIZATION_FAILED
    tool("kafka-acls", n2, "--add", "--allow-principal", "User:alice", "--operation", "Write",
         "--operation", "Describe", "--topic", "acl-t")
    for p, leader in leaders.items():
        wait_for(f"alice's write to acl-t-{p} (led by node {leader}) allowed",
                 lambda: produce_error(n1, "alice", "acl-t", p) is None)


def test_topic_config_altered_through_one_node_is_described_alike_and_enforced_by_leaders(cluster):
    n1, _, n3 = cluster
    leaders = create_topic(n1, "cfg-t", 3)
    tool("kafka-configs", n3, "--alter", "--entity-type", "topics", "--entity-name", "cfg-t",
         "--add-config", "max.message.bytes=2048")
    for n in cluster:
        wait_for(f"node {n.id} describing max.message.bytes=2048",
                 lambda: raw.describe_topic_configs(n.bootstrap, "cfg-t").get("max.message.bytes") == "2048")
    for p, leader in leaders.items():
        assert produce_error(n1, "admin", "cfg-t", p, size=4000) == MESSAGE_TOO_LARGE, f"leader {leader}"
        assert produce_error(n1, "admin", "cfg-t", p, size=100) is None


def test_client_quota_set_through_one_node_is_described_by_every_node(cluster):
    n1 = cluster[0]
    tool("kafka-configs", n1, "--alter", "--entity-type", "users", "--entity-name", "alice",
         "--add-config", "producer_byte_rate=1048576")
    for n in cluster:
        wait_for(f"node {n.id} describing alice's quota",
                 lambda: raw.describe_user_quotas(n.bootstrap, "alice") == {"producer_byte_rate": 1048576.0})


def test_broker_default_group_config_and_feature_level_hold_on_every_node(cluster):
    n1, n2, n3 = cluster
    tool("kafka-configs", n2, "--alter", "--entity-type", "brokers", "--entity-default",
         "--add-config", "log.retention.ms=3600000")
    tool("kafka-configs", n3, "--alter", "--entity-type", "groups", "--entity-name", "g1",
         "--add-config", "consumer.session.timeout.ms=50000")
    tool("kafka-features", n1, "downgrade", "--feature", "transaction.version=1")
    epochs = set()
    for n in cluster:
        wait_for(f"node {n.id} describing the cluster-wide log.retention.ms",
                 lambda: raw.describe_configs(n.bootstrap, raw.BROKER, "").get("log.retention.ms") == "3600000")
        wait_for(f"node {n.id} describing g1's session timeout",
                 lambda: raw.describe_configs(n.bootstrap, raw.GROUP, "g1").get("consumer.session.timeout.ms")
                 == "50000")
        epoch, levels = wait_for(f"node {n.id} finalizing transaction.version 1", lambda: (
            lambda f: f if f[1].get("transaction.version") == 1 else None)(raw.finalized_features(n.bootstrap)))
        epochs.add(epoch)
    assert len(epochs) == 1, f"one epoch for the cluster's levels: {epochs}"


def test_node_killed_and_restarted_keeps_it_all_and_learns_what_changed_meanwhile(cluster):
    n1, _, n3 = cluster
    n3.kill9()
    # While node 3 is down: a new user, and alice's quota goes.
    tool("kafka-configs", n1, "--alter", "--entity-type", "users", "--entity-name", "carol",
         "--add-config", f"SCRAM-SHA-512=[iterations=4096,password={USERS['carol']}]")
    tool("kafka-configs", n1, "--alter", "--entity-type", "users", "--entity-name", "alice",
         "--delete-config", "producer_byte_rate")
    n3.spawn().wait_ready(serving=True)
    for user in ("alice", "carol"):
        wait_for(f"{user} authenticated by the restarted node", lambda: authenticates(n3, user))
    assert raw.describe_topic_configs(n3.bootstrap, "cfg-t")["max.message.bytes"] == "2048"
    assert raw.describe_configs(n3.bootstrap, raw.GROUP, "g1")["consumer.session.timeout.ms"] == "50000"
    assert raw.finalized_features(n3.bootstrap)[1]["transaction.version"] == 1
    wait_for("alice's quota gone on the restarted node", lambda: raw.describe_user_quotas(n3.bootstrap, "alice") == {})
    leaders = create_topic(n1, "acl-t2", 3)
    tool("kafka-acls", n1, "--add", "--allow-principal", "User:alice", "--operation", "Write",
         "--operation", "Describe", "--topic", "acl-t2")
    for p in leaders:
        wait_for(f"alice's write to acl-t2-{p}", lambda: produce_error(n3, "alice", "acl-t2", p) is None)
    # The ACL made before the kill, on the partition node 3 leads.
    (p3,) = [p for p, leader in leaders_of(n3, "acl-t").items() if leader == 3]
    assert produce_error(n3, "alice", "acl-t", p3) is None


# ---- a single node's data dir joins a cluster ----

def run_single(node: Node, work) -> None:
    """`node` as a single node (no voters) while `work()` runs, then stopped cleanly."""
    proc = node.spawn()
    try:
        proc.wait_ready(serving=True)
        work()
    finally:
        assert proc.stop() == 0, node.log()[-3000:]


def test_single_node_data_dir_becomes_node_1_of_a_cluster():
    if not brokers.STROM_BIN.is_file():
        raise brokers.BrokerStartError("build target/release/strom first")
    kafka_tools.fetch()
    with cluster_nodes.cluster_root("strom-compat-cluster-migrate-") as (root, started):
        raft_ports = {i: brokers.free_port() for i in range(1, NODES + 1)}
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in raft_ports.items())
        dirs = {}
        for name in ("node-1", "node-2", "node-3"):
            (root / name).mkdir()
            dirs[name] = root / name
        records = [f"r{i}-{uuid.uuid4().hex[:6]}".encode() for i in range(40)]
        seen = {}

        # 1. A single node 1: a topic with records, alice allowed to read it, a producer id.
        add_users(dirs["node-1"] / "data", "admin", "alice")
        single = Node(1, dirs["node-1"], dirs["node-1"] / "data", None, "single")

        def fill():
            create_topic(single, "legacy", 2)
            p = Producer({**sc.confluent_conf(single.sasl, creds("admin")), "acks": "all"})
            for i, r in enumerate(records):
                p.produce("legacy", value=r, partition=i % 2)
            assert p.flush(30) == 0
            tool("kafka-acls", single, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                 "--operation", "Describe", "--topic", "legacy")
            seen["pid"] = raw.init_producer_id(single.bootstrap)
            a = AdminClient(sc.confluent_conf(single.sasl, creds("admin")))
            seen["id"] = topic_id(a, "legacy")

        run_single(single, fill)

        # 2. A single node 3 of its own, with another topic of that name.
        other = Node(3, dirs["node-3"], dirs["node-3"] / "data", None, "single")
        add_users(other.data, "admin")
        run_single(other, lambda: create_topic(other, "legacy", 1))

        # 3. Node 1 on its data dir and a fresh node 2 form the cluster: node 1 migrates.
        n1 = Node(1, dirs["node-1"], dirs["node-1"] / "data", voters)
        n2 = Node(2, dirs["node-2"], dirs["node-2"] / "data", voters)
        for n in (n1, n2):
            started.append(n)
            n.spawn()
        for n in (n1, n2):
            n.proc.wait_ready(serving=True)
        assert "migrated this node's single-node metadata into the cluster" in n1.log()

        # 4. Node 3 on its own data dir is refused: its legacy is not the cluster's.
        refused = Node(3, dirs["node-3"], dirs["node-3"] / "data", voters, "conflicting")
        started.append(refused)
        proc = refused.spawn()
        try:
            code = proc.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"node 3 started on a conflicting data dir:\n{refused.log()[-3000:]}")
        assert code != 0
        log = refused.log()
        assert "cannot migrate this node's single-node data dir into the cluster" in log, log[-3000:]
        assert "the cluster has a topic legacy with id" in log, log[-3000:]

        # 5. Its operator deletes node 3's own legacy (as a single node again: the metadata
        # log it joined stays as it is, which a node id must never lose), and it joins.
        fixing = Node(3, dirs["node-3"], dirs["node-3"] / "data", None, "fixing")

        def delete_own_legacy():
            a = AdminClient(sc.confluent_conf(fixing.sasl, creds("admin")))
            a.delete_topics(["legacy"])["legacy"].result(timeout=30)

        run_single(fixing, delete_own_legacy)
        n3 = Node(3, dirs["node-3"], dirs["node-3"] / "data", voters)
        started.append(n3)
        n3.spawn().wait_ready(serving=True)
        assert "migrated this node's single-node metadata into the cluster" in n3.log()
        for n in (n2, n3):
            wait_for(f"alice authenticated by node {n.id}", lambda: authenticates(n, "alice"))
            a = AdminClient(sc.confluent_conf(n.sasl, creds("admin")))
            assert str(wait_for(f"legacy on node {n.id}", lambda: topic_id(a, "legacy"))) == str(seen["id"])
            md = a.list_topics("legacy", timeout=5).topics["legacy"]
            assert {p.id: p.leader for p in md.partitions.values()} == {0: 1, 1: 1}
            got = consume_all(n, "alice", "legacy", 2, len(records))
            assert sorted(got) == sorted(records)
            assert [r for r in got if records.index(r) % 2 == 0] == records[0::2], "partition 0 in order"
        assert raw.init_producer_id(n2.bootstrap) > seen["pid"]


def topic_id(admin: AdminClient, name: str):
    from confluent_kafka import TopicCollection

    d = admin.describe_topics(TopicCollection([name]))[name].result(timeout=10)
    return d.topic_id


def consume_all(node: Node, user: str, topic: str, partitions: int, n: int) -> list[bytes]:
    """Every record of the topic, read by `user` through `node` (kafka-python, no group)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(**sc.kafka_python_conf(node.sasl, creds(user)), group_id=None, enable_auto_commit=False)
    got: list[bytes] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning()
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=500).values():
                got.extend(m.value for m in msgs)
    finally:
        c.close()
    return got
