"""`strom migrate`: copy topics, batches and group offsets from a real Apache Kafka 4.4 into
a Strom data dir with every offset preserved, then serve that dir with `strom serve`.

The source (module fixture, on the session's Kafka broker): topics with several partitions
and non-default configs; keys, headers, null values; every codec; an idempotent producer;
transactions with a commit and an abort; two consumer groups, one committed mid-topic.

The comparison reads the segment files of both sides (Kafka's log dir and the migrated
data dir) and compares every batch: offsets, timestamps and all bytes from the magic byte
on (CRC, attributes, producer id/epoch/sequence, records). The leader epoch is not
compared: it is Strom's own (0), outside the CRC.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

import admin
import brokers
import clients

pytestmark = pytest.mark.skipif(
    "kafka" not in os.environ.get("STROM_COMPAT_BROKERS", "strom,kafka"),
    reason="migration tests need the Apache Kafka broker (STROM_COMPAT_BROKERS)",
)

MIGRATE_TIMEOUT_S = 120
KILL_CYCLES = int(os.environ.get("STROM_MIGRATE_KILL_CYCLES", "4"))
# Records of 1000 B in the kill -9 test: 20 MB in CI; STROM_MIGRATE_KILL_RECORDS=1100000 (with
# STROM_MIGRATE_KILL_CYCLES=6) makes it the issue's >= 1 GB run.
KILL_RECORDS = int(os.environ.get("STROM_MIGRATE_KILL_RECORDS", "20000"))


# ---------------------------------------------------------------- segment files


def read_batches(partition_dir: Path) -> list[tuple]:
    """(base offset, last offset, base ts, max ts, bytes from magic on) of every batch in a
    partition dir's segments, in offset order."""
    out = []
    for seg in sorted(partition_dir.glob("*.log"), key=lambda p: int(p.stem)):
        data = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            if length <= 0 or pos + 12 + length > len(data):
                break
            last_delta, base_ts, max_ts = struct.unpack_from(">iqq", data, pos + 23)
            out.append((base, base + last_delta, base_ts, max_ts, data[pos + 16 : pos + 12 + length]))
            pos += 12 + length
    return out


def read_txn_index(partition_dir: Path) -> list[tuple]:
    """(producer id, first offset, last offset, last stable offset) of every .txnindex entry."""
    out = []
    for f in sorted(partition_dir.glob("*.txnindex"), key=lambda p: int(p.stem)):
        data = f.read_bytes()
        for pos in range(0, len(data) - len(data) % 34, 34):
            _version, pid, first, last, lso = struct.unpack_from(">hqqqq", data, pos)
            out.append((pid, first, last, lso))
    return out


def kafka_dir(kafka: brokers.BrokerProcess) -> Path:
    return kafka.workdir / "data"


def assert_same_partition(kafka: brokers.BrokerProcess, strom_data: Path, topic: str, p: int) -> int:
    ours = read_batches(strom_data / f"{topic}-{p}")
    theirs = read_batches(kafka_dir(kafka) / f"{topic}-{p}")
    assert theirs, f"{topic}-{p}: Kafka has no batches"
    assert len(ours) == len(theirs), f"{topic}-{p}: {len(ours)} batches on Strom, {len(theirs)} on Kafka"
    for a, b in zip(ours, theirs):
        assert a[:4] == b[:4], f"{topic}-{p}: batch {a[:4]} on Strom, {b[:4]} on Kafka"
        assert a[4] == b[4], f"{topic}-{p}: bytes of batch at offset {a[0]} differ"
    return len(ours)


# ---------------------------------------------------------------- running the migrator


def migrate(*args: str, timeout_s: float = MIGRATE_TIMEOUT_S) -> subprocess.CompletedProcess:
    env = dict(os.environ, RUST_LOG="info")
    return subprocess.run(
        [str(brokers.STROM_BIN), "migrate", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
    )


def mirror_until_caught_up(source: str, data: Path, prefix: str, *extra: str) -> subprocess.CompletedProcess:
    r = migrate(
        "mirror", "--source", source, "--data-dir", str(data),
        "--topics", f"{prefix}.*", "--groups", f"{prefix}.*", "--until-caught-up", *extra,
    )
    assert r.returncode == 0, f"mirror failed ({r.returncode}):\n{r.stderr[-3000:]}"
    return r


def serve(data: Path) -> brokers.BrokerProcess:
    workdir = Path(tempfile.mkdtemp(prefix="strom-migrated-"))
    port, metrics_port = brokers.free_port(), brokers.free_port()
    argv = [
        str(brokers.STROM_BIN), "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data),
        "--metrics-listen", f"127.0.0.1:{metrics_port}", "--shards", "2",
    ]
    b = brokers._spawn("strom", argv, workdir, port)
    b.wait_ready()
    return b


# ---------------------------------------------------------------- the migrator's /metrics


def http_get(port: int, path: str) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read().decode()


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The Prometheus text of /metrics: name -> [(labels, value)]."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in http_get(port, "/metrics").splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)", line)
        assert m, f"not Prometheus text: {line!r}"
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def by_partition(s, name: str, topic: str) -> dict[int, float]:
    return {int(lb["partition"]): v for lb, v in s.get(name, []) if lb.get("topic") == topic}


