"""ControllerContext: brokers, assignments and reassignments, states, queries."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from kt.broker.controller.context import (
    ControllerContext,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
)
from kt.broker.controller.election import NO_LEADER, LeaderAndIsr
from kt.storage.checkpoint import TopicPartition


@dataclass(frozen=True)
class Broker:
    broker_id: int
    epoch: int
    rack: str | None = None


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


def lead(leader: int, isr: tuple[int, ...]) -> LeaderAndIsr:
    return LeaderAndIsr(leader, 0, isr, 1, 0)


def context() -> ControllerContext[Broker]:
    """Brokers 1-3; topic a: 0 -> [1,2], 1 -> [2,3]; topic b: 0 -> [3,1]."""
    ctx: ControllerContext[Broker] = ControllerContext()
    ctx.add_live_brokers([Broker(1, 10), Broker(2, 20), Broker(3, 30)])
    ctx.add_topic("a", b"A" * 16, {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 3))})
    ctx.add_topic("b", b"B" * 16, {0: ReplicaAssignment((3, 1))})
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


def test_shutting_down_brokers_are_not_live_for_elections() -> None:
    ctx = context()
    ctx.shutting_down_broker_ids.add(2)
    assert ctx.live_broker_ids == {1, 3}
    assert ctx.live_or_shutting_down_broker_ids == {1, 2, 3}
    assert not ctx.is_replica_online(2) and ctx.is_replica_online(2, include_shutting_down=True)
    ctx.remove_live_brokers([2])
    assert ctx.shutting_down_broker_ids == set() and ctx.broker_epoch(2) is None
    ctx.add_live_brokers([Broker(2, 99)])  # came back with a new registration
    assert ctx.broker_epoch(2) == 99


# --- queries ----------------------------------------------------------------------


def test_partition_queries() -> None:
    ctx = context()
    assert ctx.all_topics == {"a", "b"}
    assert ctx.all_partitions() == [tp("a", 0), tp("a", 1), tp("b", 0)]
    assert ctx.partitions_on_broker(1) == {tp("a", 0), tp("b", 0)}
    assert ctx.replicas_on_brokers([3]) == {(tp("a", 1), 3), (tp("b", 0), 3)}
    assert ctx.replicas_for_partitions([tp("a", 0)]) == {(tp("a", 0), 1), (tp("a", 0), 2)}
    assert ctx.replicas(tp("x", 0)) == ()
    ctx.set_leadership(tp("a", 0), lead(1, (1, 2)))
    ctx.set_leadership(tp("a", 1), lead(3, (3,)))
    ctx.set_leadership(tp("b", 0), lead(NO_LEADER, (1,)))
    assert ctx.partitions_led_by(1) == {tp("a", 0)}
    ctx.remove_live_brokers([3])
    assert ctx.partitions_with_offline_leader() == {tp("a", 1), tp("b", 0)}
    ctx.queue_topics_for_deletion(["b"])
    assert ctx.partitions_with_offline_leader() == {tp("a", 1)}


def test_reassigning_partitions() -> None:
    ctx = context()
    ctx.set_assignment(tp("a", 1), ctx.assignment(tp("a", 1)).reassign_to([1, 2]))
    assert ctx.partitions_being_reassigned() == {tp("a", 1)}
    assert ctx.replicas(tp("a", 1)) == (1, 2, 3)
    ctx.set_assignment(tp("a", 1), ctx.assignment(tp("a", 1)).completed())
    assert ctx.partitions_being_reassigned() == set()


def test_partition_and_replica_states() -> None:
    ctx = context()
    assert ctx.partition_state(tp("a", 0)) is PartitionState.NON_EXISTENT
    ctx.set_partition_state(tp("a", 0), PartitionState.ONLINE)
    ctx.set_partition_state(tp("a", 1), PartitionState.OFFLINE)
    ctx.set_partition_state(tp("b", 0), PartitionState.OFFLINE)
    assert ctx.partitions_in_states(PartitionState.OFFLINE) == {tp("a", 1), tp("b", 0)}
    assert ctx.offline_partition_count() == 2
    ctx.queue_topics_for_deletion(["b"])
    assert ctx.offline_partition_count() == 1
    ctx.set_partition_state(tp("a", 0), PartitionState.NON_EXISTENT)
    assert tp("a", 0) not in ctx.partition_states

    for p, replicas in ((0, (3, 1)),):
        for r in replicas:
            ctx.set_replica_state(tp("b", p), r, ReplicaState.DELETION_STARTED)
    assert ctx.all_replicas_in_state("b", ReplicaState.DELETION_STARTED)
    ctx.set_replica_state(tp("b", 0), 1, ReplicaState.DELETION_INELIGIBLE)
    assert not ctx.all_replicas_in_state("b", ReplicaState.DELETION_STARTED)
    assert ctx.any_replica_in_state("b", ReplicaState.DELETION_INELIGIBLE)
    assert ctx.replicas_in_state("b", ReplicaState.DELETION_INELIGIBLE) == {(tp("b", 0), 1)}


def test_state_transitions_are_kafkas() -> None:
    assert PartitionState.NEW.can_follow(PartitionState.NON_EXISTENT)
    assert not PartitionState.NEW.can_follow(PartitionState.ONLINE)
    assert PartitionState.ONLINE.can_follow(PartitionState.OFFLINE)
    assert not PartitionState.NON_EXISTENT.can_follow(PartitionState.ONLINE)
    assert ReplicaState.DELETION_STARTED.can_follow(ReplicaState.OFFLINE)
    assert not ReplicaState.DELETION_STARTED.can_follow(ReplicaState.ONLINE)
    assert ReplicaState.ONLINE.can_follow(ReplicaState.DELETION_INELIGIBLE)
    assert ReplicaState.NON_EXISTENT.can_follow(ReplicaState.DELETION_SUCCESSFUL)


def test_topic_deletion_bookkeeping() -> None:
    ctx = context()
    ctx.mark_topic_ineligible_for_deletion(["a"])  # not queued: ignored
    assert ctx.topics_ineligible_for_deletion == set()
    ctx.queue_topics_for_deletion(["a"])
    assert ctx.is_topic_queued_for_deletion("a") and ctx.is_topic_eligible_for_deletion("a")
    ctx.mark_topic_ineligible_for_deletion(["a"])
    assert not ctx.is_topic_eligible_for_deletion("a")
    ctx.resume_deletion_for_topics(["a"])
    ctx.begin_topic_deletion(["a"])
    assert ctx.is_topic_deletion_in_progress("a")
    ctx.set_leadership(tp("a", 0), lead(1, (1,)))
    ctx.set_partition_state(tp("a", 0), PartitionState.OFFLINE)
    ctx.set_replica_state(tp("a", 0), 1, ReplicaState.OFFLINE)
    ctx.remove_topic("a")
    assert ctx.all_topics == {"b"} and "a" not in ctx.topic_ids
    assert not ctx.leadership and not ctx.partition_states and not ctx.replica_states
    assert not ctx.is_topic_queued_for_deletion("a")
    assert not ctx.is_topic_deletion_in_progress("a")


# --- preferred leaders -----------------------------------------------------------------


def test_preferred_replica_imbalance() -> None:
    ctx = context()
    ctx.set_leadership(tp("a", 0), lead(2, (1, 2)))  # preferred 1, led by 2
    ctx.set_leadership(tp("a", 1), lead(2, (2, 3)))  # preferred 2, led by 2
    ctx.set_leadership(tp("b", 0), lead(3, (3, 1)))  # preferred 3, led by 3
    imbalance = ctx.preferred_replica_imbalance()
    assert imbalance[1].preferred == (tp("a", 0),) and imbalance[1].not_led == (tp("a", 0),)
    assert imbalance[1].ratio == 1.0 and imbalance[2].ratio == 0.0 and imbalance[3].ratio == 0.0
    assert ctx.rebalance_candidates(10) == [tp("a", 0)]
    # Not while the preferred replica is out of the ISR, or not live.
    ctx.set_leadership(tp("a", 0), lead(2, (2,)))
    assert ctx.rebalance_candidates(10) == []
    ctx.set_leadership(tp("a", 0), lead(2, (1, 2)))
    ctx.shutting_down_broker_ids.add(1)
    assert ctx.rebalance_candidates(10) == []


def test_rebalance_threshold_is_exclusive() -> None:
    ctx: ControllerContext[Broker] = ControllerContext()
    ctx.add_live_brokers([Broker(1, 1), Broker(2, 2)])
    ctx.add_topic("t", b"T" * 16, {p: ReplicaAssignment((1, 2)) for p in range(10)})
    for p in range(10):
        ctx.set_leadership(tp("t", p), lead(2 if p == 0 else 1, (1, 2)))
    assert ctx.preferred_replica_imbalance()[1].ratio == 0.1
    assert ctx.rebalance_candidates(10) == []  # 10% is not more than 10%
    assert ctx.rebalance_candidates(9) == [tp("t", 0)]


def test_broker_changes_find_new_dead_and_bounced() -> None:
    ctx = context()
    changes = ctx.broker_changes({1: 10, 2: 25, 4: 40})
    assert (changes.new, changes.dead, changes.bounced) == ([4], [3], [2])
    assert ctx.broker_changes({1: 10, 2: 20, 3: 30}) == type(changes)([], [], [])


def test_controlled_shutdown_partitions() -> None:
    ctx = context()
    ctx.add_topic("single", b"S" * 16, {0: ReplicaAssignment((1,))})
    ctx.set_leadership(tp("a", 0), lead(1, (1, 2)))
    ctx.set_leadership(tp("a", 1), lead(2, (2, 3)))
    ctx.set_leadership(tp("b", 0), lead(3, (3, 1)))
    ctx.set_leadership(tp("single", 0), lead(1, (1,)))
    assert ctx.replicated_partitions_led_by(1) == {tp("a", 0)}
    assert ctx.replicated_partitions_followed_by(1) == {tp("b", 0)}
    ctx.queue_topics_for_deletion(["a", "b"])
    assert ctx.replicated_partitions_led_by(1) == set()
    assert ctx.replicated_partitions_followed_by(1) == set()
