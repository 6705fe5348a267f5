"""Restarts: data survives a clean stop and a kill -9; a torn tail is cut; one broker
per data directory.

- SIGTERM, start again: every record there, offsets continue, topic and cluster ids
  unchanged, no recovery needed (the clean-shutdown marker).
- kill -9 while a producer with acks=all is busy (log.flush.interval.messages=1):
  after the restart every acknowledged record is at its acknowledged offset, the
  offsets have no gaps, and `kt index verify` finds nothing wrong.
- Bytes appended to the active segment after a kill -9 (a torn write) are
  truncated by recovery, which the broker logs; consuming and producing go on.
- A second broker on a data directory in use exits at once, non-zero, with one line.
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration


def _metadata(bootstrap: str, topics: list[str]) -> tuple[str, dict[str, object]]:
    """(cluster id, topic name -> topic id) from a raw Metadata v12 request."""
    from kt.protocol import ClientConnection

    conn = ClientConnection()
    _, data = conn.send_request(
        3,
        12,
        {
            "topics": [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(data)
        for _ in range(100):
            responses = conn.receive_data(sock.recv(65536))
            if responses:
                body = responses[0].body
                return body.cluster_id, {t.name: t.topic_id for t in body.topics}
    raise AssertionError("no Metadata response")


def _consume_all(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a partition, read with confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kt-unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        _, end = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=10, cached=False
        )
        consumer.assign([TopicPartition(topic, partition, 0)])
        out: list[tuple[int, bytes | None]] = []
        deadline = time.monotonic() + 20
        while len(out) < end and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=0.3):
                assert m.error() is None, m.error()
                out.append((m.offset(), m.value()))
        return out
    finally:
        consumer.close()


def _index_verify(data_dir: Path) -> subprocess.CompletedProcess[str]:
    from broker_harness import KT

    return subprocess.run(
        [KT, "index", "verify", "-q", str(data_dir)], capture_output=True, text=True, timeout=60
    )


def test_clean_stop_and_restart_keeps_everything(broker_factory) -> None:
    from confluent_kafka import Producer

    broker = broker_factory(**{"log.segment.bytes": "16384"})
    topics = {"keep-a": "none", "keep-b": "zstd", "keep-c": "gzip"}
    for topic, codec in topics.items():
        p = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "compression.type": codec,
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        for i in range(500):
            p.produce(topic, value=b"%s-%d" % (topic.encode(), i), partition=0)
        assert p.flush(20) == 0
    cluster_before, ids_before = _metadata(broker.bootstrap, list(topics))

    # A consumer parked in a long-polling fetch while the broker stops.
    from confluent_kafka import Consumer, TopicPartition

    waiting = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "kt-unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 30000,
        }
    )
    waiting.assign([TopicPartition("keep-a", 0, 500)])
    waiting.poll(0.5)
    start = time.monotonic()
    assert broker.stop() == 0
    # held up, the stop would wait for the 30 s fetch; a busy machine stops in far less
    assert time.monotonic() - start < 15, "a parked fetch held up the shutdown"
    waiting.close()
    assert (broker.data_dir / ".kafka_cleanshutdown").exists()
    assert "stopped cleanly" in broker.log()
    assert "Traceback" not in broker.log(), broker.log()
    log_len = len(broker.log())
    broker.start()
    assert "recovery" not in broker.log()[log_len:].lower()

    cluster_after, ids_after = _metadata(broker.bootstrap, list(topics))
    assert (cluster_after, ids_after) == (cluster_before, ids_before)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    offsets: list[int] = []
    for topic in topics:
        got = _consume_all(broker.bootstrap, topic)
        assert got == [(i, b"%s-%d" % (topic.encode(), i)) for i in range(500)], topic
        p.produce(
            topic,
            value=b"after",
            partition=0,
            on_delivery=lambda err, msg: offsets.append(msg.offset()),
        )
    assert p.flush(10) == 0
    assert offsets == [500, 500, 500]
    assert broker.stop() == 0
    result = _index_verify(broker.data_dir)
    assert result.returncode == 0, result.stdout + result.stderr


def test_kill_9_mid_produce_loses_no_acknowledged_record(broker_factory) -> None:
    from confluent_kafka import Producer

    broker = broker_factory(**{"log.flush.interval.messages": "1", "log.segment.bytes": "65536"})
    topics = ("crash-plain", "crash-zstd")
    producers = {
        "crash-plain": Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": "all",
                "linger.ms": 1,
                "message.timeout.ms": 3000,
            }
        ),
        "crash-zstd": Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": "all",
                "linger.ms": 1,
                "compression.type": "zstd",
                "message.timeout.ms": 3000,
            }
        ),
    }
    acked: dict[str, dict[int, bytes]] = {t: {} for t in topics}

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.topic()][msg.offset()] = msg.value()

    killed_at = None
    deadline = time.monotonic() + 30
    for i in range(200_000):
        if time.monotonic() > deadline:
            break
        for topic, p in producers.items():
            try:
                p.produce(
                    topic,
                    value=b"%s-%08d" % (topic.encode(), i) + b"." * 200,
                    partition=0,
                    on_delivery=on_delivery,
                )
            except BufferError:
                p.poll(0.01)
            p.poll(0)
        if killed_at is None and min(len(a) for a in acked.values()) >= 1500:
            broker.kill()  # SIGKILL, requests in flight
            killed_at = i
        elif killed_at is not None and i > killed_at + 200:
            break
    assert killed_at is not None, "the producers never got 1500 acks"
    for p in producers.values():
        p.purge()
        p.flush(5)
    counts = {t: len(a) for t, a in acked.items()}
    assert not (broker.data_dir / ".kafka_cleanshutdown").exists()

    broker.start()
    for topic in topics:
        got = _consume_all(broker.bootstrap, topic)
        offsets = [o for o, _ in got]
        assert offsets == list(range(len(got))), f"{topic}: offsets are not consecutive"
        values = dict(got)
        missing = [o for o, v in acked[topic].items() if values.get(o) != v]
        assert not missing, f"{topic}: acknowledged records lost or changed at {missing[:10]}"
        assert len(got) >= counts[topic]
        assert len({v for _, v in got}) == len(got), f"{topic}: duplicated records"
    assert broker.stop() == 0
    result = _index_verify(broker.data_dir)
    assert result.returncode == 0, result.stdout + result.stderr


def _active_segment(partition_dir: Path) -> Path:
    return max(partition_dir.glob("*.log"), key=lambda p: int(p.stem))


def test_torn_tail_is_truncated_on_restart(broker_factory) -> None:
    """After kill -9, one partition's active segment gets half a batch appended (a
    write cut short), another's random bytes; recovery cuts both back."""
    import random

    from kafka import KafkaProducer

    broker = broker_factory()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    for topic in ("torn-half", "torn-junk"):
        for i in range(100):
            producer.send(topic, value=b"%d" % i, partition=0)
    producer.flush(10)
    producer.close(timeout=5)
    broker.kill()

    sizes = {}
    half = _active_segment(broker.data_dir / "torn-half-0")
    data = half.read_bytes()
    sizes[half] = len(data)
    # The last batch again with its base offset moved on, cut in the middle.
    last_start = 0
    pos = 0
    while pos + 12 <= len(data):
        last_start = pos
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
    batch = bytearray(data[last_start:])
    batch[0:8] = (100).to_bytes(8, "big")
    with half.open("ab") as f:
        f.write(bytes(batch[: len(batch) // 2]))
    junk = _active_segment(broker.data_dir / "torn-junk-0")
    sizes[junk] = junk.stat().st_size
    with junk.open("ab") as f:
        f.write(random.Random(7).randbytes(777))

    log_len = len(broker.log())
    broker.start()
    startup_log = broker.log()[log_len:]
    for topic in ("torn-half", "torn-junk"):
        assert f"{topic}-0" in startup_log and "truncated" in startup_log, startup_log
    for seg, size in sizes.items():
        assert seg.stat().st_size == size, f"{seg.name} was not cut back to {size} bytes"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for topic in ("torn-half", "torn-junk"):
        assert producer.send(topic, value=b"next", partition=0).get(timeout=10).offset == 100
    producer.close(timeout=5)
    for topic in ("torn-half", "torn-junk"):
        got = _consume_all(broker.bootstrap, topic)
        assert got == [(i, b"%d" % i) for i in range(100)] + [(100, b"next")]
    assert broker.stop() == 0
    result = _index_verify(broker.data_dir)
    assert result.returncode == 0, result.stdout + result.stderr


def test_second_broker_on_same_data_dir_fails_fast(kt_broker) -> None:
    from broker_harness import KT, free_port

    start = time.monotonic()
    proc = subprocess.run(
        [
            KT,
            "broker",
            "start",
            "--override",
            f"log.dirs={kt_broker.data_dir}",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    elapsed = time.monotonic() - start
    assert proc.returncode != 0
    assert elapsed < 10, elapsed
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(kt_broker.data_dir) in lines[0] and "lock" in lines[0], lines[0]
    assert "kt broker ready" not in proc.stdout
    # The first broker is unharmed.
    _, ids = _metadata(kt_broker.bootstrap, [])
    assert ids == {}
