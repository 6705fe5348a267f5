"""ControllerContext: the active controller's in-memory view of the cluster.

Kafka's ControllerContext. The controller loads it from ZooKeeper on failover and
keeps it in step with every write it makes and every watch that fires; elections,
the rebalance and reassignments read it instead of ZooKeeper. It holds this
controller's epoch (and the /controller_epoch znode version that fences its
writes), the live brokers with their registrations, the brokers shutting down,
topics with their ids and replica assignments, each partition's leadership (its
state znode) and the topic deletion queue. No I/O, no asyncio: a new term starts
from an empty one.

A broker that is shutting down is live for the channel (it still gets requests) but
not for elections: `online` leaves it out, as Kafka's `isReplicaOnline` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kt.broker.controller.requests import BrokerEndpointInfo, TopicReplicas
from kt.cluster.election import LeaderAndIsr
from kt.storage.checkpoint import TopicPartition


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


@dataclass(slots=True)
class ControllerContext:
    """The active controller's view of the cluster (one per controller term)."""

    epoch: int = 0
    epoch_zk_version: int = 0
    live: dict[int, BrokerEndpointInfo] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    topics: dict[str, TopicReplicas] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    to_delete: set[str] = field(default_factory=set)
    # topic -> replicas that acknowledged StopReplica(delete) for it
    deleted_by: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    # broker -> its replicas on a failed log directory (Kafka's replicasOnOfflineDirs),
    # until the broker registers again
    offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def replicas(self, tp: TopicPartition) -> list[int]:
        """The partition's assigned replicas, preferred leader first ([] if unknown)."""
        t = self.topics.get(tp.topic)
        return list(t.partitions.get(tp.partition, [])) if t else []

    def all_partitions(self) -> list[TopicPartition]:
        """Every partition of every known topic, in topic and partition order."""
        return [TopicPartition(n, p) for n, t in sorted(self.topics.items())
                for p in sorted(t.partitions)]  # fmt: skip

    def online(self) -> set[int]:
        """Brokers that may lead or join an ISR: live and not shutting down."""
        return set(self.live) - self.shutting_down

    def online_for(self, tp: TopicPartition) -> set[int]:
        """Brokers that may lead or join `tp`'s ISR: online, with `tp`'s log not on a
        failed directory."""
        return {b for b in self.online() if tp not in self.offline_dirs.get(b, ())}

    def offline_replicas(self) -> dict[TopicPartition, set[int]]:
        """Per partition, the live brokers whose replica of it is on a failed dir."""
        out: dict[TopicPartition, set[int]] = {}
        for b, tps in self.offline_dirs.items():
            for tp in tps:
                out.setdefault(tp, set()).add(b)
        return out

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        """The partitions with a replica assigned to `broker_id`."""
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]