def by_topic(s, name: str, topic: str) -> float | None:
    return next((v for lb, v in s.get(name, []) if lb.get("topic") == topic), None)


def kafka_end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import TopicPartition

    c = clients.confluent_consumer(bootstrap)
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    finally:
        c.close()


def scrape_until(port: int, proc: subprocess.Popen, what: str, ok, timeout_s: float = 120):
    """Scrapes until `ok(samples)`; fails naming `what` if the migrator exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    s = {}
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the migrator exited ({proc.returncode}) before {what}"
        try:
            s = scrape(port)
        except OSError:
            s = {}  # not listening yet
        if s and ok(s):
            return s
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last scrape: { {k: v for k, v in s.items() if 'migrate' in k} }")


# ---------------------------------------------------------------- the source data


def produce(bootstrap: str, topic: str, recs: list[clients.Out], codec: str) -> None:
    clients.confluent_produce(bootstrap, topic, recs, codec, "all", True)


def produce_transactions(bootstrap: str, topic: str) -> None:
    """Three transactions of 5 records to partitions 0 and 1: commit, abort, commit."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"mig-{uuid.uuid4().hex[:8]}", "linger.ms": 5})
    p.init_transactions(60)
    for txn, outcome in enumerate(("commit", "abort", "commit")):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, key=f"t{txn}-{i}".encode(), value=f"{outcome}-{i}".encode(), partition=i % 2)
        p.flush(60)
        if outcome == "commit":
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)


