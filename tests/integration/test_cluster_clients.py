"""Every client against the three-broker kt cluster, across a leader change (issue 10
§6, item 8): confluent-kafka, kafka-python and aiokafka keep one producer across the
change (so they must follow the new leader); kcat and kafkajs run before and after it
with the old leader first in their bootstrap list. Every client then reads the whole
partition back.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import (
    consume_all,
    create_topic,
    live_bootstrap,
    wait_all_led,
    wait_for,
    wait_metadata_leader,
    wait_zk_leader,
)

from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

JS_DIR = Path(__file__).resolve().parent.parent / "js"
TOPIC = "clients8"
N = 10  # records per client and phase
DEADLINE_S = 60


def _need_tools() -> None:
    # installed by scripts/setup; a missing one is an environment failure, not a skip
    assert shutil.which("kcat"), "kcat is not installed (scripts/setup)"
    assert shutil.which("node") and (JS_DIR / "node_modules" / "kafkajs").is_dir(), (
        "kafkajs is not installed (scripts/setup: npm ci in tests/js)"
    )


def _js(command: str, spec: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        ["node", str(JS_DIR / "kt-client.js"), command],
        input=json.dumps(spec).encode(),
        capture_output=True,
        timeout=90,
        env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
    )
    lines = proc.stdout.decode().strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"error": "no output"}
    assert proc.returncode == 0 and "error" not in result, (
        f"kafkajs {command} failed: {result}\n{proc.stderr.decode()[-3000:]}"
    )
    return result


class Producers:
    """One long-lived producer per Python client, plus kcat and kafkajs runs."""

    def __init__(self, bootstrap: str) -> None:
        from aiokafka import AIOKafkaProducer
        from confluent_kafka import Producer
        from kafka import KafkaProducer

        self.bootstrap = bootstrap
        self.confluent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                   "acks": "all", "message.timeout.ms": 60000})  # fmt: skip
        self.kafka_python = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                          acks="all", retries=2**31 - 1,
                                          delivery_timeout_ms=60000, request_timeout_ms=10000,
                                          metadata_max_age_ms=2000)  # fmt: skip
        self.loop = asyncio.new_event_loop()

        async def make() -> AIOKafkaProducer:
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                 acks="all", request_timeout_ms=10000,
                                 metadata_max_age_ms=2000)  # fmt: skip
            await p.start()
            return p

        self.aiokafka = self.loop.run_until_complete(make())

    def produce(self, phase: str) -> None:
        def vals(client: str) -> list[bytes]:
            return [f"{client}-{phase}-{i}".encode() for i in range(N)]

        for v in vals("confluent"):
            self.confluent.produce(TOPIC, value=v, partition=0)
        assert self.confluent.flush(DEADLINE_S) == 0, "confluent-kafka did not deliver"

        futures = [self.kafka_python.send(TOPIC, value=v, partition=0)
                   for v in vals("kafka-python")]  # fmt: skip
        for f in futures:
            f.get(timeout=DEADLINE_S)

        async def aio() -> None:
            for v in vals("aiokafka"):
                await self.aiokafka.send_and_wait(TOPIC, value=v, partition=0)

        self.loop.run_until_complete(asyncio.wait_for(aio(), DEADLINE_S))

        data = b"".join(v + b"\n" for v in vals("kcat"))
        subprocess.run(["kcat", "-b", self.bootstrap, "-t", TOPIC, "-p", "0", "-P",
                        "-X", "enable.idempotence=true", "-X", "acks=all"],
                       input=data, check=True, timeout=DEADLINE_S, capture_output=True)  # fmt: skip

        import base64

        _js("produce", {
            "brokers": self.bootstrap.split(","),
            "topic": TOPIC,
            "compression": "none",
            "idempotent": True,
            "batches": [[{"key": None, "value": base64.b64encode(v).decode(), "headers": {}}
                         for v in vals("kafkajs")]],
        })  # fmt: skip

    def close(self) -> None:
        self.confluent.flush(10)
        self.kafka_python.close(timeout=10)
        self.loop.run_until_complete(self.aiokafka.stop())
        self.loop.close()


def consume_kafka_python(bootstrap: str, count: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      fetch_max_wait_ms=100)  # fmt: skip
    tp = TopicPartition(TOPIC, 0)
    out: list[bytes] = []
    try:
        c.assign([tp])
        c.seek_to_beginning(tp)
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < count and time.monotonic() < deadline:
            out += [m.value for m in c.poll(timeout_ms=500).get(tp, [])]
    finally:
        c.close()
    return out


def consume_aiokafka(bootstrap: str, count: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[bytes]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, fetch_max_wait_ms=100)  # fmt: skip
        await c.start()
        tp = TopicPartition(TOPIC, 0)
        out: list[bytes] = []
        try:
            c.assign([tp])
            await c.seek_to_beginning(tp)
            deadline = time.monotonic() + DEADLINE_S
            while len(out) < count and time.monotonic() < deadline:
                batch = await c.getmany(tp, timeout_ms=500)
                out += [m.value for m in batch.get(tp, [])]
        finally:
            await c.stop()
        return out

    return asyncio.run(run())


def consume_kcat(bootstrap: str, count: int) -> list[bytes]:
    proc = subprocess.run(["kcat", "-b", bootstrap, "-t", TOPIC, "-p", "0", "-C", "-o",
                           "beginning", "-c", str(count), "-e", "-f", "%s\n"],
                          capture_output=True, check=True, timeout=DEADLINE_S)  # fmt: skip
    return proc.stdout.splitlines()


def consume_kafkajs(bootstrap: str, count: int) -> list[bytes]:
    import base64

    result = _js("fetch", {"brokers": bootstrap.split(","), "topic": TOPIC, "partition": 0,
                           "count": count, "timeoutMs": DEADLINE_S * 1000})  # fmt: skip
    return [base64.b64decode(m["value"]) for m in result["messages"]]


def test_every_client_follows_a_leader_change(cluster: LocalCluster) -> None:
    _need_tools()
    create_topic(cluster, TOPIC, "--replica-assignment", "1:2:3",
                 "--config", "min.insync.replicas=2")  # fmt: skip
    assert wait_zk_leader(cluster, TOPIC, 0) == 1
    # broker 1 (the leader) first: after the change the clients must look elsewhere
    bootstrap = cluster.bootstrap_servers
    producers = Producers(bootstrap)
    try:
        producers.produce("before")
        cluster.stop_broker(1)  # SIGTERM: leadership moves to 2
        assert wait_metadata_leader(cluster, TOPIC, 0, not_in=[1]) in (2, 3)
        # kafkajs fails a send when the Metadata it gets holds any leaderless partition
        # (of any topic): with full ISRs a controlled shutdown leaves none
        wait_all_led(cluster, timeout=30)
        producers.produce("after")
    finally:
        producers.close()

    clients = ["confluent", "kafka-python", "aiokafka", "kcat", "kafkajs"]
    total = len(clients) * 2 * N
    oracle = [v for _, _, v in consume_all(live_bootstrap(cluster), TOPIC, 0, total)]
    assert len(oracle) == total and len(set(oracle)) == total
    for client in clients:
        mine = [v for v in oracle if v.startswith(client.encode() + b"-")]
        assert mine == [f"{client}-{phase}-{i}".encode() for phase in ("before", "after")
                        for i in range(N)], client  # fmt: skip

    readers = {
        "kafka-python": consume_kafka_python,
        "aiokafka": consume_aiokafka,
        "kcat": consume_kcat,
        "kafkajs": consume_kafkajs,
    }
    for name, read in readers.items():
        got = wait_for(lambda read=read: read(bootstrap, total), f"{name} to read {total}",
                       timeout=120)  # fmt: skip
        assert got == oracle, f"{name} read something else"
    cluster.start_broker(1)
