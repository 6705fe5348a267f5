"""Certificate rotation without a restart (KIP-226) in a real broker: `kt configs
alter` sets listener.name.ssl.ssl.keystore.location, new TLS connections get the new
certificate while the broker keeps serving; an incompatible keystore is refused. In a
three-broker cluster the brokers' own connections to each other follow a rotation to
a new CA too."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
from typing import Any

import pytest
from broker_harness import KT, BrokerProcess, free_port
from brokersec_certs import CA
from cryptography import x509

pytestmark = pytest.mark.integration


def _served_serial(port: int, cafile: str) -> int:
    ctx = ssl.create_default_context(cafile=cafile)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(
        raw, server_hostname="localhost"
    ) as tls:  # fmt: skip
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_keystore_rotation(tmp_path: Any) -> None:
    ca = CA()
    old = ca.write(tmp_path, "old", ca.issue("CN=broker1", ("localhost", "127.0.0.1")))
    new_cert = ca.issue("CN=broker1", ("localhost", "127.0.0.1"))
    new = ca.write(tmp_path, "new", new_cert)
    other = ca.write(tmp_path, "other", ca.issue("CN=someone-else", ("localhost", "127.0.0.1")))
    port, tls_port = free_port(), free_port()
    b = BrokerProcess(tmp_path / "data", port, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{tls_port}",
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": str(old["pem"]),
    }).start(timeout=60)  # fmt: skip
    try:
        cafile = str(old["ca"])
        before = _served_serial(tls_port, cafile)

        def alter(location: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [KT, "configs", "alter", "--entity-type", "brokers", "--entity-name", "1",
                 "--add-config", f"listener.name.ssl.ssl.keystore.location={location}",
                 "-b", b.bootstrap], capture_output=True, text=True, timeout=60)  # fmt: skip

        refused = alter(str(other["pem"]))
        assert refused.returncode == 1
        assert "Keystore DistinguishedName does not match" in refused.stderr
        r = alter(str(new["pem"]))
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 30
        while _served_serial(tls_port, cafile) != new_cert.cert.serial_number:
            assert time.monotonic() < deadline, b.log()[-2000:]
            time.sleep(0.2)
        assert before != new_cert.cert.serial_number
        assert "the new keystore/truststore serves new connections" in b.log()
    finally:
        assert b.stop() == 0


@pytest.mark.cluster
def test_inter_broker_connections_use_the_rotated_keystore(tmp_path: Any) -> None:
    """Three brokers whose inter-broker listener (SASL_SSL) requires client
    certificates rotate to certificates of a new CA through AlterConfigs (the
    truststores trusting both CAs), then drop the old CA from the truststores. A
    follower restarted after that gets its leadership from the controller and
    fetches from the leader again: the running brokers' new connections to it
    present the new certificate (Kafka rebuilds the inter-broker SslFactory); with
    the old one, the follower would refuse them and never rejoin the ISR."""
    from cluster_harness import LEAN_OVERRIDES, wait_for_isr, wait_zk_leader, zk_get
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    from kt.tools import local_cluster_security as sec
    from kt.tools.local_cluster import LocalCluster

    ca2 = CA("CN=kt-new-ca")
    (tmp_path / "ca2").mkdir()
    pki2 = tmp_path / "ca2"
    both = tmp_path / "both.crt"
    overrides = {
        **LEAN_OVERRIDES,
        "listener.name.sasl_ssl.ssl.client.auth": "required",
        "listener.name.sasl_ssl.ssl.truststore.type": "PEM",
        "listener.name.sasl_ssl.ssl.truststore.location": str(both),
        "ssl.allow.dn.changes": "true",  # the new CA's certificates name the brokers anew
    }
    c = LocalCluster.create(tmp_path / "cluster", 3, overrides=overrides, secure=True)
    files = sec.prepare(c.directory, [b.broker_id for b in c.brokers], c.bootstrap_servers,
                        host="127.0.0.1")  # fmt: skip
    both.write_bytes(files.ca_cert.read_bytes() + ca2.pem())
    client = ca2.write(pki2, "client", ca2.issue("CN=admin-client"))
    only_new = client["ca"]
    new_keystores = {
        b.broker_id: ca2.write(pki2, f"broker-{b.broker_id}",
                               ca2.issue(f"CN=broker-{b.broker_id}",
                                         ("localhost", "127.0.0.1")))["pem"]
        for b in c.brokers
    }  # fmt: skip
    c.start(timeout=120.0, register_timeout=60.0)
    try:
        conf = {"bootstrap.servers": c.bootstrap_servers, "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                "sasl.password": sec.admin_password(files), "ssl.ca.location": str(both),
                "ssl.certificate.location": str(client["chain"]),
                "ssl.key.location": str(client["key"])}  # fmt: skip
        admin = AdminClient(conf)
        topic = "rotated"
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(60)
        wait_for_isr(c, topic, 0, [1, 2, 3], timeout=120)

        def alter(settings: dict[int, dict[str, str]]) -> None:
            for i, s in settings.items():  # one broker per call (librdkafka's rule)
                resource = ConfigResource(ResourceType.BROKER, str(i), set_config=s)
                for fut in admin.alter_configs([resource]).values():
                    fut.result(60)

        key = "listener.name.sasl_ssl.ssl."
        alter({i: {key + "keystore.location": str(p)} for i, p in new_keystores.items()})
        alter({i: {key + "keystore.location": str(p), key + "truststore.location": str(only_new)}
               for i, p in new_keystores.items()})  # fmt: skip
        for b in c.brokers:
            deadline = time.monotonic() + 60
            while "new connections to the other brokers use the new" not in (
                b.log_path.read_text(errors="replace")
            ):
                assert time.monotonic() < deadline, f"broker {b.broker_id} did not reload"
                time.sleep(0.2)
        leader = wait_zk_leader(c, topic, 0)
        controller = json.loads(zk_get(c, "/controller") or b"{}")["brokerid"]
        follower = next(b.broker_id for b in c.brokers
                        if b.broker_id not in (leader, controller))  # fmt: skip
        c.stop_broker(follower, kill=True)
        wait_for_isr(c, topic, 0, sorted({1, 2, 3} - {follower}), timeout=120)
        c.start_broker(follower, timeout=120)
        # back in the ISR: the controller reached it and it fetched from the leader,
        # all over connections made after the old CA was dropped
        wait_for_isr(c, topic, 0, [1, 2, 3], timeout=120)
        restarted = next(b for b in c.brokers if b.broker_id == follower)
        assert "SSL handshake failed" not in restarted.log_path.read_text(errors="replace")
    finally:
        c.stop(kill=True)
