"""One-line explanations of TLS failures: whose certificate, what is wrong, what to set.

OpenSSL reports a failed verification as a code and a terse reason; an operator
needs to know which certificate (subject, issuer, validity, names) and which
setting decides. When verification fails, `describe_peer` reconnects once without
verifying, only to read the certificate the broker presents, and describes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ssl
from typing import Any

# X509_V_ERR_* codes (OpenSSL's x509_vfy.h)
_EXPIRED = 10
_NOT_YET_VALID = 9
_HOSTNAME_MISMATCH = 62
_IP_MISMATCH = 64
_UNTRUSTED = {2, 18, 19, 20, 21, 27}


def _cert_facts(der: bytes | None) -> dict[str, Any]:
    if not der:
        return {}
    try:
        from cryptography import x509
    except ImportError:  # pragma: no cover - a dependency of kt
        return {}
    try:
        cert = x509.load_der_x509_certificate(der)
    except ValueError:
        return {}
    names: list[str] = []
    with contextlib.suppress(x509.ExtensionNotFound):
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = [f"DNS:{n}" for n in san.get_values_for_type(x509.DNSName)]
        names += [f"IP:{n}" for n in san.get_values_for_type(x509.IPAddress)]
    return {
        "subject": cert.subject.rfc4514_string() or "(empty subject)",
        "issuer": cert.issuer.rfc4514_string() or "(empty issuer)",
        "not_after": cert.not_valid_after_utc,
        "not_before": cert.not_valid_before_utc,
        "names": names,
    }


async def peer_certificate(host: str, port: int, timeout: float) -> bytes | None:
    """The DER certificate the server at host:port presents (unverified), or None."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(timeout):
            _reader, writer = await asyncio.open_connection(
                host, port, ssl=ctx, server_hostname=host
            )
    except (OSError, TimeoutError):
        return None
    try:
        obj = writer.get_extra_info("ssl_object")
        der: bytes | None = obj.getpeercert(binary_form=True) if obj is not None else None
        return der
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def _when(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC")


def explain_verification(
    exc: ssl.SSLCertVerificationError, host: str, der: bytes | None, trust_source: str
) -> str:
    """The one-line reason a broker's certificate was refused."""
    facts = _cert_facts(der)
    whose = f"the broker's certificate ({facts['subject']}, issued by {facts['issuer']})" if (
        facts) else "the broker's certificate"  # fmt: skip
    code = exc.verify_code
    if code == _EXPIRED:
        when = f" on {_when(facts['not_after'])}" if facts else ""
        return f"TLS: {whose} expired{when}"
    if code == _NOT_YET_VALID:
        when = f" before {_when(facts['not_before'])}" if facts else ""
        return f"TLS: {whose} is not valid{when}"
    if code in (_HOSTNAME_MISMATCH, _IP_MISMATCH):
        names = ", ".join(facts.get("names") or []) or "no subject alternative names"
        return (
            f"TLS: hostname mismatch: {whose} is for {names}, not {host} "
            "(connect by one of those names; ssl.endpoint.identification.algorithm= "
            "turns the check off)"
        )
    if code in _UNTRUSTED:
        return (
            f"TLS: {whose} is not trusted: {exc.verify_message}; trusted CAs come from "
            f"{trust_source} (set ssl.ca.location to the CA that signed it)"
        )
    return f"TLS: {whose} was refused: {exc.verify_message}"


def explain_ssl_error(exc: ssl.SSLError, *, during_handshake: bool) -> str:
    """The one-line reason for other TLS failures (alerts from the broker, a plaintext
    port answering a TLS client, ...)."""
    reason = (exc.reason or "").upper()
    text = str(exc)
    if "CERTIFICATE_REQUIRED" in reason or "certificate required" in text:
        return (
            "TLS: the broker requires a client certificate (mutual TLS): set "
            "ssl.certificate.location and ssl.key.location, or ssl.keystore.location"
        )
    if "UNKNOWN_CA" in reason or "BAD_CERTIFICATE" in reason or "CERTIFICATE_UNKNOWN" in reason:
        return (
            "TLS: the broker refused our client certificate "
            f"({reason.lower().replace('_', ' ')}): it is not signed by a CA the broker trusts"
        )
    if (
        "WRONG_VERSION_NUMBER" in reason
        or "RECORD_LAYER_FAILURE" in reason
        or ("PACKET_LENGTH_TOO_LONG" in reason or "HTTP_REQUEST" in reason)
    ):
        return (
            "TLS handshake failed: the port does not speak TLS (a plaintext listener? "
            "then use security.protocol=PLAINTEXT or SASL_PLAINTEXT)"
        )
    if "UNSUPPORTED_PROTOCOL" in reason or "PROTOCOL_VERSION" in reason:
        return f"TLS: no protocol version in common with the broker (kt needs TLS 1.2+): {text}"
    if isinstance(exc, ssl.SSLEOFError) or "EOF" in reason:
        if during_handshake:
            return (
                "TLS handshake failed: the broker closed the connection (a plaintext "
                "listener? then use security.protocol=PLAINTEXT or SASL_PLAINTEXT)"
            )
        return "TLS: the broker closed the connection"
    return f"TLS: {reason.lower().replace('_', ' ') or text}"
