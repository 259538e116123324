"""KIP-714 client telemetry (issue 24; broker/src/telemetry/): CLIENT_METRICS subscriptions
managed with Apache Kafka 4.4's own `kafka-client-metrics.sh` and `kafka-configs.sh`,
against Strom and Kafka alike (same outputs, same refusals), kept across a kill -9; then
real clients — librdkafka (confluent-kafka) as producer and group consumer, and the Java
client (Kafka's producer perf tool) — pushing the metrics a subscription asks for, shown on
Strom's `/metrics` per client, and forwarded to an OTLP collector (a real OTLP/HTTP receiver,
otlp_receiver.py) labelled with who sent them. Kafka without a telemetry plugin does not serve
the pushes (it does not advertise GetTelemetrySubscriptions), so those tests are Strom's only.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer

import admin
import brokers
from otlp_receiver import OtlpReceiver
import kafka_tools as kt
from kafka_tools import ok
from clients import unique_topic

STROM_TESTED = "strom" in [b.strip() for b in os.environ.get("STROM_COMPAT_BROKERS", "strom,kafka").split(",")]
PUSH_TIMEOUT_S = 60


@pytest.fixture(scope="module", autouse=True)
def tools_jars():
    kt.fetch()



def cm(bootstrap: str, *args: str) -> kt.Run:
    return kt.run("kafka-client-metrics", bootstrap, *args)


def test_subscriptions_with_kafkas_tools(broker):
    name = f"sub-{uuid.uuid4().hex[:8]}"
    b = broker.bootstrap
    r = ok(cm(b, "--alter", "--name", name, "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
              "--interval", "1000", "--match", "client_id=app-.*"))
    assert r.lines() == [f"Altered client metrics config for {name}."]
    assert name in ok(cm(b, "--list")).lines()
    assert ok(cm(b, "--describe", "--name", name)).lines() == [
        f"Client metrics configs for {name} are:",
        "  interval.ms=1000",
        "  match=client_id=app-.*",
        "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.",
    ]
    # kafka-configs.sh lists every client-metrics resource (ListConfigResources) with sources.
    r = ok(kt.run("kafka-configs", b, "--describe", "--entity-type", "client-metrics"))
    assert f"Dynamic configs for client-metric {name} are:" in r.lines()
    assert "  interval.ms=1000 sensitive=false synonyms={DYNAMIC_CLIENT_METRICS_CONFIG:interval.ms=1000}" in r.lines()

    # Kafka's refusals, with its messages; nothing is applied.
    r = cm(b, "--alter", "--name", name, "--interval", "50")
    assert r.rc == 1 and "InvalidRequestException: Invalid value 50 for interval.ms, interval must be " \
        "between 100 and 3600000 (1 hour)" in r.out + r.err, r
    r = cm(b, "--alter", "--name", name, "--match", "rack=1")
    assert r.rc == 1 and "InvalidConfigurationException: Illegal client matching pattern: rack=1" in r.out + r.err, r
    r = kt.run("kafka-configs", b, "--alter", "--entity-type", "client-metrics", "--entity-name", name,
               "--add-config", "nope=1")
    assert r.rc == 1 and "InvalidRequestException: Unknown client metrics configuration: nope" in r.out + r.err, r
    assert "  interval.ms=1000" in ok(cm(b, "--describe", "--name", name)).lines()

    # An incremental change keeps the keys it does not name; a list is set in kafka-configs' [a,b] form.
    ok(kt.run("kafka-configs", b, "--alter", "--entity-type", "client-metrics", "--entity-name", name,
              "--add-config", "interval.ms=2000,metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.,x.]"))
    assert ok(cm(b, "--describe", "--name", name)).lines()[1:] == [
        "  interval.ms=2000",
        "  match=client_id=app-.*",
        "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.,x.",
    ]

    assert ok(cm(b, "--delete", "--name", name)).lines() == [f"Deleted client metrics config for {name}."]
    assert name not in ok(cm(b, "--list")).lines()
    assert ok(cm(b, "--describe", "--name", name)).lines() == [
        f"The client metric resource {name} doesn't exist and doesn't have dynamic config."
    ]


@pytest.mark.skipif(not STROM_TESTED, reason="Strom's data dir")
def test_subscriptions_survive_a_kill9(tmp_path):
    data = tmp_path / "data"
    b = brokers.start_strom(data_dir=data)
    try:
        ok(cm(b.bootstrap, "--alter", "--name", "kept", "--metrics", "*", "--interval", "500"))
        b.proc.kill()
        b.proc.wait()
    finally:
        b.cleanup()
    b = brokers.start_strom(data_dir=data)
    try:
        assert ok(cm(b.bootstrap, "--describe", "--name", "kept")).lines() == [
            "Client metrics configs for kept are:", "  interval.ms=500", "  metrics=*",
        ]
    finally:
        b.cleanup()


def scrape(b) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{b.extra['metrics_port']}/metrics", timeout=10) as r:
        return r.read().decode()


def client_series(text: str, client_id: str) -> dict[str, dict[str, str]]:
    """{family: labels} of the `strom_client_*` series whose client_id label is `client_id`."""
    out = {}
    for m in re.finditer(r'^(strom_client_\w+)\{([^}]*)\} (\S+)$', text, re.M):
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m[2]))
        if labels.get("client_id") == client_id:
            out[m[1]] = labels
    return out


def wait_for_series(b, client_id: str, prefix: str) -> dict[str, dict[str, str]]:
    deadline = time.monotonic() + PUSH_TIMEOUT_S
    while True:
        got = {f: l for f, l in client_series(scrape(b), client_id).items() if f.startswith(prefix)}
        if got:
            return got
        assert time.monotonic() < deadline, f"no {prefix}* series for {client_id} on /metrics"
        time.sleep(0.5)


@pytest.mark.skipif(not STROM_TESTED, reason="Kafka serves no pushes without a telemetry plugin")
def test_real_clients_push_the_subscribed_metrics_to_the_broker(strom_broker):
    b = strom_broker
    tag = uuid.uuid4().hex[:8]
    name = f"tele-{tag}"
    # Producer and consumer metrics, every second, for this test's clients only.
    ok(cm(b.bootstrap, "--alter", "--name", name, "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
          "--interval", "1000", "--match", f"client_id=tele-{tag}-.*"))
    topic = unique_topic("telemetry")
    assert admin.create_topic("confluent", b.bootstrap, topic, 1) == 0

    # librdkafka's producer: asks for its subscription at start, pushes every interval.
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": f"tele-{tag}-py", "linger.ms": 5})
    other = Producer({"bootstrap.servers": b.bootstrap, "client.id": f"other-{tag}"})
    deadline = time.monotonic() + PUSH_TIMEOUT_S
    produced = {}
    while not produced and time.monotonic() < deadline:
        for i in range(50):
            p.produce(topic, f"v{i}".encode())
            other.produce(topic, b"x")
        p.flush(10)
        other.flush(10)
        produced = {f: l for f, l in client_series(scrape(b), f"tele-{tag}-py").items()
                    if f.startswith("strom_client_producer_")}
        time.sleep(0.5)
    assert "strom_client_producer_record_queue_time_avg" in produced, sorted(produced)
    labels = produced["strom_client_producer_record_queue_time_avg"]
    assert labels["client_software_name"] == "confluent-kafka-python", labels
    assert labels["client_source_address"] == "127.0.0.1"
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", labels["client_instance_id"]), labels
    # No consumer metrics were asked of a producer that has none; the other client pushes
    # nothing (its subscription is empty), though it asked.
    text = scrape(b)
    assert client_series(text, f"other-{tag}") == {}
    assert re.search(r"^strom_client_telemetry_pushes_total [1-9]", text, re.M), text
    p.flush(10)
    del p, other

    # librdkafka's consumer in a group: its own consumer metrics.
    c = Consumer({"bootstrap.servers": b.bootstrap, "client.id": f"tele-{tag}-pyc", "group.id": f"g-{tag}",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + PUSH_TIMEOUT_S
        consumed = {}
        while not consumed and time.monotonic() < deadline:
            c.poll(0.5)
            consumed = {f: l for f, l in client_series(scrape(b), f"tele-{tag}-pyc").items()
                        if f.startswith("strom_client_consumer_")}
        assert consumed, "no consumer series on /metrics"
        assert not any(f.startswith("strom_client_producer_") for f in client_series(scrape(b), f"tele-{tag}-pyc"))
    finally:
        c.close()

    # The Java client (Kafka 4.4's producer, enable.metrics.push defaults to true). It lives
    # 10 s, pushing every second once it has its subscription: on a loaded machine (CI's
    # compat parts side by side) a 4 s producer once ended before its first push.
    r = ok(kt.run("kafka-producer-perf-test", None, "--topic", topic, "--num-records", "1000", "--record-size", "50",
                  "--throughput", "100", "--command-property", f"bootstrap.servers={b.bootstrap}",
                  f"client.id=tele-{tag}-java"))
    assert r.lines()[-1].startswith("1000 records sent, "), r.out
    java = wait_for_series(b, f"tele-{tag}-java", "strom_client_producer_")
    assert java, "no Java producer series"
    assert next(iter(java.values()))["client_software_name"] == "apache-kafka-java", java

    ok(cm(b.bootstrap, "--delete", "--name", name))


@pytest.mark.skipif(not STROM_TESTED, reason="Kafka forwards pushes only through a plugin")
def test_pushed_metrics_are_forwarded_to_the_otlp_collector_labelled_with_the_client():
    rx = OtlpReceiver()
    b = None
    try:
        b = brokers.start_strom(extra_args=["--set", f"otel_exporter_otlp_endpoint={rx.endpoint}"])
        tag = uuid.uuid4().hex[:8]
        ok(cm(b.bootstrap, "--alter", "--name", f"fwd-{tag}", "--metrics", "org.apache.kafka.producer.",
              "--interval", "1000", "--match", f"client_id=fwd-{tag}-.*"))
        topic = unique_topic("telemetry-fwd")
        assert admin.create_topic("confluent", b.bootstrap, topic, 1) == 0
        p = Producer({"bootstrap.servers": b.bootstrap, "client.id": f"fwd-{tag}-py", "linger.ms": 5})

        def forwarded():
            p.produce(topic, b"v")
            p.flush(10)
            with rx._lock:
                return [(res, names) for res, names in rx.metrics if res.get("client_id") == f"fwd-{tag}-py"]

        got = admin.wait_for(forwarded, "the producer's metrics at the collector", timeout_s=PUSH_TIMEOUT_S,
                             interval_s=0.5)
        res, names = got[0]
        assert "org.apache.kafka.producer.record.queue.time.avg" in names, names
        assert res["client_software_name"] == "confluent-kafka-python", res
        assert res["client_source_address"] == "127.0.0.1", res
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", res["client_instance_id"]), res
        assert re.search(r"^strom_client_telemetry_forwarded_total [1-9]", scrape(b), re.M)
        del p
    finally:
        if b is not None:
            b.cleanup()
        rx.close()
