"""SSLContexts from Kafka's `ssl.*` settings (one listener's, prefixes resolved by
`ListenerConfig`), for the broker's accepted connections and its own outbound ones.

Keystores (`ssl.keystore.type`):

- `PEM`: a file at `ssl.keystore.location` holding the private key and the
  certificate chain, or inline `ssl.keystore.key` (PKCS#8, encrypted when
  `ssl.key.password` is set) with `ssl.keystore.certificate.chain`;
- `PKCS12`: `ssl.keystore.location` with `ssl.keystore.password` (read with the
  `cryptography` library);
- `JKS` (Kafka's default type) cannot be read without a JVM: it is refused with the
  keytool command that converts it.

Truststores likewise (`ssl.truststore.type` PEM: a file of certificates or inline
`ssl.truststore.certificates`; PKCS12 with its password). `ssl.client.auth`
required|requested|none, `ssl.enabled.protocols` (TLSv1.2, TLSv1.3), and
`ssl.cipher.suites` in Java's (IANA) names or OpenSSL's. Python's ssl module only
loads a private key from a file: the key is written re-encrypted with a one-time
password into a private temporary directory and deleted right after loading, so the
plaintext key never touches the disk.

Every problem is a `TlsConfigError` naming the setting, with Kafka's wording for the
checks Kafka makes (DefaultSslEngineFactory).
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from kt.broker.security.listeners import ListenerConfig


class TlsConfigError(ValueError):
    """A TLS setting that cannot be used (the message names it)."""


_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
              "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1": ssl.TLSVersion.TLSv1}  # fmt: skip
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}  # fmt: skip


@dataclass(frozen=True, slots=True)
class KeyMaterial:
    """A private key and its certificate chain (leaf first), as PEM."""

    key_pem: bytes
    chain_pem: bytes


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"{key}={path}: cannot read it: {exc.strerror or exc}") from None


def _password(value: str | None) -> bytes | None:
    return value.encode("utf-8") if value else None


def _jks(key: str, location: str | None) -> TlsConfigError:
    where = location or "<file>"
    return TlsConfigError(
        f"{key}=JKS: kt reads PKCS12 and PEM stores only; convert with "
        f"`keytool -importkeystore -srckeystore {where} -destkeystore store.p12 "
        "-deststoretype PKCS12` and set the type to PKCS12"
    )


def _pem_blocks(data: bytes, marker: bytes) -> list[bytes]:
    out = []
    begin = b"-----BEGIN " + marker
    pos = 0
    while (start := data.find(begin, pos)) >= 0:
        end_marker = b"-----END " + marker
        end = data.find(end_marker, start)
        if end < 0:
            break
        end = data.find(b"-----", end + len(end_marker)) + 5
        out.append(data[start:end] + b"\n")
        pos = end
    return out


def load_keystore(lc: ListenerConfig) -> KeyMaterial | None:
    """The listener's key and certificate chain (None when no keystore is set)."""
    ktype = (lc.get("ssl.keystore.type", "JKS") or "JKS").strip().upper()
    location = lc.get("ssl.keystore.location")
    store_pw = lc.get("ssl.keystore.password")
    key_pw = lc.get("ssl.key.password")
    inline_key = lc.get("ssl.keystore.key")
    inline_chain = lc.get("ssl.keystore.certificate.chain")
    if inline_key:
        if ktype != "PEM":
            raise TlsConfigError(
                f"SSL private key can be specified only for PEM, but key store type is {ktype}."
            )
        if not inline_chain:
            raise TlsConfigError(
                "SSL private key is specified, but certificate chain is not specified."
            )
        if location:
            raise TlsConfigError(
                "Both SSL key store location and separate private key are specified."
            )
        if store_pw:
            raise TlsConfigError(
                "SSL key store password cannot be specified with PEM format, only key "
                "password may be specified."
            )
        return _pem_material(inline_key.encode(), inline_chain.encode(), key_pw, "ssl.keystore.key")
    if not location:
        return None
    if ktype == "JKS":
        raise _jks("ssl.keystore.type", location)
    data = _read(location, "ssl.keystore.location")
    if ktype == "PEM":
        if store_pw:
            raise TlsConfigError(
                "SSL key store password cannot be specified with PEM format, only key "
                "password may be specified."
            )
        return _pem_material(data, data, key_pw, "ssl.keystore.location")
    if ktype == "PKCS12":
        if not store_pw:
            raise TlsConfigError(
                "SSL key store is specified, but key store password is not specified."
            )
        try:
            key, cert, extra = pkcs12.load_key_and_certificates(data, _password(store_pw))
        except ValueError:
            raise TlsConfigError(
                f"ssl.keystore.location={location}: not a PKCS12 keystore, or "
                "ssl.keystore.password is wrong"
            ) from None
        if key is None or cert is None:
            raise TlsConfigError(
                f"ssl.keystore.location={location}: the keystore has no private key entry"
            )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *extra])
        return KeyMaterial(key_pem, chain)
    raise TlsConfigError(f"ssl.keystore.type={ktype}: one of PKCS12, PEM (JKS: convert it)")


