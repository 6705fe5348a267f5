"""Incremental fetch sessions (KIP-227) against a real broker.

- Raw Fetch v12 (topic names) and v16 (topic ids): a full request with epoch 0
  creates a session; incremental requests that name nothing still read every
  partition the session holds (a long poll wakes on data in a partition the request
  did not name) and get back only partitions with news; forgotten partitions are
  no longer read; a wrong epoch and an unknown session id get their errors.
- kafka-python (incremental sessions on by default) consumes six partitions through
  a session that reached later epochs, every record exactly once and in order, with
  a partition limit below each partition's batch (only the first partition with
  data may exceed it; the others answer empty, as Kafka's do, not a partial batch).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from broker_harness import RawConnection as Raw

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    from broker_harness import BrokerProcess, free_port

    b = BrokerProcess(tmp_path_factory.mktemp("sessions") / "data", free_port(), {}).start()
    yield b
    b.kill()


def _produce(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for v in values:
            producer.send(topic, value=v, partition=partition)
        producer.flush(20)
    finally:
        producer.close(timeout=5)


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def _topic_id(raw: Raw, topic: str) -> uuid.UUID:
    meta = raw.call(3, 12, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                            "allow_auto_topic_creation": False,
                            "include_topic_authorized_operations": False})  # fmt: skip
    return meta.topics[0].topic_id


def _fetch(
    raw: Raw,
    version: int,
    topic: str | uuid.UUID,
    session: tuple[int, int],
    offsets: dict[int, int],
    forget: tuple[int, ...] = (),
    max_wait_ms: int = 300,
) -> Any:
    by_id = version >= 13
    label = {"topic_id": topic} if by_id else {"topic": topic}
    topics = [{**label, "partitions": [
        {"partition": p, "current_leader_epoch": -1, "fetch_offset": off,
         "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
        for p, off in offsets.items()]}] if offsets else []  # fmt: skip
    forgotten = [{**label, "partitions": list(forget)}] if forget else []
    return raw.call(1, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 50 << 20,
        "isolation_level": 0, "session_id": session[0], "session_epoch": session[1],
        "topics": topics, "forgotten_topics_data": forgotten, "rack_id": ""})  # fmt: skip


def _answered(resp: Any) -> dict[int, Any]:
    return {p.partition_index: p for t in resp.responses for p in t.partitions}


@pytest.mark.parametrize("version", [12, 16])
def test_incremental_session_over_raw_fetches(broker, version: int) -> None:
    topic = f"sessions-v{version}"
    _create(broker.bootstrap, topic, 3)
    _produce(broker.bootstrap, topic, 0, [b"a0", b"a1"])
    _produce(broker.bootstrap, topic, 1, [b"b0"])
    raw = Raw(broker.bootstrap)
    try:
        key: str | uuid.UUID = _topic_id(raw, topic) if version >= 13 else topic
        full = _fetch(raw, version, key, (0, 0), {0: 0, 1: 0, 2: 0})
        assert full.error_code == 0 and full.session_id != 0
        sid = full.session_id
        got = _answered(full)
        assert sorted(got) == [0, 1, 2]  # a full answer carries every partition
        assert got[0].records and got[1].records and not got[2].records

        # Epoch 1 moves partitions 0 and 1 past what they got; 2 is not named.
        inc = _fetch(raw, version, key, (sid, 1), {0: 2, 1: 1})
        assert inc.error_code == 0 and inc.session_id == sid
        assert _answered(inc) == {}  # nothing new anywhere: nothing answered

        # Data in partition 2 (not named since the full request) wakes a long poll of
        # the session and is the only partition answered.
        t0 = time.monotonic()
        import threading

        threading.Timer(0.5, _produce, (broker.bootstrap, topic, 2, [b"c0"])).start()
        inc = _fetch(raw, version, key, (sid, 2), {}, max_wait_ms=10_000)
        waited = time.monotonic() - t0
        got = _answered(inc)
        assert list(got) == [2] and got[2].records and got[2].high_watermark == 1
        assert waited < 9.0, waited

        # Forget partition 2: more data there is no longer read.
        _produce(broker.bootstrap, topic, 2, [b"c1"])
        inc = _fetch(raw, version, key, (sid, 3), {}, forget=(2,))
        assert _answered(inc) == {}

        # A wrong epoch, then an unknown session: errors, and the session survives both.
        bad = _fetch(raw, version, key, (sid, 9), {})
        assert bad.error_code == 71 and not bad.responses  # INVALID_FETCH_SESSION_EPOCH
        gone = _fetch(raw, version, key, (sid + 1, 1), {})
        assert gone.error_code == 70  # FETCH_SESSION_ID_NOT_FOUND
        _produce(broker.bootstrap, topic, 0, [b"a2"])
        inc = _fetch(raw, version, key, (sid, 4), {})
        got = _answered(inc)
        assert list(got) == [0] and got[0].high_watermark == 3

        # A full request with epoch -1 closes the session.
        _fetch(raw, version, key, (sid, -1), {0: 3})
        assert _fetch(raw, version, key, (sid, 5), {}).error_code == 70
    finally:
        raw.close()


def test_kafka_python_consumes_through_an_incremental_session(broker) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic = "sessions-kafka-python"
    _create(broker.bootstrap, topic, 6)
    # Each partition's 40 records in one batch of ~1.5 KB, over the 300-byte limit:
    # only the response's first partition with data may exceed it (KIP-74); the
    # others come back empty, as Kafka answers, never as part of a batch (which
    # kafka-python cannot use: it stops with "Failed to make progress").
    for p in range(6):
        _produce(broker.bootstrap, topic, p, [f"{p}-{i}".encode() * 4 for i in range(40)])
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             fetch_max_wait_ms=100, max_partition_fetch_bytes=300)  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(6)])
        consumer.seek_to_beginning()
        seen: dict[int, list[bytes]] = {p: [] for p in range(6)}
        deadline = time.monotonic() + 60
        while sum(map(len, seen.values())) < 240 and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                seen[tp.partition].extend(m.value for m in msgs)
        for p in range(6):
            assert seen[p] == [f"{p}-{i}".encode() * 4 for i in range(40)], p
        handlers = consumer._fetcher._session_handlers
        assert handlers, "kafka-python did not open a fetch session"
        (handler,) = handlers.values()
        # One partition per round: the session went incremental.
        assert handler.next_metadata.session_id != 0
        assert handler.next_metadata.epoch > 3
    finally:
        consumer.close()


def test_a_diverging_follower_is_answered_at_once(broker) -> None:
    """A follower's fetch that finds its log diverging is answered without waiting
    out max_wait (Kafka answers it at once, so the follower truncates promptly)."""
    topic = "sessions-diverging"
    _create(broker.bootstrap, topic, 1)
    _produce(broker.bootstrap, topic, 0, [b"a", b"b", b"c"])
    raw = Raw(broker.bootstrap)
    try:
        t0 = time.monotonic()
        resp = raw.call(1, 12, {
            "replica_id": 7, "max_wait_ms": 8000, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 9,
                 "last_fetched_epoch": 0, "log_start_offset": 0,
                 "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})  # fmt: skip
        waited = time.monotonic() - t0
        part = resp.responses[0].partitions[0]
        assert part.error_code == 0
        # Epoch 0 ends at offset 3 here: the follower's offset 9 in epoch 0 diverges.
        assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (0, 3)
        assert waited < 4.0, waited
    finally:
        raw.close()
