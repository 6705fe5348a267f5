"""Keystores replaced without a restart (KIP-226): new handshakes get the new
certificate, the DN must stay and the SANs must not shrink unless allowed, and a
change is validated before it is stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from brokersec_certs import CA, handshake
from cryptography import x509

from kt.broker.security.keystore_reload import (
    ReloadableContext,
    is_reconfigurable,
    validate_change,
)
from kt.broker.security.listeners import ListenerConfig
from kt.broker.security.tls import TlsConfigError, client_context, server_context

P = "listener.name.ssl."


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, object]:
    ca = CA()
    old = ca.write(tmp_path, "old", ca.issue("CN=broker1,O=kt", ("localhost", "127.0.0.1")))
    new = ca.write(tmp_path, "new", ca.issue("CN=broker1,O=kt", ("localhost", "127.0.0.1",
                                                                  "broker1.example")))  # fmt: skip
    other = ca.write(tmp_path, "other", ca.issue("CN=intruder,O=kt", ("localhost",)))
    fewer = ca.write(tmp_path, "fewer", ca.issue("CN=broker1,O=kt", ("localhost",)))
    return {"old": old, "new": new, "other": other, "fewer": fewer}


def lc(location: Path, **extra: str) -> ListenerConfig:
    props = {P + "ssl.keystore.type": "PEM", P + "ssl.keystore.location": str(location), **extra}
    return ListenerConfig(props, "SSL", "SSL")


def _peer_serial(server: object, pki: dict[str, object]) -> int:
    ca_file = pki["old"]["ca"]  # type: ignore[index]
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_file)}
    cli = client_context(ListenerConfig(trust, "X", "SSL"))
    _, c = handshake(server, cli)  # type: ignore[arg-type]
    der = c.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_new_handshakes_get_the_new_keystore(pki: dict[str, object]) -> None:
    first = lc(pki["old"]["pem"])  # type: ignore[index]
    base = server_context(first)
    holder = ReloadableContext(base, first)
    old_serial = _peer_serial(base, pki)
    assert holder.reconfigured(first) is None  # nothing changed
    second = lc(pki["new"]["pem"])  # type: ignore[index]
    new = holder.reconfigured(second)
    assert new is not None
    holder.install(second, new)
    new_serial = _peer_serial(base, pki)
    assert new_serial != old_serial
    assert holder.reconfigured(second) is None


def test_identity_checks(pki: dict[str, object]) -> None:
    first = lc(pki["old"]["pem"])  # type: ignore[index]
    holder = ReloadableContext(server_context(first), first)
    with pytest.raises(TlsConfigError, match="Keystore DistinguishedName does not match"):
        holder.reconfigured(lc(pki["other"]["pem"]))  # type: ignore[index]
    with pytest.raises(TlsConfigError, match="Keystore SubjectAltNames do not match"):
        holder.reconfigured(lc(pki["fewer"]["pem"]))  # type: ignore[index]
    allowed = lc(pki["other"]["pem"], **{"ssl.allow.dn.changes": "true",  # type: ignore[index]
                                        "ssl.allow.san.changes": "true"})  # fmt: skip
    assert holder.reconfigured(allowed) is not None


def test_validate_change_before_storing(pki: dict[str, object], tmp_path: Path) -> None:
    old = {P + "ssl.keystore.type": "PEM", P + "ssl.keystore.location": str(pki["old"]["pem"])}  # type: ignore[index]
    listeners = [ListenerConfig(old, "SSL", "SSL")]
    validate_change(old, {**old, P + "ssl.keystore.location": str(pki["new"]["pem"])},  # type: ignore[index]
                    listeners)  # fmt: skip
    with pytest.raises(TlsConfigError, match="Validation of dynamic config update of SSLFactory"):
        validate_change(old, {**old, P + "ssl.keystore.location": str(tmp_path / "missing")},
                        listeners)  # fmt: skip


def test_only_listener_prefixed_keystore_keys_are_dynamic() -> None:
    assert is_reconfigurable("listener.name.ssl.ssl.keystore.location")
    assert is_reconfigurable("listener.name.sasl_ssl.ssl.truststore.certificates")
    assert not is_reconfigurable("ssl.keystore.location")
    assert not is_reconfigurable("listener.name.ssl.ssl.client.auth")
