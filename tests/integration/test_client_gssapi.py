"""SASL/GSSAPI against a real MIT KDC (Debian's krb5-kdc): the client gets a service
ticket for kafka/localhost with its keytab, the acceptor (tests/sasl_peer.py, the
gssapi binding with the service keytab) checks it, and the security-layer exchange
of RFC 4752 completes; plus the one-line errors for a missing ticket and service."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kdc_harness import AVAILABLE, REALM, Kdc
from sasl_peer import PeerConfig, SaslPeer

gssapi = pytest.importorskip("gssapi", reason="the gssapi binding is not installed")

from kt.client import KafkaAuthenticationError, KafkaClient, SecurityConfig  # noqa: E402
from kt.client.security import SecurityConfigError  # noqa: E402

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not AVAILABLE, reason="krb5-kdc is not installed"),
]


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    k = Kdc(tmp_path_factory.mktemp("kdc")).start()
    saved = {key: os.environ.get(key) for key in k.env}
    os.environ.update(k.env)  # the gssapi library in this process reads them
    try:
        service_keytab = k.add("kafka/localhost")
        alice = k.add("alice")
        peer = SaslPeer(PeerConfig(mechanisms=["GSSAPI", "PLAIN"],
                                   keytab=str(service_keytab))).start()  # fmt: skip
        yield {"kdc": k, "peer": peer, "alice": alice}
        peer.stop()
    finally:
        k.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _connect(peer: SaslPeer, props: dict[str, str]) -> None:
    async def go() -> None:
        client = KafkaClient(f"localhost:{peer.port}", connect_timeout=10,
                             security=SecurityConfig.from_properties(props))  # fmt: skip
        await client.start()
        await client.close()

    asyncio.run(go())


def test_gssapi_with_a_keytab_from_the_jaas_line(kdc: dict[str, Any]) -> None:
    peer = kdc["peer"]
    _connect(peer, {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
        f'useKeyTab=true storeKey=true keyTab="{kdc["alice"]}" principal="alice@{REALM}";',
    })  # fmt: skip
    assert peer.authenticated[-1] == f"alice@{REALM}"


def test_gssapi_with_librdkafka_keys(kdc: dict[str, Any]) -> None:
    peer = kdc["peer"]
    _connect(peer, {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.keytab": str(kdc["alice"]),
        "sasl.kerberos.principal": "alice",
    })  # fmt: skip
    assert peer.authenticated[-1] == f"alice@{REALM}"


def test_gssapi_errors_are_one_line(kdc: dict[str, Any], tmp_path: Path) -> None:
    peer = kdc["peer"]
    base = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.keytab": str(kdc["alice"]),
        "sasl.kerberos.principal": "alice",
    }
    # a service the KDC does not know
    with pytest.raises(KafkaAuthenticationError) as err:
        _connect(peer, {**base, "sasl.kerberos.service.name": "nokafka"})
    text = str(err.value)
    assert "GSSAPI: cannot get a Kerberos ticket for nokafka/localhost as alice" in text, text
    assert "\n" not in text
    with pytest.raises(SecurityConfigError, match=r"needs sasl\.kerberos\.service\.name"):
        SecurityConfig.from_properties({k: v for k, v in base.items()})
