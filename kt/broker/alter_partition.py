"""AlterPartitionManager: a leader's ISR changes, sent to the controller in batches.

Kafka's AlterPartitionManager (KIP-497): a partition leader never writes its ISR
to ZooKeeper itself; it proposes the new ISR with the partition epoch it is based
on, and the controller validates, writes and answers the state as written. At
most one proposal per partition is in flight (the Partition enforces that: it
keeps the proposal pending until the answer). Everything queued while a request
is out goes in the next one. A top-level failure (no controller, NOT_CONTROLLER,
a stale broker epoch while our registration is being renewed) keeps the items and
retries after a backoff; a per-partition answer goes back to its partition.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kt.broker.controller_link import ControllerLink
from kt.protocol import ErrorCode, apis
from kt.storage.checkpoint import TopicPartition

log = logging.getLogger("kt.broker.alter_partition")

_RETRIABLE_TOP = {
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.STALE_BROKER_EPOCH,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """A leader's proposed ISR for one partition."""

    tp: TopicPartition
    topic_id: bytes
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class IsrResult:
    """The controller's answer: an error, or the state it wrote."""

    error: int
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


IsrCallback = Callable[[IsrResult], None]


class AlterPartitionManager:
    """Queues ISR proposals and sends them to the controller."""

    def __init__(
        self,
        link: ControllerLink,
        broker_id: int,
        broker_epoch: Callable[[], int],
        *,
        backoff_s: float = 0.1,
    ) -> None:
        self._link = link
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._backoff_s = backoff_s
        self._queued: dict[TopicPartition, tuple[IsrProposal, IsrCallback]] = {}
        self._in_flight: set[TopicPartition] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the sender task."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop sending (pending proposals are dropped: their partitions retry after
        the next LeaderAndIsr, as Kafka's do)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    def submit(self, proposal: IsrProposal, callback: IsrCallback) -> bool:
        """Queue a proposal; False when one for the partition is already out."""
        if proposal.tp in self._queued or proposal.tp in self._in_flight:
            return False
        self._queued[proposal.tp] = (proposal, callback)
        self._wake.set()
        return True

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._queued:
                continue
            batch = self._queued
            self._queued = {}
            self._in_flight.update(batch)
            try:
                done = await self._send(batch)
            finally:
                self._in_flight.difference_update(batch)
            if not done:
                # Put back what is not superseded by a newer proposal, then wait.
                for tp, item in batch.items():
                    self._queued.setdefault(tp, item)
                await asyncio.sleep(self._backoff_s)
                self._wake.set()

    async def _send(self, batch: dict[TopicPartition, tuple[IsrProposal, IsrCallback]]) -> bool:
        by_topic: dict[str, list[IsrProposal]] = {}
        for proposal, _ in batch.values():
            by_topic.setdefault(proposal.tp.topic, []).append(proposal)
        import uuid

        body = {
            "broker_id": self._broker_id,
            "broker_epoch": self._broker_epoch(),
            "topics": [
                {
                    "topic_name": name,
                    "topic_id": uuid.UUID(bytes=items[0].topic_id),
                    "partitions": [
                        {
                            "partition_index": p.tp.partition,
                            "leader_epoch": p.leader_epoch,
                            "new_isr": list(p.new_isr),
                            "new_isr_with_epochs": [
                                {"broker_id": b, "broker_epoch": -1} for b in p.new_isr
                            ],
                            "leader_recovery_state": p.leader_recovery_state,
                            "partition_epoch": p.partition_epoch,
                        }
                        for p in items
                    ],
                }
                for name, items in by_topic.items()
            ],
        }
        try:
            response = await self._link.send(apis.ALTER_PARTITION, body, timeout_s=5.0)
        except Exception as exc:
            log.info("AlterPartition for %d partitions not sent: %s", len(batch), exc)
            return False
        if response.error_code in _RETRIABLE_TOP:
            if response.error_code == ErrorCode.NOT_CONTROLLER:
                await self._link.controller_moved()
            return False
        if response.error_code != ErrorCode.NONE:
            for _, callback in batch.values():
                callback(IsrResult(response.error_code))
            return True
        answered: set[TopicPartition] = set()
        ids = {p.topic_id: p.tp.topic for p, _ in batch.values()}
        for t in response.topics:
            name = t.topic_name or ids.get(t.topic_id.bytes if t.topic_id else b"", "")
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                item = batch.get(tp)
                if item is None:
                    continue
                answered.add(tp)
                item[1](IsrResult(p.error_code, p.leader_id, p.leader_epoch, tuple(p.isr),
                                  p.partition_epoch))  # fmt: skip
        for tp, (_, callback) in batch.items():
            if tp not in answered:
                callback(IsrResult(ErrorCode.UNKNOWN_SERVER_ERROR))
        return True
