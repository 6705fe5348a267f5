"""ControllerContext: the active controller's in-memory view of the cluster.

Kafka's ControllerContext. The controller loads it from ZooKeeper on failover and
keeps it in step with every write it makes and every watch that fires; everything
else here (state machines, elections, rebalance) reads it instead of ZooKeeper. It
holds: this controller's epoch, the live brokers with their registration epochs,
the brokers shutting down, topics with their ids and full replica assignments
(including replicas being added and removed by a reassignment), each partition's
leadership (its state znode), the partition and replica states of Kafka's two state
machines, and the topic deletion queue. No I/O, no asyncio.

A broker that is shutting down is live for the channel (it still gets requests) but
not for elections: `live_broker_ids` leaves it out, as Kafka's does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Generic, Protocol, TypeVar

from kt.broker.controller import rebalance
from kt.broker.controller.election import LeaderAndIsr
from kt.broker.controller.rebalance import LeaderImbalance
from kt.storage.checkpoint import TopicPartition


class BrokerRegistration(Protocol):
    """What the context needs of a live broker (/brokers/ids/N): the controller's
    own type (with endpoints) satisfies it."""

    @property
    def broker_id(self) -> int: ...

    @property
    def epoch(self) -> int: ...  # the registration znode's czxid

    @property
    def rack(self) -> str | None: ...


B = TypeVar("B", bound=BrokerRegistration)


def _distinct(ids: Iterable[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(ids))


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas in ZooKeeper order (the head is the preferred leader),
    plus, during a reassignment, those being added and removed (Kafka's
    ReplicaAssignment; /brokers/topics/T's adding_replicas / removing_replicas)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def is_being_reassigned(self) -> bool:
        """Whether a reassignment is under way."""
        return bool(self.adding or self.removing)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """Where the reassignment goes (TRS): the replicas not being removed."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """Where it started (ORS): the replicas not being added."""
        return tuple(r for r in self.replicas if r not in self.adding)

    def reassign_to(self, target: Iterable[int]) -> ReplicaAssignment:
        """The assignment while moving from the origin replicas to `target`:
        RS = (TRS ++ ORS).distinct, AR = RS - ORS, RR = RS - TRS. Target first, so
        the preferred leader is already the target's. Reassigning to the origin
        cancels (nothing added or removed)."""
        target = tuple(target)
        origin = self.origin_replicas
        full = _distinct(target + origin)
        return ReplicaAssignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )

    def completed(self) -> ReplicaAssignment:
        """The assignment once the reassignment is done: the target alone."""
        return ReplicaAssignment(self.target_replicas)

    def remove_replica(self, replica: int) -> ReplicaAssignment:
        """Without one replica (a removing replica that has been deleted)."""
        return ReplicaAssignment(
            tuple(r for r in self.replicas if r != replica),
            tuple(r for r in self.adding if r != replica),
            tuple(r for r in self.removing if r != replica),
        )


class PartitionState(Enum):
    """The partition state machine's states (Kafka's PartitionState)."""

    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"

    def can_follow(self, previous: PartitionState) -> bool:
        """Whether `previous` -> self is a valid transition."""
        return previous in _PARTITION_PREVIOUS[self]


_PARTITION_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
    PartitionState.ONLINE: frozenset(
        {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}
    ),
    PartitionState.OFFLINE: frozenset(
        {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}
    ),
    PartitionState.NON_EXISTENT: frozenset({PartitionState.OFFLINE}),
}


class ReplicaState(Enum):
    """The replica state machine's states (Kafka's ReplicaState)."""

    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"

    def can_follow(self, previous: ReplicaState) -> bool:
        """Whether `previous` -> self is a valid transition."""
        return previous in _REPLICA_PREVIOUS[self]


_R = ReplicaState
_REPLICA_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}


@dataclass(frozen=True, slots=True)
class BrokerChanges:
    """How the registered brokers differ from the live ones (ids ascending)."""

    new: list[int]
    dead: list[int]
    bounced: list[int]


class ControllerContext(Generic[B]):
    """The controller's view; see the module docstring. Mutated only by the
    controller's single event task."""

    def __init__(self) -> None:
        self.epoch = 0  # /controller_epoch as this controller made it
        self.epoch_zk_version = 0  # its znode version: every write is fenced on it
        self.live_brokers: dict[int, B] = {}
        self.shutting_down_broker_ids: set[int] = set()
        self.topic_ids: dict[str, bytes] = {}
        self.assignments: dict[str, dict[int, ReplicaAssignment]] = {}
        self.leadership: dict[TopicPartition, LeaderAndIsr] = {}
        self.partition_states: dict[TopicPartition, PartitionState] = {}
        self.replica_states: dict[tuple[TopicPartition, int], ReplicaState] = {}
        self.topics_to_be_deleted: set[str] = set()
        self.topics_with_deletion_started: set[str] = set()
        self.topics_ineligible_for_deletion: set[str] = set()

    # --- brokers -------------------------------------------------------------------

    def add_live_brokers(self, brokers: Iterable[B]) -> None:
        """Brokers registered (or re-registered with a new epoch)."""
        for broker in brokers:
            self.live_brokers[broker.broker_id] = broker

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        """Brokers whose registration went away; a dead broker is not shutting down."""
        for broker_id in broker_ids:
            self.live_brokers.pop(broker_id, None)
            self.shutting_down_broker_ids.discard(broker_id)

    @property
    def live_broker_ids(self) -> set[int]:
        """Live brokers that may lead or join an ISR: not shutting down."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        """Every registered broker (all get the controller's requests)."""
        return set(self.live_brokers)

    def broker_changes(self, registered: Mapping[int, int]) -> BrokerChanges:
        """Compare /brokers/ids (id -> registration epoch) with the live brokers:
        which are new, which died, which re-registered with a larger epoch (a
        restart faster than the session timeout: a failure, then a startup)."""
        known = self.live_brokers
        return BrokerChanges(
            new=sorted(set(registered) - set(known)),
            dead=sorted(set(known) - set(registered)),
            bounced=sorted(
                b for b in set(registered) & set(known) if registered[b] > known[b].epoch
            ),
        )

    def broker_epoch(self, broker_id: int) -> int | None:
        """A live broker's registration epoch (None if it is not registered)."""
        broker = self.live_brokers.get(broker_id)
        return None if broker is None else broker.epoch

    def is_replica_online(self, broker_id: int, *, include_shutting_down: bool = False) -> bool:
        """Whether a replica on this broker can serve (Kafka's isReplicaOnline, without
        log-dir failures, which kt does not track per directory)."""
        if include_shutting_down:
            return broker_id in self.live_brokers
        return broker_id in self.live_brokers and broker_id not in self.shutting_down_broker_ids

    # --- topics and assignments -------------------------------------------------

    @property
    def all_topics(self) -> set[str]:
        """The topics the controller knows."""
        return set(self.assignments)

    def add_topic(
        self, topic: str, topic_id: bytes, assignment: dict[int, ReplicaAssignment]
    ) -> None:
        """A topic seen in /brokers/topics, with its id and replica assignment."""
        self.topic_ids[topic] = topic_id
        self.assignments[topic] = dict(assignment)

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic and everything about its partitions."""
        self.topic_ids.pop(topic, None)
        self.assignments.pop(topic, None)
        for tp in [tp for tp in self.leadership if tp.topic == topic]:
            del self.leadership[tp]
        for tp in [tp for tp in self.partition_states if tp.topic == topic]:
            del self.partition_states[tp]
        for key in [k for k in self.replica_states if k[0].topic == topic]:
            del self.replica_states[key]
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)

    def set_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """One partition's full assignment (new partition, reassignment step)."""
        self.assignments.setdefault(tp.topic, {})[tp.partition] = assignment

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """A partition's full assignment (empty if unknown)."""
        return self.assignments.get(tp.topic, {}).get(tp.partition, ReplicaAssignment(()))

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        """A partition's replicas (all of RS during a reassignment)."""
        return self.assignment(tp).replicas

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        """A topic's partitions in order."""
        return [TopicPartition(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def all_partitions(self) -> list[TopicPartition]:
        """Every partition, by topic then number."""
        return [tp for topic in sorted(self.assignments) for tp in self.partitions_for_topic(topic)]

    def _assigned(self) -> Iterator[tuple[TopicPartition, ReplicaAssignment]]:
        for topic, partitions in self.assignments.items():
            for p, assignment in partitions.items():
                yield TopicPartition(topic, p), assignment

    def partitions_on_broker(self, broker_id: int) -> set[TopicPartition]:
        """Partitions with a replica on the broker."""
        return {tp for tp, a in self._assigned() if broker_id in a.replicas}

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> set[tuple[TopicPartition, int]]:
        """(partition, replica) for every replica on these brokers."""
        ids = set(broker_ids)
        return {(tp, r) for tp, a in self._assigned() for r in a.replicas if r in ids}

    def replicas_for_partitions(
        self, partitions: Iterable[TopicPartition]
    ) -> set[tuple[TopicPartition, int]]:
        """(partition, replica) for every replica of these partitions."""
        return {(tp, r) for tp in partitions for r in self.replicas(tp)}

    def partitions_being_reassigned(self) -> set[TopicPartition]:
        """Partitions with a reassignment under way."""
        return {tp for tp, a in self._assigned() if a.is_being_reassigned}

    # --- leadership -------------------------------------------------------------

    def set_leadership(self, tp: TopicPartition, state: LeaderAndIsr) -> None:
        """A partition's state znode as read or written."""
        self.leadership[tp] = state

    def partitions_led_by(self, broker_id: int) -> set[TopicPartition]:
        """Partitions whose leader is the broker."""
        return {tp for tp, s in self.leadership.items() if s.leader == broker_id}

    def replicated_partitions_led_by(self, broker_id: int) -> set[TopicPartition]:
        """Partitions with more than one replica the broker leads, topics queued for
        deletion excepted: what controlled shutdown must move (its response's
        RemainingPartitions while some remain)."""
        return {
            tp
            for tp in self.partitions_led_by(broker_id)
            if len(self.replicas(tp)) > 1 and tp.topic not in self.topics_to_be_deleted
        }

    def replicated_partitions_followed_by(self, broker_id: int) -> set[TopicPartition]:
        """Partitions with more than one replica, a known leadership and a replica on
        the broker that does not lead them (controlled shutdown stops those replicas)."""
        return {
            tp
            for tp in self.partitions_on_broker(broker_id)
            if len(self.replicas(tp)) > 1
            and tp in self.leadership
            and self.leadership[tp].leader != broker_id
            and tp.topic not in self.topics_to_be_deleted
        }

    def partitions_with_offline_leader(self) -> set[TopicPartition]:
        """Partitions with no leader, or one not live or shutting down (Kafka's
        partitionsWithOfflineLeader), topics queued for deletion excepted."""
        live = self.live_broker_ids
        return {
            tp
            for tp, s in self.leadership.items()
            if s.leader not in live and tp.topic not in self.topics_to_be_deleted
        }

    # --- state machines -----------------------------------------------------------

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        """The partition state machine's state (NON_EXISTENT if never set)."""
        return self.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def set_partition_state(self, tp: TopicPartition, state: PartitionState) -> None:
        """Record a partition state; NON_EXISTENT forgets the partition."""
        if state is PartitionState.NON_EXISTENT:
            self.partition_states.pop(tp, None)
        else:
            self.partition_states[tp] = state

    def partitions_in_states(self, *states: PartitionState) -> set[TopicPartition]:
        """Partitions in any of these states."""
        return {tp for tp, s in self.partition_states.items() if s in states}

    def offline_partition_count(self) -> int:
        """OfflinePartitionsCount: OFFLINE partitions of topics not being deleted."""
        return sum(
            1
            for tp, s in self.partition_states.items()
            if s is PartitionState.OFFLINE and tp.topic not in self.topics_to_be_deleted
        )

    def replica_state(self, tp: TopicPartition, replica: int) -> ReplicaState:
        """The replica state machine's state (NON_EXISTENT if never set)."""
        return self.replica_states.get((tp, replica), ReplicaState.NON_EXISTENT)

    def set_replica_state(self, tp: TopicPartition, replica: int, state: ReplicaState) -> None:
        """Record a replica state; NON_EXISTENT forgets the replica."""
        if state is ReplicaState.NON_EXISTENT:
            self.replica_states.pop((tp, replica), None)
        else:
            self.replica_states[(tp, replica)] = state

    def replicas_in_state(self, topic: str, state: ReplicaState) -> set[tuple[TopicPartition, int]]:
        """A topic's replicas in this state."""
        return {k for k, s in self.replica_states.items() if k[0].topic == topic and s is state}

    def all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        """Whether every replica of the topic is in this state (deletion progress)."""
        keys = self.replicas_for_partitions(self.partitions_for_topic(topic))
        return all(self.replica_state(tp, r) is state for tp, r in keys)

    def any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        """Whether some replica of the topic is in this state."""
        return bool(self.replicas_in_state(topic, state))

    # --- topic deletion -------------------------------------------------------------

    def queue_topics_for_deletion(self, topics: Iterable[str]) -> None:
        """Topics marked in /admin/delete_topics."""
        self.topics_to_be_deleted.update(topics)

    def begin_topic_deletion(self, topics: Iterable[str]) -> None:
        """Deletion has started (StopReplica sent) for these topics."""
        self.topics_with_deletion_started.update(topics)

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        """Whether the topic is marked for deletion."""
        return topic in self.topics_to_be_deleted

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        """Whether deleting the topic has begun."""
        return topic in self.topics_with_deletion_started

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[str]) -> None:
        """Pause deleting these topics (a replica's broker is down, or a reassignment
        is under way); only topics queued for deletion are recorded."""
        self.topics_ineligible_for_deletion.update(
            t for t in topics if t in self.topics_to_be_deleted
        )

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        """Make paused topics eligible for deletion again."""
        self.topics_ineligible_for_deletion.difference_update(topics)

    def is_topic_eligible_for_deletion(self, topic: str) -> bool:
        """Queued for deletion and not paused."""
        return (
            topic in self.topics_to_be_deleted and topic not in self.topics_ineligible_for_deletion
        )

    # --- preferred leaders ------------------------------------------------------------

    def preferred_replica_imbalance(self) -> dict[int, LeaderImbalance]:
        """Per preferred replica (assignment head): its partitions, and those another
        broker leads; topics queued for deletion are left out (`rebalance.py`)."""
        return rebalance.preferred_replica_imbalance(
            self.all_partitions(), self.replicas, self.leadership, self.topics_to_be_deleted
        )

    def rebalance_candidates(self, imbalance_percentage: int) -> list[TopicPartition]:
        """Partitions the auto leader rebalance moves back to their preferred replica
        (`leader.imbalance.per.broker.percentage`; see `rebalance.py`)."""
        return rebalance.rebalance_candidates(
            self.preferred_replica_imbalance(),
            self.leadership,
            self.live_broker_ids,
            imbalance_percentage,
        )
