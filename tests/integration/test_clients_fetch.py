"""Fetch as clients rely on it: long polling, size limits, large and too-large records.

- A consumer waiting with fetch.wait.max.ms=5000 gets a record produced while it
  waits at once, not when its wait runs out; an idle fetch returns after max_wait.
- max.partition.fetch.bytes smaller than a batch still returns that batch (the
  at-least-one-batch rule), so consumers never get stuck.
- Records up to max.message.bytes are accepted and read back; a larger batch is
  refused with MESSAGE_TOO_LARGE, which the producer surfaces.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest
from broker_harness import RawConnection

pytestmark = pytest.mark.integration

MAX_MESSAGE_BYTES = 300_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    from broker_harness import BrokerProcess, free_port

    b = BrokerProcess(
        tmp_path_factory.mktemp("fetch") / "data",
        free_port(),
        {"message.max.bytes": str(MAX_MESSAGE_BYTES)},
    ).start()
    yield b
    b.kill()


class Raw(RawConnection):
    """A raw connection with a Fetch v12 of exact parameters."""

    def fetch(
        self,
        topic: str,
        offset: int,
        *,
        max_wait_ms: int,
        partition_max_bytes: int,
        max_bytes: int = 50 << 20,
        partitions: tuple[int, ...] = (0,),
    ) -> Any:
        return self.call(
            1,
            12,
            {
                "replica_id": -1,
                "max_wait_ms": max_wait_ms,
                "min_bytes": 1,
                "max_bytes": max_bytes,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": p,
                                "current_leader_epoch": -1,
                                "fetch_offset": offset,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": partition_max_bytes,
                            }
                            for p in partitions
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )


def _batches(records: bytes) -> list[tuple[int, int]]:
    """(base offset, size) of each whole batch in a records blob."""
    out = []
    pos = 0
    while pos + 12 <= len(records):
        base = int.from_bytes(records[pos : pos + 8], "big")
        size = 12 + int.from_bytes(records[pos + 8 : pos + 12], "big")
        if pos + size > len(records):
            break
        out.append((base, size))
        pos += size
    return out


def _produce(bootstrap: str, topic: str, values: list[bytes], **config: object) -> list[int]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    try:
        futures = [producer.send(topic, value=v, partition=0) for v in values]
        producer.flush(20)
        return [f.get(timeout=20).offset for f in futures]
    finally:
        producer.close(timeout=5)


def test_long_poll_wakes_on_append_confluent(broker) -> None:
    """fetch.wait.max.ms=15000: a record produced 300 ms into the wait arrives well
    before the wait would have ended (half of it: a busy machine is slow, not 7 s
    slow; without the wake-up the record would wait out the 15 s)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = "longpoll"
    _produce(broker.bootstrap, topic, [b"first"])
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "kt-unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 15000,
            "fetch.min.bytes": 1,
        }
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        first = None
        deadline = time.monotonic() + 10
        while first is None and time.monotonic() < deadline:
            first = consumer.poll(0.2)
        assert first is not None and first.value() == b"first"
        producer.list_topics(topic, timeout=10)  # connected before the clock starts
        latencies = []
        for i in range(3):
            acked: list[float] = []

            def send(i: int = i, acked: list[float] = acked) -> None:
                time.sleep(0.3)  # the consumer is parked in its 15 s fetch by now
                producer.produce(
                    topic,
                    value=b"late-%d" % i,
                    partition=0,
                    on_delivery=lambda e, m: acked.append(time.monotonic()),
                )
                producer.flush(10)

            t = threading.Thread(target=send)
            t.start()
            msg = None
            deadline = time.monotonic() + 10
            while msg is None and time.monotonic() < deadline:
                msg = consumer.poll(0.05)
            received = time.monotonic()
            t.join()
            assert msg is not None and msg.value() == b"late-%d" % i
            assert acked, "the produce was not acknowledged"
            latencies.append(received - acked[0])
        # Without the wake-up the record would come when the 15 s wait ends.
        assert max(latencies) < 7.5, latencies
    finally:
        consumer.close()


