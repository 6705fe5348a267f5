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

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from kt.broker.coordinator_log import (
    CoordinatorLog,
    Record,
    StoredBatch,
)
from kt.broker.coordinator_log import MemoryRecordStore as MemoryRecordStore
from kt.broker.coordinator_log import RecordStore as RecordStore
from kt.broker.coordinator_log import java_string_hash as java_string_hash
from kt.broker.coordinator_log import partition_for as partition_for
from kt.broker.metadata_store import CONSUMER_OFFSETS
from kt.protocol.coordinator_records import (
    GroupMetadataRecord,
    GroupMetadataValue,
    OffsetCommitRecord,
    decode_consumer_offsets_record,
)
from kt.protocol.errors import DecodeError

log = logging.getLogger("kt.broker.groups")


class LogRecordStore(CoordinatorLog):
    """The real `__consumer_offsets` topic of a broker."""

    topic = CONSUMER_OFFSETS

    def partition_count(self) -> int:
        """Partitions of the topic: as created, or as configured while it is not."""
        info = self.topics.get(CONSUMER_OFFSETS)
        if info is None:
            return self.settings.num_partitions
        return info.partitions

    async def ensure(self) -> None:
        """Create the topic (once, on first use) with Kafka's internal settings."""
        if CONSUMER_OFFSETS in self.topics.topics:
            return
        cfg = self.settings
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(cfg.segment_bytes),
            "compression.type": "producer",
        }
        info = await self.creator.ensure_internal_topic(
            CONSUMER_OFFSETS,
            cfg.num_partitions,
            configs,
            cfg.replication_factor,
            factor_key=cfg.replication_factor_key,
        )
        if info is not None:
            log.info("created %s with %d partitions", CONSUMER_OFFSETS, info.partitions)


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
