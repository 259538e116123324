"""A load client of the fault tests, run in a client namespace (netns.Net.spawn) and
recording every operation in its own history file (history.Recorder):

  producer  an idempotent acks=all producer: values `<name>-<seq>` round-robin over the
            partitions at `--rate` per second (`--acks 1`: not idempotent, acks=1, for the
            negative control that shows the checker catching what acks=1 may lose)
  consumer  a member of consumer group `--group` (classic protocol, manual commits every
            second): its assignments, every record it reads, every commit
  txn       consume-transform-produce: reads `--topic` read_committed in group `--group`,
            writes `<txn>:<value>` to `--output` with the input offsets in the same
            transaction; every `--abort-every`-th transaction (on average, seeded) is aborted
            on purpose, after which the consumer goes back to the group's committed offsets;
            a transactional call that hangs in librdkafka is abandoned (`TxnProducer`)
  reader    a read_committed consumer of `--topic` without a group, from the beginning

It runs until SIGTERM (then a producer flushes, a transaction ends) or `--seconds`, and
exits 0 unless it crashed. Faults are expected: client errors are recorded, not raised.

    python fault_client.py ROLE --name N --bootstrap B --topic T --history F [...]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402

import history  # noqa: E402

stopping = False

# Producers given up inside a call that never returned (`TxnProducer`), kept so that Python
# never destroys them: rd_kafka_destroy waits for that call and would hang the process too.
# While any is here the process leaves with os._exit.
abandoned: list = []


def _stop(*_):
    global stopping
    stopping = True


def common(a) -> dict:
    conf = {"bootstrap.servers": a.bootstrap, "reconnect.backoff.max.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000, "socket.connection.setup.timeout.ms": 5000}
    # librdkafka's debug contexts (e.g. "eos,msg") into the client's log, for a post-mortem.
    if os.environ.get("STROM_FAULT_CLIENT_DEBUG"):
        conf["debug"] = os.environ["STROM_FAULT_CLIENT_DEBUG"]
    return conf


def err_text(e) -> str:
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        e = e.args[0]
    if isinstance(e, KafkaError):
        return f"{e.name()}: {e.str()}"
    return repr(e)


def guarded(rec, fn):
    """A client callback that never raises: an exception escaping into librdkafka's C code
    surfaces later as a SystemError from an unrelated poll (confluent-kafka-python #729)."""
    def wrapper(*args):
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - recorded, then the client goes on
            try:
                rec("client_error", error=f"in {fn.__name__}: {e!r}", fatal=False)
            except BaseException:  # noqa: BLE001
                pass
    return wrapper


def run_producer(a, rec, deadline):
    fatal = []

    def on_error(err):
        if err.fatal():
            fatal.append(err)
            rec("client_error", error=err_text(err), fatal=True)

    def make():
        # acks=1 (not idempotent: librdkafka requires all) only for the negative control.
        # message.timeout.ms outlasts every fault of a schedule: librdkafka answers a record
        # that times out in flight with an epoch bump, after which it sends the records
        # behind it again under the new epoch and fresh sequence numbers, so a copy the
        # broker had already written but not yet acknowledged is written twice (Kafka's
        # contract dedups within one epoch only; seen with seed 2's kill schedule).
        return Producer({**common(a), "acks": a.acks, "enable.idempotence": a.acks == "all", "linger.ms": 5,
                         "message.timeout.ms": 120000, "request.timeout.ms": 5000,
                         "error_cb": guarded(rec, on_error)})

    def delivered(err, msg):
        v = msg.value().decode()
        if err:
            rec("fail", topic=a.topic, value=v, error=err_text(err))
        else:
            off = msg.offset()  # None or negative when the client knows no offset
            rec("ack", topic=a.topic, value=v, partition=msg.partition(),
                offset=off if off is not None and off >= 0 else None)

    on_delivery = guarded(rec, delivered)
    producer = make()
    seq, interval = 0, 1.0 / a.rate
    next_at = time.monotonic()
    while not stopping and time.monotonic() < deadline:
        if fatal:
            # An idempotent producer's fatal error (e.g. a sequence it cannot repair): its
            # undelivered records stay indeterminate; a new producer goes on.
            producer.purge()
            producer.flush(5)
            producer, fatal[:] = make(), []
        now = time.monotonic()
        if now < next_at:
            try:
                producer.poll(next_at - now)
            except SystemError as e:
                # confluent-kafka's C layer reporting an error it lost track of (#729, #865);
                # the producer itself goes on.
                rec("client_error", error=f"poll: {e!r}", fatal=False)
            continue
        next_at += interval
        v = f"{a.name}-{seq:07d}"
        p = seq % a.partitions
        try:
            producer.produce(a.topic, value=v.encode(), partition=p, on_delivery=on_delivery)
            rec("send", topic=a.topic, value=v, partition=p)
            seq += 1
        except BufferError:
            producer.poll(0.1)
    producer.flush(60)


def _tps(parts):
    return [[tp.topic, tp.partition] for tp in parts]


# librdkafka's debug contexts for the consumers (e.g. "fetch,consumer"), to their .log files:
# why a consumer's position moved (an offset reset, a truncation found by KIP-320
# validation) is logged only there. Off by default: it is a lot of output.
CONSUMER_DEBUG = os.environ.get("STROM_FAULT_CLIENT_DEBUG", "")


def make_consumer(a, rec, name, isolation="read_committed"):
    debug = {"debug": CONSUMER_DEBUG} if CONSUMER_DEBUG else {}
    c = Consumer({**common(a), "group.id": a.group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": isolation,
                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                  "enable.partition.eof": False, **debug})

    def on_assign(consumer, parts):
        rec("assign", consumer=name, group=a.group, partitions=_tps(parts))

    def on_revoke(consumer, parts):
        rec("revoke", consumer=name, partitions=_tps(parts))

    c.subscribe([a.topic], on_assign=guarded(rec, on_assign), on_revoke=guarded(rec, on_revoke),
                on_lost=guarded(rec, on_revoke))
    return c


def record_polls(rec, name, msgs, isolation):
    good = []
    for m in msgs:
        if m is None:
            continue
        if m.error():
            rec("consumer_error", consumer=name, error=err_text(m.error()))
            continue
        rec("poll", consumer=name, topic=m.topic(), partition=m.partition(), offset=m.offset(),
            value=m.value().decode(), isolation=isolation)
        good.append(m)
    return good


def commit(c, rec, name, group):
    rec("commit_start", consumer=name, group=group)
    try:
        done = c.commit(asynchronous=False)
        rec("commit", consumer=name, group=group, ok=True,
            offsets=[[tp.topic, tp.partition, tp.offset] for tp in done or [] if tp.offset >= 0 and not tp.error],
            error=None)
    except KafkaException as e:
        rec("commit", consumer=name, group=group, ok=False, offsets=[], error=err_text(e))


def run_consumer(a, rec, deadline):
    name = a.name
    c = make_consumer(a, rec, name)
    last_commit = time.monotonic()
    read_since = False
    while not stopping and time.monotonic() < deadline:
        got = record_polls(rec, name, c.consume(num_messages=200, timeout=0.5), "read_committed")
        read_since = read_since or bool(got)
        if read_since and time.monotonic() - last_commit >= 1.0:
            commit(c, rec, name, a.group)
            last_commit, read_since = time.monotonic(), False
    c.close()


def run_reader(a, rec, deadline):
    name = a.name
    c = Consumer({**common(a), "group.id": f"{a.name}-unused", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": False})
    parts = [TopicPartition(a.topic, p, OFFSET_BEGINNING) for p in range(a.partitions)]
    c.assign(parts)
    rec("assign", consumer=name, partitions=_tps(parts))
    while not stopping and time.monotonic() < deadline:
        record_polls(rec, name, c.consume(num_messages=200, timeout=0.5), "read_committed")
    c.close()


class Hung(Exception):
    """A transactional call that did not return within its own timeout plus `TxnProducer.MARGIN_S`."""


class TxnProducer:
    """A transactional producer whose blocking calls (`bounded`) run in a thread of their
    own, joined with the call's timeout plus a margin, so that a call librdkafka never
    returns from is seen. librdkafka 2.x can hang in send_offsets_to_transaction for good: a
    broker missing from a Metadata answer (cut off, fenced, killed) is decommissioned, and a
    group coordinator it had cached for the transaction is never looked up again
    (librdkafka#5511); the call ignores its own timeout meanwhile (librdkafka#5456). Kafka
    leaves such brokers out of Metadata as Strom does, so the hang is the client's. A hung
    producer is recorded and abandoned (never flushed nor destroyed: both wait for the hung
    call), and the worker goes on with a new producer of the same transactional.id, whose
    init_transactions fences the old epoch and ends its open transaction."""

    MARGIN_S = 10.0
    TIMED = ("init_transactions", "send_offsets_to_transaction", "commit_transaction", "abort_transaction")

    def __init__(self, a, rec):
        self.rec = rec
        # One transactional.id per group, so per schedule: a transaction one schedule leaves
        # stuck (its coordinator unable to write a marker) must not fence the next
        # schedule's worker with CONCURRENT_TRANSACTIONS from its first init_transactions.
        self.producer = Producer({**common(a), "transactional.id": f"{a.group}-{a.name}",
                                  "transaction.timeout.ms": 30000, "message.timeout.ms": 20000,
                                  "request.timeout.ms": 5000})

    def bounded(self, what: str, *args, timeout_s: float = 5.0):
        """`producer.<what>(*args[, timeout_s])`; raises `Hung` (the producer abandoned) when
        it has not returned `MARGIN_S` after its timeout (begin_transaction has none: it
        only waits for librdkafka's own thread)."""
        fn = getattr(self.producer, what)
        if what in self.TIMED:
            args = (*args, timeout_s)
        done: dict = {}

        def call():
            try:
                done["value"] = fn(*args)
            except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
                done["error"] = e

        t = threading.Thread(target=call, name=what, daemon=True)
        t.start()
        t.join(timeout_s + self.MARGIN_S)
        if t.is_alive():
            abandoned.append((self.producer, t))
            error = (f"{what}: no return within {timeout_s + self.MARGIN_S:.0f}s (its timeout {timeout_s:.0f}s): hung "
                     "in librdkafka (librdkafka#5511, a decommissioned coordinator is never looked up again); "
                     "producer abandoned, a new one fences it")
            self.rec("client_error", error=error, fatal=False, hung=what)
            raise Hung(error)
        if "error" in done:
            raise done["error"]
        return done.get("value")


def run_txn(a, rec, deadline):
    rng = random.Random(f"{a.seed}:{a.name}")
    gen = 0

    def new_consumer():
        nonlocal gen
        gen += 1
        return make_consumer(a, rec, f"{a.name}#{gen}")

    def new_producer():
        """A producer of the worker's transactional.id, initialized; None if stopping first."""
        p = TxnProducer(a, rec)
        while not stopping and time.monotonic() < deadline:
            try:
                p.bounded("init_transactions", timeout_s=15)
                return p
            except Hung:
                p = TxnProducer(a, rec)
            except KafkaException as e:
                rec("client_error", error=f"init_transactions: {err_text(e)}", fatal=False)
                if e.args[0].fatal():
                    p = TxnProducer(a, rec)
        return None

    def rewind(c):
        """Back to the group's committed offsets (what an aborted transaction did not move)."""
        name = f"{a.name}#{gen}"
        try:
            parts = c.assignment()
            committed = c.committed(parts, timeout=10)
            for tp in committed:
                c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
            rec("seek", consumer=name, partitions=_tps(committed))
            return c
        except KafkaException as e:
            # The consumer cannot tell where it is: a new one starts at the committed offsets.
            rec("client_error", error=f"rewind: {err_text(e)}", fatal=False)
            c.close()
            return new_consumer()

    c = new_consumer()
    tx = new_producer()
    k = 0
    while tx is not None and not stopping and time.monotonic() < deadline:
        msgs = record_polls(rec, f"{a.name}#{gen}", c.consume(num_messages=50, timeout=0.5), "read_committed")
        if not msgs:
            continue
        k += 1
        txn = f"{a.name}-{k}"
        rec("txn_begin", txn=txn)
        outcome, error, commit_called = "unknown", None, False
        try:
            tx.bounded("begin_transaction")
            for m in msgs:
                v = f"{txn}:{m.value().decode()}"
                tx.producer.produce(a.output, value=v.encode(), partition=m.partition())
                rec("txn_send", txn=txn, topic=a.output, partition=m.partition(), value=v, source=m.value().decode(),
                    source_at=[m.topic(), m.partition(), m.offset()])
            tx.bounded("send_offsets_to_transaction", c.position(c.assignment()), c.consumer_group_metadata(),
                       timeout_s=20)
            if rng.random() < 1.0 / a.abort_every:
                tx.bounded("abort_transaction", timeout_s=20)
                outcome = "aborted"
            else:
                rec("txn_commit_start", txn=txn)
                commit_called = True
                for attempt in range(3):
                    try:
                        tx.bounded("commit_transaction", timeout_s=20)
                        outcome = "committed"
                        break
                    except KafkaException as e:
                        if not e.args[0].retriable() or attempt == 2:
                            raise
                        error = err_text(e)
        except Hung as e:
            # The transaction's outcome stays unknown to this worker: committed if its commit
            # reached the coordinator, else aborted by the new producer's init_transactions
            # (which waits until either is complete, so the rewind below sees the outcome).
            error = str(e)
            tx = new_producer()
        except KafkaException as e:
            error = err_text(e)
            ke = e.args[0]
            if ke.txn_requires_abort():
                try:
                    tx.bounded("abort_transaction", timeout_s=20)
                    outcome = "aborted"
                except KafkaException as e2:
                    error += f"; abort: {err_text(e2)}"
                except Hung as e2:
                    error += f"; abort: {e2}"
            if outcome == "unknown":
                # Fatal, or the abort failed too: a new producer's init_transactions ends
                # (aborts or completes) whatever this one left open.
                tx = new_producer()
        rec("txn_end", txn=txn, outcome=outcome, error=error, commit_called=commit_called)
        if outcome != "committed":
            c = rewind(c)
    if tx is not None:
        tx.producer.flush(10)
    c.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["producer", "consumer", "txn", "reader"])
    ap.add_argument("--name", required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--output")
    ap.add_argument("--group")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--acks", default="all", choices=["all", "1"])
    ap.add_argument("--abort-every", type=float, default=5.0)
    ap.add_argument("--seed", default="0")
    ap.add_argument("--history", required=True)
    ap.add_argument("--seconds", type=float, default=600.0)
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    rec = history.Recorder(a.history, a.name)
    rec("start", role=a.role)
    deadline = time.monotonic() + a.seconds
    rc = 0
    try:
        {"producer": run_producer, "consumer": run_consumer, "txn": run_txn, "reader": run_reader}[a.role](
            a, rec, deadline)
    except BaseException:
        if not abandoned:
            raise
        traceback.print_exc()
        rc = 1
    finally:
        rec("stop", role=a.role, abandoned=len(abandoned))
        rec.close()
    if abandoned:
        # Python's exit would destroy the abandoned producers, waiting for their hung calls.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
