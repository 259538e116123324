"""ACLs with Kafka's StandardAuthorizer semantics, against Strom and Kafka configured alike:
`authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`, a
SASL_PLAINTEXT listener with SCRAM-SHA-512 users (admin, a super user; alice; bob, with no
ACLs), and the PLAINTEXT listener as ANONYMOUS, also a super user (Kafka's own controller and
inter-broker traffic runs there, and the fixtures' readiness check). ACLs are added, listed and
removed with Kafka's own `kafka-acls.sh` (AclCommand) as admin; confluent-kafka and
kafka-python users then produce, consume, join groups and create topics, and each refusal is
checked for its exact Kafka error code and for nothing having moved. A KIP-848 regex
subscription is assigned only the topics its principal may DESCRIBE, and follows a grant at
the group's next regex refresh (`group.consumer.regex.refresh.interval.ms`, Kafka's least
value, 10 s, on both brokers). A consumer that may find its group's coordinator (DESCRIBE) but
not READ the group can neither join nor commit, and a transactional producer that may find
its coordinator but not WRITE its transactional id cannot initialise: each refusal with its
Kafka code, nothing committed or written, and the same client succeeding once granted.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path

import pytest

import clients
import kafka_tools
import security_clients as sc
from conftest import BROKERS, secured_broker

pytestmark = pytest.mark.timeout(300)

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
REGEX_REFRESH_MS = 10_000
# Kafka's default `group.consumer.heartbeat.interval.ms`, which both brokers keep here.
HEARTBEAT_S = 5


@pytest.fixture(scope="module", params=BROKERS)
def broker(request):
    kafka_tools.fetch()
    security = {
        "listeners": ["SASL_PLAINTEXT"],
        "settings": {
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "authorizer.class.name": AUTHORIZER,
            "super.users": "User:admin;User:ANONYMOUS",
            "group.consumer.regex.refresh.interval.ms": str(REGEX_REFRESH_MS),
        },
        "kafka_settings": {
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        },
        "users": [(u, p, "SCRAM-SHA-512") for u, p in USERS.items()],
    }
    yield from secured_broker(request.param, security)


def sasl(b) -> str:
    return f"127.0.0.1:{b.extra['ports']['SASL_PLAINTEXT']}"


def creds(user: str) -> sc.Creds:
    return sc.Creds("SASL_PLAINTEXT", mechanism="SCRAM-SHA-512", user=user, password=USERS[user])


def acls(b, *args: str) -> kafka_tools.Run:
    """kafka-acls.sh as admin over SCRAM."""
    with tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False) as f:
        f.write(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="admin" password="{USERS["admin"]}";\n'
        )
    try:
        boot = ["--bootstrap-server", sasl(b), "--command-config", f.name]
        r = kafka_tools.subprocess.run(
            ["bash", str(kafka_tools.TOOLS_SH), "run", ACL_COMMAND, *boot, *args],
            capture_output=True, text=True, timeout=kafka_tools.TOOL_TIMEOUT_S,
        )
        return kafka_tools.Run(r.returncode, r.stdout, r.stderr)
    finally:
        Path(f.name).unlink()




def produce_error(client: str, b, user: str, topic: str) -> int | None:
    """Produces 3 records as `user`; the Kafka error code of the refusal, None if acked."""
    recs = sc.records(3)
    try:
        sc.produce(client, sasl(b), creds(user), topic, recs, timeout_s=10)
        return None
    except Exception as e:  # noqa: BLE001 - the clients raise their own types
        if client == "confluent":
            return e.args[0].code()
        return type(e).errno


def group_error(b, user: str, topic: str, group: str) -> int | None:
    """confluent-kafka consumer as `user` in `group`: the first error code, None if a record
    arrives."""
    from confluent_kafka import Consumer

    c = Consumer({**sc.confluent_conf(sasl(b), creds(user)), "group.id": group, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(1)
            if m is None:
                continue
            return m.error().code() if m.error() else None
        raise AssertionError("neither a record nor an error in 30s")
    finally:
        c.close()


def acl_lines(r: kafka_tools.Run) -> list[str]:
    return sorted(line.strip() for line in r.lines() if line.strip().startswith(("Current ACLs", "(principal")))


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_acls_decide_who_produces_consumes_joins_and_creates(broker, client):
    b = broker
    run = uuid.uuid4().hex[:8]
    orders, frozen, other, group = f"acl-{run}-orders", f"acl-{run}-frozen", f"other-{run}", f"acl-{run}-g"
    for t in (orders, frozen, other):
        sc.create_topic(sasl(b), creds("admin"), t)

    add = acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write",
               "--resource-pattern-type", "prefixed", "--topic", f"acl-{run}-")
    assert add.rc == 0, add.err
    add = acls(b, "--add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", frozen)
    assert add.rc == 0, add.err
    add = acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", group)
    assert add.rc == 0, add.err
    listed = acl_lines(acls(b, "--list", "--topic", frozen))
    # MATCH-less --list of one literal topic: only its literal ACL.
    assert listed == [
        "(principal=User:alice, host=*, operation=WRITE, permissionType=DENY)",
        f"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name={frozen}, patternType=LITERAL)`:",
    ], listed

    # Allowed: write and read a topic under the prefix, in the allowed group.
    assert produce_error(client, b, "alice", orders) is None
    assert clients.end_offset(b.bootstrap, orders) == 3
    if client == "confluent":
        assert group_error(b, "alice", orders, group) is None

    # DENY wins over the prefixed ALLOW; a topic no ACL covers; a user with no ACLs.
    assert produce_error(client, b, "alice", frozen) == TOPIC_AUTHORIZATION_FAILED
    assert produce_error(client, b, "alice", other) == TOPIC_AUTHORIZATION_FAILED
    assert produce_error(client, b, "bob", orders) == TOPIC_AUTHORIZATION_FAILED
    ends = [clients.end_offset(b.bootstrap, t) for t in (frozen, other, orders)]
    assert ends == [0, 0, 3], ends

    if client == "confluent":
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        # A group without READ; topic creation without CREATE; bob's Metadata shows nothing.
        assert group_error(b, "alice", orders, f"{group}-other") == GROUP_AUTHORIZATION_FAILED
        a = AdminClient(sc.confluent_conf(sasl(b), creds("alice")))
        with pytest.raises(KafkaException) as e:
            a.create_topics([NewTopic(f"acl-{run}-new", 1)])[f"acl-{run}-new"].result(timeout=30)
        assert e.value.args[0].code() == TOPIC_AUTHORIZATION_FAILED
        md = AdminClient(sc.confluent_conf(sasl(b), creds("bob"))).list_topics(timeout=10)
        assert not [t for t in md.topics if run in t]
        mine = AdminClient(sc.confluent_conf(sasl(b), creds("alice"))).list_topics(timeout=10)
        assert sorted(t for t in mine.topics if run in t) == sorted([orders, frozen])

    # Removing the DENY lets alice write the topic.
    rm = acls(b, "--remove", "--force", "--deny-principal", "User:alice", "--operation", "Write", "--topic", frozen)
    assert rm.rc == 0, rm.err
    assert acl_lines(acls(b, "--list", "--topic", frozen)) == []
    deadline = time.monotonic() + 10
    while produce_error(client, b, "alice", frozen) is not None:
        assert time.monotonic() < deadline, "still refused after the DENY was removed"
    assert clients.end_offset(b.bootstrap, frozen) == 3


def test_acls_regex_subscription_gets_only_topics_the_member_may_describe(broker):
    """alice may READ (so DESCRIBE) `rx-<run>-a*` and not `rx-<run>-b*`; her KIP-848 consumer
    (confluent-kafka, group.protocol=consumer) subscribes to `^rx-<run>-.*`. The coordinator
    resolves the regex to the topics she may describe (Kafka 4's TopicRegexResolver), so only
    the a-topics are assigned; once an ACL grants her rx-<run>-b1 it is assigned too, at the
    group's next regex refresh, and rx-<run>-b2 never is. bob, who may describe the group but
    none of its topics, gets TOPIC_AUTHORIZATION_FAILED from ConsumerGroupDescribe (KAFKA-18813).
    The group's assignment is read as
    admin too (ConsumerGroupDescribe): librdkafka leaves out of its own `assignment()` the
    topics alice cannot describe, so the client's view alone would not show a leak."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    b = broker
    prefix = f"rx-{uuid.uuid4().hex[:8]}"
    a1, a2, b1, b2 = (f"{prefix}-{t}" for t in ("a1", "a2", "b1", "b2"))
    for t, n in ((a1, 2), (a2, 1), (b1, 1), (b2, 1)):
        sc.create_topic(sasl(b), creds("admin"), t, n)
    group = f"{prefix}-g"
    for args in (("--resource-pattern-type", "prefixed", "--topic", f"{prefix}-a"), ("--group", group)):
        add = acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", *args)
        assert add.rc == 0, add.err
    add = acls(b, "--add", "--allow-principal", "User:bob", "--operation", "Describe", "--group", group)
    assert add.rc == 0, add.err

    c = Consumer({**sc.confluent_conf(sasl(b), creds("alice")), "group.id": group,
                  "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        c.subscribe([f"^{prefix}-.*"])

        admin = AdminClient(sc.confluent_conf(sasl(b), creds("admin")))

        def assigned():
            """(alice's client's assignment, the group's as admin describes it)."""
            c.poll(0.5)
            mine = {(tp.topic, tp.partition) for tp in c.assignment()}
            d = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
            group_view = {(tp.topic, tp.partition) for m in d.members for tp in m.assignment.topic_partitions}
            return mine, group_view

        def wait(want, what):
            deadline = time.monotonic() + 90
            got = None
            while time.monotonic() < deadline:
                got = assigned()
                if got == (want, want):
                    return
            raise AssertionError(f"{what}: (client, group) assigned {got}, want {sorted(want)}")

        only_a = {(a1, 0), (a1, 1), (a2, 0)}
        wait(only_a, "the topics alice may describe")
        # bob may describe the group but none of its topics: ConsumerGroupDescribe refuses.
        from confluent_kafka import KafkaException

        bobs = AdminClient(sc.confluent_conf(sasl(b), creds("bob")))
        with pytest.raises(KafkaException) as e:
            bobs.describe_consumer_groups([group], request_timeout=10)[group].result()
        assert e.value.args[0].code() == TOPIC_AUTHORIZATION_FAILED, e.value
        add = acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", b1)
        assert add.rc == 0, add.err
        granted = time.monotonic()
        wait(only_a | {(b1, 0)}, "rx-b1 after the grant")
        took = time.monotonic() - granted
        print(f"{b.name}: {b1} assigned {took:.1f} s after the grant")
        # At most one refresh interval, the heartbeat that finds it due and, on Kafka (which
        # resolves in the background), the heartbeat that brings the new assignment.
        assert took < REGEX_REFRESH_MS / 1000 + 3 * HEARTBEAT_S, took
    finally:
        c.close()


def commit_error(b, user: str, topic: str, group: str) -> int | None:
    """confluent-kafka as `user`, assigned partition 0 of `topic` (no join), commits offset 1
    to `group` synchronously: the Kafka error code, None if committed."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({**sc.confluent_conf(sasl(b), creds(user)), "group.id": group, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0)])
        try:
            done = c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        except KafkaException as e:
            return e.args[0].code()
        errors = [tp.error.code() for tp in done if tp.error is not None]
        return errors[0] if errors else None
    finally:
        c.close()


def committed(b, topic: str, group: str) -> int:
    """`group`'s committed offset of partition 0 of `topic`, read as admin (-1001: none)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    a = AdminClient(sc.confluent_conf(sasl(b), creds("admin")))
    req = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]
    got = a.list_consumer_group_offsets(req)[group].result(timeout=30)
    return got.topic_partitions[0].offset


def test_consume_and_commit_without_read_on_the_group_are_refused(broker):
    """alice may READ the topic and DESCRIBE the group (so FindCoordinator answers), not READ
    it: joining (JoinGroup) and committing (OffsetCommit) both answer GROUP_AUTHORIZATION_FAILED
    and no offset is stored; once READ on the group is granted the same commit goes in."""
    b = broker
    run = uuid.uuid4().hex[:8]
    topic, group = f"acl-{run}-t", f"acl-{run}-g"
    sc.create_topic(sasl(b), creds("admin"), topic)
    assert produce_error("confluent", b, "admin", topic) is None
    for args in (("--operation", "Read", "--topic", topic), ("--operation", "Describe", "--group", group)):
        add = acls(b, "--add", "--allow-principal", "User:alice", *args)
        assert add.rc == 0, add.err

    assert group_error(b, "alice", topic, group) == GROUP_AUTHORIZATION_FAILED
    assert commit_error(b, "alice", topic, group) == GROUP_AUTHORIZATION_FAILED
    assert committed(b, topic, group) < 0

    add = acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", group)
    assert add.rc == 0, add.err
    deadline = time.monotonic() + 10
    while (err := commit_error(b, "alice", topic, group)) is not None:
        assert time.monotonic() < deadline, f"commit still refused after the grant: {err}"
    assert committed(b, topic, group) == 1


def test_transactional_producer_without_write_on_its_transactional_id_is_refused(broker):
    """alice may WRITE the topic and DESCRIBE the transactional id (so FindCoordinator
    answers), not WRITE it: InitProducerId answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED and
    nothing reaches the topic; once WRITE is granted the same producer commits a transaction."""
    from confluent_kafka import KafkaException, Producer

    b = broker
    run = uuid.uuid4().hex[:8]
    topic, tid = f"acl-{run}-txn", f"acl-{run}-tid"
    sc.create_topic(sasl(b), creds("admin"), topic)
    for args in (("--operation", "Write", "--topic", topic), ("--operation", "Describe", "--transactional-id", tid)):
        add = acls(b, "--add", "--allow-principal", "User:alice", *args)
        assert add.rc == 0, add.err

    def producer() -> Producer:
        return Producer({**sc.confluent_conf(sasl(b), creds("alice")), "transactional.id": tid})

    refused = producer()
    with pytest.raises(KafkaException) as e:
        refused.init_transactions(30)
    assert e.value.args[0].code() == TRANSACTIONAL_ID_AUTHORIZATION_FAILED, e.value
    assert clients.end_offset(b.bootstrap, topic) == 0

    add = acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--transactional-id", tid)
    assert add.rc == 0, add.err
    deadline = time.monotonic() + 10
    while True:
        p = producer()
        try:
            p.init_transactions(30)
            break
        except KafkaException as e:
            # A refused producer is fatal: a new one, until the grant has reached the broker.
            assert time.monotonic() < deadline, f"still refused after the grant: {e}"
    p.begin_transaction()
    for k, v in sc.records(3):
        p.produce(topic, key=k, value=v, partition=0)
    p.commit_transaction(30)
    # Three records and the commit marker. Kafka answers EndTxn before its markers are
    # written (and its high watermark moves with the followers' next fetch), so the end
    # offset is waited for, not read once.
    deadline = time.monotonic() + 15
    while clients.end_offset(b.bootstrap, topic) != 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert clients.end_offset(b.bootstrap, topic) == 4
