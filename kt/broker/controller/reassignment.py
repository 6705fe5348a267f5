"""Partition reassignment in the controller (Kafka's onPartitionReassignment, KIP-455).

A reassignment moves a partition from its origin replicas (ORS) to target replicas
(TRS) through a replica set RS = (TRS ++ ORS).distinct holding both, with AR = TRS -
ORS being added and RR = ORS - TRS being removed (`ReplicaAssignment.reassign_to`):

- **U**: RS, AR and RR are written to /brokers/topics/T *before* memory, so a new
  controller finds the reassignment there; adding replicas of a superseded
  reassignment that the new target does not need are stopped and deleted.
- **A** (TRS not all in the ISR): the leader epoch is bumped and LeaderAndIsr goes to
  RS, which creates the adding replicas; they fetch and the leader's AlterPartition
  brings them into the ISR.
- **B** (TRS within the ISR), checked after every ISR change the controller writes:
  RS = TRS in memory; a leader outside TRS (or dead) is replaced by the ReassignPartition
  election, else its epoch is bumped; RR leave the ISR and get StopReplica
  (delete=false, then delete=true); RS = TRS with empty AR/RR is written to ZooKeeper
  **last**, since until then ZooKeeper is the only durable record of ORS.

Everything here runs in the controller's event task (`KafkaController.call`), like
the rest of the controller; this module holds only the reassignment logic so the
controller module stays about elections and membership.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kt.broker.controller.context import ReplicaAssignment
from kt.broker.controller.requests import TopicReplicas
from kt.cluster import election
from kt.cluster.assignment import reassignment_problem
from kt.cluster.election import LeaderAndIsr
from kt.protocol import ErrorCode
from kt.storage.checkpoint import TopicPartition

if TYPE_CHECKING:
    from kt.broker.controller.context import ControllerContext
    from kt.protocol import Struct

log = logging.getLogger("kt.broker.controller")

# Kafka's text for a partition the controller does not know (or that is being deleted).
NO_SUCH_PARTITION = "The partition does not exist."


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    """One partition's answer to AlterPartitionReassignments."""

    error: int = ErrorCode.NONE
    message: str | None = None


class TopicWriter(Protocol):
    """The controller's ZooKeeper writes a reassignment makes."""

    async def set_topic(self, topic: str, replicas: TopicReplicas, epoch_zk_version: int) -> None:
        """Replace /brokers/topics/T (fenced by the controller epoch's zk version)."""
        ...


class ControllerOps(Protocol):
    """What a reassignment uses of the controller (`KafkaController` has it): its
    view, its ZooKeeper writes, and the state changes and requests it sends. Named
    here so this module does not import the controller, which imports it."""

    view: ControllerContext

    @property
    def zk(self) -> TopicWriter:
        """The controller's ZooKeeper access."""
        ...

    async def _change_states(
        self,
        tps: list[TopicPartition],
        choose: Callable[[TopicPartition, LeaderAndIsr], Awaitable[LeaderAndIsr]],
    ) -> list[TopicPartition]: ...

    async def _remove_from_isr(self, tps: list[TopicPartition], gone: set[int]) -> None: ...

    async def _resume_deletions(self) -> None: ...

    def _send_update_metadata(
        self,
        brokers: list[int],
        tps: list[TopicPartition],
        *,
        full: bool = False,
        deleting: bool = False,
    ) -> None: ...

    def _send_stop_replica(
        self,
        broker_id: int,
        tps: dict[TopicPartition, int],
        *,
        delete: bool,
        on_done: Callable[[Struct], None] | None = None,
    ) -> None: ...


