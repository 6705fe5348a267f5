"""Partition state: the replica set, leadership and offsets of one partition.

Kept explicit even on a single node, because multi-broker replication (ISR,
leader election through ZooKeeper) builds on it: leader id and epoch, replicas,
in-sync replicas, high watermark and log start offset. On one broker the leader
is always in sync alone, so the high watermark follows the log end offset as soon
as an append is written.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field

from kt.storage import record_batch as v2
from kt.storage.checkpoint import TopicPartition
from kt.storage.errors import CorruptRecordError
from kt.storage.log import AppendResult, PartitionLog
from kt.storage.producer_state import CheckOutcome, ProducerStateManager


class ProducerStateError(CorruptRecordError):
    """A produce refused by the idempotent-producer rules; carries the Kafka error code."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def _peek_headers(data: bytes | bytearray | memoryview) -> list[v2.BatchHeader]:
    """The v2 headers of concatenated batches, read without any validation (the log
    validates the bytes itself; this only feeds the producer-state check)."""
    out = []
    pos = 0
    end = len(data)
    while end - pos >= v2.HEADER_SIZE:
        header = v2.parse_header(data, pos)
        out.append(header)
        (length,) = struct.unpack_from(">i", data, pos + 8)
        if length < v2.MIN_BATCH_LENGTH:
            break
        pos += length + v2.LOG_OVERHEAD
    return out


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
    # Idempotent producers' sequences and epochs (None for internal topics' logs).
    producer_state: ProducerStateManager | None = None
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

    def append_records(
        self, data: bytes | bytearray | memoryview, now_ms: int | None = None
    ) -> AppendResult:
        """Append producer batches as leader and advance the high watermark (the ISR
        is just us). Idempotent producers' retries of any of their last five
        batches are answered with the original offsets and write nothing. Raises
        the storage core's errors for invalid batches, ProducerStateError for
        sequence or epoch violations."""
        psm = self.producer_state
        headers = _peek_headers(data) if psm is not None else []
        if psm is not None and any(h.producer_id >= 0 for h in headers):
            verdict = psm.check_batches(headers)
            if verdict.outcome is CheckOutcome.DUPLICATE:
                return AppendResult(
                    first_offset=verdict.base_offset,
                    last_offset=verdict.last_offset,
                    max_timestamp=verdict.timestamp,
                    offset_of_max_timestamp=verdict.last_offset,
                    log_append_time=verdict.timestamp
                    if self.log.config.log_append_time
                    else v2.NO_TIMESTAMP,
                    log_start_offset=self.log.log_start_offset,
                    batches=0,
                    bytes=0,
                )
            if not verdict.ok:
                raise ProducerStateError(verdict.error_code, verdict.message)
        segments_before = len(self.log.segments)
        result = self.log.append_as_leader(data, self.leader_epoch, now_ms=now_ms)
        if psm is not None:
            psm.on_append(headers, result.first_offset, result.log_append_time)
            if len(self.log.segments) != segments_before:
                # A roll: snapshot so a restart replays only the new segment.
                psm.take_snapshot(self.log.log_end_offset)
        self.maybe_advance_high_watermark()
        return result

    def load_producer_state(self) -> None:
        """Rebuild idempotence state: the newest snapshot, then the log after it."""
        psm = ProducerStateManager(self.log.dir)
        start = psm.load(self.log.log_start_offset, self.log.log_end_offset)
        for batch in self.log.iter_batches(start):
            psm.replay(batch)
        psm.update_map_end_offset(self.log.log_end_offset)
        self.producer_state = psm

    def close(self) -> None:
        """Snapshot producer state (so the next start replays nothing) and close the log."""
        if self.producer_state is not None and not self.offline:
            self.producer_state.take_snapshot(self.log.log_end_offset)

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
