"""Single Kafka requests over one socket to one chosen broker, encoded and decoded by hand.

The clients pick the broker an admin request goes to themselves (the least loaded one);
a test that must ask one particular node — "does node 2 describe it the same?" — sends the
request here instead. Only the few fixed-layout versions the tests use are encoded.
"""

from __future__ import annotations

import socket
import struct


def raw_call(bootstrap: str, api_key: int, version: int, body: bytes, flexible: bool = False) -> bytes:
    """One request with a v1 header (v2 when `flexible`); returns the response body after the
    correlation id (and, when flexible, starting with the response header's tag byte)."""
    host, port = bootstrap.rsplit(":", 1)
    client = b"strom-compat"
    header = struct.pack(">hhih", api_key, version, 7, len(client)) + client
    if flexible:
        header += b"\x00"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        frame = header + body
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        data = recv_exact(s, size)
    return data[4:]


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


def string(s: str | None) -> bytes:
    """A (nullable) STRING: int16 length, then the bytes; -1 for null."""
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class Reader:
    """Reads a non-flexible response body field by field."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        (v,) = struct.unpack_from(">" + fmt, self.data, self.pos)
        self.pos += struct.calcsize(">" + fmt)
        return v

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def string(self) -> str | None:
        n = self.take("h")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s


TOPIC, BROKER, GROUP = 2, 4, 32


def describe_configs(bootstrap: str, resource_type: int, name: str) -> dict[str, str | None]:
    """DescribeConfigs v1 of one resource at this broker: every config's value."""
    body = struct.pack(">i", 1) + struct.pack(">b", resource_type) + string(name) + struct.pack(">i", -1) + b"\x00"
    r = Reader(raw_call(bootstrap, 32, 1, body))
    r.take("i")  # throttle
    assert r.take("i") == 1, "one result"
    error, message = r.take("h"), r.string()
    assert error == 0, (error, message)
    r.take("b"), r.string()  # resource type and name
    configs = {}
    for _ in range(r.take("i")):
        name, value = r.string(), r.string()
        r.take("b"), r.take("b"), r.take("b")  # read only, source, sensitive
        for _ in range(r.take("i")):  # synonyms
            r.string(), r.string(), r.take("b")
        configs[name] = value
    return configs


def describe_topic_configs(bootstrap: str, topic: str) -> dict[str, str | None]:
    return describe_configs(bootstrap, TOPIC, topic)


def describe_user_quotas(bootstrap: str, user: str) -> dict[str, float]:
    """DescribeClientQuotas v0 at this broker: the quotas of exactly `user=<user>`."""
    component = string("user") + struct.pack(">b", 0) + string(user)  # match type 0: exact
    body = struct.pack(">i", 1) + component + b"\x01"  # strict
    r = Reader(raw_call(bootstrap, 48, 0, body))
    r.take("i")  # throttle
    error, message = r.take("h"), r.string()
    assert error == 0, (error, message)
    values: dict[str, float] = {}
    for _ in range(max(r.take("i"), 0)):
        for _ in range(r.take("i")):
            r.string(), r.string()
        for _ in range(r.take("i")):
            key = r.string()
            values[key] = r.take("d")
    return values


def init_producer_id(bootstrap: str) -> int:
    """InitProducerId v0 without a transactional id: the producer id this broker hands out."""
    r = Reader(raw_call(bootstrap, 22, 0, struct.pack(">hi", -1, 60000)))
    r.take("i")  # throttle
    error = r.take("h")
    assert error == 0, error
    return r.take("q")


def finalized_features(bootstrap: str) -> tuple[int, dict[str, int]]:
    """ApiVersions v3 at this broker: the finalized features' epoch and max levels."""
    name = b"strom-compat"
    body = bytes([len(name) + 1]) + name + b"\x021\x00"  # software name, version "1", no tags
    # ApiVersions answers with a v0 response header even at v3: no header tags to skip.
    r = Reader(raw_call(bootstrap, 18, 3, body, flexible=True))
    assert r.take("h") == 0, "ApiVersions error"
    for _ in range(r.uvarint() - 1):
        r.take("h"), r.take("h"), r.take("h")
        assert r.uvarint() == 0, "no tags per api"
    r.take("i")  # throttle
    epoch, levels = -1, {}
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == 1:
            epoch = r.take("q")
        elif tag == 2:
            for _ in range(r.uvarint() - 1):
                feature = r.compact_string()
                levels[feature] = r.take("h")
                r.take("h")
                assert r.uvarint() == 0
        r.pos = end
    return epoch, levels
