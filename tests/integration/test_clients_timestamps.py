"""Timestamps as clients see them: LogAppendTime topics, seeking by time, ListOffsets.

Offsets-for-times answers "the first offset whose timestamp is >= T" (none when
no record is that late), over several segments (small segment.bytes) and with
timestamps that are not monotonic. Every client must get the same answers.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time

import pytest

pytestmark = pytest.mark.integration

T0 = 1_600_000_000_000
COUNT = 60
# Create times: one second apart, except offset 30, stamped later than everything
# up to offset 44, and offset 50, stamped earlier than its neighbours.
STAMPS = [T0 + 1000 * i for i in range(COUNT)]
STAMPS[30] = T0 + 1000 * 44 + 500
STAMPS[50] = T0 + 1000 * 20 + 500
TARGETS = sorted(
    {T0 - 5000, T0, STAMPS[-1], STAMPS[-1] + 1, T0 + 10**9}
    | {T0 + 1000 * k - 500 for k in range(0, COUNT + 1, 3)}
    | {T0 + 1000 * k for k in (29, 30, 31, 44, 45, 50)}
)


def expected_offset(target: int) -> int | None:
    """The first offset with a timestamp >= target."""
    return next((i for i, ts in enumerate(STAMPS) if ts >= target), None)


@pytest.fixture(scope="module")
def ts_broker(tmp_path_factory: pytest.TempPathFactory):
    """A broker with small segments, and a topic of COUNT records stamped STAMPS,
    written in batches of 7 by kafka-python."""
    from broker_harness import BrokerProcess, free_port
    from kafka import KafkaProducer

    b = BrokerProcess(
        tmp_path_factory.mktemp("ts") / "data", free_port(), {"log.segment.bytes": "2048"}
    ).start()
    producer = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=50)
    try:
        for start in range(0, COUNT, 7):
            for i in range(start, min(start + 7, COUNT)):
                producer.send(
                    "stamped", value=b"%d" % i + b"." * 100, timestamp_ms=STAMPS[i], partition=0
                )
            producer.flush(10)
    finally:
        producer.close(timeout=5)
    segments = list((b.data_dir / "stamped-0").glob("*.log"))
    assert len(segments) > 2, "the records should span several segments"
    yield b
    b.kill()


def test_offsets_for_times_kafka_python(ts_broker) -> None:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition("stamped", 0)
    consumer = KafkaConsumer(bootstrap_servers=ts_broker.bootstrap, group_id=None)
    try:
        for target in TARGETS:
            found = consumer.offsets_for_times({tp: target})[tp]
            want = expected_offset(target)
            if want is None:
                assert found is None, target
            else:
                assert found is not None, target
                assert (found.offset, found.timestamp) == (want, STAMPS[want]), target
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: COUNT}
    finally:
        consumer.close()


def test_offsets_for_times_confluent(ts_broker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": ts_broker.bootstrap, "group.id": "kt-unused"})
    try:
        found = consumer.offsets_for_times(
            [TopicPartition("stamped", 0, t) for t in TARGETS[:1]], timeout=10
        )
        for target in TARGETS:
            (found,) = consumer.offsets_for_times(
                [TopicPartition("stamped", 0, target)], timeout=10
            )
            assert found.error is None
            want = expected_offset(target)
            assert found.offset == (-1 if want is None else want), target
        assert consumer.get_watermark_offsets(
            TopicPartition("stamped", 0), timeout=10, cached=False
        ) == (0, COUNT)
        # Seeking by time and consuming from there: the record at the found offset.
        (tp,) = consumer.offsets_for_times(
            [TopicPartition("stamped", 0, T0 + 1000 * 44)], timeout=10
        )
        consumer.assign([tp])
        msg = None
        deadline = time.monotonic() + 10
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
        assert msg is not None and msg.error() is None
        assert (msg.offset(), msg.timestamp()[1]) == (30, STAMPS[30])
    finally:
        consumer.close()


def test_offsets_for_times_aiokafka(ts_broker) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    tp = TopicPartition("stamped", 0)

    async def run() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=ts_broker.bootstrap, group_id=None)
        await consumer.start()
        try:
            for target in TARGETS[::2]:
                found = (await consumer.offsets_for_times({tp: target}))[tp]
                want = expected_offset(target)
                assert (found and found.offset) == want, target
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: COUNT}
        finally:
            await consumer.stop()

    asyncio.run(run())


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by scripts/setup")
def test_offsets_for_times_kcat(ts_broker) -> None:
    for target in (T0 + 1000 * 7 - 500, T0 + 1000 * 31, T0 + 10**9):
        out = subprocess.run(
            ["kcat", "-b", ts_broker.bootstrap, "-Q", "-t", f"stamped:0:{target}"],
            capture_output=True,
            check=True,
            timeout=20,
        ).stdout.decode()
        want = expected_offset(target)
        assert f"offset {-1 if want is None else want}" in out, (target, out)


def _list_offsets_raw(
    bootstrap: str, topic: str, timestamp: int, version: int = 7
) -> tuple[int, int]:
    """(offset, timestamp) from a ListOffsets request built with kt.protocol."""
    from kt.protocol import ClientConnection, apis

    conn = ClientConnection()
    _, data = conn.send_request(
        apis.LIST_OFFSETS.key,
        version,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
                    ],
                }
            ],
        },
    )
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(data)
        for _ in range(100):
            responses = conn.receive_data(sock.recv(65536))
            if responses:
                (part,) = responses[0].body.topics[0].partitions
                assert part.error_code == 0
                return part.offset, part.timestamp
    raise AssertionError("no ListOffsets response")


def test_list_offsets_special_timestamps(ts_broker) -> None:
    """EARLIEST (-2), LATEST (-1) and MAX_TIMESTAMP (-3, KIP-734): the exact record."""
    assert _list_offsets_raw(ts_broker.bootstrap, "stamped", -2)[0] == 0
    assert _list_offsets_raw(ts_broker.bootstrap, "stamped", -1)[0] == COUNT
    top = max(range(COUNT), key=lambda i: (STAMPS[i], -i))
    assert _list_offsets_raw(ts_broker.bootstrap, "stamped", -3) == (top, STAMPS[top])


def test_empty_topic_offsets(ts_broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(bootstrap_servers=ts_broker.bootstrap)
    try:
        assert p.partitions_for("empty") == {0}  # auto-created by the metadata request
    finally:
        p.close()
    tp = TopicPartition("empty", 0)
    consumer = KafkaConsumer(bootstrap_servers=ts_broker.bootstrap, group_id=None)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 0}
        assert consumer.offsets_for_times({tp: 0}) == {tp: None}
    finally:
        consumer.close()
    assert _list_offsets_raw(ts_broker.bootstrap, "empty", -3) == (-1, -1)


def test_log_append_time_topic(broker_factory) -> None:
    """With log.message.timestamp.type=LogAppendTime the broker stamps every batch:
    producers learn the stamp from the produce response, consumers see it (with the
    LogAppendTime type) whatever create time the producer set, compressed or not."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    broker = broker_factory(**{"log.message.timestamp.type": "LogAppendTime"})
    old = T0  # a create time the broker must override
    before = int(time.time() * 1000)
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
    try:
        metas = [kp.send("lat", value=b"kp%d" % i, timestamp_ms=old, partition=0) for i in range(5)]
        kp.flush(10)
        kp_stamps = [m.get(timeout=10).timestamp for m in metas]
    finally:
        kp.close(timeout=5)
    cp = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    reports: list[tuple[int, int]] = []
    for i in range(5):
        cp.produce(
            "lat",
            value=b"cp%d" % i,
            timestamp=old,
            partition=0,
            on_delivery=lambda err, msg: reports.append(msg.timestamp()),
        )
    assert cp.flush(10) == 0
    after = int(time.time() * 1000)
    assert all(before <= ts <= after for ts in kp_stamps), (before, kp_stamps, after)
    assert len(reports) == 5
    assert all(t == TIMESTAMP_LOG_APPEND_TIME and before <= ts <= after for t, ts in reports)

    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    tp = KTP("lat", 0)
    kc.assign([tp])
    kc.seek_to_beginning(tp)
    got = []
    deadline = time.monotonic() + 10
    while len(got) < 10 and time.monotonic() < deadline:
        got += kc.poll(timeout_ms=500).get(tp, [])
    # Seeking by time finds the appends, not the create times.
    assert kc.offsets_for_times({tp: old})[tp].offset == 0
    assert kc.offsets_for_times({tp: after + 60_000})[tp] is None
    kc.close()
    assert [m.value for m in got] == [b"kp%d" % i for i in range(5)] + [
        b"cp%d" % i for i in range(5)
    ]
    assert all(m.timestamp_type == 1 and before <= m.timestamp <= after for m in got)
    assert [m.timestamp for m in got[:5]] == kp_stamps

    cc = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kt-unused"})
    cc.assign([TopicPartition("lat", 0, 0)])
    msgs = []
    deadline = time.monotonic() + 10
    while len(msgs) < 10 and time.monotonic() < deadline:
        msgs += [m for m in cc.consume(10, timeout=0.5) if m.error() is None]
    cc.close()
    assert [m.timestamp() for m in msgs] == [(TIMESTAMP_LOG_APPEND_TIME, m.timestamp) for m in got]
