"""Replication on a three-broker kt cluster under faults, with real clients as the oracle
(issue 10 §6, items 3, 5, 7 and 9; Kafka's replication_test.py and
replication_replica_failure_test.py in spirit): leaders SIGKILLed under idempotent
acks=all producers, followers lost and back, group coordinator failover, controlled
shutdown. Each test leaves brokers down as it likes; the `cluster` fixture heals.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from cluster_harness import (
    SESSION_TIMEOUT_S,
    BackgroundProducer,
    consume_all,
    controller_id,
    create_topic,
    kt,
    leader_of,
    live_bootstrap,
    partition_state,
    registered,
    wait_controller,
    wait_for,
    wait_for_isr,
    wait_metadata_leader,
    wait_registered,
    wait_zk_leader,
    zk_json,
)

from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: a new leader must be elected within this after the old one is SIGKILLed: the
#: ZooKeeper session must expire first (6 s here), the rest is the controller's work
ELECTION_BOUND_S = SESSION_TIMEOUT_S + 25.0


def check_exactly_once(
    records: list[tuple[int, bytes | None, bytes | None]], producers: list[BackgroundProducer]
) -> None:
    """Every acknowledged record is in the log once, at the offset it was acknowledged
    with, each producer's records in the order it sent them, nothing duplicated."""
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets not strictly increasing"
    values = [v for _, _, v in records]
    dups = sorted({v for v in values if values.count(v) > 1})
    assert not dups, f"duplicated records: {dups[:10]}"
    for p in producers:
        assert p.errors == [], f"{p.client} delivery errors: {p.errors[:5]}"
        assert len(p.acked) == p.sent, f"{p.client}: {p.sent} sent, {len(p.acked)} acked"
        mine = [v for v in values if v is not None and v.startswith(p.tag.encode() + b"-")]
        missing = sorted(set(p.acked) - set(mine))
        assert not missing, f"{p.client}: {len(missing)} acked records lost: {missing[:10]}"
        expected = [f"{p.tag}-{i:06d}".encode() for i in range(p.sent)]
        assert mine == expected, f"{p.client}: records out of order or unexpected"
        by_value = {v: o for o, _, v in records}
        wrong = [(v, o, by_value[v]) for v, o in p.acked.items() if by_value[v] != o]
        assert not wrong, f"{p.client}: acked at another offset than stored: {wrong[:5]}"


def wait_progress(producers: list[BackgroundProducer], more: int, what: str) -> None:
    start = [len(p.acked) for p in producers]
    wait_for(
        lambda: all(len(p.acked) >= s + more for p, s in zip(producers, start)),
        f"{more} more acks from every producer {what} "
        f"(errors: {[p.errors[-1:] for p in producers]})",
        timeout=60,
    )


def test_acked_records_survive_repeated_leader_kills(cluster: LocalCluster) -> None:
    topic = "chaos"
    create_topic(cluster, topic, "--partitions", "1", "--replication-factor", "3",
                 "--config", "min.insync.replicas=2")  # fmt: skip
    producers = [
        BackgroundProducer("confluent", cluster.bootstrap_servers, topic, "ck").start(),
        BackgroundProducer("kafka-python", cluster.bootstrap_servers, topic, "kp").start(),
    ]
    elections = []
    try:
        for _ in range(3):
            wait_progress(producers, 20, "before the kill")
            leader = wait_zk_leader(cluster, topic, 0)
            killed = time.monotonic()
            cluster.stop_broker(leader, kill=True)
            new = wait_zk_leader(cluster, topic, 0, not_in=[leader], timeout=ELECTION_BOUND_S)
            left = max(1.0, ELECTION_BOUND_S - (time.monotonic() - killed))
            wait_metadata_leader(cluster, topic, 0, not_in=[leader], timeout=left)
            elections.append((leader, new, round(time.monotonic() - killed, 1)))
            wait_progress(producers, 20, f"with broker {leader} down")
            cluster.start_broker(leader)
            wait_for_isr(cluster, topic, 0, [1, 2, 3])
        wait_progress(producers, 20, "at the end")
    finally:
        for p in producers:
            p.stop()
    total = sum(p.sent for p in producers)
    records = consume_all(cluster.bootstrap_servers, topic, 0, total)
    check_exactly_once(records, producers)
    assert len(records) == total
    print("elections (old, new, seconds):", elections)


