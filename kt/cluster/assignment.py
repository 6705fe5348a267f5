"""Replica placement for new topics and partitions (Kafka's AdminUtils), and the
validation of manual assignments. Pure: no I/O, randomness only when asked for.

Kafka's goals, in its order: spread replicas evenly over brokers; spread the other
replicas of the partitions led by one broker over the other brokers; and when every
broker has a rack, put a partition's replicas on distinct racks while racks remain.

Rack-unaware: the first replica of partition p is broker (p + start) round robin;
follower j sits `1 + (shift + j) % (n - 1)` brokers further on, and the shift grows
by one every n partitions so later rounds do not repeat the first round's pairs.
Rack-aware does the same over the brokers interleaved by rack, then skips a
candidate whose rack (or broker) already holds a replica while another rack (or
broker) holds none. Kafka picks start and shift at random; fixing them makes the
placement deterministic, which CreatePartitions and tests rely on.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from kt.protocol import ErrorCode


class AssignmentError(ValueError):
    """A placement or manual assignment Kafka refuses: its error code and message."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """A broker as placement sees it."""

    id: int
    rack: str | None = None


class RackAwareMode(Enum):
    """How placement treats racks (Kafka's RackAwareMode).

    ENFORCED: use racks, and refuse when only some brokers have one.
    SAFE: use racks when every broker has one, else ignore them.
    DISABLED: ignore racks (kafka-topics/kafka-reassign-partitions --disable-rack-aware).
    """

    ENFORCED = "enforced"
    SAFE = "safe"
    DISABLED = "disabled"


def broker_metadatas(
    racks: Mapping[int, str | None], mode: RackAwareMode = RackAwareMode.ENFORCED
) -> list[BrokerMetadata]:
    """The brokers to place replicas on, sorted by id, their racks kept or dropped as
    `mode` says (Kafka's AdminZkClient.getBrokerMetadatas)."""
    with_rack = sum(1 for rack in racks.values() if rack is not None)
    if mode is RackAwareMode.ENFORCED and 0 < with_rack < len(racks):
        raise AssignmentError(
            ErrorCode.UNKNOWN_SERVER_ERROR,  # see assign_replicas_to_brokers
            "Not all brokers have rack information. Add --disable-rack-aware in command "
            "line to make replica assignment without rack information.",
        )
    keep = mode is RackAwareMode.ENFORCED or (
        mode is RackAwareMode.SAFE and with_rack == len(racks)
    )
    return [BrokerMetadata(b, racks[b] if keep else None) for b in sorted(racks)]


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    replica_shift: int | None = None,
    first_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists for partitions first_partition .. first_partition+partitions-1,
    preferred leader first (Kafka's AdminUtils.assignReplicasToBrokers).

    `brokers` in the order to round-robin over (Kafka sorts them by id). A missing
    `start_index` is random; a missing `replica_shift` is `start_index` when that is
    given (as Kafka's fixedStartIndex sets both), else random. Racks are used when
    every broker has one; some but not all -> AssignmentError.
    """
    if partitions <= 0:
        raise AssignmentError(
            ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
        )
    if replication_factor <= 0:
        raise AssignmentError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    if replication_factor > len(brokers):
        raise AssignmentError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}.",
        )
    with_rack = sum(1 for b in brokers if b.rack is not None)
    if 0 < with_rack < len(brokers):
        raise AssignmentError(
            # Kafka throws a plain AdminOperationException here, which the wire turns
            # into UNKNOWN_SERVER_ERROR; the message is what helps the user.
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    rng = rng or random.Random()
    if replica_shift is None:
        replica_shift = start_index if start_index is not None else rng.randrange(len(brokers))
    if start_index is None:
        start_index = rng.randrange(len(brokers))
    if with_rack:
        racks = {b.id: b.rack or "" for b in brokers}
        return _rack_aware(
            racks, partitions, replication_factor, start_index, replica_shift, first_partition
        )
    ids = [b.id for b in brokers]
    return _rack_unaware(
        ids, partitions, replication_factor, start_index, replica_shift, first_partition
    )


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    # Never 0 brokers further on: a follower never lands on the leader's broker.
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_unaware(
    ids: list[int], partitions: int, rf: int, start: int, shift: int, first_partition: int
) -> dict[int, list[int]]:
    n = len(ids)
    out: dict[int, list[int]] = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        out[p] = [ids[first]] + [ids[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
    return out


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Brokers interleaved by rack: racks in name order, each rack's brokers in id
    order, one from each rack in turn (rack1: 0,1,2, rack2: 3,4,5 -> 0,3,1,4,2,5)."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    depth = max(len(c) for c in columns)
    return [c[i] for i in range(depth) for c in columns if i < len(c)]


def _rack_aware(
    racks: Mapping[int, str],
    partitions: int,
    rf: int,
    start: int,
    shift: int,
    first_partition: int,
) -> dict[int, list[int]]:
    arranged = rack_alternated_brokers(racks)
    n = len(arranged)
    n_racks = len(set(racks.values()))
    out: dict[int, list[int]] = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        k = 0
        while len(replicas) < rf:
            broker = arranged[_replica_index(first, shift * n_racks, k, n)]
            k += 1
            rack = racks[broker]
            # Skip a broker whose rack already has a replica while some rack has none,
            # or which has a replica itself while some broker has none.
            if rack in racks_used and len(racks_used) < n_racks:
                continue
            if broker in replicas and len(replicas) < n:
                continue
            replicas.append(broker)
            racks_used.add(rack)
        out[p] = replicas
    return out


def assign_new_partitions(
    topic: str,
    existing: Mapping[int, Sequence[int]],
    brokers: Sequence[BrokerMetadata],
    total: int,
    *,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists for the partitions CreatePartitions adds to grow `topic` to
    `total` (Kafka's AdminZkClient.createNewPartitionsAssignment without a manual
    assignment): the replication factor of partition 0, and the round robin resumed
    from partition 0's leader so the new partitions continue the existing pattern."""
    if 0 not in existing:
        raise AssignmentError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 "
            "is missing.",
        )
    # kt's single-node messages for these (kt/broker/broker.py add_partitions).
    if total == len(existing):
        raise AssignmentError(
            ErrorCode.INVALID_PARTITIONS, f"Topic already has {total} partition(s)."
        )
    if total < len(existing):
        raise AssignmentError(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic {topic} currently has {len(existing)} partition(s); {total} "
            "would not be an increase.",
        )
    head = existing[0]
    start = next((i for i, b in enumerate(brokers) if b.id >= head[0]), 0)
    return assign_replicas_to_brokers(
        brokers,
        total - len(existing),
        len(head),
        start_index=start,
        first_partition=len(existing),
        rng=rng,
    )


def replica_assignment_problem(
    replicas: Sequence[int], registered: Collection[int], expected: int | None = None
) -> str | None:
    """Why one partition's manual replica list is unusable (Kafka's messages), or
    None: empty, a broker not registered, a broker twice, or a replication factor
    other than `expected` (the topic's, or the first listed partition's)."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    seen: set[int] = set()
    # Sorted, as Kafka checks them: the smallest offending id is the one reported.
    for broker_id in sorted(replicas):
        if broker_id not in registered:
            return (
                f"The manual partition assignment includes broker {broker_id}, but no "
                "such broker is registered."
            )
        if broker_id in seen:
            return (
                f"The manual partition assignment includes the broker {broker_id} more than once."
            )
        seen.add(broker_id)
    if expected is not None and len(replicas) != expected:
        return (
            f"The manual partition assignment includes a partition with {len(replicas)} "
            f"replica(s), but this is not consistent with previous partitions, which "
            f"have {expected} replica(s)."
        )
    return None


def validate_manual_assignment(
    assignment: Mapping[int, Sequence[int]],
    registered: Collection[int],
    *,
    replication_factor: int | None = None,
    first_partition: int = 0,
) -> None:
    """Check a whole manual assignment (kafka-topics --replica-assignment 1:2,2:3 as
    {0: [1, 2], 1: [2, 3]}): every replica list as `replica_assignment_problem`
    checks, one replication factor throughout (`replication_factor`, e.g. an existing
    topic's, else the first partition's), partitions numbered consecutively from
    `first_partition`. AssignmentError (INVALID_REPLICA_ASSIGNMENT) otherwise."""
    if not assignment:
        raise AssignmentError(
            ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
        )
    if sorted(assignment) != list(range(first_partition, first_partition + len(assignment))):
        raise AssignmentError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )
    expected = replication_factor
    for p in sorted(assignment):
        problem = replica_assignment_problem(assignment[p], registered, expected)
        if problem:
            raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
        expected = len(assignment[p])


def _scala_seq(ids: Sequence[int] | Collection[int], kind: str = "ArrayBuffer") -> str:
    # Kafka formats these lists with Scala's toString; users grep for them.
    return f"{kind}({', '.join(map(str, ids))})"


def reassignment_problem(
    replicas: Sequence[int], adding: Sequence[int], live: Collection[int]
) -> str | None:
    """Why AlterPartitionReassignments refuses a partition's target replicas
    (INVALID_REPLICA_ASSIGNMENT, Kafka's KafkaController.validateReplicas), or None:
    an empty list, duplicates, negative ids, or replicas to add (`adding`: those of
    ReplicaAssignment.reassign_to(replicas)) on brokers that are not live."""
    if not replicas:
        return "Empty replica list specified in partition reassignment."
    if len(set(replicas)) != len(replicas):
        return "Duplicate replica ids in partition reassignment replica list: " + _scala_seq(
            replicas
        )
    if any(r < 0 for r in replicas):
        return f"Invalid broker id in replica list: {_scala_seq(replicas)}"
    if not set(adding) <= set(live):
        return (
            f"Replica assignment has brokers that are not alive. Replica list: "
            f"{_scala_seq(adding)}, live broker list: {_scala_seq(sorted(live), 'Set')}"
        )
    return None
