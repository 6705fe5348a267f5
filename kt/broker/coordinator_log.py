"""A coordinator's internal topic: the storage both Kafka coordinators share.

The group coordinator keeps its groups and offsets in `__consumer_offsets`
(kt.broker.groups.offsets_log), the transaction coordinator its transactional ids
in `__transaction_state` (kt.broker.transactions.state_log). Both key their
records by an id hashed onto a partition (`partition_for`: Java's String.hashCode
and Kafka's Utils.abs, so an id lands where Apache Kafka puts it), append as the
partition's leader through the replica manager (COORDINATOR origin), acknowledge
a write once replicated (`wait_committed`, in the produce purgatory), and load a
partition by reading it back. `RecordStore` is what a coordinator uses of its
log; `CoordinatorLog` the broker's real one; `MemoryRecordStore` an in-memory
one for unit tests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kt.broker.errors import AppendError, error_code_for
from kt.protocol import ErrorCode
from kt.storage import record_batch as v2
from kt.storage.checkpoint import TopicPartition
from kt.storage.log import AppendOrigin

if TYPE_CHECKING:
    from kt.broker.metadata.topics import TopicsView
    from kt.broker.replica_manager import ReplicaManager
    from kt.broker.settings import InternalTopicSettings
    from kt.broker.topic_creation import TopicCreator


Record = tuple[bytes, bytes | None]


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units,
    in 32-bit two's complement arithmetic."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The `__consumer_offsets` partition of a group (Kafka's partitionFor)."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % partitions


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """One batch of an internal topic: its records, where it starts, and for a
    transactional batch its producer; `marker` is True/False for a commit/abort
    marker (no records), None for data."""

    records: tuple[Record, ...]
    position: int
    producer_id: int = -1
    transactional: bool = False
    marker: bool | None = None


class RecordStore(Protocol):
    """Where the coordinator appends and reads its records (a log, or memory in tests)."""

    def partition_count(self) -> int:
        """Partitions of the topic (as configured, while it is being created)."""
        ...

    async def ensure(self) -> None:
        """Create the topic if it does not exist yet, and wait for it."""
        ...

    def exists(self) -> bool:
        """Whether the topic exists yet."""
        ...

    def led_partitions(self) -> list[int]:
        """The partitions this broker leads now (the coordinator serves their groups)."""
        ...

    def append(
        self,
        partition: int,
        records: Sequence[Record],
        *,
        acks_all: bool = True,
        producer: tuple[int, int] | None = None,
    ) -> int:
        """Append the records atomically (one batch) as the partition's leader; returns
        the offset the high watermark must reach for them to be committed. `acks_all`
        refuses the write (NOT_ENOUGH_REPLICAS) while the ISR is below
        min.insync.replicas; `producer` (id, epoch) writes a transactional batch.
        Raises AppendError."""
        ...

    async def wait_committed(self, partition: int, end_offset: int, timeout_ms: int) -> None:
        """Until the high watermark reached `end_offset` (from :meth:`append`); raises
        AppendError when leadership was lost (NOT_LEADER_OR_FOLLOWER), the ISR fell
        below the minimum (NOT_ENOUGH_REPLICAS_AFTER_APPEND) or on timeout
        (REQUEST_TIMED_OUT)."""
        ...

    def read(self, partition: int) -> Iterator[Record]:
        """Every record of the partition, oldest first."""
        ...

    def read_batches(self, partition: int) -> Iterator[StoredBatch]:
        """Every batch of the partition (with producers and markers), oldest first."""
        ...


class CoordinatorLog:
    """A coordinator's internal topic of a broker (its subclasses name the topic
    and how it is created): appends through the replica manager, reads of the
    partitions led here."""

    topic: str

    def __init__(
        self,
        replicas: ReplicaManager,
        topics: TopicsView,
        settings: InternalTopicSettings,
        creator: TopicCreator,
    ) -> None:
        self.replicas = replicas
        self.topics = topics
        self.settings = settings
        self.creator = creator

    def exists(self) -> bool:
        """Whether the topic exists yet."""
        return self.topic in self.topics.topics

    def partition_count(self) -> int:
        """Partitions of the topic: as created, or as configured while it is not."""
        raise NotImplementedError

    async def ensure(self) -> None:
        """Create the topic (once, on first use) with Kafka's settings for it."""
        raise NotImplementedError

    def led_partitions(self) -> list[int]:
        """The topic's partitions this broker leads (and can write)."""
        return sorted(
            part.tp.partition
            for part in self.replicas
            if part.tp.topic == self.topic and part.is_leader and not part.offline
        )

    def append(
        self,
        partition: int,
        records: Sequence[Record],
        *,
        acks_all: bool = True,
        producer: tuple[int, int] | None = None,
    ) -> int:
        """Append one batch as the coordinator (Kafka's AppendOrigin.COORDINATOR) and
        advance the high watermark as far as the ISR allows. `producer` (id, epoch)
        makes it a transactional batch (TxnOffsetCommit: sequence 0, as Kafka's
        GroupMetadataManager writes it)."""
        now = int(time.time() * 1000)
        pid, epoch = producer if producer is not None else (v2.NO_PRODUCER_ID, -1)
        batch = v2.build_batch(
            [v2.RecordSpec(key, value, timestamp=now) for key, value in records],
            base_timestamp=now,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0 if producer is not None else v2.NO_SEQUENCE,
            is_transactional=producer is not None,
        )
        try:
            # Through the replica manager, as Kafka's coordinators append: it checks
            # leadership and min.insync.replicas and takes a failed log offline.
            result = self.replicas.append_records(
                self.topic, partition, batch, now_ms=now, acks=-1 if acks_all else 1,
                internal_topics_allowed=True, origin=AppendOrigin.COORDINATOR,
            )  # fmt: skip
        except Exception as exc:
            raise AppendError(error_code_for(exc), str(exc)) from exc
        return result.last_offset + 1

    async def wait_committed(self, partition: int, end_offset: int, timeout_ms: int) -> None:
        """Wait in the replica manager's produce purgatory, as an acks=all produce
        (Kafka's coordinator appends through appendRecords and DelayedProduce)."""
        tp = TopicPartition(self.topic, partition)
        result = await self.replicas.wait_for_replication({tp: end_offset},
                                                                        timeout_ms)  # fmt: skip
        error = result.get(tp)
        if error is not None:
            raise AppendError(error_code_for(error), str(error))

    def read(self, partition: int) -> Iterator[Record]:
        """Every record of the partition up to its log end, oldest first."""
        for batch in self.read_batches(partition):
            if batch.marker is None:
                yield from batch.records

    def read_batches(self, partition: int) -> Iterator[StoredBatch]:
        """Every batch of the partition up to its log end, oldest first, with its
        producer and, for transaction markers, the outcome."""
        part = self.replicas.get(TopicPartition(self.topic, partition))
        if part is None:
            return
        for batch in part.log.iter_batches():
            header = batch.header
            if header is None:
                continue  # legacy entries predate the formats we write
            if header.is_control:
                for rec in v2.iter_records(header, batch.data):
                    if rec.key is not None:
                        _, control_type = v2.parse_control_key(rec.key)
                        yield StoredBatch((), header.base_offset, header.producer_id,
                                          True, control_type == v2.CONTROL_COMMIT)  # fmt: skip
                continue
            records = tuple(
                (key, value)
                for _o, _ts, key, value, _h, _s in v2.iter_record_tuples(header, batch.data)
                if key is not None
            )
            pid = header.producer_id if header.is_transactional else -1
            yield StoredBatch(records, header.base_offset, pid, header.is_transactional)


