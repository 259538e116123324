"""Fixtures: one Strom and one Apache Kafka broker per test session, and `broker`,
parametrized over both, so that every scenario runs against each and differences show
side by side in the test ids (`test_x[strom-...]` next to `test_x[kafka-...]`).

Environment:
  STROM_COMPAT_RECORDS   records per produce/consume test (default 10000; CI may use 100000)
  STROM_COMPAT_BROKERS   comma list of brokers to run against (default "strom,kafka")
  STROM_BIN              the strom binary (default target/release/strom)
  STROM_COMPAT_KEEP_DIRS 1 keeps the brokers' temp dirs (logs, data) for a post-mortem
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

# After this many consecutive failures against one broker, the rest of its tests fail at
# once instead of each waiting for its own timeouts: a broker that is down or hung would
# otherwise keep the suite busy for hours. They fail, they are not skipped.
CIRCUIT_LIMIT = int(os.environ.get("STROM_COMPAT_CIRCUIT_LIMIT", "6"))
_consecutive_failures: dict[str, int] = {}


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


@pytest.fixture(params=BROKERS)
def broker(request) -> brokers.BrokerProcess:
    name = request.param
    if _consecutive_failures.get(name, 0) >= CIRCUIT_LIMIT:
        pytest.fail(f"{name}: {CIRCUIT_LIMIT} consecutive failures before this test; not running it (see the first failures)")
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
    callspec = getattr(item, "callspec", None)
    name = callspec.params.get("broker") if callspec else None
    if name is None:
        return
    if rep.when == "call" or (rep.when == "setup" and rep.failed):
        if rep.failed:
            _consecutive_failures[name] = _consecutive_failures.get(name, 0) + 1
        elif rep.passed and rep.when == "call":
            _consecutive_failures[name] = 0


def pytest_report_header(config):
    return [f"strom-compat: brokers={','.join(BROKERS)} records={RECORDS} strom_bin={brokers.STROM_BIN}"]
