"""Consumer groups against a real broker, with real clients as the oracle:
confluent-kafka (librdkafka), kafka-python and aiokafka."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.integration

FAST_GROUPS = {"group.min.session.timeout.ms": "500", "num.partitions": "6"}


def _produce(bootstrap: str, topic: str, n: int, start: int = 0, partitions: int = 6) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(10) == 0


def _consumer(bootstrap: str, group: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 200,
        "topic.metadata.refresh.interval.ms": 1000,
        **extra,
    }
    return Consumer(conf)


class Members:
    """In-process confluent consumers polled in turn; records every consumed offset."""

    def __init__(self) -> None:
        self.consumers: dict[str, Any] = {}
        self.seen: Counter[tuple[int, int]] = Counter()
        self.assigns: Counter[str] = Counter()

    def add(self, name: str, consumer: Any, topic: str) -> None:
        def on_assign(c: Any, parts: list[Any]) -> None:
            self.assigns[name] += 1

        consumer.subscribe([topic], on_assign=on_assign)
        self.consumers[name] = consumer

    def close(self, name: str) -> None:
        self.consumers.pop(name).close()

    def poll_until(self, done: Callable[[], bool], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for c in self.consumers.values():
                msg = c.poll(0.05)
                if msg is None or msg.error():
                    continue
                self.seen[(msg.partition(), msg.offset())] += 1
                c.commit(message=msg, asynchronous=False)
            if done():
                return
        raise AssertionError(f"timed out; assignments {self.assignment()}")

    def assignment(self) -> dict[str, list[int]]:
        return {n: sorted(tp.partition for tp in c.assignment())
                for n, c in self.consumers.items()}  # fmt: skip

    def covers(self, partitions: int, members: int | None = None) -> bool:
        owned = [p for ps in self.assignment().values() for p in ps]
        if sorted(owned) != list(range(partitions)):
            return False
        return members is None or sum(1 for ps in self.assignment().values() if ps) == members


CRASHING_MEMBER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "session.timeout.ms": 1500, "heartbeat.interval.ms": 200,
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
while True:
    c.poll(0.1)
"""