def commit_group(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """A consumer of `group` consumes `topic` up to `offsets` (per partition) on `bootstrap`
    and commits them: the group's members really read from the broker."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_uncommitted"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in offsets])
        seen = {p: 0 for p in offsets}
        deadline = time.monotonic() + 60
        while any(seen[p] < o for p, o in offsets.items()) and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                assert not m.error(), m.error()
                seen[m.partition()] = max(seen[m.partition()], m.offset() + 1)
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    a = AdminClient({"bootstrap.servers": bootstrap})
    fut = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=30)[group]
    res = fut.result(timeout=30)
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions if tp.offset >= 0}


@pytest.fixture(scope="module")
def source(kafka_broker):
    """Topics, data and groups on Kafka, all named with one unique prefix."""
    prefix = f"mig{uuid.uuid4().hex[:6]}"
    bs = kafka_broker.bootstrap
    topics = {
        f"{prefix}-codecs": (3, {"retention.ms": "604800001", "max.message.bytes": "2000000"}),
        f"{prefix}-small": (1, {"segment.bytes": "1048576", "cleanup.policy": "delete"}),
        f"{prefix}-txn": (2, {"min.insync.replicas": "1"}),
    }
    for name, (n, configs) in topics.items():
        assert admin.create_topic("confluent", bs, name, n, configs) == admin.NONE
    codecs_topic, small_topic, txn_topic = topics
    recs = clients.make_records(2500, 3, null_header_values=True)
    for i, codec in enumerate(clients.CODECS):
        produce(bs, codecs_topic, recs[i * 500 : (i + 1) * 500], codec)
    small = clients.make_records(3000, 1, null_header_values=False, seed=11)
    produce(bs, small_topic, small, "lz4")
    produce_transactions(bs, txn_topic)
    g1, g2 = f"{prefix}-g1", f"{prefix}-g2"
    commit_group(bs, g1, codecs_topic, {0: 834, 1: 833, 2: 833})
    commit_group(bs, g2, small_topic, {0: 1234})  # mid-topic
    return {"prefix": prefix, "topics": topics, "groups": (g1, g2), "small": small}


def assert_all_equal(kafka_broker, data: Path, source) -> None:
    for name, (n, _) in source["topics"].items():
        for p in range(n):
            assert_same_partition(kafka_broker, data, name, p)


# ---------------------------------------------------------------- the tests


def test_mirror_copies_every_batch_config_and_group_offset(kafka_broker, source):
    data = Path(tempfile.mkdtemp(prefix="strom-migrate-")) / "data"
    try:
        mirror_until_caught_up(kafka_broker.bootstrap, data, source["prefix"])
        assert_all_equal(kafka_broker, data, source)
        txn_topic = f"{source['prefix']}-txn"
        for p in range(2):
            kafka_txn = read_txn_index(kafka_dir(kafka_broker) / f"{txn_topic}-{p}")
            assert kafka_txn, "Kafka recorded no aborted transaction"
            assert read_txn_index(data / f"{txn_topic}-{p}") == kafka_txn
        # Strom's producer ids start above every copied one.
        # (the producer id is at byte 43 of a batch, 27 of what read_batches keeps)
        pids = [struct.unpack_from(">q", b[4], 27)[0] for t in source["topics"] for b in read_batches(data / f"{t}-0")]
        max_pid = max(pids)
        assert max_pid >= 0
        assert int((data / "strom-producer-ids").read_text()) > max_pid

        status = migrate("status", "--data-dir", str(data))
        assert status.returncode == 0, status.stdout + status.stderr
        assert "caught up" in status.stdout

        strom = serve(data)
        try:
            for name, (_, configs) in source["topics"].items():
                got = admin.describe_topic_configs(strom.bootstrap, name)
                for k, v in configs.items():
                    assert got[k][0] == v, f"{name} {k}: {got[k]} on Strom, {v} on Kafka"
            for g in source["groups"]:
                assert group_offsets(strom.bootstrap, g) == group_offsets(kafka_broker.bootstrap, g)
            # read_committed (confluent's default) sees the committed transactions only, on both.
            committed_kafka = clients.confluent_consume(kafka_broker.bootstrap, txn_topic, 2, 20)
            committed_strom = clients.confluent_consume(strom.bootstrap, txn_topic, 2, 20)
            assert len(committed_kafka) == 20 and all(r.value.startswith(b"commit") for r in committed_kafka)
            assert committed_strom == committed_kafka
            # The mid-topic group's consumer moves to Strom and continues where it was.
            g2 = source["groups"][1]
            small_topic = f"{source['prefix']}-small"
            got = consume_group(strom.bootstrap, g2, small_topic, len(source["small"]) - 1234)
            want = consume_from(kafka_broker.bootstrap, small_topic, 1234, len(source["small"]) - 1234)
            assert [r.offset for r in got] == list(range(1234, len(source["small"])))
            assert got == want
        finally:
            strom.stop()
            strom.cleanup()
    finally:
        shutil.rmtree(data.parent, ignore_errors=True)


def consume_group(bootstrap: str, group: str, topic: str, total: int) -> list[clients.Rec]:
    """Subscribes as `group` (starting at its committed offset) and reads `total` records."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "latest"})
    try:
        c.subscribe([topic])
        return drain(c, total)
    finally:
        c.close()


def consume_from(bootstrap: str, topic: str, offset: int, total: int) -> list[clients.Rec]:
    from confluent_kafka import TopicPartition

    c = clients.confluent_consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, offset)])
        return drain(c, total)
    finally:
        c.close()


def drain(c, total: int) -> list[clients.Rec]:
    """Reads until `total` records arrived or the consumer stalls (clients.Progress)."""
    got = []
    progress = clients.Progress(total)
    while progress.more(len(got)):
        for m in c.consume(num_messages=1000, timeout=0.5):
            assert not m.error(), m.error()
            got.append(to_rec(m))
    return got


def to_rec(m) -> clients.Rec:
    from confluent_kafka import TIMESTAMP_CREATE_TIME

    ts_type, ts = m.timestamp()
    return clients.Rec(m.partition(), m.offset(), m.key(), m.value(), clients._norm_headers(m.headers()), ts,
                       "create" if ts_type == TIMESTAMP_CREATE_TIME else "log_append")


