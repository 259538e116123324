"""Test certificates made with the openssl CLI (Debian's) in a temp dir: a CA, a broker
certificate for 127.0.0.1/localhost, client certificates signed by that CA and one signed by
another. Keys are unencrypted PKCS#8 (what both Strom and Kafka's PEM key stores read) and
never leave the temp dir."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _run(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{r.stderr}")


def _key(name: str, cwd: Path) -> None:
    _run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key", cwd=cwd)


def _ca(name: str, cn: str, cwd: Path) -> None:
    _key(name, cwd)
    _run("req", "-x509", "-new", "-key", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={cn}", cwd=cwd)


def _issue(name: str, subject: str, ca: str, cwd: Path, san: str | None = None) -> None:
    _key(name, cwd)
    _run("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=cwd)
    ext = cwd / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    _run(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", ext.name, cwd=cwd,
    )
    # Key then chain in one file: Kafka's `ssl.keystore.location` with type PEM.
    (cwd / f"{name}.keystore.pem").write_text((cwd / f"{name}.key").read_text() + (cwd / f"{name}.pem").read_text())


@dataclass(frozen=True)
class Pki:
    dir: Path

    @property
    def ca(self) -> str:
        return str(self.dir / "ca.pem")

    def keystore(self, name: str) -> str:
        return str(self.dir / f"{name}.keystore.pem")

    def cert(self, name: str) -> str:
        return str(self.dir / f"{name}.pem")

    def key(self, name: str) -> str:
        return str(self.dir / f"{name}.key")


def make(dir: Path) -> Pki:
    """`broker` (CN=broker, SAN 127.0.0.1 and localhost), `alice` (CN=alice,OU=compat,O=strom)
    and `bob` (CN=bob,O=strom) from the CA; `mallory` from another CA."""
    dir.mkdir(parents=True, exist_ok=True)
    _ca("ca", "strom-compat-ca", dir)
    _ca("other-ca", "someone-else", dir)
    _issue("broker", "/CN=broker", "ca", dir, san="IP:127.0.0.1,DNS:localhost")
    _issue("alice", "/O=strom/OU=compat/CN=alice", "ca", dir)
    _issue("bob", "/O=strom/CN=bob", "ca", dir)
    _issue("mallory", "/CN=mallory", "other-ca", dir)
    return Pki(dir)
