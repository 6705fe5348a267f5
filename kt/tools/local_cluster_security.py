"""The security of `kt cluster up --secure`: a local CA and broker certificates made
on the spot, SCRAM-SHA-512 over TLS on every listener (the brokers' own connections
included), an admin super user, and a client properties file that kcat, kt and the
other librdkafka clients read as it is.

Everything lives in `<cluster dir>/security/` (mode 0700): `ca.crt` (to trust),
`ca.key` (to sign the certificates of brokers added later), `broker-N.pem` (key and
chain), `broker.properties` (the settings every broker reads, with the admin's
password in its JAAS entry) and `client.properties`. Files holding a key or a
password are mode 0600 and written atomically; passwords are never printed. A second
`up` reuses what is there, so the CA, the password and the client file stay valid
across `down` and `up`.

The admin's SCRAM credential is written to ZooKeeper (`/config/users/admin`, Kafka's
format) before any broker starts: the brokers log in to each other as that user.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from kt.protocol.sasl import scram_keys, scram_salted_password
from kt.storage.atomic import atomic_write

#: the listener name, protocol and mechanism a secure local cluster uses throughout
LISTENER = "SASL_SSL"
MECHANISM = "SCRAM-SHA-512"
ADMIN_USER = "admin"
SECURITY_DIR = "security"
CLIENT_PROPERTIES = "client.properties"
_ITERATIONS = 4096
_VALID_DAYS = 825  # what browsers accept for a leaf certificate; plenty for a dev cluster


@dataclass(frozen=True)
class SecureFiles:
    """Where a secure local cluster's material is."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        """The CA certificate clients trust."""
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        """The CA's private key."""
        return self.directory / "ca.key"

    @property
    def broker_properties(self) -> Path:
        """The settings every broker reads (`kt broker start --config`)."""
        return self.directory / "broker.properties"

    @property
    def client_properties(self) -> Path:
        """The admin's client properties (kcat -F, kt --command-config)."""
        return self.directory / CLIENT_PROPERTIES

    def keystore(self, broker_id: int) -> Path:
        """Broker `broker_id`'s key and certificate chain (PEM)."""
        return self.directory / f"broker-{broker_id}.pem"


def files_for(cluster_dir: Path) -> SecureFiles:
    """The security directory of the cluster in `cluster_dir`."""
    return SecureFiles(cluster_dir / SECURITY_DIR)


def _write_private(path: Path, data: bytes) -> None:
    atomic_write(path, data)
    os.chmod(path, 0o600)


def _name(cn: str) -> object:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kt local cluster"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])  # fmt: skip


