"""GSSAPI between brokers (`sasl.mechanism.inter.broker.protocol=GSSAPI`) against a
real MIT KDC: two `kt broker` processes on one ZooKeeper whose inter-broker listener
is SASL_PLAINTEXT with GSSAPI log in with their keytab (`listener.name.<l>.gssapi.
sasl.jaas.config`), so the controller's requests reach the follower and the follower
replicates: the ISR fills, and an acks=all record is acknowledged by both. The
service name comes from `sasl.kerberos.service.name` or, as Kafka also takes it, from
the Krb5LoginModule entry's `serviceName`."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_harness import BrokerProcess, free_port
from kdc_harness import AVAILABLE, REALM, Kdc

pytest.importorskip("gssapi", reason="the gssapi binding is not installed")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.cluster,
    pytest.mark.skipif(not AVAILABLE, reason="krb5-kdc is not installed"),
]


@pytest.fixture(params=["property", "jaas"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[BrokerProcess]]:
    from kt.tools.local_cluster import LocalZooKeeper

    kdc = Kdc(tmp_path / "kdc").start()
    saved = {key: os.environ.get(key) for key in kdc.env}
    os.environ.update(kdc.env)  # the brokers inherit the KDC's krb5.conf
    zk = LocalZooKeeper(tmp_path / "zk")
    brokers: list[BrokerProcess] = []
    try:
        keytab = kdc.add("kafka/localhost")
        zk.start(timeout=60)
        jaas = (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
            f'storeKey=true keyTab="{keytab}" principal="kafka/localhost@{REALM}"'
        )
        if request.param == "jaas":
            jaas += ' serviceName="kafka";'
            service = {}
        else:
            jaas += ";"
            service = {"sasl.kerberos.service.name": "kafka"}
        for broker_id in (1, 2):
            plain, internal = free_port(), free_port()
            overrides = {
                "broker.id": str(broker_id),
                "zookeeper.connect": zk.address,
                "listeners": f"PLAINTEXT://127.0.0.1:{plain},INTERNAL://localhost:{internal}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL",
                "sasl.mechanism.inter.broker.protocol": "GSSAPI",
                "listener.name.internal.sasl.enabled.mechanisms": "GSSAPI",
                "listener.name.internal.gssapi.sasl.jaas.config": jaas,
                **service,
                "offsets.topic.replication.factor": "2",
                "offsets.topic.num.partitions": "1",
                "group.initial.rebalance.delay.ms": "0",
            }
            b = BrokerProcess(tmp_path / f"b{broker_id}" / "data", plain, overrides)
            (tmp_path / f"b{broker_id}").mkdir()
            brokers.append(b.start(timeout=120))
        yield brokers
    finally:
        for b in brokers:
            b.stop()
        zk.stop()
        kdc.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_brokers_replicate_over_gssapi(cluster: list[BrokerProcess]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    admin.create_topics([NewTopic("krb-repl", 1, 2, config={"min.insync.replicas": "2"})])[
        "krb-repl"
    ].result(60)
    deadline = time.monotonic() + 120
    isr: Any = []
    while time.monotonic() < deadline:
        md = admin.list_topics("krb-repl", timeout=15)
        part = md.topics["krb-repl"].partitions.get(0)
        isr = sorted(part.isrs) if part is not None else []
        if isr == [1, 2]:
            break
        time.sleep(0.2)
    logs = "\n".join(b.log()[-2000:] for b in cluster)
    assert isr == [1, 2], logs
    # min.insync.replicas=2: acknowledged only once the follower fetched it over GSSAPI
    p = Producer({"bootstrap.servers": cluster[0].bootstrap, "acks": "all"})
    acked: list[Any] = []
    p.produce("krb-repl", b"kerberos", on_delivery=lambda err, msg: acked.append(err))
    assert p.flush(60) == 0
    assert acked == [None]
    for b in cluster:
        assert "Failed authentication" not in b.log()
    # the brokers asked the KDC for tickets to each other's service principal
    kdc_log = (cluster[0].data_dir.parent.parent / "kdc" / "kdc.log").read_text()
    assert f"kafka/localhost@{REALM} for kafka/localhost@{REALM}" in kdc_log