def test_confluent_group_rebalances_expires_and_consumes_exactly_once(broker_factory) -> None:
    broker = broker_factory(**FAST_GROUPS)
    topic, group = "orders", "billing"
    _produce(broker.bootstrap, topic, 6)  # auto-creates the topic with 6 partitions
    m = Members()
    for name in ("c1", "c2", "c3"):
        m.add(name, _consumer(broker.bootstrap, group), topic)
    m.poll_until(lambda: m.covers(6, members=3) and len(m.seen) == 6)
    assert all(len(ps) == 2 for ps in m.assignment().values())
    _produce(broker.bootstrap, topic, 60, start=6)
    m.poll_until(lambda: len(m.seen) == 66)

    m.close("c3")  # leaves the group: its partitions move
    m.poll_until(lambda: m.covers(6, members=2))
    m.add("c4", _consumer(broker.bootstrap, group), topic)  # joins: a rebalance
    m.poll_until(lambda: m.covers(6, members=3))

    # A member whose process dies is expired after its session timeout.
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASHING_MEMBER, broker.bootstrap, group, topic],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        got = b""

        def crashing_member_assigned() -> bool:
            nonlocal got
            got += proc.stdout.read() or b""  # type: ignore[union-attr]
            return b"assigned 1" in got or b"assigned 2" in got

        m.poll_until(lambda: crashing_member_assigned() and not m.covers(6))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    m.poll_until(lambda: m.covers(6, members=3), timeout=20)
    assert "expired (session timeout)" in broker.log()
    _produce(broker.bootstrap, topic, 30, start=66)
    m.poll_until(lambda: len(m.seen) == 96)
    assert set(m.seen.values()) == {1}, "every record consumed exactly once"
    assert sorted(m.seen) == sorted((i % 6, i // 6) for i in range(96))
    for name in list(m.consumers):
        m.close(name)


def test_static_member_rejoins_without_rebalance(broker_factory) -> None:
    broker = broker_factory(**FAST_GROUPS)
    topic, group = "static", "static-group"
    _produce(broker.bootstrap, topic, 6)
    m = Members()
    m.add("s1", _consumer(broker.bootstrap, group, **{"group.instance.id": "i1"}), topic)
    m.add("s2", _consumer(broker.bootstrap, group, **{"group.instance.id": "i2"}), topic)
    m.poll_until(lambda: m.covers(6, members=2))
    before = m.assignment()["s2"]
    assigns_s1 = m.assigns["s1"]
    m.close("s2")  # a static member sends no LeaveGroup: the group stays Stable
    m.add("s2", _consumer(broker.bootstrap, group, **{"group.instance.id": "i2"}), topic)
    m.poll_until(lambda: m.assignment().get("s2") == before)
    settle = time.monotonic() + 1.0  # time for a rebalance, were one to happen
    m.poll_until(lambda: time.monotonic() > settle)
    assert m.assigns["s1"] == assigns_s1, "the other member saw no rebalance"
    assert m.covers(6, members=2)
    for name in list(m.consumers):
        m.close(name)


def test_kafka_python_group_and_admin_client(broker_factory) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.errors import RebalanceInProgressError

    broker = broker_factory(**FAST_GROUPS)
    topic, group = "kp", "kp-group"
    _produce(broker.bootstrap, topic, 60)
    consumers = [
        KafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=200,
            client_id=f"kp-{i}",
        )
        for i in range(2)
    ]
    # kafka-python 3.0.12 applies a JoinGroup/SyncGroup round trip only if it ends
    # while a poll() of that consumer waits for it. One that ends between polls is
    # thrown away and the consumer joins again (a leader that does forces another
    # rebalance) or, if the rejoin was the leader's own (its topic metadata changed
    # since it assigned), is never applied: need_rejoin() turns False, so the member
    # keeps no partitions and sends no heartbeats while the other member waits in
    # JoinGroup for it until its 45 s session expires. So: each consumer polls in
    # its own thread, as applications do (polling both in turn from one thread left
    # one of them outside poll() half the time), and knows the topic's partitions
    # before it first joins (else the leader's first assignment can race its
    # metadata: it assigns nothing and rejoins when the metadata arrives).
    for c in consumers:
        assert c.partitions_for_topic(topic) == set(range(6))
    seen: Counter[tuple[int, int]] = Counter()
    assigned: list[set[Any]] = [set(), set()]
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def consume(i: int) -> None:
        c = consumers[i]
        try:
            while not stop.is_set():
                batches = c.poll(timeout_ms=100)
                try:
                    c.commit()
                except RebalanceInProgressError:
                    # The other member joined meanwhile: Kafka refuses commits while
                    # the group prepares a rebalance; the next poll rejoins.
                    pass
                with lock:
                    for records in batches.values():
                        for r in records:
                            seen[(r.partition, r.offset)] += 1
                    assigned[i] = set(c.assignment())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=consume, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    try:
        while not errors:
            with lock:
                done = len(seen) >= 60 and all(assigned)
                state = (len(seen), [sorted(tp.partition for tp in a) for a in assigned])
            if done:
                break
            assert time.monotonic() < deadline, (
                f"consumed {state[0]}, assignments {state[1]}; broker:\n"
                + "\n".join(ln for ln in broker.log().splitlines() if "kt.broker.groups" in ln)
            )
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert not errors, errors
    a, b = (c.assignment() for c in consumers)
    assert a and b and not (a & b) and len(a | b) == 6
    assert set(seen.values()) == {1}

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        listed = admin.list_groups()
        # ListGroups v5 (as Kafka 3.8 serves) also reports the group's type.
        assert {"group_id": group, "protocol_type": "consumer", "group_state": "Stable",
                "group_type": "classic"} in listed  # fmt: skip
        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable"
        assert described["protocol_type"] == "consumer"
        assert len(described["members"]) == 2
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == dict.fromkeys(range(6), 10)
        result = admin.delete_groups([group])
        assert result[group] != "OK", "a group with members cannot be deleted"
        for c in consumers:
            c.close()
        assert admin.describe_groups([group])[group]["group_state"] == "Empty"
        assert admin.delete_group_offsets(group, [TopicPartition(topic, 0)])
        assert admin.delete_groups([group, "no-such-group"]) == {
            group: "OK",
            "no-such-group": "GroupIdNotFoundError",
        }
        assert group not in [g["group_id"] for g in admin.list_groups()]
    finally:
        admin.close()


def test_aiokafka_group_consumes(broker_factory) -> None:
    from aiokafka import AIOKafkaConsumer

    broker = broker_factory(**FAST_GROUPS)
    topic, group = "aio", "aio-group"
    _produce(broker.bootstrap, topic, 30)

    async def main() -> Counter[tuple[int, int]]:
        consumers = [
            AIOKafkaConsumer(
                topic,
                bootstrap_servers=broker.bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                heartbeat_interval_ms=200,
                metadata_max_age_ms=500,
            )
            for _ in range(2)
        ]
        for c in consumers:
            await c.start()
        seen: Counter[tuple[int, int]] = Counter()
        try:
            deadline = time.monotonic() + 30
            while len(seen) < 30 or not all(c.assignment() for c in consumers):
                assert time.monotonic() < deadline, f"consumed {len(seen)}"
                for c in consumers:
                    batch = await c.getmany(timeout_ms=100)
                    for records in batch.values():
                        for r in records:
                            seen[(r.partition, r.offset)] += 1
                    if batch:
                        await c.commit()
            parts = [c.assignment() for c in consumers]
            assert not (parts[0] & parts[1]) and len(parts[0] | parts[1]) == 6
        finally:
            for c in consumers:
                await c.stop()
        return seen

    seen = asyncio.run(main())
    assert set(seen.values()) == {1} and len(seen) == 30


def _committed(bootstrap: str, group: str, topic: str) -> list[int]:
    from confluent_kafka import TopicPartition

    c = _consumer(bootstrap, group)
    try:
        parts = c.committed([TopicPartition(topic, p) for p in range(2)], timeout=10)
        return [tp.offset for tp in parts]
    finally:
        c.close()


def test_committed_offsets_survive_restarts_and_decode(broker_factory) -> None:
    from confluent_kafka import TopicPartition

    from kt.broker.groups import partition_for

    broker = broker_factory(**{"num.partitions": "2", "offsets.topic.num.partitions": "5"})
    topic, group = "kept", "survivor"
    _produce(broker.bootstrap, topic, 2, partitions=2)
    c = _consumer(broker.bootstrap, group)
    commits = [TopicPartition(topic, 0, 42), TopicPartition(topic, 1, 7)]
    c.commit(offsets=commits, asynchronous=False)
    c.close()
    assert _committed(broker.bootstrap, group, topic) == [42, 7]
    broker.restart()
    assert _committed(broker.bootstrap, group, topic) == [42, 7]
    c = _consumer(broker.bootstrap, group)
    c.commit(offsets=[TopicPartition(topic, 0, 43)], asynchronous=False)
    c.close()
    broker.kill()
    broker.start()
    assert _committed(broker.bootstrap, group, topic) == [43, 7]

    segment = broker.data_dir / f"__consumer_offsets-{partition_for(group, 5)}"
    out = subprocess.run(
        [sys.executable, "-m", "kt.cli", "dump-log-segments", "--offsets-decoder", "--files",
         str(segment / "00000000000000000000.log")],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout  # fmt: skip
    key = f'key: {{"type":"1","data":{{"group":"{group}","topic":"{topic}","partition":0}}}}'
    assert key in out
    assert '"offset":43' in out and '"offset":42' in out


class RawClient:
    """Requests in any version, built with kt.protocol over one socket."""

    def __init__(self, bootstrap: str) -> None:
        import socket

        from kt.protocol import ClientConnection

        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.conn = ClientConnection(client_id="raw")

    def call(self, api: Any, version: int, body: dict[str, Any]) -> Any:
        _, data = self.conn.send_request(api.key, version, body)
        self.sock.sendall(data)
        while True:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed"
            responses = self.conn.receive_data(chunk)
            if responses:
                return responses[0].body


def test_old_and_batched_versions(broker_factory) -> None:
    from kt.protocol import ErrorCode as E
    from kt.protocol import apis

    broker = broker_factory(**FAST_GROUPS)
    _produce(broker.bootstrap, "raw", 6)
    c = RawClient(broker.bootstrap)
    r = c.call(apis.FIND_COORDINATOR, 0, {"key": "g"})
    assert r.error_code == 0 and r.node_id == 1 and r.port == broker.port
    r = c.call(apis.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [(x.key, x.error_code, x.port) for x in r.coordinators] == [
        ("a", 0, broker.port), ("b", 0, broker.port)]  # fmt: skip
    # A transactional id's coordinator: the leader of its __transaction_state partition.
    r = c.call(apis.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx"]})
    assert (r.coordinators[0].error_code, r.coordinators[0].port) == (E.NONE, broker.port)

    protocols = [{"name": "range", "metadata": b"m"}]
    join = {"group_id": "old", "session_timeout_ms": 10_000, "member_id": "",
            "protocol_type": "consumer", "protocols": protocols}  # fmt: skip
    r = c.call(apis.JOIN_GROUP, 0, {**join, "session_timeout_ms": 10})
    assert r.error_code == E.INVALID_SESSION_TIMEOUT
    r = c.call(apis.JOIN_GROUP, 0, join)  # before v4 no MEMBER_ID_REQUIRED round trip
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
    assert [(m.member_id, m.metadata) for m in r.members] == [(r.member_id, b"m")]
    me = r.member_id
    assignments = [{"member_id": me, "assignment": b"a"}]
    r = c.call(apis.SYNC_GROUP, 0, {"group_id": "old", "generation_id": 1, "member_id": me,
                                   "assignments": assignments})  # fmt: skip
    assert r.error_code == 0 and r.assignment == b"a"
    r = c.call(apis.HEARTBEAT, 0, {"group_id": "old", "generation_id": 1, "member_id": me})
    assert r.error_code == 0
    parts = [
        {"partition_index": 0, "committed_offset": 5, "committed_metadata": "x"},
        {"partition_index": 9, "committed_offset": 5, "committed_metadata": None},
    ]
    commit = {
        "group_id": "old",
        "generation_id_or_member_epoch": 1,
        "member_id": me,
        "retention_time_ms": 60_000,
        "topics": [{"name": "raw", "partitions": parts}],
    }
    r = c.call(apis.OFFSET_COMMIT, 2, commit)
    assert [p.error_code for p in r.topics[0].partitions] == [0, E.UNKNOWN_TOPIC_OR_PARTITION]
    r = c.call(apis.OFFSET_FETCH, 1, {"group_id": "old", "topics": [
        {"name": "raw", "partition_indexes": [0, 1]}]})  # fmt: skip
    assert [(p.committed_offset, p.metadata) for p in r.topics[0].partitions] == [
        (5, "x"),
        (-1, ""),
    ]
    r = c.call(apis.OFFSET_FETCH, 8, {"groups": [
        {"group_id": "old", "topics": None}, {"group_id": "none", "topics": None}]})  # fmt: skip
    assert [(g.group_id, [(t.name, len(t.partitions)) for t in g.topics]) for g in r.groups] == [
        ("old", [("raw", 1)]), ("none", [])]  # fmt: skip
    r = c.call(apis.LIST_GROUPS, 4, {"states_filter": ["Stable"]})
    assert [(g.group_id, g.group_state) for g in r.groups] == [("old", "Stable")]
    r = c.call(apis.DESCRIBE_GROUPS, 5, {"groups": ["old", "nope"],
                                         "include_authorized_operations": False})  # fmt: skip
    old, nope = r.groups
    assert (old.group_state, old.protocol_data, nope.group_state) == ("Stable", "range", "Dead")
    assert old.authorized_operations == -(2**31)
    assert (old.members[0].member_assignment, old.members[0].client_host) == (b"a", "/127.0.0.1")
    r = c.call(apis.OFFSET_DELETE, 0, {"group_id": "old", "topics": [
        {"name": "raw", "partitions": [{"partition_index": 0}]}]})  # fmt: skip
    # A non-consumer subscription blob: the subscribed topics are unknown, so refused.
    assert r.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC
    r = c.call(apis.LEAVE_GROUP, 0, {"group_id": "old", "member_id": me})
    assert r.error_code == 0
    r = c.call(apis.LEAVE_GROUP, 0, {"group_id": "old", "member_id": me})
    assert r.error_code == E.UNKNOWN_MEMBER_ID
    r = c.call(apis.DELETE_GROUPS, 2, {"groups_names": ["old"]})
    assert [(x.group_id, x.error_code) for x in r.results] == [("old", 0)]
    c.sock.close()