def test_long_poll_raw_wakes_and_idle_fetch_waits_max_wait(broker) -> None:
    """At the log end, a fetch answers when a record arrives (not at max_wait); with
    nothing arriving it answers after max_wait, neither earlier nor much later; and
    a parked fetch does not hold up other connections.

    The bounds hold on a busy machine: the woken fetch must beat a 12 s max_wait, and
    the other connection must be answered while the parked fetch still waits."""
    topic = "longpoll-raw"
    end = len(_produce(broker.bootstrap, topic, [b"x"]))
    raw = Raw(broker.bootstrap)
    try:
        start = time.monotonic()
        resp = raw.fetch(topic, end, max_wait_ms=700, partition_max_bytes=1 << 20)
        idle = time.monotonic() - start
        part = resp.responses[0].partitions[0]
        assert part.error_code == 0 and not part.records
        assert 0.65 <= idle < 5.0, idle

        result: dict[str, Any] = {}

        def parked() -> None:
            r = Raw(broker.bootstrap)
            t0 = time.monotonic()
            # 12 s: under the 15 s socket timeout of Raw
            result["resp"] = r.fetch(topic, end, max_wait_ms=12000, partition_max_bytes=1 << 20)
            result["waited"] = time.monotonic() - t0
            r.close()

        t = threading.Thread(target=parked)
        t.start()
        time.sleep(0.3)
        # Other connections are served while that fetch waits.
        meta = raw.call(
            3,
            12,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        assert meta.brokers and t.is_alive(), "metadata waited for the parked fetch"
        _produce(broker.bootstrap, topic, [b"wake"])
        t.join(15)
        assert not t.is_alive()
        waited = result["waited"]
        # the timer starts after t0, so a fetch that waited max_wait out took >= 12 s
        assert isinstance(waited, float) and waited < 11.0, waited
        records = result["resp"].responses[0].partitions[0].records
        assert records and _batches(bytes(records))[0][0] == end
    finally:
        raw.close()


def test_partition_max_bytes_smaller_than_a_batch(broker) -> None:
    """A 64 KB batch comes back whole to a fetch allowing 1 KB per partition, and
    only that batch; kafka-python with tiny fetch limits still reads everything."""
    from kafka import KafkaConsumer, TopicPartition

    topic = "bigbatch"
    values = [os.urandom(64) * 16 for _ in range(64)]  # one batch of ~64 KB
    _produce(broker.bootstrap, topic, values, linger_ms=500, batch_size=1 << 20)
    _produce(broker.bootstrap, topic, [b"after"])
    raw = Raw(broker.bootstrap)
    try:
        resp = raw.fetch(topic, 0, max_wait_ms=0, partition_max_bytes=1024)
        records = bytes(resp.responses[0].partitions[0].records)
        batches = _batches(records)
        assert len(batches) == 1 and batches[0][0] == 0 and batches[0][1] > 64 * 1024
        assert len(records) == batches[0][1]
        # The response-wide max_bytes is no different.
        resp = raw.fetch(topic, 0, max_wait_ms=0, partition_max_bytes=1 << 20, max_bytes=10)
        records = bytes(resp.responses[0].partitions[0].records)
        assert [b for b, _ in _batches(records)] == [0]
        # Mid-batch fetch offsets return the batch holding them.
        resp = raw.fetch(topic, 33, max_wait_ms=0, partition_max_bytes=1)
        records = bytes(resp.responses[0].partitions[0].records)
        assert [b for b, _ in _batches(records)] == [0]
    finally:
        raw.close()

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        max_partition_fetch_bytes=1024,
        fetch_max_bytes=1024,
        fetch_max_wait_ms=100,
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    deadline = time.monotonic() + 15
    while len(got) < 65 and time.monotonic() < deadline:
        got += consumer.poll(timeout_ms=300).get(tp, [])
    consumer.close()
    assert [m.value for m in got] == [*values, b"after"]


def test_small_fetch_limits_confluent(broker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = "bigbatch-confluent"
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "compression.type": "lz4"}
    )
    values = [os.urandom(100) * 20 for _ in range(50)]
    for v in values:
        producer.produce(topic, value=v, partition=0)
    assert producer.flush(10) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "kt-unused",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 1024,
            "fetch.max.bytes": 1024,
            "message.max.bytes": 1000,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 15
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            for m in consumer.consume(100, timeout=0.3):
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        consumer.close()
    assert got == values


