"""Fixtures: one Strom and one Apache Kafka broker per test session, and `broker`,
parametrized over both, so that every scenario runs against each and differences show
side by side in the test ids (`test_x[strom-...]` next to `test_x[kafka-...]`).

Environment:
  STROM_COMPAT_RECORDS   records per produce/consume test (default 10000; CI may use 100000)
  STROM_COMPAT_BROKERS   comma list of brokers to run against (default "strom,kafka")
  STROM_BIN              the strom binary (default target/release/strom)
  STROM_COMPAT_KEEP_DIRS 1 keeps the brokers' temp dirs (logs, data) for a post-mortem
  STROM_COMPAT_PART      "kafka": only the tests parametrized with the Kafka broker;
                         "strom": all the others (Strom's side and the tests of neither
                         side); "strom:I/N": the I-th of N shares of those, whole modules
                         each (`_share`). scripts/test-all.sh runs the parts as concurrent
                         pytest processes: most of each one's time is spent waiting on a
                         broker or a client, so together they take little more than the
                         longest.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import admin  # noqa: E402
import brokers  # noqa: E402

BROKERS = [b.strip() for b in os.environ.get("STROM_COMPAT_BROKERS", "strom,kafka").split(",") if b.strip()]
RECORDS = int(os.environ.get("STROM_COMPAT_RECORDS", "10000"))
PART = os.environ.get("STROM_COMPAT_PART", "")
SHARE = None  # (I, N) of "strom:I/N"
if PART.startswith("strom:"):
    try:
        i, n = (int(x) for x in PART.removeprefix("strom:").split("/"))
        assert 1 <= i <= n
        SHARE = (i, n)
    except (ValueError, AssertionError):
        raise pytest.UsageError(f"STROM_COMPAT_PART={PART!r}: expected strom:I/N with 1 <= I <= N") from None
    PART = "strom"
if PART not in ("", "kafka", "strom"):
    raise pytest.UsageError(f"STROM_COMPAT_PART={PART!r}: expected kafka, strom, strom:I/N or nothing")

# After this many consecutive *slow* failures (over SLOW_S each) of one client against one
# broker, that pair's remaining tests fail at once instead of each waiting for its own
# timeouts: a broker that hangs one client would otherwise keep the suite busy for hours.
# They fail, they are not skipped; fast failures and other clients are unaffected.
CIRCUIT_LIMIT = int(os.environ.get("STROM_COMPAT_CIRCUIT_LIMIT", "4"))
SLOW_S = 20.0
_consecutive_failures: dict[tuple[str, str | None], int] = {}


def _ready_check(b: brokers.BrokerProcess) -> None:
    """The port is open; wait until the broker answers Metadata with itself in it."""
    from confluent_kafka.admin import AdminClient

    a = AdminClient({"bootstrap.servers": b.bootstrap})

    def answered():
        try:
            md = a.list_topics(timeout=2)
        except Exception:  # noqa: BLE001 - any failure means "not yet"
            return False
        return bool(md.brokers)

    admin.wait_for(answered, f"{b.name} at {b.bootstrap} to answer Metadata", timeout_s=60)


def secured_broker(kind: str, security: dict):
    """A Strom or Kafka broker (`kind`) with `security`'s listeners and settings
    (`brokers.security_listeners`), checked ready, stopped after: a module fixture does
    `yield from secured_broker(request.param, {...})`."""
    start = brokers.start_strom if kind == "strom" else brokers.start_kafka
    b = start(security=security)
    try:
        _ready_check(b)
        yield b
    finally:
        b.cleanup()


def _session_broker(start):
    b = start()
    try:
        _ready_check(b)
    except BaseException:
        print(f"--- {b.name} log tail ---\n{b.log_tail()}", file=sys.stderr)
        b.cleanup()
        raise
    return b


@pytest.fixture(scope="session")
def strom_broker():
    b = _session_broker(brokers.start_strom)
    yield b
    b.cleanup()


@pytest.fixture(scope="session")
def kafka_broker():
    b = _session_broker(brokers.start_kafka)
    yield b
    b.cleanup()


def _circuit_key(item) -> tuple[str, str | None] | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None or "broker" not in callspec.params:
        return None
    return callspec.params["broker"], callspec.params.get("client")


@pytest.fixture(params=BROKERS)
def broker(request) -> brokers.BrokerProcess:
    name = request.param
    key = _circuit_key(request.node)
    if key and _consecutive_failures.get(key, 0) >= CIRCUIT_LIMIT:
        pytest.fail(
            f"{key[0]}/{key[1] or 'any client'}: {CIRCUIT_LIMIT} consecutive slow failures before this test; "
            "not running it (see the first failures)"
        )
    b = request.getfixturevalue(f"{name}_broker")
    if not b.alive():
        pytest.fail(f"{name} broker has exited (code {b.proc.returncode}); log tail:\n{b.log_tail()}")
    yield b
    if not b.alive():
        pytest.fail(f"{name} broker exited during the test (code {b.proc.returncode}); log tail:\n{b.log_tail()}")


@pytest.fixture
def records() -> int:
    return RECORDS


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    key = _circuit_key(item)
    if key is None or rep.when != "call":
        return
    if rep.passed:
        _consecutive_failures[key] = 0
    elif rep.failed and rep.duration > SLOW_S:
        _consecutive_failures[key] = _consecutive_failures.get(key, 0) + 1


# pytest-timeout's signal method fails a hung test and lets fixtures stop the brokers, but
# its SIGALRM handler cannot run while the main thread is stuck inside C code (a client
# library's blocking close, say). This watchdog is the backstop: WATCHDOG_GRACE_S after a
# test's timeout it prints every thread's stack and ends pytest; the brokers, started with
# PR_SET_PDEATHSIG, die with it.
WATCHDOG_GRACE_S = 300.0  # beyond the timeout; a session fixture may start a JVM first


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    import faulthandler
    import threading

    marker = item.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker and marker.args else float(item.config.getini("timeout") or 0)
    timer = None
    if limit > 0:

        def fire():
            sys.stderr.write(
                f"\n*** watchdog: {item.nodeid} still running {limit + WATCHDOG_GRACE_S:.0f}s after start; "
                "its timeout did not stop it. Stacks:\n"
            )
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            sys.stderr.flush()
            os._exit(3)

        timer = threading.Timer(limit + WATCHDOG_GRACE_S, fire)
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()


def pytest_report_header(config):
    part = f" part={PART}" + (f":{SHARE[0]}/{SHARE[1]}" if SHARE else "") if PART else ""
    return [f"strom-compat: brokers={','.join(BROKERS)}{part} records={RECORDS} strom_bin={brokers.STROM_BIN}"]


def _kafka_side(item) -> bool:
    """A test parametrized with the Kafka broker, by `broker` or a module's own fixture."""
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(isinstance(v, str) and v == "kafka" for v in callspec.params.values())


def _share(items, i: int, n: int) -> set[str]:
    """The modules of share `i` of `n`: whole modules (their module brokers start once), the
    biggest first, each to the share with the fewest tests so far. Every process collects
    the same items, so the shares are disjoint and cover all."""
    by_module: dict[str, int] = {}
    for item in items:
        by_module[item.module.__name__] = by_module.get(item.module.__name__, 0) + 1
    load = [0] * n
    mine = set()
    for module, count in sorted(by_module.items(), key=lambda kv: (-kv[1], kv[0])):
        k = load.index(min(load))
        load[k] += count
        if k == i - 1:
            mine.add(module)
    return mine


def pytest_collection_modifyitems(config, items):
    if not PART:
        return
    keep = [item for item in items if _kafka_side(item) == (PART == "kafka")]
    if SHARE is not None:
        mine = _share(keep, *SHARE)
        keep = [item for item in keep if item.module.__name__ in mine]
    kept = set(map(id, keep))
    dropped = [item for item in items if id(item) not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep
