"""SASL/OAUTHBEARER with confluent-kafka (librdkafka's `oauth_cb` handing it tokens this test
signs), against Strom and Apache Kafka 4.4 configured alike: a SASL_SSL listener with only
OAUTHBEARER, tokens checked against a JWKS file (`sasl.oauthbearer.jwks.endpoint.url`
file://, Kafka's OAuthBearerValidatorCallbackHandler with the URL allowed by the
`org.apache.kafka.sasl.oauthbearer.allowed.urls` system property), an expected audience and
issuer. RS256 and ES256 tokens get in and produce and consume; an expired, an unsigned
(`alg: none`), a wrong-audience and a wrong-issuer token are refused by both with Kafka's
answer (`{"status":"invalid_token"}`) and nothing is written.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import clients
import jwt_tokens
import pki
from conftest import BROKERS, secured_broker

pytestmark = pytest.mark.timeout(300)

AUDIENCE = "strom-compat"
ISSUER = "https://idp.compat.test"
INVALID_TOKEN = '{"status":"invalid_token"}'


@pytest.fixture(scope="module")
def material():
    d = Path(tempfile.mkdtemp(prefix="strom-compat-oauth-"))
    yield pki.make(d), jwt_tokens.make(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module", params=BROKERS)
def oauth_broker(request, material):
    certs, keys = material
    security = {
        "listeners": ["SASL_SSL"],
        # Kafka's names; both brokers take them as they are.
        "settings": {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certs.keystore("broker"),
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.jwks.endpoint.url": keys.jwks_url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
        },
        # Kafka needs the login module and the validating callback handler per listener
        # (without the handler it uses its unsecured one, which takes unsigned tokens).
        "kafka_settings": {
            "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        },
        "kafka_jvm": [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={keys.jwks_url}"],
    }
    yield from secured_broker(request.param, security)


def sasl_bootstrap(b) -> str:
    return f"127.0.0.1:{b.extra['ports']['SASL_SSL']}"


def conf(b, certs, token: str, errors: list | None = None) -> dict:
    """confluent-kafka over SASL_SSL with OAUTHBEARER; `oauth_cb` returns `token`. The
    lifetime given to librdkafka is its own (it refuses an expired one before sending), so
    an expired JWT still reaches the broker."""
    c = {
        "bootstrap.servers": sasl_bootstrap(b),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": certs.ca,
        "sasl.mechanisms": "OAUTHBEARER",
        "oauth_cb": lambda _cfg: (token, time.time() + 3600, "alice", {}),
    }
    if errors is not None:
        c["error_cb"] = lambda e: errors.append(str(e))
    return c




def create_topic(b, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic(topic, 1)])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while clients.end_offset(b.bootstrap, topic) != 0 and time.monotonic() < deadline:
        time.sleep(0.2)


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_a_good_token_produces_and_consumes(oauth_broker, material, alg):
    from confluent_kafka import Consumer, Producer, TopicPartition

    certs, keys = material
    key = keys.rs256 if alg == "RS256" else keys.es256
    token = key.sign(jwt_tokens.claims("alice", AUDIENCE, ISSUER))
    topic = f"oauth-{alg}-{uuid.uuid4().hex[:8]}"
    create_topic(oauth_broker, topic)
    recs = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(50)]
    p = Producer(conf(oauth_broker, certs, token))
    for k, v in recs:
        p.produce(topic, key=k, value=v)
    assert p.flush(30) == 0
    c = Consumer({**conf(oauth_broker, certs, token), "group.id": f"g-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(recs) and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append((m.key(), m.value()))
    c.close()
    assert got == recs
    assert clients.end_offset(oauth_broker.bootstrap, topic) == len(recs)


def bad_tokens(keys) -> dict:
    good = jwt_tokens.claims("alice", AUDIENCE, ISSUER)
    now = int(time.time())
    return {
        "expired": keys.rs256.sign({**good, "iat": now - 7200, "exp": now - 3600}),
        "unsigned": jwt_tokens.unsigned(good),
        "wrong-audience": keys.es256.sign({**good, "aud": "someone-else"}),
        "wrong-issuer": keys.rs256.sign({**good, "iss": "https://evil.test"}),
    }


@pytest.mark.parametrize("case", ["expired", "unsigned", "wrong-audience", "wrong-issuer"])
def test_a_bad_token_is_refused_with_kafkas_answer_and_nothing_is_written(oauth_broker, material, case):
    from confluent_kafka import Producer

    certs, keys = material
    topic = f"oauth-bad-{case}-{uuid.uuid4().hex[:8]}"
    create_topic(oauth_broker, topic)
    errors: list[str] = []
    p = Producer({**conf(oauth_broker, certs, bad_tokens(keys)[case], errors), "message.timeout.ms": 5000})
    for i in range(3):
        p.produce(topic, key=b"k", value=f"v{i}".encode())
    # librdkafka passes the SaslAuthenticate error message to the error callback.
    deadline = time.monotonic() + 20
    while not any(INVALID_TOKEN in e for e in errors) and time.monotonic() < deadline:
        p.poll(0.2)
    p.purge()
    p.flush(5)
    assert any(INVALID_TOKEN in e for e in errors), errors
    assert clients.end_offset(oauth_broker.bootstrap, topic) == 0
