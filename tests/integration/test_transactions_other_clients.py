"""Transactions with kafka-python's and kafkajs's transactional producers against a
single `kt broker`: commits and aborts, offsets sent to the transaction, fencing;
READ_COMMITTED consumers (librdkafka and kafka-python) see exactly the commits."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from test_transactions_clients import create, read_all

pytestmark = pytest.mark.integration

JS_DIR = Path(__file__).resolve().parents[1] / "js"


def kp_read_committed(bootstrap: str, topic: str, partitions: int, expect: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=3000)  # fmt: skip
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    c.seek_to_beginning()
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < expect and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        # Nothing more arrives (an aborted record would).
        for records in c.poll(timeout_ms=1000).values():
            got.extend(r.value for r in records)
    finally:
        c.close()
    return sorted(got)


def test_kafka_python_transactions(kt_broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    bs = kt_broker.bootstrap
    create(bs, "kp", 2)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="kp-tx")
    p.init_transactions()
    p.begin_transaction()
    for i in range(4):
        p.send("kp", b"c%d" % i, partition=i % 2)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(3):
        p.send("kp", b"a%d" % i, partition=i % 2)
    p.flush()
    p.abort_transaction()
    # Offsets sent to a transaction take effect with its commit.
    p.begin_transaction()
    p.send("kp", b"c-offsets", partition=0)
    p.send_offsets_to_transaction({TopicPartition("kp", 0): OffsetAndMetadata(3, "", -1)}, "kp-g")
    p.commit_transaction()
    p.close()
    committed = sorted([b"c%d" % i for i in range(4)] + [b"c-offsets"])
    assert kp_read_committed(bs, "kp", 2, 5) == committed
    assert read_all(bs, "kp", 2, expect=5) == committed
    probe = KafkaConsumer(bootstrap_servers=bs, group_id="kp-g", enable_auto_commit=False)
    try:
        assert probe.committed(TopicPartition("kp", 0)) == 3
    finally:
        probe.close()
    # A second producer with the same id fences the first.
    zombie = KafkaProducer(bootstrap_servers=bs, transactional_id="kp-fence")
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send("kp", b"zombie", partition=1).get(30)
    fresh = KafkaProducer(bootstrap_servers=bs, transactional_id="kp-fence")
    fresh.init_transactions()
    with pytest.raises(Exception) as info:
        zombie.commit_transaction()
    assert "Fenced" in type(info.value).__name__ or "Epoch" in type(info.value).__name__, info
    zombie.close(timeout=5)
    fresh.close()
    assert b"zombie" not in read_all(bs, "kp", 2, expect=5)


def _js(command: str, spec: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        ["node", str(JS_DIR / "kt-client.js"), command], input=json.dumps(spec).encode(),
        capture_output=True, timeout=120, env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
    )  # fmt: skip
    lines = proc.stdout.decode().strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"error": "no output"}
    if proc.returncode != 0 or "error" in result:
        raise AssertionError(f"kafkajs {command} failed: {result}\n{proc.stderr.decode()[-3000:]}")
    return result


def _b64(values: list[bytes]) -> list[str]:
    return [base64.b64encode(v).decode() for v in values]


def test_kafkajs_transactions(kt_broker) -> None:
    if shutil.which("node") is None or not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        pytest.fail("node and tests/js/node_modules/kafkajs are needed (scripts/setup)")
    from kafka import KafkaConsumer, TopicPartition

    bs = kt_broker.bootstrap
    create(bs, "js", 1)
    result = _js("transactions", {
        "brokers": [bs], "topic": "js", "transactionalId": "js-tx", "fence": True,
        "transactions": [
            {"commit": True, "values": _b64([b"c0", b"c1"])},
            {"commit": False, "values": _b64([b"a0"])},
            {"commit": True, "values": _b64([b"c2"]),
             "offsets": {"groupId": "js-g", "topic": "js", "partition": 0, "offset": 2}},
        ],
    })  # fmt: skip
    # kafkajs speaks EndTxn v1: the fenced zombie hears INVALID_PRODUCER_EPOCH (KIP-588).
    assert result["fencedError"] == "INVALID_PRODUCER_EPOCH", result
    expected = [b"c0", b"c1", b"c2", b"fresh"]
    assert read_all(bs, "js", 1, expect=4) == expected
    assert kp_read_committed(bs, "js", 1, 4) == expected
    probe = KafkaConsumer(bootstrap_servers=bs, group_id="js-g", enable_auto_commit=False)
    try:
        assert probe.committed(TopicPartition("js", 0)) == 2
    finally:
        probe.close()


def test_kafka_python_admin_reads_the_coordinators_view(kt_broker) -> None:
    """kafka-python's KIP-664 admin calls (ListTransactions on every broker,
    DescribeTransactions at the coordinator, DescribeProducers at the leader) parse
    kt's answers: an open transaction and a committed one."""
    from kafka import KafkaAdminClient, KafkaProducer, TopicPartition

    bs = kt_broker.bootstrap
    create(bs, "ka", 1)
    done = KafkaProducer(bootstrap_servers=bs, transactional_id="ka-done")
    done.init_transactions()
    done.begin_transaction()
    done.send("ka", b"x", partition=0)
    done.commit_transaction()
    done.close()
    open_ = KafkaProducer(bootstrap_servers=bs, transactional_id="ka-open",
                          transaction_timeout_ms=120_000)  # fmt: skip
    open_.init_transactions()
    open_.begin_transaction()
    open_.send("ka", b"y", partition=0).get(30)
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        listed = {t.transactional_id: t for ts in admin.list_transactions().values() for t in ts}
        assert listed["ka-done"].state.value == "CompleteCommit"
        assert listed["ka-open"].state.value == "Ongoing"
        ongoing = admin.list_transactions(state_filters=["Ongoing"])
        assert [t.transactional_id for ts in ongoing.values() for t in ts] == ["ka-open"]
        desc = admin.describe_transactions(["ka-open"])["ka-open"]
        assert desc.topic_partitions == {TopicPartition("ka", 0)}
        assert desc.transaction_timeout_ms == 120_000 and desc.transaction_start_time_ms > 0
        assert desc.producer_id == listed["ka-open"].producer_id
        states = admin.describe_producers([TopicPartition("ka", 0)])
        (active,) = [
            s
            for s in states[TopicPartition("ka", 0)].active_producers
            if s.producer_id == desc.producer_id
        ]
        assert active.current_transaction_start_offset == 2  # after "x" and its marker
    finally:
        admin.close()
        open_.abort_transaction()
        open_.close()