def test_mirror_resumes_after_kill9_without_duplicates_or_gaps(kafka_broker):
    """kill -9 the migrator several times while it copies (small fetches make many rounds);
    every rerun continues from what is durably on Strom, and the result equals Kafka's."""
    prefix = f"mig{uuid.uuid4().hex[:6]}"
    bs = kafka_broker.bootstrap
    topic = f"{prefix}-bulk"
    assert admin.create_topic("confluent", bs, topic, 2, {}) == admin.NONE
    rng = random.Random(5)
    recs = [clients.Out(i % 2, f"k{i}".encode(), rng.randbytes(1000), (), clients.BASE_TS + i) for i in range(KILL_RECORDS)]
    produce(bs, topic, recs, "none")
    total = sum(p.stat().st_size for p in kafka_dir(kafka_broker).glob(f"{topic}-*/*.log"))
    data = Path(tempfile.mkdtemp(prefix="strom-migrate-kill-")) / "data"
    argv = [str(brokers.STROM_BIN), "migrate", "mirror", "--source", bs, "--data-dir", str(data),
            "--topics", f"{prefix}.*", "--fetch-max-bytes", "65536"]
    try:
        kills = 0
        for cycle in range(KILL_CYCLES):
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                goal = total * (cycle + 1) / (KILL_CYCLES + 2) * rng.uniform(0.8, 1.1)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and proc.poll() is None:
                    copied = sum(p.stat().st_size for p in data.glob(f"{topic}-*/*.log"))
                    if copied >= goal:
                        break
                    time.sleep(0.02)
            finally:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    kills += 1
                proc.wait(timeout=20)
        assert kills >= KILL_CYCLES - 1, f"the migrator finished before it could be killed ({kills} kills)"
        print(f"kill -9 test: {total} bytes of Kafka segments, {kills} kills of the migrator")
        mirror_until_caught_up(bs, data, prefix)
        for p in range(2):
            assert assert_same_partition(kafka_broker, data, topic, p) > 0
    finally:
        shutil.rmtree(data.parent, ignore_errors=True)


def test_status_reports_lag_until_the_next_sync(kafka_broker):
    prefix = f"mig{uuid.uuid4().hex[:6]}"
    bs = kafka_broker.bootstrap
    topic = f"{prefix}-lag"
    assert admin.create_topic("confluent", bs, topic, 1, {}) == admin.NONE
    produce(bs, topic, clients.make_records(100, 1, null_header_values=False), "zstd")
    data = Path(tempfile.mkdtemp(prefix="strom-migrate-lag-")) / "data"
    try:
        mirror_until_caught_up(bs, data, prefix)
        assert migrate("status", "--data-dir", str(data)).returncode == 0
        produce(bs, topic, clients.make_records(50, 1, null_header_values=False, seed=3), "gzip")
        r = migrate("status", "--data-dir", str(data))
        assert r.returncode == 1, r.stdout + r.stderr
        assert "NOT caught up" in r.stdout
        line = next(ln for ln in r.stdout.splitlines() if ln.startswith(topic))
        assert line.split()[2:] == ["150", "100", "50"], line
        mirror_until_caught_up(bs, data, prefix)
        assert migrate("status", "--data-dir", str(data)).returncode == 0
        assert assert_same_partition(kafka_broker, data, topic, 0) == 2
    finally:
        shutil.rmtree(data.parent, ignore_errors=True)


