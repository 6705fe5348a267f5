"""Helpers for the replication tests: partitions over real logs in a temp dir."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from kt.broker.partition import Partition, PartitionState
from kt.storage.checkpoint import TopicPartition
from kt.storage.log import PartitionLog
from kt.storage.log_config import LogConfig
from kt.storage.record_batch import RecordSpec, build_batch

TP = TopicPartition("t", 0)


def new_partition(
    root: Path,
    broker_id: int,
    *,
    min_isr: int = 1,
    segment_bytes: int = 1024 * 1024,
    tp: TopicPartition = TP,
) -> Partition:
    """A partition on broker `broker_id` awaiting its first LeaderAndIsr (epoch -1)."""
    cfg = LogConfig(min_insync_replicas=min_isr, segment_bytes=segment_bytes)
    log = PartitionLog.open(root / f"broker{broker_id}" / f"{tp.topic}-{tp.partition}", cfg)
    topic_id = hashlib.md5(tp.topic.encode()).digest()
    part = Partition(tp, topic_id, log, -1, -1, [], [], local_broker_id=broker_id)
    part.load_producer_state()
    return part


def state(
    leader: int, epoch: int, isr: list[int], replicas: list[int] | None = None, pe: int = 0
) -> PartitionState:
    """A LeaderAndIsr partition state."""
    return PartitionState(leader, epoch, isr, pe, replicas if replicas is not None else isr)


def batch(n: int = 1, *, pid: int = -1, epoch: int = -1, seq: int = -1, tag: bytes = b"") -> bytes:
    """A producer batch of `n` records (idempotent when `pid` >= 0)."""
    now = int(time.time() * 1000)
    recs = [RecordSpec(b"k%d" % i, tag + b"v%d" % i, timestamp=now) for i in range(n)]
    return build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def log_bytes(part: Partition) -> bytes:
    """Every batch of the partition's log, concatenated as stored."""
    return b"".join(bytes(b.data) for b in part.log.iter_batches())
