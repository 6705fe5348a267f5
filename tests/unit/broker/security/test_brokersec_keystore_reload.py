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


@pytest.mark.parametrize("loop_name", ["asyncio", "uvloop"])
def test_the_brokers_own_connections_follow_a_rotated_keystore(
    tmp_path: Path, loop_name: str
) -> None:
    """The inter-broker client context (SwappableClientContext): after a rotation to
    a certificate from a new CA and the old CA's removal from the truststore, new
    outbound connections present the new certificate and trust only the new CA, on
    asyncio's loop and uvloop; a change of nothing relevant changes nothing."""
    import asyncio
    import ssl

    from kt.broker.security.keystore_reload import SwappableClientContext

    ca1, ca2 = CA("CN=ca-one"), CA("CN=ca-two")
    (tmp_path / "1").mkdir()
    (tmp_path / "2").mkdir()
    one = ca1.write(tmp_path / "1", "b", ca1.issue("CN=broker2,O=kt", ("localhost",)))
    two = ca2.write(tmp_path / "2", "b", ca2.issue("CN=broker2,O=kt", ("localhost",)))
    both = tmp_path / "both.crt"
    both.write_bytes(one["ca"].read_bytes() + two["ca"].read_bytes())

    def client_lc(keystore: Path, truststore: Path) -> ListenerConfig:
        return ListenerConfig({P + "ssl.keystore.type": "PEM",
                               P + "ssl.keystore.location": str(keystore),
                               P + "ssl.truststore.type": "PEM",
                               P + "ssl.truststore.location": str(truststore)},
                              "SSL", "SSL")  # fmt: skip

    first = client_lc(one["pem"], both)
    swappable = SwappableClientContext(client_context(first), first)
    assert swappable.check_hostname
    assert swappable.reconfigured(client_lc(one["pem"], both)) is None
    # a peer that trusts CA2 only and requires a client certificate, served by CA2
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(two["pem"]))
    server.load_verify_locations(cafile=str(two["ca"]))
    server.verify_mode = ssl.CERT_REQUIRED

    async def connect() -> str:
        seen: list[str] = []

        def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            cert = w.get_extra_info("peercert") or {}
            seen.append(dict(x[0] for x in cert.get("issuer", ()))["commonName"])
            w.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server)
        port = srv.sockets[0].getsockname()[1]
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port, ssl=swappable,
                                                 server_hostname="localhost")  # fmt: skip
            await r.read()
            w.close()
        except (ssl.SSLError, ConnectionError):
            pass
        finally:
            srv.close()
        return seen[0] if seen else "refused"

    def run() -> str:
        factory = asyncio.new_event_loop
        if loop_name == "uvloop":
            factory = pytest.importorskip("uvloop").new_event_loop
        with asyncio.Runner(loop_factory=factory) as r:
            return r.run(connect())

    assert run() == "refused"  # CA1's certificate: the peer refuses it
    rotated = client_lc(two["pem"], both)
    new = swappable.reconfigured(rotated)
    assert new is not None
    swappable.swap(rotated, new)
    assert run() == "ca-two"
    # the old CA leaves the truststore: a peer still serving CA1's certificate fails
    only_two = client_lc(two["pem"], two["ca"])
    new = swappable.reconfigured(only_two)
    assert new is not None
    swappable.swap(only_two, new)
    assert run() == "ca-two"
    server.load_cert_chain(str(one["pem"]))  # the peer now serves CA1's certificate
    assert run() == "refused"
