"""Client quotas (KIP-546, docs/security.md "Quotas") against a real `strom serve` and a real
Apache Kafka 4.4, side by side:

- Kafka 4.4's `kafka-configs.sh` sets, describes and deletes quotas of users, client ids,
  both, and the `<default>` entities (AlterClientQuotas / DescribeClientQuotas); both brokers
  print the same lines and refuse the same bad values with the same message.
- A confluent-kafka producer whose `client.id` has a small `producer_byte_rate` is told to
  hold back (librdkafka's `throttle` statistics) and moves at most what the quota allows
  over the run plus the quota windows' allowance, while another client id on the same broker
  is not slowed. The same for a consumer under `consumer_byte_rate`.

The quota's windows (`quota.window.num` 11 × 1 s) let a new client send up to 10 s of its
quota before it is throttled, so a run of RUN_S seconds may move about (10 + RUN_S) × quota;
the tests allow twice that (a loaded machine, the clients' own batching and pipelining), and
the unthrottled client moves many times more. They assert on throttling being reported and
on those bounds, never on timings.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_tools as kt

pytestmark = pytest.mark.timeout(180)

RUN_S = 4.0
# Kafka's defaults: quota.window.num=11, quota.window.size.seconds=1. A rate is measured over
# at least (11 - 1) windows, so a client may burst this many seconds of its quota at first.
WINDOW_FLOOR_S = 10.0
VALUE = b"q" * 1000


@pytest.fixture(scope="module", autouse=True)
def tools():
    kt.fetch()


def uid(prefix: str) -> str:
    return f"quota-{prefix}-{uuid.uuid4().hex[:8]}"


def configs(broker, *args: str) -> kt.Run:
    return kt.run("kafka-configs", broker.bootstrap, *args)


def create_topic(broker, topic: str) -> None:
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in a.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(timeout=30)
    # Kafka answers CreateTopics before the partition serves (FINDINGS.md).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = a.list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        if t and t.error is None and t.partitions and t.partitions[0].leader >= 0:
            return
        time.sleep(0.2)


def described(broker, *entity: str) -> list[str]:
    """`kafka-configs --describe` lines, each line's `k=v` list sorted (the tool prints them
    in its HashMap's order)."""
    r = configs(broker, "--describe", *entity)
    assert r.rc == 0, r.err
    out = []
    for line in r.lines():
        head, sep, values = line.partition(" are ")
        out.append(head + sep + ", ".join(sorted(values.split(", "))))
    return sorted(out)


# ---------------------------------------------------------------- kafka-configs

def test_kafka_configs_sets_describes_and_deletes_client_quotas(broker):
    user, client = uid("user"), uid("client")
    for entity, cfg in [
        (["--entity-type", "users", "--entity-name", user], "producer_byte_rate=1024,consumer_byte_rate=2048"),
        (["--entity-type", "clients", "--entity-name", client], "request_percentage=12.5"),
        (["--entity-type", "users", "--entity-name", user, "--entity-type", "clients", "--entity-name", client],
         "controller_mutation_rate=3"),
        (["--entity-type", "users", "--entity-name", user, "--entity-type", "clients", "--entity-default"],
         "producer_byte_rate=4096"),
    ]:
        r = configs(broker, "--alter", *entity, "--add-config", cfg)
        assert r.rc == 0, r.err
        assert "Completed updating config" in r.out, r.out

    assert described(broker, "--entity-type", "users", "--entity-name", user) == [
        f"Quota configs for user-principal '{user}' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0",
    ]
    assert described(broker, "--entity-type", "clients", "--entity-name", client) == [
        f"Quota configs for client-id '{client}' are request_percentage=12.5",
    ]
    # All client entities of the user: the named one and the user's client default.
    both = described(broker, "--entity-type", "users", "--entity-name", user, "--entity-type", "clients")
    assert both == sorted([
        f"Quota configs for user-principal '{user}', client-id '{client}' are controller_mutation_rate=3.0",
        f"Quota configs for user-principal '{user}', the default client-id are producer_byte_rate=4096.0",
    ]), both

    r = configs(broker, "--alter", "--entity-type", "users", "--entity-name", user, "--delete-config", "producer_byte_rate")
    assert r.rc == 0, r.err
    assert described(broker, "--entity-type", "users", "--entity-name", user) == [
        f"Quota configs for user-principal '{user}' are consumer_byte_rate=2048.0",
    ]


# Each run is a JVM: two cases here, the others are the handler's unit tests.
@pytest.mark.parametrize("cfg,message", [
    ("producer_byte_rate=1.5", "producer_byte_rate cannot be a fractional value."),
    ("request_percentage=0", "Quota request_percentage must be greater than 0"),
])
def test_kafka_configs_bad_quota_values_are_refused_with_kafkas_message(broker, cfg, message):
    client = uid("bad")
    r = configs(broker, "--alter", "--entity-type", "clients", "--entity-name", client, "--add-config", cfg)
    assert r.rc != 0
    assert message in r.out + r.err, r.out + r.err


# ---------------------------------------------------------------- throttling

