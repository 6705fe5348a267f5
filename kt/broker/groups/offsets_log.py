"""The `__consumer_offsets` topic: where a group's metadata and offsets live.

A group belongs to partition `abs(groupId.hashCode()) % partitions`, with Java's
String.hashCode (over UTF-16 code units) and Kafka's Utils.abs (which maps
Integer.MIN_VALUE to 0), so a group lands on the same partition as with Apache
Kafka. Records are written in Kafka's own key/value formats (offset commit key
v1 / value v3, or v1 when an explicit expire timestamp is set; group metadata
key v2 / value v3) straight into the partition log as the coordinator, never
through Produce. Loading replays a partition: the newest value per key wins, a
tombstone deletes.

Writes are appended to the partition as its leader. Offset commits and group
metadata are acknowledged only once replicated (acks=all: the high watermark
passed them; :meth:`RecordStore.wait_committed` waits in the produce purgatory);
failures carry the partition-level Kafka error (:class:`AppendError`), which the
coordinator maps to its own errors as Kafka's GroupMetadataManager does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kt.broker.errors import AppendError, error_code_for
from kt.broker.metadata_store import CONSUMER_OFFSETS
from kt.protocol import ErrorCode
from kt.protocol.coordinator_records import (
    GroupMetadataRecord,
    GroupMetadataValue,
    OffsetCommitRecord,
    decode_consumer_offsets_record,
)
from kt.protocol.errors import DecodeError
from kt.storage import record_batch as v2
from kt.storage.checkpoint import TopicPartition
from kt.storage.log import AppendOrigin

if TYPE_CHECKING:
    from kt.broker.config import BrokerConfig
    from kt.broker.metadata.topics import TopicsView
    from kt.broker.replica_manager import ReplicaManager
    from kt.broker.topic_creation import TopicCreator

log = logging.getLogger("kt.broker.groups")

SEGMENT_BYTES = 100 * 1024 * 1024

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


class LogRecordStore:
    """The real `__consumer_offsets` topic of a broker (the transaction coordinator
    subclasses it for `__transaction_state`)."""

    topic = CONSUMER_OFFSETS

    def __init__(
        self,
        replicas: ReplicaManager,
        topics: TopicsView,
        config: BrokerConfig,
        creator: TopicCreator,
    ) -> None:
        self.replicas = replicas
        self.topics = topics
        self.config = config
        self.creator = creator

    def exists(self) -> bool:
        """Whether the topic exists yet."""
        return self.topic in self.topics.topics

    def partition_count(self) -> int:
        """Partitions of the topic: as created, or as configured while it is not."""
        info = self.topics.get(CONSUMER_OFFSETS)
        if info is None:
            return self.config.get_int("offsets.topic.num.partitions")
        return info.partitions

    async def ensure(self) -> None:
        """Create the topic (once, on first use) with Kafka's internal settings."""
        if CONSUMER_OFFSETS in self.topics.topics:
            return
        cfg = self.config
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(int(cfg.props.get("offsets.topic.segment.bytes", SEGMENT_BYTES))),
            "compression.type": "producer",
        }
        info = await self.creator.ensure_internal_topic(
            CONSUMER_OFFSETS,
            cfg.get_int("offsets.topic.num.partitions"),
            configs,
            cfg.get_int("offsets.topic.replication.factor"),
        )
        if info is not None:
            log.info("created %s with %d partitions", CONSUMER_OFFSETS, info.partitions)

    def led_partitions(self) -> list[int]:
        """The `__consumer_offsets` partitions this broker leads (and can write)."""
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


@dataclass(slots=True)
class LoadedPartition:
    """What replaying one partition found: the newest record per key."""

    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    offsets: dict[tuple[str, str, int], OffsetCommitRecord] = field(default_factory=dict)
    skipped: int = 0
    # Where each offset was written (-1: unknown), so a transaction committed later
    # does not replace a newer plain commit.
    positions: dict[tuple[str, str, int], int] = field(default_factory=dict)
    # Transactional offsets whose transaction has no marker yet: producer id ->
    # (group, topic, partition) -> (record, position).
    pending_txn: dict[int, dict[tuple[str, str, int], tuple[OffsetCommitRecord, int]]] = field(
        default_factory=dict
    )


def replay(records: Iterator[Record]) -> LoadedPartition:
    """Fold a partition's records: later values replace earlier ones, tombstones delete."""
    return replay_batches(StoredBatch((r,), -1) for r in records)


def replay_batches(batches: Iterable[StoredBatch]) -> LoadedPartition:
    """Fold a partition's batches as Kafka's GroupMetadataManager loads them: plain
    records as in :func:`replay`; transactional offsets wait for their producer's
    marker, a commit applies them (unless a newer commit of the same partition is
    already loaded), an abort drops them. Those still without a marker at the end
    are returned as `pending_txn`."""
    out = LoadedPartition()
    for batch in batches:
        if batch.marker is not None:
            pending = out.pending_txn.pop(batch.producer_id, {})
            if batch.marker:
                for k, (txn_rec, pos) in pending.items():
                    if k not in out.offsets or out.positions.get(k, -1) < pos:
                        out.offsets[k] = txn_rec
                        out.positions[k] = pos
            continue
        for key, value in batch.records:
            try:
                rec = decode_consumer_offsets_record(key, value)
            except DecodeError:
                out.skipped += 1  # e.g. KIP-848 consumer-group records: not ours to serve
                continue
            if isinstance(rec, GroupMetadataRecord):
                if rec.value is None:
                    out.groups.pop(rec.group, None)
                else:
                    out.groups[rec.group] = rec.value
                continue
            k = (rec.group, rec.topic, rec.partition)
            if batch.transactional:
                txn = out.pending_txn.setdefault(batch.producer_id, {})
                if rec.value is None:
                    txn.pop(k, None)  # as Kafka's load: a transactional tombstone cancels
                else:
                    txn[k] = (rec, batch.position)
            elif rec.value is None:
                out.offsets.pop(k, None)
                out.positions.pop(k, None)
            else:
                out.offsets[k] = rec
                out.positions[k] = batch.position
    return out


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
