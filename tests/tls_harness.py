"""Certificates made in the test (with the `cryptography` library) and a TLS terminator
that is not kt (Debian's stunnel4) in front of a plaintext `kt broker`.

`make_pki(dir)` writes a CA, a server certificate for localhost/127.0.0.1, one for
another name (hostname mismatch), an expired one, a client certificate for mutual
TLS (plain and encrypted key, PKCS12 key store), a PKCS12 trust store, and a second
CA that signed none of them (an untrusted chain).

`Stunnel` runs `stunnel4` with one service per case, all forwarding to the broker.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

STUNNEL = shutil.which("stunnel4") or shutil.which("stunnel")
PASSWORD = "changeit"


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kt tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])  # fmt: skip


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate],
    cn: str,
    *,
    dns: list[str],
    ips: list[str],
    client: bool = False,
    expired: bool = False,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    now = dt.datetime.now(dt.UTC)
    start, end = ((now - dt.timedelta(days=30), now - dt.timedelta(days=1)) if expired
                  else (now - dt.timedelta(days=1), now + dt.timedelta(days=30)))  # fmt: skip
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca[1].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]
            ),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, builder.sign(ca[0], hashes.SHA256())


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _pem_key(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    enc: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password
        else serialization.NoEncryption())  # fmt: skip
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


def make_pki(d: Path) -> Path:
    """Write the test PKI into `d` (file names below); returns `d`."""
    d.mkdir(parents=True, exist_ok=True)
    ca = _ca("kt test CA")
    other_ca = _ca("some other CA")
    server = _leaf(ca, "localhost", dns=["localhost"], ips=["127.0.0.1"])
    wrong = _leaf(ca, "other.example", dns=["other.example"], ips=[])
    expired = _leaf(ca, "localhost", dns=["localhost"], ips=["127.0.0.1"], expired=True)
    stranger = _leaf(other_ca, "localhost", dns=["localhost"], ips=["127.0.0.1"])
    client = _leaf(ca, "kt-client", dns=[], ips=[], client=True)
    files = {
        "ca.pem": _pem_cert(ca[1]),
        "other-ca.pem": _pem_cert(other_ca[1]),
        "server.pem": _pem_cert(server[1]) + _pem_cert(ca[1]),
        "server.key": _pem_key(server[0]),
        "wrong.pem": _pem_cert(wrong[1]),
        "wrong.key": _pem_key(wrong[0]),
        "expired.pem": _pem_cert(expired[1]),
        "expired.key": _pem_key(expired[0]),
        "stranger.pem": _pem_cert(stranger[1]),
        "stranger.key": _pem_key(stranger[0]),
        "client.pem": _pem_cert(client[1]),
        "client.key": _pem_key(client[0]),
        "client-encrypted.key": _pem_key(client[0], PASSWORD),
        "client.p12": pkcs12.serialize_key_and_certificates(
            b"kt-client",
            client[0],
            client[1],
            [ca[1]],
            serialization.BestAvailableEncryption(PASSWORD.encode()),
        ),
        "truststore.p12": pkcs12.serialize_key_and_certificates(
            None, None, None, [ca[1]], serialization.BestAvailableEncryption(PASSWORD.encode())
        ),
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
        (d / name).chmod(0o600)
    return d


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Stunnel:
    """stunnel4 with services {name: (accept port, cert, key, require client cert)}."""

    dir: Path
    target_port: int
    services: dict[str, tuple[int, Path, Path, bool]]
    ca: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> Stunnel:
        """Write the configuration, start stunnel, wait until every port accepts."""
        assert STUNNEL, "stunnel4 is not installed (scripts/setup installs it)"
        lines = ["foreground = yes", "pid =", f"output = {self.dir / 'stunnel.log'}",
                 "debug = 5", "sslVersionMin = TLSv1.2"]  # fmt: skip
        for name, (port, cert, key, require) in self.services.items():
            lines += [
                f"[{name}]",
                f"accept = 127.0.0.1:{port}",
                f"connect = 127.0.0.1:{self.target_port}",
                f"cert = {cert}",
                f"key = {key}",
            ]
            if require:
                lines += [f"CAfile = {self.ca}", "requireCert = yes", "verifyChain = yes"]
        conf = self.dir / "stunnel.conf"
        conf.write_text("\n".join(lines) + "\n")
        self.proc = subprocess.Popen([STUNNEL, str(conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + timeout
        while not all(_port_open(p) for p, *_ in self.services.values()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = (
                    (self.dir / "stunnel.log").read_text()
                    if (self.dir / "stunnel.log").exists()
                    else ""
                )
                self.stop()
                raise RuntimeError(f"stunnel did not start: {log[-2000:]}")
            time.sleep(0.05)
        return self

    def port(self, name: str) -> int:
        """The accept port of service `name`."""
        return self.services[name][0]

    def stop(self) -> None:
        """Stop stunnel."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