def test_isr_shrinks_and_min_insync_replicas_guards_acks_all(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer
    from kafka.errors import NotEnoughReplicasError

    topic = "isr5"
    # the controller leads, so losing the followers involves no controller failover
    # (test_cluster_controller covers a controller that is also a follower)
    leader = wait_controller(cluster)
    f1, f2 = (b for b in (1, 2, 3) if b != leader)
    create_topic(cluster, topic, "--replica-assignment", f"{leader}:{f1}:{f2}",
                 "--config", "min.insync.replicas=2")  # fmt: skip
    acked: list[bytes] = []

    def produce(values: list[bytes], **extra: object) -> None:
        p = KafkaProducer(bootstrap_servers=live_bootstrap(cluster), acks="all", linger_ms=0,
                          request_timeout_ms=15000, **extra)  # fmt: skip
        try:
            for v in values:
                p.send(topic, value=v, partition=0).get(timeout=30)
                acked.append(v)
        finally:
            p.close(timeout=5)

    produce([b"all-%d" % i for i in range(10)], retries=5)
    cluster.stop_broker(f2, kill=True)
    wait_for_isr(cluster, topic, 0, [leader, f1])
    produce([b"two-%d" % i for i in range(10)], retries=5)  # ISR 2 = min.insync: fine

    cluster.stop_broker(f1, kill=True)
    wait_for_isr(cluster, topic, 0, [leader])
    p = KafkaProducer(bootstrap_servers=live_bootstrap(cluster), acks="all", retries=0,
                      request_timeout_ms=15000)  # fmt: skip
    try:
        with pytest.raises(NotEnoughReplicasError):
            p.send(topic, value=b"refused", partition=0).get(timeout=30)
    finally:
        p.close(timeout=5)
    # acks=1 still works with one replica in sync
    p = KafkaProducer(bootstrap_servers=live_bootstrap(cluster), acks=1, retries=0)
    try:
        p.send(topic, value=b"one", partition=0).get(timeout=30)
        acked.append(b"one")
    finally:
        p.close(timeout=5)

    cluster.start_broker(f1)
    cluster.start_broker(f2)
    wait_for_isr(cluster, topic, 0, [1, 2, 3])
    produce([b"back-%d" % i for i in range(10)], retries=5)
    # the returning followers really caught up: with the old leader gone, a follower
    # leads and serves everything that was acknowledged
    cluster.stop_broker(leader, kill=True)
    wait_metadata_leader(cluster, topic, 0, not_in=[leader], timeout=ELECTION_BOUND_S)
    records = consume_all(live_bootstrap(cluster), topic, 0, len(acked))
    assert [v for _, _, v in records] == acked


def _java_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_committed_offsets_survive_coordinator_failover(cluster: LocalCluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic, group = "offs7", "g7"
    create_topic(cluster, topic, "--partitions", "1", "--replication-factor", "3")
    prod = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(10):
        prod.produce(topic, value=b"%d" % i, partition=0)
    assert prod.flush(30) == 0

    def consumer() -> Consumer:
        return Consumer({"bootstrap.servers": live_bootstrap(cluster), "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip

    c = consumer()
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = wait_for(lambda: c.consume(num_messages=6, timeout=1.0), "records to consume")
        assert [m.error() for m in got] == [None] * len(got)
        c.commit(offsets=[TopicPartition(topic, 0, 6)], asynchronous=False)
    finally:
        c.close()

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    desc = admin.describe_consumer_groups([group])[group].result(timeout=30)
    coordinator = desc.coordinator.id
    offsets_partition = abs(_java_hash(group)) % 3  # offsets.topic.num.partitions=3
    offsets_state = wait_for_isr(cluster, "__consumer_offsets", offsets_partition, [1, 2, 3])
    assert offsets_state["leader"] == coordinator

    cluster.stop_broker(coordinator, kill=True)
    wait_zk_leader(cluster, "__consumer_offsets", offsets_partition, not_in=[coordinator],
                   timeout=ELECTION_BOUND_S)  # fmt: skip
    c = consumer()
    try:

        def committed() -> list[TopicPartition] | None:
            tps = c.committed([TopicPartition(topic, 0)], timeout=10)
            return None if tps[0].error is not None else tps

        tps = wait_for(committed, "an answer from the new group coordinator")
        assert tps[0].offset == 6
    finally:
        c.close()
    desc = admin.describe_consumer_groups([group])[group].result(timeout=30)
    assert desc.coordinator.id != coordinator


def test_idempotent_producer_state_survives_leader_failover(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer

    topic = "pid7"
    create_topic(cluster, topic, "--partitions", "1", "--replication-factor", "3",
                 "--config", "min.insync.replicas=2")  # fmt: skip
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True,
                      acks="all", retries=2**31 - 1, delivery_timeout_ms=90000,
                      request_timeout_ms=10000, metadata_max_age_ms=2000)  # fmt: skip
    errors: list[str] = []
    try:
        futures = [p.send(topic, value=b"a-%03d" % i, partition=0) for i in range(100)]
        p.flush(60)
        leader = wait_zk_leader(cluster, topic, 0)
        cluster.stop_broker(leader, kill=True)
        wait_zk_leader(cluster, topic, 0, not_in=[leader], timeout=ELECTION_BOUND_S)
        futures += [p.send(topic, value=b"b-%03d" % i, partition=0) for i in range(100)]
        p.flush(120)
        for f in futures:
            try:
                f.get(timeout=1)
            except Exception as exc:
                errors.append(repr(exc))
    finally:
        p.close(timeout=10)
    assert errors == []
    records = consume_all(live_bootstrap(cluster), topic, 0, 200)
    assert [v for _, _, v in records] == [b"a-%03d" % i for i in range(100)] + [
        b"b-%03d" % i for i in range(100)
    ]


def test_sigterm_moves_leadership_before_exit(cluster: LocalCluster) -> None:
    topic = "cs9"
    create_topic(cluster, topic, "--replica-assignment", "1:2:3,2:3:1,3:1:2",
                 "--config", "min.insync.replicas=2")  # fmt: skip
    ctl = controller_id(cluster)
    victim = next(b for b in (1, 2, 3) if b != ctl)
    led = victim - 1  # the partition whose preferred leader is the victim
    assert partition_state(cluster, topic, led)["leader"] == victim
    producers = [BackgroundProducer("confluent", cluster.bootstrap_servers, topic, "cs",
                                    partition=led).start()]  # fmt: skip
    try:
        wait_progress(producers, 20, "before the shutdown")
        cluster.stop_broker(victim, timeout=60)  # SIGTERM; returns once it exited
        # read at once: the controller moved leadership before the broker went away
        states = {p: partition_state(cluster, topic, p) for p in range(3)}
        assert all(s["leader"] != victim for s in states.values()), states
        assert all(victim not in s["isr"] for s in states.values()), states
        assert victim not in registered(cluster)
        wait_for(lambda: all(leader_of(cluster, topic, p) not in (victim, -1) for p in range(3)),
                 "Metadata to show no partition led by the stopped broker", timeout=15)  # fmt: skip
        wait_progress(producers, 20, "after the shutdown")
    finally:
        for p in producers:
            p.stop()
    records = consume_all(live_bootstrap(cluster), topic, led, producers[0].sent)
    check_exactly_once(records, producers)
    cluster.start_broker(victim)
    wait_registered(cluster, victim)


# --- pipelined acks=all produces ---------------------------------------------------------


def _produce_bytes(conn: Any, topic: str, partition: int, value: bytes) -> tuple[int, bytes]:
    """A Produce v9 request, acks=all, of one record: (correlation id, bytes to send)."""
    from kt.storage.record_batch import RecordSpec, build_batch

    batch = build_batch([RecordSpec(key=None, value=value, timestamp=int(time.time() * 1000))],
                        base_offset=0)  # fmt: skip
    part = {"index": partition, "records": bytes(batch)}
    body = {"acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [part]}]}  # fmt: skip
    return conn.send_request(0, 9, body)


def _responses(sock: socket.socket, conn: Any, count: int, timeout: float = 60.0) -> list[Any]:
    """`count` responses (ClientConnection raises on one out of request order)."""
    got: list[Any] = []
    sock.settimeout(timeout)
    while len(got) < count:
        chunk = sock.recv(1 << 20)
        assert chunk, f"connection closed after {len(got)} of {count} responses"
        got += conn.receive_data(chunk)
    return got


def test_pipelined_acks_all_produces_are_answered_in_request_order(cluster: LocalCluster) -> None:
    """One connection sends 30 requests at once to an RF=3 leader: acks=all produces
    (each answered only after both followers fetched it, while the next ones are
    already appended), produces to a partition that does not exist (answered at
    once with an error) and a Metadata request. The answers come back in request
    order with consecutive offsets. Then, with both followers paused, produces are
    sent and the connection closed before any answer: the broker carries on, and
    what it appended is an in-order prefix of what was sent."""
    from kt.protocol import ClientConnection, ErrorCode

    topic = "pipelined3"
    leader = wait_controller(cluster)
    f1, f2 = (b for b in (1, 2, 3) if b != leader)
    create_topic(cluster, topic, "--replica-assignment", f"{leader}:{f1}:{f2}",
                 "--config", "min.insync.replicas=2")  # fmt: skip
    assert wait_metadata_leader(cluster, topic, 0) == leader
    conn = ClientConnection()
    wire = b""
    expected: list[tuple[int, str]] = []
    values: list[bytes] = []
    for i in range(30):
        if i == 15:
            cid, data = conn.send_request(3, 12, {"topics": [{"name": topic}],
                                                  "allow_auto_topic_creation": False})  # fmt: skip
            expected.append((cid, "metadata"))
        elif i % 5 == 2:
            cid, data = _produce_bytes(conn, topic, 9, b"nowhere")
            expected.append((cid, "unknown"))
        else:
            values.append(b"v%d" % i)
            cid, data = _produce_bytes(conn, topic, 0, values[-1])
            expected.append((cid, "ok"))
        wire += data
    sock = socket.create_connection(("127.0.0.1", cluster.broker(leader).port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.sendall(wire)
        got = _responses(sock, conn, len(expected))
    finally:
        sock.close()
    assert [r.correlation_id for r in got] == [cid for cid, _ in expected]
    offsets = []
    for r, (_, kind) in zip(got, expected, strict=True):
        if kind == "metadata":
            assert r.api_key == 3 and r.body.topics[0].error_code == 0
            continue
        p = r.body.responses[0].partition_responses[0]
        if kind == "unknown":
            assert p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            assert p.error_code == 0, p
            offsets.append(p.base_offset)
    assert offsets == list(range(offsets[0], offsets[0] + len(values)))

    # Responses pending when the client goes away.
    pending = [b"pending-%d" % i for i in range(5)]
    conn = ClientConnection()
    sock = socket.create_connection(("127.0.0.1", cluster.broker(leader).port), timeout=10)
    cluster.pause_broker(f1)
    cluster.pause_broker(f2)
    try:
        sock.sendall(b"".join(_produce_bytes(conn, topic, 0, v)[1] for v in pending))
        time.sleep(0.5)  # the leader appends them; no follower can answer for them
        sock.close()
    finally:
        cluster.resume_broker(f1)
        cluster.resume_broker(f2)
    wait_for_isr(cluster, topic, 0, [leader, f1, f2])
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=live_bootstrap(cluster), acks="all", linger_ms=0)
    try:
        p.send(topic, value=b"after", partition=0).get(timeout=30)
    finally:
        p.close(timeout=5)
    records = [v for _, _, v in consume_all(live_bootstrap(cluster), topic, 0, len(values) + 1)]
    assert records[: len(values)] == values and records[-1] == b"after"
    appended = records[len(values) : -1]
    assert appended == pending[: len(appended)], appended


def test_a_recreated_topic_is_replicated_again(cluster: LocalCluster) -> None:
    """A topic deleted and created again under the same name (a new topic id, the
    same empty partition at leader epoch 0) is fetched by its followers again, their
    fetchers (and fetch sessions) with the leader kept alive by another topic: every
    acks=all record to the new topic is acknowledged and the ISR is whole. (The
    race where the delete and the re-creation both land within one fetch, so the
    follower's session sees the same partition with a new topic id, is driven
    deterministically in tests/unit/broker/test_fetch_sessions.py.)"""
    from confluent_kafka import Producer

    topic = "recreated"
    leader = wait_controller(cluster)
    f1, f2 = (b for b in (1, 2, 3) if b != leader)
    assignment = f"{leader}:{f1}:{f2}"
    # Keeps each follower's fetcher (and its session) with the leader alive.
    create_topic(cluster, "recreated-neighbour", "--replica-assignment", assignment)
    create_topic(cluster, topic, "--replica-assignment", assignment)
    r = kt("topic", "delete", "-b", live_bootstrap(cluster), "--topic", topic)
    assert r.exit_code == 0, r.stderr
    wait_for(lambda: zk_json(cluster, f"/brokers/topics/{topic}") is None, "topic deleted")
    create_topic(cluster, topic, "--replica-assignment", assignment)
    assert wait_metadata_leader(cluster, topic, 0) == leader
    p = Producer({"bootstrap.servers": live_bootstrap(cluster), "acks": "all",
                  "message.timeout.ms": 15000})  # fmt: skip
    errors: list[Any] = []
    for i in range(20):
        p.produce(topic, f"v{i}".encode(), partition=0,
                  on_delivery=lambda err, _m: errors.append(err))  # fmt: skip
    assert p.flush(30) == 0
    assert errors == [None] * 20
    wait_for_isr(cluster, topic, 0, [leader, f1, f2])
