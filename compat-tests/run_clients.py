"""Run the other languages' client suites (Java, Go, Node, Rust) against `strom serve` and
against Apache Kafka 4.x, both brokers at once (`_run_beside`: the Kafka side in a child
process, its output printed after). Started by compat-tests/run-clients.sh.

For each broker it starts a fresh process on free 127.0.0.1 ports (compat-tests/python/
brokers.py, the same helper the pytest suite uses), waits until it answers Metadata,
runs each language's tests with STROM_COMPAT_BOOTSTRAP=127.0.0.1:PORT and
STROM_COMPAT_BROKER=strom|kafka, then stops it by its PID. Each broker also has an SSL
listener (client certificate required) and a SASL_SSL one (SCRAM-SHA-512), configured
alike on both, with certificates made per run: the suites' security tests find them in
STROM_COMPAT_SSL_BOOTSTRAP, STROM_COMPAT_SASL_SSL_BOOTSTRAP, STROM_COMPAT_CA,
STROM_COMPAT_CLIENT_CERT / _KEY / _KEYSTORE (key + certificate PEM), STROM_COMPAT_SASL_USER
and STROM_COMPAT_SASL_PASSWORD (`security_env`). Every step is bounded in time.
The exit code is 0 only if every (broker, language) pair passed and the broker survived.

Environment:
  STROM_COMPAT_BROKERS         brokers (default "strom,kafka")
  STROM_COMPAT_CLIENTS         languages (default "java,go,franz-go,node,rust"; franz-go is
                               franz-go's own kgo test suite, KGO below)
  STROM_COMPAT_CLIENT_RECORDS  records per produce/consume test (default 2000)
  STROM_COMPAT_CLIENT_TIMEOUT  seconds per (broker, language) run (default 900)
  STROM_COMPAT_CLIENTS_SERIAL=1  one broker after the other
  STROM_COMPAT_CLIENTS_BUILD_ONLY=1  build the suites and stop (scripts/test-all.sh runs
                               that in the background while the connectors and compat
                               phases wait on servers; the clients phase then finds the
                               builds done)
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "python"))

import brokers  # noqa: E402
import pki  # noqa: E402

TIMEOUT_S = int(os.environ.get("STROM_COMPAT_CLIENT_TIMEOUT", "900"))


def _go_count(out: str) -> str:
    passed = len(re.findall(r"^\s*--- PASS", out, re.M))
    failed = len(re.findall(r"^\s*--- FAIL", out, re.M))
    return f"{passed} passed, {failed} failed (tests and subtests)"


def _java_count(out: str) -> str:
    m = re.findall(r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)\s*$", out, re.M)
    if not m:
        return "no surefire summary"
    run, fail, err, skip = (int(x) for x in m[-1])
    return f"{run - fail - err - skip} passed, {fail + err} failed, {skip} skipped"


def _node_count(out: str) -> str:
    def num(name: str) -> int:
        m = re.search(rf"^\S*\s*{name} (\d+)", out, re.M)
        return int(m.group(1)) if m else -1

    return f"{num('pass')} passed, {num('fail')} failed, {num('skipped')} skipped"


def _rust_count(out: str) -> str:
    passed = failed = 0
    for p, f in re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed", out):
        passed += int(p)
        failed += int(f)
    return f"{passed} passed, {failed} failed"


# franz-go's own integration suite: the kgo package of the version compat-tests/go/go.mod pins,
# run from the module cache against the broker (KGO_SEEDS). Its producer, consumer, group
# (classic and KIP-848, regex included) and transaction tests; RF 1 (one broker), 10k records
# per ETL test instead of its 500k (those tests are most of its time: 50k took 103 s on Strom,
# 127 s on Kafka). Its share group tests skip on a broker below ShareFetch v2 (Strom), its
# SCRAM/OAuth ones without their seeds.
KGO = "github.com/twmb/franz-go/pkg/kgo"
KGO_ENV = 'KGO_SEEDS="$STROM_COMPAT_BOOTSTRAP" KGO_TEST_RF=1 KGO_TEST_RECORDS=10000'

# language -> (directory, build command, test command, result counter)
LANGUAGES = {
    "java": (
        "java",
        ["mvn", "-q", "-B", "test-compile"],
        ["mvn", "-B", "--no-transfer-progress", "surefire:test"],
        _java_count,
    ),
    "go": (
        "go",
        ["go", "test", "-count=1", "-run", "^$", "./..."],
        ["go", "test", "-count=1", "-v", f"-timeout={TIMEOUT_S - 30}s", "./..."],
        _go_count,
    ),
    "franz-go": (
        "go",
        ["go", "test", "-count=1", "-run", "^$", KGO],
        ["bash", "-c", f"{KGO_ENV} exec go test -count=1 -v -timeout={TIMEOUT_S - 30}s {KGO}"],
        _go_count,
    ),
    "node": (
        "node",
        # npm ci when node_modules is missing (scripts/test-all.sh runs it when the lock changes).
        ["bash", "-c", "[[ -d node_modules/kafkajs ]] || npm ci --no-audit --no-fund; node --check test/kafkajs.test.js && node --check test/security.test.js"],
        ["node", "--test", "--test-reporter=spec", "test/kafkajs.test.js", "test/security.test.js"],
        _node_count,
    ),
    "rust": (
        "rust",
        ["cargo", "test", "--release", "--no-run", "--quiet"],
        ["cargo", "test", "--release", "--quiet", "--", "--test-threads=2"],
        _rust_count,
    ),
}


def log(msg: str) -> None:
    print(f"\n--> {msg}", flush=True)


def run(cmd: list[str], cwd: Path, env: dict, timeout_s: int) -> tuple[int, str]:
    """Runs cmd in its own process group, streaming its output and keeping a copy; on
    timeout the whole group gets SIGTERM, then SIGKILL."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        return _pump(proc, cmd, timeout_s)
    finally:
        # Also on SIGTERM/Ctrl-C of this driver: the test run is in its own session, so
        # nothing else would stop it.
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _pump(proc: subprocess.Popen, cmd: list[str], timeout_s: int) -> tuple[int, str]:
    out: list[str] = []
    deadline = time.monotonic() + timeout_s
    timed_out = False
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    buf = b""
    while True:
        chunk = None
        try:
            chunk = proc.stdout.read()
        except BlockingIOError:
            pass
        if chunk:
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                s = line.decode(errors="replace")
                out.append(s)
                print(s, flush=True)
        elif proc.poll() is not None and not chunk:
            break
        if time.monotonic() > deadline and not timed_out:
            timed_out = True
            print(f"!!! {' '.join(cmd)} exceeded {timeout_s}s: stopping its process group {proc.pid}", flush=True)
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.05)
    if buf:
        out.append(buf.decode(errors="replace"))
        print(out[-1], flush=True)
    rc = proc.wait()
    return (124 if timed_out else rc), "\n".join(out)


