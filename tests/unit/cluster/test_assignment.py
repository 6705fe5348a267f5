"""Replica placement (Kafka's AdminUtils) and manual assignment validation."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kt.cluster.assignment import (
    AssignmentError,
    BrokerMetadata,
    RackAwareMode,
    assign_new_partitions,
    assign_replicas_to_brokers,
    broker_metadatas,
    rack_alternated_brokers,
    reassignment_problem,
    replica_assignment_problem,
    validate_manual_assignment,
)
from kt.protocol import ErrorCode


def plain(*ids: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(i) for i in ids]


def racked(racks: dict[int, str]) -> list[BrokerMetadata]:
    return [BrokerMetadata(b, r) for b, r in sorted(racks.items())]


# --- examples from Kafka's documentation and tests ---------------------------------


def test_rack_unaware_matches_kafkas_table() -> None:
    got = assign_replicas_to_brokers(plain(0, 1, 2, 3, 4), 10, 3, start_index=0)
    assert got == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],  # second round: the followers shift by one more
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_start_index_and_shift_are_separate_knobs() -> None:
    got = assign_replicas_to_brokers(plain(0, 1, 2), 3, 2, start_index=1, replica_shift=1)
    assert got == {0: [1, 0], 1: [2, 1], 2: [0, 2]}
    got = assign_replicas_to_brokers(plain(0, 1, 2), 3, 2, start_index=1, replica_shift=0)
    assert got == {0: [1, 2], 1: [2, 0], 2: [0, 1]}


def test_rack_alternated_list() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    uneven = {0: "a", 1: "a", 2: "a", 3: "b"}
    assert rack_alternated_brokers(uneven) == [0, 3, 1, 2]


def test_rack_aware_matches_kafkas_example() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    got = assign_replicas_to_brokers(racked(racks), 7, 3, start_index=0)
    assert got == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],  # not 0,3,1 again
    }


def test_random_start_uses_the_rng() -> None:
    a = assign_replicas_to_brokers(plain(1, 2, 3), 6, 2, rng=random.Random(7))
    b = assign_replicas_to_brokers(plain(1, 2, 3), 6, 2, rng=random.Random(7))
    assert a == b


# --- errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("partitions", "rf", "code", "message"),
    [
        (0, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
        (1, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."),
        (
            1,
            4,
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor: 4 larger than available brokers: 3.",
        ),
    ],
)
def test_invalid_requests(partitions: int, rf: int, code: ErrorCode, message: str) -> None:
    with pytest.raises(AssignmentError) as info:
        assign_replicas_to_brokers(plain(0, 1, 2), partitions, rf, start_index=0)
    assert info.value.error_code is code and str(info.value) == message


def test_some_brokers_without_rack() -> None:
    brokers = [BrokerMetadata(0, "a"), BrokerMetadata(1)]
    with pytest.raises(AssignmentError, match="Not all brokers have rack information"):
        assign_replicas_to_brokers(brokers, 1, 1)
    with pytest.raises(AssignmentError, match="Add --disable-rack-aware"):
        broker_metadatas({0: "a", 1: None})
    assert broker_metadatas({1: None, 0: "a"}, RackAwareMode.SAFE) == plain(0, 1)
    assert broker_metadatas({1: "b", 0: "a"}, RackAwareMode.SAFE) == racked({0: "a", 1: "b"})
    assert broker_metadatas({1: "b", 0: "a"}, RackAwareMode.DISABLED) == plain(0, 1)
    assert broker_metadatas({1: "b", 0: "a"}) == racked({0: "a", 1: "b"})


# --- CreatePartitions ------------------------------------------------------------------


def test_new_partitions_continue_the_round_robin() -> None:
    # Within the first round the followers' shift is the same too.
    brokers = plain(0, 1, 2, 3, 4)
    whole = assign_replicas_to_brokers(brokers, 10, 3, start_index=2)
    first = {p: whole[p] for p in range(4)}
    assert assign_new_partitions("t", first, brokers, 10) == {p: whole[p] for p in range(4, 10)}


def test_new_partitions_take_partition_zeros_replication_factor() -> None:
    got = assign_new_partitions("t", {0: [7, 3], 1: [3, 7]}, plain(3, 5, 7), 3)
    # Partition 0 is led by 7 (index 2): partition 2 is led by index (2 + 2) % 3.
    assert got == {2: [5, 7]}


def test_new_partitions_errors() -> None:
    brokers = plain(0, 1)
    with pytest.raises(AssignmentError, match=r"^Topic already has 2 partition\(s\)\.$"):
        assign_new_partitions("t", {0: [0], 1: [1]}, brokers, 2)
    with pytest.raises(AssignmentError, match="currently has 2 partition") as info:
        assign_new_partitions("t", {0: [0], 1: [1]}, brokers, 1)
    assert info.value.error_code is ErrorCode.INVALID_PARTITIONS
    with pytest.raises(AssignmentError, match="partition id 0 is missing"):
        assign_new_partitions("t", {1: [1]}, brokers, 3)


# --- manual assignments ------------------------------------------------------------------


def test_manual_assignment_messages_match_the_single_node_broker() -> None:
    registered = {1, 2, 3}
    assert replica_assignment_problem([1, 2], registered, 2) is None
    assert replica_assignment_problem([], registered) == (
        "The manual partition assignment includes an empty replica list."
    )
    assert replica_assignment_problem([3, 9, 4], registered) == (
        "The manual partition assignment includes broker 4, but no such broker is registered."
    )
    assert replica_assignment_problem([2, 1, 2], registered) == (
        "The manual partition assignment includes the broker 2 more than once."
    )
    assert replica_assignment_problem([1, 2, 3], registered, 2) == (
        "The manual partition assignment includes a partition with 3 replica(s), but this "
        "is not consistent with previous partitions, which have 2 replica(s)."
    )


def test_validate_manual_assignment() -> None:
    validate_manual_assignment({0: [1, 2], 1: [2, 3]}, {1, 2, 3})
    validate_manual_assignment({3: [1]}, {1}, replication_factor=1, first_partition=3)
    cases = [
        ({0: [1, 2], 1: [2]}, "not consistent with previous partitions, which have 2"),
        ({0: [1, 1]}, "the broker 1 more than once"),
        ({0: [4]}, "broker 4, but no such broker"),
        ({0: [1], 2: [2]}, "consecutive 0-based"),
    ]
    for assignment, message in cases:
        with pytest.raises(AssignmentError, match=message) as info:
            validate_manual_assignment(assignment, {1, 2, 3})
        assert info.value.error_code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    with pytest.raises(AssignmentError, match="which have 3 replica"):
        validate_manual_assignment({0: [1, 2]}, {1, 2, 3}, replication_factor=3)
    with pytest.raises(AssignmentError) as info:
        validate_manual_assignment({}, {1})
    assert info.value.error_code is ErrorCode.INVALID_PARTITIONS


# --- properties ----------------------------------------------------------------------------


@st.composite
def placements(draw: st.DrawFn) -> tuple[list[int], int, int, int, int]:
    """(broker ids, partitions, replication factor, start index, shift)."""
    ids = sorted(draw(st.sets(st.integers(0, 50), min_size=1, max_size=9)))
    partitions = draw(st.integers(1, 40))
    rf = draw(st.integers(1, len(ids)))
    start = draw(st.integers(0, len(ids) - 1))
    shift = draw(st.integers(0, len(ids) - 1))
    return ids, partitions, rf, start, shift


@given(placements())
def test_rack_unaware_properties(p: tuple[list[int], int, int, int, int]) -> None:
    ids, partitions, rf, start, shift = p
    brokers = plain(*ids)
    got = assign_replicas_to_brokers(
        brokers, partitions, rf, start_index=start, replica_shift=shift
    )
    assert sorted(got) == list(range(partitions))
    for replicas in got.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(ids)
    leaders = Counter(r[0] for r in got.values())
    counts = [leaders.get(b, 0) for b in ids]
    assert max(counts) - min(counts) <= 1
    if partitions % len(ids) == 0:
        # Whole rounds: every broker leads as often and holds as many replicas.
        assert len(set(counts)) == 1
        held = Counter(b for r in got.values() for b in r)
        assert len({held.get(b, 0) for b in ids}) == 1
    # Deterministic given start and shift.
    again = assign_replicas_to_brokers(
        brokers, partitions, rf, start_index=start, replica_shift=shift
    )
    assert again == got


@given(placements(), st.integers(1, 4))
def test_rack_aware_properties(p: tuple[list[int], int, int, int, int], n_racks: int) -> None:
    ids, partitions, rf, start, shift = p
    racks = {b: f"r{i % n_racks}" for i, b in enumerate(ids)}
    got = assign_replicas_to_brokers(
        racked(racks), partitions, rf, start_index=start, replica_shift=shift
    )
    distinct_racks = len(set(racks.values()))
    for replicas in got.values():
        assert len(set(replicas)) == rf
        assert len({racks[b] for b in replicas}) == min(rf, distinct_racks)
    leaders = Counter(r[0] for r in got.values())
    counts = [leaders.get(b, 0) for b in ids]
    assert max(counts) - min(counts) <= 1


@given(placements(), st.integers(1, 20))
def test_adding_partitions_equals_creating_them_at_once(
    p: tuple[list[int], int, int, int, int], more: int
) -> None:
    ids, partitions, rf, start, _ = p
    brokers = plain(*ids)
    # The leaders continue the round robin exactly; the followers' shift does not
    # (Kafka restarts it from the start index), so only distinctness holds for them.
    whole = assign_replicas_to_brokers(brokers, partitions + more, rf, start_index=start)
    existing = {q: whole[q] for q in range(partitions)}
    added = assign_new_partitions("t", existing, brokers, partitions + more)
    assert sorted(added) == list(range(partitions, partitions + more))
    for replicas in added.values():
        assert len(set(replicas)) == rf
    assert [added[q][0] for q in added] == [whole[q][0] for q in added]


def test_reassignment_problems() -> None:
    assert reassignment_problem([1, 2], [2], {1, 2}) is None
    assert reassignment_problem([], [], {1}) == (
        "Empty replica list specified in partition reassignment."
    )
    assert reassignment_problem([1, 1], [], {1}) == (
        "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(1, 1)"
    )
    assert reassignment_problem([1, -2], [-2], {1}) == (
        "Invalid broker id in replica list: ArrayBuffer(1, -2)"
    )
    assert reassignment_problem([1, 4], [4], {2, 1}) == (
        "Replica assignment has brokers that are not alive. Replica list: ArrayBuffer(4), "
        "live broker list: Set(1, 2)"
    )
