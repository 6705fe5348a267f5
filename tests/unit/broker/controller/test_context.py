"""ControllerContext (the active controller's view) and ReplicaAssignment."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kt.broker.controller.context import ControllerContext, ReplicaAssignment
from kt.broker.controller.requests import BrokerEndpointInfo, TopicReplicas
from kt.storage.checkpoint import TopicPartition


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


def context() -> ControllerContext:
    """Brokers 1-3; topic a: 0 -> [1,2], 1 -> [2,3]; topic b: 0 -> [3,1]."""
    ctx = ControllerContext(epoch=4, epoch_zk_version=3)
    for b in (1, 2, 3):
        ctx.live[b] = BrokerEndpointInfo(b, 10 * b, (("PLAINTEXT", "127.0.0.1", 9090 + b),))
    ctx.topics["b"] = TopicReplicas(b"B" * 16, {0: [3, 1]})
    ctx.topics["a"] = TopicReplicas(b"A" * 16, {1: [2, 3], 0: [1, 2]})
    return ctx


# --- ReplicaAssignment ------------------------------------------------------------


def test_reassignment_sets_follow_kafkas_definitions() -> None:
    # Kafka's doc example: {1,2,3} -> {4,5,6}.
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([4, 5, 6])
    assert moving == ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert moving.is_being_reassigned
    assert moving.target_replicas == (4, 5, 6) and moving.origin_replicas == (1, 2, 3)
    assert moving.completed() == ReplicaAssignment((4, 5, 6))
    overlap = ReplicaAssignment((1, 2, 3)).reassign_to([3, 4])
    assert overlap == ReplicaAssignment((3, 4, 1, 2), (4,), (1, 2))


def test_a_new_reassignment_starts_from_the_origin() -> None:
    moving = ReplicaAssignment((1, 2)).reassign_to([3, 4])
    again = moving.reassign_to([2, 5])
    assert again == ReplicaAssignment((2, 5, 1), (5,), (1,))
    assert moving.reassign_to([1, 2]) == ReplicaAssignment((1, 2))  # cancelled


def test_remove_replica() -> None:
    moving = ReplicaAssignment((3, 4, 1, 2), (4,), (1, 2))
    assert moving.remove_replica(1) == ReplicaAssignment((3, 4, 2), (4,), (2,))


@given(
    st.lists(st.integers(0, 9), min_size=1, max_size=5, unique=True),
    st.lists(st.integers(0, 9), min_size=1, max_size=5, unique=True),
)
def test_reassignment_properties(origin: list[int], target: list[int]) -> None:
    moving = ReplicaAssignment(tuple(origin)).reassign_to(target)
    assert moving.target_replicas == tuple(target)
    # In RS order, as Kafka's originReplicas (target first), so only as a set.
    assert sorted(moving.origin_replicas) == sorted(origin)
    assert len(set(moving.replicas)) == len(moving.replicas)
    assert set(moving.replicas) == set(origin) | set(target)
    assert moving.is_being_reassigned == (set(origin) != set(target))
    assert moving.replicas[: len(target)] == tuple(target)


# --- brokers ----------------------------------------------------------------------


def test_shutting_down_brokers_are_live_but_not_online() -> None:
    ctx = context()
    ctx.shutting_down.add(2)
    assert set(ctx.live) == {1, 2, 3}  # still sent requests
    assert ctx.online() == {1, 3}  # but never elected or added to an ISR


def test_partition_queries() -> None:
    ctx = context()
    # topic and partition order, whatever order they were learnt in
    assert ctx.all_partitions() == [tp("a", 0), tp("a", 1), tp("b", 0)]
    assert ctx.replicas(tp("b", 0)) == [3, 1]
    assert ctx.replicas(tp("a", 9)) == [] and ctx.replicas(tp("x", 0)) == []
    assert ctx.partitions_on(1) == [tp("a", 0), tp("b", 0)]
    assert ctx.partitions_on(4) == []
    # a copy: callers may change what they are given
    ctx.replicas(tp("a", 0)).append(9)
    assert ctx.replicas(tp("a", 0)) == [1, 2]


def test_a_new_term_starts_empty() -> None:
    fresh = ControllerContext()
    assert (fresh.epoch, fresh.live, fresh.topics, fresh.leadership) == (0, {}, {}, {})
    assert fresh.all_partitions() == [] and fresh.online() == set()
