"""A three-broker ZooKeeper cluster secured end to end (issue 21): every listener,
the inter-broker one included, is SASL_SSL with SCRAM-SHA-512, the brokers' SCRAM
credential is written to ZooKeeper in Kafka's format before any broker starts, and
an ACL authorizer runs with the brokers' user as super user (so their inter-broker
requests pass CLUSTER_ACTION). confluent-kafka and kafka-python produce
idempotently with acks=all while the partition leader is SIGKILLed; everything
acknowledged is then read back through consumer groups by both clients.

The cluster is `kt cluster up --secure`'s (LocalCluster with secure=True): certificates
from a CA made on the spot, hostname verification on the brokers' own connections.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import (
    read_all_confluent,
    start_cluster,
    wait_for,
    wait_for_isr,
    wait_zk_leader,
    zk_get,
)

from kt.tools.local_cluster import LocalCluster
from kt.tools.local_cluster_security import files_for

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TOPIC = "secured"
N = 150  # records per producer
DEADLINE_S = 120.0


def _props(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k] = v
    return out


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("secure-cluster"), 3, racks=None, secure=True)
    try:
        yield c
    finally:
        c.stop(kill=True)


def _confluent_conf(c: LocalCluster) -> dict[str, Any]:
    p = _props(files_for(c.directory).client_properties)
    return {
        "bootstrap.servers": c.bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": p["sasl.username"],
        "sasl.password": p["sasl.password"],
        "ssl.ca.location": p["ssl.ca.location"],
    }


def _kafka_python_conf(c: LocalCluster) -> dict[str, Any]:
    p = _props(files_for(c.directory).client_properties)
    return {
        "bootstrap_servers": c.bootstrap_servers.split(","),
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": p["sasl.username"],
        "sasl_plain_password": p["sasl.password"],
        "ssl_cafile": p["ssl.ca.location"],
    }


def test_setup_is_kafkas(secure_cluster: LocalCluster) -> None:
    """The credential is in ZooKeeper as Kafka stores it, every broker registered a
    SASL_SSL endpoint, and no key or password is world-readable."""
    c = secure_cluster
    doc = json.loads(zk_get(c, "/config/users/admin") or b"{}")
    cred = doc["config"]["SCRAM-SHA-512"]
    assert doc["version"] == 1
    assert [f.split("=", 1)[0] for f in cred.split(",")] == [
        "salt", "stored_key", "server_key", "iterations"]  # fmt: skip
    for b in c.brokers:
        reg = json.loads(zk_get(c, f"/brokers/ids/{b.broker_id}") or b"{}")
        assert reg["endpoints"] == [f"SASL_SSL://{b.bootstrap}"]
    files = files_for(c.directory)
    for path in (files.ca_key, files.client_properties, files.broker_properties,
                 files.keystore(1)):  # fmt: skip
        assert path.stat().st_mode & 0o077 == 0, path
    password = _props(files.client_properties)["sasl.password"]
    for b in c.brokers:
        assert password not in b.log_path.read_text(errors="replace")
        assert password not in (c.directory / "cluster.json").read_text()


def test_no_acknowledged_record_is_lost_when_the_leader_is_killed(
    secure_cluster: LocalCluster,
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer, KafkaProducer

    c = secure_cluster
    admin = AdminClient(_confluent_conf(c))
    fut = admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC]
    fut.result(timeout=60)
    # the followers replicate over SASL_SSL: the ISR fills only if they can
    wait_for_isr(c, TOPIC, 0, [1, 2, 3], timeout=DEADLINE_S)
    leader = wait_zk_leader(c, TOPIC, 0)

    acked: list[bytes] = []
    lock = threading.Lock()
    half = threading.Event()

    def confluent() -> None:
        p = Producer({**_confluent_conf(c), "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 120000})  # fmt: skip

        def done(err: Any, msg: Any) -> None:
            if err is None:
                with lock:
                    acked.append(msg.value())

        for i in range(N):
            p.produce(TOPIC, f"ck-{i}".encode(), partition=0, on_delivery=done)
            p.poll(0)
            if i == N // 2:
                p.flush(60)
                half.set()
            time.sleep(0.01)
        p.flush(150)

    def kafka_python() -> None:
        p = KafkaProducer(**_kafka_python_conf(c), acks="all", enable_idempotence=True,
                          retries=2**31 - 1, request_timeout_ms=30000,
                          delivery_timeout_ms=120000, linger_ms=5)  # fmt: skip
        futures = []
        for i in range(N):
            futures.append((f"kp-{i}".encode(), p.send(TOPIC, f"kp-{i}".encode(), partition=0)))
            time.sleep(0.01)
        for value, f in futures:
            try:
                f.get(timeout=150)
            except Exception:
                continue  # not acknowledged: may be lost
            with lock:
                acked.append(value)
        p.close(timeout=30)

    threads = [threading.Thread(target=confluent), threading.Thread(target=kafka_python)]
    for t in threads:
        t.start()
    assert half.wait(DEADLINE_S), "the confluent producer did not get half way"
    c.stop_broker(leader, kill=True)
    for t in threads:
        t.join(DEADLINE_S + 60)
        assert not t.is_alive()
    new_leader = wait_zk_leader(c, TOPIC, 0, not_in=[leader])
    assert new_leader != leader
    # both producers got (nearly) everything through the leader change
    assert len(acked) >= N, len(acked)

    want = set(acked)
    # the killed broker comes back and catches up from the new leader over SASL_SSL
    # (and the groups' __consumer_offsets, replication factor 3, can be made)
    c.start_broker(leader, timeout=DEADLINE_S)
    wait_for_isr(c, TOPIC, 0, [1, 2, 3], timeout=DEADLINE_S)
    live = c.bootstrap_servers

    def read_confluent() -> set[bytes]:
        conf = {**_confluent_conf(c), "bootstrap.servers": live, "group.id": "secured-confluent"}
        return read_all_confluent(conf, TOPIC, want, DEADLINE_S)

    def read_kafka_python() -> set[bytes]:
        got: set[bytes] = set()
        conf = {**_kafka_python_conf(c), "bootstrap_servers": live.split(",")}
        cons = KafkaConsumer(TOPIC, **conf, group_id="secured-kafka-python",
                             auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
        deadline = time.monotonic() + DEADLINE_S
        try:
            while not want <= got and time.monotonic() < deadline:
                for records in cons.poll(timeout_ms=1000).values():
                    got.update(r.value for r in records)
            cons.commit()
        finally:
            cons.close()
        return got

    for name, read in (("confluent-kafka", read_confluent), ("kafka-python", read_kafka_python)):
        got = read()
        assert not want - got, f"{name}: acknowledged but not read: {sorted(want - got)[:10]}"
        # idempotence: nothing written twice, nothing foreign
        assert got <= {f"{k}-{i}".encode() for k in ("ck", "kp") for i in range(N)}

    # the groups' commits went through the coordinators (over SASL_SSL as well)
    assert wait_for(
        lambda: "secured-confluent" in {g.group_id for g in
                                         admin.list_consumer_groups().result(timeout=30).valid},
        "the confluent group to be listed",
    )  # fmt: skip