def set_client_quota(broker, client: str, cfg: str) -> None:
    r = configs(broker, "--alter", "--entity-type", "clients", "--entity-name", client, "--add-config", cfg)
    assert r.rc == 0, r.err


class Stats:
    """The largest broker `throttle.max` (ms) librdkafka's statistics reported."""

    def __init__(self):
        self.throttle_max = 0

    def __call__(self, raw: str) -> None:
        import json

        for b in json.loads(raw).get("brokers", {}).values():
            self.throttle_max = max(self.throttle_max, b.get("throttle", {}).get("max", 0))


def produce_for(broker, topic: str, client: str, seconds: float) -> tuple[int, int]:
    """Produces as fast as the producer may for `seconds`; (bytes acknowledged in that time,
    largest throttle time reported)."""
    stats = Stats()
    acked = [0]

    def delivered(err, msg):
        if err is None:
            acked[0] += len(msg.value())

    p = Producer({
        "bootstrap.servers": broker.bootstrap, "client.id": client, "acks": 1, "linger.ms": 5,
        "queue.buffering.max.kbytes": 128, "statistics.interval.ms": 200, "stats_cb": stats,
    })
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            p.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            p.poll(0.02)
            continue
        p.poll(0)
    counted = acked[0]
    # Stats are emitted from poll: give the last interval a chance, then drop the queue.
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        p.poll(0.05)
    p.purge()
    p.flush(5)
    return counted, stats.throttle_max


def test_producer_over_its_quota_is_throttled_and_others_are_not(broker):
    topic, slow, fast = uid("produce"), uid("slow"), uid("fast")
    quota = 50_000
    create_topic(broker, topic)
    # Client ids of this test only: the quota stays behind harmlessly (one JVM less).
    set_client_quota(broker, slow, f"producer_byte_rate={quota}")
    sent, throttle = produce_for(broker, topic, slow, RUN_S)
    allowed = quota * (WINDOW_FLOOR_S + RUN_S)
    assert throttle > 0, f"no throttle reported; sent {sent} bytes"
    assert sent <= 2 * allowed, f"{sent} bytes in {RUN_S}s under a {quota} B/s quota"
    assert sent >= 0.3 * quota * WINDOW_FLOOR_S, f"only {sent} bytes: the producer hardly moved"
    free, free_throttle = produce_for(broker, topic, fast, RUN_S)
    assert free_throttle == 0
    assert free >= 3 * sent, f"unthrottled {free} bytes vs throttled {sent}"
    if broker.name == "strom":
        # /metrics: the throttled client's sensor (tags as Kafka's: no user part for a
        # client-id quota), with the throttle time answered.
        import urllib.request

        url = f"http://127.0.0.1:{broker.extra['metrics_port']}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        labels = (f'client_id="{slow}"', 'quota="produce"', 'user=""')
        line = next((x for x in text.splitlines()
                     if x.startswith("strom_quota_throttle_time_ms_total{") and all(a in x for a in labels)), None)
        assert line and float(line.split()[-1]) > 0, f"no throttle series for {slow} in /metrics"
        assert f'client_id="{fast}"' not in text, "a client without a quota has no sensor"


def consume_for(broker, topic: str, client: str, seconds: float) -> tuple[int, int]:
    stats = Stats()
    c = Consumer({
        "bootstrap.servers": broker.bootstrap, "client.id": client, "group.id": uid("g"),
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "statistics.interval.ms": 200, "stats_cb": stats,
    })
    c.subscribe([topic])
    got = 0
    end = time.monotonic() + seconds
    started = False
    while time.monotonic() < end:
        msgs = c.consume(500, 0.2)
        for m in msgs:
            if m.error():
                raise KafkaException(m.error())
            got += len(m.value())
        if msgs and not started:
            # The group join is not part of the measured time.
            started = True
            end = time.monotonic() + seconds
    for _ in range(3):
        c.poll(0.1)
    c.close()
    return got, stats.throttle_max


def test_consumer_over_its_quota_is_throttled_and_others_are_not(broker):
    topic, slow, fast = uid("consume"), uid("slow"), uid("fast")
    quota = 50_000
    create_topic(broker, topic)
    total = 3_000_000
    # Batches well under what the quota allows per response (quota × 10 s): a fetch returns a
    # larger first batch whole, which would never fit the quota (Kafka and Strom alike).
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 65536})
    for _ in range(total // len(VALUE)):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    set_client_quota(broker, slow, f"consumer_byte_rate={quota}")
    got, throttle = consume_for(broker, topic, slow, RUN_S)
    allowed = quota * (WINDOW_FLOOR_S + RUN_S)
    assert throttle > 0, f"no throttle reported; consumed {got} bytes"
    assert got <= 2 * allowed, f"{got} bytes in {RUN_S}s under a {quota} B/s quota"
    free, free_throttle = consume_for(broker, topic, fast, RUN_S)
    assert free_throttle == 0
    assert free >= 2 * got and free >= total * 0.9, f"unthrottled {free} bytes vs throttled {got}"
