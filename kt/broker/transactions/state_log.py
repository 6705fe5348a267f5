"""The `__transaction_state` topic: where transaction coordinators persist their ids.

A transactional id belongs to partition `abs(transactionalId.hashCode()) % 50`
(`transaction.state.log.num.partitions`; Java's String.hashCode and Kafka's
Utils.abs, as for groups), so an id lands on the same partition as with Apache
Kafka. Each record's key is the id (key version 0), its value the id's state
(value version 0, as Kafka 3.x writes it; see `TxnTransit.log_value`); a
tombstone removes an expired id. The topic is compacted and created on the first
FindCoordinator(TRANSACTION), with `transaction.state.log.replication.factor`
replicas (strict in a cluster, 1 on the single node) and
`transaction.state.log.min.isr`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from kt.broker.coordinator_log import CoordinatorLog, MemoryRecordStore, Record, RecordStore
from kt.broker.metadata_store import TRANSACTION_STATE
from kt.broker.transactions.metadata import TransactionMetadata, TxnState, TxnTransit
from kt.protocol.coordinator_records import (
    TransactionLogRecord,
    decode_transaction_log_record,
    encode_transaction_log_record,
)
from kt.protocol.errors import DecodeError
from kt.storage.checkpoint import TopicPartition

log = logging.getLogger("kt.broker.transactions")


class TxnRecordStore(RecordStore, Protocol):
    """A RecordStore that also knows its partitions' leader epochs (the coordinator
    epoch of the transactions they hold)."""

    def leader_epoch(self, partition: int) -> int:
        """The partition's current leader epoch (-1 when not hosted)."""
        ...


class TransactionLogStore(CoordinatorLog):
    """The real `__transaction_state` topic of a broker."""

    topic = TRANSACTION_STATE

    def partition_count(self) -> int:
        """Partitions of the topic: as created, or as configured while it is not."""
        info = self.topics.get(TRANSACTION_STATE)
        if info is None:
            return self.settings.num_partitions
        return info.partitions

    async def ensure(self) -> None:
        """Create the topic (once, on first use) with Kafka's settings for it."""
        if TRANSACTION_STATE in self.topics.topics:
            return
        cfg = self.settings
        factor = cfg.replication_factor
        min_isr = cfg.min_insync_replicas if cfg.min_insync_replicas is not None else 1
        if not cfg.in_cluster:
            # The single node has one replica: a minimum above it could never be met.
            min_isr = 1
        configs = {
            "cleanup.policy": "compact",
            "min.insync.replicas": str(min_isr),
            "segment.bytes": str(cfg.segment_bytes),
            "unclean.leader.election.enable": "false",
            "compression.type": "uncompressed",
        }
        info = await self.creator.ensure_internal_topic(
            TRANSACTION_STATE,
            cfg.num_partitions,
            configs,
            factor,
            factor_key=cfg.replication_factor_key,
        )
        if info is not None:
            log.info("created %s with %d partitions", TRANSACTION_STATE, info.partitions)

    def leader_epoch(self, partition: int) -> int:
        """The leader epoch of a partition hosted here (-1 otherwise)."""
        part = self.replicas.get(TopicPartition(TRANSACTION_STATE, partition))
        return part.leader_epoch if part is not None else -1


class MemoryTxnRecordStore(MemoryRecordStore):
    """An in-memory TxnRecordStore (unit tests); `epochs` holds the leader epochs."""

    def __init__(self, partitions: int = 50) -> None:
        super().__init__(partitions)
        self.epochs: dict[int, int] = {}

    def leader_epoch(self, partition: int) -> int:
        """The epoch set in `epochs` (0 by default)."""
        return self.epochs.get(partition, 0)


def transit_record(transactional_id: str, transit: TxnTransit) -> Record:
    """The (key, value) bytes of a state change; a tombstone for Dead."""
    value = None if transit.state is TxnState.DEAD else transit.log_value()
    return encode_transaction_log_record(TransactionLogRecord(transactional_id, value))


def replay(records: Iterable[Record]) -> tuple[dict[str, TransactionMetadata], int]:
    """The newest state of every id in a partition's records (tombstones remove the
    id), and how many records could not be decoded."""
    out: dict[str, TransactionMetadata] = {}
    skipped = 0
    for key, value in records:
        try:
            rec = decode_transaction_log_record(key, value)
            if rec.value is None:
                out.pop(rec.transactional_id, None)
            else:
                out[rec.transactional_id] = TransactionMetadata.from_log(
                    rec.transactional_id, rec.value
                )
        except (DecodeError, ValueError, KeyError):
            skipped += 1
    return out, skipped
