"""Partition state: the replica set, leadership and offsets of one partition.

Kept explicit even on a single node, because multi-broker replication (ISR,
leader election through ZooKeeper) builds on it: leader id and epoch, replicas,
in-sync replicas, high watermark and log start offset. On one broker the leader
is always in sync alone, so the high watermark follows the log end offset as soon
as an append is written.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kt.storage.checkpoint import TopicPartition
from kt.storage.log import AppendResult, PartitionLog


@dataclass(slots=True)
class Partition:
    """One partition hosted by this broker, with its log."""

    tp: TopicPartition
    topic_id: bytes
    log: PartitionLog
    leader_id: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    offline: bool = False
    # Set and replaced on every append, so waiting fetches wake up (long polling).
    _data_arrived: asyncio.Event | None = None

    @property
    def high_watermark(self) -> int:
        """Offsets below it are committed (visible to consumers)."""
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        """The first offset still in the log."""
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next record will get."""
        return self.log.log_end_offset

    def last_stable_offset(self) -> int:
        """The upper bound for read_committed consumers (no transactions yet: the HW)."""
        return self.log.high_watermark

    def append_records(self, data: bytes | bytearray, now_ms: int | None = None) -> AppendResult:
        """Append producer batches as leader and advance the high watermark (the ISR
        is just us). Raises the storage core's errors for invalid batches."""
        result = self.log.append_as_leader(data, self.leader_epoch, now_ms=now_ms)
        self.maybe_advance_high_watermark()
        return result

    def maybe_advance_high_watermark(self) -> None:
        """Move the HW to the smallest log end offset among the ISR (here: ours)."""
        if self.log.high_watermark < self.log.log_end_offset and self.isr == [self.leader_id]:
            self.log.update_high_watermark(self.log.log_end_offset)
        self.notify()

    def notify(self) -> None:
        """Wake fetches waiting for data on this partition."""
        event = self._data_arrived
        self._data_arrived = None
        if event is not None:
            event.set()

    def data_arrived(self) -> asyncio.Event:
        """An event set at the next append (one event per generation)."""
        if self._data_arrived is None:
            self._data_arrived = asyncio.Event()
        return self._data_arrived
