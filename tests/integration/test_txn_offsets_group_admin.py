"""A group whose only offsets are a transaction's pending ones, with a real broker
and confluent-kafka's transactional producer (send_offsets_to_transaction): how
ListGroups, DescribeGroups, OffsetFetch (require_stable) and DeleteGroups answer,
and what the commit marker does after the group was deleted - as Apache Kafka 3.x's
group coordinator does (GroupCoordinator.handleDeleteGroups, handleTxnCompletion and
the partition loader)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

GROUP = "pending-only"


def offset_fetch(
    bootstrap: str, require_stable: bool, group: str = GROUP, partitions: tuple[int, ...] = (0,)
) -> dict[int, tuple[int, int]]:
    """OffsetFetch v7 of the group's `in` partitions: partition -> (error, offset)."""
    from kt.client import KafkaClient
    from kt.protocol import apis

    async def go() -> dict[int, tuple[int, int]]:
        async with KafkaClient(bootstrap) as c:
            node = await c.coordinator(group, 0)
            body = apis.OFFSET_FETCH.request(
                group_id=group, topics=[{"name": "in", "partition_indexes": list(partitions)}],
                require_stable=require_stable,
            )  # fmt: skip
            resp = await c.send(apis.OFFSET_FETCH, body, node, version=7)
            assert resp.error_code == 0
            return {p.partition_index: (int(p.error_code), int(p.committed_offset))
                    for p in resp.topics[0].partitions}  # fmt: skip

    return asyncio.run(go())


def transactional(bootstrap: str, txn_id: str, group: str, offsets: dict[int, int]) -> Any:
    """A producer with an open transaction holding `offsets` (in-N -> offset) for a
    group through a consumer that never joins it (generation -1, no member), so
    those pending offsets are all the group has."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("out", value=b"v", partition=0)
    p.send_offsets_to_transaction(
        [TopicPartition("in", n, o) for n, o in offsets.items()], consumer.consumer_group_metadata()
    )
    consumer.close()
    return p


def create_topics(admin: Any) -> None:
    for topic, partitions in (("in", 2), ("out", 1)):
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def listed(admin: Any) -> dict[str, Any]:
    """Group id -> state, as AdminClient.list_consumer_groups reports them."""
    result = admin.list_consumer_groups().result(30)
    return {g.group_id: g.state for g in result.valid}


def test_delete_a_group_with_only_pending_transactional_offsets(kt_broker) -> None:
    from kt.protocol import ErrorCode as E

    bs = kt_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    create_topics(admin)
    p = transactional(bs, "tx-pending-only", GROUP, {0: 5})

    # The group exists, Empty (no protocol type), with nothing committed yet; a
    # reader asking for stable offsets is told to retry.
    assert listed(admin)[GROUP] == ConsumerGroupState.EMPTY
    (described,) = admin.describe_consumer_groups([GROUP]).values()
    assert described.result(30).state == ConsumerGroupState.EMPTY
    assert offset_fetch(bs, require_stable=False) == {0: (E.NONE, -1)}
    assert offset_fetch(bs, require_stable=True) == {0: (E.UNSTABLE_OFFSET_COMMIT, -1)}

    # Kafka deletes an Empty group whatever transactions are open.
    admin.delete_consumer_groups([GROUP])[GROUP].result(30)  # raises on an error code
    assert GROUP not in listed(admin)
    assert offset_fetch(bs, require_stable=True) == {0: (E.NONE, -1)}

    # The commit marker finds no group: nothing takes effect.
    p.commit_transaction(30)
    assert offset_fetch(bs, require_stable=True) == {0: (E.NONE, -1)}
    assert GROUP not in listed(admin)

    # But the log holds the offset record and its COMMIT marker after the deletion's
    # tombstones, and Kafka's loader applies it: after a restart the group is back,
    # Empty, with the transaction's offset.
    kt_broker.restart()
    assert offset_fetch(bs, require_stable=True) == {0: (E.NONE, 5)}
    assert listed(admin)[GROUP] == ConsumerGroupState.EMPTY


def test_pending_transactional_offsets_keep_their_group_through_clean_ups(
    broker_factory,
) -> None:
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    from kt.protocol import ErrorCode as E

    b = broker_factory(**{"offsets.retention.check.interval.ms": "100"})
    bs = b.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    create_topics(admin)
    p = transactional(bs, "tx-kept", GROUP, {0: 5, 1: 7})
    # A second group whose transaction aborts: Empty without offsets, the next
    # clean-up removes it. Once it is gone, a clean-up has run over every group.
    transactional(bs, "tx-probe", "probe", {0: 3}).abort_transaction(30)
    deadline = time.monotonic() + 30
    while "probe" in listed(admin):
        assert time.monotonic() < deadline, "the offset clean-up never ran"
        time.sleep(0.1)
    # Kafka's hasOffsets counts a producer's pending offsets: the group stays.
    assert listed(admin)[GROUP] == ConsumerGroupState.EMPTY

    # OffsetDelete cancels the pending offset of its partition (Kafka's removeOffsets).
    kp = KafkaAdminClient(bootstrap_servers=bs)
    try:
        result = kp.delete_group_offsets(GROUP, [KTopicPartition("in", 1)])
    finally:
        kp.close()
    assert [e.errno for e in result.values()] == [E.NONE]
    assert offset_fetch(bs, True, partitions=(0, 1)) == {
        0: (E.UNSTABLE_OFFSET_COMMIT, -1),
        1: (E.NONE, -1),
    }
    p.commit_transaction(30)
    assert offset_fetch(bs, True, partitions=(0, 1)) == {0: (E.NONE, 5), 1: (E.NONE, -1)}