def _load_or_make_ca(files: SecureFiles) -> tuple[object, object]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    if files.ca_cert.exists() and files.ca_key.exists():
        cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
        key = serialization.load_pem_private_key(files.ca_key.read_bytes(), None)
        return key, cert
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    name = _name("kt local cluster CA")
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)  # type: ignore[arg-type]
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    _write_private(
        files.ca_key,
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()),
    )  # fmt: skip
    atomic_write(files.ca_cert, cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def _broker_certificate(files: SecureFiles, ca: tuple[object, object], broker_id: int,
                        host: str) -> None:  # fmt: skip
    """Write broker `broker_id`'s key and certificate (for `host`, localhost and
    127.0.0.1) unless one is there already."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    path = files.keystore(broker_id)
    if path.exists():
        return
    ca_key, ca_cert = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    sans: list[x509.GeneralName] = [x509.DNSName("localhost")]
    for h in dict.fromkeys((host, "127.0.0.1")):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    cert = (
        x509.CertificateBuilder().subject_name(_name(f"broker-{broker_id}"))  # type: ignore[arg-type]
        .issuer_name(ca_cert.subject)  # type: ignore[attr-defined]
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=_VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
                                              x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )  # fmt: skip
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())  # fmt: skip
    _write_private(path, pem + cert.public_bytes(serialization.Encoding.PEM))


def _read_properties(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def admin_password(files: SecureFiles) -> str:
    """The admin's password, from the client properties (made once, then kept)."""
    if files.client_properties.exists():
        found = _read_properties(files.client_properties).get("sasl.password")
        if found:
            return found
    return secrets.token_urlsafe(24)


def prepare(cluster_dir: Path, broker_ids: list[int], bootstrap: str,
            host: str = "127.0.0.1") -> SecureFiles:  # fmt: skip
    """Make (or keep) the CA, every broker's certificate, the brokers' settings and
    the client properties for `bootstrap`."""
    files = files_for(cluster_dir)
    files.directory.mkdir(parents=True, exist_ok=True)
    os.chmod(files.directory, 0o700)
    ca = _load_or_make_ca(files)
    for broker_id in broker_ids:
        _broker_certificate(files, ca, broker_id, host)
    password = admin_password(files)
    prefix = f"listener.name.{LISTENER.lower()}."
    broker = {
        "listener.security.protocol.map": f"{LISTENER}:{LISTENER}",
        "inter.broker.listener.name": LISTENER,
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        f"{prefix}{MECHANISM.lower()}.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN_USER}" password="{password}";'
        ),
        "ssl.keystore.type": "PEM",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca_cert),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{ADMIN_USER}",
    }
    _write_private(files.broker_properties, _properties_text(
        "settings every broker of this secure local cluster reads (kt cluster up --secure)",
        broker))  # fmt: skip
    client = {
        "bootstrap.servers": bootstrap,
        "security.protocol": LISTENER,
        "sasl.mechanism": MECHANISM,
        "sasl.username": ADMIN_USER,
        "sasl.password": password,
        "ssl.ca.location": str(files.ca_cert),
    }
    _write_private(files.client_properties, _properties_text(
        "the admin (a super user) of the local cluster: kcat -F, kt --command-config",
        client))  # fmt: skip
    return files


def _properties_text(comment: str, props: dict[str, str]) -> bytes:
    lines = [f"# {comment}", *(f"{k}={v}" for k, v in props.items())]
    return ("\n".join(lines) + "\n").encode()


def broker_keystore_overrides(files: SecureFiles, broker_id: int) -> dict[str, str]:
    """The per-broker settings: its own keystore."""
    return {"ssl.keystore.location": str(files.keystore(broker_id))}


def scram_credential(password: str, salt: bytes | None = None) -> str:
    """A SCRAM-SHA-512 credential in Kafka's stored form
    (`salt=...,stored_key=...,server_key=...,iterations=N`)."""
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = scram_salted_password("sha512", password, salt, _ITERATIONS)
    _, stored, server = scram_keys("sha512", salted)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    return (
        f"salt={b64(salt)},stored_key={b64(stored)},server_key={b64(server)},"
        f"iterations={_ITERATIONS}"
    )


def create_admin_user(zookeeper_connect: str, files: SecureFiles, timeout: float = 15.0) -> None:
    """Write the admin's SCRAM credential to `/config/users/admin` as Kafka stores it
    (with the change notification brokers follow, should any run already)."""
    from kazoo.client import KazooClient  # type: ignore[import-untyped, unused-ignore]

    password = _read_properties(files.client_properties)["sasl.password"]
    znode = f"/config/users/{ADMIN_USER}"
    zk = KazooClient(hosts=zookeeper_connect, timeout=timeout)
    zk.start(timeout=timeout)
    try:
        config: dict[str, str] = {}
        if zk.exists(znode):
            # keep what else the user has (quotas); the credential is written afresh
            # (the password in client.properties is the one that counts)
            data, _ = zk.get(znode)
            config = dict((json.loads(data) if data else {}).get("config") or {})
        config[MECHANISM] = scram_credential(password)
        payload = json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()
        zk.ensure_path("/config/users")
        zk.ensure_path("/config/changes")
        if zk.exists(znode):
            zk.set(znode, payload)
        else:
            zk.create(znode, payload)
        note = json.dumps({"version": 2, "entity_path": f"users/{ADMIN_USER}"},
                          separators=(",", ":")).encode()  # fmt: skip
        zk.create("/config/changes/config_change_", note, sequence=True)
    finally:
        zk.stop()
        zk.close()
