"""Kafka's partition leader election algorithms, as pure functions.

The controller elects a partition's leader by one of five strategies (Kafka's
PartitionLeaderElectionAlgorithms and Election): offline (the leader died),
reassignment (the leader is not in the target replicas), preferred (move leadership
back to the assignment's head), controlled shutdown (move it off a stopping broker)
and new partition. Each function here looks only at replica lists and broker sets and
returns an `Elected` (leader, new ISR, whether it was unclean) or None when no replica
qualifies; `LeaderAndIsr.elect` turns that into the next partition state.

"Live" always means live and not shutting down, as Kafka's
`ControllerContext.isReplicaOnline` does by default: a stopping broker must not be
handed new leaderships.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import Enum, IntEnum

from kt.protocol import ErrorCode

NO_LEADER = -1


class LeaderRecoveryState(IntEnum):
    """KIP-704: RECOVERING after an unclean election, until the new leader has
    truncated the others' logs to its own and reports RECOVERED (AlterPartition)."""

    RECOVERED = 0
    RECOVERING = 1


@dataclass(frozen=True, slots=True)
class Elected:
    """The outcome of an election: who leads and with which ISR."""

    leader: int
    isr: tuple[int, ...]
    # Unclean: the leader was not in the ISR, so acknowledged records may be lost.
    unclean: bool = False


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's state znode (/brokers/topics/T/partitions/P/state) with its
    zkVersion, which Kafka calls the partition epoch.

    A state derived from another (by `elect`, `with_leader_and_isr` or
    `remove_replicas_from_isr`) keeps the old `zk_version`: that is the version the
    conditional write expects. After the write, `with_zk_version` records the new one.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED

    @classmethod
    def initial(cls, elected: Elected, controller_epoch: int) -> LeaderAndIsr:
        """The first state of a new partition: leader epoch 0, a znode at version 0."""
        return cls(elected.leader, 0, elected.isr, controller_epoch, 0)

    @property
    def has_leader(self) -> bool:
        """Whether some broker leads the partition."""
        return self.leader != NO_LEADER

    def elect(self, elected: Elected, controller_epoch: int) -> LeaderAndIsr:
        """The state after an election: its leader and ISR, leader epoch + 1, stamped
        with this controller's epoch. An unclean election makes it RECOVERING."""
        state = self.with_leader_and_isr(elected.leader, elected.isr, controller_epoch)
        if elected.unclean:
            state = replace(state, leader_recovery_state=LeaderRecoveryState.RECOVERING)
        return state

    def with_leader_and_isr(
        self, leader: int, isr: Iterable[int], controller_epoch: int
    ) -> LeaderAndIsr:
        """A new leader and/or ISR. The leader epoch always goes up, even when only the
        ISR changes: brokers apply a LeaderAndIsr only when its epoch is newer."""
        return replace(
            self,
            leader=leader,
            leader_epoch=self.leader_epoch + 1,
            isr=tuple(isr),
            controller_epoch=controller_epoch,
        )

    def with_zk_version(self, zk_version: int) -> LeaderAndIsr:
        """The same state once written: the znode's new version."""
        return replace(self, zk_version=zk_version)


def _first(
    candidates: Iterable[int],
    live: Collection[int],
    isr: Collection[int] | None,
    excluded: Collection[int] = (),
) -> int | None:
    for replica in candidates:
        if replica in live and (isr is None or replica in isr) and replica not in excluded:
            return replica
    return None


def offline_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    *,
    unclean_allowed: bool,
) -> Elected | None:
    """The leader died (or there is none): the first replica of the assignment that is
    live and in the ISR, with the ISR cut down to its live members. Failing that, and
    only if unclean elections are allowed, the first live replica alone."""
    leader = _first(assignment, live, isr)
    if leader is not None:
        # Kafka keeps the ISR's own order, not the assignment's.
        return Elected(leader, tuple(r for r in isr if r in live))
    if not unclean_allowed:
        return None
    leader = _first(assignment, live, None)
    if leader is None:
        return None
    return Elected(leader, (leader,), unclean=True)


