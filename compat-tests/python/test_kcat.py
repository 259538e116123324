"""kcat (librdkafka's command-line client, from Debian's package): produce keyed lines with
each codec, read them back with kcat and with confluent-kafka."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import admin
from clients import CODECS, confluent_consume, unique_topic

N = 2000


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 60) -> bytes:
    exe = shutil.which("kcat")
    assert exe, "kcat not installed (scripts/test-all.sh installs it: apt-get install kcat)"
    r = subprocess.run([exe, *args], input=stdin, capture_output=True, timeout=timeout)
    assert r.returncode == 0, f"kcat {' '.join(args)} exited {r.returncode}: {r.stderr.decode(errors='replace')[-2000:]}"
    return r.stdout


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_then_kcat_and_confluent_consume_same_lines(broker, codec):
    topic = unique_topic(f"kcat-{codec}")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 1) == admin.NONE
    admin.wait_for(lambda: admin.topic_partitions("confluent", broker.bootstrap, topic), f"{topic} metadata")
    lines = [f"k{i % 97}:value {i} " + "x" * (i % 300) for i in range(N)]
    kcat(
        "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-K:", "-z", codec,
        "-X", "acks=all",
        stdin=("\n".join(lines) + "\n").encode(),
    )

    out = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o|%k|%s\n")
    got = out.decode().splitlines()
    want = [f"{i}|{line.replace(':', '|', 1)}" for i, line in enumerate(lines)]
    assert len(got) == N, f"kcat consumed {len(got)} of {N} lines"
    assert got == want

    recs = confluent_consume(broker.bootstrap, topic, 1, N)
    assert [(r.offset, r.key, r.value) for r in recs] == [
        (i, line.split(":", 1)[0].encode(), line.split(":", 1)[1].encode()) for i, line in enumerate(lines)
    ]


def test_kcat_metadata_lists_the_broker_and_topic(broker):
    topic = unique_topic("kcat-md")
    assert admin.create_topic("confluent", broker.bootstrap, topic, 2) == admin.NONE
    admin.wait_for(lambda: admin.topic_partitions("confluent", broker.bootstrap, topic), f"{topic} metadata")
    import json

    md = json.loads(kcat("-b", broker.bootstrap, "-L", "-J", "-t", topic))
    assert [(b["id"], b["name"]) for b in md["brokers"]] == [(0, broker.bootstrap)]
    (t,) = md["topics"]
    assert t["topic"] == topic
    assert sorted((p["partition"], p["leader"]) for p in t["partitions"]) == [(0, 0), (1, 0)]
