"""The web console (`/console` on the admin port) in a real browser: headless Chromium
(Debian's `chromium` + `chromium-driver`, driven by selenium) against a real `strom serve`
with real data. Each page renders; the message browser shows the produced records and seeks
by offset, time and key; a group's lag moves after consuming; an offset reset (confirmed in
the dialog) works. Screenshots of every step go to target/console-screenshots/ (not
committed), as the run's artefacts.

Strom only: Apache Kafka has no console of its own to compare with.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

import brokers
from test_cli import create, js, strom

CHROMIUM = os.environ.get("STROM_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("STROM_CHROMEDRIVER", "/usr/bin/chromedriver")
SHOTS = brokers.REPO_ROOT / "target" / "console-screenshots"
WAIT_S = 30


@pytest.fixture(scope="module")
def browser():
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not Path(exe).is_file():
            pytest.fail(f"{exe} missing: apt-get install chromium chromium-driver (scripts/test-all.sh setup does)")
    os.environ["SE_OFFLINE"] = "true"  # selenium must never try to download a browser/driver
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="strom-console-chromium-")
    opts = Options()
    opts.binary_location = CHROMIUM
    for a in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,1100"]:
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(WAIT_S)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def base(b) -> str:
    return f"http://127.0.0.1:{b.extra['metrics_port']}"


def until(driver, cond, what: str):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.2).until(lambda d: cond(d), message=f"waiting for {what}")


def open_page(driver, b, hash_: str, shot: str):
    from selenium.webdriver.common.by import By

    driver.get(f"{base(b)}/console/#{hash_}")
    # A hash change on the same document does not reload: route() runs on hashchange.
    until(driver, lambda d: d.find_element(By.ID, "app").get_attribute("data-loaded") == "true"
          and d.execute_script("return location.hash") == f"#{hash_}", f"page {hash_}")
    errors = driver.find_elements(By.CSS_SELECTOR, "[data-test=error]")
    assert not errors, f"{hash_}: {errors[0].text}"
    driver.save_screenshot(str(SHOTS / f"{shot}.png"))


def reload(driver, b, hash_: str, shot: str):
    driver.get("about:blank")
    open_page(driver, b, hash_, shot)


def test_console_pages_messages_lag_and_offset_reset(strom_broker, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    b, d = strom_broker, browser
    t, g = f"console-{uuid.uuid4().hex[:6]}", f"console-g-{uuid.uuid4().hex[:6]}"
    create(b, t, 2)
    lines = "".join(f"user-{i % 3}\t{json.dumps({'n': i, 'text': f'hello {i}'})}\n" for i in range(12))
    strom(b, "produce", t, "-p", "0", "-f", "%k\\t%v\\n", "-H", "origin=console-test", "-o", "none", input=lines)
    strom(b, "produce", t, "-p", "1", "-o", "none", input="p1-a\np1-b\n")

    # The assets are served by the broker itself.
    with urllib.request.urlopen(f"{base(b)}/console/app.js", timeout=10) as r:
        assert r.status == 200 and "javascript" in r.headers["content-type"]

    # Overview: counts from the cluster, sparklines filling from /metrics.
    open_page(d, b, "/", "01-overview")
    assert d.find_element(By.CSS_SELECTOR, "[data-test=brokers]").text == "1"
    assert int(d.find_element(By.CSS_SELECTOR, "[data-test=topics]").text) >= 1
    until(d, lambda d: int(d.find_element(By.CSS_SELECTOR, "[data-spark=produced]").get_attribute("data-points") or 0) >= 2,
          "two throughput samples")
    d.save_screenshot(str(SHOTS / "02-overview-sparklines.png"))

    # Topics: the list links to the topic; its page shows partitions with offsets.
    open_page(d, b, "/topics", "03-topics")
    d.find_element(By.CSS_SELECTOR, f"tr[data-topic='{t}'] a").click()
    until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-test=topic-name]")
          and d.find_element(By.CSS_SELECTOR, "[data-test=topic-name]").text == t, "topic page")
    until(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#mb-results tr[data-offset]")) == 12, "the browser's first page")
    rows = d.find_elements(By.CSS_SELECTOR, "[data-test=partitions] tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[5].text for r in rows] == ["12", "2"]
    first = d.find_element(By.CSS_SELECTOR, "#mb-results tr[data-offset='0']").text
    assert "user-0" in first and '"text": "hello 0"' in first and "origin=console-test" in first
    d.save_screenshot(str(SHOTS / "04-topic-messages.png"))

    # Seek by offset, then search by key, then decode as JSON, then the other partition.
    offset = d.find_element(By.ID, "mb-offset")
    offset.clear()
    offset.send_keys("7")
    d.find_element(By.ID, "mb-go").click()
    until(d, lambda d: [r.get_attribute("data-offset") for r in d.find_elements(By.CSS_SELECTOR, "#mb-results tr[data-offset]")][:1] == ["7"], "seek to 7")
    offset.clear()
    offset.send_keys("start")
    d.find_element(By.ID, "mb-key").send_keys("user-1")
    Select(d.find_element(By.ID, "mb-decode")).select_by_value("json")
    d.find_element(By.ID, "mb-go").click()
    until(d, lambda d: [r.get_attribute("data-offset") for r in d.find_elements(By.CSS_SELECTOR, "#mb-results tr[data-offset]")] == ["1", "4", "7", "10"], "key search")
    assert '"text": "hello 4"' in d.find_element(By.CSS_SELECTOR, "#mb-results tr[data-offset='4']").text
    d.save_screenshot(str(SHOTS / "05-topic-key-search-json.png"))
    d.find_element(By.ID, "mb-key").clear()
    Select(d.find_element(By.ID, "mb-partition")).select_by_value("1")
    d.find_element(By.ID, "mb-go").click()
    until(d, lambda d: "p1-b" in d.find_element(By.ID, "mb-results").text, "partition 1")

    # Seek by time: every record is older than now + 1 minute, so nothing is after it.
    later = int(time.time() * 1000) + 60_000
    offset.clear()
    offset.send_keys(f"@{later}")
    d.find_element(By.ID, "mb-go").click()
    until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#mb-results [data-test=no-messages]"), "empty page past the end")

    # A group on a one-partition topic of 10 records reads 4: lag 6.
    t1 = f"{t}-lag"
    create(b, t1, 1)
    strom(b, "produce", t1, "-o", "none", input="".join(f"m{i}\n" for i in range(10)))
    strom(b, "consume", t1, "-g", g, "-n", "4", timeout=90)
    assert js(b, "group", "describe", g)[0]["total_lag"] == 6
    open_page(d, b, "/groups", "06-groups")
    d.find_element(By.CSS_SELECTOR, f"tr[data-group='{g}'] a").click()
    until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-test=total-lag]"), "group page")
    assert d.find_element(By.CSS_SELECTOR, "[data-test=total-lag]").text == "6"
    assert len(d.find_elements(By.CSS_SELECTOR, "svg[data-test=lag-chart] rect")) == 1
    lag_cell = d.find_element(By.CSS_SELECTOR, f"tr[data-partition='{t1}/0'] [data-test=lag]")
    assert lag_cell.text == "6"
    d.save_screenshot(str(SHOTS / "07-group-lag.png"))

    # Consuming moves the lag.
    strom(b, "consume", t1, "-g", g, "-n", "3", timeout=90)
    reload(d, b, f"/groups/{g}", "08-group-lag-after-consuming")
    assert d.find_element(By.CSS_SELECTOR, "[data-test=total-lag]").text == "3"

    # Reset to the start, confirmed in the dialog: the lag is every record again.
    to = d.find_element(By.ID, "seek-to")
    to.clear()
    to.send_keys("start")
    d.find_element(By.ID, "seek-go").click()
    until(d, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None, "the confirmation dialog")
    assert g in d.find_element(By.ID, "confirm-text").text
    d.save_screenshot(str(SHOTS / "09-offset-reset-confirm.png"))
    d.find_element(By.ID, "confirm-ok").click()
    until(d, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-test=seek-ok]"), "reset done")
    reload(d, b, f"/groups/{g}", "10-group-after-reset")
    assert d.find_element(By.CSS_SELECTOR, "[data-test=total-lag]").text == "10"
    assert js(b, "group", "describe", g)[0]["total_lag"] == 10

    # Connectors (none in this broker) and health.
    open_page(d, b, "/connectors", "11-connectors")
    assert d.find_elements(By.CSS_SELECTOR, "[data-test=no-connectors]")
    open_page(d, b, "/health", "12-health")
    assert d.find_element(By.CSS_SELECTOR, "[data-test=healthy]").text == "healthy"


def messages_api(b, topic: str) -> list[dict]:
    with urllib.request.urlopen(f"{base(b)}/api/v1/topics/{topic}/messages?partition=0&offset=start", timeout=10) as r:
        return json.loads(r.read())["messages"]


def test_console_decodes_records_through_the_schema_registry(strom_broker, browser):
    """Keys and values in the registry's wire format are shown as their schema reads them:
    Avro (in the browser), Protobuf with a reference, JSON Schema; an unknown id and a payload
    its schema cannot read are named, and plain records stay text."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from selenium.webdriver.common.by import By

    from test_schema_registry import USER_V1, build_protobuf_classes

    b, d = strom_broker, browser
    client = SchemaRegistryClient({"url": f"http://127.0.0.1:{b.extra['schema_registry_port']}"})
    run = uuid.uuid4().hex[:6]
    avro_t, proto_t, json_t = f"console-avro-{run}", f"console-proto-{run}", f"console-json-{run}"
    for t in (avro_t, proto_t, json_t):
        create(b, t, 1)
    value = lambda t: SerializationContext(t, MessageField.VALUE)  # noqa: E731
    key_ser = AvroSerializer(client, json.dumps({"type": "string"}))
    avro = AvroSerializer(client, json.dumps(USER_V1))
    Order = build_protobuf_classes()
    proto = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
    doc_schema = {"type": "object", "title": "Doc", "properties": {"text": {"type": "string"}, "n": {"type": "integer"}}}
    jser = JSONSerializer(json.dumps(doc_schema), client)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(3):
        p.produce(avro_t, partition=0, key=key_ser(f"user-{i}", SerializationContext(avro_t, MessageField.KEY)),
                  value=avro({"id": i, "name": f"user {i}"}, value(avro_t)))
    avro_id = client.get_latest_version(f"{avro_t}-value").schema_id
    # A wire-format header with an id nobody registered, and a known id with a torn payload.
    p.produce(avro_t, partition=0, value=b"\x00" + (10_000_000).to_bytes(4, "big") + b"junk")
    p.produce(avro_t, partition=0, value=b"\x00" + avro_id.to_bytes(4, "big") + b"\xff")
    p.produce(avro_t, partition=0, value=b"plain text")
    p.produce(proto_t, partition=0, value=proto(Order(id="o1", price={"units": 5, "currency": "EUR"}, tags=["a", "b"]), value(proto_t)))
    p.produce(json_t, partition=0, value=jser({"text": "hello", "n": 3}, value(json_t)))
    assert p.flush(30) == 0

    got = messages_api(b, avro_t)
    assert [m["value_schema"]["json"] for m in got[:3]] == [{"id": i, "name": f"user {i}"} for i in range(3)]
    assert {m["value_schema"]["schema_type"] for m in got[:3]} == {"AVRO"}
    assert got[0]["value_schema"]["schema_id"] == avro_id and got[0]["value_schema"]["error"] is None
    assert got[1]["key_schema"]["json"] == "user-1"
    unknown, torn, plain = got[3]["value_schema"], got[4]["value_schema"], got[5]
    assert unknown["schema_type"] is None and unknown["json"] is None and "not registered" in unknown["error"], unknown
    assert torn["schema_type"] == "AVRO" and torn["json"] is None and torn["error"], torn
    assert "value_schema" not in plain and plain["value"] == "plain text"
    order = messages_api(b, proto_t)[0]["value_schema"]
    assert order["schema_type"] == "PROTOBUF", order
    assert order["json"]["id"] == "o1" and order["json"]["price"]["currency"] == "EUR" and order["json"]["tags"] == ["a", "b"]
    doc = messages_api(b, json_t)[0]["value_schema"]
    assert (doc["schema_type"], doc["json"]) == ("JSON", {"text": "hello", "n": 3}), doc

    # In the browser: the schema's type and id beside the decoded record.
    open_page(d, b, f"/topics/{avro_t}", "13-topic-messages-registry")
    until(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#mb-results tr[data-offset]")) == 6, "the registry topic's records")
    row = d.find_element(By.CSS_SELECTOR, "#mb-results tr[data-offset='1']")
    assert f"AVRO · id {avro_id}" in row.text and '"name": "user 1"' in row.text and '"user-1"' in row.text, row.text
    assert "not registered" in d.find_element(By.CSS_SELECTOR, "#mb-results tr[data-offset='3']").text
    d.save_screenshot(str(SHOTS / "13-topic-messages-registry.png"))


def test_console_api_errors_are_json_with_kafka_codes(strom_broker):
    import urllib.error

    for path, status, code in [
        (f"/api/v1/topics/no-such-{uuid.uuid4().hex[:6]}", 404, 3),
        ("/api/v1/topics/x/messages?offset=yesterday", 400, None),
    ]:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{base(strom_broker)}{path}", timeout=10)
        assert e.value.code == status
        body = json.loads(e.value.read())
        assert body["error"]["code"] == code and body["error"]["message"], body


# ---------------------------------------------------------------- read-only unless allowed

SEC_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def secured_strom():
    """SCRAM users and Kafka's StandardAuthorizer; only admin is a super user, so the
    console's anonymous requests (User:ANONYMOUS) get what the ACLs give them."""
    from conftest import _ready_check

    b = brokers.start_strom(security={
        "listeners": ["SASL_PLAINTEXT"],
        "settings": {
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        },
        "users": [(u, p, "SCRAM-SHA-512") for u, p in SEC_USERS.items()],
    })
    try:
        _ready_check(b)
        yield b
    finally:
        b.cleanup()


def test_console_is_read_only_unless_the_principal_may_write(secured_strom, browser):
    import requests
    from selenium.webdriver.common.by import By

    b, d = secured_strom, browser
    admin = ["--brokers", f"127.0.0.1:{b.extra['ports']['SASL_PLAINTEXT']}", "--sasl-mechanism", "PLAIN",
             "--user", "admin", "--password", SEC_USERS["admin"]]
    t, g = f"ro-{uuid.uuid4().hex[:6]}", f"ro-g-{uuid.uuid4().hex[:6]}"
    strom(b, "topic", "create", t, "-p", "1", "-r", "1", *admin)
    strom(b, "produce", t, "-o", "none", *admin, input="".join(f"r{i}\n" for i in range(10)))
    strom(b, "consume", t, "-g", g, "-n", "10", *admin)
    # ANONYMOUS may look (DESCRIBE), alice may also commit (READ), bob has nothing.
    strom(b, "acl", "create", "--allow-principal", "User:ANONYMOUS", "--operation", "describe", "--group", g, "--topic", t, *admin)
    strom(b, "acl", "create", "--allow-principal", "alice", "--operation", "read", "--group", g, "--topic", t, *admin)
    url = base(b)

    def session(auth=None):
        r = requests.get(f"{url}/api/v1/session", params={"group": g}, auth=auth, timeout=10)
        assert r.status_code == 200, r.text
        return r.json()

    def seek(auth=None):
        return requests.post(f"{url}/api/v1/groups/{g}/seek", json={"to": "start"}, auth=auth, timeout=30)

    assert session() == {"principal": "User:ANONYMOUS", "authenticated": False, "authorizer": True, "may_write": False}
    r = seek()
    assert r.status_code == 403 and r.json()["error"]["name"] == "GROUP_AUTHORIZATION_FAILED", r.text
    bob = ("bob", SEC_USERS["bob"])
    assert session(bob)["may_write"] is False and session(bob)["principal"] == "User:bob"
    r = seek(bob)
    assert r.status_code == 403, r.text
    assert js(b, "group", "describe", g, *admin)[0]["total_lag"] == 0

    # Wrong credentials: 401 with a Basic challenge; /login challenges until signed in.
    r = requests.get(f"{url}/api/v1/groups", auth=("alice", "wrong"), timeout=10)
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Basic realm="), r.headers
    assert requests.get(f"{url}/login", timeout=10, allow_redirects=False).status_code == 401
    alice = ("alice", SEC_USERS["alice"])
    r = requests.get(f"{url}/login", auth=alice, timeout=10, allow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/console/"
    assert session(alice) == {"principal": "User:alice", "authenticated": True, "authorizer": True, "may_write": True}

    # In the browser, anonymous: the group shows, its reset is offered only after signing in.
    open_page(d, b, f"/groups/{g}", "13-group-read-only")
    assert d.find_element(By.CSS_SELECTOR, "[data-test=read-only]").is_displayed()
    assert d.find_element(By.ID, "seek-go").get_attribute("disabled") is not None
    # Signed in as alice (the browser answers /login's challenge and keeps the credentials).
    d.get(f"http://alice:{SEC_USERS['alice']}@127.0.0.1:{b.extra['metrics_port']}/login")
    reload(d, b, f"/groups/{g}", "14-group-signed-in")
    assert not d.find_elements(By.CSS_SELECTOR, "[data-test=read-only]")
    assert d.find_element(By.ID, "seek-go").get_attribute("disabled") is None

    r = seek(alice)
    assert r.status_code == 200 and [p["new_offset"] for p in r.json()["partitions"]] == [0], r.text
    assert js(b, "group", "describe", g, *admin)[0]["total_lag"] == 10
