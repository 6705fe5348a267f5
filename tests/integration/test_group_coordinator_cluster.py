"""The group coordinator as a cluster member: served by the leader of the group's
`__consumer_offsets` partition, NOT_COORDINATOR elsewhere, commits acknowledged once
replicated, and committed offsets surviving a coordinator failover.

The single-node test runs on today's broker; the cluster tests use LocalCluster
(ZooKeeper + `kt broker start` processes) and skip when cluster mode is missing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kt.client.core import BrokerConnection
from kt.protocol import ErrorCode, Struct, apis
from kt.tools.local_cluster import ClusterModeUnsupportedError, LocalCluster

pytestmark = pytest.mark.integration

TOPIC = "orders"


def request(port: int, api: Any, body: dict[str, Any], version: int) -> Struct:
    """One request to the broker on `port`, its response."""

    async def go() -> Struct:
        conn = BrokerConnection("127.0.0.1", port)
        await conn.connect()
        try:
            return await conn.request(api, body, version=version)
        finally:
            await conn.close()

    return asyncio.run(go())


def find_coordinator(port: int, group: str) -> Struct:
    return request(port, apis.FIND_COORDINATOR, {"key": group, "key_type": 0}, 3)


def commit(port: int, group: str, offsets: dict[int, int]) -> dict[int, int]:
    """A simple consumer's OffsetCommit (generation -1); partition -> error code."""
    resp = request(port, apis.OFFSET_COMMIT, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
             "committed_metadata": ""} for p, o in offsets.items()]}],
    }, 8)  # fmt: skip
    return {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}


def fetch(port: int, group: str, partitions: list[int]) -> tuple[int, dict[int, int]]:
    """OffsetFetch: (group error, partition -> committed offset)."""
    resp = request(port, apis.OFFSET_FETCH, {
        "group_id": group, "topics": [{"name": TOPIC, "partition_indexes": partitions}],
        "require_stable": False,
    }, 7)  # fmt: skip
    return resp.error_code, {p.partition_index: p.committed_offset
                             for t in resp.topics for p in t.partitions}  # fmt: skip


def fetch_all(port: int, group: str) -> tuple[int, dict[tuple[str, int], int]]:
    """OffsetFetch of every committed offset (topics null): (group error,
    (topic, partition) -> committed offset)."""
    resp = request(port, apis.OFFSET_FETCH, {
        "group_id": group, "topics": None, "require_stable": False,
    }, 7)  # fmt: skip
    return resp.error_code, {(t.name, p.partition_index): p.committed_offset
                             for t in resp.topics for p in t.partitions}  # fmt: skip


