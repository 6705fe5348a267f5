"""The `__consumer_offsets` topic: where a group's metadata and offsets live.

A group belongs to partition `abs(groupId.hashCode()) % partitions`, with Java's
String.hashCode (over UTF-16 code units) and Kafka's Utils.abs (which maps
Integer.MIN_VALUE to 0), so a group lands on the same partition as with Apache
Kafka. Records are written in Kafka's own key/value formats (offset commit key
v1 / value v3, or v1 when an explicit expire timestamp is set; group metadata
key v2 / value v3) straight into the partition log as the coordinator, never
through Produce. Loading replays a partition: the newest value per key wins, a
tombstone deletes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

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
    from kt.broker.broker import Broker

log = logging.getLogger("kt.broker.groups")

CONSUMER_OFFSETS = "__consumer_offsets"
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

    def append(self, partition: int, records: Sequence[Record]) -> None:
        """Append the records atomically (one batch); raises on failure."""
        ...

    def read(self, partition: int) -> Iterator[Record]:
        """Every record of the partition, oldest first."""
        ...


class LogRecordStore:
    """The real `__consumer_offsets` topic of a broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def exists(self) -> bool:
        """Whether the topic exists yet."""
        return CONSUMER_OFFSETS in self.broker.metadata.topics

    def partition_count(self) -> int:
        """Partitions of the topic: as created, or as configured while it is not."""
        info = self.broker.metadata.topics.get(CONSUMER_OFFSETS)
        if info is None:
            return self.broker.config.get_int("offsets.topic.num.partitions")
        return info.partitions

    async def ensure(self) -> None:
        """Create the topic (once, on first use) with Kafka's internal settings."""
        if CONSUMER_OFFSETS in self.broker.metadata.topics:
            return
        cfg = self.broker.config
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(int(cfg.props.get("offsets.topic.segment.bytes", SEGMENT_BYTES))),
            "compression.type": "producer",
        }
        info = await self.broker.ensure_internal_topic(
            CONSUMER_OFFSETS,
            cfg.get_int("offsets.topic.num.partitions"),
            configs,
            cfg.get_int("offsets.topic.replication.factor"),
        )
        if info is not None:
            log.info("created %s with %d partitions", CONSUMER_OFFSETS, info.partitions)

    def append(self, partition: int, records: Sequence[Record]) -> None:
        """Append one batch as the coordinator and advance the high watermark."""
        # The partition's typed error when it is missing, offline or led elsewhere.
        part = self.broker.replica_manager.get_partition_or_error(CONSUMER_OFFSETS, partition)
        now = int(time.time() * 1000)
        batch = v2.build_batch(
            [v2.RecordSpec(key, value, timestamp=now) for key, value in records],
            base_timestamp=now,
        )
        part.log.append_as_leader(batch, part.leader_epoch, now_ms=now,
                                  origin=AppendOrigin.COORDINATOR)  # fmt: skip
        part.maybe_advance_high_watermark()

    def read(self, partition: int) -> Iterator[Record]:
        """Every record of the partition up to its log end, oldest first."""
        part = self.broker.replica_manager.get(TopicPartition(CONSUMER_OFFSETS, partition))
        if part is None:
            return
        for batch in part.log.iter_batches():
            header = batch.header
            if header is None or header.is_control:
                continue  # legacy entries predate the formats we write; markers carry no data
            for _offset, _ts, key, value, _headers, _seq in v2.iter_record_tuples(
                header, batch.data
            ):
                if key is not None:
                    yield key, value


@dataclass(slots=True)
class LoadedPartition:
    """What replaying one partition found: the newest record per key."""

    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    offsets: dict[tuple[str, str, int], OffsetCommitRecord] = field(default_factory=dict)
    skipped: int = 0


def replay(records: Iterator[Record]) -> LoadedPartition:
    """Fold a partition's records: later values replace earlier ones, tombstones delete."""
    out = LoadedPartition()
    for key, value in records:
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
        else:
            k = (rec.group, rec.topic, rec.partition)
            if rec.value is None:
                out.offsets.pop(k, None)
            else:
                out.offsets[k] = rec
    return out


class MemoryRecordStore:
    """An in-memory RecordStore (unit tests)."""

    def __init__(self, partitions: int = 50) -> None:
        self.partitions = partitions
        self.created = False
        self.records: dict[int, list[Record]] = {}
        self.fail = False

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

    def append(self, partition: int, records: Sequence[Record]) -> None:
        """Append the records (or fail when `fail` is set)."""
        if self.fail:
            raise OSError("append failed")
        self.records.setdefault(partition, []).extend(records)

    def read(self, partition: int) -> Iterator[Record]:
        """Every record of the partition, oldest first."""
        yield from self.records.get(partition, [])
