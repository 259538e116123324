"""Transactions with confluent-kafka (librdkafka's transactional producer), against Strom and
Apache Kafka side by side: commit and abort as read_committed and read_uncommitted consumers
see them, with the offsets Kafka gives (each commit/abort marker takes one offset); zombie
fencing by a second producer of the same transactional.id; a producer that stalls past its
transaction.timeout.ms is aborted by the coordinator and stops blocking read_committed readers.

The consume-transform-produce run with the broker kill -9'd at random moments is Strom only
(a Kafka restart is a JVM start per cycle): `test_transactions_kill9.py`.
"""

from __future__ import annotations

import time
import uuid

import pytest

import admin

WAIT_S = 60


def txn_producer(bootstrap: str, tid: str, **extra):
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5}
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(WAIT_S)
    return p


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, timeout_s: float = WAIT_S,
             expect: int = 0):
    """Every record up to the partitions' end for this isolation level (the LSO for
    read_committed), and at least `expect` of them (markers are written after EndTxn is
    answered, so the LSO may still be behind a commit just made): [(partition, offset, value)]."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"read-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": isolation,
    })
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out, eof, deadline = [], set(), time.monotonic() + timeout_s
        while time.monotonic() < deadline and (len(eof) < partitions or len(out) < expect):
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                    continue
                raise AssertionError(f"consume error: {m.error()}")
            eof.discard(m.partition())
            out.append((m.partition(), m.offset(), m.value()))
        assert len(eof) == partitions and len(out) >= expect, (
            f"{len(out)} of {expect} records and EOF on {len(eof)} of {partitions} partitions in {timeout_s}s ({isolation})")
        return sorted(out)
    finally:
        c.close()


def test_commit_and_abort_seen_by_isolation_level_with_kafka_offsets(broker):
    topic = f"txn-vis-{uuid.uuid4().hex[:6]}"
    assert admin.create_topic("confluent", broker.bootstrap, topic, 1) == admin.NONE
    p = txn_producer(broker.bootstrap, f"tx-{topic}")
    for tag, commit in (("c1", True), ("a", False), ("c2", True)):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, value=f"{tag}-{i}".encode(), partition=0)
        p.flush(WAIT_S)
        if commit:
            p.commit_transaction(WAIT_S)
        else:
            p.abort_transaction(WAIT_S)
    committed = read_all(broker.bootstrap, topic, 1, "read_committed", expect=20)
    # Offsets as Kafka assigns them: 10 records, their COMMIT marker at 10, 10 aborted
    # records, the ABORT marker at 21, 10 records, the COMMIT marker at 32.
    assert [(o, v.decode()) for _, o, v in committed] == (
        [(i, f"c1-{i}") for i in range(10)] + [(22 + i, f"c2-{i}") for i in range(10)]
    )
    everything = read_all(broker.bootstrap, topic, 1, "read_uncommitted", expect=30)
    assert [o for _, o, _ in everything] == list(range(10)) + list(range(11, 21)) + list(range(22, 32))
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
    try:
        # The last marker is at 32 and takes its offset: the high watermark is 33.
        admin.wait_for(lambda: c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 33),
                       "high watermark and LSO at 33", timeout_s=WAIT_S)
    finally:
        c.close()


def test_send_offsets_to_transaction_applied_on_commit_only(broker):
    from confluent_kafka import Consumer, TopicPartition

    topic = f"txn-off-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    assert admin.create_topic("confluent", broker.bootstrap, topic, 1) == admin.NONE
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        p = txn_producer(broker.bootstrap, f"tx-{topic}")
        meta = c.consumer_group_metadata()
        p.begin_transaction()
        p.produce(topic, value=b"x", partition=0)
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 5)], meta, WAIT_S)
        p.abort_transaction(WAIT_S)
        got = c.committed([TopicPartition(topic, 0)], timeout=WAIT_S)
        assert got[0].offset < 0, "an aborted transaction's offsets are not committed"
        p.begin_transaction()
        p.produce(topic, value=b"y", partition=0)
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 7)], meta, WAIT_S)
        p.commit_transaction(WAIT_S)
        got = c.committed([TopicPartition(topic, 0)], timeout=WAIT_S)
        assert got[0].offset == 7
    finally:
        c.close()


def test_second_producer_fences_the_first_and_aborts_its_transaction(broker):
    from confluent_kafka import KafkaException

    topic = f"txn-zombie-{uuid.uuid4().hex[:6]}"
    assert admin.create_topic("confluent", broker.bootstrap, topic, 2) == admin.NONE
    tid = f"tx-{topic}"
    old = txn_producer(broker.bootstrap, tid)
    old.begin_transaction()
    for i in range(5):
        old.produce(topic, value=f"zombie-{i}".encode(), partition=i % 2)
    old.flush(WAIT_S)
    new = txn_producer(broker.bootstrap, tid)  # aborts the open transaction, bumps the epoch
    with pytest.raises(KafkaException) as e:
        old.commit_transaction(WAIT_S)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower(), str(e.value)
    new.begin_transaction()
    new.produce(topic, value=b"fresh", partition=0)
    new.commit_transaction(WAIT_S)
    committed = read_all(broker.bootstrap, topic, 2, "read_committed", expect=1)
    assert [v for _, _, v in committed] == [b"fresh"]


def test_stalled_transaction_is_aborted_after_its_timeout_and_unblocks_readers(broker):
    from confluent_kafka import KafkaException, Producer

    topic = f"txn-stall-{uuid.uuid4().hex[:6]}"
    assert admin.create_topic("confluent", broker.bootstrap, topic, 1) == admin.NONE
    stalled = txn_producer(broker.bootstrap, f"tx-{topic}", **{"transaction.timeout.ms": 3000})
    stalled.begin_transaction()
    stalled.produce(topic, value=b"stalled", partition=0)
    stalled.flush(WAIT_S)
    # A plain record behind the open transaction: read_committed readers see it only once the
    # transaction is decided.
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"plain", partition=0)
    assert plain.flush(WAIT_S) == 0
    started = time.monotonic()
    # Kafka looks for timed-out transactions every 10 s (its default interval); Strom too.
    deadline = started + 45
    seen = []
    while time.monotonic() < deadline:
        seen = [v for _, _, v in read_all(broker.bootstrap, topic, 1, "read_committed", timeout_s=10)]
        if seen:
            break
        time.sleep(1)
    assert seen == [b"plain"], "the coordinator aborted the stalled transaction"
    with pytest.raises(KafkaException):
        stalled.commit_transaction(WAIT_S)


KILL_CYCLES = int(__import__("os").environ.get("STROM_TXN_KILL_CYCLES", "10"))
CTP_RECORDS = int(__import__("os").environ.get("STROM_TXN_CTP_RECORDS", "100000"))
# Small transactions, so that the run spans every kill even on a fast machine.
CTP_BATCH = 250
# A restarted broker must let the app commit again within this long.
CTP_STALL_S = 90


class _AppProgress:
    """What the kill loop needs to know of the app: transactions committed so far, whether the
    committed offsets have reached the input's end, and when the app may return."""

    def __init__(self):
        import threading

        self.commits = 0
        self.caught_up = False
        self.kills_done = threading.Event()