SASL_USER, SASL_PASSWORD = "alice", "alice-secret"


def security(certs) -> dict:
    """Besides PLAINTEXT, an SSL listener that requires a client certificate and a SASL_SSL
    one with SCRAM-SHA-512 (user alice), the same on both brokers (Kafka's names); the
    certificates are made per run (python/pki.py)."""
    return {
        "listeners": ["SSL", "SASL_SSL"],
        "settings": {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certs.keystore("broker"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certs.ca,
            "ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        },
        "kafka_settings": {
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            # ShareGroupsCompatTest sets 2 s locks on its groups; Kafka's floor is 15 s.
            "group.share.min.record.lock.duration.ms": "1000",
        },
        "users": [(SASL_USER, SASL_PASSWORD, "SCRAM-SHA-512")],
    }


def security_env(b: brokers.BrokerProcess, certs) -> dict:
    """What the suites' security tests connect with (each suite's README names them)."""
    ports = b.extra["ports"]
    return {
        "STROM_COMPAT_SSL_BOOTSTRAP": f"127.0.0.1:{ports['SSL']}",
        "STROM_COMPAT_SASL_SSL_BOOTSTRAP": f"127.0.0.1:{ports['SASL_SSL']}",
        "STROM_COMPAT_CA": certs.ca,
        "STROM_COMPAT_CLIENT_CERT": certs.cert("alice"),
        "STROM_COMPAT_CLIENT_KEY": certs.key("alice"),
        "STROM_COMPAT_CLIENT_KEYSTORE": certs.keystore("alice"),
        "STROM_COMPAT_SASL_USER": SASL_USER,
        "STROM_COMPAT_SASL_PASSWORD": SASL_PASSWORD,
    }


def start(name: str, certs) -> brokers.BrokerProcess:
    sec = security(certs)
    b = brokers.start_strom(security=sec) if name == "strom" else brokers.start_kafka(security=sec)
    deadline = time.monotonic() + 60
    while not brokers.metadata_answers(b.port):
        if time.monotonic() > deadline or not b.alive():
            tail = b.log_tail()
            b.cleanup()
            raise brokers.BrokerStartError(f"{name} never answered Metadata; log tail:\n{tail}")
        time.sleep(0.5)
    return b


def _terminate(signum, _frame):
    # Unwind through the finally blocks: the running test group is killed, the broker stopped.
    raise SystemExit(128 + signum)


def main() -> int:
    signal.signal(signal.SIGTERM, _terminate)
    broker_names = [b.strip() for b in os.environ.get("STROM_COMPAT_BROKERS", "strom,kafka").split(",") if b.strip()]
    langs = sys.argv[1:] or [x.strip() for x in os.environ.get("STROM_COMPAT_CLIENTS", "java,go,franz-go,node,rust").split(",") if x.strip()]
    unknown = [x for x in langs if x not in LANGUAGES]
    if unknown:
        print(f"unknown languages {unknown}; known: {sorted(LANGUAGES)}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    results: list[tuple[str, str, str, int, str]] = []
    build_times: dict[str, int] = {}

    # Build first, so that test timings are test timings and a compile error shows once.
    for lang in langs:
        d, build, test, _ = LANGUAGES[lang]
        tool = test[0]
        if shutil.which(tool) is None:
            results.append(("-", lang, "FAIL", 0, f"{tool} not installed"))
            continue
        if os.environ.get("STROM_COMPAT_CLIENTS_SKIP_BUILD") == "1":
            continue  # built by the parent run (`_run_beside`)
        log(f"build {lang}: {' '.join(build)}")
        t0 = time.monotonic()
        rc, _ = run(build, HERE / d, env, TIMEOUT_S)
        build_times[lang] = int(time.monotonic() - t0)
        if rc != 0:
            results.append(("-", lang, "FAIL", build_times[lang], f"build failed (exit {rc})"))
    built = [lang for lang in langs if not any(r[1] == lang for r in results)]
    if os.environ.get("STROM_COMPAT_CLIENTS_BUILD_ONLY") == "1":
        log("client builds: " + ", ".join(f"{lang} {t}s" for lang, t in build_times.items()))
        return 0 if len(built) == len(langs) else 1

    beside = len(broker_names) > 1 and os.environ.get("STROM_COMPAT_CLIENTS_SERIAL") != "1" and not results
    pki_dir = Path(tempfile.mkdtemp(prefix="strom-compat-clients-pki-"))
    try:
        certs = pki.make(pki_dir)
        if beside:
            return _run_beside(broker_names, built, env, results, build_times, certs)
        return _run_brokers(broker_names, built, env, results, build_times, certs)
    finally:
        shutil.rmtree(pki_dir, ignore_errors=True)


def _run_beside(broker_names, built, env, results, build_times, certs) -> int:
    """The first broker's runs here, each other broker's in a child run_clients.py at the same
    time (its own broker, certificates and ports; its output printed after this one's, whole).
    The suites mostly wait on a broker, a timer or a JVM, not on the two cores: run one broker
    after the other, this phase took the sum of both."""
    children = []
    try:
        for name in broker_names[1:]:
            out = tempfile.TemporaryFile()
            env = dict(os.environ, STROM_COMPAT_BROKERS=name, STROM_COMPAT_CLIENTS_SKIP_BUILD="1")
            proc = subprocess.Popen([sys.executable, "-u", __file__, *built], env=env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            children.append((name, proc, out))
        rc = _run_brokers(broker_names[:1], built, env, results, build_times, certs)
        # Each child bounds its own steps (TIMEOUT_S each); this bounds the child as a whole.
        bound = TIMEOUT_S * (len(built) + 1)
        for name, proc, out in children:
            try:
                code = proc.wait(timeout=bound)
            except subprocess.TimeoutExpired:
                print(f"!!! the {name} run exceeded {bound}s: stopping it", flush=True)
                proc.terminate()
                code = proc.wait(timeout=120)
            out.seek(0)
            log(f"the {name} run, beside the one above (exit {code}):")
            sys.stdout.write(out.read().decode(errors="replace"))
            sys.stdout.flush()
            if code != 0:
                rc = rc or code
        return rc
    finally:
        # SIGTERM here (CI's bound): each child unwinds as this process does, stopping its
        # broker and its running suite.
        for _, proc, out in children:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
            out.close()


def _run_brokers(broker_names, built, env, results, build_times, certs) -> int:
    for name in broker_names:
        log(f"start {name}")
        try:
            b = start(name, certs)
        except Exception as e:  # noqa: BLE001 - reported as a failure of every language
            print(e, flush=True)
            results.extend((name, lang, "FAIL", 0, "broker did not start") for lang in built)
            continue
        print(f"{name} pid {b.proc.pid} at {b.bootstrap}", flush=True)
        try:
            for lang in built:
                d, _, test, count = LANGUAGES[lang]
                env_b = dict(env, STROM_COMPAT_BOOTSTRAP=b.bootstrap, STROM_COMPAT_BROKER=name,
                             **security_env(b, certs))
                log(f"{lang} against {name} ({b.bootstrap}): {' '.join(test)}")
                t0 = time.monotonic()
                rc, out = run(test, HERE / d, env_b, TIMEOUT_S)
                took = int(time.monotonic() - t0)
                status = "ok" if rc == 0 else "FAIL"
                detail = count(out) + ("" if rc == 0 else f"; exit {rc}")
                if not b.alive():
                    status, detail = "FAIL", f"{name} exited (code {b.proc.returncode}) during the run; {detail}"
                    print(b.log_tail(), flush=True)
                results.append((name, lang, status, took, detail))
                if not b.alive():
                    break
        finally:
            code = b.stop()
            print(f"{name} stopped (exit {code})", flush=True)
            if any(r[0] == name and r[2] != "ok" for r in results):
                print(f"--- {name} log tail ---\n{b.log_tail(30)}", flush=True)
            b.cleanup()

    log("client compat summary")
    print("    build  " + ", ".join(f"{lang} {t}s" for lang, t in build_times.items()))
    for name, lang, status, took, detail in results:
        print(f"    {name:6} {lang:8} {status:4} {took:5}s  {detail}")
    ok = all(r[2] == "ok" for r in results) and len(results) == len(built) * len(broker_names)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