def _pem_material(key_data: bytes, chain_data: bytes, key_pw: str | None, key: str) -> KeyMaterial:
    keys = _pem_blocks(key_data, b"PRIVATE KEY") + _pem_blocks(key_data, b"ENCRYPTED PRIVATE KEY")
    if len(keys) != 1:
        raise TlsConfigError(f"{key}: Expected one private key, but found {len(keys)}")
    try:
        private = serialization.load_pem_private_key(keys[0], _password(key_pw))
    except (ValueError, TypeError):
        raise TlsConfigError(
            f"{key}: the private key does not load (a PKCS#8 PEM key; encrypted ones need "
            "ssl.key.password)"
        ) from None
    certs = _pem_blocks(chain_data, b"CERTIFICATE")
    if not certs:
        raise TlsConfigError(f"{key}: no certificate chain (-----BEGIN CERTIFICATE-----)")
    for block in certs:
        try:
            x509.load_pem_x509_certificate(block)
        except ValueError:
            raise TlsConfigError(f"{key}: a certificate of the chain does not parse") from None
    key_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return KeyMaterial(key_pem, b"".join(certs))


def load_truststore(lc: ListenerConfig) -> bytes | None:
    """The trusted certificates as PEM (None when no truststore is set)."""
    ttype = (lc.get("ssl.truststore.type", "JKS") or "JKS").strip().upper()
    location = lc.get("ssl.truststore.location")
    inline = lc.get("ssl.truststore.certificates")
    if inline:
        if ttype != "PEM":
            raise TlsConfigError(
                f"SSL trust store certs can be specified only for PEM, but trust store "
                f"type is {ttype}."
            )
        if location:
            raise TlsConfigError(
                "Both SSL trust store location and separate trust certificates are specified."
            )
        data, key = inline.encode(), "ssl.truststore.certificates"
    elif location:
        if ttype == "JKS":
            raise _jks("ssl.truststore.type", location)
        data, key = _read(location, "ssl.truststore.location"), "ssl.truststore.location"
        if ttype == "PKCS12":
            try:
                certs = pkcs12.load_pkcs12(data, _password(lc.get("ssl.truststore.password")))
            except ValueError:
                raise TlsConfigError(
                    f"ssl.truststore.location={location}: not a PKCS12 truststore, or "
                    "ssl.truststore.password is wrong"
                ) from None
            found = [c.certificate for c in certs.additional_certs]
            if certs.cert is not None:
                found.append(certs.cert.certificate)
            if not found:
                raise TlsConfigError(f"ssl.truststore.location={location}: no certificates")
            return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in found)
        if ttype != "PEM":
            raise TlsConfigError(f"ssl.truststore.type={ttype}: one of PKCS12, PEM")
    else:
        return None
    blocks = _pem_blocks(data, b"CERTIFICATE")
    if not blocks:
        raise TlsConfigError(f"{key}: no certificates (-----BEGIN CERTIFICATE-----)")
    return b"".join(blocks)


def _load_key(ctx: ssl.SSLContext, material: KeyMaterial) -> None:
    # ssl loads keys from files only: write the key re-encrypted with a one-time
    # password into a private directory, load it, delete it
    once = secrets.token_urlsafe(24).encode()
    key = serialization.load_pem_private_key(material.key_pem, None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(once),
    )
    with tempfile.TemporaryDirectory(prefix="kt-tls-") as tmp:
        os.chmod(tmp, 0o700)
        key_file, chain_file = Path(tmp) / "key.pem", Path(tmp) / "chain.pem"
        key_file.write_bytes(encrypted)
        chain_file.write_bytes(material.chain_pem)
        try:
            ctx.load_cert_chain(str(chain_file), str(key_file), password=once)
        except ssl.SSLError as exc:
            raise TlsConfigError(
                f"the keystore's key does not match its certificate: {exc.reason}"
            ) from None