def _transform_until_done(bootstrap: str, src: str, dst: str, group: str, partitions: int, ends: dict[int, int],
                          stop_at: float, restarts: list[str], progress: _AppProgress) -> None:
    """A consume-transform-produce app: each batch of input (at most CTP_BATCH records) is
    written to `dst` and its input offsets are committed in one transaction. On any error the
    app is rebuilt from scratch (new consumer from the committed offsets, new producer fencing
    the old one), as Kafka Streams does; it returns once the committed offsets reach `ends` and
    the kill loop is over."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    while time.monotonic() < stop_at:
        consumer = producer = None
        try:
            consumer = Consumer({
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            })
            consumer.assign([TopicPartition(src, p) for p in range(partitions)])  # stored offsets
            # No re-bootstrap: when its only broker goes down, librdkafka >= 2.10 decommissions
            # the broker handle, and send_offsets_to_transaction then waits forever on the
            # decommissioned group coordinator, ignoring its timeout (librdkafka issues #5511,
            # #5456; compat-tests/FINDINGS.md). Any single-node broker, Kafka too, triggers it.
            producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{group}-tx",
                                 "linger.ms": 5, "transaction.timeout.ms": 30000,
                                 "metadata.recovery.strategy": "none"})
            producer.init_transactions(30)
            while time.monotonic() < stop_at:
                msgs = [m for m in consumer.consume(CTP_BATCH, 0.5) if not m.error()]
                if not msgs:
                    committed = consumer.committed([TopicPartition(src, p) for p in range(partitions)], timeout=10)
                    progress.caught_up = all(tp.offset == ends[tp.partition] for tp in committed)
                    if progress.caught_up and progress.kills_done.is_set():
                        return
                    continue
                producer.begin_transaction()
                for m in msgs:
                    producer.produce(dst, value=b"out-" + m.value(), partition=m.partition())
                positions = consumer.position([TopicPartition(src, p) for p in range(partitions)])
                producer.send_offsets_to_transaction(
                    [tp for tp in positions if tp.offset >= 0], consumer.consumer_group_metadata(), 30)
                producer.commit_transaction(30)
                progress.commits += 1
        except KafkaException as e:
            restarts.append(str(e))
            time.sleep(0.5)
        finally:
            if consumer is not None:
                try:
                    consumer.close()
                except Exception:  # noqa: BLE001 - a closing consumer of a dead broker
                    pass
    raise AssertionError(f"not done in time; {len(restarts)} app restarts, last: {restarts[-3:]}")


@pytest.mark.timeout(900)
def test_consume_transform_produce_exactly_once_across_kill9():
    """Strom only. 100k input records are transformed transactionally while the broker is
    kill -9'd and restarted at random moments; the read_committed output holds every input
    exactly once and the group's committed offsets are the input's end offsets."""
    import os
    import random
    import threading
    from collections import Counter

    from confluent_kafka import Consumer, Producer, TopicPartition

    from test_durability import Restartable

    if "strom" not in [b.strip() for b in os.environ.get("STROM_COMPAT_BROKERS", "strom,kafka").split(",")]:
        pytest.skip("Strom not selected")
    seed = int(os.environ.get("STROM_KILL_SEED", str(time.time_ns())))
    print(f"STROM_KILL_SEED={seed}")
    rng = random.Random(seed)
    partitions = 3
    b = Restartable()
    try:
        b.start()
        for t in ("ctp-in", "ctp-out"):
            assert admin.create_topic("confluent", b.bootstrap, t, partitions) == admin.NONE
        p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 20})
        for i in range(CTP_RECORDS):
            p.produce("ctp-in", value=f"{i}".encode(), partition=i % partitions)
            if i % 10000 == 9999:
                p.poll(0)
        assert p.flush(120) == 0
        ends = {q: len(range(q, CTP_RECORDS, partitions)) for q in range(partitions)}

        # The app runs in a thread and the kills in this one: a broker started from a thread
        # that then ends would get its PR_SET_PDEATHSIG (brokers.py) with that thread.
        restarts: list[str] = []
        failure: list[BaseException] = []
        progress = _AppProgress()

        def app():
            try:
                _transform_until_done(b.bootstrap, "ctp-in", "ctp-out", "ctp", partitions, ends,
                                      time.monotonic() + 600, restarts, progress)
            except BaseException as e:  # noqa: BLE001 - reported by the main thread
                failure.append(e)

        worker = threading.Thread(target=app, daemon=True)
        worker.start()
        # Each kill comes a random moment after the app has committed at least one transaction
        # against the current broker (or has consumed everything), so every kill lands in a
        # working app, whatever the machine's speed, and a broker that never lets the app
        # commit again fails here, naming the restart.
        kills = 0
        for _ in range(KILL_CYCLES):
            seen, deadline = progress.commits, time.monotonic() + CTP_STALL_S
            while progress.commits == seen and not progress.caught_up and worker.is_alive():
                assert time.monotonic() < deadline, (
                    f"no transaction committed within {CTP_STALL_S} s after restart {kills}; "
                    f"app restarts {len(restarts)}, last: {restarts[-3:]}; broker log: {b.workdir}")
                time.sleep(0.05)
            if failure:
                raise failure[0]
            time.sleep(rng.uniform(0.05, 1.0))
            b.kill9()
            kills += 1
            b.start()
        progress.kills_done.set()
        worker.join(620)
        assert not worker.is_alive(), "the app did not finish"
        if failure:
            raise failure[0]

        out = read_all(b.bootstrap, "ctp-out", partitions, "read_committed", timeout_s=120, expect=CTP_RECORDS)
        counts = Counter(v for _, _, v in out)
        dupes = [v for v, n in counts.items() if n > 1]
        missing = [i for i in range(CTP_RECORDS) if counts.get(f"out-{i}".encode(), 0) == 0]
        assert not dupes, f"{len(dupes)} inputs written twice, e.g. {dupes[:5]}"
        assert not missing, f"{len(missing)} inputs missing, e.g. {missing[:5]}"
        assert len(out) == CTP_RECORDS
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ctp", "isolation.level": "read_committed"})
        try:
            got = c.committed([TopicPartition("ctp-in", q) for q in range(partitions)], timeout=30)
        finally:
            c.close()
        assert {tp.partition: tp.offset for tp in got} == ends
        print(f"kill -9 cycles: {kills}, transactions: {progress.commits}, app restarts: {len(restarts)}")
    finally:
        b.cleanup()
