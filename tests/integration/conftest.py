"""Fixtures shared by the integration modules.

`secured_broker`: one kt broker with PLAINTEXT, SASL_SSL, SSL (client certificates
required) and SASL_PLAINTEXT listeners, SCRAM users alice (SCRAM-SHA-512) and bob
(SCRAM-SHA-256), PLAIN user carol, and a PKI; session-scoped so that every module
testing kt's commands against a secured cluster shares one broker instead of starting
its own (the machine is small)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_harness import BrokerProcess, free_port

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_carol="carol-secret";')  # fmt: skip


@pytest.fixture(scope="session")
def secured_broker(
    tmp_path_factory: pytest.TempPathFactory, tls_pki: Path
) -> Iterator[dict[str, Any]]:
    """The secured broker: {"broker", "ports" (listener name -> port), "pki", "tmp"}."""
    tmp = tmp_path_factory.mktemp("secbroker")
    keystore = tmp / "server-keystore.pem"
    keystore.write_text((tls_pki / "server.key").read_text() + (tls_pki / "server.pem").read_text())
    ports: dict[str, int] = {}
    for name in ("PLAINTEXT", "SASL_SSL", "SSL", "SASL_PLAINTEXT"):
        # free_port() closes its socket, so two calls can name the same port (seen:
        # the broker then refuses two listeners on one port)
        while (port := free_port()) in ports.values():
            pass
        ports[name] = port
    overrides = {
        "listeners": ",".join(f"{n}://localhost:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
        ),
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "3000",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls_pki / "ca.pem"),
        "listener.name.ssl.ssl.client.auth": "required",
        "num.partitions": "1",
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "1",
    }
    b = BrokerProcess(tmp / "data", ports["PLAINTEXT"], overrides).start(timeout=60)
    try:
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": f"localhost:{ports['PLAINTEXT']}"})
        ups = [
            UserScramCredentialUpsertion("alice", ScramCredentialInfo(
                ScramMechanism.SCRAM_SHA_512, 8192), b"alice-secret"),
            UserScramCredentialUpsertion("bob", ScramCredentialInfo(
                ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret"),
        ]  # fmt: skip
        for fut in admin.alter_user_scram_credentials(ups).values():
            fut.result(60)
        yield {"broker": b, "ports": ports, "pki": tls_pki, "tmp": tmp}
    finally:
        b.stop()
