"""Test certificates made on the spot with `cryptography`: a CA, server and client
certificates, as PEM, PKCS#8 (optionally encrypted) and PKCS12 files, and an
in-memory TLS handshake between two SSLContexts (no sockets)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID


@dataclass
class Issued:
    """A key and its certificate (and the chain above it)."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    chain: list[x509.Certificate]

    def key_pem(self, password: bytes | None = None) -> bytes:
        enc: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password)
            if password
            else serialization.NoEncryption()
        )
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc
        )

    def chain_pem(self) -> bytes:
        return b"".join(
            c.public_bytes(serialization.Encoding.PEM) for c in [self.cert, *self.chain]
        )

    def p12(self, password: bytes) -> bytes:
        return pkcs12.serialize_key_and_certificates(
            b"kt", self.key, self.cert, self.chain,
            serialization.BestAvailableEncryption(password),
        )  # fmt: skip


def _name(text: str) -> x509.Name:
    # "CN=a,OU=b" -> RDNs in certificate order (reversed: RFC 2253 lists the last first)
    oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
            "O": NameOID.ORGANIZATION_NAME, "L": NameOID.LOCALITY_NAME,
            "ST": NameOID.STATE_OR_PROVINCE_NAME, "C": NameOID.COUNTRY_NAME}  # fmt: skip
    attrs = [x509.NameAttribute(oids[k], v) for k, v in (p.split("=", 1) for p in text.split(","))]
    return x509.Name(list(reversed(attrs)))


class CA:
    """A throwaway certificate authority."""

    def __init__(self, subject: str = "CN=kt-test-ca") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        name = _name(subject)
        self.cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )  # fmt: skip

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, subject: str, hosts: tuple[str, ...] = ()) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder().subject_name(_name(subject))
            .issuer_name(self.cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
        )  # fmt: skip
        if hosts:
            sans: list[x509.GeneralName] = []
            for h in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(h)))
                except ValueError:
                    sans.append(x509.DNSName(h))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return Issued(key, builder.sign(self.key, hashes.SHA256()), [])

    def write(
        self, tmp: Path, name: str, issued: Issued, password: bytes = b"pw"
    ) -> dict[str, Path]:
        """PEM key+chain in one file, the key and chain apart, and a PKCS12."""
        paths = {
            "pem": tmp / f"{name}.pem",
            "key": tmp / f"{name}.key",
            "chain": tmp / f"{name}.crt",
            "p12": tmp / f"{name}.p12",
            "ca": tmp / "ca.crt",
        }
        paths["pem"].write_bytes(issued.key_pem() + issued.chain_pem())
        paths["key"].write_bytes(issued.key_pem())
        paths["chain"].write_bytes(issued.chain_pem())
        paths["p12"].write_bytes(issued.p12(password))
        paths["ca"].write_bytes(self.pem())
        return paths


def handshake(
    server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str | None = "localhost"
) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """Run a TLS handshake between two contexts in memory; raises ssl.SSLError on
    failure. Returns (server side, client side)."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    cli = client.wrap_bio(c_in, c_out, server_hostname=server_hostname)
    done = {"s": False, "c": False}
    for _ in range(20):
        for side, obj in (("c", cli), ("s", srv)):
            if not done[side]:
                try:
                    obj.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            # TLS 1.3: the server learns of a rejected client certificate late
            srv.write(b"x")
            c_in.write(s_out.read())
            cli.read(1)
            cli.write(b"y")
            s_in.write(c_out.read())
            srv.read(1)
            return srv, cli
    raise AssertionError("handshake did not finish")
