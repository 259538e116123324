"""Listeners, TLS and SASL with real clients, against Strom and Kafka configured alike: a
PLAINTEXT, an SSL (`ssl.client.auth=required`, PEM key store and trust store) and a SASL_SSL
listener (SCRAM-SHA-512; user alice made at format time: `strom user add`, Kafka's
`--add-scram`). Every Python client produces and consumes over SSL with a client certificate
and over SASL_SSL with SCRAM-SHA-512; the ways in that must fail: no client certificate, a
certificate from another CA, a plaintext client on the TLS port, a wrong password, an unknown
user. Each refusal checks that nothing was written. Users added with
AlterUserScramCredentials (what kafka-configs.sh sends) authenticate at once.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import brokers
import clients
import pki
import security_clients as sc
from conftest import BROKERS, secured_broker

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def certs():
    d = Path(tempfile.mkdtemp(prefix="strom-compat-pki-"))
    yield pki.make(d)
    shutil.rmtree(d, ignore_errors=True)


def ssl_settings(p: pki.Pki) -> dict:
    # Kafka's names; both brokers take them as they are.
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": p.keystore("broker"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": p.ca,
        "ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }


ALICE_PASSWORD = "alice-secret"


@pytest.fixture(scope="module", params=BROKERS)
def ssl_broker(request, certs):
    security = {
        "listeners": ["SSL", "SASL_SSL"],
        "settings": ssl_settings(certs),
        # Kafka's brokers need a JAAS entry per mechanism and listener; Strom reads one only
        # for its own credentials as a client of another broker (test_cluster_secured.py).
        "kafka_settings": {
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        },
        "users": [("alice", ALICE_PASSWORD, "SCRAM-SHA-512")],
    }
    yield from secured_broker(request.param, security)


def ssl_bootstrap(b) -> str:
    return f"127.0.0.1:{b.extra['ports']['SSL']}"


def alice(p: pki.Pki) -> sc.Creds:
    return sc.Creds("SSL", ca=p.ca, cert=p.cert("alice"), key=p.key("alice"))




@pytest.mark.parametrize("client", sc.CLIENTS)
def test_ssl_with_client_certificate_produces_and_consumes(ssl_broker, certs, client):
    creds = alice(certs)
    topic = f"sec-ssl-{client}-{uuid.uuid4().hex[:8]}"
    sc.create_topic(ssl_bootstrap(ssl_broker), creds, topic)
    recs = sc.records(200)
    sc.produce(client, ssl_bootstrap(ssl_broker), creds, topic, recs)
    got = sc.consume(client, ssl_bootstrap(ssl_broker), creds, topic, len(recs))
    assert got == recs
    # The PLAINTEXT listener sees the same log.
    assert clients.end_offset(ssl_broker.bootstrap, topic) == len(recs)


@pytest.mark.parametrize("client", sc.CLIENTS)
def test_ssl_without_client_certificate_is_refused_and_nothing_is_written(ssl_broker, certs, client):
    topic = f"sec-nocert-{client}-{uuid.uuid4().hex[:8]}"
    sc.create_topic(ssl_broker.bootstrap, sc.Creds(), topic)
    no_cert = sc.Creds("SSL", ca=certs.ca)
    with pytest.raises(Exception) as e:
        sc.produce(client, ssl_bootstrap(ssl_broker), no_cert, topic, sc.records(3), timeout_s=5)
    assert not isinstance(e.value, AssertionError), e.value
    assert clients.end_offset(ssl_broker.bootstrap, topic) == 0


def test_certificate_from_another_ca_is_refused(ssl_broker, certs):
    from confluent_kafka import KafkaException

    mallory = sc.Creds("SSL", ca=certs.ca, cert=certs.cert("mallory"), key=certs.key("mallory"))
    with pytest.raises(KafkaException):
        sc.metadata(ssl_bootstrap(ssl_broker), mallory, timeout_s=5)


def test_plaintext_client_on_the_tls_port_gets_no_kafka_answer(ssl_broker):
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException):
        sc.metadata(ssl_bootstrap(ssl_broker), sc.Creds(), timeout_s=5)
    # On the wire: an ApiVersions v0 request gets at most a TLS alert, then the close.
    req = bytes.fromhex("00000012" "0012" "0000" "00000001" "0008") + b"compat-1"
    with socket.create_connection(("127.0.0.1", ssl_broker.extra["ports"]["SSL"]), timeout=10) as s:
        s.sendall(req)
        got = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    assert got == b"" or got[0] == 21, got[:16]


def test_metadata_advertises_the_listener_the_client_came_in_on(ssl_broker, certs):
    ports = ssl_broker.extra["ports"]
    over_ssl = sc.metadata(ssl_bootstrap(ssl_broker), alice(certs))
    over_plain = sc.metadata(ssl_broker.bootstrap, sc.Creds())
    assert [b.port for b in over_ssl.brokers.values()] == [ports["SSL"]]
    assert [b.port for b in over_plain.brokers.values()] == [ports["PLAINTEXT"]]



def sasl_bootstrap(b) -> str:
    return f"127.0.0.1:{b.extra['ports']['SASL_SSL']}"


def scram(p: pki.Pki, user: str = "alice", password: str = ALICE_PASSWORD) -> sc.Creds:
    return sc.Creds("SASL_SSL", ca=p.ca, mechanism="SCRAM-SHA-512", user=user, password=password)


@pytest.mark.parametrize("client", sc.CLIENTS)
def test_sasl_ssl_scram_sha_512_produces_and_consumes(ssl_broker, certs, client):
    topic = f"sec-scram-{client}-{uuid.uuid4().hex[:8]}"
    sc.create_topic(sasl_bootstrap(ssl_broker), scram(certs), topic)
    recs = sc.records(200)
    sc.produce(client, sasl_bootstrap(ssl_broker), scram(certs), topic, recs)
    assert sc.consume(client, sasl_bootstrap(ssl_broker), scram(certs), topic, len(recs)) == recs
    assert clients.end_offset(ssl_broker.bootstrap, topic) == len(recs)


@pytest.mark.parametrize("who", ["wrong-password", "unknown-user"])
@pytest.mark.parametrize("client", sc.CLIENTS)
def test_sasl_wrong_password_or_unknown_user_is_refused_and_nothing_is_written(ssl_broker, certs, client, who):
    topic = f"sec-badpw-{client}-{uuid.uuid4().hex[:8]}"
    sc.create_topic(ssl_broker.bootstrap, sc.Creds(), topic)
    creds = scram(certs, password="wrong") if who == "wrong-password" else scram(certs, user="mallory", password="x")
    with pytest.raises(Exception) as e:
        sc.produce(client, sasl_bootstrap(ssl_broker), creds, topic, sc.records(3), timeout_s=5)
    assert not isinstance(e.value, AssertionError), e.value
    assert clients.end_offset(ssl_broker.bootstrap, topic) == 0


@pytest.mark.parametrize("who", ["wrong-password", "unknown-user"])
def test_sasl_failure_message_is_kafkas_and_does_not_tell_whether_the_user_exists(ssl_broker, certs, who):
    """librdkafka passes the broker's SaslAuthenticate error message on to the error
    callback: the same text from both brokers, for both failures."""
    from confluent_kafka.admin import AdminClient

    errors = []
    creds = scram(certs, password="wrong") if who == "wrong-password" else scram(certs, user="mallory", password="x")
    conf = {**sc.confluent_conf(sasl_bootstrap(ssl_broker), creds), "error_cb": lambda e: errors.append(str(e))}
    a = AdminClient(conf)
    with pytest.raises(Exception):
        a.list_topics(timeout=5)
    # The error callback runs from poll(), not from the failed call.
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        a.poll(0.5)
    want = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    assert any(want in e for e in errors), errors


def test_users_added_with_alter_user_scram_credentials_authenticate_at_once(ssl_broker, certs):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    a = AdminClient(sc.confluent_conf(ssl_broker.bootstrap, sc.Creds()))
    user = f"u{uuid.uuid4().hex[:8]}"
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    for f in a.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, b"new-secret")]).values():
        f.result(timeout=30)
    described = a.describe_user_scram_credentials([user])[user].result(timeout=30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    md = sc.metadata(sasl_bootstrap(ssl_broker), scram(certs, user=user, password="new-secret"))
    assert [b.port for b in md.brokers.values()] == [ssl_broker.extra["ports"]["SASL_SSL"]]
    for f in a.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)]).values():
        f.result(timeout=30)
    with pytest.raises(Exception):
        sc.metadata(sasl_bootstrap(ssl_broker), scram(certs, user=user, password="new-secret"), timeout_s=5)
