"""The broker's log cleaner end to end: real clients, a compacted topic, and
__consumer_offsets kept small under commit churn."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

CLEANER = {
    "log.cleaner.backoff.ms": "100",
    "log.cleaner.min.cleanable.ratio": "0.01",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.segment.bytes": "8192",
}


def _log_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.glob("*.log"))


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _consume_all(bootstrap: str, topic: str) -> list[tuple[bytes, bytes | None]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[bytes, bytes | None]] = []
        deadline = time.monotonic() + 20
        last = -1
        while last < high - 1 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.key(), msg.value()))
            last = msg.offset()
        assert last == high - 1
        return out
    finally:
        c.close()


def test_compacted_topic_and_offsets_churn(broker_factory: Any) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = broker_factory(**CLEANER)
    data = broker.data_dir
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = "users"
    configs = {"cleanup.policy": "compact", "segment.bytes": "16384"}
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])["users"].result(10)

    # Batches well under segment.bytes (a batch larger than a segment is refused).
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2, "batch.size": 2000})
    expected: dict[bytes, bytes] = {}
    errors: list[Any] = []
    for i in range(3000):
        key, value = b"user-%d" % (i % 40), b"profile-%d" % i
        p.produce(topic, key=key, value=value,
                  on_delivery=lambda err, _m: err and errors.append(err))  # fmt: skip
        expected[key] = value
        if i % 500 == 0:
            p.flush(10)
    assert p.flush(10) == 0
    assert not errors
    written = _log_bytes(data / "users-0")

    _wait(lambda: (data / "cleaner-offset-checkpoint").exists()
          and _log_bytes(data / "users-0") < written / 4, 30, "the cleaner")  # fmt: skip
    seen = _consume_all(broker.bootstrap, topic)
    latest: dict[bytes, bytes | None] = {}
    for k, v in seen:
        latest[k] = v
    assert latest == expected
    assert len(seen) < 3000 / 4

    # A consumer group committing in a tight loop: __consumer_offsets stays small.
    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "churn",
                      "enable.auto.commit": False})  # fmt: skip
    tp = TopicPartition(topic, 0)
    for n in range(1, 2001):
        group.commit(offsets=[TopicPartition(topic, 0, n)], asynchronous=False)
    group.close()
    offsets_dir = data / "__consumer_offsets-0"
    # Uncompacted that is well over 100 kB; compaction keeps a few segments.
    _wait(lambda: _log_bytes(offsets_dir) < 40_000, 30, "__consumer_offsets to be cleaned")

    broker.restart()
    check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "churn",
                      "enable.auto.commit": False})  # fmt: skip
    try:
        committed = check.committed([tp], timeout=10)
        assert committed[0].offset == 2000
    finally:
        check.close()
    assert _log_bytes(offsets_dir) < 40_000
    seen = _consume_all(broker.bootstrap, topic)
    assert {k: v for k, v in seen} == expected
    assert "cleaned users-0" in broker.log()