def test_bad_input_is_refused_with_a_clear_error_and_nothing_damaged(kafka_broker):
    prefix = f"mig{uuid.uuid4().hex[:6]}"
    bs = kafka_broker.bootstrap
    topic = f"{prefix}-clash"
    assert admin.create_topic("confluent", bs, topic, 1, {}) == admin.NONE
    produce(bs, topic, clients.make_records(200, 1, null_header_values=False), "none")
    workdir = Path(tempfile.mkdtemp(prefix="strom-migrate-bad-"))
    data = workdir / "data"
    try:
        # Unreachable source: an error naming it, and no data dir left behind.
        dead = f"127.0.0.1:{brokers.free_port()}"
        r = migrate("mirror", "--source", dead, "--data-dir", str(data), "--until-caught-up", "--timeout-secs", "5")
        assert r.returncode != 0
        assert f"connecting to {dead}" in r.stderr, r.stderr[-2000:]
        assert not data.exists()

        # A topic of the same name on Strom holding other data: refused, left as it was.
        strom = serve(data)
        try:
            assert admin.create_topic("confluent", strom.bootstrap, topic, 1, {}) == admin.NONE
            produce(strom.bootstrap, topic, clients.make_records(10, 1, null_header_values=False, seed=9), "none")
            # While `strom serve` runs, the data dir is locked.
            r = migrate("mirror", "--source", bs, "--data-dir", str(data), "--topics", f"{prefix}.*",
                        "--until-caught-up")
            assert r.returncode != 0 and "locked" in r.stderr, r.stderr[-2000:]
        finally:
            strom.stop()
        before = read_batches(data / f"{topic}-0")
        assert len(before) >= 1
        r = migrate("mirror", "--source", bs, "--data-dir", str(data), "--topics", f"{prefix}.*",
                    "--until-caught-up")
        assert r.returncode != 0
        assert "refused" in r.stderr and f"{topic}-0" in r.stderr, r.stderr[-2000:]
        assert read_batches(data / f"{topic}-0") == before
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_mirror_serves_offsets_lag_and_bytes_on_the_admin_port(kafka_broker):
    """A continuous mirror (no --until-caught-up) with --admin-listen: /metrics shows lag 0
    once the copy reached Kafka's end offsets, copied and source ends equal to them, the
    bytes and batches of Kafka's segments, the group's offset; then more records on Kafka
    and the figures follow. Stopped by SIGTERM to its PID."""
    prefix = f"mig{uuid.uuid4().hex[:6]}"
    bs = kafka_broker.bootstrap
    topic = f"{prefix}-metrics"
    assert admin.create_topic("confluent", bs, topic, 3, {}) == admin.NONE
    produce(bs, topic, clients.make_records(1500, 3, null_header_values=False), "lz4")
    group = f"{prefix}-g"
    commit_group(bs, group, topic, {0: 100, 1: 200, 2: 300})
    workdir = Path(tempfile.mkdtemp(prefix="strom-migrate-metrics-"))
    data = workdir / "data"
    port = brokers.free_port()

    # An explicit address that cannot be bound is an error (before anything is touched).
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        taken = f"127.0.0.1:{busy.getsockname()[1]}"
        r = migrate("mirror", "--source", bs, "--data-dir", str(data), "--until-caught-up", "--admin-listen", taken)
        assert r.returncode != 0 and f"--admin-listen {taken}: cannot bind" in r.stderr, r.stderr[-2000:]
        assert not data.exists()

    argv = [str(brokers.STROM_BIN), "migrate", "mirror", "--source", bs, "--data-dir", str(data),
            "--topics", f"{prefix}.*", "--groups", f"{prefix}.*", "--group-interval-secs", "1",
            "--admin-listen", f"127.0.0.1:{port}"]
    log = open(workdir / "mirror.log", "w")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
    try:
        def caught_up_to(ends):
            def ok(s):
                return (by_partition(s, "strom_migrate_source_end_offset", topic) == ends
                        and by_partition(s, "strom_migrate_copied_end_offset", topic) == ends
                        and by_partition(s, "strom_migrate_lag", topic) == {p: 0 for p in ends}
                        and s["strom_migrate_caught_up"] == [({}, 1.0)])
            return ok

        ends = kafka_end_offsets(bs, topic, 3)
        assert all(e > 0 for e in ends.values()), ends
        s = scrape_until(port, proc, f"lag 0 at Kafka's end offsets {ends}", caught_up_to(ends))
        assert http_get(port, "/health") == "ok\n"

        def kafka_batches(p: int) -> list[tuple]:
            return read_batches(kafka_dir(kafka_broker) / f"{topic}-{p}")

        # Bytes and batches are exactly Kafka's (a batch is 16 bytes more than read_batches keeps).
        first_bytes = by_partition(s, "strom_migrate_bytes_copied_total", topic)
        assert first_bytes == {p: sum(len(b[4]) + 16 for b in kafka_batches(p)) for p in range(3)}
        assert all(v > 0 for v in first_bytes.values()), first_bytes
        assert by_partition(s, "strom_migrate_batches_copied_total", topic) == {
            p: len(kafka_batches(p)) for p in range(3)}
        s = scrape_until(port, proc, "the group's offsets",
                         lambda s: {int(lb["partition"]): v for lb, v in s.get("strom_migrate_group_offset_copied", [])
                                    if lb["group"] == group} == {0: 100, 1: 200, 2: 300})
        assert sum(v for _, v in s["strom_migrate_group_offsets_copied_total"]) >= 3
        assert all(v == 0 for lb, v in s.get("strom_migrate_source_errors_total", []) if lb["error"] == "request")

        # More on Kafka: the source end, copied end and bytes follow, lag back to 0.
        produce(bs, topic, clients.make_records(600, 3, null_header_values=False, seed=4), "zstd")
        more = kafka_end_offsets(bs, topic, 3)
        assert all(more[p] > ends[p] for p in ends), (ends, more)
        s = scrape_until(port, proc, f"lag 0 at Kafka's new end offsets {more}", caught_up_to(more))
        later_bytes = by_partition(s, "strom_migrate_bytes_copied_total", topic)
        assert later_bytes == {p: sum(len(b[4]) + 16 for b in kafka_batches(p)) for p in range(3)}
        assert all(later_bytes[p] > first_bytes[p] for p in ends), (first_bytes, later_bytes)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
        log.close()
    try:
        assert rc == 0, (workdir / "mirror.log").read_text()[-3000:]
        for p in range(3):
            assert_same_partition(kafka_broker, data, topic, p)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