def test_large_messages_up_to_max_message_bytes(broker) -> None:
    """A record just under max.message.bytes goes through every client; one over is
    refused with MESSAGE_TOO_LARGE and the producers say so."""
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import MessageSizeTooLargeError

    topic = "large"
    fits = os.urandom(MAX_MESSAGE_BYTES - 200)
    assert _produce(broker.bootstrap, topic, [fits], max_request_size=1 << 21) == [0]

    reports: list[object] = []
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "message.max.bytes": 1 << 21, "linger.ms": 0}
    )
    for value in (fits[::-1], os.urandom(MAX_MESSAGE_BYTES + 1000)):
        producer.produce(
            topic, value=value, partition=0, on_delivery=lambda err, msg: reports.append(err)
        )
        assert producer.flush(20) == 0  # one batch each
    assert len(reports) == 2 and reports[0] is None and reports[1] is not None
    assert reports[1].code() == KafkaError.MSG_SIZE_TOO_LARGE, reports[1]

    with pytest.raises(MessageSizeTooLargeError):
        _produce(
            broker.bootstrap,
            topic,
            [os.urandom(MAX_MESSAGE_BYTES + 1000)],
            max_request_size=1 << 21,
            retries=0,
        )

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        max_partition_fetch_bytes=1024,
        fetch_max_wait_ms=100,
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    deadline = time.monotonic() + 15
    while len(got) < 2 and time.monotonic() < deadline:
        got += consumer.poll(timeout_ms=300).get(tp, [])
    consumer.close()
    assert [m.value for m in got] == [fits, fits[::-1]]
    # Nothing of the refused batches was written.
    assert [m.offset for m in got] == [0, 1]


def test_out_of_range_offsets_reset(broker) -> None:
    """A fetch past the log end gets OFFSET_OUT_OF_RANGE at once (no long poll);
    consumers then reset by auto.offset.reset and read from the start or the end."""
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    topic = "out-of-range"
    _produce(broker.bootstrap, topic, [b"a", b"b", b"c"])
    raw = Raw(broker.bootstrap)
    try:
        for offset in (4, 1000, -5):
            start = time.monotonic()
            resp = raw.fetch(topic, offset, max_wait_ms=12000, partition_max_bytes=1 << 20)
            part = resp.responses[0].partitions[0]
            assert part.error_code == 1 and part.high_watermark == 3, offset  # OFFSET_OUT_OF_RANGE
            # a long poll would take the whole 12 s; a busy machine is not that slow
            assert time.monotonic() - start < 6, offset
    finally:
        raw.close()

    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "kt-unused",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 1000)])
    got: list[bytes] = []
    deadline = time.monotonic() + 10
    try:
        while len(got) < 3 and time.monotonic() < deadline:
            for m in consumer.consume(10, timeout=0.3):
                if m.error() is None:
                    got.append(m.value())
    finally:
        consumer.close()
    assert got == [b"a", b"b", b"c"]

    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                       auto_offset_reset="latest")  # fmt: skip
    tp = KTP(topic, 0)
    kc.assign([tp])
    kc.seek(tp, 1000)
    kc.poll(timeout_ms=500)
    position = kc.position(tp)
    kc.close()
    assert position == 3