class MemoryRecordStore:
    """An in-memory RecordStore (unit tests). It leads every partition unless told
    otherwise (`leaders`); `fail` refuses appends with `fail_code`; `hold` keeps
    writes unacknowledged until :meth:`release` (as replication would)."""

    def __init__(self, partitions: int = 50) -> None:
        self.partitions = partitions
        self.created = False
        self.batches: dict[int, list[StoredBatch]] = {}
        self.leaders: set[int] = set(range(partitions))
        self.fail = False
        # As an I/O error of the log would (the partition goes offline).
        self.fail_code = ErrorCode.KAFKA_STORAGE_ERROR
        self.hold = False
        self._released: asyncio.Future[ErrorCode] | None = None

    def exists(self) -> bool:
        """Whether the topic exists yet."""
        return self.created

    def partition_count(self) -> int:
        """Partitions of the topic, creating it on first use."""
        self.created = True
        return self.partitions

    async def ensure(self) -> None:
        """Create the topic."""
        self.created = True

    def led_partitions(self) -> list[int]:
        """The partitions in `leaders`."""
        return sorted(self.leaders)

    def _end(self, partition: int) -> int:
        return sum(max(len(b.records), 1) for b in self.batches.get(partition, []))

    def append(
        self,
        partition: int,
        records: Sequence[Record],
        *,
        acks_all: bool = True,
        producer: tuple[int, int] | None = None,
    ) -> int:
        """Append the records (or fail when `fail` is set); returns the end offset."""
        if partition not in self.leaders:
            raise AppendError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if self.fail:
            raise AppendError(self.fail_code, "append failed")
        pid = producer[0] if producer is not None else -1
        batch = StoredBatch(tuple(records), self._end(partition), pid, producer is not None)
        self.batches.setdefault(partition, []).append(batch)
        return self._end(partition)

    def write_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker lands (as the partition side's WriteTxnMarkers would)."""
        batch = StoredBatch((), self._end(partition), producer_id, True, commit)
        self.batches.setdefault(partition, []).append(batch)

    async def wait_committed(self, partition: int, end_offset: int, timeout_ms: int) -> None:
        """At once, or while `hold` is set until :meth:`release` (raising its error)."""
        if self.hold:
            if self._released is None or self._released.done():
                self._released = asyncio.get_running_loop().create_future()
            code = await asyncio.shield(self._released)
            if code != ErrorCode.NONE:
                raise AppendError(code)
        if partition not in self.leaders:
            raise AppendError(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def release(self, code: ErrorCode = ErrorCode.NONE) -> None:
        """Acknowledge (or fail with `code`) every held write, and stop holding."""
        self.hold = False
        if self._released is not None and not self._released.done():
            self._released.set_result(code)

    def read(self, partition: int) -> Iterator[Record]:
        """Every data record of the partition, oldest first."""
        for batch in self.batches.get(partition, []):
            yield from batch.records

    def read_batches(self, partition: int) -> Iterator[StoredBatch]:
        """Every batch of the partition, oldest first."""
        yield from self.batches.get(partition, [])
