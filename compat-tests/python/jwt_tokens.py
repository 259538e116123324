"""JWTs for OAUTHBEARER tests, signed by keys the openssl CLI makes in a temp dir (as pki.py
does for certificates): an RS256 and an ES256 key, their JWKS (RFC 7517) and compact JWS
(RFC 7515) tokens with whatever claims a test wants. Nothing is committed; no JWT library.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


def b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def _openssl(*args: str, cwd: Path, data: bytes | None = None) -> bytes:
    r = subprocess.run(["openssl", *args], cwd=cwd, input=data, capture_output=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{r.stderr.decode()}")
    return r.stdout


def _der_ints(sig: bytes) -> tuple[int, int]:
    """An ECDSA signature's (r, s) from its DER SEQUENCE of two INTEGERs."""
    assert sig[0] == 0x30
    i = 2 if sig[1] < 0x80 else 2 + (sig[1] & 0x7F)
    out = []
    for _ in range(2):
        assert sig[i] == 0x02
        n = sig[i + 1]
        out.append(int.from_bytes(sig[i + 2:i + 2 + n], "big"))
        i += 2 + n
    return out[0], out[1]


@dataclass(frozen=True)
class Key:
    dir: Path
    kid: str
    alg: str  # RS256 | ES256

    @property
    def pem(self) -> str:
        return f"{self.kid}.key"

    def jwk(self) -> dict:
        if self.alg == "RS256":
            out = _openssl("rsa", "-in", self.pem, "-noout", "-modulus", cwd=self.dir).decode()
            n = bytes.fromhex(out.strip().split("=", 1)[1])
            return {"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256", "n": b64url(n), "e": "AQAB"}
        spki = _openssl("pkey", "-in", self.pem, "-pubout", "-outform", "DER", cwd=self.dir)
        point = spki[-65:]  # the uncompressed P-256 point 04 || x || y ends the SPKI
        assert point[0] == 4
        return {"kty": "EC", "kid": self.kid, "use": "sig", "alg": "ES256", "crv": "P-256",
                "x": b64url(point[1:33]), "y": b64url(point[33:])}

    def sign(self, claims: dict, header: dict | None = None) -> str:
        h = {"alg": self.alg, "typ": "JWT", "kid": self.kid, **(header or {})}
        signing_input = f"{b64url(json.dumps(h).encode())}.{b64url(json.dumps(claims).encode())}"
        sig = _openssl("dgst", "-sha256", "-sign", self.pem, cwd=self.dir, data=signing_input.encode())
        if self.alg == "ES256":
            r, s = _der_ints(sig)
            sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{signing_input}.{b64url(sig)}"


def unsigned(claims: dict) -> str:
    """An `alg: none` token (RFC 7519 section 6): what both brokers must refuse."""
    return f"{b64url(json.dumps({'alg': 'none', 'typ': 'JWT'}).encode())}.{b64url(json.dumps(claims).encode())}."


@dataclass(frozen=True)
class Keys:
    dir: Path
    rs256: Key
    es256: Key
    jwks_path: Path

    @property
    def jwks_url(self) -> str:
        return self.jwks_path.resolve().as_uri()


def make(dir: Path) -> Keys:
    """An RS256 and an ES256 key, and `jwks.json` with both public keys."""
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "rsa1.key", cwd=dir)
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "ec1.key", cwd=dir)
    rs, es = Key(dir, "rsa1", "RS256"), Key(dir, "ec1", "ES256")
    path = dir / "jwks.json"
    path.write_text(json.dumps({"keys": [rs.jwk(), es.jwk()]}))
    return Keys(dir, rs, es, path)


def claims(sub: str, aud: str, iss: str, lifetime_s: int = 600, **extra) -> dict:
    now = int(time.time())
    return {"sub": sub, "aud": aud, "iss": iss, "iat": now, "exp": now + lifetime_s, "scope": "kafka", **extra}