def reassign_election(
    target_replicas: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Elected | None:
    """A reassignment drops the current leader: the first target replica that is
    live and in the ISR; the ISR stays (the replicas being removed leave it later)."""
    leader = _first(target_replicas, live, isr)
    return None if leader is None else Elected(leader, tuple(isr))


def preferred_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Elected | None:
    """Leadership back to the preferred replica (the assignment's head), only if it is
    live and in the ISR; the ISR stays."""
    if not assignment:
        return None
    head = assignment[0]
    return Elected(head, tuple(isr)) if head in live and head in isr else None


def controlled_shutdown_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> Elected | None:
    """Leadership off stopping brokers: the first replica of the assignment that is
    live, in the ISR and not shutting down; the stopping brokers leave the ISR."""
    leader = _first(assignment, live, isr, shutting_down)
    if leader is None:
        return None
    return Elected(leader, tuple(r for r in isr if r not in shutting_down))


def new_partition_election(assignment: Sequence[int], live: Collection[int]) -> Elected | None:
    """A new partition: the first live replica leads and every live replica is in the
    ISR (they all start empty). None when no replica is live."""
    live_replicas = tuple(r for r in assignment if r in live)
    return Elected(live_replicas[0], live_replicas) if live_replicas else None


def remove_replicas_from_isr(
    state: LeaderAndIsr, replicas: Iterable[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """Take failed or stopping replicas out of a partition's ISR (Kafka's
    OfflineReplica transition), or None when none of them is in it (nothing to write).

    The ISR is never emptied: its last member stays, so the partition still knows
    which replica was last in sync and a clean election stays possible when that
    broker returns. The leader becomes NO_LEADER if it was one of the replicas.
    Replicas are removed one by one in the order given, as Kafka's successive
    transitions would, but the result is one state (one leader epoch bump).
    """
    isr = list(state.isr)
    leader = state.leader
    changed = False
    for replica in replicas:
        if replica not in isr:
            continue
        changed = True
        if len(isr) > 1:
            isr.remove(replica)
        if replica == leader:
            leader = NO_LEADER
    return state.with_leader_and_isr(leader, isr, controller_epoch) if changed else None


class Strategy(Enum):
    """The election strategies, valued with Kafka's names (they appear in its
    failure messages)."""

    OFFLINE = "OfflinePartitionLeaderElectionStrategy"
    REASSIGN = "ReassignPartitionLeaderElectionStrategy"
    PREFERRED = "PreferredReplicaPartitionLeaderElectionStrategy"
    CONTROLLED_SHUTDOWN = "ControlledShutdownPartitionLeaderElectionStrategy"


def failure_message(partition: str, strategy: Strategy, *, unclean_allowed: bool = False) -> str:
    """Kafka's StateChangeFailedException message when no replica qualifies
    (`partition` as `topic-N`)."""
    name = strategy.value
    if strategy is Strategy.OFFLINE:
        # A Scala case class with a parameter: its toString shows the flag.
        name += f"({str(unclean_allowed).lower()})"
    return f"Failed to elect leader for partition {partition} under strategy {name}"


class ElectionType(IntEnum):
    """ElectLeaders' ElectionType field."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ElectLeadersResult:
    """One partition's answer to ElectLeaders: NONE with the election to write, or an
    error (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
    ELIGIBLE_LEADERS_NOT_AVAILABLE) with Kafka's message."""

    error: ErrorCode
    message: str | None = None
    elected: Elected | None = None


def elect_leaders(
    election_type: ElectionType,
    partition: str,
    assignment: Sequence[int],
    state: LeaderAndIsr,
    live: Collection[int],
) -> ElectLeadersResult:
    """What ElectLeaders does for one existing partition not being deleted
    (Kafka's processReplicaLeaderElection, admin-client triggered).

    PREFERRED is not needed when the preferred replica already leads; UNCLEAN is not
    needed while a live broker leads. An UNCLEAN request runs the offline election
    with unclean elections allowed, so a live in-sync replica is still preferred.
    """
    if election_type is ElectionType.PREFERRED:
        if assignment and state.leader == assignment[0]:
            return ElectLeadersResult(ErrorCode.ELECTION_NOT_NEEDED)
        elected = preferred_election(assignment, state.isr, live)
        if elected is None:
            return ElectLeadersResult(
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                failure_message(partition, Strategy.PREFERRED),
            )
        return ElectLeadersResult(ErrorCode.NONE, elected=elected)
    if state.has_leader and state.leader in live:
        return ElectLeadersResult(ErrorCode.ELECTION_NOT_NEEDED)
    elected = offline_election(assignment, state.isr, live, unclean_allowed=True)
    if elected is None:
        return ElectLeadersResult(
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            failure_message(partition, Strategy.OFFLINE, unclean_allowed=True),
        )
    return ElectLeadersResult(ErrorCode.NONE, elected=elected)