def delete_topic(bootstrap: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_topics([topic], timeout_ms=60_000)
    finally:
        admin.close()


def topic_gone(port: int, topic: str) -> bool:
    """Whether the broker on `port` no longer knows `topic` (Metadata v9)."""
    resp = request(port, apis.METADATA, {
        "topics": [{"name": topic}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }, 9)  # fmt: skip
    return all(t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for t in resp.topics)


def wait_for(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def create_topic(bootstrap: str, partitions: int, replication: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, partitions, replication)])
    finally:
        admin.close()


def test_single_node_serves_every_group_and_keeps_commits_across_kill(broker_factory) -> None:
    b = broker_factory(**{"num.partitions": "2"})
    create_topic(b.bootstrap, 2, 1)
    found = wait_for(lambda: (r := find_coordinator(b.port, "g1")).error_code == 0 and r,
                     what="the coordinator")  # fmt: skip
    assert found.node_id == 1 and found.port == b.port
    assert commit(b.port, "g1", {0: 5, 1: 7}) == {0: ErrorCode.NONE, 1: ErrorCode.NONE}
    assert fetch(b.port, "g1", [0, 1]) == (ErrorCode.NONE, {0: 5, 1: 7})
    # Acknowledged means written: a SIGKILL right after loses nothing, and the
    # restarted broker serves the group again once it leads (and loaded) its partition.
    b.kill()
    b.start()
    assert fetch(b.port, "g1", [0, 1]) == (ErrorCode.NONE, {0: 5, 1: 7})
    assert commit(b.port, "g1", {0: 6}) == {0: ErrorCode.NONE}
    assert fetch(b.port, "g1", [0]) == (ErrorCode.NONE, {0: 6})


def test_deleting_a_topic_drops_its_committed_offsets(broker_factory) -> None:
    # Kafka's GroupCoordinator removes every group's offsets of a deleted topic
    # (onPartitionsDeleted): a consumer of a re-created topic of that name must not
    # resume from the old topic's offsets.
    b = broker_factory(**{"num.partitions": "2"})
    create_topic(b.bootstrap, 2, 1)
    wait_for(lambda: find_coordinator(b.port, "g1").error_code == 0, what="the coordinator")
    assert commit(b.port, "g1", {0: 5, 1: 7}) == {0: ErrorCode.NONE, 1: ErrorCode.NONE}
    assert commit(b.port, "g2", {1: 3}) == {1: ErrorCode.NONE}
    assert fetch_all(b.port, "g1") == (ErrorCode.NONE, {(TOPIC, 0): 5, (TOPIC, 1): 7})
    delete_topic(b.bootstrap, TOPIC)
    wait_for(lambda: topic_gone(b.port, TOPIC), what="the topic to go")
    assert wait_for(lambda: fetch_all(b.port, "g1") == (ErrorCode.NONE, {}), what="no offsets")
    assert fetch_all(b.port, "g2") == (ErrorCode.NONE, {})
    # Gone for good: the tombstones are in __consumer_offsets, so a restart (which
    # replays it) does not bring them back.
    b.kill()
    b.start()
    wait_for(lambda: find_coordinator(b.port, "g1").error_code == 0, what="the coordinator")
    assert wait_for(lambda: (r := fetch_all(b.port, "g1"))[0] == ErrorCode.NONE and r,
                    what="the group loaded") == (ErrorCode.NONE, {})  # fmt: skip


# --- three brokers ------------------------------------------------------------------------


@pytest.fixture
def three_brokers(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster.create(
        tmp_path / "c",
        3,
        overrides={
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": "5",
            "replica.lag.time.max.ms": "5000",
            "zookeeper.session.timeout.ms": "6000",
        },
    )
    try:
        c.start(register_timeout=15.0)
    except ClusterModeUnsupportedError as exc:
        pytest.skip(f"kt broker start has no cluster mode yet: {exc}")
    yield c
    c.stop(kill=True)


def port_of(c: LocalCluster, broker_id: int) -> int:
    return c.broker(broker_id).port


@pytest.mark.cluster
def test_only_the_partition_leader_coordinates(three_brokers: LocalCluster) -> None:
    c = three_brokers
    create_topic(c.bootstrap_servers, 2, 3)
    group = "placed"
    any_port = port_of(c, 1)
    found = wait_for(lambda: (r := find_coordinator(any_port, group)).error_code == 0 and r,
                     what="the coordinator")  # fmt: skip
    coordinator = found.node_id
    # Every broker answers from its metadata cache (UpdateMetadata may still be on its way).
    wait_for(lambda: all(find_coordinator(port_of(c, n), group).node_id == coordinator
                         for n in (1, 2, 3)), what="every broker to agree")  # fmt: skip
    # REQUEST_TIMED_OUT (after offsets.commit.timeout.ms) until the followers caught
    # up or left the ISR: acknowledged only once replicated.
    assert wait_for(lambda: commit(port_of(c, coordinator), group, {0: 3})[0] == ErrorCode.NONE,
                    timeout=90, what="a commit")  # fmt: skip
    for other in {1, 2, 3} - {coordinator}:
        error, _ = fetch(port_of(c, other), group, [0])
        assert error == ErrorCode.NOT_COORDINATOR
        assert commit(port_of(c, other), group, {0: 4}) == {0: ErrorCode.NOT_COORDINATOR}
    assert fetch(port_of(c, coordinator), group, [0]) == (ErrorCode.NONE, {0: 3})


def replicated_everywhere(c: LocalCluster, partition: int) -> bool:
    """Whether every broker's replica of TOPIC-`partition` holds data (followers fetch)."""
    return all(
        any(f.stat().st_size > 0 for f in (b.data_dir / f"{TOPIC}-{partition}").glob("*.log"))
        for b in c.brokers
    )


@pytest.mark.cluster
def test_committed_offsets_survive_a_coordinator_failover(three_brokers: LocalCluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    c = three_brokers
    create_topic(c.bootstrap_servers, 2, 3)
    producer = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
    for i in range(40):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % 2)
    assert producer.flush(90) == 0
    deadline = time.monotonic() + 15
    while not replicated_everywhere(c, 0):
        if time.monotonic() > deadline:
            pytest.skip("followers do not fetch yet: a coordinator failover would lose its ISR")
        time.sleep(0.5)
    group = "failover"

    def consumer() -> Any:
        return Consumer({
            "bootstrap.servers": c.bootstrap_servers, "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        })  # fmt: skip

    first = consumer()
    first.subscribe([TOPIC])
    taken: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while sum(taken.values()) < 10 and time.monotonic() < deadline:
        msg = first.poll(1.0)
        if msg is None or msg.error():
            continue
        taken[msg.partition()] = msg.offset() + 1
    assert taken, "the first consumer got nothing"
    first.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in taken.items()],
                 asynchronous=False)  # fmt: skip
    first.close()

    coordinator = find_coordinator(port_of(c, 1), group).node_id
    c.stop_broker(coordinator, kill=True)  # SIGKILL: no controlled shutdown
    alive = next(n for n in (1, 2, 3) if n != coordinator)

    def new_coordinator() -> Struct | None:
        r = find_coordinator(port_of(c, alive), group)
        return r if r.error_code == 0 and r.node_id != coordinator else None

    moved = wait_for(new_coordinator, timeout=60, what="a new coordinator")
    assert fetch(port_of(c, moved.node_id), group, sorted(taken))[1] == taken

    second = consumer()
    second.subscribe([TOPIC])
    firsts: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while len(firsts) < 2 and time.monotonic() < deadline:
        msg = second.poll(1.0)
        if msg is None or msg.error():
            continue
        firsts.setdefault(msg.partition(), msg.offset())
    second.close()
    # Each partition resumes at its committed offset (0 where nothing was committed).
    assert firsts == {p: taken.get(p, 0) for p in (0, 1)}


@pytest.mark.cluster
def test_deleting_a_topic_drops_its_offsets_on_a_cluster(three_brokers: LocalCluster) -> None:
    c = three_brokers
    create_topic(c.bootstrap_servers, 2, 3)
    group = "deleted"
    found = wait_for(lambda: (r := find_coordinator(port_of(c, 1), group)).error_code == 0 and r,
                     what="the coordinator")  # fmt: skip
    port = port_of(c, found.node_id)
    assert wait_for(lambda: commit(port, group, {0: 3, 1: 4}) == {0: 0, 1: 0},
                    timeout=90, what="a commit")  # fmt: skip
    assert fetch_all(port, group) == (ErrorCode.NONE, {(TOPIC, 0): 3, (TOPIC, 1): 4})
    delete_topic(c.bootstrap_servers, TOPIC)
    wait_for(lambda: all(topic_gone(port_of(c, n), TOPIC) for n in (1, 2, 3)),
             timeout=60, what="the topic to go everywhere")  # fmt: skip
    assert wait_for(lambda: fetch_all(port, group) == (ErrorCode.NONE, {}), what="no offsets")