def _protocols(ctx: ssl.SSLContext, lc: ListenerConfig, tls13_ciphers: bool) -> None:
    value = lc.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3") or ""
    names = [p.strip() for p in value.split(",") if p.strip()]
    unknown = [p for p in names if p not in _PROTOCOLS]
    if unknown or not names:
        raise TlsConfigError(
            f"ssl.enabled.protocols={value}: each one of {', '.join(sorted(_PROTOCOLS))}"
        )
    versions = sorted(_PROTOCOLS[p] for p in names)
    if not tls13_ciphers:
        versions = [v for v in versions if v < ssl.TLSVersion.TLSv1_3] or versions
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    protocol = (lc.get("ssl.protocol", "TLSv1.3") or "").strip()
    if protocol not in (*_PROTOCOLS, "TLS", "SSL", "TLSv1.2", "TLSv1.3"):
        raise TlsConfigError(f"ssl.protocol={protocol}: not a TLS protocol name")


def openssl_cipher_name(name: str) -> str:
    """A cipher suite's OpenSSL name from Java's (IANA) name; OpenSSL names and TLS 1.3
    suite names are returned unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, _, cipher = name[4:].partition("_WITH_")
    parts = cipher.split("_")
    # AES_128_GCM_SHA256 -> AES128-GCM-SHA256; AES_128_CBC_SHA -> AES128-SHA
    if parts[0] in ("AES", "CAMELLIA", "ARIA") and len(parts) > 1 and parts[1].isdigit():
        parts = [parts[0] + parts[1], *parts[2:]]
    if "CBC" in parts:
        parts.remove("CBC")
    if parts[:2] == ["CHACHA20", "POLY1305"]:
        parts = parts[:2]
    prefix = "" if kx == "RSA" else kx.replace("_", "-") + "-"
    return prefix + "-".join(parts)


def _ciphers(ctx: ssl.SSLContext, lc: ListenerConfig) -> bool:
    """Apply ssl.cipher.suites; whether TLS 1.3 may still be negotiated."""
    value = (lc.get("ssl.cipher.suites") or "").strip()
    if not value:
        return True
    available = {c["name"]: c.get("protocol", "") for c in ctx.get_ciphers()}
    tls12: list[str] = []
    tls13 = False
    for suite in (s.strip() for s in value.split(",") if s.strip()):
        name = openssl_cipher_name(suite)
        if name not in available:
            raise TlsConfigError(
                f"ssl.cipher.suites: {suite} is not a cipher suite this OpenSSL offers"
            )
        if available[name] == "TLSv1.3":
            tls13 = True  # OpenSSL's TLS 1.3 suites cannot be narrowed from Python
        else:
            tls12.append(name)
    if tls12:
        ctx.set_ciphers(":".join(tls12))
    return tls13


def server_context(lc: ListenerConfig) -> ssl.SSLContext:
    """The context a TLS listener accepts connections with."""
    material = load_keystore(lc)
    if material is None:
        raise TlsConfigError(
            f"listener {lc.name} uses {lc.protocol} but has no keystore: set "
            f"{lc.prefix}ssl.keystore.location (or ssl.keystore.location), or the PEM "
            "ssl.keystore.key and ssl.keystore.certificate.chain"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_key(ctx, material)
    tls13 = _ciphers(ctx, lc)
    _protocols(ctx, lc, tls13)
    client_auth = lc.ssl_client_auth()
    trust = load_truststore(lc)
    if trust is not None:
        ctx.load_verify_locations(cadata=trust.decode("ascii"))
    elif client_auth != "none":
        raise TlsConfigError(
            f"ssl.client.auth={client_auth} on listener {lc.name} needs a truststore "
            "(ssl.truststore.location or ssl.truststore.certificates)"
        )
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    return ctx


def client_context(lc: ListenerConfig) -> ssl.SSLContext:
    """The context of the broker's own connections to a TLS listener (replication,
    controller requests): the truststore (else the system's CAs), the keystore as
    the client certificate, and hostname verification unless
    `ssl.endpoint.identification.algorithm` is empty."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    trust = load_truststore(lc)
    if trust is not None:
        ctx.load_verify_locations(cadata=trust.decode("ascii"))
    else:
        ctx.load_default_certs()
    material = load_keystore(lc)
    if material is not None:
        _load_key(ctx, material)
    tls13 = _ciphers(ctx, lc)
    _protocols(ctx, lc, tls13)
    algorithm = (lc.get("ssl.endpoint.identification.algorithm", "https") or "").strip()
    if algorithm.lower() not in ("https", ""):
        raise TlsConfigError(f"ssl.endpoint.identification.algorithm={algorithm}: https or empty")
    ctx.check_hostname = algorithm.lower() == "https"
    return ctx