class Reassignments:
    """The active controller's reassignments: started, resumed, completed, cancelled."""

    def __init__(self, controller: ControllerOps) -> None:
        self.c = controller
        # partition -> its target (TRS) while a reassignment (or a cancellation) runs.
        self.targets: dict[TopicPartition, tuple[int, ...]] = {}
        # Topics marked for deletion while being reassigned: Kafka makes them
        # ineligible for deletion until their reassignments complete.
        self.deferred: set[str] = set()

    def reset(self) -> None:
        """Forget everything (a new term reloads from ZooKeeper)."""
        self.targets.clear()
        self.deferred.clear()

    def defer_deletions(self, topics: set[str]) -> set[str]:
        """The topics among `topics` whose deletion may go on now; the others wait
        for their reassignments."""
        busy = {t for t in topics if self.topic_busy(t)}
        self.deferred |= busy
        return topics - busy

    # --- views ---------------------------------------------------------------

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """The partition's RS/AR/RR as the controller holds them."""
        t = self.c.view.topics.get(tp.topic)
        if t is None:
            return ReplicaAssignment(())
        return ReplicaAssignment(
            tuple(t.partitions.get(tp.partition, [])),
            tuple(t.adding.get(tp.partition, [])),
            tuple(t.removing.get(tp.partition, [])),
        )

    def topic_busy(self, topic: str) -> bool:
        """Whether a partition of `topic` is being reassigned (it cannot be deleted)."""
        return any(tp.topic == topic for tp in self.targets)

    def listing(self, tps: list[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment]:
        """ListPartitionReassignments: the partitions (of `tps`, or all) whose
        reassignment still adds or removes replicas."""
        wanted = sorted(self.targets) if tps is None else [tp for tp in tps if tp in self.targets]
        out = {}
        for tp in wanted:
            a = self.assignment(tp)
            if a.is_being_reassigned:
                out[tp] = a
        return out

    # --- requests ------------------------------------------------------------

    async def alter(
        self, requested: dict[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, ReassignmentResult]:
        """AlterPartitionReassignments: start, supersede or (None) cancel each
        partition's reassignment; answer each partition's error."""
        v = self.c.view
        out: dict[TopicPartition, ReassignmentResult] = {}
        for tp, target in requested.items():
            if (
                tp.topic in v.to_delete
                or tp.topic in self.deferred
                or tp.partition
                not in (v.topics[tp.topic].partitions if tp.topic in v.topics else {})
            ):
                out[tp] = ReassignmentResult(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_SUCH_PARTITION
                )
                continue
            current = self.assignment(tp)
            if target is None:
                if tp not in self.targets and not current.is_being_reassigned:
                    out[tp] = ReassignmentResult(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
                    continue
                goal = current.origin_replicas
            else:
                goal = tuple(target)
                adding = current.reassign_to(goal).adding if len(set(goal)) == len(goal) else ()
                problem = reassignment_problem(goal, adding, v.online())
                if problem is not None:
                    out[tp] = ReassignmentResult(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
                    continue
            await self._start(tp, goal)
            out[tp] = ReassignmentResult()
        return out

    async def resume(self) -> None:
        """After failover: every partition ZooKeeper shows adding or removing replicas
        carries on toward its target (ORS survives only there)."""
        self.reset()
        for tp in self.c.view.all_partitions():
            a = self.assignment(tp)
            if a.is_being_reassigned:
                log.info("controller: resuming reassignment of %s to %s", tp, a.target_replicas)
                await self._start(tp, a.target_replicas)

    async def on_isr_changed(self, tps: list[TopicPartition]) -> None:
        """After an ISR change: complete the reassignments whose target is in sync."""
        for tp in tps:
            if tp in self.targets:
                await self._maybe_complete(tp)

    async def on_brokers_started(self, ids: list[int]) -> None:
        """Brokers came back: reassignments that target them go on (they need the
        LeaderAndIsr that creates their replicas)."""
        for tp, target in sorted(self.targets.items()):
            if set(ids) & set(target):
                await self._start(tp, target)

    # --- the phases ----------------------------------------------------------

    async def _start(self, tp: TopicPartition, target: tuple[int, ...]) -> None:
        current = self.assignment(tp)
        new = current.reassign_to(target)
        # Adding replicas of an older reassignment that this target does not want.
        unneeded = [r for r in current.adding if r not in target]
        if new != current:
            await self._write(tp, new)  # U: ZooKeeper first, then memory
        self.targets[tp] = target
        if unneeded:
            log.info("controller: %s no longer adds %s; stopping them", tp, unneeded)
            await self._remove_replicas(tp, unneeded)
        lead = self.c.view.leadership.get(tp)
        if lead is None:
            return
        if set(target) <= set(lead.isr):
            await self._complete(tp)
        else:
            # A: bump the leader epoch so every replica of RS (the adding ones
            # included) applies the LeaderAndIsr that names them.
            await self.c._change_states([tp], self._bump)

    async def _maybe_complete(self, tp: TopicPartition) -> None:
        lead = self.c.view.leadership.get(tp)
        if lead is not None and set(self.targets[tp]) <= set(lead.isr):
            await self._complete(tp)

    async def _complete(self, tp: TopicPartition) -> None:
        """Phase B."""
        c, v = self.c, self.c.view
        target = self.targets[tp]
        removing = [r for r in self.assignment(tp).replicas if r not in target]
        self._set_memory(tp, ReplicaAssignment(target))
        lead = v.leadership[tp]
        if lead.leader not in target or lead.leader not in v.online():

            async def move(tp: TopicPartition, lead: LeaderAndIsr) -> LeaderAndIsr:
                elected = election.reassign_election(target, lead.isr, v.online())
                if elected is None:
                    log.error("controller: %s", election.failure_message(
                        f"{tp.topic}-{tp.partition}", election.Strategy.REASSIGN))  # fmt: skip
                    return lead
                return lead.elect(elected, v.epoch)

            await c._change_states([tp], move)
        else:
            await c._change_states([tp], self._bump)
        if removing:
            await self._remove_replicas(tp, removing)
        # Last: until now ZooKeeper's RS/AR/RR were the durable record of the origin.
        await self._write_topic(tp.topic)
        del self.targets[tp]
        log.info("controller: reassignment of %s to %s completed", tp, list(target))
        c._send_update_metadata(list(v.live), [tp])
        if tp.topic in self.deferred and not self.topic_busy(tp.topic):
            self.deferred.discard(tp.topic)
            v.to_delete.add(tp.topic)
            await c._resume_deletions()

    async def _remove_replicas(self, tp: TopicPartition, replicas: list[int]) -> None:
        """OfflineReplica then NonExistentReplica: StopReplica(delete=false), out of
        the ISR, StopReplica(delete=true)."""
        c, v = self.c, self.c.view
        lead = v.leadership.get(tp)
        epoch = lead.leader_epoch if lead is not None else -2
        for r in replicas:
            c._send_stop_replica(r, {tp: epoch}, delete=False)
        await c._remove_from_isr([tp], set(replicas))
        for r in replicas:
            c._send_stop_replica(r, {tp: -2}, delete=True)

    async def _bump(self, tp: TopicPartition, lead: LeaderAndIsr) -> LeaderAndIsr:
        return lead.with_leader_and_isr(lead.leader, lead.isr, self.c.view.epoch)

    # --- ZooKeeper and memory --------------------------------------------------

    def _with(self, tp: TopicPartition, a: ReplicaAssignment) -> TopicReplicas:
        t = self.c.view.topics[tp.topic]
        parts = dict(t.partitions)
        adding, removing = dict(t.adding), dict(t.removing)
        parts[tp.partition] = list(a.replicas)
        adding.pop(tp.partition, None)
        removing.pop(tp.partition, None)
        if a.adding:
            adding[tp.partition] = list(a.adding)
        if a.removing:
            removing[tp.partition] = list(a.removing)
        return TopicReplicas(t.topic_id, parts, adding, removing)

    def _set_memory(self, tp: TopicPartition, a: ReplicaAssignment) -> None:
        self.c.view.topics[tp.topic] = self._with(tp, a)

    async def _write(self, tp: TopicPartition, a: ReplicaAssignment) -> None:
        new = self._with(tp, a)
        await self.c.zk.set_topic(tp.topic, new, self.c.view.epoch_zk_version)
        self.c.view.topics[tp.topic] = new

    async def _write_topic(self, topic: str) -> None:
        await self.c.zk.set_topic(topic, self.c.view.topics[topic], self.c.view.epoch_zk_version)
